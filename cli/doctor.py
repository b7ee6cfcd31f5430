"""``lakesweep doctor``: check this machine (Java, Spark and its executors' Python, Avro codecs, the
journal, a table's storage) and say how to fix each problem."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from cli import render
from cli.app import ConfOpt, JournalOpt, MasterOpt, Output, OutputOpt, app, handle_errors, key_values


def _journal(journal: Optional[Path]) -> tuple[str, str]:
    """The journal apply would use, and where that choice came from."""
    from journal.duckdb_store import default_journal_path

    if journal is not None:
        return str(journal), "from --journal"
    if os.environ.get("LAKESWEEP_JOURNAL"):
        return str(default_journal_path()), "from LAKESWEEP_JOURNAL"
    return str(default_journal_path()), "the default"


@app.command()
@handle_errors
def doctor(
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    journal: Optional[Path] = JournalOpt,
    table: Optional[str] = typer.Option(None, "--table", help="Also check this table's storage: a local path, "
                                        "or s3://bucket/path (endpoint, credentials, one authenticated listing)."),
    output: Output = OutputOpt,
):
    """Check that this machine can run lakesweep: Java, a Spark session whose executors import
    lakesweep's modules in the driver's versions, the Avro codecs Paimon writes manifests with, a
    writable journal, and (with --table) the table's storage. Each problem comes with its fix.
    Exit 0 when every check passes, 1 otherwise."""
    from applier.doctor import run_doctor

    journal_path, journal_source = _journal(journal)
    checks = run_doctor(master=master, conf=key_values(conf, "--conf"), journal=journal_path,
                        journal_source=journal_source, table=table)
    failed = [c for c in checks if not c.ok]
    if output == Output.json:
        render.emit_json({"ok": not failed, "checks": [c.to_json() for c in checks]})
    else:
        t = Table(title="lakesweep doctor", show_lines=True)
        t.add_column("check", no_wrap=True)
        t.add_column("status", no_wrap=True)
        t.add_column("found", overflow="fold")
        for c in checks:
            status = "[green]ok[/green]" if c.ok else "[red]FAILED[/red]"
            t.add_row(c.name, status, escape("\n".join(f"{label}: {value}" for label, value in c.found)))
        render.out.print(t)
        for c in failed:
            render.out.print(f"[red]{c.name}:[/red] {escape(c.problem or '')}")
            if c.fix:
                render.out.print(f"  fix: {escape(c.fix)}")
        render.out.print(f"{len(failed)} of {len(checks)} checks failed." if failed
                         else f"All {len(checks)} checks passed.")
    if failed:
        raise typer.Exit(1)
