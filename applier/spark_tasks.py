"""Work for Spark tasks, grouped in order: a group per task, of a size that gives each core a few tasks."""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator, TypeVar

from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, TableFormatError

T = TypeVar("T")

TASKS_PER_CORE = 2  # a task costs Spark about a second whatever its size: a few per core, not many


def task_size(total: int, parallelism: int, *, at_least: int) -> int:
    """How much of ``total`` one task takes on: at least ``at_least``, and so much that each of
    ``parallelism`` cores gets about ``TASKS_PER_CORE`` tasks."""
    return max(at_least, -(-total // (TASKS_PER_CORE * parallelism)))


def task_groups(items: Iterable[tuple[T, int]], *, size: int) -> list[list[T]]:
    """``(item, weight)`` grouped, in order, into groups of about ``size``: a group closes before the item that
    would take it past ``size`` (an item is never split; a heavier one is a group of its own)."""
    groups: list[list[T]] = []
    weight = 0
    for item, w in items:
        if not groups or (groups[-1] and weight + w > size):
            groups.append([])
            weight = 0
        groups[-1].append(item)
        weight += w
    return groups


BATCH_ROWS = 65_536  # rows an executor hands Spark at a time


def decoded_tasks(decode: Callable[[list], Iterator[tuple]], groups: list, tasks, schema) -> Iterator:
    """Executor side, for ``mapInArrow``: ``decode(group)``'s rows for each task index of ``tasks`` (Arrow
    batches of one ``task`` column), as Arrow batches of ``schema`` (a pyarrow schema)."""
    import pyarrow as pa

    for batch in tasks:
        for task in batch.column(0).to_pylist():
            rows = decode(groups[task])
            while chunk := list(itertools.islice(rows, BATCH_ROWS)):
                yield pa.record_batch([pa.array(column, f.type) for column, f in zip(zip(*chunk), schema)],
                                      schema=schema)


def ipc_rows(batches) -> Iterator:
    """Executor side: each Arrow batch as one row of its IPC stream (``ipc binary``), for the driver to take
    with ``toLocalIterator`` and open with ``pyarrow.ipc.open_stream``."""
    import pyarrow as pa

    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        yield pa.record_batch([pa.array([sink.getvalue().to_pybytes()], pa.binary())], names=["ipc"])


def error_text(e: TableFormatError) -> str:
    """A metadata error as an executor hands it back: its class name, a colon, its words without the path."""
    return f"{type(e).__name__}:{str(e)[len(e.path) + 2:]}"


def error_of(path: str, text: str) -> TableFormatError:
    """The error ``error_text`` gave, made again on the driver naming ``path``: the same class and words."""
    name, _, message = text.partition(":")
    if name == "MetadataNotFound":
        return MetadataNotFound(path, message.removesuffix(" not found"))
    return CorruptMetadata(path, message)
