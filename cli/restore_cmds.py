"""``lakesweep restore``: bring back the files a plan's ``apply --quarantine`` put aside."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from lakesweep.cli import render
from lakesweep.cli.app import (ConfOpt, JournalOpt, MasterOpt, OutputOpt, SparkUiOpt, app, existing_journal,
                               handle_errors, key_values, refuse_inside_recorded_tables, spark_ui)
from lakesweep.engine.units import human_bytes
from lakesweep.cli.output import OutputFormat


@app.command(short_help="Move the files a plan quarantined back where they were.")
@handle_errors
def restore(
    plan_id: str = typer.Argument(..., help="The plan whose quarantined files come back: its id, or a prefix of "
                                             "one id (as 'journal plans' shows)."),
    files: Optional[str] = typer.Option(None, "--files", help="Only the files whose path matches this shell glob, "
                                        "e.g. '*dt=2024-01-01*' ('*' also crosses '/')."),
    journal: Optional[Path] = JournalOpt,
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    spark_ui_on: bool = SparkUiOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Move the files that 'apply --quarantine' of PLAN_ID put aside back to where they were, journaling each
    file RESTORED. Runs on Spark like apply; after a crash, 'lakesweep resume PLAN_ID' finishes it, and running
    it again changes nothing already restored.

    A file that exists again at its original path (a writer re-created it) is never overwritten: it is refused,
    its quarantined copy stays, the other files are restored, and the exit code is 1 with the refused files
    named. A plan with nothing in quarantine exits 1 and says so.

    Restoring files does not undo a commit the plan made (Iceberg expiry, Paimon partition drop...): restore says
    so and names the engine's own way back (a rollback to a snapshot whose files are back)."""
    from lakesweep.applier.restore import restore_plan
    from lakesweep.engine.errors import LakesweepError
    from lakesweep.applier.apply import journal_plan
    from lakesweep.engine.errors import JournalError
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.journal.queries import resolve_plan_id

    path = existing_journal(journal)
    refuse_inside_recorded_tables(path, "--journal", path)
    spark_conf, on_ui = spark_ui(spark_ui_on, key_values(conf, "--conf"))
    with DuckDBRecorder(path) as recorder:
        try:
            plan_id = resolve_plan_id(recorder.plan_ids(), plan_id)
        except JournalError as e:
            raise LakesweepError(f"{e} (journal {path})") from e
        plan = journal_plan(recorder, plan_id)
        report = restore_plan(plan, recorder, files=files, master=master, conf=spark_conf, on_spark_ui=on_ui)
    if fmt == OutputFormat.json:
        render.emit_json(report.to_json())
    else:
        _render(report)
    if report.state != "COMPLETED":
        raise typer.Exit(1)


def _render(report) -> None:
    out = render.out
    verb = "finished restoring" if report.resumed else "restored"
    out.print(f"plan {report.plan_id}: {verb} {report.restored} file(s) ({human_bytes(report.restored_bytes)}) "
              f"from quarantine (restore {report.apply_id}); {report.left} still in quarantine", markup=False,
              highlight=False)
    for r in report.refused:
        out.print(f"  refused: {r['path']} exists again; the quarantined copy stays at {r['where']}", markup=False,
                  highlight=False)
    for f in report.failed:
        out.print(f"  failed: {f['path']}: {f['error']}", markup=False, highlight=False)
    if report.reason:
        render.err.print(report.reason, markup=False, highlight=False)
    if report.commit_note:
        out.print(report.commit_note, markup=False, highlight=False)
