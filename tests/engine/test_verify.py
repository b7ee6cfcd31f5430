"""``verify_table`` on tables pypaimon wrote: a whole table passes, and each kind of damage is caught,
named with what needs the file."""

from __future__ import annotations

import os

import pytest

from lakesweep.engine.paimon.reachability import reachable_paths
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import GAP, HINT, MISSING, SIZE, UNREADABLE, verify_table
from tests.applier.test_safety import Lake


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)  # snapshot 1's file of dt=a stays referenced by snapshot 1 only
    return lake


def verify(lake, **kw):
    return verify_table(open_table(lake.root), **kw)


def dropped_by_snapshot_3(lake):
    """Snapshot 1's file of dt=a, which snapshots 1 and 2 read and the overwrite of snapshot 3 dropped."""
    t = open_table(lake.root)
    (path,) = reachable_paths(t, t.snapshot(1), with_changelog=False) - reachable_paths(
        t, t.snapshot(3), with_changelog=False) - {p for p in reachable_paths(t, t.snapshot(1), with_changelog=False)
                                                   if "/manifest/" in p}
    return path


def test_a_whole_table_passes_with_every_holder_counted(lake):
    lake.table.create_tag("t2", snapshot_id=2)
    r = verify(lake, unreferenced=True)
    assert r.whole, r.problems
    assert r.holders == {"snapshots": 3, "tags": 1, "changelogs": 0, "branches": 0}
    assert r.files > 6 and r.unreferenced == ()
    assert r.to_json()["whole"] is True


def test_a_deleted_live_file_is_missing_and_names_the_snapshot_that_needs_it(lake):
    t = open_table(lake.root)
    (b,) = [p for p in reachable_paths(t, t.snapshot(3), with_changelog=False) if "/dt=b/" in p]
    os.remove(b)
    r = verify(lake)
    assert not r.whole
    (p,) = r.problems
    assert p.path == b
    assert p.kind == MISSING and p.needed_by == "snapshot 2" and p.holders == 2  # snapshots 2 and 3 read it


def test_a_file_only_an_old_snapshot_or_a_tag_needs_is_checked(lake):
    path = dropped_by_snapshot_3(lake)
    lake.table.create_tag("t1", snapshot_id=1)
    os.remove(path)
    r = verify(lake)
    (p,) = r.problems
    assert (p.kind, p.path, p.needed_by, p.holders) == (MISSING, path, "snapshot 1", 3)  # snapshots 1, 2, tag t1


def test_a_file_only_a_branch_needs_is_checked(lake):
    lake.table.create_tag("t3", snapshot_id=3)
    lake.table.branch_manager().create_branch("b", "t3")
    lake.commit("c", branch="b")
    b = open_table(lake.root, branch="b")
    (new,) = [p for p in reachable_paths(b, b.snapshot(4), with_changelog=False) if "dt=c" in p]
    os.remove(new)
    r = verify(lake)
    assert r.holders["branches"] == 1
    (p,) = r.problems
    assert (p.kind, p.path, p.needed_by) == (MISSING, new, "snapshot 4 of branch 'b'")


def test_a_file_of_another_size_than_recorded_is_damaged(lake):
    t = open_table(lake.root)
    live = sorted(p for p in reachable_paths(t, t.snapshot(3), with_changelog=False) if p.endswith(".parquet"))
    with open(live[0], "ab") as f:
        f.write(b"x")
    (p,) = verify(lake).problems
    assert p.kind == SIZE and p.path == live[0] and "metadata records" in p.detail


def test_a_missing_manifest_list_and_an_unreadable_manifest_are_problems(lake):
    t = open_table(lake.root)
    s2 = t.snapshot(2)
    os.remove(t.paths.manifest(s2.delta_manifest_list))
    r = verify(lake)
    assert (MISSING, t.paths.manifest(s2.delta_manifest_list), "snapshot 2") in {
        (p.kind, p.path, p.needed_by) for p in r.problems}
    # nothing is known of what snapshot 2 needs, so the unreferenced files are not worked out
    assert verify(lake, unreferenced=True).unreferenced is None

    s3 = t.snapshot(3)
    manifest = t.paths.manifest(t.manifest_list(s3.delta_manifest_list)[0].file_name)
    with open(manifest, "wb") as f:
        f.write(b"not avro")
    assert UNREADABLE in {p.kind for p in verify(lake).problems}


