"""Decoupled changelog expiry scenarios of Paimon's ExpireSnapshotsTest and ChangelogExpireTest,
which need changelog expiry to run: snapshot expiry leaves changelogs, then
changelog expiry removes them as Paimon does. Beside them, the rules of ``ChangelogDeletion`` one by one,
and what the planner does with metadata it cannot read."""

from __future__ import annotations

import os

import pytest

from lakesweep.applier.local import apply_locally
from lakesweep.engine.errors import MetadataNotFound
from lakesweep.engine.paimon.paths import external_roots
from lakesweep.engine.paimon.table import PaimonTable, open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.planner.paimon.changelog import plan_changelog, read_changelog
from lakesweep.planner.kinds import plan_kind
from tests.planner.conftest import FAR_FUTURE, expire
from tests.support.table_builder import ADD, DELETE, E, all_files

P = dict(partition_keys=("dt",), partition_types=("STRING",))
# Shortly after the builder's commits (at 1_001, 1_002, ... ms): with an hour retained every changelog is
# young, so the num-retained settings alone decide, as with Paimon's tests' unlimited time retained.
SOON = 10_000


def plan_cl(root, *, now_ms=FAR_FUTURE, **flags):
    t = open_table(root)
    flags.setdefault("time_retained", "0 s")
    opts = plan_kind("changelog", "paimon").resolve_options(t.options, **flags)
    return plan_changelog(t, now_ms=now_ms, options=opts, read=read_changelog(t, now_ms=now_ms, options=opts))


def expire_changelog(root, *, now_ms=FAR_FUTURE, **flags):
    """Plan and apply a changelog expiry (in-process, sequential); returns the plan."""
    plan = plan_cl(root, now_ms=now_ms, **flags)
    results = apply_locally(plan, external=external_roots(open_table(root).options))
    assert all(r.outcome != "FAILED" for r in results)
    return plan


def changelog_ids(b):
    return PaimonTable(b.root).list_changelog_ids()


def manifest(b, name):
    return os.path.join(b.root, "manifest", name)


def lists_of(b, sid):
    return {manifest(b, b.snapshots[sid][k]) for k in ("baseManifestList", "deltaManifestList")}


def test_changelog_outlived_snapshot(builder):
    # testChangelogOutLivedSnapshot: 10 commits; snapshots min 1, max 2; changelogs max 3; time unlimited
    b = builder(options={"changelog.num-retained.max": "3"}, **P)
    for i in range(10):
        b.commit([E(ADD, f"f{i}", ("x",))])
    for _ in range(2):  # twice: idempotent
        expire(b.root, retain_min=1, retain_max=2, now_ms=SOON, time_retained="1 h")
    assert PaimonTable(b.root).list_snapshot_ids() == [9, 10]
    assert changelog_ids(b) == list(range(1, 9))  # from 1, contiguous with the snapshots
    plans = [expire_changelog(b.root, now_ms=SOON, retain_min=1, time_retained="1 h") for _ in range(2)]
    assert (plans[0].begin, plans[0].end, plans[0].scope.bound) == (1, 8, "changelog.time-retained")
    assert not plans[1].actions  # the second run has nothing left to do
    t = PaimonTable(b.root)
    assert t.changelog_earliest_latest() == (8, 8)  # both earliestSnapshot - 1
    assert t.earliest_latest() == (9, 10)
    # TestFileStore#assertCleaned: exactly the schema, the hints, the snapshots and changelog left, and
    # what they use (the builder's record); changelog 8 ('none') still needs its own two lists
    expected = {"schema/schema-0", "snapshot/EARLIEST", "snapshot/LATEST", "snapshot/snapshot-9",
                "snapshot/snapshot-10", "changelog/EARLIEST", "changelog/LATEST", "changelog/changelog-8"}
    in_use = b.files_in_use(9) | b.files_in_use(10) | lists_of(b, 8)
    expected |= {os.path.relpath(p, b.root) for p in in_use}
    assert all_files(b.root) == expected
    assert verify_table(t).whole


