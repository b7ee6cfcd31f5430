"""Differential: lakesweep's orphan plan against Apache Paimon 0.9's own ``OrphanFilesClean``, on tables
Paimon wrote, with junk injected and aged.

Paimon runs as a dry run (``Harness.orphan_clean``: its file cleaner records instead of deleting) with its
threshold set to the same epoch milliseconds lakesweep plans with: the plan's now minus its default day.
Every file of the table is aged three days first, so every listed file is a candidate and only the used
set keeps it: the comparison exercises the subtraction, not just the age guard.

lakesweep follows Paimon master's ``LocalOrphanFilesClean``. Where 0.9 is documented to differ (it deletes
directories recursively with ``deleteDirectoryQuietly``, and reads every ``snapshot-*`` name as a snapshot id),
and where lakesweep departs from both versions (the last section),
the test names each path on which the two disagree and which side deletes it; everywhere else
the two sets must be equal.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.orphans import list_orphan_candidates, used_names
from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.support.paimon_java import HarnessError

pytestmark = pytest.mark.java

DAY = 86_400_000
HOUR = 3_600_000

BASES = {
    # name: (kind, partitioned, seed, generate options, op weights); no consumers, which would hold expiry
    # file-index sidecars (<data file>.index) are extra files: used by name like the data files
    "append-partitioned": ("append", True, 3, {"bucket": "2", "bucket-key": "id",
                                               "file-index.bloom-filter.columns": "v",
                                               "file-index.in-manifest-threshold": "1 b"}, {"consumer": 0}),
    "append-unpartitioned": ("append", False, 5,
                             {"bucket": "-1", "bucket-key": None, "compaction.min.file-num": None}, {"consumer": 0}),
    # no overwrite: Paimon's overwrite leaves the changelog files its write made uncommitted
    # (test_changelog_files_an_overwrite_left_uncommitted_agree), and these tables start without orphans
    "pk-partitioned": ("pk", True, 11, {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
                       {"overwrite": 0, "consumer": 0}),
    "pk-unpartitioned": ("pk", False, 12, {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
                         {"overwrite": 0, "consumer": 0}),
}


@pytest.fixture(scope="module")
def bases(paimon_java, tmp_path_factory):
    """The tables of ``BASES``, each generated once, on first use; tests work on copies."""
    made: dict[str, tuple[str, dict]] = {}

    def get(name: str) -> tuple[str, dict]:
        if name not in made:
            kind, partitioned, seed, options, ops = BASES[name]
            root = str(tmp_path_factory.mktemp("orphan-bases") / name)
            info = paimon_java.generate(root, seed=seed, kind=kind, steps=14, options=options, ops=ops,
                                        partitioned=partitioned)
            made[name] = (root, info)
        return made[name]

    return get


def copy_of(bases, name: str, tmp_path) -> tuple[str, dict]:
    src, info = bases(name)
    root = str(tmp_path / name)
    shutil.copytree(src, root)
    return root, info


def tree_state(root: str) -> dict[str, tuple]:
    """Every file and directory under ``root``: kind, size and modification time."""
    state = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.stat(p)
            state[os.path.relpath(p, root)] = (n in dirs, st.st_size if n in files else 0, st.st_mtime_ns)
    return state


class Junk:
    """Files and directories injected into a table. ``age()`` makes everything under the root three days
    old (Paimon's own files included), then gives the young junk (an hour old) and the junk with a set
    time theirs."""

    def __init__(self, root: str, now_ms: int):
        self.root, self.now_ms = root, now_ms
        self.mtimes_ns: dict[str, int] = {}

    def file(self, rel: str, *, young: bool = False, mtime_ns: int | None = None) -> str:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("junk")
        if young:
            mtime_ns = (self.now_ms - HOUR) * 1_000_000
        if mtime_ns is not None:
            self.mtimes_ns[rel] = mtime_ns
        return rel

    def dir(self, rel: str, *, young: bool = False) -> str:
        """A directory holding one file named like a data file."""
        self.file(f"{rel}/part-0.parquet", young=young)
        if young:
            self.mtimes_ns[rel] = (self.now_ms - HOUR) * 1_000_000
        return rel

    def age(self) -> None:
        old = (self.now_ms - 3 * DAY) * 1_000_000
        for d, dirs, files in os.walk(self.root):
            for n in dirs + files:
                os.utime(os.path.join(d, n), ns=(old, old))
        for rel, ns in self.mtimes_ns.items():
            os.utime(os.path.join(self.root, rel), ns=(ns, ns))


def paimon_dry_run(harness, root: str, now_ms: int) -> dict[str, bool]:
    """What Paimon 0.9 deletes at ``now_ms`` minus a day: path relative to ``root`` -> is a directory.
    Checks that the dry run changed nothing on disk."""
    before = tree_state(root)
    recorded = harness.orphan_clean(root, older_than_ms=now_ms - DAY)
    assert tree_state(root) == before, "Paimon's dry run changed the table"
    java = {os.path.relpath(p, root): is_dir for p, is_dir in recorded.items()}
    assert not any(p.startswith("..") for p in java), java
    return java


def plan_for(root: str, now_ms: int):
    table = open_table(root)
    plan = plan_orphans(table, list_orphan_candidates(table), now_ms=now_ms, options=resolve_orphan_options({}))
    assert plan.scope.older_than_ms == now_ms - DAY
    return plan


def compare(harness, root: str, now_ms: int) -> tuple[dict[str, bool], set[str]]:
    """Paimon 0.9's dry run and lakesweep's plan at the same threshold: (path -> is a directory) as Paimon
    recorded it, and the paths lakesweep plans, made absolute, both relative to ``root``."""
    java = paimon_dry_run(harness, root, now_ms)
    table = open_table(root)
    ours = {os.path.relpath(table.paths.absolute(a.path), root) for a in plan_for(root, now_ms).actions}
    return java, ours


def now_ms() -> int:
    return int(time.time() * 1000)


def bucket_dirs(root: str, info: dict) -> list[str]:
    dirs = sorted(info["bucketDirs"])
    assert all(os.path.isdir(os.path.join(root, d)) for d in dirs) and dirs
    return dirs


def partition_of(bucket_dir: str) -> str:
    return os.path.dirname(bucket_dir)


# -- agreement ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BASES))
def test_a_table_without_junk_gives_both_sides_nothing(paimon_java, bases, tmp_path, name):
    root, _ = copy_of(bases, name, tmp_path)
    now = now_ms()
    Junk(root, now).age()
    java, ours = compare(paimon_java, root, now)
    assert java == {} and ours == set()
    plan = plan_for(root, now)
    assert plan.stats["kept_used"] == plan.stats["listed"] > 0, "every listed file must be old and used"


@pytest.mark.parametrize("name", sorted(BASES))
def test_failed_writes_stray_metadata_and_junk_buckets_agree(paimon_java, bases, tmp_path, name):
    root, info = copy_of(bases, name, tmp_path)
    now = now_ms()
    fmt = info["options"]["file.format"]
    junk = Junk(root, now)
    first, last = bucket_dirs(root, info)[0], bucket_dirs(root, info)[-1]
    lone_bucket = os.path.join(partition_of(first), "bucket-7")  # a bucket directory holding only junk
    planned = {
        junk.file(f"{first}/data-failed0-0000-0000-0000-000000000000-0.{fmt}"),
        junk.file(f"{last}/data-failed1-0000-0000-0000-000000000000-0.{fmt}"),
        junk.file(f"{first}/changelog-failed2-0000-0000-0000-000000000000-0.{fmt}"),
        junk.file(f"{first}/data-failed3-0000-0000-0000-000000000000-0.{fmt}.index"),
        junk.file(f"{lone_bucket}/data-failed4-0000-0000-0000-000000000000-0.{fmt}"),
        junk.file("manifest/manifest-stray0-0000-0000-0000-000000000000-0"),
        junk.file("manifest/manifest-list-stray1-0000-0000-0000-000000000000-0"),
        junk.file("manifest/index-manifest-stray2-0000-0000-0000-000000000000-0"),
        junk.file("index/index-stray3-0000-0000-0000-000000000000-0"),
        junk.file("statistics/stat-stray4-0000-0000-0000-000000000000-0"),
        junk.file("snapshot/UNKNOWN-stray5"),
        junk.file("snapshot/.snapshot-7.crc"),
        junk.file("changelog/UNKNOWN-stray6"),
    }
    if BASES[name][1]:
        planned.add(junk.file(f"dt=2031-01-01/bucket-0/data-failed5-0000-0000-0000-000000000000-0.{fmt}"))
    # both compare whole milliseconds (floored) with the threshold: older than it is deleted, at it kept
    threshold_ns = (now - DAY) * 1_000_000
    planned.add(junk.file(f"{first}/data-edge0-0000-0000-0000-000000000000-0.{fmt}", mtime_ns=threshold_ns - 1))
    junk.file(f"{first}/data-edge1-0000-0000-0000-000000000000-0.{fmt}", mtime_ns=threshold_ns + 999_999)
    # written within the last day: a write may still commit them
    junk.file(f"{first}/data-young0-0000-0000-0000-000000000000-0.{fmt}", young=True)
    junk.file("manifest/manifest-young1-0000-0000-0000-000000000000-0", young=True)
    junk.file("snapshot/UNKNOWN-young2", young=True)
    # not Paimon's: directories beside the partitions (or the buckets)
    junk.file(f"tmp/data-elsewhere0-0000-0000-0000-000000000000-0.{fmt}")
    junk.file(f"_upload/{first}/data-elsewhere1-0000-0000-0000-000000000000-0.{fmt}")
    junk.age()

    java, ours = compare(paimon_java, root, now)
    assert ours == planned
    assert set(java) == ours
    assert not any(java.values()), "no directory was injected where 0.9 lists"


@pytest.mark.parametrize("name", sorted(BASES))
def test_files_an_interrupted_expiry_left_behind_agree(paimon_java, bases, tmp_path, name):
    """Paimon expires all but two snapshots; every file it deleted except the snapshot files is put back,
    as if its deletes had failed: nothing references them any more (tags still hold theirs)."""
    root, info = copy_of(bases, name, tmp_path)
    before = str(tmp_path / "before")
    shutil.copytree(root, before)
    expired = paimon_java.expire(root, retain_min=2, retain_max=2, max_deletes=10_000)["expired"]
    assert expired == len(info["snapshots"]) - 2
    gone = set(tree_state(before)) - set(tree_state(root))
    left = {p for p in gone if not p.startswith("snapshot/") and os.path.isfile(os.path.join(before, p))}
    for rel in sorted(left):
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        shutil.copy2(os.path.join(before, rel), os.path.join(root, rel))
    now = now_ms()
    Junk(root, now).age()

    java, ours = compare(paimon_java, root, now)
    assert set(java) == ours
    assert not any(java.values())
    assert ours <= left
    # some of each kind expiry deletes: data files, manifests, manifest lists (and the extra files)
    if "file-index.bloom-filter.columns" in info["options"]:
        assert any(p.endswith(".index") for p in ours)
    assert any(p.startswith("manifest/manifest-list-") for p in ours)
    assert any(p.startswith("manifest/manifest-") and "-list-" not in p for p in ours)
    assert any("bucket-" in p for p in ours)


def test_a_branch_keeps_its_files_and_a_dropped_one_leaves_them_to_both(paimon_java, bases, tmp_path):
    """Paimon 0.9 makes a branch from a tag and drops it by deleting ``branch/branch-<name>``: the data,
    manifests and index files the branch's commits wrote into the table's directories stay behind. The
    branch writes partitions whose directory names Paimon escapes too."""
    root, info = copy_of(bases, "pk-partitioned", tmp_path)
    assert info["tags"], "the seed must leave a tag to branch from"
    tag = sorted(info["tags"])[0]
    before_branch = set(tree_state(root))
    paimon_java.create_branch(root, "b1", tag=tag)
    wrote = paimon_java.write(root, branch="b1", seed=7, commits=3,
                              partitions=[*info["partitions"], "a b", "x:y", "100%", "q=r"])
    assert wrote["latest"] > info["tags"][tag]
    written = {p for p in set(tree_state(root)) - before_branch
               if not p.startswith("branch/") and os.path.isfile(os.path.join(root, p))}
    assert any(p.startswith("manifest/manifest-list-") for p in written)
    assert {p.split("/")[0] for p in written if "bucket-" in p} >= {"dt=a b", "dt=x%3Ay", "dt=100%25", "dt=q%3Dr"}

    now = now_ms()
    junk = Junk(root, now)
    stray = junk.file("branch/branch-b1/snapshot/UNKNOWN-stray")
    junk.age()
    java, ours = compare(paimon_java, root, now)
    assert ours == {stray} and set(java) == ours and not any(java.values())

    paimon_java.delete_branch(root, "b1")
    assert not os.path.exists(os.path.join(root, "branch", "branch-b1"))
    java, ours = compare(paimon_java, root, now)
    assert ours == written
    assert set(java) == ours and not any(java.values())


def test_changelog_files_an_overwrite_left_uncommitted_agree(paimon_java, tmp_path):
    """Paimon's overwrite commits no changelog: the changelog files its write produced are orphans from the
    start."""
    root = str(tmp_path / "t")
    info = paimon_java.generate(root, seed=4, kind="pk", steps=14, options={"changelog-producer": "input",
                                                                           "deletion-vectors.enabled": None},
                                ops={"overwrite": 30})
    assert any(op.startswith("overwrite") for op in info["ops"])
    now = now_ms()
    Junk(root, now).age()
    java, ours = compare(paimon_java, root, now)
    assert ours and all(os.path.basename(p).startswith("changelog-") and "/bucket-" in p for p in ours)
    assert set(java) == ours and not any(java.values())


# -- documented differences between 0.9 and master ----------------------------------------------------------


@pytest.mark.parametrize("name", ["append-partitioned", "pk-unpartitioned"])
def test_directories_and_non_bucket_entries_differ_as_documented(paimon_java, bases, tmp_path, name):
    """0.9 deletes old directories where it lists (recursively) and anything but buckets inside a partition
    directory; lakesweep deletes neither."""
    root, info = copy_of(bases, name, tmp_path)
    partitioned = BASES[name][1]
    now = now_ms()
    junk = Junk(root, now)
    first = bucket_dirs(root, info)[0]
    both = {junk.file(f"{first}/data-failed0-0000-0000-0000-000000000000-0.parquet")}
    # 0.9 lists directories as candidates and deletes them recursively (deleteDirectoryQuietly);
    # master refuses directories (#7920) and lakesweep never deletes one.
    only_09 = {
        junk.dir(f"{first}/_temporary"): True,
        junk.dir("manifest/.staging"): True,
        # 0.9's SnapshotManager#tryGetNonSnapshotFiles keeps directories; master skips them
        # (LocalOrphanFilesCleanTest#testDirectoryInSnapshotDirNotTreatedAsCandidate)
        junk.dir("snapshot/UNKNOWN-dir"): True,
    }
    if partitioned:
        # 0.9 deletes whatever is neither a partition nor a bucket inside a partition directory
        only_09[junk.file(f"{partition_of(first)}/_SUCCESS")] = False
        only_09[junk.dir(f"{partition_of(first)}/.spark-staging")] = True
    # nobody: a young directory (0.9's age guard covers directories too), directories beside the partitions
    # or buckets (never listed), entries at the table root of an unpartitioned table (0.9 cleans only below
    # a partition)
    junk.dir(f"{first}/_young", young=True)
    junk.dir("tmp")
    junk.dir("_upload")
    junk.file("_SUCCESS")
    junk.age()

    java, ours = compare(paimon_java, root, now)
    assert ours == both
    assert java == {**{p: False for p in both}, **only_09}


def used_by_0_9(table) -> set[str]:
    """The data-file names Paimon 0.9's ``OrphanFilesClean#getUsedFilesForChangelog`` counts for changelog
    objects, with those of every snapshot and tag of the main branch: a changelog contributes the data files
    of its changelog manifests, or of its delta manifests when it has no changelog list, never those of its
    base. Every snapshot here reads whole, so 0.9's all-or-nothing rule for snapshots plays no part."""

    def data_names(s, lists):
        out = set()
        for name in filter(None, lists):
            if not table.fileio.exists(os.path.join(table.location, "manifest", name)):
                continue
            for m in table.manifest_list(name):
                for e in table.manifest(m.file_name):
                    out.add(e.file.file_name)
                    out.update(e.file.extra_files)
        return out

    used = set()
    for sid in table.list_snapshot_ids():
        s = table.snapshot(sid)
        used |= data_names(s, [s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list])
    for tag in table.tags():
        s = tag.snapshot
        used |= data_names(s, [s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list])
    for cid in table.list_changelog_ids():
        c = table.changelog(cid)
        used |= data_names(c, [c.changelog_manifest_list] if c.changelog_manifest_list else [c.delta_manifest_list])
    return used


def test_data_files_only_decoupled_changelogs_reach_differ_as_documented(paimon_java, tmp_path):
    """Changelogs outlive snapshots (decoupled); an expiry's deletes fail as above. Master, and lakesweep,
    keep every data file a retained changelog's manifests name; 0.9 counts for a changelog with a changelog
    list only the files of its changelog manifests, so it deletes the data files only the delta and base
    manifests of such changelogs (compactions, with the lookup producer) still name."""
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=4, kind="pk", steps=20, options={"changelog-producer": "lookup",
                                                                     "deletion-vectors.enabled": None},
                         ops={"consumer": 0, "overwrite": 0})
    before = str(tmp_path / "before")
    shutil.copytree(root, before)
    paimon_java.expire(root, retain_min=2, retain_max=2, max_deletes=10_000, changelog_retain_min=1_000,
                       changelog_retain_max=1_000)
    gone = set(tree_state(before)) - set(tree_state(root))
    for rel in sorted(p for p in gone if not p.startswith("snapshot/")):
        shutil.copy2(os.path.join(before, rel), os.path.join(root, rel))
    now = now_ms()
    junk = Junk(root, now)
    both = {junk.file("manifest/manifest-stray0-0000-0000-0000-000000000000-0")}
    junk.age()

    table = open_table(root)
    assert table.list_changelog_ids(), "expiry must have kept changelogs"
    master_used = used_names(table).names
    zero_nine = used_by_0_9(table)
    only_09 = {p for p, (is_dir, _, _) in tree_state(root).items()
               if not is_dir and "bucket-" in p and os.path.basename(p) in master_used - zero_nine}
    assert only_09, "the seed must leave data files only changelogs' delta or base manifests name"

    java, ours = compare(paimon_java, root, now)
    assert ours == both
    assert java == {p: False for p in both | only_09}


