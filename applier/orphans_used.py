"""Orphan planning's used set read on Spark, against the listing the Spark listing wrote (Paimon and Iceberg).

The driver reads what is small (snapshots, tags, changelogs and manifest lists; Iceberg: metadata files and
manifest lists); executors decode each distinct manifest once, a group per task, into the names (Paimon) or
locations (Iceberg) its entries name; Spark left-anti-joins the listing with that used set. Only the listed
files that are not used come back to the driver, and the planner is handed the used set as far as the listing
goes (``UsedOfListing``), so that it plans through its own code what it plans locally, byte for byte. The
listing is the one the Spark listing kept on the executors while writing its file for the planner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from lakesweep.applier.executors import PlanningSession  # noqa: F401  (the session the CLI and tests make)
from lakesweep.applier.spark_tasks import decoded_tasks, error_of, error_text, task_groups, task_size
from lakesweep.engine.errors import MetadataNotFound, TableFormatError

TASK_BYTES = 64 << 20  # manifest bytes a task decodes at least (``applier.spark_tasks``)
NAME_SCHEMA = "ordinal long, name string, error string"


@dataclass(frozen=True, slots=True)
class UsedOfListing:
    """The used set as far as a listing goes: a listed name (or location) is used unless it is ``unused``.
    Asked about anything the listing does not hold, the answer means nothing."""

    unused: frozenset[str]

    def __contains__(self, name: object) -> bool:
        return name not in self.unused


def _error_row(ordinal: int, e: TableFormatError) -> tuple:
    return (ordinal, e.path, error_text(e))


def paimon_names(fileio, group: list[tuple[int, str, str]]) -> Iterator[tuple]:
    """Executor side: ``(ordinal, name, None)`` for each name the entries of each Paimon manifest of
    ``group`` name (``engine.paimon.manifests.parse_manifest_names``); a manifest that cannot be read is one
    row ``(ordinal, its path, "Error:message")``."""
    from lakesweep.engine.paimon.manifests import parse_manifest_names

    for ordinal, location, shown in group:
        try:
            try:
                data = fileio.read_bytes(location)
            except FileNotFoundError as e:
                raise MetadataNotFound(shown, "manifest") from e
            names = parse_manifest_names(shown, data)
        except TableFormatError as e:
            yield _error_row(ordinal, e)
            continue
        for name in names:
            yield (ordinal, name, None)


def iceberg_locations(io, group: list[tuple[int, str, str]]) -> Iterator[tuple]:
    """Executor side: ``(ordinal, location, None)`` for the data or delete file of each entry, of any
    status, of each Iceberg manifest of ``group``; a manifest that cannot be read is one error row."""
    from lakesweep.engine.iceberg.table import read_manifest

    for ordinal, location, shown in group:
        try:
            refs = read_manifest(io, location, shown)
        except TableFormatError as e:
            yield _error_row(ordinal, e)
            continue
        for f in refs:
            yield (ordinal, f.path, None)


def _decode_tasks(decode: Callable, groups: list, tasks) -> Iterator:
    """Executor side, for ``mapInArrow``: ``decode(group)``'s rows for each task index of ``tasks``."""
    import pyarrow as pa

    schema = pa.schema([("ordinal", pa.int64()), ("name", pa.string()), ("error", pa.string())])
    return decoded_tasks(decode, groups, tasks, schema)


def decode_manifests(spark, items: list[tuple[int, str, str, int]], decode: Callable, what: str):
    """The ``NAME_SCHEMA`` rows ``decode(group)`` gives on executors for ``items`` (``task_groups``), as a
    persisted DataFrame (the caller unpersists it). Raises the ``TableFormatError`` of the first manifest (by
    ordinal) that cannot be read, as reading them in order would."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from lakesweep.applier.spark_exec import forward_credentials

    sc = spark.sparkContext
    total = sum(item[3] for item in items)
    groups = task_groups(((item[:3], item[3]) for item in items),
                         size=task_size(total, sc.defaultParallelism, at_least=TASK_BYTES))
    forward_credentials(sc)
    sc.setJobGroup("lakesweep-orphans", f"lakesweep: {len(items)} manifests of {what} in {len(groups)} tasks")
    tasks = spark.createDataFrame(sc.parallelize([(i,) for i in range(len(groups))], max(1, len(groups))),
                                  "task int")
    rows = (tasks.mapInArrow(lambda batches: _decode_tasks(decode, groups, batches), NAME_SCHEMA)
            .persist(StorageLevel.MEMORY_AND_DISK))
    try:
        bad = rows.where(F.col("error").isNotNull()).orderBy("ordinal").limit(1).collect()
    except BaseException:
        rows.unpersist()
        raise
    if bad:
        rows.unpersist()
        raise error_of(bad[0]["name"], bad[0]["error"])
    return rows


def _names_frame(spark, names):
    """A one-column (``name``) DataFrame of ``names``, handed over as Arrow."""
    import pyarrow as pa

    return spark.createDataFrame(pa.table({"name": pa.array(list(names), pa.string())}))


def _listed_paths(items) -> Iterator[tuple]:
    """Executor side: the path of each file of the listing's ``("files", ipc)`` items."""
    import pyarrow as pa

    for item in items:
        if item[0] == "files":
            for path in pa.ipc.open_stream(item[1]).read_all().column("path").to_pylist():
                yield (path,)


def listing_frame(spark, listing):
    """The paths of a Spark listing kept on the executors (``applier.listing.run_tasks``' ``keep``), as a
    DataFrame of one column, ``path``."""
    return spark.createDataFrame(listing.mapPartitions(_listed_paths), "path string")


# -- Paimon ---------------------------------------------------------------------------------------------


