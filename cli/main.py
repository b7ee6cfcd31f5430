"""The ``lakesweep`` command: a thin Typer shell over the library.

Exit codes: 0 ok; 1 refused with a reason the user can act on (bad input, usage errors included,
unreadable metadata, a stale or tampered plan); 2 internal error (a bug, or a guard that must never
fire). Every error is one line on stderr; ``LAKESWEEP_DEBUG=1`` shows the traceback of an internal error.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import gc
import os
import sys
import time
import traceback
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from typer.core import TyperGroup

from cli import render
from engine.errors import LakesweepError, PlannerInvariantViolated

try:  # typer >= 0.22 vendors Click as typer._click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer runs on Click itself
    from click import exceptions as click_exceptions

DEBUG_ENV = "LAKESWEEP_DEBUG"
BUG_HINT = f"this is a bug in lakesweep; run again with {DEBUG_ENV}=1 to see the traceback and report it"


def one_line(text) -> str:
    """``text`` on one line (DuckDB and Arrow messages span several)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


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


class LakesweepGroup(TyperGroup):
    """The root command: runs Click in non-standalone mode and maps what it raises to lakesweep's exit
    codes, so that a usage error (Click's 2) is an input error (1) told in one line, and ``--help``
    still exits 0."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
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
        "Plan, review, apply and audit Apache Paimon table maintenance.\n\n"
        "Typical flow: 'lakesweep inspect TABLE', 'lakesweep plan expire TABLE --out p.parquet', "
        "'lakesweep show p.parquet'."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
plan_app = typer.Typer(help="Make a cleanup plan (nothing is deleted; review it with 'lakesweep show').",
                       no_args_is_help=True)
app.add_typer(plan_app, name="plan")


class Output(str, enum.Enum):
    text = "text"
    json = "json"


OutputOpt = typer.Option(Output.text, "--output", "-o", help="text for people, json for scripts.")


def handle_errors(fn):
    """Map errors to exit codes, each told in one line on stderr: lakesweep's own errors 1, a planner
    invariant 2, anything unexpected 2 (a bug; ``LAKESWEEP_DEBUG=1`` also prints its traceback).
    typer.Exit, Abort and Click's usage errors pass through to ``LakesweepGroup``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click_exceptions.ClickException):
            raise
        except PlannerInvariantViolated as e:
            print_error(e, internal=True)
            raise typer.Exit(2) from e
        except LakesweepError as e:
            print_error(e)
            raise typer.Exit(1) from e
        except KeyboardInterrupt:
            render.err.print("interrupted")
            raise typer.Exit(130)
        except Exception as e:
            report_bug(e)
            raise typer.Exit(2) from e

    return wrapper


def check_output_file(path, what: str, error: type[LakesweepError]) -> None:
    """Refuse an output path that names something other than a (new or regular) file: a directory, a
    FIFO, a device, or nothing at all."""
    from engine.fileio import normalize_location

    if not str(path).strip():
        raise error(f"{what} is empty; give the path of a file to write")
    target = normalize_location(str(path))
    if "://" not in target and os.path.lexists(target) and not os.path.isfile(target):
        raise error(f"{what} {path} exists and is not a regular file; give the path of a file to write")


def refuse_inside_table(path, table_location: str, what: str, error: type[LakesweepError]) -> None:
    """Refuse to write ``path`` inside the table directory (``--out``, ``--journal``): lakesweep's own
    files must never look like, or replace, a table's files. Local paths are compared resolved (symlinks
    followed); object-store locations by prefix."""
    from engine.fileio import normalize_location

    table = normalize_location(table_location)
    target = normalize_location(str(path))
    if table.startswith("s3://") != target.startswith("s3://"):
        return
    if not table.startswith("s3://"):
        table, target = os.path.realpath(table), os.path.realpath(target)
    if target == table or target.startswith(table.rstrip("/") + "/"):
        raise error(f"{what} {path} is inside the table {table_location}; write it outside the table directory")


@app.command()
@handle_errors
def inspect(
    table: str = typer.Argument(..., help="Table location: a local path or s3://bucket/path."),
    branch: str = typer.Option("main", help="Branch to inspect."),
    output: Output = OutputOpt,
):
    """Show what lakesweep sees in a Paimon table: schema, snapshots, hints, tags, consumers, branches,
    live files and the files only older snapshots hold (what expiry could reclaim)."""
    from engine.paimon.inspect import inspect_table
    from engine.paimon.table import open_table

    info = inspect_table(open_table(table, branch=branch))
    if output == Output.json:
        render.emit_json(info)
    else:
        render.render_inspect(info)


def key_values(values: List[str], param_hint: str) -> dict:
    """``["k=v", ...]`` from a repeatable option into a dict; anything else is a usage error."""
    out = {}
    for v in values or []:
        if "=" not in v:
            raise typer.BadParameter(f"'{v}' is not key=value", param_hint=param_hint)
        k, _, val = v.partition("=")
        out[k.strip()] = val.strip()
    return out


