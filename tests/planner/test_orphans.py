"""Orphan planning on tables pypaimon wrote: what is planned, what is kept, and every guard refusing."""

from __future__ import annotations

import os
import shutil
import time

import pytest

import lakesweep.engine.paimon.orphans as orphans_mod
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import OrphanKind
from lakesweep.engine.paimon.orphans import ListedFile, list_orphan_candidates
from lakesweep.engine.paimon.reachability import reachable_paths
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import kind_spec
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.applier.test_safety import Lake

DAY = 86_400_000
NOW = int(time.time() * 1000)


def age(root, rel=None, *, days=3):
    """Set the modification time of ``rel`` (or of every file of the table) ``days`` back."""
    t = NOW / 1000 - days * 86400  # against the plans' now, however long the suite has run
    paths = [os.path.join(root, rel)] if rel else [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
    for p in paths:
        os.utime(p, (t, t))


def junk(root, rel, *, days=3):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write("junk")
    age(root, rel, days=days)


def plan(root, *, now=NOW, listing=None, **flags):
    t = open_table(root)
    listing = list_orphan_candidates(t) if listing is None else listing
    return plan_orphans(t, listing, now_ms=now, options=resolve_orphan_options({}, **flags))


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)  # snapshot 1's file of dt=a is no longer live, but snapshot 1 still holds it
    age(lake.root)
    return lake


def planned(p):
    return sorted((str(a.kind), a.path) for a in p.actions)


def test_only_old_unused_files_in_paimon_directories_are_planned(lake):
    junk(lake.root, "snapshot/UNKNOWN-1")
    junk(lake.root, "manifest/manifest-list-dead-0")
    junk(lake.root, "dt=a/bucket-0/data-dead-0.parquet")
    junk(lake.root, "dt=a/bucket-9/UNKNOWN-2")  # a bucket directory holding only junk
    junk(lake.root, "dt=a/bucket-0/data-young-0.parquet", days=0)
    junk(lake.root, "tmp/data-x-0.parquet")
    junk(lake.root, "_upload/part-0")
    junk(lake.root, "dt=a/tmp/y")
    junk(lake.root, "snapshot/snapshot-1x.tmp")  # starts with snapshot-: Java never cleans it
    p = plan(lake.root)
    assert planned(p) == [
        ("orphan-data-file", "dt=a/bucket-0/data-dead-0.parquet"),
        ("orphan-data-file", "dt=a/bucket-9/UNKNOWN-2"),
        ("orphan-manifest", "manifest/manifest-list-dead-0"),
        ("stray-snapshot-file", "snapshot/UNKNOWN-1"),
    ]
    assert [p.phase_name(a.phase) for a in p.actions] == ["stray_metadata"] + ["orphan_files"] * 3
    assert p.stats["kept_young"] == 1 and p.stats["kept_used"] > 0
    [bucket9] = [a for a in p.actions if "bucket-9" in a.path]
    assert (bucket9.partition, bucket9.bucket) == ("dt=a", 9)


def test_a_file_only_a_tag_or_an_old_snapshot_holds_is_kept(lake):
    lake.table.create_tag("t1", snapshot_id=1)
    os.remove(os.path.join(lake.root, "snapshot", "snapshot-1"))  # now only the tag holds snapshot 1's file
    assert plan(lake.root).actions == ()


def test_a_file_only_a_branch_holds_is_kept(lake):
    lake.table.create_tag("t3", snapshot_id=3)
    lake.table.branch_manager().create_branch("b", "t3")
    lake.commit("c", branch="b")
    age(lake.root)
    p = plan(lake.root)
    assert p.actions == ()
    assert p.stats["kept_used"] == p.stats["listed"]


def test_a_file_without_a_modification_time_is_kept(lake):
    path = os.path.join(lake.root, "dt=a", "bucket-0", "data-dead-0.parquet")
    p = plan(lake.root, listing=[*list_orphan_candidates(open_table(lake.root)), ListedFile(path, 4, None)])
    assert p.actions == () and p.stats["kept_unknown_time"] == 1
    assert p.stats["warnings"] == ["1 listed file(s) have no modification time and are kept"]


def test_a_listed_path_outside_paimon_directories_is_ignored(lake):
    outside = [(os.path.join(lake.root, "tmp", "x"), 1, 0), (os.path.join(lake.root, "schema", "schema-0"), 1, 0)]
    p = plan(lake.root, listing=[*list_orphan_candidates(open_table(lake.root)), *outside])
    assert p.actions == () and p.stats["ignored_paths"] == 2


def test_the_plan_is_deterministic(lake):
    junk(lake.root, "dt=b/bucket-0/UNKNOWN")
    assert plan(lake.root).plan_id == plan(lake.root).plan_id


# -- guards ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("older_than", ["0 s", "2999-01-01T00:00:00Z", str(NOW)], ids=["0 s", "far ahead", "now"])
def test_older_than_at_or_after_now_is_refused(lake, older_than):
    with pytest.raises(PlanRejected, match=f"--older-than {older_than} is not before now .*: files being written "
                                           "now, not yet committed, would look unused"):
        plan(lake.root, older_than=older_than)


