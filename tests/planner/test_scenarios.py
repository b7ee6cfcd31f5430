"""Scenarios of Paimon's ExpireSnapshotsTest and FileDeletionTest, ported."""

import concurrent.futures
import dataclasses
import json
import os
import random
import time

import pytest

from lakesweep.applier.local import apply_locally
from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, PlanRejected, TableFormatError
from lakesweep.engine.fileio import ArrowFileIO
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import resolve_expire_options
from tests.planner.conftest import FAR_FUTURE, expire, make_plan
from tests.support.table_builder import ADD, DELETE, E, all_files

P = dict(partition_keys=("dt",), partition_types=("STRING",))


def exists(b, e):
    return os.path.exists(b.data_path(e))


def snapshot_ids(b):
    return PaimonTable(b.root).list_snapshot_ids()


def earliest_hint(b):
    with open(os.path.join(b.root, "snapshot", "EARLIEST")) as f:
        return int(f.read())


# ---------------------------------------------------------------- ExpireSnapshotsTest


def test_no_snapshot_is_a_no_op(builder):
    b = builder()
    plan = make_plan(b.root, retain_min=1)
    assert plan.actions == () and plan.stats["bound"] == "no-snapshots"


def test_not_enough_snapshots(builder):
    b = builder()
    b.commit([E(ADD, "a")])
    b.commit([E(ADD, "b")])
    plan = expire(b.root, retain_min=3, retain_max=3)
    assert not plan.deletes_anything
    assert snapshot_ids(b) == [1, 2]
    assert earliest_hint(b) == 1  # Java writes a missing EARLIEST hint even when nothing expires


def test_never_expire(builder):
    b = builder()
    for i in range(5):
        b.commit([E(ADD, f"f{i}")])
    plan = expire(b.root, retain_min=1, time_retained=2**62)
    assert not plan.deletes_anything and snapshot_ids(b) == [1, 2, 3, 4, 5]


def test_num_retained_min(builder):
    b = builder()
    for i in range(10):
        b.commit([E(ADD, f"f{i}")])
    expire(b.root, retain_min=4, time_retained=1)
    assert snapshot_ids(b) == [7, 8, 9, 10]
    assert earliest_hint(b) == 7


def test_expire_with_number_keeps_exactly_the_last_three(builder):
    b = builder()
    files = []
    for i in range(8):
        e = E(ADD, f"f{i}")
        files.append(e)
        dels = [E(DELETE, files[i - 1].name)] if i else []
        b.commit([e] + dels)
        expire(b.root, retain_min=1, retain_max=3, time_retained=2**62)
        ids = snapshot_ids(b)
        assert ids == list(range(max(1, i - 1), i + 2))
        assert earliest_hint(b) == ids[0]
        # the EARLIEST hint is the true earliest: deleting it changes nothing
        os.remove(os.path.join(b.root, "snapshot", "EARLIEST"))
        assert PaimonTable(b.root).earliest_latest()[0] == ids[0]
    # snapshots 6, 7, 8 remain: f0..f4 were deleted by expired snapshots (6's delta included);
    # f5 and f6 are deleted by the retained snapshots 7 and 8; f7 is live
    assert [exists(b, f) for f in files] == [False] * 5 + [True] * 3


def test_expire_with_time_successor_rule(builder):
    b = builder()
    for i in range(1, 11):
        b.commit([E(ADD, f"f{i}")], time_millis=0 if i <= 5 else 2000)
    plan = expire(b.root, retain_min=1, time_retained="1 s", now_ms=2500)
    assert (plan.begin, plan.end) == (1, 5)  # expires 1-4; 5 stays: its successor is young
    assert snapshot_ids(b) == list(range(5, 11))
    again = expire(b.root, retain_min=1, time_retained="1 s", now_ms=2500)
    assert not again.deletes_anything  # idempotent


