"""``lakesweep journal ...``: what lakesweep did, read from the journal."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from cli import render
from cli.app import JournalOpt, Output, OutputOpt, app, existing_journal, handle_errors, refuse_inside_recorded_tables

journal_app = typer.Typer(help="Audit what lakesweep did: plans, per-file outcomes, SQL over the journal.",
                          no_args_is_help=True)
app.add_typer(journal_app, name="journal")


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

    return DuckDBRecorder(existing_journal(journal))


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

    columns, rows = run_query(existing_journal(journal), sql)
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

    path = existing_journal(journal)
    refuse_inside_recorded_tables(str(out), "--out", path)
    n = export_files(path, str(out))
    if output == Output.json:
        render.emit_json({"out": str(out), "rows": n})
    else:
        render.out.print(f"wrote {n} file records to {out}")