def test_a_missing_manifest_differs_as_documented(paimon_java, bases, tmp_path):
    """In 0.9 a snapshot or tag any of whose manifests is missing contributes nothing to the used set
    (it is taken to be expiring), so everything only it names is deleted. Master drops only the missing
    file's own contribution; lakesweep refuses to plan. 0.9's deletions are then exactly lakesweep's plan
    for the table without those snapshots."""
    root, info = copy_of(bases, "append-partitioned", tmp_path)
    table = open_table(root)

    def manifests(s):
        return {m.file_name for name in (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list)
                if name for m in table.manifest_list(name)}

    snaps = {sid: manifests(table.snapshot(sid)) for sid in table.list_snapshot_ids()}
    tagged = set().union(*(manifests(t.snapshot) for t in table.tags()))
    latest = max(snaps)
    choices = sorted(snaps[min(snaps)] - snaps[latest] - tagged,
                     key=lambda m: (sum(m in ms for ms in snaps.values()), m))
    assert choices, "the seed must have a manifest neither the latest snapshot nor a tag names"
    missing = choices[0]
    holders = sorted(sid for sid, ms in snaps.items() if missing in ms)
    os.remove(os.path.join(root, "manifest", missing))
    now = now_ms()
    Junk(root, now).age()

    java = paimon_dry_run(paimon_java, root, now)
    with pytest.raises(PlanRejected, match=f"orphan cleaning cannot tell which files .* uses: .*{missing}"):
        plan_for(root, now)

    for sid in holders:
        os.remove(os.path.join(root, "snapshot", f"snapshot-{sid}"))
    _, ours = compare(paimon_java, root, now)
    assert ours and set(java) == ours and not any(java.values())


