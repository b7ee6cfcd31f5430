"""The task code of bulk phases (``execute_rows``) on real local files, on one thread and on several."""

from __future__ import annotations

import threading

import pytest

from lakesweep.applier.spark_exec import execute_rows, task_row, task_rows_of
from lakesweep.engine.fileio import ArrowFileIO, MemoryFileIO
from lakesweep.engine.iceberg.kinds import ExpireKind
from lakesweep.engine.plan import Action, canonical_actions
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.s3_bulk import RequestBudget


def _table(tmp_path, n: int, missing: set[int]):
    root = tmp_path / "t"
    actions = []
    for i in range(n):
        rel = f"p={i % 5}/bucket-{i % 3}/data-{i}.orc"
        if i not in missing:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(b"x" * (i % 7))
        actions.append(Action(ActionKind.DATA_FILE, rel, snapshot_id=1, action_id=i))
    return root, actions


@pytest.mark.parametrize("threads", [1, 8])
def test_every_action_runs_once_and_a_batch_comes_back_only_when_done(tmp_path, threads):
    missing = {3, 50, 51, 999}
    root, actions = _table(tmp_path, 1000, missing)
    seen: list[int] = []
    for batch in execute_rows(map(task_row, actions), ArrowFileIO("file"), str(root), [], False, 64, threads):
        assert 0 < len(batch) <= 64
        for action_id, outcome, attempts, error, _ms, _moved_to in batch:
            assert not (root / actions[action_id].path).exists()  # journaled means done
            assert (outcome, attempts, error) == (("ALREADY_ABSENT" if action_id in missing else "DELETED"), 1, None)
            seen.append(action_id)
    assert sorted(seen) == list(range(1000))
    assert not any(p.is_file() for p in root.rglob("*"))


def test_dry_run_on_threads_only_probes(tmp_path):
    root, actions = _table(tmp_path, 300, {7, 8})
    out = [r for batch in execute_rows(map(task_row, actions), ArrowFileIO("file"), str(root), [], True, 50, 8)
           for r in batch]
    assert sorted((r[0], r[1]) for r in out) == [
        (i, "ALREADY_ABSENT" if i in (7, 8) else "DELETED") for i in range(300)]
    assert sum(1 for p in root.rglob("*") if p.is_file()) == 298


def test_a_path_outside_the_root_fails_its_action_and_deletes_nothing(tmp_path):
    root, actions = _table(tmp_path, 20, set())
    outside = tmp_path / "outside.orc"
    outside.write_bytes(b"keep")
    rows = [task_row(a) for a in actions] + [(20, "data-file", str(outside), 1, None, "delete-file", 1)]
    out = {r[0]: r for batch in execute_rows(iter(rows), ArrowFileIO("file"), str(root), [], False, 8, 4)
           for r in batch}
    assert out[20][1] == "FAILED" and "outside the table root" in out[20][3]
    assert outside.read_bytes() == b"keep"
    assert all(out[i][1] == "DELETED" for i in range(20))


@pytest.mark.parametrize("threads", [1, 8])
def test_local_deletes_keep_each_files_outcome_and_the_batch_order(tmp_path, threads):
    """A directory where a file was planned fails after every retry, with the attempts counted; a path through
    a symbolic link is refused at once; the rest are DELETED or ALREADY_ABSENT; rows come back in plan order."""
    root, actions = _table(tmp_path, 40, {5})
    (root / actions[7].path).unlink()
    (root / actions[7].path).mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data-x.orc").write_bytes(b"keep")
    (root / "linked").symlink_to(elsewhere)
    rows = [task_row(a) for a in actions] + [(40, "data-file", "linked/data-x.orc", 1, None, "delete-file", 1)]
    batches = list(execute_rows(iter(rows), ArrowFileIO("file"), str(root), [], False, 16, threads))
    out = [r for batch in batches for r in batch]
    assert [r[0] for r in out] == list(range(41))
    assert [len(b) for b in batches] == [16, 16, 9]
    assert out[5][1:4] == ("ALREADY_ABSENT", 1, None)
    assert out[7][1:3] == ("FAILED", 4) and out[7][3].endswith("is a directory; lakesweep deletes files only")
    assert out[40][1:3] == ("FAILED", 1) and "is a symbolic link" in out[40][3]
    assert all(r[1:4] == ("DELETED", 1, None) for r in out if r[0] not in (5, 7, 40))
    assert (elsewhere / "data-x.orc").read_bytes() == b"keep" and (root / actions[7].path).is_dir()


