"""Partition drops applied as Paimon applies them: one OVERWRITE snapshot marking every live file of the
dropped partitions DELETE, on tables Paimon's Java core and pypaimon wrote. Paimon's Java reader must see
the partitions gone, Paimon's own snapshot expiry must accept the snapshot and free exactly the dropped
files, and pypaimon's time travel must still see them in older snapshots.

These tests use the update-time strategy (the partition's newest file against the cut-off), which needs no
partition value to be a date; values-time is covered with the planner's tests and the differential.
"""

from __future__ import annotations

import calendar
import dataclasses
import os
import time

import pytest

import lakesweep.engine.paimon.drop as drop_module
from lakesweep.applier.apply import DriverExecutor, apply_plan, dry_run_plan, resume
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.engine.plan import canonical_actions
from lakesweep.engine.timeutil import system_zone
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import resolve_partition_options
from lakesweep.planner.paimon.partitions import plan_partitions
from tests.applier.test_safety import Lake

pytestmark = pytest.mark.java


def plan_drop(root, *, max_expires=1, now_ms=None):
    """Drop the first ``max_expires`` partitions (by value) whose newest file is older than now."""
    t = open_table(root)
    opts = resolve_partition_options(t.options, expiration_time="1 ms", strategy="update-time",
                                     max_expires=max_expires, system_zone=system_zone())
    return plan_partitions(t, now_ms=now_ms or int(time.time() * 1000), options=opts)


def snapshot_ids(root):
    return sorted(int(n.split("-")[1]) for n in os.listdir(os.path.join(root, "snapshot")) if n.startswith("snapshot-"))


def overwrite_snapshots_by(root, user):
    t = open_table(root)
    return [s for s in snapshot_ids(root) if t.snapshot(s).commit_user == user]


def java_table(paimon_java, tmp_path, kind, seed=11):
    root = str(tmp_path / f"t_{kind}")
    g = paimon_java.generate(root, seed=seed, kind=kind, steps=12, partitions=3, ops={"consumer": 0})
    time.sleep(0.01)  # the newest file strictly older than the plan's now
    return root, g


@pytest.mark.parametrize("kind", ["append", "pk"])
def test_paimon_reads_the_drop_and_its_expiry_frees_exactly_the_dropped_files(tmp_path, paimon_java, kind):
    root, g = java_table(paimon_java, tmp_path, kind)
    latest = snapshot_ids(root)[-1]
    plan = plan_drop(root)
    [part] = plan.scope.partitions
    assert part["partition"] == f"dt={g['partitions'][0]}"
    dropped = {a.path for a in plan.actions}
    assert dropped and all(p.startswith(part["partition"] + "/bucket-") for p in dropped)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
        assert report.state == "COMPLETED" and report.whole
        assert report.counts["COMMITTED"] == len(dropped)
        assert report.commits == [{"phase": "drop_partitions", "version": latest + 1, "already": False,
                                   "label": "snapshot", "attempts": 1}]
        [committed] = [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "Committed"]
        assert committed.version == latest + 1
    snap = open_table(root).snapshot(latest + 1)
    assert (snap.commit_kind, snap.commit_user, snap.commit_identifier) == ("OVERWRITE", f"lakesweep-{plan.plan_id}", 1)
    # Paimon's own reader: the new snapshot holds everything but the dropped partition's files.
    live = paimon_java.live_files(root)["snapshots"]
    assert set(live[str(latest)]) - set(live[str(latest + 1)]) == dropped
    assert not any(f.startswith(part["partition"] + "/") for f in live[str(latest + 1)])
    assert {r["dt"] for r in paimon_java.read_rows(root)} == set(g["partitions"][1:])
    assert any(r["dt"] == g["partitions"][0] for r in paimon_java.read_rows(root, snapshot=latest))
    assert verify_table(open_table(root)).whole
    # Nothing was deleted: Paimon's snapshot expiry removes the dropped files, and only those.
    on_disk = {f for f in dropped if os.path.exists(os.path.join(root, f))}
    assert on_disk == dropped
    paimon_java.expire(root, retain_min=1, retain_max=1, max_deletes=1000)
    assert not any(os.path.exists(os.path.join(root, f)) for f in dropped)
    assert all(os.path.exists(os.path.join(root, f)) for f in paimon_java.live_files(root)["snapshots"][str(latest + 1)])
    assert verify_table(open_table(root)).whole


