"""The ``maintenance_history`` view: one row per operation run, the same from both recorders, on journals
of every schema version."""

import os
import shutil
from pathlib import Path

import pytest

from lakesweep.journal.audit import list_maintenance, run_query
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import ApplyFailed, ApplyRefused, MaintenanceOutcome, MaintenanceResult, run_stream
from lakesweep.journal.memory_store import MemoryRecorder
from lakesweep.journal.recorder import StoredEvent
from lakesweep.journal.rules import HISTORY_COLUMNS
from tests.journal import builders as b

V1 = Path(__file__).parents[1] / "compat" / "v1" / "journal-v1.duckdb"


def fill(recorder, *, results_as_v1=False):
    """A completed apply, a failed one and its second apply, a killed one, a refusal before any apply, and a
    maintain run that applied one plan and skipped another operation (``results_as_v1``: its results as
    lakesweep wrote them before they had a stream of their own)."""
    one, two = b.make_plan(), b.make_plan(now_ms=2)
    three = b.make_plan(table="/other", identity="schema:other")
    for p in (one, two, three):
        recorder.record_plan(p, recorded_ms=1)
    recorder.append([b.started(one, "a1", started_ms=10)])
    recorder.record_files([b.record(one, a, apply_id="a1", time_ms=20) for a in one.actions])
    recorder.append([b.completed(one, "a1", finished_ms=30)])
    recorder.append([b.started(two, "f1", started_ms=40)])
    recorder.record_files([b.record(two, two.actions[0], apply_id="f1", outcome="FAILED", time_ms=45)])
    recorder.append([ApplyFailed(apply_id="f1", plan_id=two.plan_id, reason="1 action failed", phase=1,
                                 finished_ms=50)])
    recorder.append([b.started(two, "f2", started_ms=60)])
    recorder.record_files([b.record(two, two.actions[0], apply_id="f2", time_ms=61),
                           b.record(two, two.actions[0], apply_id="f2", time_ms=62)])
    recorder.append([b.started(three, "k1", started_ms=70)])
    recorder.append([ApplyRefused(plan_id=three.plan_id, reason="stale: tag t moved", refused_ms=80)])
    results = [MaintenanceResult(run_id="r1", cycle=1, table="paimon:/t", operation="expire",
                                 outcome=MaintenanceOutcome.APPLIED, message="applied", plan_id=one.plan_id,
                                 recorded_ms=31, applied_by="a1"),
               MaintenanceResult(run_id="r1", cycle=1, table="paimon:/t", operation="orphans",
                                 outcome=MaintenanceOutcome.SKIPPED, message="no orphan files", recorded_ms=32)]
    if results_as_v1:  # v1: in the plan's stream, or in "maintain:<run id>", which stood in as the plan id
        rows = [{**r.to_payload(), "plan_id": r.plan_id or "maintain:r1"} for r in results]
        recorder._append_rows([StoredEvent("MaintenanceResult", 1, row["plan_id"], None, row, row["recorded_ms"])
                               for row in rows])
    else:
        recorder.append(results)
    return one, two, three


def shape(rows):
    return [(r["run_id"], r["source"], r["operation"], r["table"], r["status"], r["start_ms"], r["end_ms"],
             r["message"], r["apply_id"], r["maintain_run_id"], r["previous_apply_id"]) for r in rows]


def test_one_row_per_apply_refusal_and_maintain_result_that_applied_nothing():
    with DuckDBRecorder(":memory:") as db:
        one, two, three = fill(db)
        rows = db.maintenance_history()
    assert shape(rows) == [
        ("a1", "apply", "expire", "paimon:/t", "COMPLETED", 10, 30, "applied", "a1", "r1", None),
        ("maintain:r1:" + rows[1]["run_id"].rsplit(":", 1)[1], "maintain", "orphans", "paimon:/t", "SKIPPED", 32, 32,
         "no orphan files", None, "r1", None),
        ("f1", "apply", "expire", "/t", "FAILED", 40, 50, "1 action failed", "f1", None, None),
        ("f2", "apply", "expire", "/t", "INCOMPLETE", 60, None, None, "f2", None, "f1"),
        ("k1", "apply", "expire", "/other", "INCOMPLETE", 70, None, None, "k1", None, None),
        (rows[5]["run_id"], "apply", "expire", "/other", "REFUSED", 80, 80, "stale: tag t moved", None, None, None),
    ]
    assert rows[5]["run_id"].startswith("refused:")
    assert [r["plan_id"] for r in rows] == [one.plan_id, None, two.plan_id, two.plan_id, three.plan_id, three.plan_id]
    assert rows[0]["metrics"] == {"actions": len(one.actions), "planned_bytes": 187, "bytes_reclaimed": 187,
                                  "files_deleted": sum(1 for a in one.actions if a.verb.deletes), "files_failed": 0, "file_records": len(one.actions),
                                  "actions_recorded_twice": 0, "duration_ms": 20}
    assert (rows[2]["metrics"]["files_failed"], rows[3]["metrics"]["actions_recorded_twice"]) == (1, 1)


