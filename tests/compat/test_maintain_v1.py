"""A journal of ``lakesweep maintain`` runs written before maintenance results had a stream of their own
(``tests/compat/maintain_v1/``, made by ``make.py``): a dry run, a nightly run over three Iceberg tables
(applied, skipped by detection, skipped by its plan, failed) and a run over a Paimon warehouse.

Later lakesweep versions must show it as it was shown then (``expected.json``): ``journal maintenance``,
the ``maintenance_history`` rows and the HTML report drawn from them; and a run journaled today in the same
journal shows beside them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lakesweep.journal.audit import list_maintenance
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import MaintenanceResult, run_stream
from tests.compat.maintain_v1.outputs import REPORT_MS, outputs

HERE = Path(__file__).parent / "maintain_v1"


def test_an_old_journal_of_maintain_runs_is_shown_as_it_was():
    expected = json.loads((HERE / "expected.json").read_text())
    got = outputs(HERE / "journal.duckdb")
    assert len(got["maintenance"]) == 19 and len(got["history"]) == 19
    assert got["maintenance"] == expected["maintenance"]
    assert got["history"] == expected["history"]
    assert got["html"] == expected["html"]


def test_its_results_read_as_today_where_they_were_written_and_a_new_run_goes_to_its_own_stream(tmp_path):
    expected = json.loads((HERE / "expected.json").read_text())
    copy = tmp_path / "journal.duckdb"
    shutil.copy(HERE / "journal.duckdb", copy)
    applied = next(r for r in expected["maintenance"] if r["outcome"] == "applied")
    with DuckDBRecorder(copy) as rec:
        results = [e for e in rec.events() if isinstance(e, MaintenanceResult)]
        assert [e.to_payload() for e in results] == expected["maintenance"]
        for run in ("dryrun000001", "nightly00001", "paimon000001"):  # v1 kept only results without a plan there
            assert rec.events(plan_id=run_stream(run)) == [e for e in results if e.run_id == run and e.plan_id is None]
        assert applied["run_id"] in {e.run_id for e in rec.events(plan_id=applied["plan_id"])
                                     if isinstance(e, MaintenanceResult)}
        new = [MaintenanceResult("today000001", 1, applied["table"], applied["operation"], "planned", "dry run",
                                 REPORT_MS, plan_id=applied["plan_id"], plan_file="/plans/p.parquet"),
               MaintenanceResult("today000001", 1, applied["table"], "orphans", "skipped", "no orphan files to remove",
                                 REPORT_MS + 1)]
        rec.append(new)
        assert rec.events(plan_id=run_stream("today000001")) == new
        assert list_maintenance(rec) == expected["maintenance"] + [e.to_payload() for e in new]
        history = json.loads(json.dumps(rec.maintenance_history(), default=str))
    assert history[:-2] == expected["history"]
    assert [(h["maintain_run_id"], h["status"], h["plan_id"]) for h in history[-2:]] == [
        ("today000001", "PLANNED", applied["plan_id"]), ("today000001", "SKIPPED", None)]
