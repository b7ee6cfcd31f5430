"""A Paimon expiry plan of any size, written batch by batch with ``PlanWriter`` (no table, nothing held whole):
data files of 100 partitions (one in 50 of unknown size), their manifests, snapshots and the EARLIEST hint."""

from __future__ import annotations

from typing import Iterator

from lakesweep.engine.paimon.kinds import EXPIRE_PHASES, ActionKind
from lakesweep.engine.paimon.requirements import expire_requirements
from lakesweep.engine.paimon.scopes import ExpireScope
from lakesweep.engine.plan import Action, CleanupPlan, OptionValue, summarize
from lakesweep.engine.plan_io import PlanWriter

BATCH = 50_000
PARTITIONS = 100


def _specs(n: int) -> Iterator[tuple]:
    """(kind, path, snapshot, partition, bucket, size) of the ``n`` actions, in canonical order."""
    snapshots = max(1, n // 1000)
    manifests = max(1, n // 100)
    data = max(0, n - snapshots - manifests - 1)
    per = -(-data // PARTITIONS) if data else 1
    for i in range(data):
        part = f"dt={i // per:03d}"
        yield (ActionKind.DATA_FILE, f"{part}/bucket-{i % 4}/data-{i:09d}.parquet", 1 + i % snapshots, part, i % 4,
               None if i % 50 == 7 else 1000 + i % 5000)
    for i in range(manifests):
        yield ActionKind.MANIFEST, f"manifest/manifest-{i:09d}-0", 1 + i % snapshots, None, None, 2048
    for i in range(snapshots):
        yield ActionKind.SNAPSHOT, f"snapshot/snapshot-{i + 1}", i + 1, None, None, None
    yield ActionKind.WRITE_EARLIEST_HINT, "snapshot/EARLIEST", snapshots + 1, None, None, None


def _batches(n: int) -> Iterator[list[Action]]:
    batch: list[Action] = []
    for i, (kind, path, snap, part, bucket, size) in enumerate(_specs(n)):
        batch.append(Action(kind, path, snapshot_id=snap, partition=part, bucket=bucket, size=size, action_id=i))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _merged_summary(n: int) -> dict:
    total: dict = {"by_kind": {}, "by_partition": {}, "files": 0, "bytes": 0}
    for batch in _batches(n):
        s = summarize(batch, by_partition={ActionKind.DATA_FILE})
        for key in ("by_kind", "by_partition"):
            for name, figures in s[key].items():
                into = total[key].setdefault(name, dict.fromkeys(figures, 0))
                for f, v in figures.items():
                    into[f] += v
        total["files"] += s["files"]
        total["bytes"] += s["bytes"]
    return {k: dict(sorted(v.items())) if isinstance(v, dict) else v for k, v in total.items()}


def write_big_plan(path: str, n: int, *, location: str = "s3://bucket/wh/t") -> str:
    """Write an expiry plan of ``n`` actions (at least 3) for the table at ``location`` to ``path``; its id."""
    end = max(1, n // 1000) + 1
    requirements = expire_requirements(
        identity="schema:big", location=location, branch="main", begin=1, end=end, hint=end, deletes=True,
        schema_id=0, branches=(), tags={}, consumers={}, consumer_changelog_only=False,
        snapshots=list(range(1, end)), pins={end: "c" * 32})
    header = CleanupPlan(
        kind="expire", table_location=location, table_identity="schema:big", branch="main", now_ms=4102444800000,
        options={"snapshot.num-retained.min": OptionValue(1, "flag")},
        scope=ExpireScope(begin=1, end=end, earliest_hint=end), requirements=requirements, phases=EXPIRE_PHASES,
        actions=(), stats={"bound": "retain-min", "summary": _merged_summary(n), "warnings": [],
                           "earliest": 1, "latest": end},
    ).header()
    with PlanWriter(path, header) as writer:
        for batch in _batches(n):
            writer.write(batch)
    return writer.plan_id
