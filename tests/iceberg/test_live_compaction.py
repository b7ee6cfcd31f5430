"""Compaction on a table that is written while it is compacted: appends are committed on, and a bin is left
out (DROPPED, its output an orphan) when a delete that may apply to one of its inputs was committed since
the plan's snapshot, so that no row a concurrent delete removed comes back (apache/iceberg#10312)."""

from __future__ import annotations

import collections

import pyarrow as pa
import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.iceberg import commit as iceberg_commit
from lakesweep.engine.iceberg.commit import IcebergCommitter
from lakesweep.engine.iceberg.table import canonical
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import OutputOrphaned
from lakesweep.planner.iceberg.compact import plan_compact, resolve_compact_options
from tests.iceberg.conftest import (SCHEMA, SPEC, files_on_disk, missing, needed_files, raced_committer,
                                    unlisted_manifests)
from tests.support import iceberg_files

pytest.importorskip("pyiceberg")


def plan(view):
    return plan_compact(view, now_ms=0, options=resolve_compact_options(view.options, min_input_files=2))


def append(table, ids, region):
    table.append(pa.table({"id": pa.array(ids, pa.int64()), "region": [region] * len(ids)}))


def partitioned(lake):
    """Five small files in region=us (one bin) and two in region=eu (another bin)."""
    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    for i in range(5):
        append(t, [10 * i, 10 * i + 1, 10 * i + 2], "us")
    for i in range(2):
        append(t, [500 + 10 * i, 501 + 10 * i], "eu")
    return lake.table()


def data_files(table, region=None):
    return [e.data_file for m in table.current_snapshot().manifests(table.io) if m.content == 0
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
            if region is None or e.data_file.partition[0] == region]


def current_rows(table) -> collections.Counter:
    """The current snapshot's rows, read from the files by the spec's rules (equality deletes included)."""
    return iceberg_files.rows_from_files(table, table.current_snapshot().snapshot_id)


def position_delete(table, data_file, positions):
    iceberg_files.commit_delete_files(table, [iceberg_files.write_position_delete_file(table, data_file, positions)])


def equality_delete(table, region, ids):
    from pyiceberg.typedef import Record

    f = iceberg_files.write_equality_delete_file(table, partition=Record(region), spec_id=table.spec().spec_id,
                                                 rows=[{"id": i} for i in ids])
    iceberg_files.commit_delete_files(table, [f])


def bin_of(p, region) -> int:
    return next(b["index"] for b in p.scope.bins if b["partition"] == f"region={region}")


def apply(p, tmp_path, *, executor=None, **kw):
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=executor or DriverExecutor(), **kw)
        return report, rec.file_records(plan_id=p.plan_id), rec.events(plan_id=p.plan_id)


class WritingDuringTheMerge(DriverExecutor):
    """An executor during whose merge phase a writer commits: right after the first bin is merged, before
    the next one is."""

    def __init__(self, write):
        super().__init__()
        self.write = write

    def map(self, fn, items, *, on_result):
        def merge_then_write(task):
            out = fn(task)
            if self.write is not None:
                self.write()
                self.write = None
            return out

        super().map(merge_then_write, items, on_result=on_result)


def writes(lake, kind, region):
    """A concurrent delete of one row of ``region``'s first file: (the write, the row it deletes)."""
    t = lake.table()
    f = data_files(t, region)[0]
    row_id = _ids_of(f)[0]
    if kind == "position":
        return (lambda: position_delete(lake.table(), f, [0])), (row_id, region)
    return (lambda: equality_delete(lake.table(), region, [row_id])), (row_id, region)


def _ids_of(data_file) -> list[int]:
    import pyarrow.parquet as pq

    # one file, not a dataset: its region=us directory is no partition column here
    return pq.ParquetFile(canonical(data_file.file_path).removeprefix("file://")).read(["id"]).column("id").to_pylist()


