"""Paimon snapshot expiry planned on Spark: the delta and changelog manifests decoded on executors.

``planner.paimon.expire.plan_expire`` makes the plan, reading on the driver what is small (snapshots, tags,
manifest lists, index manifests). The manifests it would read one by one for the files expiring snapshots
delete are decoded on executors instead, a group per task; a Spark job keeps, per snapshot and resolved path,
the last entry of its delta when that is a DELETE (what ``_deleted_in_delta`` keeps, as its
``decode_manifest`` row), and the ADD entries of the changelog manifests. Only those come back, as Arrow
batches, with the manifests that could not be read; the planner answers from them as from its own reads, so
the plan is the local planner's, byte for byte.
"""

from __future__ import annotations

import pickle
from typing import Iterator

from lakesweep.applier.spark_tasks import decoded_tasks, error_of, error_text, ipc_rows, task_groups, task_size
from lakesweep.engine.errors import MetadataNotFound, TableFormatError
from lakesweep.engine.paimon.manifests import (ROW_BUCKET, ROW_EXTERNAL_PATH, ROW_FILE_NAME, ROW_KIND, ROW_PARTITION,
                                               decode_manifest, row_entry)
from lakesweep.engine.paimon.model import FileKind, ManifestEntry, Snapshot
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.plan import CleanupPlan
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import ExpireOptions

TASK_BYTES = 4 << 20  # manifest bytes a task decodes at least (``applier.spark_tasks``)
DELTA, CHANGELOG = 0, 1  # what a manifest is read for
ROW_SCHEMA = ("part int, sid long, midx int, eidx int, manifest string, path string, add boolean, entry binary, "
              "error string, error_path string")


def _read(fileio, path: str) -> list[tuple]:
    """The rows (``decode_manifest``'s) of the manifest at ``path`` as ``PaimonTable.manifest`` reads it,
    failing as it fails."""
    try:
        data = fileio.read_bytes(path)
    except FileNotFoundError as e:
        raise MetadataNotFound(path, "manifest") from e
    return decode_manifest((path, data))


def decode_group(fileio, paths, group: list[tuple]) -> Iterator[tuple]:
    """Executor side: ``ROW_SCHEMA`` rows of each ``(part, snapshot id, index in its list, manifest name)`` of
    ``group``: every entry of a delta manifest (with its resolved path, and the pickled row of a DELETE), the
    ADD entries of a changelog manifest (pickled rows); a manifest that cannot be read, or an entry's path not
    resolved, is one row naming the error (its class name, a colon, its text) instead."""
    for part, sid, midx, name in group:
        path = paths.manifest(name)
        try:
            entries = _read(fileio, path)
            if part == DELTA:
                rows = [(part, sid, midx, i, name,
                         paths.data_path(e[ROW_PARTITION], e[ROW_BUCKET], e[ROW_FILE_NAME], e[ROW_EXTERNAL_PATH]),
                         e[ROW_KIND] == FileKind.ADD, None if e[ROW_KIND] == FileKind.ADD else pickle.dumps(e),
                         None, None)
                        for i, e in enumerate(entries)]
            else:
                rows = [(part, sid, midx, i, name, None, True, pickle.dumps(e), None, None)
                        for i, e in enumerate(entries) if e[ROW_KIND] == FileKind.ADD]
        except TableFormatError as e:
            yield (part, sid, midx, None, name, None, None, None, error_text(e), e.path)
            continue
        yield from rows


def decode_tasks(fileio, paths, groups: list, tasks) -> Iterator:
    """Executor side, for ``mapInArrow``: the rows of ``decode_group`` for each task index of ``tasks``, as
    Arrow batches of ``ROW_SCHEMA``."""
    import pyarrow as pa

    schema = pa.schema([("part", pa.int32()), ("sid", pa.int64()), ("midx", pa.int32()), ("eidx", pa.int32()),
                        ("manifest", pa.string()), ("path", pa.string()), ("add", pa.bool_()),
                        ("entry", pa.binary()), ("error", pa.string()), ("error_path", pa.string())])
    return decoded_tasks(lambda group: decode_group(fileio, paths, group), groups, tasks, schema)


class SparkReads:
    """What the Spark job found, answering the planner as its own reads would (``planner.paimon.expire.Reads``).

    ``deleted``: snapshot id -> resolved path -> the DELETE its delta ends with (``decode_manifest``'s row);
    ``changelog``: changelog manifest name -> its ADD entries; ``errors``: (part, snapshot id or manifest name) -> the first error met.
    """

    def __init__(self, table: PaimonTable, deleted: dict[int, dict[str, tuple]],
                 changelog: dict[str, list[ManifestEntry]], errors: dict[tuple, TableFormatError]):
        self.table, self.deleted, self.changelog, self.errors = table, deleted, changelog, errors

    def deleted_in_delta(self, snapshot: Snapshot) -> dict[str, tuple]:
        self.table.manifest_list(snapshot.delta_manifest_list)  # a list that failed to read raises again here
        error = self.errors.get((DELTA, snapshot.id))
        if error is not None:
            raise error
        return self.deleted.get(snapshot.id, {})

    def changelog_manifest(self, name: str) -> list[ManifestEntry]:
        error = self.errors.get((CHANGELOG, name))
        if error is not None:
            raise error
        return self.changelog[name]


