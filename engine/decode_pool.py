"""Decode many metadata files on every core: ``map_ordered(fn, items)`` runs a top-level function over picklable
items in worker processes and yields its results in the items' order.

Format-neutral: the caller reads the bytes (its FileIO, its "not found" errors) and ``fn`` decodes them into
compact values (tuples, columns). Workers start from a fork server, never by forking a process that runs
pyarrow's or Spark's threads. An error ``fn`` raises in a worker is raised again in the caller as the same
class with the same message, chained to the worker's traceback. ``LAKESWEEP_DECODE_PROCESSES`` overrides how
many processes decode (1: in this process). Workers import the caller's main module, as under any start method
but fork: a script that plans must keep its work under ``if __name__ == "__main__"``.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")

ENV = "LAKESWEEP_DECODE_PROCESSES"
# Below this much input a pool's start-up (a fork server and its workers importing the decoder) costs more
# than it saves.
PARALLEL_MIN_BYTES = 8 << 20


def processes_for(total_bytes: int) -> int:
    """How many processes should decode ``total_bytes`` of input: the override, else every core for a large
    input and this process alone for a small one."""
    override = os.environ.get(ENV, "").strip()
    if override:
        try:
            return max(1, int(override))
        except ValueError as e:
            raise ValueError(f"{ENV}={override!r} is not a whole number") from e
    return (os.cpu_count() or 1) if total_bytes >= PARALLEL_MIN_BYTES else 1


class RemoteTraceback(Exception):
    """The traceback of an error raised in a worker process (the ``__cause__`` of the error raised again)."""


def _call(fn: Callable[[T], R], item: T):
    try:
        return True, fn(item)
    except Exception as e:  # noqa: BLE001 - carried back and raised again in the caller, as it was
        return False, (type(e), e.args, dict(getattr(e, "__dict__", {})), traceback.format_exc())


def _unwrap(outcome):
    ok, value = outcome
    if ok:
        return value
    cls, args, state, tb = value
    err = cls.__new__(cls, *args)  # not __init__: our errors build their message from other arguments
    err.args = args
    err.__dict__.update(state)
    raise err from RemoteTraceback(tb)


def map_ordered(fn: Callable[[T], R], items: Iterable[T], *, processes: int = 1) -> Iterator[R]:
    """``fn(item)`` for each item, in order. With ``processes`` > 1 the calls run in that many worker
    processes (``fn`` and the items must pickle); at most two items per worker are in flight, so a lazy
    ``items`` reads ahead only that far."""
    if processes <= 1:
        for item in items:
            yield fn(item)
        return
    window = 2 * processes
    pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("forkserver"))
    pending: deque = deque()
    try:
        for item in items:
            pending.append(pool.submit(_call, fn, item))
            if len(pending) >= window:
                yield _unwrap(pending.popleft().result())
        while pending:
            yield _unwrap(pending.popleft().result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