@pytest.mark.parametrize("when", ["between plan and apply", "during the merge phase"])
@pytest.mark.parametrize("kind", ["position", "equality"])
def test_a_delete_committed_concurrently_stays_deleted_and_its_bin_is_dropped(lake, tmp_path, kind, when):
    partitioned(lake)
    p = plan(lake.view())
    assert sorted(b["partition"] for b in p.scope.bins) == ["region=eu", "region=us"]
    write, row = writes(lake, kind, "us")
    executor = None
    if when == "between plan and apply":
        write()
    else:
        executor = WritingDuringTheMerge(write)
    report, records, events = apply(p, tmp_path, executor=executor)
    assert executor is None or executor.write is None  # the delete landed while the bins were merged
    after = lake.table()
    rows = current_rows(after)
    assert row not in rows  # the concurrent delete is not undone
    us, eu = bin_of(p, "us"), bin_of(p, "eu")
    outcome = {(p.actions[r.action_id].bucket, str(r.kind)): r for r in records if str(r.kind) == "compact-replace"}
    assert {o.outcome.value for (b, _), o in outcome.items() if b == us} == {"DROPPED"}
    assert {o.outcome.value for (b, _), o in outcome.items() if b == eu} == {"COMMITTED"}
    why = next(o.error for (b, _), o in outcome.items() if b == us)
    assert why.startswith(f"bin {us}: {kind} delete ") and why.endswith(", committed since the plan; its output is "
                                                                         "an orphan")
    assert [e.group for e in events if isinstance(e, OutputOrphaned)] == [us]
    assert report.state == "COMPLETED" and report.whole and not report.nothing_safe
    # the eu bin was compacted into one file, the us files were left as they were
    assert len(data_files(after, "eu")) == 1 and len(data_files(after, "us")) == 5
    assert missing(after) == set()


def test_with_the_bin_dropping_rule_off_the_concurrent_delete_would_come_back(lake, tmp_path, monkeypatch):
    """The rule is what keeps the row deleted: without it the merged output, written from the plan's view,
    brings back the row the position delete removed (the delete names the old file)."""
    partitioned(lake)
    p = plan(lake.view())
    write, row = writes(lake, "position", "us")
    write()
    monkeypatch.setattr(iceberg_commit, "new_deletes_since", lambda table, scope, bins, **_: {})
    apply(p, tmp_path)
    assert row in current_rows(lake.table())


def test_an_equality_delete_of_another_partition_leaves_the_bin_in_the_commit(lake, tmp_path):
    partitioned(lake)
    p = plan(lake.view())
    write, row = writes(lake, "equality", "eu")
    before = current_rows(lake.table())
    write()
    report, records, _ = apply(p, tmp_path)
    after = lake.table()
    rows = current_rows(after)
    assert row not in rows and rows == before - collections.Counter({row: 1})
    # the us bin is compacted; the eu bin, whose partition the delete names, is left out
    assert len(data_files(after, "us")) == 1 and len(data_files(after, "eu")) == 2
    assert {r.outcome.value for r in records if p.actions[r.action_id].bucket == bin_of(p, "eu")
            and str(r.kind) == "compact-replace"} == {"DROPPED"}


def test_outputs_carry_the_plans_sequence_number_so_a_later_equality_delete_still_applies(lake, tmp_path):
    """Iceberg's use-starting-sequence-number: an equality delete committed after the plan's snapshot, even one
    the commit did not see, applies to the merged output's rows."""
    partitioned(lake)
    p = plan(lake.view())
    report, _, _ = apply(p, tmp_path)
    after = lake.table()
    [out] = data_files(after, "us")
    row = next(r for r in current_rows(after) if r[1] == "us")
    equality_delete(after, "us", [row[0]])
    assert row not in current_rows(lake.table()) and len(data_files(lake.table(), "us")) == 1 and out


def test_appends_between_plan_and_apply_are_committed_on_and_stay_readable(lake, tmp_path):
    partitioned(lake)
    p = plan(lake.view())
    t = lake.table()
    append(t, [900], "us")
    append(lake.table(), [901], "ap")
    before = current_rows(lake.table())
    report, _, _ = apply(p, tmp_path)
    after = lake.table()
    assert report.state == "COMPLETED" and report.counts["COMMITTED"] == 7 and report.counts["DROPPED"] == 0
    assert current_rows(after) == before
    assert len(data_files(after, "us")) == 2 and len(data_files(after, "eu")) == 1  # the output and the new one


def test_a_commit_that_loses_the_race_is_retried_on_a_fresh_read_and_says_how_many_attempts(lake, tmp_path):
    partitioned(lake)
    p = plan(lake.view())

    class Raced(IcebergCommitter):
        """A writer's append lands between this commit's read of the table and the catalog's check."""

        def _requirements(self, table):
            if self.attempts == 1:
                append(lake.table(), [777], "ap")
            return super()._requirements(table)

    committer = Raced(p, sleep=lambda s: None)
    report, _, _ = apply(p, tmp_path, committer=committer)
    after = lake.table()
    assert report.state == "COMPLETED" and committer.attempts == 2 and report.commits[0]["attempts"] == 2
    assert (777, "ap") in current_rows(after) and after.current_snapshot().parent_snapshot_id is not None
    assert after.snapshot_by_id(after.current_snapshot().parent_snapshot_id).summary.operation.value == "append"



def raced(p, race, races, monkeypatch):
    from lakesweep.engine.iceberg.compact_commit import ReplaceDataFiles

    return raced_committer(p, race, races=races, producer=ReplaceDataFiles, monkeypatch=monkeypatch)


