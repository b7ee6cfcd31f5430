"""Differentials of partition, tag, changelog and consumer expiry against current Apache Paimon
(paimon-bundle, pinned in tests/support/maven.py), beside the 0.9 ones: the same seeded histories, written
by Paimon 0.9's harness and copied; current Paimon does the maintenance in one copy, lakesweep plans and
applies it in the other, and the two are compared as the 0.9 differentials compare them.

Where current Paimon and master (which lakesweep follows) differ, a test asserts the difference on a table
Paimon wrote.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.engine.timeutil import system_zone
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import resolve_partition_options
from lakesweep.planner.paimon.partitions import local_time, plan_partitions
from tests.differential import test_changelog_vs_paimon as changelog
from tests.differential import test_partitions_vs_paimon as partitions
from tests.differential import test_tags_vs_paimon as tags
from tests.differential.test_tags_vs_paimon import daily_tagged  # noqa: F401  (a fixture: the 0.9 tables, once)
from tests.support.paimon_java import HarnessError

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def current_paimon():
    from tests.support.paimon_current import CurrentPaimon

    return CurrentPaimon()


class With:
    """The 0.9 harness, with the named maintenance done by current Paimon."""

    def __init__(self, harness, current, *names: str) -> None:
        self._harness = harness
        for name in names:
            setattr(self, name, getattr(current, name))

    def __getattr__(self, name):
        return getattr(self._harness, name)


def apply(plan, journal) -> None:
    with DuckDBRecorder(journal) as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole, report.reason


# ---------------------------------------------------------------- partitions: PartitionExpire


def run_partitions(paimon_java, current_paimon, tmp_path, *, seed: int, kind: str, strategy: str,
                   max_expires: int | None = None):
    """The 0.9 differential's table and now; current Paimon's procedure with ``max_expires`` (its
    ``partition.expiration-max-num``, default 100) in one copy, lakesweep in the other."""
    table_kind, options = partitions.KINDS[kind]
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    paimon_java.generate(ours, seed=seed, kind=table_kind, steps=16, partitions=5, options=options,
                         ops={"consumer": 0})
    shutil.copytree(ours, theirs, symlinks=True)
    zone = system_zone()
    if strategy == "values-time":
        now, expiration = dt.datetime(2024, 1, 2, 12) + dt.timedelta(days=seed % 4), "1 d"
    else:
        now, expiration = partitions.update_time_now(ours, seed), "1 s"
    java = current_paimon.expire_partitions(theirs, expiration_time=expiration, now=now.isoformat(),
                                            strategy=strategy, max_expires=max_expires)
    t = open_table(ours)
    opts = resolve_partition_options(t.options, expiration_time=expiration, strategy=strategy,
                                     max_expires=max_expires, time_zone=zone, system_zone=zone)
    plan = plan_partitions(t, now_ms=partitions.epoch_ms(now, zone), options=opts)
    # current Paimon sorts and limits them as lakesweep does: the same partitions in the same order
    assert [p["spec"] for p in plan.scope.partitions] == java["expired"]
    if plan.actions:
        apply(plan, tmp_path / "j.duckdb")
        assert [s["commitKind"] for s in java["snapshots"]] == ["OVERWRITE"]
    else:
        assert java["snapshots"] == []
    return ours, theirs, plan


def test_partition_drop_agrees_with_current_paimon(paimon_java, current_paimon, tmp_path):
    """partition.expiration-max-num: 1.4.2 sorts the expired partitions and drops the first one, as lakesweep
    plans them."""
    ours, theirs, plan = run_partitions(paimon_java, current_paimon, tmp_path, seed=1, kind="append",
                                        strategy="values-time", max_expires=1)
    assert plan.stats["partitions_left_by_max"] > 0
    assert plan.scope.partitions and plan.stats["partitions_considered"] > len(plan.scope.partitions)
    partitions.compare(paimon_java, ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("max_expires", [None, 1])
@pytest.mark.parametrize("strategy", ["values-time", "update-time"])
@pytest.mark.parametrize("kind", sorted(partitions.KINDS))
@pytest.mark.parametrize("seed", range(4))
def test_partition_drop_agrees_with_current_paimon_on_more_histories(paimon_java, current_paimon, tmp_path, seed,
                                                                     kind, strategy, max_expires):
    ours, theirs, _ = run_partitions(paimon_java, current_paimon, tmp_path, seed=seed, kind=kind,
                                     strategy=strategy, max_expires=max_expires)
    partitions.compare(paimon_java, ours, theirs)


TYPED = {"INT": ["20230101", "20230105"], "DATE": ["2023-01-01", "2023-01-05"],
         "TIMESTAMP(3)": ["2023-01-01 10:00:00", "2023-01-05 00:00:00"]}


def typed_table(paimon_java, root, type_: str, *, creation_times: bool = False) -> None:
    first, second = TYPED[type_]
    times = {"creation_times": ["2023-01-02T00:00:00"]} if creation_times else {}
    paimon_java.write_partitions(root, partition_keys=[("dt", type_)], partitions=[[first]], **times)
    times = {"creation_times": ["2023-01-07T12:00:00"]} if creation_times else {}
    paimon_java.write_partitions(root, partitions=[[second]], **times)


def plan_typed(root, *, strategy: str, now: dt.datetime, formatter: str | None = None, pattern: str | None = None):
    zone = system_zone()
    t = open_table(root)
    opts = resolve_partition_options(t.options, expiration_time="1 d", strategy=strategy, time_zone=zone,
                                     timestamp_formatter=formatter, timestamp_pattern=pattern, system_zone=zone)
    return plan_partitions(t, now_ms=partitions.epoch_ms(now, zone), options=opts)


@pytest.mark.parametrize("type_, formatter, expired", [
    ("INT", "yyyyMMdd", ["20230101"]), ("DATE", None, None),
    pytest.param("INT", None, None, marks=pytest.mark.slow),
    pytest.param("DATE", "yyyyMMdd", None, marks=pytest.mark.slow),
    pytest.param("TIMESTAMP(3)", None, None, marks=pytest.mark.slow)])
def test_typed_partitions_under_values_time_as_in_current_paimon(paimon_java, current_paimon, tmp_path, type_,
                                                                 formatter, expired):
    """Paimon reads the text of the Java value: an INT's digits, a DATE's epoch day (``19358``), a
    TIMESTAMP's ``LocalDateTime#toString`` (``2023-01-01T10:00``). Only the INT read with a formatter is a
    time; where no partition reads as one, 1.4.2 drops nothing and lakesweep refuses to plan."""
    ours = str(tmp_path / "ours")
    typed_table(paimon_java, ours, type_)
    now = dt.datetime(2023, 1, 4)
    theirs = shutil.copytree(ours, tmp_path / "theirs")
    java = current_paimon.expire_partitions(theirs, expiration_time="1 d", now=now.isoformat(),
                                            timestamp_formatter=formatter)
    if expired is None:
        assert java == {"expired": [], "snapshots": []}
        with pytest.raises(PlanRejected, match="no partition's value can be read as a time"):
            plan_typed(ours, strategy="values-time", now=now, formatter=formatter)
    else:
        plan = plan_typed(ours, strategy="values-time", now=now, formatter=formatter)
        assert [p["spec"] for p in plan.scope.partitions] == [{"dt": v} for v in expired] == java["expired"]


@pytest.mark.slow
@pytest.mark.parametrize("type_", ["DATE", "TIMESTAMP(3)"])
def test_typed_partitions_under_update_time_as_in_current_paimon(paimon_java, current_paimon, tmp_path, type_):
    """update-time drops the partition whose files are old. 1.4.2 names a DATE partition by its epoch day
    and casts that back: it drops the same partition lakesweep drops. It names a TIMESTAMP partition
    ``2023-01-01T10:00``, which its drop cannot cast back: it fails and commits nothing (0.9 too), where
    lakesweep drops it."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    typed_table(paimon_java, ours, type_, creation_times=True)
    shutil.copytree(ours, theirs)
    now = dt.datetime(2023, 1, 8)
    first, second = [p["path"].rstrip("/") for p in paimon_java.partitions(ours)]
    plan = plan_typed(ours, strategy="update-time", now=now)
    assert [p["partition"] for p in plan.scope.partitions] == [first]
    apply(plan, tmp_path / "j.duckdb")
    assert [p["path"].rstrip("/") for p in paimon_java.partitions(ours)] == [second]
    if type_ == "DATE":
        java = current_paimon.expire_partitions(theirs, expiration_time="1 d", now=now.isoformat(),
                                                strategy="update-time")
        assert java["expired"] == [{"dt": "19358"}]
        assert [p["path"].rstrip("/") for p in paimon_java.partitions(theirs)] == [second]
        partitions.compare(paimon_java, ours, theirs)
    else:
        with pytest.raises(HarnessError, match="Text '2023-01-01T10:00' could not be parsed"):
            current_paimon.expire_partitions(theirs, expiration_time="1 d", now=now.isoformat(),
                                             strategy="update-time")
        assert [p["path"].rstrip("/") for p in paimon_java.partitions(theirs)] == [first, second]


