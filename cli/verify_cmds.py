"""``lakesweep verify``: is a table whole?"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

import typer

from lakesweep.cli.app import JournalOpt, OutputOpt, app, handle_errors, journal_path
from lakesweep.cli import render
from lakesweep.cli.output import OutputFormat, output_for
from lakesweep.cli.progress import progress_enabled
from lakesweep.cli.plan_cmds import TableArg


@app.command(short_help="Check that every file a table references is there.")
@handle_errors
def verify(
    table: str = TableArg,
    unreferenced: bool = typer.Option(True, "--unreferenced/--no-unreferenced",
                                      help="Also list Paimon's directories and count the files nothing references "
                                      "(what orphan cleaning would consider, whatever their age)."),
    files: bool = typer.Option(False, "--files", help="List every unreferenced file, not just their count."),
    catalog: str = typer.Option(None, "--catalog", help="Verify an Iceberg table: the name of its catalog, "
                                "configured as pyiceberg configures catalogs. TABLE is then namespace.table."),
    journal: Optional[Path] = JournalOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Check that a Paimon table is whole: every file that its snapshots, tags, branches and changelogs
    reference exists, with the size its manifest records; snapshots run without gaps from the earliest to
    the latest; and the EARLIEST/LATEST hints agree with the snapshot files. Reports each missing file with
    the snapshot or tag that needs it, and the files nothing references. Changes nothing.

    Iceberg (--catalog): every file the metadata needs is in place: the current metadata file and its log,
    every snapshot's manifest list and manifests, the data and delete files of their live entries, and the
    statistics files.

    A missing file that a plan applied with --quarantine put aside (the journal, when it exists, says so) is
    named with its plan, and the 'lakesweep restore' command that brings it back is printed.

    Exit code 0 when the table is whole, 1 when it is not (or cannot be read)."""
    from lakesweep.engine.paimon.table import open_table
    from lakesweep.engine.paimon.verify import verify_table

    output = output_for(fmt)
    if catalog is not None:
        from lakesweep.engine.iceberg.table import IcebergTable
        from lakesweep.engine.iceberg.verify import verify_iceberg

        report = _with_quarantine(verify_iceberg(IcebergTable(catalog, table)), journal)
        output.verify(report, files=False)
        if not report.whole:
            raise typer.Exit(1)
        return
    t = open_table(table)
    if progress_enabled(output.draws_progress):
        with render.err.status("verifying") as status:
            report = verify_table(t, unreferenced=unreferenced,
                                  progress=lambda what: status.update(f"verifying: {what}"))
    else:
        report = verify_table(t, unreferenced=unreferenced)
    report = _with_quarantine(report, journal)
    output.verify(report, files=files)
    if not report.whole:
        raise typer.Exit(1)


def _with_quarantine(report, journal):
    """``report`` with its missing files that a plan's quarantine holds, and the commands that restore them
    (the journal named, or the default one when it exists; none: ``report`` as it is)."""
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.journal.queries import quarantined_locations

    missing = [p.path for p in report.problems if p.kind == "missing"]
    path = journal_path(journal)
    if not missing or not os.path.exists(path):
        return report
    with DuckDBRecorder(path, read_only=True) as recorder:
        held = quarantined_locations(recorder, report.location)
    found = [{"path": m, "plan_id": held[m][0], "where": held[m][1]} for m in dict.fromkeys(missing) if m in held]
    named = f" --journal {path}" if journal is not None else ""
    commands = tuple(f"lakesweep restore {pid}{named}" for pid in dict.fromkeys(f["plan_id"] for f in found))
    return dataclasses.replace(report, quarantined=tuple(found), restore_commands=commands)