def test_an_attempt_after_a_lost_race_reads_only_the_manifests_new_since_and_leaves_no_manifest_behind(
        lake, tmp_path, monkeypatch):
    partitioned(lake)
    p = plan(lake.view())
    committer = raced(p, lambda n: append(lake.table(), [700 + n], "ap"), 3, monkeypatch)
    report, _, _ = apply(p, tmp_path, committer=committer)
    after = lake.table()
    assert report.state == "COMPLETED" and committer.attempts == 4 and report.counts["COMMITTED"] == 7
    # the first attempt reads the 7 data manifests, then each again to rewrite it (each lists an input), and
    # writes the rewrites and the outputs' manifest; each later one reads only the manifest of the append
    # committed since, and writes no manifest (only its manifest list)
    assert [committer.reads[n] for n in (1, 2, 3, 4)] == [7 + 7, 1, 1, 1]
    assert [committer.writes[n] for n in (1, 2, 3, 4)] == [1 + 7, 0, 0, 0]
    assert {(700 + n, "ap") for n in (1, 2, 3)} <= set(current_rows(after))
    assert len(data_files(after, "us")) == 1 and len(data_files(after, "eu")) == 1
    assert unlisted_manifests(after) == set() and missing(after) == set()


def test_a_bin_left_out_after_a_lost_race_starts_the_rewrites_over_and_leaves_no_manifest_behind(lake, tmp_path,
                                                                                                  monkeypatch):
    partitioned(lake)
    p = plan(lake.view())
    write, row = writes(lake, "position", "us")
    committer = raced(p, lambda n: write(), 1, monkeypatch)
    report, records, _ = apply(p, tmp_path, committer=committer)
    after = lake.table()
    assert report.state == "COMPLETED" and committer.attempts == 2
    assert {r.outcome.value for r in records if str(r.kind) == "compact-replace"
            and p.actions[r.action_id].bucket == bin_of(p, "us")} == {"DROPPED"}
    assert row not in current_rows(after)
    assert len(data_files(after, "us")) == 5 and len(data_files(after, "eu")) == 1
    assert unlisted_manifests(after) == set() and missing(after) == set()


def test_a_commit_refused_every_time_leaves_no_manifest_behind(lake, tmp_path, monkeypatch):
    partitioned(lake)
    before = {f for f in files_on_disk(lake.table()) if "/metadata/" in f and f.endswith(".avro")}
    p = plan(lake.view())
    n = [0]

    def race(attempt):
        n[0] += 1
        append(lake.table(), [800 + n[0]], "ap")

    committer = raced(p, race, 99, monkeypatch)
    report, _, _ = apply(p, tmp_path, committer=committer)
    after = lake.table()
    assert report.state == "FAILED" and committer.attempts == 6
    assert "the catalog refused the commit 6 times" in report.reason
    assert len(data_files(after, "us")) == 5 and len(data_files(after, "eu")) == 2
    ours = {f for f in files_on_disk(after) if "/metadata/" in f and f.endswith(".avro")} - before
    assert ours == needed_files(after) & ours  # only the appends' manifests and lists are new
    assert unlisted_manifests(after) == set()


def test_rewrites_of_manifests_a_writer_merged_away_meanwhile_are_deleted_after_the_commit(lake, tmp_path,
                                                                                           monkeypatch):
    partitioned(lake)
    p = plan(lake.view())
    left_by_writer = set()

    def merging_append(attempt):
        t = lake.table()
        with t.transaction() as tx:
            tx.set_properties({"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"})
        before = unlisted_manifests(lake.table())
        append(lake.table(), [900], "ap")
        left_by_writer.update(unlisted_manifests(lake.table()) - before)  # pyiceberg's merge leaves its own

    committer = raced(p, merging_append, 1, monkeypatch)
    report, _, _ = apply(p, tmp_path, committer=committer)
    after = lake.table()
    assert report.state == "COMPLETED" and committer.attempts == 2
    [merged] = [m for m in after.snapshot_by_id(after.current_snapshot().parent_snapshot_id).manifests(after.io)]
    assert merged.content == 0  # the writer merged the 7 manifests and its own into one
    # the second attempt rewrites the merged manifest; the first attempt's 7 rewrites are listed nowhere
    assert [committer.writes[n] for n in (1, 2)] == [1 + 7, 1]
    assert len(data_files(after, "us")) == 1 and len(data_files(after, "eu")) == 1
    assert (900, "ap") in current_rows(after)
    assert unlisted_manifests(after) == left_by_writer and len(left_by_writer) <= 1 and missing(after) == set()
