"""``lakesweep apply`` and ``lakesweep resume``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from cli import render
from cli.app import (ConfOpt, JournalOpt, MasterOpt, Output, OutputOpt, app, existing_journal, handle_errors,
                     journal_path, key_values, refuse_inside_recorded_tables, refuse_inside_table)
from cli.progress import RichProgress


def _conf(values: List[str]) -> dict:
    return key_values(values, "--conf")


def render_report(report) -> None:
    if report.state == "REFUSED":
        render.err.print(f"[red]Refused[/red]: plan {report.plan_id}: {report.reason}")
        return
    c = report.counts
    title = {"COMPLETED": "[green]Apply completed[/green]", "FAILED": "[red]Apply failed[/red]",
             "DRY_RUN": "[cyan]Dry run[/cyan] (nothing was deleted)"}[report.state]
    render.out.print(f"{title}: plan {report.plan_id}" + (f", apply {report.apply_id}" if report.apply_id else "")
                     + (" (resumed)" if report.resumed else ""))
    t = Table()
    for col in ("phase", "actions", "deleted" if not report.dry_run else "would delete", "already absent",
                "written", "kept (not empty)", "failed", "bytes"):
        t.add_column(col, justify="right" if col != "phase" else "left", no_wrap=col == "phase")
    for p in report.phases:
        t.add_row(p["phase"], str(p["actions"]), str(p["DELETED"]), str(p["ALREADY_ABSENT"]), str(p["WRITTEN"]),
                  str(p["KEPT_NOT_EMPTY"]), str(p["FAILED"]), render.human_bytes(p["bytes"]))
    render.out.print(t)
    verb = "would reclaim" if report.dry_run else "reclaimed"
    render.out.print(
        f"  deleted {c['DELETED']}, already absent {c['ALREADY_ABSENT']}, failed {c['FAILED']}; "
        f"{verb} {render.human_bytes(report.bytes_reclaimed)} in {report.duration_ms / 1000:.1f} s"
    )
    if report.state == "FAILED":
        render.err.print(f"[red]error:[/red] {report.reason}")
        render.err.print(f"Fix the cause, then run: lakesweep resume {report.plan_id}")


@app.command()
@handle_errors
def apply(
    plan: Path = typer.Argument(..., help="A plan written by 'lakesweep plan'."),
    journal: Optional[Path] = JournalOpt,
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate the plan against the live table and show "
                                 "what would be done; delete nothing, journal nothing."),
    output: Output = OutputOpt,
):
    """Execute a reviewed plan on Spark, phase by phase, journaling every deletion.

    The plan is refused (exit 1) if it was modified, is for another table, points outside the table, or
    is stale (a tag, consumer, snapshot of its range, schema or branch changed). Applying twice changes
    nothing the second time. After a crash or a failed phase, 'lakesweep resume' finishes the job.

    When stderr is a terminal (and the output is text), each phase shows a bar: files, bytes, files/s
    and bytes/s."""
    from applier.apply import apply_plan, dry_run_plan
    from engine.errors import JournalError
    from engine.plan_io import read_plan
    from journal.duckdb_store import DuckDBRecorder

    spark_conf = _conf(conf)
    p = read_plan(str(plan))
    if dry_run:
        report = dry_run_plan(p, master=master, conf=spark_conf)
    else:
        path = journal_path(journal)
        refuse_inside_table(path, p.table_location, "--journal", JournalError)
        with DuckDBRecorder(path) as recorder, RichProgress(output == Output.text) as progress:
            report = apply_plan(p, recorder, master=master, conf=spark_conf, progress=progress)
    if output == Output.json:
        render.emit_json(report.to_json())
    else:
        render_report(report)
    if report.state == "FAILED":
        raise typer.Exit(1)


@app.command()
@handle_errors
def resume(
    plan_id: Optional[str] = typer.Argument(None, help="Only this plan's unfinished apply (default: all)."),
    journal: Optional[Path] = JournalOpt,
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    output: Output = OutputOpt,
):
    """Finish unfinished applies recorded in the journal (after a crash, kill or failed phase).

    The plan is rebuilt from the journal; the plan file is not needed. Files deleted before the crash
    but not yet journaled are recorded as already absent. Progress is shown as for 'lakesweep apply'."""
    from applier.apply import resume as resume_applies
    from journal.duckdb_store import DuckDBRecorder

    path = existing_journal(journal)
    refuse_inside_recorded_tables(path, "--journal", path)
    spark_conf = _conf(conf)
    with DuckDBRecorder(path) as recorder, RichProgress(output == Output.text) as progress:
        reports = resume_applies(recorder, plan_id, master=master, conf=spark_conf, progress=progress)
    if output == Output.json:
        render.emit_json([r.to_json() for r in reports])
    elif not reports:
        render.out.print("Nothing to resume: every apply in the journal has finished.")
    else:
        for r in reports:
            render_report(r)
    if any(r.state in ("FAILED", "REFUSED") for r in reports):
        raise typer.Exit(1)
