"""``lakesweep journal ...``: what lakesweep did, read from the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from lakesweep.cli.app import JournalOpt, OutputOpt, app, existing_journal, handle_errors, refuse_inside_recorded_tables
from lakesweep.cli.output import OutputFormat, output_for

journal_app = typer.Typer(help="Audit what lakesweep did: plans, per-file outcomes, SQL over the journal.",
                          short_help="Audit what lakesweep did.",
                          no_args_is_help=True)
app.add_typer(journal_app, name="journal")


TEXT_FILES_LIMIT = 50  # records ``journal files`` shows people unless told otherwise


def _open_read(journal: Optional[Path]):
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    return DuckDBRecorder(existing_journal(journal), read_only=True)


@journal_app.command("plans", short_help="Every plan: its table, state, bytes and times.")
@handle_errors
def journal_plans(journal: Optional[Path] = JournalOpt, fmt: OutputFormat = OutputOpt):
    """Every plan in the journal: table, kind, state, counts, bytes and times."""
    from lakesweep.journal.audit import list_plans

    output = output_for(fmt)
    with _open_read(journal) as recorder:
        rows = list_plans(recorder)
    output.journal_plans(rows)


@journal_app.command("files", short_help="Per-file records: what was done to each file.")
@handle_errors
def journal_files(
    journal: Optional[Path] = JournalOpt,
    plan: Optional[str] = typer.Option(None, "--plan", help="Only this plan: its id, or the start of it that "
                                       "'journal plans' shows."),
    table: Optional[str] = typer.Option(None, "--table", help="Only this table (location or identity)."),
    kind: Optional[str] = typer.Option(None, "--kind", help="data-file, manifest, snapshot, ..."),
    outcome: Optional[str] = typer.Option(None, "--outcome", help="DELETED, ALREADY_ABSENT, FAILED, ..."),
    since: Optional[str] = typer.Option(None, "--since", help="Epoch ms or ISO-8601."),
    path: Optional[str] = typer.Option(None, "--path", help="Shell glob over the path, e.g. '*dt=2024-01-01*'."),
    limit: Optional[int] = typer.Option(None, "--limit", help=f"Show at most this many records (text output: "
                                        f"{TEXT_FILES_LIMIT} unless given; JSON: all unless given)."),
    all_: bool = typer.Option(False, "--all", help="Show every record, whatever the output."),
    fmt: OutputFormat = OutputOpt,
):
    """Per-file records: what was deleted (or found absent, or failed), when, by which plan and why
    (the snapshot whose expiry caused it), oldest first.

    Text output shows the first 50 records and says how many more there are; --limit N or --all show
    more. JSON output has every record unless --limit is given."""
    from lakesweep.journal.audit import count_files, list_files
    from lakesweep.engine.timeutil import parse_time_ms

    if all_ and limit is not None:
        raise typer.BadParameter("give --limit N or --all, not both", param_hint="--all")
    output = output_for(fmt)
    if limit is None and not all_ and fmt == OutputFormat.text:
        limit = TEXT_FILES_LIMIT
    filters = dict(plan_id=plan, table=table, kind=kind, outcome=outcome,
                   since_ms=parse_time_ms(since) if since else None, path_glob=path)
    with _open_read(journal) as recorder:
        filters["plan_id"] = _plan_id(recorder, plan)
        rows = list_files(recorder, **filters, limit=limit)
        more = count_files(recorder, **filters) - len(rows) if limit is not None and len(rows) == limit else 0
    output.journal_files(rows, more=more)


def _plan_id(recorder, given: Optional[str]) -> Optional[str]:
    """The full id of the one recorded plan whose id starts with ``given`` (``given`` itself when none does:
    no records match then)."""
    from lakesweep.engine.errors import JournalError

    if given is None:
        return None
    matches = [p for p in recorder.plan_ids() if p.startswith(given)]
    if len(matches) > 1:
        raise JournalError(f"--plan '{given}' names {len(matches)} plans in the journal; give more of its id")
    return matches[0] if matches else given


@journal_app.command("query")
@handle_errors
def journal_query(
    sql: str = typer.Argument(..., help="A read-only SQL query, e.g. \"SELECT outcome, count(*) FROM "
                              "file_records GROUP BY 1\". Tables: events, plan_actions, file_records; views: file_audit, "
                              "maintenance_history (one row per operation run)."),
    journal: Optional[Path] = JournalOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Run read-only SQL over the journal (DuckDB)."""
    from lakesweep.journal.audit import run_query

    output = output_for(fmt)
    columns, rows = run_query(existing_journal(journal), sql)
    output.query_result(columns, rows)


@journal_app.command("export", short_help="Export every file record as Parquet.")
@handle_errors
def journal_export(
    out: Path = typer.Option(..., "--out", help="Parquet file to write."),
    journal: Optional[Path] = JournalOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Export every file record (joined with its plan and action) as Parquet."""
    from lakesweep.journal.audit import export_files

    output = output_for(fmt)
    path = existing_journal(journal)
    refuse_inside_recorded_tables(str(out), "--out", path)
    output.journal_exported(str(out), export_files(path, str(out)))