def test_both_recorders_give_the_same_history_and_filters():
    with DuckDBRecorder(":memory:") as db, MemoryRecorder() as mem:
        fill(db)
        fill(mem)
        for kwargs in ({}, {"since_ms": 45}, {"table": "/other"}, {"table": "paimon:/t"}, {"since_ms": 75, "table": "/other"}):
            assert db.maintenance_history(**kwargs) == mem.maintenance_history(**kwargs), kwargs
        assert [r["run_id"] for r in db.maintenance_history(since_ms=45)] == ["f1", "f2", "k1",
                                                                               db.maintenance_history()[-1]["run_id"]]
        assert {r["table_location"] for r in db.maintenance_history(table="/other")} == {"/other"}


@pytest.mark.parametrize("make", [lambda: DuckDBRecorder(":memory:"), MemoryRecorder], ids=["duckdb", "memory"])
def test_results_in_their_runs_stream_show_as_results_in_plan_streams_did(make):
    with make() as old, make() as new:
        one, _, _ = fill(old, results_as_v1=True)
        fill(new)
        assert new.maintenance_history() == old.maintenance_history()
        assert list_maintenance(new) == list_maintenance(old) == [
            {"run_id": "r1", "cycle": 1, "table": "paimon:/t", "operation": "expire", "outcome": "applied",
             "message": "applied", "plan_id": one.plan_id, "recorded_ms": 31, "plan_file": None, "applied_by": "a1"},
            {"run_id": "r1", "cycle": 1, "table": "paimon:/t", "operation": "orphans", "outcome": "skipped",
             "message": "no orphan files", "plan_id": None, "recorded_ms": 32, "plan_file": None, "applied_by": None}]
        assert [e.operation for e in new.events(plan_id=run_stream("r1"))] == ["expire", "orphans"]
        assert [e.EVENT_TYPE for e in new.events(plan_id=one.plan_id)] == [
            "PlanRecorded", "ApplyStarted", "ApplyCompleted"]
        assert [e.operation for e in old.events(plan_id=run_stream("r1"))] == ["orphans"]  # v1 rows stay put
        assert [e.EVENT_TYPE for e in old.events(plan_id=one.plan_id)][-1] == "MaintenanceResult"


def test_the_view_drills_down_to_the_file_records(tmp_path):
    path = tmp_path / "j.duckdb"
    with DuckDBRecorder(path) as db:
        fill(db)
    columns, rows = run_query(path, "SELECT h.run_id, count(f.seq) FROM maintenance_history h JOIN file_audit f "
                                    "ON f.apply_id = h.apply_id GROUP BY 1 ORDER BY 1")
    assert rows == [("a1", len(b.ACTIONS)), ("f1", 1), ("f2", 2)]
    columns, _ = run_query(path, "SELECT * FROM maintenance_history")
    assert tuple(columns) == HISTORY_COLUMNS


@pytest.fixture
def v1_journal(tmp_path):
    copy = tmp_path / "journal-v1.duckdb"
    shutil.copy(V1, copy)
    os.chmod(copy, 0o644)
    return copy


def test_a_version_1_journal_has_the_view_read_only_and_after_an_open(v1_journal):
    _, views = run_query(v1_journal, "SELECT temporary FROM duckdb_views() WHERE view_name = 'maintenance_history'")
    assert views == [(True,)]
    _, read_only = run_query(v1_journal, "SELECT status, count(*) FROM maintenance_history GROUP BY 1 ORDER BY 1")
    assert read_only == [("COMPLETED", 2), ("FAILED", 1), ("REFUSED", 1)]
    with DuckDBRecorder(v1_journal) as db:
        rows = db.maintenance_history()
    assert sorted((r["status"], r["operation"]) for r in rows) == [
        ("COMPLETED", "expire"), ("COMPLETED", "expire"), ("FAILED", "expire"), ("REFUSED", "expire")]
    _, views = run_query(v1_journal, "SELECT temporary FROM duckdb_views() WHERE view_name = 'maintenance_history'")
    assert views == [(False,)]