def _lists(table: PaimonTable, snapshots: list[Snapshot], part: int) -> Iterator[tuple[tuple, int]]:
    """``((part, snapshot id, index, manifest name), bytes)`` of each manifest the snapshots' delta (or
    changelog) lists name; a list that cannot be read is left to the planner, which reads it again."""
    seen: set[str] = set()
    for s in snapshots:
        name = s.delta_manifest_list if part == DELTA else s.changelog_manifest_list
        if not name:
            continue
        try:
            metas = table.manifest_list(name)
        except TableFormatError:
            continue
        for i, m in enumerate(metas):
            if part == CHANGELOG:  # answered by name: a manifest two lists name is read once
                if m.file_name in seen:
                    continue
                seen.add(m.file_name)
            yield (part, s.id, i, m.file_name), m.file_size


def read_on_spark(table: PaimonTable, spark, data: list[Snapshot], changelog: list[Snapshot]) -> SparkReads:
    """The delta manifests of the ``data`` snapshots and the changelog manifests of the ``changelog`` ones,
    decoded on ``spark`` and reduced there to what the planner needs."""
    import pyarrow as pa
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from lakesweep.applier.spark_exec import forward_credentials

    manifests = [*_lists(table, data, DELTA), *_lists(table, changelog, CHANGELOG)]
    deleted: dict[int, dict[str, tuple]] = {}
    added: dict[str, list[tuple[int, ManifestEntry]]] = {}
    errors: dict[tuple, tuple[int, TableFormatError]] = {}
    if not manifests:
        return SparkReads(table, deleted, {}, {})
    sc = spark.sparkContext
    total = sum(nbytes for _, nbytes in manifests)
    groups = task_groups(manifests, size=task_size(total, sc.defaultParallelism, at_least=TASK_BYTES))
    fileio, paths = table.fileio, table.paths
    forward_credentials(sc)
    sc.setJobGroup("lakesweep-expire", f"lakesweep: {len(manifests)} manifests of {table.location} in "
                                        f"{len(groups)} tasks")
    tasks = spark.createDataFrame(sc.parallelize([(i,) for i in range(len(groups))], len(groups)), "task int")
    rows = (tasks.mapInArrow(lambda batches: decode_tasks(fileio, paths, groups, batches), ROW_SCHEMA)
            .persist(StorageLevel.MEMORY_AND_DISK))
    try:
        ok = F.col("error").isNull()
        last = F.max(F.struct("midx", "eidx", "add", "entry")).alias("last")
        none = {c: F.lit(None).cast(t).alias(c) for c, t in (("midx", "int"), ("eidx", "int"), ("manifest", "string"),
                                                               ("error", "string"), ("error_path", "string"))}
        found = (rows.where(ok & (F.col("part") == DELTA)).groupBy("sid", "path").agg(last).where(~F.col("last.add"))
                 .select(F.lit(DELTA).alias("part"), "sid", none["midx"], none["eidx"], none["manifest"], "path",
                         F.col("last.entry").alias("entry"), none["error"], none["error_path"]))
        rest = rows.where(~ok | (F.col("part") == CHANGELOG)).drop("add")
        for row in found.unionByName(rest).mapInArrow(ipc_rows, "ipc binary").toLocalIterator(prefetchPartitions=True):
            batch = pa.ipc.open_stream(row["ipc"]).read_all()
            for part, sid, midx, eidx, name, path, entry, error, error_path in zip(
                    *(batch.column(c).to_pylist() for c in ("part", "sid", "midx", "eidx", "manifest", "path",
                                                            "entry", "error", "error_path"))):
                if error is not None:
                    key = (DELTA, sid) if part == DELTA else (CHANGELOG, name)
                    if key not in errors or midx < errors[key][0]:
                        errors[key] = (midx, error_of(error_path, error))
                elif part == DELTA:
                    deleted.setdefault(sid, {})[path] = pickle.loads(entry)
                else:
                    added.setdefault(name, []).append((eidx, row_entry(pickle.loads(entry))))
    finally:
        rows.unpersist()
    read = {name: [] for (part, _, _, name), _ in manifests if part == CHANGELOG}
    read.update({name: [e for _, e in sorted(pairs, key=lambda p: p[0])] for name, pairs in added.items()})
    return SparkReads(table, deleted, read, {key: e for key, (_, e) in errors.items()})


def plan_expire_on_spark(table: PaimonTable, *, now_ms: int, options: ExpireOptions, spark) -> CleanupPlan:
    """The plan ``planner.paimon.expire.plan_expire`` makes of ``table`` as of ``now_ms``, the manifests of the
    files it deletes decoded and reduced on ``spark`` (the same plan, byte for byte)."""
    return plan_expire(table, now_ms=now_ms, options=options,
                       read_manifests=lambda t, data, changelog: read_on_spark(t, spark, data, changelog))


def plan_expire_with_session(table: PaimonTable, *, now_ms: int, options: ExpireOptions, master: str,
                             conf: dict[str, str] | None = None) -> CleanupPlan:
    """``plan_expire_on_spark`` on a session started for it on ``master`` (with the executor preflight),
    stopped afterwards unless it was already running in this process."""
    from lakesweep.applier.executors import PlanningSession

    session = PlanningSession(master, conf, consequence="nothing was planned and no plan was written")
    try:
        return plan_expire_on_spark(table, now_ms=now_ms, options=options, spark=session.get())
    finally:
        session.stop()
