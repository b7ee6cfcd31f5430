"""Apply and resume cost the same per action at 2,000 and at 20,000 actions.

Counted, not timed: every FileIO call, every call to the journal's storage and the rows it hands back,
every action row hashed into a plan id, every full pass over the plan's actions. The table lives in a
``MemoryFileIO``; bulk phases run on the driver (``DriverExecutor``, the code a Spark task runs); the
journal is a real DuckDB file. Anything done per action that is really per plan (hashing the plan for
every result row, re-reading the journal for every batch) makes the per-action count grow with the plan
and fails here.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

import lakesweep.applier.phases
import lakesweep.engine.plan
import lakesweep.engine.plan_codec
from lakesweep.engine.paths import resolve_action_path
from lakesweep.applier.apply import DriverExecutor, apply_plan, resume
from lakesweep.engine.fileio import MemoryFileIO
from lakesweep.engine.paimon.paths import external_roots
from lakesweep.engine.plan import CleanupPlan
from lakesweep.engine.paimon.kinds import ActionKind, Phase
from lakesweep.engine.paimon.table import open_table
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import resolve_expire_options
from tests.support.table_builder import ADD, DELETE, E, TableBuilder

pytestmark = pytest.mark.slow

FILES_PER_COMMIT = 91  # with the commit's manifest lists, snapshot and directories: ~100 actions per commit
SMALL, LARGE = 21, 203  # commits: ~2,000 and ~20,000 actions
SLACK = 1.10  # per-action counts may differ by this much between the sizes (fixed costs spread thinner)


class CountingFileIO(MemoryFileIO):
    """A ``MemoryFileIO`` that counts the calls made to it."""

    def __init__(self, counts: Counter):
        super().__init__(clock=lambda: 1)
        self.counts = counts

    def read_bytes(self, path):
        self.counts["fileio read_bytes"] += 1
        return super().read_bytes(path)

    def exists(self, path):
        self.counts["fileio exists"] += 1
        return super().exists(path)

    def info(self, path):
        self.counts["fileio info"] += 1
        return super().info(path)

    def list(self, path, *, recursive=False):
        self.counts["fileio list"] += 1
        return super().list(path, recursive=recursive)

    def delete(self, path):
        self.counts["fileio delete"] += 1
        return super().delete(path)

    def delete_empty_dir(self, path):
        self.counts["fileio delete_empty_dir"] += 1
        return super().delete_empty_dir(path)

    def write_atomic(self, path, data):
        self.counts["fileio write_atomic"] += 1
        return super().write_atomic(path, data)


class CountedActions(tuple):
    """A plan's actions that count every full pass over them."""

    counts: Counter = Counter()  # the step being measured sets its own

    def __iter__(self):
        self.counts["passes over plan.actions"] += 1
        return super().__iter__()


_STORAGE = ("_insert_plan", "_load_plan", "_append_rows", "_event_rows", "_insert_files", "_insert_file_table",
            "file_records",
            "file_rows", "done_actions", "apply_totals", "outcome_totals", "plan_ids")


def counting_journal(path: str, counts: Counter) -> DuckDBRecorder:
    """A DuckDB journal whose storage calls are counted, with the rows they read back and write."""
    recorder = DuckDBRecorder(path)
    for name in _STORAGE:
        def wrapper(*args, _name=name, _method=getattr(recorder, name), **kwargs):
            result = _method(*args, **kwargs)
            counts[f"journal {_name}"] += 1
            if _name in ("_event_rows", "file_records", "file_rows"):
                counts["journal rows read back"] += len(result)
            if _name == "_load_plan" and result is not None:
                counts["plan actions loaded"] += len(result[1])
            if _name in ("_insert_files", "_insert_file_table"):
                counts["file records written"] += len(args[0])
                counts["file record batches written"] += 1
            return result
        setattr(recorder, name, wrapper)
    return recorder


def memory_table(root: str, fileio: MemoryFileIO, commits: int) -> None:
    """``commits`` snapshots; each adds a partition of files in four buckets and deletes the previous one's."""

    class Builder(TableBuilder):
        def _write(self, path, data):
            fileio.put(path, data, 1)

    b = Builder(root, partition_keys=("dt",), partition_types=("STRING",),
                options={"snapshot.clean-empty-directories": "true"})
    previous: list[E] = []
    for c in range(commits):
        adds = [E(ADD, f"data-{c}-{i}.parquet", (f"d{c:04d}",), bucket=i % 4, size=100 + i) for i in range(FILES_PER_COMMIT)]
        b.commit(adds + [E(DELETE, e.name, e.partition, e.bucket, size=e.size) for e in previous])
        previous = adds


class _Crash(BaseException):
    """Stands in for kill -9 halfway through the data files: nothing in lakesweep catches it."""


class CrashHalfway:
    def __init__(self, after: int):
        self.after, self.seen = after, 0

    def phase_started(self, phase, files, size):
        pass

    def advance(self, files, size):
        self.seen += files
        if self.seen >= self.after:
            raise _Crash()

    def phase_finished(self, phase):
        pass