def test_expire_with_time_own_rule_before_paimon_2(builder):
    b = builder()
    for i in range(1, 11):
        b.commit([E(ADD, f"f{i}")], time_millis=0 if i <= 5 else 2000)
    plan = expire(b.root, retain_min=1, time_retained="1 s", now_ms=2500, time_rule="own")
    assert (plan.begin, plan.end) == (1, 6)  # snapshot 5 is itself older than the window


def test_expire_with_time_protects_each_snapshot(builder):
    b = builder()
    for i in range(1, 6):
        b.commit([E(ADD, f"f{i}")], time_millis=0)
    assert not expire(b.root, retain_min=1, time_retained="5 s", now_ms=100).deletes_anything
    b.commit([E(ADD, "f6")], time_millis=6000)
    plan = expire(b.root, retain_min=1, time_retained="5 s", now_ms=6500)
    assert (plan.begin, plan.end) == (1, 5) and snapshot_ids(b) == [5, 6]


def test_expire_with_time_does_not_read_protected_range(builder):
    b = builder()
    for i in range(1, 6):
        b.commit([E(ADD, f"f{i}")], time_millis={1: 0, 2: 0, 3: 0, 4: 2000, 5: 9000}[i])
    with open(os.path.join(b.root, "snapshot", "snapshot-5"), "w") as f:
        f.write("not json")  # unreadable, above the cut: Paimon never reads it
    # lakesweep's guard checks every plan against the latest snapshot, so by default it stops here...
    with pytest.raises(CorruptMetadata, match="snapshot-5: malformed snapshot JSON"):
        make_plan(b.root, retain_min=1, time_retained="5 s", now_ms=6000)
    # ...and with --skip-unreadable it plans exactly what Paimon expires, saying what it could not check.
    plan = expire(b.root, retain_min=1, time_retained="5 s", now_ms=6000, skip_unreadable=True)
    assert any("could not check the plan against the latest snapshot 5" in w for w in plan.stats["warnings"])
    assert (plan.begin, plan.end) == (1, 3)
    assert snapshot_ids(b) == [3, 4, 5]


def test_expire_extra_files(builder):
    b = builder(**P)
    extras = ("extra1", "extra2")
    keep = E(ADD, "keep", ("a",))
    b.commit([keep])
    b.commit([E(ADD, "f", ("a",), extra_files=extras)])
    # the same delta: ADD first, then DELETE - the DELETE wins
    b.commit([E(ADD, "g", ("a",)), E(DELETE, "f", ("a",), extra_files=extras)])
    b.commit([E(ADD, "h", ("a",))])
    plan = expire(b.root, retain_min=1, retain_max=1)
    d = os.path.join(b.root, "dt=a", "bucket-0")
    assert not os.path.exists(os.path.join(d, "f"))
    assert not os.path.exists(os.path.join(d, "extra1")) and not os.path.exists(os.path.join(d, "extra2"))
    kinds = sorted(a.kind.value for a in plan.actions if a.kind in (ActionKind.DATA_FILE, ActionKind.EXTRA_FILE))
    assert kinds == ["data-file", "extra-file", "extra-file"]
    assert exists(b, keep)


def test_expire_extra_files_with_external_path(builder, tmp_path):
    ext = str(tmp_path / "external")
    b = builder(options={"data-file.external-paths": ext}, **P)
    f = E(ADD, "f", ("a",), extra_files=("extra1",), external_path=f"{ext}/dt=a/bucket-0/f")
    b.commit([f])
    b.commit([E(DELETE, "f", ("a",), extra_files=("extra1",), external_path=f.external_path)])
    b.commit([E(ADD, "g", ("a",))])
    plan = expire(b.root, retain_min=1, retain_max=1)
    assert not os.path.exists(f.external_path)
    assert not os.path.exists(f"{ext}/dt=a/bucket-0/extra1")  # extras live beside the external file
    assert {a.path for a in plan.actions if a.kind == ActionKind.EXTRA_FILE} == {f"{ext}/dt=a/bucket-0/extra1"}