@plan_app.command("expire")
@handle_errors
def plan_expire_cmd(
    table: str = typer.Argument(..., help="Table location: a local path or s3://bucket/path."),
    out: Path = typer.Option(..., "--out", help="Where to write the plan (a Parquet file)."),
    retain_min: Optional[int] = typer.Option(None, help="Keep at least this many newest snapshots "
                                             "(table: snapshot.num-retained.min, default 10)."),
    retain_max: Optional[int] = typer.Option(None, help="Keep at most this many snapshots "
                                             "(snapshot.num-retained.max, default unlimited)."),
    time_retained: Optional[str] = typer.Option(None, help="Keep snapshots younger than this, e.g. '1 h', "
                                                "'30 min', '7 d', '0 s' (snapshot.time-retained, default 1 h)."),
    max_deletes: Optional[int] = typer.Option(None, help="Expire at most this many snapshot ids in one plan "
                                              "(snapshot.expire.limit, default 50)."),
    now: Optional[str] = typer.Option(None, help="Plan as of this time: epoch ms or ISO-8601 "
                                      "(default: the current time)."),
    option: List[str] = typer.Option([], "--option", help="Override a table option, key=value (repeatable)."),
    time_rule: str = typer.Option("successor", help="'successor' (Paimon 2.0+: a snapshot expires when its "
                                  "successor is older than time-retained) or 'own' (Paimon < 2.0: when it is "
                                  "itself older)."),
    skip_unreadable: bool = typer.Option(False, "--skip-unreadable", help="Do as Paimon does with unreadable "
                                         "metadata: keep what depends on it and plan the rest (warnings list "
                                         "it). Without it, planning stops and names the file."),
    branch: str = typer.Option("main", help="Branch to expire."),
    output: Output = OutputOpt,
):
    """Plan a snapshot expiration exactly as Apache Paimon would run it, and save the plan.

    Nothing is deleted. Review the plan with 'lakesweep show PLAN'.

    When stderr is a terminal (and the output is text), a bar shows the manifest files read out of
    those found so far (the total grows as planning finds the snapshots in range), with every metadata
    file read, their bytes, files/s and bytes/s."""
    from cli.progress import MetadataReadProgress, progress_enabled
    from engine.errors import PlanRejected
    from engine.plan_io import write_plan
    from engine.paimon.table import open_table
    from planner.expire import plan_expire
    from engine.timeutil import parse_time_ms
    from planner.options import resolve_expire_options

    # Every input is checked before anything is written.
    now_ms = parse_time_ms(now) if now is not None else int(time.time() * 1000)
    check_output_file(out, "--out", PlanRejected)
    refuse_inside_table(out, table, "--out", PlanRejected)
    reads = MetadataReadProgress() if progress_enabled(output == Output.text) else None
    t = open_table(table, branch=branch, on_read=reads)
    opts = resolve_expire_options(
        t.options,
        retain_min=retain_min,
        retain_max=retain_max,
        time_retained=time_retained,
        max_deletes=max_deletes,
        overrides=key_values(option, "--option"),
        time_rule=time_rule,
        skip_unreadable=skip_unreadable,
    )
    with reads if reads is not None else contextlib.nullcontext():
        plan = plan_expire(t, now_ms=now_ms, options=opts)
    write_plan(plan, str(out))
    if output == Output.json:
        render.emit_json(render.plan_document(plan) | {"out": str(out)})
    else:
        render.render_plan(plan, location=str(out))


@app.command()
@handle_errors
def show(
    plan: Path = typer.Argument(..., help="A plan written by 'lakesweep plan'."),
    files: bool = typer.Option(False, "--files", help="List every action."),
    output: Output = OutputOpt,
):
    """Show a saved plan: the range, counts and bytes per kind and partition, what tags and consumers
    protected, and whether there is anything to do."""
    from engine.plan_io import read_plan

    p = read_plan(str(plan))
    if output == Output.json:
        render.emit_json(render.plan_document(p, files=files))
    else:
        render.render_plan(p, files=files)


@app.command()
@handle_errors
def demo(
    directory: Path = typer.Option(Path("lakesweep-demo"), "--dir", help="Work directory for the demo table, "
                                   "plan and journal: a new or empty directory, or one a previous demo made (the "
                                   "demo then replaces only its own files there)."),
    output: Output = OutputOpt,
):
    """The whole story on a demo table: write it with pypaimon, inspect, plan expire, show, apply on
    local Spark with a DuckDB journal, and audit what was deleted."""
    from cli.demo import run_demo

    run_demo(directory, json_output=output == Output.json)


# A command builds millions of small objects that live until it ends and form no cycles (manifest entries,
# actions, journal rows). With CPython's default thresholds the collector walks them all again and again: a
# quarter of planning a 300,000-file table. Cycles are still collected, after 100,000 allocations instead of 700.
GC_THRESHOLDS = (100_000, 50, 100)


def main():  # console script entry point
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        app()
        code = 0
    except SystemExit as e:
        if isinstance(e.code, str):
            sys.stderr.write(e.code + "\n")
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a closed pipe (lakesweep ... | head): nothing left to tell
            pass
    # Every file, journal and Spark session is closed by now. pyarrow 19 can still abort the interpreter while
    # its thread pools are torn down at exit ("terminate called without an active exception", exit -6), which
    # would turn a finished command's exit code into a crash: leave without running C++ static destructors.
    os._exit(code)


from cli import apply_cmds  # noqa: E402,F401  (registers apply, resume and journal on the app)
from cli import doctor  # noqa: E402,F401  (registers doctor on the app)