class _BulkMemory(MemoryFileIO):
    """A store with bulk deletes (one DeleteObjects per key: ``budget.delete_batch`` 1) whose first
    ``threads`` requests are answered only once all of them are in flight at the same time."""

    bulk_deletes = True
    budget = RequestBudget(delete_batch=1)

    def __init__(self, threads: int):
        super().__init__()
        self.barrier = threading.Barrier(threads, timeout=10)
        self.calls = 0
        self.lock = threading.Lock()

    def delete_batch(self, paths):
        with self.lock:
            self.calls += 1
            first = self.calls <= self.barrier.parties
        if first:
            self.barrier.wait()  # BrokenBarrierError unless `parties` requests are in flight together
        return super().delete_batch(paths)


def test_bulk_deletes_of_the_next_batches_go_out_while_this_one_is_answered():
    io = _BulkMemory(threads=4)
    for i in range(10):
        if i != 6:
            io.put(f"/t/d/f-{i}", b"x")
    rows = [task_row(Action(ActionKind.DATA_FILE, f"d/f-{i}", snapshot_id=1, action_id=i)) for i in range(10)]
    # Batches of two actions, two DeleteObjects each: four in flight means two batches' requests at once.
    batches = [[(r[0], r[1], r[2], r[3]) for r in b] for b in execute_rows(iter(rows), io, "/t", [], False, 2, 4)]
    assert batches == [[(i, "ALREADY_ABSENT" if i == 6 else "DELETED", 1, None) for i in (j, j + 1)]
                       for j in range(0, 10, 2)]
    assert io.calls == 10 and io.files == {}


@pytest.mark.parametrize("local", [True, False])
def test_on_local_disks_a_task_unlinks_on_a_few_threads_and_elsewhere_on_all_its_threads(tmp_path, monkeypatch, local):
    """On this machine's own disks a task's unlinks run on ``LOCAL_UNLINK_THREADS`` of its threads (more
    would only contend for the interpreter); on a network file system, on all of them. Every file is
    deleted either way."""
    from lakesweep.applier import spark_exec

    seen: set[str] = set()
    lock, started = threading.Lock(), [0]
    parties = spark_exec.LOCAL_UNLINK_THREADS if local else 8
    together = threading.Barrier(parties, timeout=30)

    class Watched(ArrowFileIO):
        def delete(self, path):
            seen.add(threading.current_thread().name)
            with lock:
                started[0] += 1
                first = started[0] <= together.parties
            if first:
                together.wait()  # BrokenBarrierError unless that many threads delete at once
            return super().delete(path)

    monkeypatch.setattr(spark_exec, "on_local_disk", lambda paths: local)
    root, actions = _table(tmp_path, 400, {5})
    out = [r for batch in execute_rows(map(task_row, actions), Watched("file"), str(root), [], False, 200, 8)
           for r in batch]
    assert sorted((r[0], r[1]) for r in out) == [(i, "ALREADY_ABSENT" if i == 5 else "DELETED") for i in range(400)]
    assert not any(p.is_file() for p in root.rglob("*"))
    assert together.n_waiting == 0 and not together.broken
    assert len(seen) == parties and all(name.startswith("lakesweep-action") for name in seen)


@pytest.mark.spark
@pytest.mark.parametrize("n, slices, chunks", [(101, 3, 8), (1000, 16, 8), (1000, 16, 3), (7, 1, 8)])
def test_task_rows_reach_spark_in_the_actions_order_in_the_partitions_asked(tmp_path, spark, monkeypatch, n, slices,
                                                                           chunks):
    import lakesweep.applier.spark_exec as spark_exec

    monkeypatch.setattr(spark_exec, "ROW_CHUNKS", chunks)
    _, actions = _table(tmp_path, n, missing=set(range(n)))
    parts = spark_exec.task_rows(spark.sparkContext, actions, slices).glom().collect()
    assert [r for part in parts for r in part] == [task_row(a) for a in actions]
    assert len(parts) == slices and all(parts)  # parallelize splits at its serializer's batches: not evenly


def test_the_task_rows_of_many_kinds_are_each_actions_task_row():
    actions = canonical_actions([
        Action(ActionKind.DATA_FILE, "dt=a/bucket-0/data-1.orc", snapshot_id=3),
        Action(ActionKind.MANIFEST, "manifest/manifest-1", snapshot_id=2, size=9),
        Action(ActionKind.EMPTY_DIR, "dt=a/bucket-0", depth=2),
        Action(ActionKind.WRITE_EARLIEST_HINT, "snapshot/EARLIEST", snapshot_id=4),
        Action(ActionKind.WRITE_CHANGELOG, "changelog/changelog-2", snapshot_id=2, source="snapshot/snapshot-2"),
        Action(ExpireKind.MANIFEST_LIST, "metadata/snap-1.avro", snapshot_id=1),
    ])
    assert task_rows_of(actions) == [task_row(a) for a in actions]
    assert len({r[1] for r in task_rows_of(actions)}) == 6 and len({r[5] for r in task_rows_of(actions)}) == 3
    assert task_rows_of(()) == []
