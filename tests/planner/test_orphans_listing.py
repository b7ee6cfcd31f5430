"""Where orphan cleaning looks is one rule (``engine.paimon.orphans.ListedDirs``): the walk of the store and a
listing of every file below the table and its external roots (what an inventory holds) plan the same files,
and refuse the same foreign tables."""

from __future__ import annotations

import os

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.orphans import ListedFile, list_orphan_candidates
from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.planner.test_orphans import NOW, age, junk
from tests.support.table_builder import ADD, E, TableBuilder

P = dict(partition_keys=("dt", "hr"), partition_types=("STRING", "INT"))

LISTED = [  # junk orphan cleaning finds: every file directly in a directory it lists
    ("orphan-data-file", "data/dt=a/hr=1/bucket-0/junk-1"),
    ("orphan-data-file", "data/dt=z/hr=9/bucket-3/junk-2"),  # a bucket directory holding only junk
    ("orphan-index-file", "index/index-junk"),
    ("orphan-manifest", "manifest/manifest-junk"),
    ("orphan-statistics", "statistics/stat-junk"),
    ("stray-changelog-file", "changelog/UNKNOWN-c"),
    ("stray-snapshot-file", "branch/branch-b1/snapshot/UNKNOWN-b"),
    ("stray-snapshot-file", "snapshot/UNKNOWN"),
]
NOT_LISTED = [  # junk it never looks at
    "dt=a/hr=1/bucket-0/junk-outside-path-directory", "data/dt=a/junk-at-a-partition-level",
    "data/dt=a/hr=1/bucket-0/sub/junk-deeper", "data/tmp/junk", "tmp/junk", "junk-at-the-root",
    "data/junk-at-the-data-root", "data/hr=1/dt=a/bucket-0/junk-keys-swapped", "tag/junk", "schema/junk",
    "snapshot/snapshot-9x", "consumer/junk", "branch/branch-b1/tag/junk",
]
EXT_LISTED = ["dt=a/hr=1/bucket-0/junk-ext"]
EXT_NOT_LISTED = ["junk-at-the-external-root", "dt=a/hr=1/junk", "dt=a/hr=1/bucket-0/sub/junk"]


@pytest.fixture
def table(tmp_path):
    """A table with a data-file.path-directory and an external root, a branch, files Paimon wrote in all
    of them, and junk inside and outside the directories orphan cleaning lists."""
    ext = str(tmp_path / "ext")
    b = TableBuilder(str(tmp_path / "t"), options={"data-file.path-directory": "data",
                                                   "data-file.external-paths": f"file://{ext}"}, **P)
    b.commit([E(ADD, "data-1", ("a", 1)),
              E(ADD, "data-ext-1", ("a", 1), external_path=f"{ext}/dt=a/hr=1/bucket-0/data-ext-1")])
    b.create_branch("b1", 1).commit([E(ADD, "data-b-1", ("b", 2))])
    b.commit([E(ADD, "data-2", ("a", 2))])
    for _, rel in LISTED:
        junk(b.root, rel)
    for rel in NOT_LISTED:
        junk(b.root, rel)
    for rel in EXT_LISTED + EXT_NOT_LISTED:
        junk(ext, rel)
    age(b.root)
    age(ext)
    return b.root, ext


