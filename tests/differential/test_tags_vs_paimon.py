"""Differential: lakesweep's tag expiry against Apache Paimon 0.9's own tag deletion (``TagManager#deleteTag``
with ``TagDeletion``) and ``TagTimeExpire``, on tables Paimon wrote.

Each table gets tags and a snapshot expiry from Paimon first, so that some tags' snapshots are gone; it is
then copied. Paimon deletes tags in one copy, lakesweep plans and applies the same in the other; every
file of the two tables must then be the same, and both must verify whole.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import resolve_tag_options
from lakesweep.planner.paimon.tags import plan_tags, read_tags

pytestmark = pytest.mark.java

KINDS = {
    "append": ("append", {"bucket": "2", "bucket-key": "id"}),
    "pk-dv": ("pk", {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"}),
    "pk": ("pk", {}),
}


def all_files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}


def tagged_table(paimon_java, root: str, *, seed: int, kind: str, retain: int = 3) -> list[str]:
    """A table with tags on several snapshots, most of them expired by Paimon: the tag names, oldest first."""
    table_kind, options = KINDS[kind]
    g = paimon_java.generate(root, seed=seed, kind=table_kind, steps=24, partitions=3, options=options,
                             ops={"consumer": 0, "untag": 0})
    latest = g["snapshots"][-1]["id"]
    for sid in range(2, latest, 3):
        paimon_java.create_tag(root, f"t{sid:03d}", sid)
    paimon_java.expire(root, retain_min=retain, retain_max=retain, max_deletes=1000)
    t = open_table(root)
    return [x.name for x in t.tags()]


def apply_ours(root: str, tmp_path, **flags):
    t = open_table(root)
    opts = resolve_tag_options(t.options, **flags)
    plan = plan_tags(t, now_ms=int(time.time() * 1000), options=opts, read=read_tags(t, options=opts))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole, report.reason
    return plan


def copies(root: str, tmp_path) -> str:
    theirs = str(tmp_path / "theirs")
    shutil.copytree(root, theirs)
    return theirs


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_deleting_tags_frees_what_paimon_frees(paimon_java, tmp_path, seed, kind):
    ours = str(tmp_path / "ours")
    names = tagged_table(paimon_java, ours, seed=seed, kind=kind)
    doomed = names[seed % 2::2]  # every other tag: neighbours stay on one side or the other
    assert doomed
    theirs = copies(ours, tmp_path)
    paimon_java.delete_tags(theirs, doomed)
    plan = apply_ours(ours, tmp_path, names=doomed)
    assert all_files(ours) == all_files(theirs)
    assert any(str(a.kind) == "tag-data-file" for a in plan.actions) or not plan.scope.snapshots_gone
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_deleting_every_tag_frees_what_paimon_frees(paimon_java, tmp_path, kind):
    ours = str(tmp_path / "ours")
    names = tagged_table(paimon_java, ours, seed=7, kind=kind)
    theirs = copies(ours, tmp_path)
    paimon_java.delete_tags(theirs, names)
    plan = apply_ours(ours, tmp_path, names=names)
    assert plan.scope.snapshots_gone
    assert all_files(ours) == all_files(theirs)
    assert verify_table(open_table(ours)).whole


def test_expired_time_retained_tags_go_as_with_paimons_tag_time_expire(paimon_java, tmp_path):
    ours = str(tmp_path / "ours")
    g = paimon_java.generate(ours, seed=4, kind="append", steps=20, partitions=3, ops={"consumer": 0, "tag": 0,
                                                                                          "untag": 0})
    latest = g["snapshots"][-1]["id"]
    for sid in range(2, latest, 3):
        short = sid % 2 == 0
        paimon_java.create_tag(ours, f"r{sid:03d}", sid, time_retained_ms=1 if short else 86_400_000)
    paimon_java.expire(ours, retain_min=3, retain_max=3, max_deletes=1000)
    time.sleep(0.05)
    theirs = copies(ours, tmp_path)
    left = paimon_java.expire_tags(theirs)
    plan = apply_ours(ours, tmp_path)
    assert sorted(t.name for t in open_table(ours).tags()) == left
    assert 0 < len(plan.scope.tags) < len(left) + len(plan.scope.tags)
    assert all_files(ours) == all_files(theirs)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", range(2, 12))
def test_deleting_tags_frees_what_paimon_frees_on_more_histories(paimon_java, tmp_path, seed, kind):
    ours = str(tmp_path / "ours")
    names = tagged_table(paimon_java, ours, seed=seed, kind=kind, retain=2 + seed % 3)
    doomed = names[seed % 3::2]
    if not doomed:
        pytest.skip("no tag to delete in this history")
    theirs = copies(ours, tmp_path)
    paimon_java.delete_tags(theirs, doomed)
    apply_ours(ours, tmp_path, names=doomed)
    assert all_files(ours) == all_files(theirs)


@pytest.fixture(scope="module")
def daily_tagged(paimon_java, tmp_path_factory):
    """``daily_tagged(kind)``: the root of a table with daily tags by name on every third snapshot (most of
    them expired) and a manual tag among them, and the daily tags' snapshot ids; written by Paimon once per
    kind, on first use; tests work on copies."""
    made: dict[str, tuple[str, list[int]]] = {}

    def make(kind: str) -> tuple[str, list[int]]:
        if kind not in made:
            root = str(tmp_path_factory.mktemp(f"daily-tagged-{kind}") / "t")
            table_kind, options = KINDS[kind]
            g = paimon_java.generate(root, seed=5, kind=table_kind, steps=24, partitions=3, options=options,
                                     ops={"consumer": 0, "tag": 0, "untag": 0})
            latest = g["snapshots"][-1]["id"]
            days = list(range(2, latest - 2, 3))
            for i, sid in enumerate(days):
                paimon_java.create_tag(root, f"2024-01-{i + 1:02d}", sid)
            paimon_java.create_tag(root, "manual", days[1] + 1)
            paimon_java.expire(root, retain_min=3, retain_max=3, max_deletes=1000)
            made[kind] = (root, days)
        return made[kind]

    return make


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("keep", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_num_retained_max_deletes_what_paimons_tag_auto_creation_deletes(paimon_java, daily_tagged, tmp_path, kind,
                                                                         keep):
    """Daily tags by name on every third snapshot (most of them expired) and a manual tag among them; Paimon
    0.9's TagAutoCreation then adds yesterday's tag and deletes the oldest beyond tag.num-retained-max.
    lakesweep, given the same new tag, plans and applies the same deletion."""
    ours = str(tmp_path / "ours")
    base, days = daily_tagged(kind)
    shutil.copytree(base, ours)
    before = {t.name for t in open_table(ours).tags()}
    theirs = copies(ours, tmp_path)
    auto = {"tag.automatic-creation": "process-time", "tag.num-retained-max": str(keep)}
    left = paimon_java.auto_tag_create(theirs, auto)
    [created] = sorted(set(left) - before)
    paimon_java.create_tag(ours, created, open_table(theirs).tag(created).snapshot.id)
    t = open_table(ours)
    opts = resolve_tag_options({**t.options, "tag.automatic-creation": "process-time"}, num_retained_max=keep)
    plan = plan_tags(t, now_ms=int(time.time() * 1000), options=opts, read=read_tags(t, options=opts))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole, report.reason
    assert sorted(x.name for x in open_table(ours).tags()) == left
    assert len(plan.scope.tags) == len(days) + 1 - keep and plan.scope.snapshots_gone
    assert all_files(ours) == all_files(theirs)
