"""The ``lakesweep`` command: a thin Typer shell over the library.

Exit codes: 0 ok; 1 refused with a reason the user can act on (bad input, unreadable metadata, a
stale or tampered plan); 2 internal error (a bug, or a guard that must never fire).
"""

from __future__ import annotations

import enum
import functools
import time
from pathlib import Path
from typing import List, Optional

import typer

from cli import render
from engine.errors import LakesweepError, PlannerInvariantViolated

app = typer.Typer(
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
    """Map lakesweep errors to exit codes; never swallow typer.Exit."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except PlannerInvariantViolated as e:
            render.err.print(f"[red]internal error:[/red] {e}")
            raise typer.Exit(2) from e
        except LakesweepError as e:
            render.err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(1) from e
        except KeyboardInterrupt:
            render.err.print("interrupted")
            raise typer.Exit(130)

    return wrapper


@app.command()
@handle_errors
def inspect(
    table: str = typer.Argument(..., help="Table location: a local path or s3://bucket/path."),
    branch: str = typer.Option("main", help="Branch to inspect."),
    output: Output = OutputOpt,
):
    """Show what lakesweep sees in a Paimon table: schema, snapshots, hints, tags, consumers, branches,
    live files and the files only older snapshots hold (what expiry could reclaim)."""
    from engine.inspect import inspect_table
    from engine.table import open_table

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

    Nothing is deleted. Review the plan with 'lakesweep show PLAN'."""
    from engine.plan_io import write_plan
    from engine.table import open_table
    from planner.expire import plan_expire
    from planner.options import parse_time_ms, resolve_expire_options

    t = open_table(table, branch=branch)
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
    now_ms = parse_time_ms(now) if now is not None else int(time.time() * 1000)
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


def main():  # console script entry point
    app()


from cli import apply_cmds  # noqa: E402,F401  (registers apply, resume and journal on the app)
from cli import doctor  # noqa: E402,F401  (registers doctor on the app)
