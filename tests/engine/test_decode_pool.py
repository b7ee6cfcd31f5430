"""``engine.decode_pool``: results in the items' order, from other processes when asked, and an error a worker
raises is raised again here as the same class with the same message; files read ahead on threads
(``ordered_reads``) and decoded in batches (``read_and_decode``) fail at the same file as one by one."""

from __future__ import annotations

import os
import threading

import pytest

from lakesweep.engine import fileio
from lakesweep.engine.decode_pool import ENV, PARALLEL_MIN_BYTES, RemoteTraceback, map_ordered, processes_for
from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound
from lakesweep.engine.fileio import ordered_reads
from lakesweep.engine.paimon import decode_batches
from lakesweep.engine.paimon.decode_batches import read_and_decode


def _square_and_pid(n: int) -> tuple[int, int]:
    return n * n, os.getpid()


def _fail_on_three(n: int) -> int:
    if n == 3:
        raise MetadataNotFound(f"/t/m{n}.avro", "manifest")
    if n == 4:
        raise CorruptMetadata(f"/t/m{n}.avro", "manifest cannot be read: EOFError")
    return n


def test_results_come_back_in_order_from_worker_processes():
    got = list(map_ordered(_square_and_pid, range(20), processes=2))
    assert [sq for sq, _ in got] == [n * n for n in range(20)]
    assert os.getpid() not in {pid for _, pid in got}


def test_one_process_decodes_here():
    assert {pid for _, pid in map_ordered(_square_and_pid, range(3), processes=1)} == {os.getpid()}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_workers_error_is_raised_as_its_class_with_its_message_and_path(processes):
    results = map_ordered(_fail_on_three, range(6), processes=processes)
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(MetadataNotFound) as e:
        next(results)
    assert (str(e.value), e.value.path) == ("/t/m3.avro: manifest not found", "/t/m3.avro")
    if processes > 1:
        assert isinstance(e.value.__cause__, RemoteTraceback) and "_fail_on_three" in str(e.value.__cause__)


def test_small_inputs_decode_here_and_large_ones_on_every_core(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert processes_for(PARALLEL_MIN_BYTES - 1) == 1
    assert processes_for(PARALLEL_MIN_BYTES) == (os.cpu_count() or 1)
    monkeypatch.setenv(ENV, "3")
    assert processes_for(0) == 3
    monkeypatch.setenv(ENV, "many")
    with pytest.raises(ValueError, match="LAKESWEEP_DECODE_PROCESSES='many' is not a whole number"):
        processes_for(0)


def _decode_text(item: tuple[str, bytes]) -> str:
    path, data = item
    if data == b"bad":
        raise CorruptMetadata(path, "manifest cannot be read: EOFError")
    return data.decode()


class _Store:
    """Reads of ``/t/m<i>``: the text ``i``, ``bad`` for ``bad``, a missing file for ``gone``; records each
    read's path and thread."""

    def __init__(self, bad=(), gone=()):
        self.bad, self.gone, self.reads = set(bad), set(gone), []

    def read(self, path: str) -> bytes:
        self.reads.append((path, threading.current_thread().name))
        i = int(path.rsplit("m", 1)[1])
        if i in self.gone:
            raise MetadataNotFound(path, "manifest")
        return b"bad" if i in self.bad else str(i).encode()


@pytest.mark.parametrize("threads", [1, 4])
def test_ordered_reads_give_each_file_in_order_and_a_failed_read_at_its_turn(threads, monkeypatch):
    monkeypatch.setattr(fileio, "READS_AHEAD", 2)
    store = _Store(gone={30})
    reads = ordered_reads((f"/t/m{i}" for i in range(100)), store.read, threads=threads)
    assert [next(reads) for _ in range(30)] == [(f"/t/m{i}", str(i).encode()) for i in range(30)]
    with pytest.raises(MetadataNotFound) as e:
        next(reads)
    assert e.value.path == "/t/m30"
    made = {path for path, _ in store.reads}
    assert len(made) <= 30 + 1 + threads * 2  # ahead by at most READS_AHEAD a thread; none after the error
    names = {name for _, name in store.reads}
    if threads == 1:
        assert names == {threading.current_thread().name} and len(made) == 31
    else:
        assert names and all(name.startswith("lakesweep-read") for name in names)


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("threads", [1, 4])
def test_read_and_decode_on_threads_fails_at_the_first_file_that_cannot_be_read_or_decoded(processes, threads,
                                                                                          monkeypatch):
    monkeypatch.setattr(decode_batches, "BATCH_BYTES", 4)
    paths = [f"/t/m{i}" for i in range(60)]
    assert list(read_and_decode(paths, _Store().read, _decode_text, processes=processes, threads=threads)) == \
        [(p, p[len("/t/m"):]) for p in paths]
    for store, error, at in ((_Store(bad={40}, gone={41}), CorruptMetadata, 40),
                             (_Store(bad={41}, gone={40}), MetadataNotFound, 40)):
        got = read_and_decode(paths, store.read, _decode_text, processes=processes, threads=threads)
        assert [next(got) for _ in range(at)] == [(p, p[len("/t/m"):]) for p in paths[:at]]
        with pytest.raises(error) as e:
            next(got)
        assert e.value.path == f"/t/m{at}"
