"""``lakesweep verify``: is a table whole?"""

from __future__ import annotations

import typer

from lakesweep.cli.app import OutputOpt, app, handle_errors
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
    fmt: OutputFormat = OutputOpt,
):
    """Check that a Paimon table is whole: every file that its snapshots, tags, branches and changelogs
    reference exists, with the size its manifest records; snapshots run without gaps from the earliest to
    the latest; and the EARLIEST/LATEST hints agree with the snapshot files. Reports each missing file with
    the snapshot or tag that needs it, and the files nothing references. Changes nothing.

    Iceberg (--catalog): every file the metadata needs is in place: the current metadata file and its log,
    every snapshot's manifest list and manifests, the data and delete files of their live entries, and the
    statistics files.

    Exit code 0 when the table is whole, 1 when it is not (or cannot be read)."""
    from lakesweep.engine.paimon.table import open_table
    from lakesweep.engine.paimon.verify import verify_table

    output = output_for(fmt)
    if catalog is not None:
        from lakesweep.engine.iceberg.table import IcebergTable
        from lakesweep.engine.iceberg.verify import verify_iceberg

        report = verify_iceberg(IcebergTable(catalog, table))
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
    output.verify(report, files=files)
    if not report.whole:
        raise typer.Exit(1)
