"""apply --quarantine on a table pyiceberg wrote, made the default by the table's own property."""

from __future__ import annotations

import os

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.applier.quarantine import QuarantineChoice
from lakesweep.engine.plan import Verb
from lakesweep.engine.quarantine import QUARANTINE_DIR
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import ApplyStarted, FileOutcome
from tests.iceberg.conftest import rows_by_snapshot, write_history
from tests.iceberg.test_expire import plan as plan_expire

pytest.importorskip("pyiceberg")


def test_the_table_property_quarantines_an_expiry_and_the_current_snapshot_still_reads(lake, tmp_path):
    write_history(lake, properties={"lakesweep.quarantine": "true", "lakesweep.quarantine.retention": "2 d"})
    current = lake.table().metadata.current_snapshot_id
    rows = rows_by_snapshot(lake.table())[current]
    plan = plan_expire(lake.view(), older_than="0 s")
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    assert files
    with DuckDBRecorder(str(tmp_path / "j.duckdb")) as rec:
        report = apply_plan(plan, rec, executor=DriverExecutor(), quarantine=QuarantineChoice())
        records = rec.file_records(plan_id=plan.plan_id)
        [started] = [e for e in rec.events(plan_id=plan.plan_id) if isinstance(e, ApplyStarted)]
    assert (report.state, report.mode, report.counts["QUARANTINED"]) == ("COMPLETED", "quarantine", len(files))
    assert (started.mode, started.quarantine["retention_ms"]) == ("quarantine", 2 * 86_400_000)
    qdir = os.path.join(plan.table_location, QUARANTINE_DIR, plan.plan_id)
    moved = {r.action_id: r.moved_to for r in records if r.outcome == FileOutcome.QUARANTINED}
    assert sorted(moved) == [a.action_id for a in files]
    for a in files:
        target = a.path if a.path.startswith("/") else os.path.join(plan.table_location, a.path)
        assert moved[a.action_id] == os.path.join(qdir, os.path.relpath(target, plan.table_location))
        assert os.path.isfile(moved[a.action_id]) and not os.path.exists(target)
    table = lake.table()
    assert [s.snapshot_id for s in table.metadata.snapshots] == [current]
    assert rows_by_snapshot(table)[current] == rows
