"""Differential: lakesweep's decoupled changelog expiry against Apache Paimon 0.9's own
``ExpireChangelogImpl``, on tables Paimon wrote and whose snapshots Paimon expired with changelogs
decoupled (so ``changelog/changelog-<id>`` files and what they need are left behind).

Each table is copied; Paimon expires changelogs in one copy, lakesweep plans and applies in the other with
the same settings. What each side deleted (files and directories, path by path) must be the same, the
changelog EARLIEST hint the same, and both tables must verify whole.

Where master (which lakesweep follows) and 0.9 differ, a test below shows the difference on a table Paimon
wrote: the index manifest 0.9 reads as required, the lists 0.9 cleans for a changelog with a changelog list
(#7429), the range 0.9 does not guard (#7923) and the missing changelog 0.9 stops at.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.paimon.manifests import parse_manifest_list
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.changelog import plan_changelog, read_changelog
from lakesweep.planner.kinds import plan_kind
from tests.support.paimon_java import HarnessError

pytestmark = pytest.mark.java

UNMERGED = {"manifest.merge-min-count": "10000", "manifest.full-compaction-threshold-size": "1 gb"}
PRODUCERS = {
    "none": ("append", {"bucket": "2", "bucket-key": "id"}),
    "pk-none": ("pk", {"changelog-producer": "none"}),
    "input": ("pk", {"changelog-producer": "input"}),
    "lookup": ("pk", {"changelog-producer": "lookup"}),
    # manifests never merged: the lists of many changelogs and snapshots share them, so the skipping set
    # decides what goes
    "none-unmerged": ("append", {"bucket": "2", "bucket-key": "id", **UNMERGED}),
    "input-unmerged": ("pk", {"changelog-producer": "input", **UNMERGED}),
}
INDEX_MANIFEST_FAILURE = "Failed to read manifest list index-manifest-"


def listing(root: str) -> set[str]:
    """Every file, and every directory (with a trailing '/'), relative to ``root``."""
    out = set()
    for d, dirs, files in os.walk(root):
        out |= {os.path.relpath(os.path.join(d, f), root) for f in files}
        out |= {os.path.relpath(os.path.join(d, x), root) + "/" for x in dirs}
    return out


def hint(root: str) -> str | None:
    path = os.path.join(root, "changelog", "EARLIEST")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def decoupled_table(paimon_java, root: str, *, seed: int, producer: str, tags: bool, **generate) -> None:
    kind, options = PRODUCERS[producer]
    ops = {"consumer": 0} if tags else {"consumer": 0, "tag": 0, "untag": 0}
    options = {**options, **generate.pop("options", {})}
    paimon_java.generate(root, seed=seed, kind=kind, steps=24, partitions=generate.pop("partitions", 2),
                         options=options, ops={**ops, **generate.pop("ops", {})}, **generate)
    paimon_java.expire(root, retain_min=3, retain_max=3, max_deletes=1000, changelog_retain_min=14,
                       changelog_retain_max=14)
    assert os.listdir(os.path.join(root, "changelog")), "snapshot expiry left no changelog"


def lakesweep_expires(root: str, journal, *, retain: int):
    t = open_table(root)
    opts = plan_kind("changelog", "paimon").resolve_options(t.options, retain_min=retain, retain_max=retain,
                                                  time_retained="0 s", max_deletes=1000)
    now = int(time.time() * 1000)
    plan = plan_changelog(t, now_ms=now, options=opts, read=read_changelog(t, now_ms=now, options=opts))
    with DuckDBRecorder(journal) as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole, report.reason
    return plan


def both_expire(paimon_java, tmp_path, ours: str, *, retain: int):
    """Copy ``ours``; Paimon expires the copy, lakesweep ``ours``. Returns (theirs or None when 0.9 failed
    with its index-manifest error, the plan, the listing before, 0.9's error)."""
    theirs = str(tmp_path / "theirs")
    shutil.copytree(ours, theirs)
    before = listing(ours)
    error = None
    try:
        paimon_java.expire_changelog(theirs, retain_min=retain, retain_max=retain, time_retained_ms=0,
                                     max_deletes=1000)
    except HarnessError as e:
        error = e
    plan = lakesweep_expires(ours, tmp_path / "j.duckdb", retain=retain)
    return theirs, plan, before, error


def assert_same_deletes(before: set[str], ours: str, theirs: str) -> set[str]:
    """Both sides deleted the same paths and wrote nothing but the changelog EARLIEST hint, with the same
    value. Returns the deleted paths."""
    after_ours, after_theirs = listing(ours), listing(theirs)
    deleted_ours, deleted_theirs = before - after_ours, before - after_theirs
    assert sorted(deleted_ours - deleted_theirs) == [], "deleted by lakesweep only"
    assert sorted(deleted_theirs - deleted_ours) == [], "deleted by Paimon only"
    assert after_ours - before <= {"changelog/EARLIEST"} and after_theirs - before <= {"changelog/EARLIEST"}
    assert hint(ours) == hint(theirs)
    return deleted_ours


def run(paimon_java, tmp_path, *, seed: int, producer: str, retain: int, tags: bool = False, **generate):
    ours = str(tmp_path / "ours")
    decoupled_table(paimon_java, ours, seed=seed, producer=producer, tags=tags, **generate)
    theirs, plan, before, error = both_expire(paimon_java, tmp_path, ours, retain=retain)
    if error is not None:
        # 0.9's failure on tables with an index manifest (test_a_deletion_vector_table_...): nothing to
        # compare, and lakesweep must still have left its table whole (lakesweep_expires checks)
        assert INDEX_MANIFEST_FAILURE in str(error), error
        return ours, None, plan, before
    return ours, theirs, plan, before


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_changelog_expiry_deletes_what_paimon_deletes(paimon_java, tmp_path, seed, producer):
    ours, theirs, plan, before = run(paimon_java, tmp_path, seed=seed, producer=producer, retain=6)
    assert theirs is not None
    assert plan.end is not None and plan.end > plan.begin
    deleted = assert_same_deletes(before, ours, theirs)
    assert {f"changelog/changelog-{i}" for i in range(plan.begin, plan.end)} <= deleted
    assert any(p.startswith("manifest/") for p in deleted) and any("/bucket-" in p for p in deleted)
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole


@pytest.mark.parametrize("producer", ["none", "pk-none", "none-unmerged"])
def test_tags_keep_the_files_of_changelogs_after_them(paimon_java, tmp_path, producer):
    ours, theirs, plan, before = run(paimon_java, tmp_path, seed=5, producer=producer, retain=4, tags=True)
    assert theirs is not None and open_table(ours).tags()
    assert_same_deletes(before, ours, theirs)
    assert verify_table(open_table(ours)).whole


@pytest.mark.parametrize("producer, seed", [("none", 1), ("input", 0), ("input", 1)])
def test_directories_left_empty_go_as_paimons_do(paimon_java, tmp_path, producer, seed):
    """snapshot.clean-empty-directories: writes of one row to one of four buckets, and overwrites, leave
    bucket directories holding only the files of expired changelogs; both sides remove the same ones."""
    ours, theirs, plan, before = run(
        paimon_java, tmp_path, seed=seed, producer=producer, retain=6, partitions=3, rows_per_write=1,
        options={"bucket": "4", "snapshot.clean-empty-directories": "true"}, ops={"overwrite": 30})
    assert theirs is not None
    deleted = assert_same_deletes(before, ours, theirs)
    assert any(p.endswith("/") for p in deleted), "the seed must leave a directory empty"


def test_a_consumer_bounds_both_expiries_alike(paimon_java, tmp_path):
    """A consumer reading inside the changelogs (its file as Paimon writes it): both stop before it."""
    ours = str(tmp_path / "ours")
    decoupled_table(paimon_java, ours, seed=3, producer="input", tags=False)
    earliest, latest = open_table(ours).changelog_earliest_latest()
    reads = (earliest + latest) // 2
    os.makedirs(os.path.join(ours, "consumer"), exist_ok=True)
    with open(os.path.join(ours, "consumer", "consumer-job"), "w") as f:
        json.dump({"nextSnapshot": reads}, f)
    theirs, plan, before, error = both_expire(paimon_java, tmp_path, ours, retain=3)
    assert error is None
    assert (plan.begin, plan.end, plan.scope.bound) == (earliest, reads, "a consumer")
    assert_same_deletes(before, ours, theirs)
    assert open_table(theirs).changelog_earliest_latest() == (reads, latest)


@pytest.mark.slow
@pytest.mark.parametrize("producer", sorted(PRODUCERS))
@pytest.mark.parametrize("seed", range(2, 12))
def test_changelog_expiry_deletes_what_paimon_deletes_on_more_histories(paimon_java, tmp_path, seed, producer):
    ours, theirs, _, before = run(paimon_java, tmp_path, seed=seed, producer=producer, retain=4 + seed % 5,
                                  tags=seed % 2 == 0)
    if theirs is not None:
        assert_same_deletes(before, ours, theirs)
    assert verify_table(open_table(ours)).whole


# ---------------------------------------------------------------- where 0.9 and master differ


def test_a_deletion_vector_table_paimon_0_9_cannot_expire_is_expired_as_master_does(paimon_java, tmp_path):
    """0.9 reads the index manifest of the changelog at the range's end as required, though snapshot expiry
    deleted it (it keeps index manifests of the end snapshot and tags only), and fails; master reads it only
    if it exists, and so does lakesweep."""
    root = str(tmp_path / "dv")
    paimon_java.generate(root, seed=0, kind="pk", steps=24, partitions=2, ops={"consumer": 0, "tag": 0, "untag": 0},
                         options={"changelog-producer": "lookup", "deletion-vectors.enabled": "true"})
    paimon_java.expire(root, retain_min=3, retain_max=3, max_deletes=1000, changelog_retain_min=14,
                       changelog_retain_max=14)
    copy = str(tmp_path / "copy")
    shutil.copytree(root, copy)
    with pytest.raises(HarnessError, match=INDEX_MANIFEST_FAILURE):
        paimon_java.expire_changelog(copy, retain_min=6, retain_max=6, time_retained_ms=0, max_deletes=1000)
    plan = lakesweep_expires(root, tmp_path / "j.duckdb", retain=6)
    assert plan.actions
    assert verify_table(open_table(root)).whole


def lists_left_behind(paimon_java, tmp_path, producer: str, with_list: bool):
    """A decoupled table whose snapshot expiry failed to delete one snapshot's base and delta lists: they
    are put back after it. Returns (the root, that snapshot, {list name: its bytes})."""
    kind, options = PRODUCERS[producer]
    ours = str(tmp_path / "ours")
    paimon_java.generate(ours, seed=1, kind=kind, steps=24, partitions=2, options={**options, **UNMERGED},
                         ops={"consumer": 0, "tag": 0, "untag": 0})
    t = open_table(ours)
    latest = t.earliest_latest()[1]
    victim = next(t.snapshot(i) for i in range(latest - 6, 0, -1)
                  if bool(t.snapshot(i).changelog_manifest_list) is with_list)
    saved = {}
    for name in (victim.base_manifest_list, victim.delta_manifest_list):
        with open(t.paths.manifest(name), "rb") as f:
            saved[name] = f.read()
    paimon_java.expire(ours, retain_min=3, retain_max=3, max_deletes=1000, changelog_retain_min=14,
                       changelog_retain_max=14)
    for name, data in saved.items():
        path = open_table(ours).paths.manifest(name)
        assert not os.path.exists(path)
        with open(path, "wb") as f:
            f.write(data)
    return ours, victim, saved


@pytest.mark.parametrize("producer, with_list", [("input-unmerged", True), ("input-unmerged", False),
                                                 ("lookup", True)])
@pytest.mark.slow
def test_lists_a_failed_snapshot_deletion_left_break_the_table_in_0_9_only(paimon_java, tmp_path, producer,
                                                                           with_list):
    """#7429 (ChangelogExpireTest#testChangelogExpireWithUncleanedManifestLists on a table Paimon wrote): a
    snapshot's base and delta lists, which snapshot expiry deleted ('input', 'lookup'), are put back as a
    failed deletion leaves them. 0.9 cleans them with every manifest they name that is not in its skipping
    set, which lacks the earliest snapshot: manifests the live snapshots still use go, and the table is no
    longer whole. Master, and lakesweep, clean only the changelog list of a changelog that has one (the two
    lists leak), and hold the earliest snapshot's manifests when cleaning the lists of one that has not
    (a compaction's, here)."""
    ours, victim, saved = lists_left_behind(paimon_java, tmp_path, producer, with_list)
    theirs, plan, before, error = both_expire(paimon_java, tmp_path, ours, retain=5)
    assert error is None and plan.begin <= victim.id < plan.end
    deleted_ours, deleted_theirs = before - listing(ours), before - listing(theirs)
    assert deleted_ours < deleted_theirs
    restored = {f"manifest/{n}" for n in saved}
    assert restored <= deleted_theirs
    assert restored.isdisjoint(deleted_ours) if with_list else restored <= deleted_ours
    named = {f"manifest/{m.file_name}" for n, data in saved.items() for m in parse_manifest_list(n, data)}
    assert deleted_theirs - deleted_ours <= restored | named
    broken = verify_table(open_table(theirs))
    missing = {os.path.relpath(p.path, theirs) for p in broken.problems if p.kind == "missing"}
    assert missing and missing <= named - deleted_ours
    assert verify_table(open_table(ours)).whole


def test_a_range_before_the_earliest_changelog_fails_in_0_9_and_plans_nothing(paimon_java, tmp_path):
    """#7923: with more changelogs retained than there are, master returns before reading anything; 0.9
    goes on to read the changelog before the earliest one and fails. At exactly as many, 0.9 writes the
    EARLIEST hint where it already points and lakesweep plans nothing."""
    ours = str(tmp_path / "ours")
    decoupled_table(paimon_java, ours, seed=1, producer="input", tags=False)
    earliest_c, _ = open_table(ours).changelog_earliest_latest()
    latest_s = open_table(ours).earliest_latest()[1]
    count = latest_s - earliest_c + 1
    theirs, plan, before, error = both_expire(paimon_java, tmp_path, ours, retain=count + 1)
    assert error is not None and f"changelog/changelog-{earliest_c - 1}" in str(error)
    assert plan.actions == () and plan.begin is None
    assert listing(ours) == before == listing(theirs)
    shutil.rmtree(theirs)
    theirs, plan, before, error = both_expire(paimon_java, tmp_path, ours, retain=count)
    assert error is None and plan.actions == ()
    assert listing(ours) == before and listing(theirs) - before == {"changelog/EARLIEST"}
    assert hint(theirs) == str(earliest_c)


def test_a_missing_changelog_stops_0_9_midway_and_master_past_it(paimon_java, tmp_path):
    """ChangelogExpireTest#testExpireWithMiddleChangelogNotFound on a table Paimon wrote: 0.9 expires the
    changelogs before the missing one and fails on it, writing no hint; master, and lakesweep, skip it and
    expire the whole range. Both tables stay whole; 0.9's deletes are a part of lakesweep's."""
    ours = str(tmp_path / "ours")
    decoupled_table(paimon_java, ours, seed=2, producer="input", tags=False)
    earliest_c, latest_c = open_table(ours).changelog_earliest_latest()
    middle = (earliest_c + latest_c) // 2
    os.remove(os.path.join(ours, "changelog", f"changelog-{middle}"))
    theirs, plan, before, error = both_expire(paimon_java, tmp_path, ours, retain=3)
    assert error is not None and str(error).endswith(f"changelog/changelog-{middle}")
    assert plan.begin == earliest_c and plan.end > middle
    deleted_ours, deleted_theirs = before - listing(ours), before - listing(theirs)
    assert deleted_theirs < deleted_ours
    left_theirs = sorted(open_table(theirs).list_changelog_ids())
    assert left_theirs == [i for i in range(middle + 1, latest_c + 1)] and hint(theirs) is None
    assert open_table(ours).list_changelog_ids() == list(range(plan.end, latest_c + 1))
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole
