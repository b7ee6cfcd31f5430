"""``lakesweep journal ...``: what lakesweep did, read from the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.app import JournalOpt, OutputOpt, app, existing_journal, handle_errors, refuse_inside_recorded_tables
from cli.output import OutputFormat, output_for

journal_app = typer.Typer(help="Audit what lakesweep did: plans, per-file outcomes, SQL over the journal.",
                          no_args_is_help=True)
app.add_typer(journal_app, name="journal")


def _open_read(journal: Optional[Path]):
    from journal.duckdb_store import DuckDBRecorder

    return DuckDBRecorder(existing_journal(journal), read_only=True)


@journal_app.command("plans")
@handle_errors
def journal_plans(journal: Optional[Path] = JournalOpt, fmt: OutputFormat = OutputOpt):
    """Every plan in the journal: table, kind, state, counts, bytes and times."""
    from journal.audit import list_plans

    output = output_for(fmt)
    with _open_read(journal) as recorder:
        rows = list_plans(recorder)
    output.journal_plans(rows)


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
    fmt: OutputFormat = OutputOpt,
):
    """Per-file records: what was deleted (or found absent, or failed), when, by which plan and why
    (the snapshot whose expiry caused it)."""
    from journal.audit import list_files
    from engine.timeutil import parse_time_ms

    output = output_for(fmt)
    with _open_read(journal) as recorder:
        rows = list_files(recorder, plan_id=plan, table=table, kind=kind, outcome=outcome,
                          since_ms=parse_time_ms(since) if since else None, path_glob=path, limit=limit)
    output.journal_files(rows)


@journal_app.command("query")
@handle_errors
def journal_query(
    sql: str = typer.Argument(..., help="A read-only SQL query, e.g. \"SELECT outcome, count(*) FROM "
                              "file_records GROUP BY 1\". Tables: events, plan_actions, file_records."),
    journal: Optional[Path] = JournalOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Run read-only SQL over the journal (DuckDB)."""
    from journal.audit import run_query

    output = output_for(fmt)
    columns, rows = run_query(existing_journal(journal), sql)
    output.query_result(columns, rows)


@journal_app.command("export")
@handle_errors
def journal_export(
    out: Path = typer.Option(..., "--out", help="Parquet file to write."),
    journal: Optional[Path] = JournalOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Export every file record (joined with its plan and action) as Parquet."""
    from journal.audit import export_files

    output = output_for(fmt)
    path = existing_journal(journal)
    refuse_inside_recorded_tables(str(out), "--out", path)
    output.journal_exported(str(out), export_files(path, str(out)))
