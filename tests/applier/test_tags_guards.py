"""Tag expiry's own guards at apply, on a history with exact file lifetimes: an edited plan naming a live
file, a tag whose snapshot still exists or is a gap, a branch created from a tag between plan and apply,
and a failed apply of a tag plan resumed after its tag files are gone."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, resume
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.paimon.kinds import TagKind
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.engine.plan import Action, canonical_actions
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import resolve_tag_options
from lakesweep.planner.paimon.tags import plan_tags, read_tags
from tests.applier.test_tags import branch_from_tag
from tests.planner.conftest import expire
from tests.support.faulty_fileio import FaultyFileIO
from tests.support.table_builder import ADD, DELETE, E, TableBuilder, all_files

X = ("x",)
BUCKET = "dt=x/bucket-0/"


@pytest.fixture
def history(tmp_path) -> TableBuilder:
    """Snapshots 1..8 of one bucket, tags t3 (snapshot 3) and t6 (snapshot 6), expired to [5, 8]. Each
    file's snapshots: a 1-8, b 2-4 (only t3 holds it now), k 2-5 (t3 and the earliest snapshot), c 3-8,
    d 4-6 (the earliest snapshot, not t3), e 5-8, f 6-8, m 6 (snapshot 6 and t6 only), g 7-8, h 8."""
    b = TableBuilder(str(tmp_path / "t"), partition_keys=("dt",), partition_types=("STRING",))
    b.commit([E(ADD, "a", X)])
    b.commit([E(ADD, "b", X), E(ADD, "k", X)])
    b.commit([E(ADD, "c", X)])
    b.tag("t3", 3)
    b.commit([E(ADD, "d", X)])
    b.commit([E(DELETE, "b", X), E(ADD, "e", X)])
    b.commit([E(DELETE, "k", X), E(ADD, "f", X), E(ADD, "m", X)])
    b.tag("t6", 6)
    b.commit([E(DELETE, "d", X), E(DELETE, "m", X), E(ADD, "g", X)])
    b.commit([E(ADD, "h", X)])
    expire(b.root, retain_min=4, retain_max=4)
    assert open_table(b.root).earliest_latest() == (5, 8)
    return b


def plan(root, **flags):
    t = open_table(root)
    opts = resolve_tag_options(t.options, system_zone="UTC", **flags)
    return plan_tags(t, now_ms=int(time.time() * 1000), options=opts, read=read_tags(t, options=opts))


def apply(p, tmp_path, **kw):
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        return apply_plan(p, recorder, executor=DriverExecutor(), **kw)


def data_files(root) -> list[str]:
    return sorted(os.listdir(os.path.join(root, BUCKET)))


def edited(p, *extra: Action):
    return dataclasses.replace(p, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in p.actions] + list(extra)))


def test_an_expired_tag_takes_only_the_files_nothing_else_holds(history, tmp_path):
    p = plan(history.root, names=["t3"])
    t3 = history.snapshots[3]
    assert [(str(a.kind), a.path) for a in p.actions] == [
        ("tag-file", "tag/tag-t3"), ("tag-data-file", BUCKET + "b"),
        ("tag-manifest", "manifest/" + t3["baseManifestList"]), ("tag-manifest", "manifest/" + t3["deltaManifestList"])]
    report = apply(p, tmp_path)
    assert (report.state, report.whole, report.counts["DELETED"]) == ("COMPLETED", True, 4)
    assert data_files(history.root) == ["a", "c", "d", "e", "f", "g", "h", "k", "m"]
    assert verify_table(open_table(history.root)).whole


@pytest.mark.parametrize("name, error, message", [
    ("m", PlanRejected, "action 2 \\(tag-data-file 'dt=x/bucket-0/m'\\) is refused: no tag the plan deletes whose "
                        "snapshot is gone and older than the earliest snapshot 5 holds it"),
    ("d", PlanRejected, "action 2 \\(tag-data-file 'dt=x/bucket-0/d'\\) is refused: no tag the plan deletes"),
    ("k", StalePlan, "tag-data-file dt=x/bucket-0/k is still used by the retained snapshot 5"),
])
def test_an_edited_plan_naming_a_live_file_is_refused(history, tmp_path, name, error, message):
    before = all_files(history.root)
    forged = edited(plan(history.root, names=["t3"]), Action(TagKind.TAG_DATA_FILE, BUCKET + name))
    with pytest.raises(error, match=message):
        apply(forged, tmp_path)
    assert all_files(history.root) == before


def test_an_edited_plan_cannot_take_the_files_of_a_tag_whose_snapshot_exists(history, tmp_path):
    p = plan(history.root, names=["t6"])
    assert [a.path for a in p.actions] == ["tag/tag-t6"] and p.scope.snapshots_gone == []
    with pytest.raises(PlanRejected, match="'dt=x/bucket-0/m'\\) is refused"):
        apply(edited(p, Action(TagKind.TAG_DATA_FILE, BUCKET + "m")), tmp_path)
    assert "m" in data_files(history.root) and os.path.exists(os.path.join(history.root, "tag", "tag-t6"))


def test_a_tag_on_a_missing_snapshot_inside_the_retained_range_goes_alone(history):
    os.remove(os.path.join(history.root, "snapshot", "snapshot-6"))  # a gap: 5 and 7 may share its files
    p = plan(history.root, names=["t6"])
    assert [a.path for a in p.actions] == ["tag/tag-t6"] and p.scope.snapshots_gone == []
    assert p.stats["notes"] == ["snapshot 6 of tag(s) t6 is missing but not older than the earliest snapshot 5: "
                                "the snapshots around it may hold its files, so only the tag file goes"]


def test_a_branch_created_from_a_live_tag_between_plan_and_apply_refuses_the_plan(history, tmp_path):
    p = plan(history.root, names=["t6"])
    branch_from_tag(history.root, "late", "t6")
    with pytest.raises(StalePlan, match="tag 't6' is the tag branch 'late' was created from"):
        apply(p, tmp_path)
    assert os.path.exists(os.path.join(history.root, "tag", "tag-t6"))


def test_a_failed_tag_apply_resumes_after_its_tag_files_are_gone(history, tmp_path):
    state = tmp_path / "faults"
    state.mkdir()
    fio = FaultyFileIO(str(state), "*/bucket-0/b", "denied")
    p = plan(history.root, names=["t3"])
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(p, recorder, executor=DriverExecutor(), fileio=fio)
        assert (report.state, report.failed_phase) == ("FAILED", "tag_data_files")
        assert not os.path.exists(os.path.join(history.root, "tag", "tag-t3"))
        fio.heal()
        [report] = resume(recorder, p.plan_id, executor=DriverExecutor(), fileio=fio)
    assert (report.state, report.whole) == ("COMPLETED", True)
    assert data_files(history.root) == ["a", "c", "d", "e", "f", "g", "h", "k", "m"]


def test_applying_a_tag_plan_again_changes_nothing_more(history, tmp_path):
    p = plan(history.root, names=["t3"])
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        assert apply_plan(p, recorder, executor=DriverExecutor()).state == "COMPLETED"
        after = all_files(history.root)
        report = apply_plan(p, recorder, executor=DriverExecutor())
    assert (report.state, report.whole, report.counts["DELETED"]) == ("COMPLETED", True, 0)
    assert all_files(history.root) == after


def test_a_tag_plan_applied_with_another_journal_is_stale_once_its_tags_are_gone(history, tmp_path):
    p = plan(history.root, names=["t3"])
    assert apply(p, tmp_path).state == "COMPLETED"
    with DuckDBRecorder(tmp_path / "other.duckdb") as recorder:
        with pytest.raises(StalePlan, match="tag 't3' is gone, deleted by something other than this plan"):
            apply_plan(p, recorder, executor=DriverExecutor())


def test_files_a_branch_holds_stay_and_a_branch_expires_only_its_own_tags(tmp_path):
    b = TableBuilder(str(tmp_path / "t"), partition_keys=("dt",), partition_types=("STRING",))
    b.commit([E(ADD, "a", X)])
    b.commit([E(ADD, "b", X)])
    b.tag("t2", 2)
    branch = b.create_branch("br", 2)  # holds snapshot 2's lists and files, as main's tag does
    branch.tag("bt", 2)
    b.commit([E(DELETE, "b", X), E(ADD, "c", X)])
    b.commit([E(ADD, "d", X)])
    expire(b.root, retain_min=2, retain_max=2)
    p = plan(b.root, names=["t2"])
    assert p.scope.snapshots_gone == [2] and [a.path for a in p.actions] == ["tag/tag-t2"]
    t = open_table(b.root, branch="br")
    opts = resolve_tag_options(t.options, names=["bt"], system_zone="UTC")
    bp = plan_tags(t, now_ms=int(time.time() * 1000), options=opts, read=read_tags(t, options=opts))
    assert [a.path for a in bp.actions] == ["branch/branch-br/tag/tag-bt"]
    forged = edited(bp, Action(TagKind.TAG_FILE, "tag/tag-t2"))
    with pytest.raises(PlanRejected, match="tag expiry deletes tag files only as branch/branch-br/tag/tag-<name>"):
        apply(forged, tmp_path)
    assert apply(p, tmp_path).state == "COMPLETED"
    assert data_files(b.root) == ["a", "b", "c", "d"]
    assert verify_table(open_table(b.root, branch="br")).whole
