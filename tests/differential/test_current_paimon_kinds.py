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

from applier.apply import DriverExecutor, apply_plan
from engine.paimon.table import open_table
from engine.paimon.verify import verify_table
from engine.timeutil import system_zone
from journal.duckdb_store import DuckDBRecorder
from planner.options import resolve_partition_options
from planner.partitions import local_time, plan_partitions
from tests.differential import test_changelog_vs_paimon as changelog
from tests.differential import test_partitions_vs_paimon as partitions
from tests.differential import test_tags_vs_paimon as tags
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
    assert [p["spec"] for p in plan.scope["partitions"]] == java["expired"]
    if plan.actions:
        apply(plan, tmp_path / "j.duckdb")
        assert [s["commitKind"] for s in java["snapshots"]] == ["OVERWRITE"]
    else:
        assert java["snapshots"] == []
    return ours, theirs, plan


@pytest.mark.parametrize("kind, strategy, max_expires", [("append", "values-time", 2), ("pk-dv", "update-time", None)])
def test_partition_drop_agrees_with_current_paimon(paimon_java, current_paimon, tmp_path, kind, strategy,
                                                   max_expires):
    ours, theirs, plan = run_partitions(paimon_java, current_paimon, tmp_path, seed=1, kind=kind,
                                        strategy=strategy, max_expires=max_expires)
    assert plan.scope["partitions"] and plan.stats["partitions_considered"] > len(plan.scope["partitions"])
    partitions.compare(paimon_java, ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("max_expires", [None, 1, 3])
@pytest.mark.parametrize("strategy", ["values-time", "update-time"])
@pytest.mark.parametrize("kind", sorted(partitions.KINDS))
@pytest.mark.parametrize("seed", range(6))
def test_partition_drop_agrees_with_current_paimon_on_more_histories(paimon_java, current_paimon, tmp_path, seed,
                                                                     kind, strategy, max_expires):
    ours, theirs, _ = run_partitions(paimon_java, current_paimon, tmp_path, seed=seed, kind=kind,
                                     strategy=strategy, max_expires=max_expires)
    partitions.compare(paimon_java, ours, theirs)


# ---------------------------------------------------------------- tags: deleteTag, TagTimeExpire, TagAutoCreation


@pytest.mark.parametrize("kind", ["pk-dv"])
def test_deleting_tags_frees_what_current_paimon_frees(paimon_java, current_paimon, tmp_path, kind):
    tags.test_deleting_tags_frees_what_paimon_frees(With(paimon_java, current_paimon, "delete_tags"), tmp_path,
                                                    1, kind)


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
    why = {x["tag"]: x["reason"] for x in plan.scope["tags"]}
    assert {n[0] for n in why} == {"f", "r"} and {n[0] for n in left} == {"f", "r"}
    assert any("expired" in r for r in why.values()) and any("before --older-than" in r for r in why.values())
    assert plan.scope["snapshots_gone"]
    assert tags.all_files(ours) == tags.all_files(theirs)
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole


@pytest.mark.parametrize("keep", [2])
def test_num_retained_max_deletes_what_current_paimons_tag_auto_creation_deletes(paimon_java, current_paimon,
                                                                                tmp_path, keep):
    tags.test_num_retained_max_deletes_what_paimons_tag_auto_creation_deletes(
        With(paimon_java, current_paimon, "auto_tag_create"), tmp_path, "pk", keep)


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
