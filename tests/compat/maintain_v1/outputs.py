"""What lakesweep shows of a journal's maintain runs: ``journal maintenance`` (JSON), the
``maintenance_history`` rows the HTML report is drawn from, and the report itself (as of a fixed time)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from lakesweep.cli.html.journal_page import ReportInput, journal_html
from lakesweep.cli.main import app
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.rules import FileQuery

REPORT_MS = 1_796_083_200_000  # 2026-12-01T00:00:00Z, after the runs


def outputs(journal: Path) -> dict:
    """The outputs of a copy of ``journal`` (reading a journal of an older schema upgrades it)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "journal.duckdb"
        shutil.copy(journal, copy)
        r = CliRunner().invoke(app, ["journal", "maintenance", "--journal", str(copy), "--output", "json"])
        assert r.exit_code == 0, r.output
        with DuckDBRecorder(copy, read_only=True) as rec:
            history = rec.maintenance_history()
            failed = rec.file_rows(FileQuery(outcome="FAILED"))
        html = journal_html(ReportInput(journal="journal.duckdb", history=history, failed_files=failed,
                                        now_ms=REPORT_MS))
    return {"maintenance": json.loads(r.stdout), "history": json.loads(json.dumps(history, default=str)),
            "html": html}
