"""Iceberg snapshot expiry planned on Spark: the manifests decoded on executors, the set difference a Spark job.

The driver reads what is small: which snapshots expire, their manifest lists and the retained snapshots',
hence the manifests each side keeps or frees (each freed one attributed to the first expired snapshot listing
it, as ``planner.iceberg.expire`` does). Executors decode those manifests, a group per task, with
``engine.iceberg.table.read_manifest``; Spark removes every file a kept manifest names live from the live
entries of the freed ones (a left anti-join) and keeps, per file, the earliest snapshot's entry and how often
it was met (a group-by). Only those candidates come back to the driver, as Arrow batches, and the plan is built
by ``planner.iceberg.expire.expire_plan`` exactly as the local planner builds it.
"""

from __future__ import annotations

from typing import Iterator

from lakesweep.applier.spark_tasks import decoded_tasks, error_of, error_text, ipc_rows, task_groups, task_size
from lakesweep.engine.errors import TableFormatError
from lakesweep.engine.iceberg.kinds import FILE_KINDS
from lakesweep.engine.plan import CleanupPlan
from lakesweep.planner.iceberg.expire import (FoundActions, IcebergExpireOptions, expire_plan, expired_metadata,
                                              expiry, refuse_future_expiry)

TASK_ENTRIES = 20_000  # manifest entries a task decodes at least (``applier.spark_tasks``)
ENTRY_SCHEMA = "sid long, content int, path string, partition string, size long, error string"
_FILE_KIND = {0: "data-file", 1: "position-delete-file", 2: "equality-delete-file"}


def decode_group(io, group: list[tuple[str, str, int | None]]) -> Iterator[tuple]:
    """Executor side: the live entries of each manifest of ``group`` as ``ENTRY_SCHEMA`` rows (only the path
    of a kept manifest's, ``sid`` None); a manifest that cannot be read is one row naming it in ``error``."""
    from lakesweep.engine.iceberg.table import read_manifest

    for location, path, sid in group:
        try:
            refs = read_manifest(io, location, path)
        except TableFormatError as e:
            yield (None, -1, e.path, None, None, error_text(e))
            continue
        if sid is None:
            for f in refs:
                if f.live:
                    yield (None, None, f.path, None, None, None)
        else:
            for f in refs:
                if f.live:
                    yield (sid, f.content, f.path, f.partition, f.size, None)


def decode_tasks(io, groups: list, tasks) -> Iterator:
    """Executor side, for ``mapInArrow``: the rows of ``decode_group`` for each task index of ``tasks``, as
    Arrow batches of ``ENTRY_SCHEMA``."""
    import pyarrow as pa

    schema = pa.schema([("sid", pa.int64()), ("content", pa.int32()), ("path", pa.string()),
                        ("partition", pa.string()), ("size", pa.int64()), ("error", pa.string())])
    return decoded_tasks(lambda group: decode_group(io, group), groups, tasks, schema)


def candidate_files(table, spark, *, kept: list, freed: list[tuple[object, int]]) -> Iterator[tuple]:
    """``(content, path, snapshot id, partition, size, times)`` of each file the ``freed`` manifests (each with
    the expired snapshot it is attributed to) name live and no ``kept`` manifest names live: the earliest
    snapshot's entry (smallest snapshot id, then partition, then size) and how many entries named it, in
    batches as Spark returns them. A manifest that cannot be read raises its ``TableFormatError``."""
    import pyarrow as pa
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from lakesweep.applier.spark_exec import forward_credentials

    manifests = [(table.manifest_location(m), m.path, None, m.entries) for m in kept]
    manifests += [(table.manifest_location(m), m.path, sid, m.entries) for m, sid in freed]
    sc = spark.sparkContext
    total = sum(entries for *_, entries in manifests)
    groups = task_groups(((m[:3], m[3]) for m in manifests),
                         size=task_size(total, sc.defaultParallelism, at_least=TASK_ENTRIES))
    io = table.io
    forward_credentials(sc)
    sc.setJobGroup("lakesweep-expire", f"lakesweep: {len(manifests)} manifests of {table.location} in "
                                        f"{len(groups)} tasks")
    tasks = spark.createDataFrame(sc.parallelize([(i,) for i in range(len(groups))], max(1, len(groups))), "task int")
    entries = (tasks.mapInArrow(lambda batches: decode_tasks(io, groups, batches), ENTRY_SCHEMA)
               .persist(StorageLevel.MEMORY_AND_DISK))
    try:
        bad = entries.where(F.col("error").isNotNull()).limit(1).collect()
        if bad:
            raise error_of(bad[0]["path"], bad[0]["error"])
        kept_paths = entries.where(F.col("sid").isNull()).select("path")
        first = F.min(F.struct("sid", "partition", "size")).alias("first")
        found = (entries.where(F.col("sid").isNotNull()).join(kept_paths, on="path", how="left_anti")
                 .groupBy("content", "path").agg(first, F.count(F.lit(1)).alias("times"))
                 .select("content", "path", "first.sid", "first.partition", "first.size", "times"))
        for row in found.mapInArrow(ipc_rows, "ipc binary").toLocalIterator(prefetchPartitions=True):
            batch = pa.ipc.open_stream(row["ipc"]).read_all()
            yield from zip(*(batch.column(i).to_pylist() for i in range(6)))
    finally:
        entries.unpersist()


def plan_expire_on_spark(table, *, now_ms: int, options: IcebergExpireOptions, spark) -> CleanupPlan:
    """The plan ``planner.iceberg.expire.plan_iceberg_expire`` makes of ``table`` as of ``now_ms``, its
    manifests decoded and its files chosen on ``spark`` (the same plan, byte for byte)."""
    expired, removed_refs = expiry(table, now_ms=now_ms, options=options)
    gone = set(expired)
    retained = [s for s in sorted(table.snapshots) if s not in gone]
    found = FoundActions(table)
    if expired:
        kept: dict[str, object] = {}
        for sid in retained:
            for m in table.manifest_list(table.snapshots[sid]):
                kept.setdefault(m.path, m)
        freed = expired_metadata(table, expired, gone, kept.keys(), found)
        if freed:
            for content, path, sid, partition, size, times in candidate_files(table, spark, kept=list(kept.values()),
                                                                              freed=freed):
                found.add(FILE_KINDS[_FILE_KIND[content]], path, size, sid, partition, times)
    return expire_plan(table, now_ms=now_ms, options=options, expired=expired, removed_refs=removed_refs,
                       retained=len(retained), found=found)


def plan_expire_with_session(table, *, now_ms: int, options: IcebergExpireOptions, master: str,
                             conf: dict[str, str] | None = None) -> CleanupPlan:
    """``plan_expire_on_spark`` on a session started for it on ``master`` (with the executor preflight) once
    the table is one lakesweep expires as of ``now_ms``, stopped afterwards unless it was already running in
    this process."""
    from lakesweep.applier.executors import PlanningSession

    refuse_future_expiry(table, now_ms)
    expiry(table, now_ms=now_ms, options=options)
    session = PlanningSession(master, conf, consequence="nothing was planned and no plan was written")
    try:
        return plan_expire_on_spark(table, now_ms=now_ms, options=options, spark=session.get())
    finally:
        session.stop()