def test_plan_cancels_a_snapshots_data_when_a_delta_manifest_is_missing(builder):
    b = builder()
    a = E(ADD, "a")
    b.commit([a])
    b.commit([E(DELETE, "a")], [E(ADD, "b")])
    b.commit([E(ADD, "c")])
    missing = b.delta_manifest_names(2)[0]
    os.remove(os.path.join(b.root, "manifest", missing))
    with pytest.raises(MetadataNotFound, match=f"manifest/{missing}: manifest not found"):
        make_plan(b.root, retain_min=1)
    plan = expire(b.root, retain_min=1, skip_unreadable=True)
    assert exists(b, a)  # Paimon cancels the snapshot's deletions: nothing is deleted wrongly
    assert plan.stats["skipped_snapshots"] == [2]
    assert any(missing in w for w in plan.stats["warnings"])


def test_expire_with_upgraded_file(builder):
    b = builder()
    a0 = E(ADD, "a", level=0)
    b.commit([a0])
    # compaction upgrade: DELETE level 0 then ADD level 5 of the same file in one delta
    b.commit([E(DELETE, "a", level=0, file_source=1), E(ADD, "a", level=5, file_source=1)], kind="COMPACT")
    b.commit([E(ADD, "b")])
    plan = expire(b.root, retain_min=1, retain_max=1)
    assert exists(b, a0), "an upgraded file is live and must survive"
    assert not any(a.kind == ActionKind.DATA_FILE for a in plan.actions)


def test_manifest_skipping_set_failure_keeps_all_manifests(builder):
    b = builder()
    b.commit([E(ADD, "a")])
    b.commit([E(ADD, "b")])
    b.tag("tag2", 2)
    b.commit([E(ADD, "c")])
    os.remove(os.path.join(b.root, "manifest", b.snapshots[2]["baseManifestList"]))
    before = {f for f in all_files(b.root) if f.startswith("manifest/")}
    with pytest.raises(MetadataNotFound, match="manifest list not found"):
        make_plan(b.root, retain_min=1, retain_max=1)
    plan = expire(b.root, retain_min=1, retain_max=1, skip_unreadable=True)
    assert {f for f in all_files(b.root) if f.startswith("manifest/")} == before
    assert snapshot_ids(b) == [3]
    assert not any(a.kind in (ActionKind.MANIFEST, ActionKind.MANIFEST_LIST) for a in plan.actions)


def test_consumer_bounds_the_range(builder):
    b = builder()
    for i in range(6):
        b.commit([E(ADD, f"f{i}")])
    b.consumer("job", 3)
    plan = expire(b.root, retain_min=1)
    assert (plan.begin, plan.end, plan.stats["bound"]) == (1, 3, "consumer")
    assert snapshot_ids(b) == [3, 4, 5, 6]
    [consumers] = [r for r in plan.requirements if r.TYPE == "paimon.consumers-outside"]
    assert (consumers.begin, consumers.end, consumers.consumers) == (1, 3, {"job": 3})


def test_consumer_changelog_only_does_not_bound_snapshots(builder):
    b = builder(options={"consumer.changelog-only": "true"})
    for i in range(6):
        b.commit([E(ADD, f"f{i}")])
    b.consumer("job", 3)
    plan = expire(b.root, retain_min=1)
    assert plan.end == 6


def test_expire_limit_counts_ids(builder):
    b = builder()
    for i in range(10):
        b.commit([E(ADD, f"f{i}")])
    plan = expire(b.root, retain_min=1, max_deletes=3)
    assert (plan.begin, plan.end, plan.stats["bound"]) == (1, 4, "expire-limit")


def test_a_backlog_beyond_the_expire_limit_is_counted_and_said(builder):
    from lakesweep.planner.kinds import describe_plan

    b = builder()
    for i in range(10):
        b.commit([E(ADD, f"f{i}")])
    plan = expire(b.root, retain_min=2, max_deletes=3)
    # retain-min 2 of 10 lets [1, 9) go: the plan takes [1, 4), 5 more wait
    assert plan.stats["expirable_beyond_limit"] == 5
    said = describe_plan(plan)
    assert ("5 more snapshot(s) are expirable beyond the expire limit of 3 (snapshot.expire.limit): about 2 more "
            "plan(s) at this limit; apply this plan and plan again, or raise --max-deletes") in said.notes
    assert said.document["expirable_beyond_limit"] == 5
    # bounded by anything else, there is no backlog to speak of
    assert "expirable_beyond_limit" not in expire(b.root, retain_min=2).stats


