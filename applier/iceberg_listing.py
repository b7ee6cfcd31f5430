"""Iceberg orphan removal's listing on Spark: a prefix per task, the files streamed back into a Parquet file.

The driver splits each root the read step lists (the table location, and each write path outside it) with
non-recursive listings: the location into its metadata directory, each other directory and its own files; its
data directory (and each write path) further into its first level of directories (partitions) and its own
files. Each prefix is one Spark task, listing it with the table's FileIO a page at a time (on S3,
ListObjectsV2 by the prefix) and returning every file as an Arrow batch; together they list what
``engine.iceberg.plan_reads.list_table_files`` lists. The driver writes the batches into a plain-form
inventory as they come (``applier.listing.write_listing``), which the planner reads as an inventory
(docs/design/listing.md#listing-on-spark).
"""

from __future__ import annotations

from typing import Callable, Iterator

from lakesweep.engine.fileio import FileIO

from lakesweep.applier.listing import BATCH_ROWS, SparkListing, files_batch, run_tasks, write_listing

DATA_LEVELS = 1  # the data tree's levels split into a task each, below the data directory


def task_prefixes(table, *, data_levels: int = DATA_LEVELS) -> list[tuple[str, bool]]:
    """``(prefix, recursive)`` a task each: a split directory is listed for its own files only, every other
    recursively. A root that does not exist has none."""
    out = _split(table.fileio, table.location, 1, {table.location + "/data": data_levels})
    for root in table.external_roots():
        out += _split(table.fileio, root, data_levels, {})
    return out


def _split(fileio: FileIO, directory: str, levels: int, deeper: dict[str, int]) -> list[tuple[str, bool]]:
    """``directory`` split ``levels`` levels down (``deeper``: a sub-directory split to its own depth)."""
    if levels <= 0:
        return [(directory, True)]
    try:
        below = [f.path for page in fileio.list_pages(directory) for f in page if f.is_dir]
    except FileNotFoundError:
        return []
    out = [(directory, False)]
    for sub in below:
        out += _split(fileio, sub, deeper.get(sub, levels - 1), deeper)
    return out


def list_prefix(fileio: FileIO, prefix: str, recursive: bool) -> Iterator[tuple]:
    """Executor side, a listing page at a time: ``("files", ipc)`` of the files under ``prefix`` (only those
    directly in it unless ``recursive``). A prefix gone since the driver saw it lists nothing."""
    try:
        for page in fileio.list_pages(prefix, recursive=recursive):
            files = [f for f in page if not f.is_dir]
            if files:
                yield files_batch([f.path for f in files], [f.size for f in files], [f.mtime_ms for f in files])
    except FileNotFoundError:
        return


def list_iceberg_on_spark(table, out: str, *, spark, master: str, on_files: Callable[[int], None] | None = None,
                          batch_rows: int = BATCH_ROWS, keep: list | None = None) -> SparkListing:
    """List the Iceberg ``table``'s roots for orphan removal on ``spark``, a prefix per task, into the Parquet
    file ``out`` (local); with ``keep``, kept on the executors too (``applier.listing.run_tasks``)."""
    prefixes = task_prefixes(table)
    fileio = table.fileio
    items = run_tasks(spark, prefixes, lambda p: list_prefix(fileio, p[0], p[1]),
                      f"lakesweep: listing {len(prefixes)} prefixes of {table.location}", keep)
    files = write_listing(items, out, on_files=on_files, batch_rows=batch_rows)
    return SparkListing(out, len(prefixes), files, master)
