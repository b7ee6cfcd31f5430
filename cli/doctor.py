"""``lakesweep doctor``: check this machine (Java, Spark and its executors' Python, Avro codecs, the
journal, a table's storage) and say how to fix each problem."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from lakesweep.cli.app import ConfOpt, JournalOpt, MasterOpt, OutputOpt, app, handle_errors, key_values
from lakesweep.cli.output import OutputFormat, output_for


def _journal(journal: Optional[Path]) -> tuple[str, str]:
    """The journal apply would use, and where that choice came from."""
    from lakesweep.journal.duckdb_store import default_journal_path

    if journal is not None:
        return str(journal), "from --journal"
    if os.environ.get("LAKESWEEP_JOURNAL"):
        return str(default_journal_path()), "from LAKESWEEP_JOURNAL"
    return str(default_journal_path()), "the default"


@app.command(short_help="Check that this machine can run lakesweep.")
@handle_errors
def doctor(
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    journal: Optional[Path] = JournalOpt,
    table: Optional[str] = typer.Option(None, "--table", help="Also check this table's storage: a local path, "
                                        "s3://bucket/path (endpoint, credentials, one authenticated listing) or "
                                        "hdfs://namenode:port/path (one listing)."),
    fmt: OutputFormat = OutputOpt,
):
    """Check that this machine can run lakesweep: Java, a Spark session whose executors import
    lakesweep's modules in the driver's versions, the Avro codecs Paimon writes manifests with, a
    writable journal, and (with --table) the table's storage. Each problem comes with its fix.
    Exit 0 when every check passes, 1 otherwise."""
    from lakesweep.applier.doctor import run_doctor

    output = output_for(fmt)
    journal_path, journal_source = _journal(journal)
    checks = run_doctor(master=master, conf=key_values(conf, "--conf"), journal=journal_path,
                        journal_source=journal_source, table=table)
    output.doctor(checks)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
