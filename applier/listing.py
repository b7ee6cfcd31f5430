"""Orphan cleaning's listing on Spark: a directory per task, the files streamed back into a Parquet file.

The driver works out the directories ``engine.paimon.orphans.ListedDirs`` names (listing only the partition
levels of each data tree); each bucket and metadata directory is one Spark task, which lists it with the
table's FileIO a page at a time (on S3, ListObjectsV2 by its prefix) and returns each page's files orphan
cleaning may delete as an Arrow batch, and any other table's ``schema/schema-<n>``. The driver writes the
batches into a plain-form inventory as they come, with no Python object per file; the planner reads that
file as an inventory. The listing is complete before anything reads which files the table uses (#3074;
docs/design/listing.md#listing-on-spark).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.paimon.layout import Layout, orphan_kind_of
from lakesweep.engine.paimon.orphans import ListedDirs, is_schema_file, refuse_foreign_table
from lakesweep.engine.paimon.table import PaimonTable

from lakesweep.applier.spark_exec import forward_credentials

BATCH_ROWS = 65_536


@dataclass(frozen=True)
class SparkListing:
    """What the Spark listing did: the directories listed (one task each) and the files it kept."""

    path: str  # the inventory file written
    directories: int
    files: int
    master: str

    def source(self) -> dict:
        return {"from": "spark", "master": self.master, "directories": self.directories, "files": self.files}


def task_directories(table: PaimonTable, dirs: ListedDirs) -> list[str]:
    """The directories a task each: the metadata directories and every bucket directory of each data
    tree. The partition levels are listed here, on the driver (directories only), refusing another
    table's metadata met on the way as the store walk does."""
    from lakesweep.engine.paimon.orphans import refuse_foreign

    out = list(dirs.metadata)
    for root in dirs.data_roots:
        level = [root]
        while level:
            below = []
            for d in level:
                for f in (f for page in table.fileio.list_pages(d) for f in page):
                    if not f.is_dir or dirs.quarantined(f.path):
                        continue
                    if d != table.location:
                        refuse_foreign(table, f)
                    if dirs.in_tree(root, f.path):
                        segments = f.path[len(root) + 1:].split("/")
                        (out if dirs.layout.bucket_dir(segments, with_path_directory=False) else below).append(f.path)
            level = below
    return out


SCHEMA_FIELDS = (("path", "string"), ("size", "int64"), ("mtime_ms", "int64"))


def list_directory(fileio: FileIO, layout: Layout, location: str, directory: str) -> Iterator[tuple]:
    """Executor side, a listing page at a time: ``("files", ipc)``, the files of ``directory`` orphan
    cleaning may delete as an Arrow IPC stream of ``path``, ``size``, ``mtime_ms``; and
    ``("schema", holder, file)`` for another table's schema file in a sub-directory ``schema``."""
    for page in fileio.list_pages(directory):
        paths, sizes, mtimes = [], [], []
        for f in page:
            if f.is_dir:
                if directory != location and posixpath.basename(f.path) == "schema":
                    for g in fileio.list(f.path):
                        if not g.is_dir and is_schema_file(posixpath.basename(g.path)):
                            yield ("schema", directory, g.path)
                            break
                continue
            rel = f.path[len(location) + 1:] if f.path.startswith(location + "/") else f.path
            if orphan_kind_of(layout, rel) is not None:
                paths.append(f.path)
                sizes.append(f.size)
                mtimes.append(f.mtime_ms)
        if paths:
            yield files_batch(paths, sizes, mtimes)


def files_batch(paths: list, sizes: list, mtimes: list) -> tuple[str, bytes]:
    """``("files", ipc)``: one listing page's files as an Arrow IPC stream of ``SCHEMA_FIELDS``."""
    import pyarrow as pa

    schema = pa.schema(list(SCHEMA_FIELDS))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([paths, sizes, mtimes], schema=schema))
    return ("files", sink.getvalue().to_pybytes())


def run_tasks(spark, tasks: list, task: Callable[[Any], Iterator[tuple]], what: str,
              keep: list | None = None) -> Iterator[tuple]:
    """``task`` run on ``spark`` for each of ``tasks`` (one Spark task each), what they yield taken back on
    the driver a partition at a time. ``keep``: the results are also persisted on the executors, their RDD
    appended to it (the caller unpersists it)."""
    sc = spark.sparkContext
    forward_credentials(sc)
    sc.setJobGroup("lakesweep-list", what)
    rdd = sc.parallelize(tasks, max(1, len(tasks))).flatMap(task)
    if keep is not None:
        from pyspark import StorageLevel

        keep.append(rdd.persist(StorageLevel.MEMORY_AND_DISK))
    return rdd.toLocalIterator(prefetchPartitions=True)


def write_listing(items: Iterator[tuple], out: str, *, on_other: Callable[[tuple], None] | None = None,
                  on_files: Callable[[int], None] | None = None, batch_rows: int = BATCH_ROWS) -> int:
    """Write the ``("files", ipc)`` items (``files_batch``) into the plain-form inventory ``out`` (local) as
    they come, ``batch_rows`` rows or more at a time, and return how many files it holds; any other item
    goes to ``on_other``. ``on_files`` is told the files written so far after each write."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(list(SCHEMA_FIELDS))
    files = pending_rows = 0
    pending: list = []  # record batches not yet written
    with pq.ParquetWriter(out, schema) as writer:
        for item in items:
            if item[0] != "files":
                on_other(item)
                continue
            batch = pa.ipc.open_stream(item[1]).read_all()
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows >= batch_rows:
                writer.write_table(pa.concat_tables(pending))
                files += pending_rows
                pending, pending_rows = [], 0
                if on_files is not None:
                    on_files(files)
        writer.write_table(pa.concat_tables(pending) if pending else schema.empty_table())
        files += pending_rows
    return files


def list_on_spark(table: PaimonTable, out: str, *, spark, master: str,
                  on_files: Callable[[int], None] | None = None, batch_rows: int = BATCH_ROWS,
                  keep: list | None = None) -> SparkListing:
    """List ``table`` for orphan cleaning on ``spark``, a directory per task, into the Parquet file
    ``out`` (local); with ``keep``, kept on the executors too (``run_tasks``). Raises ``PlanRejected`` when
    a listed directory holds another table."""
    if table.branch != "main":
        raise PlanRejected("orphan cleaning covers the whole table, every branch included: open its main branch")
    dirs = ListedDirs(table)
    directories = task_directories(table, dirs)
    fileio, layout, location = table.fileio, dirs.layout, table.location
    items = run_tasks(spark, directories, lambda d: list_directory(fileio, layout, location, d),
                      f"lakesweep: listing {len(directories)} directories of {location}", keep)
    files = write_listing(items, out, on_other=lambda item: refuse_foreign_table(table, item[1], item[2]),
                          on_files=on_files, batch_rows=batch_rows)
    return SparkListing(out, len(directories), files, master)


def list_with_session(table, out: str, *, master: str, conf: dict[str, str] | None = None,
                      on_files: Callable[[int], None] | None = None,
                      on_spark: Callable[..., SparkListing] = list_on_spark) -> SparkListing:
    """``on_spark`` (``list_on_spark`` for a Paimon table, ``applier.iceberg_listing.list_iceberg_on_spark``
    for an Iceberg one) on a session started for it on ``master`` (with the executor preflight), stopped
    afterwards unless it was already running in this process."""
    from lakesweep.applier.executors import PlanningSession

    session = PlanningSession(master, conf, consequence="nothing was listed and no plan was written")
    try:
        return on_spark(table, out, spark=session.get(), master=master, on_files=on_files)
    finally:
        session.stop()