def test_a_gap_between_earliest_and_latest_is_a_problem(lake):
    lake.commit("b")
    os.remove(os.path.join(lake.root, "snapshot", "snapshot-2"))
    os.remove(os.path.join(lake.root, "snapshot", "snapshot-3"))
    r = verify(lake)
    (p,) = [p for p in r.problems if p.kind == GAP]
    assert p.path.endswith("snapshot/snapshot-2") and "snapshots 2 to 3 are missing" in p.detail


def test_a_latest_hint_ahead_of_the_newest_snapshot_is_a_problem_a_lagging_one_a_note(lake):
    hint = os.path.join(lake.root, "snapshot", "LATEST")
    with open(hint, "w") as f:
        f.write("9")
    (p,) = verify(lake).problems
    assert p.kind == HINT and p.path == hint and "LATEST says snapshot 9" in p.detail
    with open(hint, "w") as f:
        f.write("2")
    r = verify(lake)
    assert r.whole and any("lags" in n for n in r.notes)


def test_a_commit_or_an_expiry_landing_while_the_snapshots_are_listed_is_no_problem(lake, monkeypatch):
    """A writer commits (snapshot 4 and LATEST) right after verify lists the snapshot directory, and an
    expiry removes snapshot 1 and moves EARLIEST then too: LATEST was read before the listing, EARLIEST is
    read after it, so neither hint is ahead of what was listed."""
    from lakesweep.engine.paimon.table import PaimonTable

    listing = PaimonTable.list_snapshot_ids
    landed = []

    def listed_then_written(self):
        ids = listing(self)
        if not landed:
            lake.commit("b")
            landed.append(4)
            os.remove(os.path.join(lake.root, "snapshot", "snapshot-1"))
            with open(os.path.join(lake.root, "snapshot", "EARLIEST"), "w") as f:
                f.write("2")
        return ids

    monkeypatch.setattr(PaimonTable, "list_snapshot_ids", listed_then_written)
    r = verify(lake)
    assert landed and open_table(lake.root).earliest_latest() == (2, 4)
    assert r.whole and r.problems == () and r.holders["snapshots"] == 2, r.problems


def test_snapshots_below_the_earliest_hint_are_noted_not_checked(lake):
    t = open_table(lake.root)
    os.remove(t.paths.manifest(t.snapshot(1).delta_manifest_list))  # only snapshot 1 reads it
    assert not verify(lake).whole
    with open(os.path.join(lake.root, "snapshot", "EARLIEST"), "w") as f:
        f.write("2")
    r = verify(lake)
    assert r.whole and r.holders["snapshots"] == 2
    assert any("below its EARLIEST hint" in n for n in r.notes)


def test_unreferenced_files_are_listed_and_do_not_make_the_table_unwhole(lake):
    junk = os.path.join(lake.root, "dt=a", "bucket-0", "data-junk-0.parquet")
    stray = os.path.join(lake.root, "snapshot", "UNKNOWN-1")
    for p in (junk, stray):
        with open(p, "w") as f:
            f.write("junk")
    r = verify(lake, unreferenced=True)
    assert r.whole and sorted(f.path for f in r.unreferenced) == sorted([junk, stray])
    assert r.to_json()["unreferenced_bytes"] == 8


def test_only_limits_the_check_to_the_given_locations(lake):
    t = open_table(lake.root)
    live = sorted(p for p in reachable_paths(t, t.snapshot(3), with_changelog=False) if p.endswith(".parquet"))
    os.remove(live[0])
    os.remove(live[1])
    r = verify(lake, only=[live[1], "/elsewhere/x"])
    assert [p.path for p in r.problems] == [live[1]] and r.files == 1 and r.only == 2


def test_a_snapshot_an_expiry_takes_during_the_walk_is_no_damage(lake, monkeypatch):
    from lakesweep.engine.paimon.table import PaimonTable

    read = PaimonTable.snapshot

    def expired_on_read(self, sid):
        if sid == 1:
            os.remove(self.snapshot_path(1))  # gone between the listing and the read
        return read(self, sid)

    monkeypatch.setattr(PaimonTable, "snapshot", expired_on_read)
    r = verify(lake)
    assert r.whole and r.holders["snapshots"] == 2


def test_a_snapshot_gone_between_two_others_is_missing(lake, monkeypatch):
    from lakesweep.engine.paimon.table import PaimonTable

    read = PaimonTable.snapshot

    def gone_on_read(self, sid):
        if sid == 2:
            os.remove(self.snapshot_path(2))
        return read(self, sid)

    monkeypatch.setattr(PaimonTable, "snapshot", gone_on_read)
    r = verify(lake)
    assert [(p.kind, os.path.basename(p.path), p.needed_by) for p in r.problems] == [
        (MISSING, "snapshot-2", "snapshot 2")]