def test_a_stray_name_starting_with_snapshot_differs_as_documented(paimon_java, bases, tmp_path):
    """0.9 reads every ``snapshot-*`` name as a snapshot id and fails on ``snapshot-3.tmp``;
    master ignores such names, and neither deletes them (only names not starting with ``snapshot-`` are
    stray). lakesweep plans the rest."""
    root, info = copy_of(bases, "append-unpartitioned", tmp_path)
    now = now_ms()
    junk = Junk(root, now)
    junk.file("snapshot/snapshot-3.tmp")
    stray = junk.file("snapshot/UNKNOWN-stray")
    junk.age()
    with pytest.raises(HarnessError, match="NumberFormatException"):
        paimon_java.orphan_clean(root, older_than_ms=now - DAY)
    assert [a.path for a in plan_for(root, now).actions] == [stray]


def test_a_branch_without_a_schema_differs_as_documented(paimon_java, bases, tmp_path):
    """A branch directory without a schema makes 0.9 warn and clean nothing; master throws, and
    lakesweep refuses to plan."""
    root, info = copy_of(bases, "append-partitioned", tmp_path)
    now = now_ms()
    junk = Junk(root, now)
    junk.file("branch/branch-ghost/snapshot/UNKNOWN-stray")
    junk.file(f"{bucket_dirs(root, info)[0]}/data-failed0-0000-0000-0000-000000000000-0.parquet")
    junk.age()
    assert paimon_dry_run(paimon_java, root, now) == {}
    with pytest.raises(PlanRejected, match="branch 'ghost' has no schema"):
        plan_for(root, now)


