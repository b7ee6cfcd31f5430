"""Apply's gates do not depend on the plan header: whatever requirements a plan file lists, apply re-reads
what the live table needs and refuses a plan that would delete any of it. Forged plans (actions added, the
id recomputed, requirements cut down) against tables pypaimon wrote."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import StalePlan
from lakesweep.engine.paimon.kinds import ActionKind, OrphanKind
from lakesweep.engine.paimon.orphans import list_orphan_candidates
from lakesweep.engine.paimon.requirements import AssertTableIdentity
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import Action
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.applier.test_safety import Lake, forge, plan_for, refused_events
from tests.planner.test_orphans import NOW, age, junk
from tests.support.table_builder import all_files


def inside_history(lake: Lake) -> None:
    """1 add a, 2 add b, 3 add a (a file only snapshot 3 reads), 4 overwrite a, 5 add b, 6 add b."""
    lake.commit("a")
    lake.commit("b")
    lake.commit("a")
    lake.commit("a", overwrite=True)
    lake.commit("b")
    lake.commit("b")


def only_in_snapshot_3(root: str) -> dict[str, str]:
    """A data file and a manifest list that snapshot 3 alone reads, as relative paths."""
    t = open_table(root)
    s3 = t.snapshot(3)
    others = set()
    for sid in (1, 2, 4, 5, 6):
        s = t.snapshot(sid)
        others |= {e.file.file_name for e in t.live_entries(s)}
        others |= {s.base_manifest_list, s.delta_manifest_list}
    [entry] = [e for e in t.live_entries(s3) if e.file.file_name not in others]
    assert s3.delta_manifest_list not in others
    return {"data": t.paths.relative(t.paths.data_file(entry.partition, entry.bucket, entry.file)),
            "list": t.paths.relative(t.paths.manifest(s3.delta_manifest_list))}


def assert_refused_and_whole(lake, plan, recorder, victim, before):
    with pytest.raises(StalePlan, match=f"{victim} is still used by the retained snapshot 3 in the live table"):
        apply_plan(plan, recorder, executor=DriverExecutor())
    assert all_files(lake.root) == before
    assert lake.rows(snapshot=3) == [0, 1, 2]  # Paimon's reader still reads the snapshot the file lives in
    assert len(refused_events(recorder, plan)) == 1
    assert not [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "ApplyStarted"]
    assert recorder.file_records(plan_id=plan.plan_id) == []


@pytest.mark.parametrize("which, kind", [("data", ActionKind.DATA_FILE), ("list", ActionKind.MANIFEST_LIST)])
def test_a_forged_expire_plan_cannot_delete_a_file_only_a_snapshot_after_its_end_reads(tmp_path, recorder, which,
                                                                                       kind):
    lake = Lake(tmp_path / "wh")
    inside_history(lake)
    plan = plan_for(lake.root, retain_min=5)
    assert (plan.begin, plan.end) == (1, 2)  # the gate's latest (6) and end (2) both lack snapshot 3's files
    victim = only_in_snapshot_3(lake.root)[which]
    forged = forge(plan, Action(kind, victim, snapshot_id=1))
    assert_refused_and_whole(lake, forged, recorder, victim, all_files(lake.root))


def test_a_forged_orphan_plan_cut_to_the_table_identity_cannot_delete_a_file_an_older_snapshot_reads(
        tmp_path, recorder):
    lake = Lake(tmp_path / "wh")
    inside_history(lake)
    junk(lake.root, "dt=a/bucket-0/data-failed-0.parquet")
    age(lake.root)
    t = open_table(lake.root)
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))
    assert [a.path for a in plan.actions] == ["dt=a/bucket-0/data-failed-0.parquet"]
    assert len(plan.requirements) == 3  # the table, its now reached, the every-snapshot re-check
    victim = only_in_snapshot_3(lake.root)["data"]
    forged = forge(plan, Action(OrphanKind.ORPHAN_DATA_FILE, victim, size=1))
    forged = replace(forged, requirements=tuple(r for r in plan.requirements if isinstance(r, AssertTableIdentity)))
    before = all_files(lake.root)
    with pytest.raises(StalePlan, match=f"{victim} is still used by the retained snapshot 3 in the live table"):
        apply_plan(forged, recorder, executor=DriverExecutor())
    assert all_files(lake.root) == before
    assert lake.rows(snapshot=3) == [0, 1, 2]
    assert len(refused_events(recorder, forged)) == 1
    assert recorder.file_records(plan_id=forged.plan_id) == []


def test_a_forged_orphan_plan_without_its_recheck_cannot_delete_a_file_whose_name_the_table_uses(tmp_path,
                                                                                               recorder):
    """With the header's re-check gone, apply still reads the whole used set: every snapshot, tag, changelog
    and branch, matched by name as Paimon does."""
    lake = Lake(tmp_path / "wh")
    inside_history(lake)
    age(lake.root)
    t = open_table(lake.root)
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))
    data = only_in_snapshot_3(lake.root)["data"]
    # The same name in another bucket directory: by path nothing reads it, by name Paimon keeps it.
    twin = data.replace("bucket-0", "bucket-5")
    os.makedirs(os.path.dirname(os.path.join(lake.root, twin)), exist_ok=True)
    with open(os.path.join(lake.root, twin), "wb") as f:
        f.write(b"x")
    forged = replace(forge(plan, Action(OrphanKind.ORPHAN_DATA_FILE, twin, size=1)),
                     requirements=tuple(r for r in plan.requirements if isinstance(r, AssertTableIdentity)))
    before = all_files(lake.root)
    with pytest.raises(StalePlan, match=f"{twin} is named by a file the live table uses"):
        apply_plan(forged, recorder, executor=DriverExecutor())
    assert all_files(lake.root) == before


def test_an_honest_expire_plan_still_applies_with_snapshots_between_its_end_and_the_latest(tmp_path, recorder):
    lake = Lake(tmp_path / "wh")
    inside_history(lake)
    rows = {sid: lake.rows(snapshot=sid) for sid in range(3, 7)}
    plan = plan_for(lake.root, retain_min=4)
    assert (plan.begin, plan.end) == (1, 3)
    report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole
    assert {sid: lake.rows(snapshot=sid) for sid in range(3, 7)} == rows
    assert not os.path.exists(os.path.join(lake.root, "snapshot", "snapshot-2"))