def paimon_used_reader(session: PlanningSession, listing):
    """The ``engine.paimon.orphans.read_used_names`` reader of the Spark listing kept as ``listing`` (an RDD:
    ``listing_frame``)."""
    return lambda table: paimon_used_on_spark(table, listing, spark=session.get())


def paimon_used_on_spark(table, listing, *, spark):
    """``used_names`` of ``table`` checked with ``check_latest_covered``, its manifests decoded and both
    answered on ``spark``, the names as far as ``listing`` (a Paimon Spark listing kept: ``listing_frame``)
    goes. Fails as the two fail locally."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from lakesweep.engine.paimon.orphans import UsedNames, latest_named, refuse_uncovered, used_metadata

    names, manifests, latest = used_metadata(table)
    ordered = [manifests[m] for m in sorted(manifests)]
    items = [(i, table.paths.manifest(m.file_name), table.paths.manifest(m.file_name), m.file_size)
             for i, m in enumerate(ordered)]
    fileio = table.fileio
    rows = decode_manifests(spark, items, lambda group: paimon_names(fileio, group), table.location)
    try:
        used = rows.select("name").unionByName(_names_frame(spark, sorted(names)))
        for view, snapshot, named in latest_named(latest):
            check = spark.createDataFrame(pa.table({"ordinal": pa.array(range(len(named)), pa.int64()),
                                                    "name": pa.array([n for n, _ in named], pa.string())}))
            first = check.join(used, on="name", how="left_anti").agg(F.min("ordinal")).collect()[0][0]
            if first is not None:
                refuse_uncovered(view, snapshot, named[first][1])
        listed = listing_frame(spark, listing).select(F.substring_index("path", "/", -1).alias("name"))
        unused = listed.join(used, on="name", how="left_anti").distinct()
        return UsedNames(UsedOfListing(frozenset(r["name"] for r in unused.toLocalIterator())), latest)
    finally:
        rows.unpersist()


# -- Iceberg --------------------------------------------------------------------------------------------


def iceberg_used_reader(session: PlanningSession, listing):
    """The ``planner.iceberg.orphans.plan_iceberg_orphans`` ``used_reader`` of the Spark listing kept as
    ``listing`` (``listing_frame``)."""
    return lambda table: iceberg_used_on_spark(table, listing, spark=session.get())


def _keyed(batches, column: str):
    """Executor side, for ``mapInArrow``: ``column`` canonical (``engine.iceberg.table.canonical``; as it is
    when it cannot be read, which the planner refuses when it meets it) and its key (``_key``)."""
    import pyarrow as pa

    from lakesweep.engine.errors import InvalidLocation
    from lakesweep.engine.iceberg.table import canonical
    from lakesweep.planner.iceberg.orphans import _key

    for batch in batches:
        out = []
        for path in batch.column(column).to_pylist():
            try:
                out.append(canonical(path))
            except InvalidLocation:
                out.append(path)
        yield pa.record_batch([pa.array(out, pa.string()), pa.array([_key(p) for p in out], pa.string())],
                              names=["path", "key"])


def iceberg_used_on_spark(table, listing, *, spark) -> tuple[UsedOfListing, dict[str, str], int]:
    """What ``engine.iceberg.reachability.all_referenced`` names in ``table``, as ``plan_iceberg_orphans``
    asks it of the paths of ``listing`` (an Iceberg Spark listing kept: ``listing_frame``): ``(used, keys,
    count)``, the manifests decoded and the listing joined on ``spark``. Fails as ``all_referenced`` fails."""
    from lakesweep.engine.iceberg.table import canonical

    small: set[str] = set()  # what the driver reads: lists, manifests, statistics, metadata files
    manifests: dict[str, tuple] = {}
    snapshots = table.snapshots
    for sid in snapshots:  # all lists first, then the manifests in order, as ``used_files`` reads them
        small.add(canonical(snapshots[sid].manifest_list))
        for m in table.manifest_list(snapshots[sid]):
            if m.path not in manifests:
                small.add(m.path)
                manifests[m.path] = (len(manifests), table.manifest_location(m), m.path, m.size or 0)
    small.update(path for _, path, _ in table.statistics_files())
    small.update(table.metadata_files())
    io = table.io
    rows = decode_manifests(spark, list(manifests.values()), lambda group: iceberg_locations(io, group),
                            table.location)
    try:
        used = rows.select("name").unionByName(_names_frame(spark, sorted(small))).distinct()
        count = used.count()
        return (*unused_of_listing(used, listing_frame(spark, listing)), count)
    finally:
        rows.unpersist()


def unused_of_listing(used, listed) -> tuple[UsedOfListing, dict[str, str]]:
    """Of the paths of the DataFrame ``listed`` (``path``), canonical, those the DataFrame ``used`` (``name``:
    canonical locations) does not hold; and for each that shares its key (``_key``) with a used location, the
    least such location by that key: as ``plan_iceberg_orphans`` asks them of its ``used_reader``."""
    from pyspark.sql import functions as F

    used_keyed = used.mapInArrow(lambda b: _keyed(b, "name"), "path string, key string")
    listed = listed.mapInArrow(lambda b: _keyed(b, "path"), "path string, key string")
    unused = listed.join(used_keyed.select("path"), on="path", how="left_anti").distinct()
    other = used_keyed.select("key", F.col("path").alias("other"))
    found = unused.join(other, on="key", how="left").groupBy("path", "key").agg(F.min("other").alias("other"))
    paths, keys = set(), {}
    for r in found.toLocalIterator():
        paths.add(r["path"])
        if r["other"] is not None:
            keys[r["key"]] = r["other"]
    return UsedOfListing(frozenset(paths)), keys