def test_pypaimon_sees_the_partition_gone_and_time_travel_still_sees_it(tmp_path):
    lake = Lake(tmp_path / "wh")
    for dt in ("a", "b", "a", "c"):
        lake.commit(dt)
    before = snapshot_ids(lake.root)[-1]
    all_rows = lake.rows()
    time.sleep(0.01)
    plan = plan_drop(lake.root)
    assert [p["partition"] for p in plan.scope.partitions] == ["dt=a"]
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        assert apply_plan(plan, recorder, executor=DriverExecutor()).state == "COMPLETED"
    assert lake.rows() == [1, 3]  # ids written to b and c
    assert lake.rows(snapshot=before) == all_rows == [0, 1, 2, 3]
    lake.commit("a")  # a writer may write to the dropped partition again
    assert lake.rows() == [1, 3, 4]


def test_a_commit_to_another_partition_between_plan_and_apply_is_kept(tmp_path, paimon_java):
    root, g = java_table(paimon_java, tmp_path, "append")
    plan = plan_drop(root)
    written = paimon_java.write(root, seed=3, commits=1, partitions=[g["partitions"][1]])
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.commits[0]["version"] == written["latest"] + 1
    live = paimon_java.live_files(root)["snapshots"]
    new, writers = live[str(written["latest"] + 1)], live[str(written["latest"])]
    assert set(writers) - set(new) == {a.path for a in plan.actions}


def test_a_commit_to_a_planned_partition_between_plan_and_apply_refuses_the_plan(tmp_path, paimon_java):
    root, g = java_table(paimon_java, tmp_path, "append")
    plan = plan_drop(root)
    paimon_java.write(root, seed=3, commits=1, partitions=[g["partitions"][0]])
    before = snapshot_ids(root)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(StalePlan, match=rf"partition dt={g['partitions'][0]} changed since planning"):
            apply_plan(plan, recorder, executor=DriverExecutor())
        assert [e.EVENT_TYPE for e in recorder.events(plan_id=plan.plan_id)] == ["PlanRecorded", "ApplyRefused"]
    assert snapshot_ids(root) == before


def test_a_commit_that_takes_the_snapshot_id_makes_the_drop_retry_from_a_fresh_scan(tmp_path, paimon_java,
                                                                                      monkeypatch):
    root, g = java_table(paimon_java, tmp_path, "append")
    plan = plan_drop(root)
    publish = drop_module.MetadataWriter.publish
    raced = []

    def racing_publish(self, snapshot):
        if not raced:  # a writer commits between the drop's scan and its publish
            raced.append(paimon_java.write(root, seed=5, commits=1, partitions=[g["partitions"][2]])["latest"])
        return publish(self, snapshot)

    monkeypatch.setattr(drop_module.MetadataWriter, "publish", racing_publish)
    monkeypatch.setattr(drop_module.time, "sleep", lambda s: None)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.commits[0]["version"] == raced[0] + 1
    live = paimon_java.live_files(root)["snapshots"]
    assert set(live[str(raced[0])]) - set(live[str(raced[0] + 1)]) == {a.path for a in plan.actions}
    # the losing attempt's manifests and lists were removed: every manifest file is referenced
    names = set(os.listdir(os.path.join(root, "manifest")))
    used = set()
    t = open_table(root)
    for sid in snapshot_ids(root):
        s = t.snapshot(sid)
        used |= {s.base_manifest_list, s.delta_manifest_list}
        used |= {m.file_name for m in t.data_manifests(s)}
    assert names == used


class _Crash(BaseException):
    """Stands for kill -9 right after the commit, before the journal hears of it."""


