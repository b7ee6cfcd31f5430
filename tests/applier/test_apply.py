"""Applying plans on a real Spark: effects on disk, journal records, idempotence, refusals, faults."""

import os

import pytest

from lakesweep.applier.apply import apply_plan, dry_run_plan, resume
from lakesweep.applier.local import apply_locally
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.plan_io import plan_from_bytes, plan_to_bytes
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.journal.audit import list_files
from lakesweep.journal.events import FileOutcome
from lakesweep.journal.queries import incomplete_applies
from tests.applier.conftest import copy_table
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.faulty_fileio import FaultyFileIO
from tests.support.table_builder import ADD, DELETE, E, TableBuilder, all_files


@pytest.fixture
def table(tmp_path):
    b = TableBuilder(str(tmp_path / "t"), partition_keys=("dt",), partition_types=("STRING",))
    files = [E(ADD, f"f{i}", ("a" if i % 2 else "b",), size=10 + i) for i in range(12)]
    b.commit(files[:6])
    b.tag("keep", 1)
    b.commit(files[6:], [E(DELETE, f.name, f.partition, size=f.size) for f in files[:3]])
    b.commit([E(DELETE, f.name, f.partition, size=f.size) for f in files[6:9]])
    b.commit([E(ADD, "g", ("a",))])
    b.commit([E(ADD, "h", ("b",))])
    return b


def test_apply_matches_the_in_process_reference_and_journals_every_action(table, tmp_path, spark, recorder):
    reference = copy_table(table.root, str(tmp_path / "ref"))
    plan = make_plan(table.root, retain_min=1)
    apply_locally(make_plan(reference, retain_min=1))
    report = apply_plan(plan, recorder, spark=spark)
    assert report.state == "COMPLETED"
    assert all_files(table.root) == all_files(reference)
    records = recorder.file_records(plan_id=plan.plan_id)
    assert sorted(r.action_id for r in records) == [a.action_id for a in plan.actions]
    deleted = [a for a in plan.actions if a.verb.deletes]
    assert report.counts["DELETED"] == len(deleted) and report.counts["WRITTEN"] == 1
    assert report.bytes_reclaimed == sum(a.size or 0 for a in deleted)
    # files f0..f2 were protected by the tag on snapshot 1; f6..f8 are gone
    assert os.path.exists(table.data_path(E(ADD, "f0", ("b",))))
    assert not os.path.exists(table.data_path(E(ADD, "f6", ("b",))))


def test_requirements_are_checked_once_before_the_apply_and_again_on_a_fresh_view_before_each_phase(
        table, recorder, monkeypatch):
    from lakesweep.applier import apply as apply_module
    from lakesweep.applier.executors import DriverExecutor

    views = []
    check = apply_module.check_requirements
    monkeypatch.setattr(apply_module, "check_requirements",
                        lambda plan, live, **kw: (views.append(live), check(plan, live, **kw))[1])
    plan = make_plan(table.root, retain_min=1)
    report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED"
    phases = len({a.phase for a in plan.actions})
    assert phases > 1 and len(views) == 1 + phases and len(set(map(id, views))) == len(views)


def test_applying_twice_changes_nothing(table, spark, recorder):
    plan = make_plan(table.root, retain_min=1)
    apply_plan(plan, recorder, spark=spark)
    before = all_files(table.root)
    again = apply_plan(plan, recorder, spark=spark)
    assert all_files(table.root) == before
    assert again.counts["DELETED"] == 0
    assert again.counts["ALREADY_ABSENT"] == sum(1 for a in plan.actions if a.verb.deletes)


def test_dry_run_deletes_nothing_and_journals_nothing(table, spark, recorder):
    plan = make_plan(table.root, retain_min=1)
    before = all_files(table.root)
    report = dry_run_plan(plan, spark=spark)
    assert all_files(table.root) == before
    assert report.counts["DELETED"] == sum(1 for a in plan.actions if a.verb.deletes)
    assert recorder.plan_ids() == []


def _stale(table, recorder, spark, mutate, message):
    plan = make_plan(table.root, retain_min=1)
    mutate()
    before = all_files(table.root)
    with pytest.raises(StalePlan, match=message):
        apply_plan(plan, recorder, spark=spark)
    assert all_files(table.root) == before  # nothing deleted
    refused = [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "ApplyRefused"]
    assert len(refused) == 1 and "stale" in refused[0].reason


def test_tag_added_inside_the_range_makes_the_plan_stale(table, recorder, spark):
    _stale(table, recorder, spark, lambda: table.tag("late", 3), "tag 'late' was added at snapshot 3")


def test_tag_moved_makes_the_plan_stale(table, recorder, spark):
    _stale(table, recorder, spark, lambda: table.tag("keep", 2), "tag 'keep' moved from snapshot 1 to 2")


def test_tag_removed_makes_the_plan_stale(table, recorder, spark):
    _stale(table, recorder, spark, lambda: os.remove(os.path.join(table.root, "tag", "tag-keep")),
           r"tag 'keep' \(snapshot 1\) was removed")


def test_consumer_inside_the_range_makes_the_plan_stale(table, recorder, spark):
    _stale(table, recorder, spark, lambda: table.consumer("reader", 2), "consumer 'reader' now reads from snapshot 2")


def test_snapshot_removed_by_someone_else_makes_the_plan_stale(table, recorder, spark):
    _stale(table, recorder, spark, lambda: os.remove(os.path.join(table.root, "snapshot", "snapshot-2")),
           r"snapshot\(s\) \[2\] of the plan's range are gone")