def run(tmp_path, commits: int) -> dict:
    """Plan, apply until a crash halfway through the data files, then resume; the counts of each step."""
    fileio = CountingFileIO(Counter())
    root = str(tmp_path / f"t{commits}")
    memory_table(root, fileio, commits)
    table = open_table(root, fileio)
    planned = plan_expire(table, now_ms=10**15, options=resolve_expire_options(
        table.options, retain_min=1, time_retained=0, max_deletes=10**6))
    n = len(planned.actions)
    data_files = sum(1 for a in planned.actions if a.phase == Phase.DATA_FILES)
    deleting = [a for a in planned.actions if a.verb.deletes]
    roots = external_roots(table.options)
    expected = (set(fileio.files) - {resolve_action_path(root, a.path, roots) for a in deleting}
                | {os.path.join(root, "snapshot", "EARLIEST")})
    plan = CleanupPlan(**{**{f: getattr(planned, f) for f in planned.__dataclass_fields__},
                          "actions": CountedActions(planned.actions)})
    journal = str(tmp_path / f"j{commits}.duckdb")

    apply_counts, resume_counts = Counter(), Counter()
    counts = apply_counts  # where the hashing below is counted
    original_row = lakesweep.engine.plan.action_json
    original_columns = lakesweep.engine.plan_codec.rows_json

    def counted_row(a):
        counts["action rows hashed"] += 1
        return original_row(a)

    def counted_columns(arrays):
        counts["column rows hashed"] += len(arrays[0])
        return original_columns(arrays)

    lakesweep.engine.plan.action_json = counted_row
    lakesweep.engine.plan_codec.rows_json = counted_columns
    # Journal every task batch (500), as small as the driver phases do, so a crash halfway through the
    # data files leaves about half of them journaled at both sizes.
    bulk_batch, lakesweep.applier.phases._BULK_JOURNAL_BATCH = lakesweep.applier.phases._BULK_JOURNAL_BATCH, 500
    try:
        CountedActions.counts = fileio.counts = apply_counts
        with counting_journal(journal, apply_counts) as recorder:
            with pytest.raises(_Crash):
                apply_plan(plan, recorder, fileio=fileio, executor=DriverExecutor(),
                           progress=CrashHalfway(data_files // 2))
        journaled = apply_counts["file records written"]
        assert data_files // 2 <= journaled < data_files

        counts = fileio.counts = resume_counts
        with counting_journal(journal, resume_counts) as recorder:
            [report] = resume(recorder, fileio=fileio, executor=DriverExecutor())
    finally:
        lakesweep.engine.plan.action_json = original_row
        lakesweep.engine.plan_codec.rows_json = original_columns
        lakesweep.applier.phases._BULK_JOURNAL_BATCH = bulk_batch

    # The resumed apply finished the plan: every planned deletion is gone, everything else is still there.
    assert (report.state, report.resumed) == ("COMPLETED", True)
    # A bulk phase journals a batch while the next one runs: the crash, in a journal write, leaves at most
    # that next batch deleted and not journaled, which resume finds already absent.
    absent = report.counts["ALREADY_ABSENT"]
    assert report.counts["DELETED"] + absent == len(deleting) and absent <= 500 and report.counts["FAILED"] == 0
    assert report.phases[0]["actions"] == data_files - journaled  # resume did only what was left
    assert resume_counts["file records written"] == n - journaled
    dirs = sum(1 for a in deleting if a.kind == ActionKind.EMPTY_DIR)
    assert (resume_counts["fileio delete"], resume_counts["fileio delete_empty_dir"]) == (
        len(deleting) - dirs - journaled, dirs)
    assert set(fileio.files) == expected
    return {"actions": n, "apply": apply_counts, "resume": resume_counts}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("linear")
    return run(tmp, SMALL), run(tmp, LARGE)


def _per_action(counts: Counter, n: int) -> dict[str, float]:
    return {k: v / n for k, v in sorted(counts.items())}


@pytest.mark.parametrize("step", ["apply", "resume"])
def test_work_per_action_does_not_grow_with_the_plan(measured, step):
    small, large = measured
    assert 1_900 <= small["actions"] <= 2_100 and 19_900 <= large["actions"] <= 20_100
    per_small, per_large = _per_action(small[step], small["actions"]), _per_action(large[step], large["actions"])
    assert set(per_small) == set(per_large)
    grew = {k: (round(per_small[k], 3), round(per_large[k], 3)) for k in per_small
            if per_large[k] > per_small[k] * SLACK + 0.01}
    assert grew == {}, f"{step}: per-action counts at ~2k vs ~20k actions: {grew}"


def test_the_plan_is_hashed_and_loaded_once_per_apply_and_resume(measured):
    for m in measured:
        n = m["actions"]
        assert m["apply"]["action rows hashed"] == n  # the plan's id: once, then kept on the plan
        assert m["apply"]["plan actions loaded"] == 0  # a new plan: written, never read back
        # resume: the journal's copy loaded once and checked against its id over the columns it was read
        # as; the plan rebuilt from it keeps that id
        assert m["resume"]["plan actions loaded"] == n
        assert (m["resume"]["action rows hashed"], m["resume"]["column rows hashed"]) == (0, n)


def test_results_are_journaled_in_batches_without_reading_the_journal_back(measured):
    for m in measured:
        for step in ("apply", "resume"):
            counts = m[step]
            assert counts["file records written"] / counts["file record batches written"] >= 50, (step, counts)
            assert counts["journal file_records"] == 0, (step, counts)  # no record is read back one by one
            assert counts["journal _event_rows"] <= 8, (step, counts)  # not once per batch
        # what resume reads back: events, and the snapshot phase's records (none yet: it crashed earlier)
        assert m["resume"]["journal rows read back"] <= 20, m["resume"]
        assert m["apply"]["journal rows read back"] <= 10, m["apply"]