def test_a_crash_after_the_commit_is_resumed_without_a_second_commit(tmp_path, paimon_java, monkeypatch):
    root, _ = java_table(paimon_java, tmp_path, "pk")
    plan = plan_drop(root, max_expires=2)
    real = drop_module.drop_partitions

    def crashing(*args, **kwargs):
        real(*args, **kwargs)
        raise _Crash()

    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        monkeypatch.setattr("lakesweep.engine.paimon.commit.drop_partitions", crashing)
        with pytest.raises(_Crash):
            apply_plan(plan, recorder, executor=DriverExecutor())
        monkeypatch.undo()
        assert len(overwrite_snapshots_by(root, f"lakesweep-{plan.plan_id}")) == 1
        [report] = resume(recorder, executor=DriverExecutor())
        assert (report.state, report.counts["ALREADY_COMMITTED"]) == ("COMPLETED", len(plan.actions))
        assert report.commits[0]["already"] is True
        # applying the plan again changes nothing either
        again = apply_plan(plan, recorder, executor=DriverExecutor())
        assert again.counts["ALREADY_COMMITTED"] == len(plan.actions)
    assert len(overwrite_snapshots_by(root, f"lakesweep-{plan.plan_id}")) == 1


def test_the_dry_run_commits_nothing(tmp_path, paimon_java):
    root, _ = java_table(paimon_java, tmp_path, "append")
    plan = plan_drop(root)
    before = snapshot_ids(root)
    report = dry_run_plan(plan, executor=DriverExecutor())
    assert report.counts["COMMITTED"] == len(plan.actions)  # would commit
    assert snapshot_ids(root) == before


def test_an_edited_plan_that_drops_a_file_of_a_partition_it_does_not_list_is_refused(tmp_path, paimon_java):
    root, _ = java_table(paimon_java, tmp_path, "append")
    plan = plan_drop(root)
    other = plan_drop(root, max_expires=2)
    extra = [a for a in other.actions if a.partition != plan.actions[0].partition][0]
    forged = dataclasses.replace(plan, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in (*plan.actions, extra)]))
    before = snapshot_ids(root)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(PlanRejected, match="names partition .* which do not match the plan's partitions"):
            apply_plan(forged, recorder, executor=DriverExecutor())
    assert snapshot_ids(root) == before


def test_an_edited_plan_that_leaves_out_a_file_of_a_dropped_partition_commits_nothing(tmp_path, paimon_java):
    root, _ = java_table(paimon_java, tmp_path, "pk")
    plan = plan_drop(root)
    assert len(plan.actions) >= 2
    forged = dataclasses.replace(plan, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in plan.actions[1:]]))
    before = snapshot_ids(root)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(forged, recorder, executor=DriverExecutor())
    assert report.state == "FAILED"
    assert f"holds {len(plan.actions)} live files, 1 of them not in the plan, and 0 planned files" in report.reason
    assert snapshot_ids(root) == before


def test_a_null_and_an_empty_partition_that_share_a_name_are_dropped_together(tmp_path):
    from lakesweep.planner.paimon.options import resolve_partition_options as resolve
    from tests.support.table_builder import ADD, E, TableBuilder

    b = TableBuilder(str(tmp_path / "t"), partition_keys=("f0", "f1"), partition_types=("STRING", "STRING"),
                     write_data=False)
    b.commit([E(ADD, "a", ("20230101", None)), E(ADD, "b", ("20230101", "")), E(ADD, "c", ("20230105", "x"))])
    t = open_table(b.root)
    opts = resolve(t.options, expiration_time="2 d", timestamp_formatter="yyyyMMdd", system_zone="UTC")
    plan = plan_partitions(t, now_ms=calendar.timegm((2023, 1, 6, 0, 0, 0)) * 1000, options=opts)
    assert [p["partition"] for p in plan.scope.partitions] == ["f0=20230101/f1=__DEFAULT_PARTITION__"] * 2
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor(), verify=False)
    assert report.state == "COMPLETED" and report.counts["COMMITTED"] == 2
    t = open_table(b.root)
    assert [e.file.file_name for e in t.live_entries(t.snapshot(2))] == ["c"]