def test_retain_min_below_one_is_refused(builder):
    b = builder()
    b.commit([E(ADD, "a")])
    with pytest.raises(PlanRejected, match="at least 1 snapshot must be retained"):
        make_plan(b.root, retain_min=0)
    with pytest.raises(PlanRejected, match=r"retain-max \(2\) must be at least retain-min \(3\)"):
        make_plan(b.root, retain_min=3, retain_max=2)


def test_index_files_and_statistics_are_shared_by_name(builder):
    b = builder(**P)
    b.commit([E(ADD, "a", ("x",))], index_files=[(("x",), 0, "index-1")], statistics="stat-1")
    b.commit([E(ADD, "b", ("x",))], index_files=[(("x",), 0, "index-1"), (("x",), 0, "index-2")], statistics="stat-1")
    b.commit([E(ADD, "c", ("x",))], index_files=[(("x",), 0, "index-2")], statistics="stat-2")
    expire(b.root, retain_min=1, retain_max=1)
    files = all_files(b.root)
    assert "index/index-1" not in files and "index/index-2" in files  # index-2 is live in snapshot 3
    assert "statistics/stat-1" not in files and "statistics/stat-2" in files


def test_changelog_files_are_deleted_when_not_decoupled(builder):
    b = builder(**P)
    c1 = E(ADD, "changelog-1", ("a",))
    b.commit([E(ADD, "a", ("a",))], changelog=[c1])
    b.commit([E(ADD, "b", ("a",))], changelog=[E(ADD, "changelog-2", ("a",))])
    b.commit([E(ADD, "c", ("a",))])
    b.tag("t1", 1)  # tags do not protect changelog files (L-2)
    plan = expire(b.root, retain_min=1, retain_max=1)
    assert not exists(b, c1)
    assert sum(1 for a in plan.actions if a.kind == ActionKind.CHANGELOG_FILE) == 2


def test_decoupled_changelog_keeps_append_files_and_lists(builder):
    b = builder(options={"changelog.num-retained.max": "100"}, **P)
    a = E(ADD, "a", ("x",))
    b.commit([a])
    b.commit([E(DELETE, "a", ("x",), file_source=0)])  # an APPEND-sourced delete: deferred
    c = E(ADD, "c", ("x",), file_source=1)
    b.commit([c])
    b.commit([E(DELETE, "c", ("x",), file_source=1)])  # a COMPACT-sourced delete: deleted now
    b.commit([E(ADD, "d", ("x",))])
    plan = expire(b.root, retain_min=1, retain_max=1)
    assert plan.stats["changelog_decoupled"] is True
    assert exists(b, a) and not exists(b, c)
    assert plan.stats["deferred_to_changelog"] == 1
    files = all_files(b.root)
    # producer 'none': base and delta lists stay for changelog expiry; changelog JSONs are written
    assert {f"changelog/changelog-{i}" for i in range(1, 5)} <= files
    assert b.snapshots[1]["deltaManifestList"] in {f.split("/")[-1] for f in files}
    with open(os.path.join(b.root, "changelog", "LATEST")) as f:
        assert f.read() == "4"


# ---------------------------------------------------------------- assertCleaned ports


