"""The commands of the README and of docs/usage/*.md, run for real in order (placeholders replaced), and every
relative link of the docs, followed: so the docs cannot rot."""

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from tests.support import pypaimon_tables as pt

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
USAGE = ROOT / "docs" / "usage"
# The usage pages' examples run in this order: the plans first, then what reads or applies them.
# restore first: its example quarantines an expiry of the fresh demo table, which later examples have expired
PAGE_ORDER = ["restore", "plan-purge", "plan-expire", "plan-orphans", "plan-partitions", "plan-consumers", "plan-tags",
              "plan-changelog", "plan-rewrite-manifests", "plan-compact", "inspect", "show", "verify", "apply",
              "resume", "journal-plans", "journal-files", "journal-query", "journal-export", "journal-maintenance",
              "journal-report", "doctor", "maintain"]
NOT_RUN = {"demo"}  # the whole demo takes 16 s; tests/cli/test_demo_dir.py runs it


def sh_commands(block: str) -> list[list[str]]:
    """The ``lakesweep`` commands of a shell block, comments and optional ``[parts]`` dropped; a command goes on
    over a line ending in a backslash, and over a line break inside quotes, as in a shell."""
    commands, pending = [], ""
    for line in block.splitlines():
        line = re.sub(r"\[[^\]]*\]", "", line.split(" #", 1)[0]).strip()
        pending = f"{pending} {line}".strip() if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        try:
            words = shlex.split(pending)
        except ValueError:  # an open quote: the command goes on
            continue
        if words[:1] == ["lakesweep"]:
            commands.append(words[1:])
        pending = ""
    assert not pending, f"unfinished command: {pending}"
    return commands


def page_examples(page: Path) -> list[list[str]]:
    """The commands of the ``sh`` blocks of a usage page's Examples section (``text`` blocks are not run)."""
    section = page.read_text().split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    return [c for block in re.findall(r"```sh\n(.*?)```", section, re.S) for c in sh_commands(block)]


def readme_commands() -> list[list[str]]:
    text = README.read_text()
    return sh_commands(text.split("## Using it", 1)[1].split("```sh", 1)[1].split("```", 1)[0])


def recipe_commands() -> list[list[str]]:
    section = README.read_text().split("## Recipes", 1)[1].split("\n## ", 1)[0]
    return [c for block in re.findall(r"```sh\n(.*?)```", section, re.S) for c in sh_commands(block)]


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """The demo Paimon table and the Iceberg table ``ns.t`` of catalog ``local`` the docs' examples name,
    and what each placeholder of the examples stands for."""
    from tests.support import iceberg_tables as it

    w = pt.write_demo_table(str(tmp_path / "wh"))
    for key, value in it.catalog_env(tmp_path / "ice", "local").items():  # the docs' Iceberg catalog "local": ns.t
        monkeypatch.setenv(key, value)
    catalog = it.sql_catalog(tmp_path / "ice", "local")
    catalog.create_namespace("ns")
    it.many_appends(catalog, "ns.t", n=6)
    files = ["plan.parquet", "j.duckdb", "audit.parquet", "orphans.parquet", "drop.parquet", "consumers.parquet",
             "tags.parquet", "changelog.parquet", "p.parquet", "purge.parquet", "report.html", "plan.html",
             "maintain.jsonl", "lakesweep-demo"]
    subst = {name: str(tmp_path / name) for name in files}
    subst |= {"TABLE": w.path, "WAREHOUSE": str(tmp_path / "wh"), "release-1": pt.DEMO_TAG,
              "PLAN_ID": lambda: _last_quarantined_plan(subst["j.duckdb"])}
    return subst


def _last_quarantined_plan(journal: str) -> str:
    """The plan whose files the latest quarantine in ``journal`` put aside: what ``PLAN_ID`` stands for."""
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    with DuckDBRecorder(journal) as rec:
        rows = [r for r in rec.file_records() if r.outcome.value == "QUARANTINED"]
    assert rows, f"no file of {journal} is in quarantine"
    return rows[-1].plan_id