@pytest.mark.slow
@pytest.mark.parametrize("keys, expired", [(["dt", "dt1"], []), (["dt1", "dt"], [{"dt1": "2023-01-01", "dt": "x"}])])
def test_pattern_substitution_follows_key_order_in_current_paimon(paimon_java, current_paimon, tmp_path, keys,
                                                                  expired):
    """1.4.2 still replaces ``$key`` in key order, as 0.9 does: with keys (dt, dt1), ``$dt1`` becomes ``x1``
    and never parses. Master, and lakesweep, replace the longest key first and read dt1."""
    root = str(tmp_path / "t")
    values = {"dt": "x", "dt1": "2023-01-01"}
    paimon_java.write_partitions(root, partition_keys=[(k, "STRING") for k in keys],
                                 partitions=[[values[k] for k in keys]])
    now = dt.datetime(2023, 1, 8)
    plan = plan_typed(root, strategy="values-time", now=now, pattern="$dt1")
    assert [p["spec"] for p in plan.scope.partitions] == [{k: values[k] for k in keys}]
    java = current_paimon.expire_partitions(root, expiration_time="1 d", now=now.isoformat(),
                                            timestamp_pattern="$dt1")
    assert java["expired"] == expired


@pytest.mark.slow
def test_a_value_with_a_comma_drops_another_partition_in_current_paimon(paimon_java, current_paimon, tmp_path):
    """1.4.2 sorts the expired partitions by their values joined with commas and splits them again, so a
    value holding a comma (``a,b``) becomes ``a``: it drops partition ``a``, which had not expired, and keeps
    ``a,b``. Master sorts without splitting, and lakesweep drops ``a,b``."""
    root = str(tmp_path / "t")
    paimon_java.write_partitions(root, partition_keys=[("dt", "STRING")], partitions=[["a,b"]],
                                 creation_times=["2023-01-02T00:00:00"])
    paimon_java.write_partitions(root, partitions=[["a"]], creation_times=["2023-01-07T12:00:00"])
    now = dt.datetime(2023, 1, 8)
    plan = plan_typed(root, strategy="update-time", now=now)
    assert [p["spec"] for p in plan.scope.partitions] == [{"dt": "a,b"}]
    java = current_paimon.expire_partitions(root, expiration_time="1 d", now=now.isoformat(),
                                            strategy="update-time")
    assert java["expired"] == [{"dt": "a"}]
    assert [p["spec"] for p in paimon_java.partitions(root)] == [{"dt": "a,b"}]