def assert_cleaned(b, external=()):
    """Paimon's ``TestFileStore#assertCleaned``: what is left is exactly the schema files, the hints,
    the remaining snapshots and tags, and the files they use (the builder's own record, not lakesweep's
    reading). Tags do not hold changelog files."""
    expected = {os.path.join(b.root, "schema", "schema-0")}
    expected |= {os.path.join(b.root, "snapshot", h) for h in ("EARLIEST", "LATEST")
                 if os.path.exists(os.path.join(b.root, "snapshot", h))}
    for sid in snapshot_ids(b):
        expected.add(os.path.join(b.root, "snapshot", f"snapshot-{sid}"))
        expected |= b.files_in_use(sid)
    for name, sid in tagged(b).items():
        expected.add(os.path.join(b.root, "tag", f"tag-{name}"))
        expected |= b.files_in_use(sid, with_changelog=False)
    actual = {os.path.join(b.root, f) for f in all_files(b.root)}
    for root in external:
        actual |= {os.path.join(root, f) for f in all_files(root)}
    assert actual - expected == set(), "left behind"
    assert expected - actual == set(), "deleted but in use"


def tagged(b) -> dict[str, int]:
    tag_dir = os.path.join(b.root, "tag")
    if not os.path.isdir(tag_dir):
        return {}
    out = {}
    for f in os.listdir(tag_dir):
        with open(os.path.join(tag_dir, f)) as fh:
            out[f.removeprefix("tag-")] = json.load(fh)["id"]
    return out


def readable(b, sid: int, *, with_changelog: bool = True) -> bool:
    return all(os.path.exists(p) for p in b.files_in_use(sid, with_changelog=with_changelog))


def random_history(b, rng: random.Random, commits: int, external=(), extras: bool = False) -> None:
    """``commits`` snapshots over two partitions and two buckets: each adds files and deletes some live ones.
    With ``external`` roots, data files go to them round robin (``data-file.external-paths``)."""
    live: list[E] = []
    n = 0
    for s in range(commits):
        adds = []
        for _ in range(rng.randint(1, 4)):
            part, bucket, name = (rng.choice("xy"),), rng.randint(0, 1), f"data-{s}-{n}.orc"
            ext = None
            if external:
                ext = f"{external[n % len(external)]}/dt={part[0]}/bucket-{bucket}/{name}"
            xs = (f"{name}.index",) if extras and rng.random() < 0.3 else ()
            adds.append(E(ADD, name, part, bucket, extra_files=xs, external_path=ext))
            n += 1
        dels = rng.sample(live, min(len(live), rng.randint(0, 3)))
        b.commit(adds + [dataclasses.replace(d, kind=DELETE) for d in dels])
        live = [x for x in live if x not in dels] + adds


@pytest.mark.parametrize("seed", range(4))
def test_expire_with_missing_files(builder, seed):
    """ExpireSnapshotsTest#testExpireWithMissingFiles: files the latest snapshot does not use are
    removed behind Paimon's back. Paimon still expires down to the latest snapshot and it stays readable.
    lakesweep stops and names a missing metadata file unless told to skip what it cannot read."""
    rng = random.Random(seed)
    b = builder(**P)
    random_history(b, rng, 5, extras=True)
    _missing_files_then_expire(b, rng, external=())


@pytest.mark.parametrize("seed", range(4))
def test_expire_with_missing_files_with_external_path(builder, tmp_path, seed):
    """ExpireSnapshotsTest#testExpireWithMissingFilesWithExternalPath: the same, with data files written
    round robin to two external roots."""
    rng = random.Random(seed)
    ext = [str(tmp_path / "ext0"), str(tmp_path / "ext1")]
    b = builder(options={"data-file.external-paths": ",".join(ext)}, **P)
    random_history(b, rng, 5, external=ext, extras=True)
    _missing_files_then_expire(b, rng, external=ext)