def test_a_consumer_keeps_the_changelogs_it_reads(builder):
    # testConsumerChangelogOnly: consumer at 3; snapshots expire to the latest, changelogs from 3 stay
    b = builder(options={"consumer.changelog-only": "true", "changelog.num-retained.max": "100"}, **P)
    for i in range(6):
        b.commit([E(ADD, f"f{i}", ("x",))])
    b.consumer("job", 3)
    expire(b.root, retain_min=1, retain_max=1)
    assert PaimonTable(b.root).list_snapshot_ids() == [6]
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert (plan.begin, plan.end, plan.scope.bound) == (1, 3, "a consumer")
    assert changelog_ids(b) == [3, 4, 5]


def input_table(builder, commits, **options):
    """changelog-producer=input: each commit adds a data file and a changelog file of the same rows."""
    b = builder(options={"changelog-producer": "input", **options}, **P)
    for i in range(commits):
        b.commit([E(ADD, f"data-{i}", ("x",))], changelog=[E(ADD, f"changelog-{i}", ("x",))])
    return b


@pytest.mark.parametrize("producer", ["none", "input"])
def test_a_missing_middle_changelog_does_not_stop_expiry(builder, producer):
    # ChangelogExpireTest#testExpireWithMiddleChangelogNotFound (its table is 'input'): 10 commits,
    # snapshots 1/1, changelogs max = latest, time 0; a middle changelog is deleted before changelog expiry
    if producer == "input":
        b = input_table(builder, 10, **{"changelog.num-retained.max": "10"})
    else:
        b = builder(options={"changelog.num-retained.max": "10"}, **P)
        for i in range(10):
            b.commit([E(ADD, f"f{i}", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    assert changelog_ids(b) == list(range(1, 10))
    os.remove(os.path.join(b.root, "changelog", "changelog-5"))
    plan = expire_changelog(b.root, retain_min=1, retain_max=10)
    [present] = [r for r in plan.requirements if r.TYPE == "paimon.changelogs-present"]
    assert (plan.begin, plan.end) == (1, 9) and sorted(present.changelogs) == [1, 2, 3, 4, 6, 7, 8]
    assert changelog_ids(b) == [9]
    assert PaimonTable(b.root).changelog_earliest_latest() == (9, 9)
    assert verify_table(PaimonTable(b.root)).whole
    if producer == "input":  # the changelog files of the missing changelog leak; the others are gone
        left = sorted(p for p in all_files(b.root) if p.startswith("dt=x/bucket-0/changelog-"))
        assert left == ["dt=x/bucket-0/changelog-4", "dt=x/bucket-0/changelog-8",
                        "dt=x/bucket-0/changelog-9"]


def test_uncleaned_lists_of_a_changelog_with_a_changelog_list_are_not_cleaned(builder):
    # ChangelogExpireTest#testChangelogExpireWithUncleanedManifestLists ('input'; snapshots 1/1,
    # changelogs max 3): snapshot 1's base and delta lists, deleted by snapshot expiry, are put back as a
    # failed snapshot deletion would leave them. Changelog 1 has a changelog list, so changelog expiry
    # cleans only that (#7429): the manifests the restored lists name, which snapshot 4 still uses, stay.
    b = input_table(builder, 1, **{"changelog.num-retained.max": "3"})
    saved = {}
    for p in lists_of(b, 1):
        with open(p, "rb") as f:
            saved[p] = f.read()
    for i in (1, 2):
        b.commit([E(ADD, f"data-{i}", ("x",))], changelog=[E(ADD, f"changelog-{i}", ("x",))])
        expire(b.root, retain_min=1, retain_max=1)
        assert not expire_changelog(b.root, now_ms=SOON, retain_min=1, time_retained="1 h").actions
    assert not any(os.path.exists(p) for p in saved)  # snapshot expiry ('input') deleted them
    for p, data in saved.items():
        with open(p, "wb") as f:
            f.write(data)
    b.commit([E(ADD, "data-3", ("x",))], changelog=[E(ADD, "changelog-3", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    plan = expire_changelog(b.root, now_ms=SOON, retain_min=1, time_retained="1 h")
    assert (plan.begin, plan.end) == (1, 2)
    t = PaimonTable(b.root)
    assert t.list_changelog_ids() == [2, 3]
    for m in t.data_manifests(t.snapshot(4)):
        assert os.path.exists(t.paths.manifest(m.file_name)), m.file_name
    assert all(os.path.exists(p) for p in saved)  # left, as master leaves them
    assert not os.path.exists(b.data_path(E(ADD, "changelog-0", ("x",))))
    assert verify_table(t).whole


def test_the_earliest_snapshot_holds_its_manifests_when_the_end_changelogs_lists_are_gone(builder):
    # #7429's other half: master adds the earliest snapshot to the skipping set. Here the end changelog's
    # lists are gone (a failed deletion), so only the earliest snapshot names the manifests the expired
    # changelogs' base lists share with it.
    b = builder(options={"changelog.num-retained.max": "100"}, **P)
    for name in "abcd":
        b.commit([E(ADD, name, ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    for p in lists_of(b, 3):
        os.remove(p)
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert (plan.begin, plan.end) == (1, 3)
    t = PaimonTable(b.root)
    shared = {m.file_name for m in t.data_manifests(t.snapshot(4))}
    assert len(shared) == 4 and all(os.path.exists(t.paths.manifest(m)) for m in shared)
    assert not (lists_of(b, 1) | lists_of(b, 2)) & {os.path.join(b.root, p) for p in all_files(b.root)}
    assert verify_table(t).whole


def test_append_files_deferred_by_snapshot_expiry_go_with_their_changelog(builder):
    b = builder(options={"changelog.num-retained.max": "100"}, **P)
    a = E(ADD, "a", ("x",))
    b.commit([a])
    b.commit([E(DELETE, "a", ("x",), file_source=0)])  # an APPEND-sourced delete: deferred
    b.commit([E(ADD, "c", ("x",))])
    b.commit([E(ADD, "d", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    assert os.path.exists(b.data_path(a))
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert (plan.begin, plan.end) == (1, 3)
    assert not os.path.exists(b.data_path(a))
    assert "changelog/changelog-1" not in all_files(b.root) and "changelog/changelog-3" in all_files(b.root)


@pytest.mark.parametrize("tagged", [True, False])
def test_a_tag_before_a_changelog_keeps_the_files_its_delta_deleted(builder, tagged):
    # createDataFileSkipperForTags: the tag before each changelog ('none') holds its live files
    b = builder(options={"changelog.num-retained.max": "100"}, **P)
    a, c = E(ADD, "a", ("x",)), E(ADD, "c", ("x",))
    b.commit([a, c])
    if tagged:
        b.tag("t1", 1)
    b.commit([E(DELETE, "a", ("x",), file_source=0), E(DELETE, "c", ("x",), file_source=0)])
    b.commit([E(ADD, "d", ("x",))])
    b.commit([E(ADD, "e", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    assert os.path.exists(b.data_path(a)) and os.path.exists(b.data_path(c))  # deferred
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert (plan.begin, plan.end) == (1, 3)
    assert plan.stats["protected_by_tags"] == (2 if tagged else 0)
    assert os.path.exists(b.data_path(a)) is tagged and os.path.exists(b.data_path(c)) is tagged
    assert verify_table(PaimonTable(b.root)).whole


def test_tags_do_not_hold_changelog_files(builder):
    # planAddedInChangelogManifest runs without a skipper; a tag's skipping entry is its base and delta
    # lists only, so a tagged snapshot's changelog list and files go with its changelog
    b = input_table(builder, 4, **{"changelog.num-retained.max": "100"})
    b.tag("t2", 2)
    expire(b.root, retain_min=1, retain_max=1)
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert (plan.begin, plan.end) == (1, 3)
    files = all_files(b.root)
    assert "dt=x/bucket-0/changelog-1" not in files and "dt=x/bucket-0/changelog-2" in files
    assert {"dt=x/bucket-0/data-0", "dt=x/bucket-0/data-1"} <= files  # the tag's data
    assert not os.path.exists(manifest(b, b.snapshots[2]["changelogManifestList"]))
    assert lists_of(b, 2) <= {os.path.join(b.root, p) for p in files}
    assert verify_table(PaimonTable(b.root)).whole


def emptied_partition(builder, **options):
    b = builder(options={"changelog.num-retained.max": "100", **options}, **P)
    b.commit([E(ADD, "a", ("x",))])
    b.commit([E(DELETE, "a", ("x",), file_source=0)])  # deferred to changelog 2
    b.commit([E(ADD, "d", ("y",))])
    b.commit([E(ADD, "e", ("y",))])
    expire(b.root, retain_min=1, retain_max=1)
    assert os.path.isdir(os.path.join(b.root, "dt=x", "bucket-0"))
    return b


def test_directories_left_empty_stay_without_clean_empty_directories(builder):
    # FileDeletionBase#cleanEmptyDirectories does nothing unless snapshot.clean-empty-directories is set
    b = emptied_partition(builder)
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert not os.path.exists(b.data_path(E(ADD, "a", ("x",))))
    assert os.listdir(os.path.join(b.root, "dt=x", "bucket-0")) == []
    assert not any(a.kind == "expired-changelog-empty-dir" for a in plan.actions)


def test_directories_left_empty_go_with_clean_empty_directories(builder):
    b = emptied_partition(builder, **{"snapshot.clean-empty-directories": "true"})
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert [a.path for a in plan.actions if a.kind == "expired-changelog-empty-dir"] == ["dt=x/bucket-0", "dt=x"]
    assert not os.path.exists(os.path.join(b.root, "dt=x"))
    assert os.path.isdir(os.path.join(b.root, "dt=y", "bucket-0"))


def test_a_missing_changelog_list_stops_planning_and_is_named(builder):
    b = input_table(builder, 4, **{"changelog.num-retained.max": "100"})
    expire(b.root, retain_min=1, retain_max=1)
    gone = manifest(b, b.snapshots[2]["changelogManifestList"])
    os.remove(gone)
    with pytest.raises(MetadataNotFound) as e:
        plan_cl(b.root, retain_min=1, retain_max=1)
    assert e.value.path == gone
    # told to skip it, the plan does as Paimon does: the list's files leak, the rest of changelog 2 goes
    plan = expire_changelog(b.root, retain_min=1, retain_max=1, skip_unreadable=True)
    assert (plan.begin, plan.end) == (1, 3)
    assert plan.stats["warnings"][0] == f"{gone}: manifest list not found -> the changelog files of changelog 2 are kept"
    assert changelog_ids(b) == [3]
    files = all_files(b.root)
    assert "dt=x/bucket-0/changelog-0" not in files and "dt=x/bucket-0/changelog-1" in files


@pytest.mark.parametrize("producer", ["none", "input"])
def test_a_tag_that_cannot_be_read_keeps_the_changelogs_after_it_whole(builder, producer):
    # master's expireUntil: a skipper that cannot be built (for any changelog, one with a changelog list
    # too) skips the changelog: its files, lists and file
    if producer == "input":
        b = input_table(builder, 6, **{"changelog.num-retained.max": "100"})
    else:
        b = builder(options={"changelog.num-retained.max": "100"}, **P)
        for i in range(6):
            b.commit([E(ADD, f"f{i}", ("x",))])
    b.tag("t2", 2)
    expire(b.root, retain_min=1, retain_max=1)
    os.remove(manifest(b, b.snapshots[2]["baseManifestList"]))
    with pytest.raises(MetadataNotFound):
        plan_cl(b.root, retain_min=1, retain_max=1)
    plan = expire_changelog(b.root, retain_min=1, retain_max=1, skip_unreadable=True)
    assert (plan.begin, plan.end) == (1, 5) and plan.stats["skipped_changelogs"] == [3, 4]
    assert changelog_ids(b) == [3, 4, 5]
    assert PaimonTable(b.root).changelog_earliest_latest() == (5, 5)  # the hint moves on, as in Java
    files = {os.path.join(b.root, p) for p in all_files(b.root)}
    if producer == "input":  # snapshot expiry deleted their data lists; their changelog files are kept
        assert {b.data_path(E(ADD, f"changelog-{i}", ("x",))) for i in (2, 3)} <= files
        assert not os.path.exists(b.data_path(E(ADD, "changelog-0", ("x",))))
    else:
        assert lists_of(b, 3) | lists_of(b, 4) <= files
