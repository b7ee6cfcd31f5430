"""Differential: lakesweep's partition drop against Apache Paimon 0.9's own ``PartitionExpire``, on tables
Paimon wrote (both strategies, append and primary-key tables, with deletion vectors and tags).

Each table is copied; Paimon expires partitions in one copy (the harness runs its ``PartitionExpire`` as
the procedure does, at an explicit local now), lakesweep plans and applies in the other at the same now.
Then, on both copies:

* the same partitions were chosen (lakesweep sorts them as Paimon master does; 0.9 keeps scan order);
* Paimon's own reader sees the same live files in the latest snapshot, and the same rows;
* Paimon's own snapshot expiry (retaining one snapshot) accepts the snapshot and leaves the same data and
  index files on disk: exactly the dropped ones go, except those a tag still holds;
* ``lakesweep verify`` finds both tables whole.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from zoneinfo import ZoneInfo

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.engine.timeutil import system_zone
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import resolve_partition_options
from lakesweep.planner.paimon.partitions import _partitions, naive_millis, plan_partitions

pytestmark = pytest.mark.java

KINDS = {
    "append": ("append", {"bucket": "2", "bucket-key": "id"}),
    "pk-dv": ("pk", {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"}),
    "pk": ("pk", {}),
}


def data_files(root: str) -> set[str]:
    """Files of the bucket and index directories, relative to the root."""
    out = set()
    for d, _, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel.startswith(("manifest", "snapshot", "schema", "tag", "consumer", "branch", "changelog")):
            continue
        out |= {os.path.join(rel, f) for f in files}
    return out


def epoch_ms(local: dt.datetime, zone: str) -> int:
    return int(local.replace(tzinfo=ZoneInfo(zone)).timestamp() * 1000)


def update_time_now(root: str, seed: int) -> dt.datetime:
    """A local now whose cut-off (now - 1 s) falls between two partitions' newest files, chosen by seed."""
    t = open_table(root)
    times = sorted({p.created for p in _partitions(t, t.snapshot(t.earliest_latest()[1])).values()})
    i = seed % len(times)
    cutoff = naive_millis(times[i]) + dt.timedelta(milliseconds=1)
    return cutoff + dt.timedelta(seconds=1)


def run(paimon_java, tmp_path, *, seed: int, kind: str, strategy: str):
    table_kind, options = KINDS[kind]
    ours = str(tmp_path / "ours")
    paimon_java.generate(ours, seed=seed, kind=table_kind, steps=16, partitions=5,
                         options=options, ops={"consumer": 0})
    theirs = str(tmp_path / "theirs")
    shutil.copytree(ours, theirs, symlinks=True)
    zone = system_zone()  # the harness's JVM runs in this machine's zone too
    if strategy == "values-time":
        now, expiration = dt.datetime(2024, 1, 2, 12) + dt.timedelta(days=seed % 4), "1 d"
    else:
        now, expiration = update_time_now(ours, seed), "1 s"
    java = paimon_java.expire_partitions(theirs, expiration_time=expiration, now=now.isoformat(), strategy=strategy)
    t = open_table(ours)
    opts = resolve_partition_options(t.options, expiration_time=expiration, strategy=strategy, max_expires=1000,
                                     time_zone=zone, system_zone=zone)
    plan = plan_partitions(t, now_ms=epoch_ms(now, zone), options=opts)
    # 0.9 returns them in scan order (it has no max-num); master sorts them as lakesweep does
    assert [p["spec"] for p in plan.scope.partitions] == sorted(java["expired"], key=lambda m: ",".join(m.values()))
    if plan.actions:
        with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
            report = apply_plan(plan, recorder, executor=DriverExecutor())
        assert report.state == "COMPLETED" and report.whole
        assert [s["commitKind"] for s in java["snapshots"]] == ["OVERWRITE"]
    else:
        assert java["snapshots"] == []
    return ours, theirs, plan


def compare(paimon_java, ours: str, theirs: str):
    mine, paimons = paimon_java.live_files(ours)["snapshots"], paimon_java.live_files(theirs)["snapshots"]
    latest = str(max(int(s) for s in mine))
    assert latest == str(max(int(s) for s in paimons))
    assert set(mine[latest]) == set(paimons[latest])
    assert paimon_java.read_rows(ours) == paimon_java.read_rows(theirs)
    before = data_files(ours)
    assert before == data_files(theirs)
    paimon_java.expire(ours, retain_min=1, retain_max=1, max_deletes=1000)
    paimon_java.expire(theirs, retain_min=1, retain_max=1, max_deletes=1000)
    assert data_files(ours) == data_files(theirs)
    assert verify_table(open_table(ours)).whole and verify_table(open_table(theirs)).whole
    return before - data_files(ours)


@pytest.mark.parametrize("strategy", ["values-time", "update-time"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_lakesweep_drops_what_paimon_drops(paimon_java, tmp_path, seed, kind, strategy):
    ours, theirs, plan = run(paimon_java, tmp_path, seed=seed, kind=kind, strategy=strategy)
    freed = compare(paimon_java, ours, theirs)
    dropped = {a.path for a in plan.actions}
    tagged = {f for files in paimon_java.live_files(ours).get("tags", {}).values() for f in files}
    assert dropped - tagged <= freed  # Paimon's expiry removed every dropped file no tag holds


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["values-time", "update-time"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", range(2, 22))
def test_lakesweep_drops_what_paimon_drops_on_more_histories(paimon_java, tmp_path, seed, kind, strategy):
    ours, theirs, plan = run(paimon_java, tmp_path, seed=seed, kind=kind, strategy=strategy)
    compare(paimon_java, ours, theirs)


def test_the_differential_drops_something(paimon_java, tmp_path):
    """Not vacuous: the chosen nows drop some partitions and keep others."""
    kept_some = dropped_some = False
    for strategy in ("values-time", "update-time"):
        _, _, plan = run(paimon_java, tmp_path / strategy, seed=1, kind="append", strategy=strategy)
        dropped_some |= bool(plan.scope.partitions)
        kept_some |= plan.stats["partitions_considered"] > len(plan.scope.partitions)
    assert dropped_some and kept_some