def _missing_files_then_expire(b, rng, external):
    latest = max(b.snapshots)
    in_use = b.files_in_use(latest)
    everything = {os.path.join(b.root, f) for f in all_files(b.root)}
    for root in external:
        everything |= {os.path.join(root, f) for f in all_files(root)}
    unused = sorted(p for p in everything - in_use
                    if not os.path.basename(p).startswith(("snapshot", "schema")))
    assert unused
    removed = rng.sample(unused, rng.randrange(len(unused)))
    for p in removed:
        os.remove(p)
    if any(os.path.dirname(p) == os.path.join(b.root, "manifest") for p in removed):
        with pytest.raises(TableFormatError) as e:  # strict: stops at a missing metadata file, and names it
            make_plan(b.root, retain_min=1, retain_max=1)
        assert e.value.path in removed, e.value
    else:
        assert make_plan(b.root, retain_min=1, retain_max=1).end == latest
    plan = expire(b.root, retain_min=1, retain_max=1, skip_unreadable=True)
    assert snapshot_ids(b) == [latest]
    assert readable(b, latest)
    assert plan.end == latest


@pytest.mark.parametrize("seed", range(3))
def test_mixed_snapshot_and_tag_deletion(builder, seed):
    """ExpireSnapshotsTest#testMixedSnapshotAndTagDeletion: a tag on every snapshot, expire a random
    number, then tags go away at random (lakesweep does not plan tag deletion; the tag files are removed
    and expiry runs again). Every remaining snapshot and tag stays readable."""
    rng = random.Random(seed)
    b = builder(**P)
    random_history(b, rng, rng.randint(30, 39), extras=True)
    latest = max(b.snapshots)
    for sid in range(1, latest + 1):
        b.tag(f"tag{sid}", sid)
    retained = latest - (rng.randrange(latest // 2) + 1)
    expire(b.root, retain_min=retained, retain_max=retained)
    assert snapshot_ids(b) == list(range(latest - retained + 1, latest + 1))
    assert_cleaned(b)  # every tag still holds its files: nothing reclaimable but the snapshot files
    for sid in range(1, latest + 1):
        if rng.random() < 0.5:
            os.remove(os.path.join(b.root, "tag", f"tag-tag{sid}"))
    expire(b.root, retain_min=retained, retain_max=retained)
    for sid in snapshot_ids(b):
        assert readable(b, sid)
    for sid in tagged(b).values():
        assert readable(b, sid, with_changelog=False)


def test_expire_with_tags_keeps_tagged_snapshots_readable(builder):
    """ExpireSnapshotsTest#testExpireWithTagsAndConcurrentPlanningKeepsTaggedSnapshotsReadable: tags on
    3 and 6, expire all but the latest."""
    b = builder(**P)
    random_history(b, random.Random(7), 8)
    b.tag("tag3", 3)
    b.tag("tag6", 6)
    expire(b.root, retain_min=1, retain_max=1)
    assert snapshot_ids(b) == [8]
    assert readable(b, 3, with_changelog=False) and readable(b, 6, with_changelog=False)
    assert_cleaned(b)


def test_expire_with_zero_file_operation_threads_cleans_data_files(builder):
    """ExpireSnapshotsTest#testExpireWithZeroFileOperationThreadNumCleansDataFiles: the option only
    sizes Paimon's thread pool; lakesweep reads it as any other option and still cleans."""
    b = builder(options={"file-operation.thread-num": "0"}, **P)
    random_history(b, random.Random(3), 6)
    plan = expire(b.root, retain_min=1, retain_max=1)
    assert any(a.kind == ActionKind.DATA_FILE for a in plan.actions)
    assert_cleaned(b)


class SlowReads(ArrowFileIO):
    """A local FileIO whose every read and listing waits, like an object store."""

    def read_bytes(self, path):
        time.sleep(0.002)
        return super().read_bytes(path)

    def list(self, path, *, recursive=False):
        time.sleep(0.002)
        return super().list(path, recursive=recursive)


def test_expire_with_slow_object_store_fileio(builder, tmp_path):
    """ExpireSnapshotsTest#testExpireWithSlowObjectStoreFileIO / #testExpireReadsTagsConcurrently...:
    planning through a slow store yields the same plan, and applying it leaves the table cleaned."""
    b = builder(**P)
    random_history(b, random.Random(11), 10, extras=True)
    b.tag("t4", 4)
    opts = resolve_expire_options(PaimonTable(b.root).options, retain_min=2, retain_max=2, time_retained=0)
    slow = plan_expire(PaimonTable(b.root, SlowReads("file")), now_ms=FAR_FUTURE, options=opts)
    fast = plan_expire(PaimonTable(b.root), now_ms=FAR_FUTURE, options=opts)
    assert slow == fast and slow.deletes_anything
    results = apply_locally(slow, SlowReads("file"))
    assert all(r.outcome != "FAILED" for r in results)
    assert_cleaned(b)


def test_concurrent_expirations_of_overlapping_ranges(builder):
    """ExpireSnapshotsTest#testExpireEmptySnapshot: 100 commits, 11 threads expiring overlapping ranges
    at once. Plans made from the same state, applied concurrently, raise nothing and end where the
    widest plan alone would have."""
    b = builder(**P)
    random_history(b, random.Random(5), 100)
    plans = [make_plan(b.root, retain_min=r, retain_max=r) for r in random.Random(6).sample(range(1, 60), 11)]
    widest = min(plans, key=lambda p: -p.end)
    with concurrent.futures.ThreadPoolExecutor(max_workers=11) as pool:
        results = [r for rs in pool.map(apply_locally, plans) for r in rs]
    assert all(r.outcome != "FAILED" for r in results)
    assert snapshot_ids(b) == list(range(widest.end, 101))
    assert_cleaned(b)


# ---------------------------------------------------------------- FileDeletionTest


@pytest.mark.parametrize("clean", [True, False])
def test_multi_partitions_empty_directories(builder, clean):
    b = builder(partition_keys=("dt", "hr"), partition_types=("STRING", "INT"),
                options={"snapshot.clean-empty-directories": str(clean).lower()})
    f401 = [E(ADD, f"a{i}", ("0401", 8), bucket=i) for i in (0, 1)]
    f402_8 = [E(ADD, f"b{i}", ("0402", 8), bucket=i) for i in (0, 1)]
    f402_12 = [E(ADD, f"c{i}", ("0402", 12), bucket=i) for i in (0, 1)]
    b.commit(f401 + f402_8 + f402_12)
    b.commit([E(DELETE, e.name, e.partition, e.bucket) for e in f401], kind="OVERWRITE")
    b.commit([E(DELETE, e.name, e.partition, e.bucket) for e in f402_8], kind="OVERWRITE")
    b.commit([E(DELETE, f402_12[0].name, ("0402", 12), 0)])
    b.commit([E(ADD, "z", ("0402", 12), bucket=1)])
    expire(b.root, retain_min=1, retain_max=1)
    j = lambda *p: os.path.exists(os.path.join(b.root, *p))  # noqa: E731
    assert j("dt=0402", "hr=12", "bucket-1")
    if clean:
        assert not j("dt=0401") and not j("dt=0402", "hr=8") and not j("dt=0402", "hr=12", "bucket-0")
    else:
        assert j("dt=0401", "hr=8", "bucket-0") and j("dt=0402", "hr=8") and j("dt=0402", "hr=12", "bucket-0")


def test_no_partitions_empty_bucket_dir(builder):
    b = builder(options={"snapshot.clean-empty-directories": "true"})
    b.commit([E(ADD, "a", bucket=0), E(ADD, "b", bucket=1)])
    b.commit([E(DELETE, "a", bucket=0)])
    b.commit([E(ADD, "c", bucket=1)])
    expire(b.root, retain_min=1, retain_max=1)
    assert not os.path.exists(os.path.join(b.root, "bucket-0"))
    assert os.path.exists(os.path.join(b.root, "bucket-1"))


def test_expire_with_existing_tags(builder):
    b = builder()
    A, B, C, D = (E(ADD, n) for n in "ABCD")
    b.commit([A, B])
    b.commit([E(DELETE, "A")])
    b.tag("tag1", 2)
    b.commit([C])
    b.commit([E(DELETE, "B")])
    b.tag("tag2", 4)
    b.commit([D])
    b.commit([E(DELETE, "D")])
    plan = expire(b.root, retain_min=1, retain_max=1)
    assert [exists(b, f) for f in (A, B, C, D)] == [False, True, True, False]
    files = all_files(b.root)
    for sid in (2, 4):
        s = b.snapshots[sid]
        assert {f"manifest/{s['baseManifestList']}", f"manifest/{s['deltaManifestList']}"} <= files
    assert plan.stats["protected_by_tags"] == 1


def test_expire_with_upgrade_and_tags(builder):
    b = builder()
    A = E(ADD, "A")
    b.commit([A])
    b.commit([E(DELETE, "A", level=0), E(ADD, "A", level=5)], kind="COMPACT")
    b.commit([E(DELETE, "A", level=5)])
    b.tag("tag1", 1)
    b.commit([E(ADD, "B")])
    expire(b.root, retain_min=1, retain_max=1)
    assert exists(b, A)
    s = b.snapshots[1]
    assert {f"manifest/{s['baseManifestList']}", f"manifest/{s['deltaManifestList']}"} <= all_files(b.root)


def test_expire_with_missing_manifest_of_an_upgrade(builder):
    b = builder()
    A = E(ADD, "A")
    b.commit([A])
    # the upgrade's ADD lives in a separate manifest, which then goes missing
    b.commit([E(DELETE, "A", level=0)], [E(ADD, "A", level=5)], kind="COMPACT")
    b.commit([E(ADD, "B")])
    os.remove(os.path.join(b.root, "manifest", b.delta_manifest_names(2)[1]))
    expire(b.root, retain_min=1, retain_max=1, skip_unreadable=True)
    assert exists(b, A), "planning cancels the snapshot: the upgraded file must survive"


def test_expire_with_deleting_tags(builder):
    b = builder()
    A, B = E(ADD, "A"), E(ADD, "B")
    b.commit([A])
    b.tag("tag1", 1)
    b.commit([B])
    b.tag("tag2", 2)
    b.commit([E(DELETE, "B")])
    b.commit([E(DELETE, "A")])
    expire(b.root, retain_min=3, retain_max=3, time_retained=2**62)
    os.remove(os.path.join(b.root, "tag", "tag-tag1"))
    expire(b.root, retain_min=2, retain_max=2, time_retained=2**62)
    assert exists(b, A) and exists(b, B)  # both held by tag2


def test_data_file_skipping_set_failure_keeps_everything(builder):
    b = builder()
    A, B = E(ADD, "A"), E(ADD, "B")
    b.commit([A, B])
    b.tag("tag1", 1)
    b.commit([E(ADD, "C")])
    b.tag("tag2", 2)
    b.commit([E(DELETE, "A"), E(DELETE, "B")])
    b.commit([E(ADD, "D")])
    os.remove(os.path.join(b.root, "manifest", b.snapshots[2]["deltaManifestList"]))  # tag2 unreadable
    with pytest.raises(MetadataNotFound):
        make_plan(b.root, retain_min=1, retain_max=1)
    expire(b.root, retain_min=1, retain_max=1, skip_unreadable=True)
    assert exists(b, A) and exists(b, B)


def test_data_file_path_directory_is_honoured(builder):
    b = builder(options={"data-file.path-directory": "data", "snapshot.clean-empty-directories": "true"}, **P)
    a = E(ADD, "a", ("x",))
    b.commit([a])
    b.commit([E(DELETE, "a", ("x",))])
    b.commit([E(ADD, "b", ("y",))])
    plan = expire(b.root, retain_min=1, retain_max=1)
    assert [x.path for x in plan.actions if x.kind == ActionKind.DATA_FILE] == ["data/dt=x/bucket-0/a"]
    assert not os.path.exists(os.path.join(b.root, "data", "dt=x", "bucket-0"))
    # Java's partition-directory cleanup ignores the path directory: it only ever misses.
    assert "dt=x" in [x.path for x in plan.actions if x.kind == ActionKind.EMPTY_DIR]
    assert os.path.exists(os.path.join(b.root, "data", "dt=x"))