# ---------------------------------------------------------------- tags: deleteTag, TagTimeExpire, TagAutoCreation


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(tags.KINDS))
@pytest.mark.parametrize("seed", range(2, 12))
def test_deleting_tags_frees_what_current_paimon_frees_on_more_histories(paimon_java, current_paimon, tmp_path,
                                                                         seed, kind):
    harness = With(paimon_java, current_paimon, "delete_tags")
    tags.test_deleting_tags_frees_what_paimon_frees_on_more_histories(harness, tmp_path, seed, kind)
    if seed < 4:
        tags.test_deleting_every_tag_frees_what_paimon_frees(harness, tmp_path / "every", kind)


def test_tag_older_than_and_time_retained_agree_with_current_paimons_tag_time_expire(paimon_java, current_paimon,
                                                                                    tmp_path):
    """``TagTimeExpire#withOlderThanTime`` as the expire_tags procedure runs it (1.4.2 has it as master has,
    whose rule lakesweep's --older-than follows): a tag created with a time retained goes once that has
    passed, or when it was created before the cut; one without by its file's modification time."""
    ours = str(tmp_path / "ours")
    g = paimon_java.generate(ours, seed=4, kind="append", steps=24, partitions=3,
                             ops={"consumer": 0, "tag": 0, "untag": 0})
    ids = list(range(2, g["snapshots"][-1]["id"], 2))
    cut_ms = None
    for i, sid in enumerate(ids):
        if i % 3 == 0:  # judged by its file's time, set below
            paimon_java.create_tag(ours, f"f{sid:03d}", sid)
        else:  # judged by its creation time: a day retained, or 1 ms (expired on its own)
            paimon_java.create_tag(ours, f"r{sid:03d}", sid, time_retained_ms=1 if i % 3 == 2 else 86_400_000)
        if i == len(ids) // 2:  # the cut falls between two creation times
            time.sleep(0.05)
            cut_ms = int(time.time() * 1000)
            time.sleep(0.05)
    for i, sid in enumerate(ids[::3]):  # files an hour old (after the cut) or 1.5, 3.5... days old
        ms = cut_ms - 43_200_000 - i * 86_400_000 if i % 2 else cut_ms + 3_600_000
        os.utime(os.path.join(ours, "tag", f"tag-f{sid:03d}"), ns=(ms * 1_000_000, ms * 1_000_000))
    paimon_java.expire(ours, retain_min=3, retain_max=3, max_deletes=1000)
    time.sleep(0.05)
    theirs = tags.copies(ours, tmp_path)
    zone = system_zone()  # the JVM reads its local date-times in this machine's zone
    left = current_paimon.expire_tags(theirs, older_than=local_time(cut_ms, zone).isoformat())
    plan = tags.apply_ours(ours, tmp_path, older_than=str(cut_ms), time_zone=zone)
    assert sorted(x.name for x in open_table(ours).tags()) == left
    why = {x["tag"]: x["reason"] for x in plan.scope.tags}
    assert {n[0] for n in why} == {"f", "r"} and {n[0] for n in left} == {"f", "r"}
    assert any("expired" in r for r in why.values()) and any("before --older-than" in r for r in why.values())
    assert plan.scope.snapshots_gone
    assert tags.all_files(ours) == tags.all_files(theirs)
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(tags.KINDS))
@pytest.mark.parametrize("keep", [1, 3])
def test_num_retained_max_deletes_what_current_paimons_tag_auto_creation_deletes(paimon_java, current_paimon,
                                                                                daily_tagged, tmp_path, keep, kind):
    tags.test_num_retained_max_deletes_what_paimons_tag_auto_creation_deletes(
        With(paimon_java, current_paimon, "auto_tag_create"), daily_tagged, tmp_path, kind, keep)