def every_file(*roots) -> list[ListedFile]:
    """Every file below ``roots``, as an inventory of the store lists them."""
    out = []
    for root in roots:
        for d, _, files in os.walk(root):
            for name in files:
                p = os.path.join(d, name)
                st = os.stat(p)
                out.append(ListedFile(p, st.st_size, st.st_mtime_ns // 1_000_000))
    return out


def written(root, ext) -> list[ListedFile]:
    """The files the table uses, as the store lists them: a listing that leaves one out is incomplete."""
    junk_paths = {os.path.join(root, rel) for _, rel in LISTED} | {os.path.join(ext, rel) for rel in EXT_LISTED}
    return [f for f in list_orphan_candidates(open_table(root)) if f.path not in junk_paths]


def plan(root, listing):
    return plan_orphans(open_table(root), listing, now_ms=NOW, options=resolve_orphan_options({}))


def planned(p):
    return sorted((str(a.kind), a.path) for a in p.actions)


def test_the_walk_and_a_listing_of_everything_plan_the_same_files(table):
    root, ext = table
    expected = sorted(LISTED + [("orphan-data-file", f"{ext}/{rel}") for rel in EXT_LISTED])
    walked = list_orphan_candidates(open_table(root))
    assert planned(plan(root, walked)) == expected
    everything = every_file(root, ext)
    from_everything = plan(root, everything)
    assert planned(from_everything) == expected
    assert from_everything.stats["listed"] == len(walked)
    assert from_everything.stats["ignored_paths"] == len(everything) - len(walked)


@pytest.mark.parametrize("holder", ["data/dt=a", "data", "data/dt=a/hr=1/bucket-0", "manifest",
                                    "branch/branch-b1/snapshot", "<ext>", "<ext>/dt=a/hr=1"])
def test_another_table_inside_a_listed_directory_is_refused_either_way(table, holder):
    root, ext = table
    holder = holder.replace("<ext>", ext) if holder.startswith("<ext>") else os.path.join(root, holder)
    junk(holder, "schema/schema-0")
    message = f"{holder} holds another Paimon table's metadata \\({holder}/schema/schema-0\\)"
    with pytest.raises(PlanRejected, match=message):
        list_orphan_candidates(open_table(root))
    with pytest.raises(PlanRejected, match=message):
        plan(root, every_file(root, ext))


@pytest.mark.parametrize("holder", ["tmp/copy", "data/dt=a/hr=1/bucket-0/sub", "<ext>/dt=a/hr=1/bucket-0/sub"])
def test_another_table_outside_the_listed_directories_but_under_a_root_is_refused_either_way(table, holder):
    # issue 31: a table nested anywhere under the table's roots shares its storage, listed directory or not
    from lakesweep.engine.errors import SharedStorage
    from lakesweep.planner.kinds import plan_kind

    root, ext = table
    holder = holder.replace("<ext>", ext) if holder.startswith("<ext>") else os.path.join(root, holder)
    junk(holder, "schema/schema-0")
    message = f"the Paimon table at {holder} stores files at {holder} \\(location\\), which lies in"
    t = open_table(root)
    with pytest.raises(SharedStorage, match=message):  # the store: its roots listed for other tables
        plan_kind("orphans", "paimon").read_and_plan(t, now_ms=NOW, options=resolve_orphan_options(t.options))
    with pytest.raises(SharedStorage, match=message):  # a full listing (an inventory): checked path by path
        plan(root, every_file(root, ext))


def test_a_listed_file_of_a_branch_that_does_not_exist_is_ignored(table):
    root, ext = table
    gone = ListedFile(os.path.join(root, "branch", "branch-gone", "snapshot", "UNKNOWN"), 4, 0)
    p = plan(root, [*written(root, ext), gone])
    assert p.actions == () and p.stats["ignored_paths"] == 1


def test_a_path_listed_twice_counts_with_its_newest_time(table):
    root, ext = table
    path = os.path.join(root, "data", "dt=a", "hr=1", "bucket-0", "junk-1")
    old, young, unknown = (ListedFile(path, 4, t) for t in (0, NOW, None))
    used = written(root, ext)
    for listing, kept in (([old, young], "kept_young"), ([young, old], "kept_young"),
                          ([old, unknown, old], "kept_unknown_time")):
        p = plan(root, [*used, *listing])
        assert p.actions == () and p.stats[kept] == 1, listing
        assert p.stats["warnings"][-1] == ("1 path(s) were listed more than once; each counts with its newest "
                                           "modification time")
    assert planned(plan(root, [*used, old, old])) == [("orphan-data-file", "data/dt=a/hr=1/bucket-0/junk-1")]


def test_empty_directories_under_the_path_directory_and_an_external_root(table):
    """With ``--empty-dirs``: the directories holding only junk, below ``data/`` and the external root, up
    to but not including those roots; a directory with a live file or junk nothing plans stays."""
    root, ext = table
    t = open_table(root)
    p = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}, empty_dirs=True))
    dirs = sorted(a.path for a in p.actions if a.kind == "orphan-empty-dir")
    assert dirs == ["data/dt=z", "data/dt=z/hr=9", "data/dt=z/hr=9/bucket-3"]
    # the external bucket directory holds a live file beside its junk: it stays, as do the roots
    assert not any(d.startswith("/") for d in dirs)
    junk(ext, "dt=q/hr=3/bucket-1/junk-only")
    p = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}, empty_dirs=True))
    assert sorted(a.path for a in p.actions if a.kind == "orphan-empty-dir" and a.path.startswith("/")) == [
        f"{ext}/dt=q", f"{ext}/dt=q/hr=3", f"{ext}/dt=q/hr=3/bucket-1"]


def test_a_listing_is_read_once_after_the_used_set_and_streamed(table, monkeypatch):
    """The planner takes a listing already made and reads it once, after the used set (so an inventory
    scan can stream it a batch at a time)."""
    import lakesweep.planner.paimon.orphans as planner_mod
    root, _ = table
    t = open_table(root)
    events = []
    real = planner_mod.read_used_names
    monkeypatch.setattr(planner_mod, "read_used_names", lambda table: events.append("used") or real(table))

    def listing():
        events.append("listing started")
        yield from list_orphan_candidates(t)
        events.append("listing done")

    p = plan_orphans(t, listing(), now_ms=NOW, options=resolve_orphan_options({}),
                     source=lambda: {"from": "test", "read": list(events)})
    assert events == ["used", "listing started", "listing done"]
    assert p.stats["listing"] == {"from": "test", "read": events}  # asked for once the listing was read
    assert sorted(a.path for a in p.actions if not a.path.startswith("/")) == sorted(rel for _, rel in LISTED)
