"""``engine.decode_pool``: results in the items' order, from other processes when asked, and an error a worker
raises is raised again here as the same class with the same message."""

from __future__ import annotations

import os

import pytest

from lakesweep.engine.decode_pool import ENV, PARALLEL_MIN_BYTES, RemoteTraceback, map_ordered, processes_for
from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound


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