# ---------------------------------------------------------------- changelog: ExpireChangelogImpl


@pytest.mark.parametrize("producer", ["lookup-dv"])
def test_changelog_expiry_deletes_what_current_paimon_deletes(paimon_java, current_paimon, tmp_path, producer):
    """A deletion-vector table, whose changelogs 0.9 cannot expire (it reads the end changelog's index
    manifest as required): 1.4.2 reads it only if it exists, as master does."""
    harness = With(paimon_java, current_paimon, "expire_changelog")
    ours, theirs, plan, before = changelog.run(harness, tmp_path, seed=0, producer="lookup", retain=6,
                                               options={"deletion-vectors.enabled": "true"})
    assert theirs is not None and plan.actions
    changelog.assert_same_deletes(before, ours, theirs)
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole


@pytest.mark.slow
@pytest.mark.parametrize("producer", sorted(changelog.PRODUCERS))
@pytest.mark.parametrize("seed", range(2, 8))
def test_changelog_expiry_deletes_what_current_paimon_deletes_on_more_histories(paimon_java, current_paimon,
                                                                               tmp_path, seed, producer):
    harness = With(paimon_java, current_paimon, "expire_changelog")
    ours, theirs, _, before = changelog.run(harness, tmp_path, seed=seed, producer=producer, retain=4 + seed % 5,
                                            tags=seed % 2 == 0)
    assert theirs is not None
    changelog.assert_same_deletes(before, ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("producer, seed", [("none", 1), ("input", 0)])
def test_directories_left_empty_go_as_current_paimons_do(paimon_java, current_paimon, tmp_path, producer, seed):
    changelog.test_directories_left_empty_go_as_paimons_do(With(paimon_java, current_paimon, "expire_changelog"),
                                                           tmp_path, producer, seed)


@pytest.mark.slow
def test_a_consumer_bounds_changelog_expiry_as_in_current_paimon(paimon_java, current_paimon, tmp_path):
    changelog.test_a_consumer_bounds_both_expiries_alike(With(paimon_java, current_paimon, "expire_changelog"),
                                                         tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("producer, with_list", [("input-unmerged", True), ("input-unmerged", False)])
def test_lists_a_failed_snapshot_deletion_left_go_as_in_current_paimon(paimon_java, current_paimon, tmp_path,
                                                                       producer, with_list):
    """#7429, which 0.9 gets wrong (test_changelog_vs_paimon): 1.4.2 cleans only the changelog list of a
    changelog that has one and holds the earliest snapshot's manifests, as master and lakesweep do."""
    ours, victim, saved = changelog.lists_left_behind(paimon_java, tmp_path, producer, with_list)
    theirs, plan, before, error = changelog.both_expire(With(paimon_java, current_paimon, "expire_changelog"),
                                                        tmp_path, ours, retain=5)
    assert error is None and plan.begin <= victim.id < plan.end
    deleted = changelog.assert_same_deletes(before, ours, theirs)
    restored = {f"manifest/{n}" for n in saved}
    assert restored.isdisjoint(deleted) if with_list else restored <= deleted
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole


@pytest.mark.slow
def test_a_range_before_the_earliest_changelog_fails_in_current_paimon_too(paimon_java, current_paimon, tmp_path):
    """#7923 is fixed in master only: with more changelogs retained than there are, 1.4.2 fails as 0.9 does
    on the changelog before the earliest one (lakesweep plans nothing, as master does), and at exactly as many
    it writes the EARLIEST hint where it already points."""
    changelog.test_a_range_before_the_earliest_changelog_fails_in_0_9_and_plans_nothing(
        With(paimon_java, current_paimon, "expire_changelog"), tmp_path)


@pytest.mark.slow
def test_a_missing_changelog_stops_current_paimon_midway_too(paimon_java, current_paimon, tmp_path):
    """Master passes a missing changelog over (tryGetChangelog); 1.4.2 still reads it as required
    (longLivedChangelog): it expires those before it and fails on it as 0.9 does, writing no hint."""
    changelog.test_a_missing_changelog_stops_0_9_midway_and_master_past_it(
        With(paimon_java, current_paimon, "expire_changelog"), tmp_path)


# ---------------------------------------------------------------- consumers: ConsumerManager#expire, and expiry


@pytest.mark.slow
def test_consumer_expiry_agrees_with_current_paimon(paimon_java, current_paimon, tmp_path):
    from tests.applier.test_consumers import test_agrees_with_paimons_consumer_expiry

    test_agrees_with_paimons_consumer_expiry(With(paimon_java, current_paimon, "expire_consumers"), tmp_path, 1)


def expire_both(current_paimon, ours: str, *, retain: int, older_than_ms: int):
    """Copy ``ours``; 1.4.2's ExpireSnapshotsImpl expires the copy, lakesweep ``ours``; the two trees and
    EARLIEST hints must be the same. Returns the plan."""
    # 1.4.2 expires a snapshot by its own time; the successor rule lakesweep follows by default is master's
    # (2.0, not on Maven Central): lakesweep runs with --time-rule own here, as in test_current_paimon.py
    from lakesweep.applier.local import apply_locally
    from lakesweep.planner.paimon.expire import plan_expire
    from lakesweep.planner.paimon.options import TIME_RULE_OWN, resolve_expire_options
    from tests.differential.test_expire_vs_paimon import hint, tree

    theirs = ours + "-theirs"
    shutil.copytree(ours, theirs)
    current_paimon.expire(theirs, retain_min=retain, retain_max=retain, max_deletes=1000,
                          older_than_ms=older_than_ms)
    t = open_table(ours)
    plan = plan_expire(t, now_ms=older_than_ms, options=resolve_expire_options(
        t.options, retain_min=retain, retain_max=retain, time_retained=0, max_deletes=1000,
        time_rule=TIME_RULE_OWN))
    assert all(r.outcome != "FAILED" for r in apply_locally(plan))
    assert tree(ours) == tree(theirs) and hint(ours) == hint(theirs)
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole
    return plan


def test_tags_hold_their_files_through_expiry_and_deleting_them_frees_what_current_paimon_frees(
        paimon_java, current_paimon, tmp_path):
    """Tags on a deletion-vector table: 1.4.2's snapshot expiry and lakesweep's keep what the tags hold
    alike; then deleting every other tag (deleteTag, TagDeletion) frees the same files on both."""
    ours = str(tmp_path / "ours")
    g = paimon_java.generate(ours, seed=1, kind="pk", steps=20, partitions=3,
                             options={"deletion-vectors.enabled": "true"}, ops={"consumer": 0, "tag": 0, "untag": 0})
    latest = g["snapshots"][-1]["id"]
    for sid in range(2, latest - 2, 3):
        paimon_java.create_tag(ours, f"t{sid:03d}", sid)
    held = {f for files in paimon_java.live_files(ours)["tags"].values() for f in files}
    plan = expire_both(current_paimon, ours, retain=3, older_than_ms=g["snapshots"][-1]["timeMillis"] + 1_000)
    assert plan.end == latest - 2 and plan.actions and not {a.path for a in plan.actions} & held
    theirs = ours + "-theirs"
    doomed = [t.name for t in open_table(ours).tags()][1::2]
    left = current_paimon.delete_tags(theirs, doomed)
    plan = tags.apply_ours(ours, tmp_path, names=doomed)
    assert sorted(t.name for t in open_table(ours).tags()) == left
    assert any(str(a.kind) == "tag-data-file" for a in plan.actions)
    assert tags.all_files(ours) == tags.all_files(theirs)
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole


@pytest.mark.parametrize("kind", ["pk"])
def test_a_consumer_bounds_snapshot_expiry_as_in_current_paimon(paimon_java, current_paimon, tmp_path, kind):
    """A streaming reader's consumer file inside the history: 1.4.2's ExpireSnapshotsImpl and lakesweep both
    stop at its next snapshot, though the retain settings would let more go."""
    ours = str(tmp_path / "ours")
    g = paimon_java.generate(ours, seed=3, kind=kind, steps=12, ops={"consumer": 0})
    reads = g["snapshots"][len(g["snapshots"]) // 2]["id"]
    os.makedirs(os.path.join(ours, "consumer"), exist_ok=True)
    with open(os.path.join(ours, "consumer", "consumer-job"), "w") as f:
        json.dump({"nextSnapshot": reads}, f)
    plan = expire_both(current_paimon, ours, retain=1, older_than_ms=g["snapshots"][-1]["timeMillis"] + 1_000)
    assert plan.end == reads and open_table(ours).earliest_latest()[0] == reads