def run_all(commands: list[list[str]], subst: dict[str, str]) -> None:
    runner = CliRunner()
    for args in commands:
        args = [v() if callable(v) else v for v in (subst.get(a, a) for a in args)]
        if args[:2] == ["plan", "expire"] and "--catalog" not in args:
            i = args.index("--time-retained")
            args[i + 1] = "0 s"  # the demo table is seconds old
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)


def test_readme_quick_start_is_the_two_commands():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [c.split("#", 1)[0].strip() for c in quick.strip().splitlines()]
    assert commands == ["./quickstart demo", "./quickstart test"]
    # CI runs the README's test command, with the fresh-machine stand-ins first on PATH
    assert 'PATH="$stand_ins:$PATH" ./quickstart test' in (README.parent / ".ci" / "run").read_text()


@pytest.mark.spark
def test_every_readme_command_runs(tables):
    subst = tables
    commands = readme_commands()
    assert [c[0] for c in commands][:4] == ["inspect", "plan", "show", "apply"]
    run_all(commands, subst)
    assert Path(subst["audit.parquet"]).exists() and Path(subst["orphans.parquet"]).exists()
    assert Path(subst["drop.parquet"]).exists() and Path(subst["p.parquet"]).exists()
    assert "<h1>lakesweep journal report</h1>" in Path(subst["report.html"]).read_text()
    assert sum("--catalog" in c for c in commands) == 6
    assert re.search(r"\| `--retain-min N` \| `snapshot.num-retained.min` \| 10", (USAGE / "plan-expire.md").read_text())


@pytest.mark.spark
def test_readme_recipes_run(tables):
    commands = recipe_commands()
    assert [c[:2] for c in commands] == [["plan", "expire"], ["show", "plan.parquet"], ["apply", "plan.parquet"],
                                         ["apply", "plan.parquet"], ["verify", "TABLE"], ["maintain", "--catalog"],
                                         ["maintain", "--catalog"], ["journal", "maintenance"], ["plan", "expire"],
                                         ["apply", "plan.parquet"], ["journal", "plans"], ["restore", "PLAN_ID"],
                                         ["plan", "purge"], ["apply", "purge.parquet"], ["journal", "files"],
                                         ["journal", "query"]]
    run_all(commands, tables)
    assert "<html" in Path(tables["plan.html"]).read_text()
    assert Path(tables["maintain.jsonl"]).read_text().count('"event": "run_finished"') == 1


@pytest.mark.spark
def test_every_usage_page_example_runs(tables):
    pages = sorted(p.stem for p in USAGE.glob("*.md") if p.name != "README.md")
    assert sorted(PAGE_ORDER + [*NOT_RUN]) == pages  # a new page needs its place in the order
    for name in PAGE_ORDER:
        commands = page_examples(USAGE / f"{name}.md")
        assert commands, f"{name}.md has no example to run"
        run_all(commands, tables)
    assert Path(tables["report.html"]).exists() and Path(tables["audit.parquet"]).exists()


def test_usage_pages_list_every_option_as_help_does():
    from tests.support import usage_pages

    names = usage_pages.commands()
    assert sorted(names) == sorted(p.stem for p in USAGE.glob("*.md") if p.name != "README.md")
    for name in names:
        table = usage_pages.page_table((USAGE / f"{name}.md").read_text())
        assert table == usage_pages.params_table(usage_pages.words(name)), \
            f"{name}.md is stale: run .venv/bin/python -m tests.support.usage_pages"


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def anchors(md: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_every_relative_link_in_the_docs_points_to_a_file():
    broken = []
    for md in markdown_files():
        text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (md.parent / file).resolve() if file else md
            if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
                broken.append(f"{md.relative_to(ROOT)}: {target}")
    assert broken == []
    assert len(markdown_files()) > 30


def test_every_source_path_the_docs_name_exists():
    named = {path for md in markdown_files()
             for path in re.findall(r"`((?:tests|bench|engine|planner|applier|journal|cli)/[\w./-]+)`", md.read_text())}
    assert len(named) > 20
    assert sorted(p for p in named if not (ROOT / p).exists()) == []