def test_schema_change_makes_the_plan_stale(table, recorder, spark):
    def evolve():
        with open(os.path.join(table.root, "schema", "schema-0")) as f:
            data = f.read()
        with open(os.path.join(table.root, "schema", "schema-1"), "w") as f:
            f.write(data.replace('"id": 0', '"id": 1', 1))

    _stale(table, recorder, spark, evolve, "the schema changed from 0 to 1")


def test_new_branch_makes_the_plan_stale(table, recorder, spark):
    def branch():
        os.makedirs(os.path.join(table.root, "branch", "branch-b1", "schema"))
        with open(os.path.join(table.root, "schema", "schema-0")) as f, \
                open(os.path.join(table.root, "branch", "branch-b1", "schema", "schema-0"), "w") as g:
            g.write(f.read())

    _stale(table, recorder, spark, branch, r"branches changed \(added \['b1'\]")


def test_later_commits_do_not_make_the_plan_stale(table, recorder, spark):
    plan = make_plan(table.root, retain_min=1)
    table.commit([E(ADD, "later", ("a",))])
    assert apply_plan(plan, recorder, spark=spark).state == "COMPLETED"
    assert PaimonTable(table.root).list_snapshot_ids() == [5, 6]


def test_tampered_and_foreign_plans_are_refused(table, tmp_path, recorder, spark):
    plan = make_plan(table.root, retain_min=1)
    data = bytearray(plan_to_bytes(plan))
    i = data.find(b"snapshot/snapshot-1")
    data[i + len("snapshot/snapshot-")] = ord("9")
    with pytest.raises(PlanRejected):
        plan_from_bytes(bytes(data))
    other = TableBuilder(str(tmp_path / "other"))
    other.commit([E(ADD, "x")])
    foreign = CleanupPlan(**{**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, "table_location": other.root})
    with pytest.raises(PlanRejected, match="the plan is for another table"):
        apply_plan(foreign, recorder, spark=spark)
    assert {"x"} <= {os.path.basename(f) for f in all_files(other.root)}


def test_a_path_escaping_the_table_is_refused_before_anything_is_deleted(table, tmp_path, recorder, spark):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    plan = make_plan(table.root, retain_min=1)
    evil = canonical_actions(list(plan.actions) + [Action(ActionKind.DATA_FILE, "dt=a/../../victim.txt", snapshot_id=2)])
    bad = CleanupPlan(**{**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, "actions": evil})
    before = all_files(table.root)
    with pytest.raises(PlanRejected, match="outside the table root"):
        apply_plan(bad, recorder, spark=spark)
    assert victim.read_text() == "precious" and all_files(table.root) == before


def test_transient_errors_are_retried(table, tmp_path, recorder, spark):
    state = tmp_path / "faults"
    state.mkdir()
    fio = FaultyFileIO(str(state), "*/dt=*/bucket-0/f*", "transient", failures=2)
    plan = make_plan(table.root, retain_min=1)
    report = apply_plan(plan, recorder, spark=spark, fileio=fio)
    assert report.state == "COMPLETED" and report.counts["FAILED"] == 0
    attempts = {r.path: r.attempt for r in recorder.file_records(plan_id=plan.plan_id) if r.kind == ActionKind.DATA_FILE}
    assert attempts and set(attempts.values()) == {3}


def test_a_phase_with_failures_stops_the_apply_and_resume_finishes_it(table, tmp_path, recorder, spark):
    state = tmp_path / "faults"
    state.mkdir()
    fio = FaultyFileIO(str(state), "*/dt=b/bucket-0/f6", "denied")
    plan = make_plan(table.root, retain_min=1)
    report = apply_plan(plan, recorder, spark=spark, fileio=fio)
    assert report.state == "FAILED" and report.failed_phase == "data_files"
    assert "Permission denied" in report.reason
    assert PaimonTable(table.root).list_snapshot_ids() == [1, 2, 3, 4, 5]  # no later phase ran
    failed = list_files(recorder, plan_id=plan.plan_id, outcome="FAILED")
    assert [r["path"] for r in failed] == ["dt=b/bucket-0/f6"] and failed[0]["attempt"] == 4
    assert [r.apply_id for r in incomplete_applies(recorder)] == []  # failed is an end, resumable
    fio.heal()
    reports = resume(recorder, plan.plan_id, spark=spark, fileio=fio)
    assert [r.state for r in reports] == ["COMPLETED"]
    assert PaimonTable(table.root).list_snapshot_ids() == [5]


def test_slow_store_still_completes(table, tmp_path, recorder, spark):
    state = tmp_path / "faults"
    state.mkdir()
    fio = FaultyFileIO(str(state), "*/manifest/*", "slow", delay_s=0.05)
    plan = make_plan(table.root, retain_min=1)
    assert apply_plan(plan, recorder, spark=spark, fileio=fio).state == "COMPLETED"


def test_apply_on_a_table_pypaimon_wrote(tmp_path, recorder, spark):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    plan = make_plan(w.path, retain_min=3)
    report = apply_plan(plan, recorder, spark=spark)
    assert report.state == "COMPLETED"
    assert PaimonTable(w.path).earliest_latest() == (6, 8)
    rows = list_files(recorder, plan_id=plan.plan_id, kind="data-file")
    assert len(rows) == 1 and rows[0]["outcome"] == FileOutcome.DELETED
