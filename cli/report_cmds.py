"""``lakesweep journal report``: what lakesweep did, from the journal's ``maintenance_history`` view, as one
self-contained HTML page."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from lakesweep.cli.app import (JournalOpt, OutputOpt, check_output_file, existing_journal, handle_errors,
                               refuse_inside_recorded_tables)
from lakesweep.cli.journal_cmds import _open_read, journal_app
from lakesweep.cli import render
from lakesweep.cli.output import OutputFormat


@journal_app.command("report", short_help="Write an HTML report of the journal.")
@handle_errors
def journal_report(
    html: Path = typer.Option(..., "--html", help="The HTML page to write: inline SVG charts, no script, nothing "
                              "loaded from the network."),
    since: Optional[str] = typer.Option(None, "--since", help="Only runs from this time on: epoch ms or ISO-8601."),
    table: Optional[str] = typer.Option(None, "--table", help="Only this table: its location, identity, or the "
                                        "name 'maintain' gives it (paimon:LOCATION, iceberg:CATALOG/NS.TABLE)."),
    journal: Optional[Path] = JournalOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Write a report of the journal: outcomes over time, bytes reclaimed per table per day, crashes and
    resumes, every failure with its error, and each 'maintain' run as a matrix of tables by operations."""
    from lakesweep.cli.html.journal_page import ReportInput, journal_html
    from lakesweep.engine.errors import JournalError
    from lakesweep.engine.timeutil import parse_time_ms
    from lakesweep.journal.rules import FileQuery

    check_output_file(html, "--html", JournalError)
    since_ms = parse_time_ms(since) if since is not None else None
    path = existing_journal(journal)
    refuse_inside_recorded_tables(str(html), "--html", path)
    with _open_read(journal) as recorder:  # as every 'journal' command reads it
        history = recorder.maintenance_history(since_ms=since_ms, table=table)
        failed = recorder.file_rows(FileQuery(outcome="FAILED", since_ms=since_ms, table=table))
    html.write_text(journal_html(ReportInput(journal=path, history=history, failed_files=failed, since_ms=since_ms,
                                             table=table, now_ms=int(time.time() * 1000))), encoding="utf-8")
    if fmt == OutputFormat.text:
        render.out.print(f"wrote the report of {len(history)} operation run(s) to {html}", markup=False)
    else:
        render.emit_json({"html": str(html), "runs": len(history)})
