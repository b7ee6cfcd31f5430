"""The ``lakesweep`` Typer app and what every command shares: error mapping, shared options and checks.

Exit codes: 0 ok; 1 refused with a reason the user can act on (bad input, usage errors included,
unreadable metadata, a stale or tampered plan); 2 internal error (a bug, or a guard that must never
fire). Every error is one line on stderr; ``LAKESWEEP_DEBUG=1`` shows the traceback of an internal error.

Command modules (``plan_cmds``, ``apply_cmds``, ``journal_cmds``, ``doctor``, ``demo``) register on ``app``
from here; ``cli.main`` imports them all and is only the console script's entry point.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from typing import List

import typer
from rich.markup import escape
from typer.core import TyperGroup

from lakesweep.cli import render
from lakesweep.cli.output import OutputFormat
from lakesweep.engine.errors import LakesweepError, PlannerInvariantViolated

try:  # typer >= 0.22 vendors Click as typer._click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer runs on Click itself
    from click import exceptions as click_exceptions

DEBUG_ENV = "LAKESWEEP_DEBUG"
BUG_HINT = f"this is a bug in lakesweep; run again with {DEBUG_ENV}=1 to see the traceback and report it"


one_line = render.one_line


def print_error(message, *, internal: bool = False) -> None:
    label = "[red]internal error:[/red]" if internal else "[red]error:[/red]"
    render.err.print(f"{label} {escape(one_line(message))}")


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def report_bug(e: BaseException) -> None:
    """An unexpected exception: one line and the hint (and, with LAKESWEEP_DEBUG=1, the traceback first)."""
    if _debug():
        traceback.print_exception(e, file=sys.stderr)
    print_error(f"{type(e).__name__}: {e}; {BUG_HINT}", internal=True)


# What each option's value is, in help and usage lines (an option not named here: the last word of its
# name; a number: N; a flag: nothing).
METAVARS = {
    "--out": "FILE", "--journal": "FILE", "--inventory": "FILE", "--log-file": "FILE", "--html": "FILE",
    "--now": "TIME", "--since": "TIME", "--older-than": "TIME", "--time-retained": "DURATION",
    "--expiration-time": "DURATION", "--every": "DURATION", "--master": "URL", "--conf": "KEY=VALUE",
    "--option": "KEY=VALUE", "--catalog": "NAME", "--branch": "NAME", "--tag": "NAME", "--time-zone": "ZONE",
    "--time-rule": "successor|own", "--strategy": "values-time|update-time", "--output": "text|json",
    "--timestamp-formatter": "PATTERN", "--timestamp-pattern": "PATTERN", "--plans-dir": "DIR", "--dir": "DIR",
    "--warehouse": "DIR", "--operations": "OPS", "--namespace-filter": "GLOBS", "--table-filter": "GLOBS",
    "--path": "GLOB", "--plan": "PLAN_ID", "--run": "RUN_ID", "--table": "TABLE", "--kind": "KIND",
    "--outcome": "OUTCOME", "--check": "CHECK",
}


def name_metavars(command) -> None:
    """Give every parameter of ``command`` and its subcommands a metavar people read (``FILE``, ``TIME``,
    ``N``; an argument by its name in capitals) instead of its Python type, and flags none."""
    for param in getattr(command, "params", ()):
        if param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            param.metavar = param.name.upper()
            # Typer would add the Python type (``TABLE <str>``) to the argument's help line: the name says it.
            param.display_type_rich = lambda ctx: None
        elif getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""
        else:
            long = max(param.opts, key=len)
            descriptor = getattr(param, "type_descriptor", None)
            numeric = getattr(descriptor, "annotation", None) in (int, float)
            param.metavar = METAVARS.get(long) or ("N" if numeric else long.lstrip("-").split("-")[-1].upper())
    for sub in getattr(command, "commands", {}).values():
        name_metavars(sub)


class LakesweepGroup(TyperGroup):
    """The root command: runs Click in non-standalone mode and maps what it raises to lakesweep's exit
    codes, so that a usage error (Click's 2) is an input error (1) told in one line, and ``--help``
    still exits 0."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        name_metavars(self)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_exceptions.NoArgsIsHelpError as e:  # 'lakesweep' or 'lakesweep plan' alone: the help
            render.out.print(e.format_message(), markup=False, highlight=False)
            sys.exit(0)
        except click_exceptions.UsageError as e:
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            print_error(e.format_message() + hint)
            sys.exit(1)
        except click_exceptions.ClickException as e:
            print_error(e.format_message())
            sys.exit(1)
        except typer.Abort:
            print_error("aborted")
            sys.exit(1)
        except Exception as e:  # raised outside a command (a parameter callback, Typer itself): a bug
            report_bug(e)
            sys.exit(2)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=LakesweepGroup,
    name="lakesweep",
    help=(
        "Plan, review, apply and audit the maintenance of Apache Paimon and Apache Iceberg tables: snapshot "
        "expiry, orphan files, partitions, tags, consumers and changelogs (Paimon), manifests and compaction "
        "(Iceberg). Plans are files you review; apply runs them on Spark and journals every file.\n\n"
        "\b\n"
        "Paimon (TABLE is the table's directory, s3:// or hdfs:// location):\n"
        "  lakesweep inspect TABLE\n"
        "  lakesweep plan expire TABLE --out p.parquet\n"
        "  lakesweep show p.parquet\n"
        "  lakesweep apply p.parquet --dry-run\n"
        "  lakesweep apply p.parquet\n"
        "  lakesweep journal plans\n\n"
        "\b\n"
        "Iceberg (ns.table in a catalog pyiceberg knows, named with --catalog):\n"
        "  lakesweep inspect ns.table --catalog C\n"
        "  lakesweep plan expire ns.table --catalog C --out p.parquet\n"
        "  lakesweep show p.parquet\n"
        "  lakesweep apply p.parquet\n\n"
        "'lakesweep demo' runs both on small tables it writes; 'lakesweep maintain' plans and applies "
        "everything a catalog or warehouse needs."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, reflowed by Click: Rich markup would read 'H:m:s' as an emoji code and keep every hard
    # line break of a docstring.
    rich_markup_mode=None,
)


def handle_errors(fn):
    """Map errors to exit codes, each told in one line on stderr: lakesweep's own errors 1, a planner
    invariant 2, anything unexpected 2 (a bug; ``LAKESWEEP_DEBUG=1`` also prints its traceback).
    typer.Exit, Abort and Click's usage errors pass through to ``LakesweepGroup``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        json_out = OutputFormat(kwargs.get("fmt", OutputFormat.text)) == OutputFormat.json
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click_exceptions.ClickException):
            raise
        except PlannerInvariantViolated as e:
            print_error(e, internal=True)
            _json_error(json_out, e, 2)
            raise typer.Exit(2) from e
        except LakesweepError as e:
            print_error(e)
            _json_error(json_out, e, 1)
            raise typer.Exit(1) from e
        except KeyboardInterrupt:
            render.err.print("interrupted")
            raise typer.Exit(130)
        except Exception as e:
            report_bug(e)
            _json_error(json_out, e, 2, message=f"{type(e).__name__}: {one_line(e)}; {BUG_HINT}")
            raise typer.Exit(2) from e

    return wrapper


def _json_error(json_out: bool, e: BaseException, code: int, *, message: str | None = None) -> None:
    """With ``--output json``, the error as the one JSON document on stdout (as pyiceberg's CLI does):
    ``{"error": {"type", "message", "exit_code"}}``. The one-line message is on stderr either way."""
    if json_out:
        render.emit_json({"error": {"type": type(e).__name__, "message": message or one_line(e), "exit_code": code}})


# Shared options.

OutputOpt = typer.Option(OutputFormat.text, "--output", "-o", help="text for people, json for scripts.")
JournalOpt = typer.Option(None, "--journal", "-j", help="The DuckDB journal file (env LAKESWEEP_JOURNAL; default "
                          "~/.local/share/lakesweep/journal.duckdb).")
MasterOpt = typer.Option("local[*]", "--master", help="Spark master, e.g. local[*] or spark://host:7077.")
ConfOpt = typer.Option([], "--conf", help="Spark configuration key=value (repeatable).")
SparkUiOpt = typer.Option(False, "--spark-ui", help="Run the Spark UI while Spark runs and print its URL (off by "
                          "default; see docs/cluster.md).")


def spark_ui(enabled: bool, conf: dict) -> tuple[dict, object]:
    """``conf`` with the Spark UI on when ``enabled``, and what to do with its URL once the session is up
    (print it to stderr); ``(conf, None)`` otherwise."""
    if not enabled:
        return conf, None
    from lakesweep.applier.spark_exec import SPARK_UI

    def announce(url: str) -> None:
        typer.echo(f"Spark UI: {url}", err=True)

    return {**conf, **SPARK_UI}, announce


def key_values(values: List[str], param_hint: str) -> dict:
    """``["k=v", ...]`` from a repeatable option into a dict; anything else is a usage error."""
    out = {}
    for v in values or []:
        if "=" not in v:
            raise typer.BadParameter(f"'{v}' is not key=value", param_hint=param_hint)
        k, _, val = v.partition("=")
        out[k.strip()] = val.strip()
    return out


# Shared checks of the paths a command writes.

def check_output_file(path, what: str, error: type[LakesweepError]) -> None:
    """Refuse an output path that names something other than a (new or regular) file: a directory, a
    FIFO, a device, or nothing at all."""
    from lakesweep.engine.fileio import normalize_location

    if not str(path).strip():
        raise error(f"{what} is empty; give the path of a file to write")
    target = normalize_location(str(path))
    if "://" not in target and os.path.lexists(target) and not os.path.isfile(target):
        raise error(f"{what} {path} exists and is not a regular file; give the path of a file to write")


def refuse_inside_table(path, table_location: str, what: str, error: type[LakesweepError]) -> None:
    """Refuse to write ``path`` inside the table directory (``--out``, ``--journal``): lakesweep's own
    files must never look like, or replace, a table's files. Local paths are compared resolved (symlinks
    followed); object-store and HDFS locations by prefix."""
    from lakesweep.engine.fileio import normalize_location

    table = normalize_location(table_location)
    target = normalize_location(str(path))
    if ("://" in table) != ("://" in target):
        return
    if "://" not in table:
        table, target = os.path.realpath(table), os.path.realpath(target)
    if target == table or target.startswith(table.rstrip("/") + "/"):
        raise error(f"{what} {path} is inside the table {table_location}; write it outside the table directory")


def journal_path(journal) -> str:
    """The journal a command uses: ``--journal``, else ``LAKESWEEP_JOURNAL``, else the default."""
    from lakesweep.journal.duckdb_store import default_journal_path

    return str(journal) if journal is not None else str(default_journal_path())


def existing_journal(journal) -> str:
    """The journal path of a command that reads a journal: it must exist (a typo must not create one)."""
    from lakesweep.engine.errors import JournalError

    path = journal_path(journal)
    if not os.path.exists(path):
        raise JournalError(f"journal {path} does not exist (nothing has been applied with it yet)")
    return path


def refuse_inside_recorded_tables(path: str, what: str, journal: str) -> None:
    """``refuse_inside_table`` for every table ``journal`` has recorded."""
    from lakesweep.engine.errors import JournalError
    from lakesweep.journal.audit import recorded_tables

    for table in recorded_tables(journal):
        refuse_inside_table(path, table, what, JournalError)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"lakesweep {version('lakesweep')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("lakesweep (not installed: run  pip install -e .  in the source tree)")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print lakesweep's version and exit."),
) -> None:
    """The options of lakesweep itself, before any command."""
