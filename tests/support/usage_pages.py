"""The arguments and options tables of docs/usage/*.md, rendered from each command's own ``--help``.

Each page holds its table between ``<!-- params:begin -->`` and ``<!-- params:end -->``; the docs test fails
when a table differs from what ``--help`` says. ``python -m tests.support.usage_pages`` rewrites the tables
in place after a change to a command's options.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer.main
from typer._click import core as click
from typer.testing import CliRunner

from lakesweep.cli.main import app

DOCS = Path(__file__).resolve().parents[2] / "docs" / "usage"
BEGIN, END = "<!-- params:begin -->", "<!-- params:end -->"


def commands() -> dict[str, click.Command]:
    """Every leaf command by its page name: ``plan expire`` -> ``plan-expire``."""
    root = typer.main.get_command(app)
    found: dict[str, click.Command] = {}

    def walk(group: click.Command, prefix: list[str]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):  # a group may build its commands when asked (``PlanGroup``)
            cmd = group.get_command(ctx, name)
            if hasattr(cmd, "commands"):
                walk(cmd, prefix + [name])
            else:
                found["-".join(prefix + [name])] = cmd

    walk(root, [])
    return found


def words(page: str) -> list[str]:
    """The command words of a page name: ``plan-rewrite-manifests`` -> ``["plan", "rewrite-manifests"]``."""
    return page.split("-", 1) if page.startswith(("plan-", "journal-")) else [page]


_SAID_DEFAULT = re.compile(r"(?:^|[(;,]\s*|\.\s+)[Dd]efault:?\s+(.+?)(?=[;,)]|\.(?:\s|$)|$)")


def _cell(text: str) -> str:
    """One table cell: one line, with what markdown would read as markup (a pipe, ``<NAME>``, ``*``) escaped."""
    text = " ".join(text.split())
    if text.startswith("`"):  # already code: only the pipe needs escaping there
        return text.replace("|", "\\|")
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def help_text(words: list[str]) -> str:
    """``lakesweep WORDS --help`` as a user reads it."""
    result = CliRunner().invoke(app, [*words, "--help"], terminal_width=80)
    if result.exit_code != 0:
        raise RuntimeError(result.output)
    return result.output


def help_entries(text: str) -> list[tuple[str, str]]:
    """(names and metavar, help) of each entry of the Arguments and Options sections of ``--help``."""
    entries: list[list[str]] = []
    section = False
    for line in text.splitlines():
        if line in ("Arguments:", "Options:"):
            section = True
        elif not line.strip() or not line.startswith(" "):
            section = False
        elif section and re.match(r"^  \S", line):
            head, _, rest = line[2:].partition("  ")
            entries.append([head.strip(), rest.strip()])
        elif section and entries:
            joint = "" if re.search(r"[a-z]-$", entries[-1][1]) else " "  # a word --help broke at its hyphen
            entries[-1][1] = (entries[-1][1] + joint + line.strip()).strip()
    return [(head, text) for head, text in entries if not head.startswith("--help")]


def _row(head: str, text: str) -> str:
    required = text.endswith("[required]")
    text = text.removesuffix("[required]").strip()
    default = re.search(r"\s*\[default: (.*)\]$", text)
    text = text[: default.start()] if default else text
    said = _SAID_DEFAULT.search(text)
    tokens = [t for t in head.replace(",", "").split() if t != "/"]
    if head[:1] != "-":
        names, kind = f"`{head}`", "argument" + (", required" if required else ", optional")
    else:
        names_ = [t for t in tokens if t.startswith("-")]
        metavar = " ".join(t for t in tokens if not t.startswith("-"))
        names, kind = ", ".join(f"`{n}`" for n in names_), f"`{metavar}`" if metavar else "flag"
        if required:
            text += " Required."
    if default:
        value = f"`{default.group(1)}`"
    elif said and kind != "flag":
        value = said.group(1).strip()  # the default the help text states in words
    else:
        value = ("on" if "(default)" in text else "off") if kind == "flag" else "-"
    return "| " + " | ".join(_cell(c) for c in (names, kind, value, text)) + " |"


def params_table(words: list[str]) -> str:
    """The markdown table of a command's arguments and options, read from its ``--help``."""
    rows = ["| argument / option | type | default | description |", "|---|---|---|---|"]
    rows += [_row(head, text) for head, text in help_entries(help_text(words))]
    return "\n".join(rows)


def page_table(text: str) -> str:
    """The table between a page's markers."""
    match = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    if match is None:
        raise ValueError("no params table markers")
    return match.group(1)


def rewrite() -> list[str]:
    """Rewrite every page's table from the CLI; returns the pages changed."""
    changed = []
    for name in commands():
        path = DOCS / f"{name}.md"
        text = path.read_text()
        page_table(text)  # a page without markers is an error
        new = re.sub(re.escape(BEGIN) + r"\n.*?\n" + re.escape(END),
                     lambda _: f"{BEGIN}\n{params_table(words(name))}\n{END}", text, count=1, flags=re.S)
        if new != text:
            path.write_text(new)
            changed.append(path.name)
    return changed


if __name__ == "__main__":
    for name in rewrite():
        sys.stdout.write(f"rewrote {name}\n")
