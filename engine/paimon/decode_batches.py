"""Read metadata files in order and decode them in worker processes (``engine.decode_pool``), a batch of files
per task, failing exactly as reading and decoding them one by one fails."""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterator, TypeVar

from lakesweep.engine.decode_pool import map_ordered
from lakesweep.engine.fileio import ordered_reads

T = TypeVar("T")

BATCH_BYTES = 1 << 20  # the files a worker decodes per task


def read_and_decode(paths: list[str], read: Callable[[str], bytes], decode: Callable[[tuple[str, bytes]], T], *,
                    processes: int, threads: int = 1) -> Iterator[tuple[str, T]]:
    """``(path, decode((path, read(path))))`` for each of ``paths``, in order, read here (on ``threads``
    threads, a few files ahead: ``engine.fileio.ordered_reads``) and, with ``processes`` > 1, decoded in
    that many workers, about ``BATCH_BYTES`` of files per task (``decode`` must be a top-level function).
    Fails at the first path that cannot be read or decoded, with the error reading and decoding it alone
    raises, after yielding those before it."""
    reads = ordered_reads(paths, read, threads=threads)
    if processes <= 1:
        for path, data in reads:
            yield path, decode((path, data))
        return
    failed: list[Exception] = []
    sent: deque[list[tuple[str, bytes]]] = deque()

    def batches():
        batch: list[tuple[str, bytes]] = []
        size = 0
        while True:
            try:
                path, data = next(reads)
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001 - raised below, after what was read before it
                failed.append(e)
                break
            batch.append((path, data))
            size += len(data)
            if size >= BATCH_BYTES:
                sent.append(batch)
                yield decode, batch
                batch, size = [], 0
        if batch:
            sent.append(batch)
            yield decode, batch

    results = map_ordered(_decode_batch, batches(), processes=processes)
    while True:
        try:
            decoded = next(results)
        except StopIteration:
            break
        except Exception:  # noqa: BLE001 - decoded again here, one by one, to fail at the same file
            for item in sent.popleft():
                yield item[0], decode(item)
            raise
        yield from zip((path for path, _ in sent.popleft()), decoded)
    if failed:
        raise failed[0]


def _decode_batch(job: tuple[Callable[[tuple[str, bytes]], T], list[tuple[str, bytes]]]) -> list[T]:
    """A worker's task: ``decode`` each item of a batch (one task per file costs the reading process more to
    send and collect than a small manifest costs to decode)."""
    decode, items = job
    return [decode(item) for item in items]