# -- where lakesweep departs from both Paimon versions ------------------------------------------------------


def test_two_unused_files_of_one_name_are_all_planned_where_paimon_deletes_one(paimon_java, bases, tmp_path):
    """Paimon (0.9, and master's ``LocalOrphanFilesClean``) keeps its candidates in a map keyed by file name, so of
    two unused files with one name a run deletes one, whichever it listed last, and leaves the other to the next
    run. lakesweep plans every unused file; a name anything uses keeps every file of that name on both sides."""
    root, info = copy_of(bases, "append-partitioned", tmp_path)
    now = now_ms()
    junk = Junk(root, now)
    dirs = bucket_dirs(root, info)
    name = "data-twin0-0000-0000-0000-000000000000-0.orc"
    twins = {junk.file(f"{dirs[0]}/{name}"), junk.file(f"{dirs[-1]}/{name}")}
    used = sorted(n for n in os.listdir(os.path.join(root, dirs[0])) if n.startswith("data-"))[0]
    junk.file(f"{dirs[-1]}/{used}")  # L-6: a copy of a used name, elsewhere
    junk.age()
    java, ours = compare(paimon_java, root, now)
    assert ours == twins
    assert len(java) == 1 and set(java) < twins and not any(java.values())


@pytest.mark.parametrize("name", ["append-partitioned", "pk-unpartitioned"])
def test_directories_paimon_never_names_are_listed_by_paimon_only(paimon_java, bases, tmp_path, name):
    """Paimon (0.9, and master's ``LocalOrphanFilesClean``) walks every directory whose name contains '=' as a
    partition and every ``bucket-*`` as a bucket. lakesweep lists only the names Paimon writes (``<key>=`` of the
    key at that level, ``bucket-<n>``, ``bucket-postpone``: ``engine.paimon.orphans._bucket_dirs``), the places
    apply accepts, and keeps the files anywhere else."""
    root, info = copy_of(bases, name, tmp_path)
    now = now_ms()
    junk = Junk(root, now)
    first = bucket_dirs(root, info)[0]
    part = partition_of(first)
    both = {junk.file(f"{first}/data-failed0-0000-0000-0000-000000000000-0.parquet")}
    paimon_only = {junk.file(os.path.join(part, "bucket-old", "data-failed1-0000-0000-0000-000000000000-0.parquet"))}
    if BASES[name][1]:
        paimon_only.add(junk.file("other=1/bucket-0/data-failed2-0000-0000-0000-000000000000-0.parquet"))
    junk.age()
    java, ours = compare(paimon_java, root, now)
    assert ours == both
    assert java == {p: False for p in both | paimon_only}