def test_older_than_below_an_hour_needs_force(lake):
    junk(lake.root, "dt=a/bucket-0/UNKNOWN", days=0.01)  # 14 minutes old
    with pytest.raises(PlanRejected, match="--older-than 10 min keeps only files younger than 10 min: a writer "
                                           "that takes longer .* add --force if no writer is running"):
        plan(lake.root, older_than="10 min")
    assert planned(plan(lake.root, older_than="10 min", force=True)) == [("orphan-data-file", "dt=a/bucket-0/UNKNOWN")]
    assert plan(lake.root, older_than="1 h").actions == ()


def test_an_unreadable_manifest_aborts_planning(lake):
    junk(lake.root, "dt=a/bucket-0/UNKNOWN")
    manifest = sorted(f for f in os.listdir(os.path.join(lake.root, "manifest")) if f.startswith("manifest-")
                      and not f.startswith("manifest-list-"))[0]
    with open(os.path.join(lake.root, "manifest", manifest), "wb") as f:
        f.write(b"not avro")
    with pytest.raises(PlanRejected, match=f"orphan cleaning cannot tell which files .* uses: .*{manifest}"):
        plan(lake.root)


def test_a_missing_manifest_list_aborts_planning(lake):
    junk(lake.root, "dt=a/bucket-0/UNKNOWN")
    snap = open_table(lake.root).snapshot(1)
    os.remove(os.path.join(lake.root, "manifest", snap.delta_manifest_list))
    with pytest.raises(PlanRejected, match=f"{snap.delta_manifest_list}: manifest list not found"):
        plan(lake.root)


def test_a_used_set_that_misses_a_file_of_the_latest_snapshot_aborts(lake, monkeypatch):
    junk(lake.root, "dt=a/bucket-0/UNKNOWN")
    real = orphans_mod.used_names

    def lossy(table):
        used = real(table)
        [(view, latest)] = used.latest
        dropped = sorted(os.path.basename(p) for p in reachable_paths(view, latest, with_changelog=False)
                         if p.endswith(".parquet"))[-1]
        return orphans_mod.UsedNames(used.names - {dropped}, used.latest)

    monkeypatch.setattr(orphans_mod, "used_names", lossy)
    with pytest.raises(PlanRejected, match=r"the used files read for orphan cleaning miss .*\.parquet \(named by manifest "
                                           r"manifest-[^)]*\), which "
                                           r"snapshot 3 of branch 'main' references; nothing was planned"):
        plan(lake.root)


def test_a_table_whose_snapshot_directory_lists_empty_is_refused(lake):
    junk(lake.root, "dt=a/bucket-0/UNKNOWN")
    lake.table.create_tag("t1", snapshot_id=1)  # a tag alone must not stand for the whole table
    snapshots = os.path.join(lake.root, "snapshot")
    shutil.move(snapshots, snapshots + "-moved")
    with pytest.raises(PlanRejected, match=f"^orphan cleaning found no snapshot in {lake.root} or any of its "
                                           "branches, so every file of the table would look unused; nothing "
                                           "was planned"):
        plan(lake.root)


def test_a_branch_without_a_schema_aborts_planning(lake):
    junk(lake.root, "dt=a/bucket-0/UNKNOWN")
    os.makedirs(os.path.join(lake.root, "branch", "branch-empty", "snapshot"))
    with pytest.raises(PlanRejected, match="branch 'empty' has no schema"):
        plan(lake.root)


def test_another_tables_metadata_inside_the_listed_directories_is_refused(lake, tmp_path):
    other = Lake(tmp_path / "other")
    nested = os.path.join(lake.root, "dt=a", "schema")
    shutil.copytree(os.path.join(other.root, "schema"), nested)
    with pytest.raises(PlanRejected, match=f"{os.path.join(lake.root, 'dt=a')} holds another Paimon table's "
                                           f"metadata \\({nested}/schema-0\\)"):
        plan(lake.root)


def test_the_planner_lists_no_directory_it_may_delete_from(lake):
    junk(lake.root, "dt=a/bucket-0/UNKNOWN")
    t = open_table(lake.root)
    listing = list_orphan_candidates(t)
    listed = []
    real = t.fileio.list
    t.fileio.list = lambda path, recursive=False: listed.append(path) or real(path, recursive=recursive)
    p = plan_orphans(t, listing, now_ms=NOW, options=resolve_orphan_options({}))
    assert planned(p) == [("orphan-data-file", "dt=a/bucket-0/UNKNOWN")]
    assert listed and {os.path.relpath(d, lake.root).split("/")[0] for d in listed} <= {"snapshot", "tag", "changelog",
                                                                                        "branch", "schema"}


def test_kinds_are_by_name_except_the_stray_ones_and_directories():
    assert {k for k in OrphanKind if not kind_spec(k).by_name} == {OrphanKind.STRAY_SNAPSHOT_FILE,
                                                                   OrphanKind.STRAY_CHANGELOG_FILE,
                                                                   OrphanKind.EMPTY_DIR}
