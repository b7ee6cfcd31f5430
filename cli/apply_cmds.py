"""``lakesweep apply``, ``lakesweep resume`` and ``lakesweep journal ...``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from cli import render
from cli.main import Output, OutputOpt, app, handle_errors, key_values, refuse_inside_table
from cli.progress import RichProgress

journal_app = typer.Typer(help="Audit what lakesweep did: plans, per-file outcomes, SQL over the journal.",
                          no_args_is_help=True)
app.add_typer(journal_app, name="journal")

JournalOpt = typer.Option(None, "--journal", "-j", help="The DuckDB journal file (env LAKESWEEP_JOURNAL; default "
                          "~/.local/share/lakesweep/journal.duckdb).")
MasterOpt = typer.Option("local[*]", "--master", help="Spark master, e.g. local[*] or spark://host:7077.")
ConfOpt = typer.Option([], "--conf", help="Spark configuration key=value (repeatable).")


def _journal_path(journal: Optional[Path]) -> str:
    from journal.duckdb_store import default_journal_path

    return str(journal) if journal is not None else str(default_journal_path())


def _existing_journal(journal: Optional[Path]) -> str:
    """The journal path of a command that reads a journal: it must exist (a typo must not create one)."""
    from engine.errors import JournalError

    path = _journal_path(journal)
    if not os.path.exists(path):
        raise JournalError(f"journal {path} does not exist (nothing has been applied with it yet)")
    return path


def _refuse_inside_recorded_tables(path: str, what: str, journal: str) -> None:
    from engine.errors import JournalError
    from journal.audit import recorded_tables

    for table in recorded_tables(journal):
        refuse_inside_table(path, table, what, JournalError)


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
        journal_path = _journal_path(journal)
        refuse_inside_table(journal_path, p.table_location, "--journal", JournalError)
        with DuckDBRecorder(journal_path) as recorder, RichProgress(output == Output.text) as progress:
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

    path = _existing_journal(journal)
    _refuse_inside_recorded_tables(path, "--journal", path)
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


def _rows_table(rows: list[dict], columns: list[str], title: str) -> Table:
    t = Table(title=title)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[render.fmt_time(r[c]) if c.endswith("_ms") and r[c] is not None else
                    ("-" if r[c] is None else str(r[c])) for c in columns])
    return t


def _open_read(journal: Optional[Path]):
    from journal.duckdb_store import DuckDBRecorder

    return DuckDBRecorder(_existing_journal(journal))


@journal_app.command("plans")
@handle_errors
def journal_plans(journal: Optional[Path] = JournalOpt, output: Output = OutputOpt):
    """Every plan in the journal: table, kind, state, counts, bytes and times."""
    from journal.audit import list_plans

    with _open_read(journal) as recorder:
        rows = list_plans(recorder)
    if output == Output.json:
        render.emit_json(rows)
    else:
        render.out.print(_rows_table(rows, ["plan_id", "table", "kind", "state", "n_actions", "deleted",
                                            "already_absent", "failed", "bytes_reclaimed", "recorded_ms",
                                            "finished_ms"], "Plans"))


@journal_app.command("files")
@handle_errors
def journal_files(
    journal: Optional[Path] = JournalOpt,
    plan: Optional[str] = typer.Option(None, "--plan", help="Only this plan id."),
    table: Optional[str] = typer.Option(None, "--table", help="Only this table (location or identity)."),
    kind: Optional[str] = typer.Option(None, "--kind", help="data-file, manifest, snapshot, ..."),
    outcome: Optional[str] = typer.Option(None, "--outcome", help="DELETED, ALREADY_ABSENT, FAILED, ..."),
    since: Optional[str] = typer.Option(None, "--since", help="Epoch ms or ISO-8601."),
    path: Optional[str] = typer.Option(None, "--path", help="Shell glob over the path, e.g. '*dt=2024-01-01*'."),
    limit: Optional[int] = typer.Option(None, "--limit"),
    output: Output = OutputOpt,
):
    """Per-file records: what was deleted (or found absent, or failed), when, by which plan and why
    (the snapshot whose expiry caused it)."""
    from journal.audit import list_files
    from engine.timeutil import parse_time_ms

    with _open_read(journal) as recorder:
        rows = list_files(recorder, plan_id=plan, table=table, kind=kind, outcome=outcome,
                          since_ms=parse_time_ms(since) if since else None, path_glob=path, limit=limit)
    if output == Output.json:
        render.emit_json(rows)
    else:
        render.out.print(_rows_table(rows, ["time_ms", "plan_id", "kind", "path", "snapshot_id", "outcome",
                                            "attempt", "error"], f"{len(rows)} file records"))


@journal_app.command("query")
@handle_errors
def journal_query(
    sql: str = typer.Argument(..., help="A read-only SQL query, e.g. \"SELECT outcome, count(*) FROM "
                              "file_records GROUP BY 1\". Tables: events, plan_actions, file_records."),
    journal: Optional[Path] = JournalOpt,
    output: Output = OutputOpt,
):
    """Run read-only SQL over the journal (DuckDB)."""
    from journal.audit import run_query

    columns, rows = run_query(_existing_journal(journal), sql)
    if output == Output.json:
        render.emit_json([dict(zip(columns, r)) for r in rows])
    else:
        t = Table()
        for c in columns:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*["-" if v is None else str(v) for v in r])
        render.out.print(t)


@journal_app.command("export")
@handle_errors
def journal_export(
    out: Path = typer.Option(..., "--out", help="Parquet file to write."),
    journal: Optional[Path] = JournalOpt,
    output: Output = OutputOpt,
):
    """Export every file record (joined with its plan and action) as Parquet."""
    from journal.audit import export_files

    path = _existing_journal(journal)
    _refuse_inside_recorded_tables(str(out), "--out", path)
    n = export_files(path, str(out))
    if output == Output.json:
        render.emit_json({"out": str(out), "rows": n})
    else:
        render.out.print(f"wrote {n} file records to {out}")
