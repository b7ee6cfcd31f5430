"""``plan compact`` and its apply on tables pyiceberg wrote: the table's rows never change (now and in every
earlier snapshot), the seed's three examples end with the files they should, deletes are consumed, a stale
plan is refused, and a crash before or after the commit resumes to exactly one commit."""

from __future__ import annotations

import collections
import dataclasses
import json
import os

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan, dry_run_plan, resume
from lakesweep.engine.errors import StalePlan
from lakesweep.engine.iceberg.commit import IcebergCommitter
from lakesweep.engine.iceberg.compaction import DELETES_NOT_APPLIED
from lakesweep.engine.iceberg.requirements import COMMIT_ID_PROPERTY
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import OutputWritten
from lakesweep.planner.iceberg.compact import plan_compact, resolve_compact_options
from tests.iceberg.conftest import CATALOG, SCHEMA, SPEC, files_on_disk, missing, rows_by_snapshot
from tests.support import iceberg_files, iceberg_tables


class Crash(BaseException):
    """The process dying at a known point: nothing catches it, the journal keeps an unfinished apply."""


def plan(view, **flags):
    return plan_compact(view, now_ms=0, options=resolve_compact_options(view.options, **flags))


def apply(p, journal, **kwargs):
    with DuckDBRecorder(journal) as rec:
        return apply_plan(p, rec, executor=DriverExecutor(), **kwargs)


def append(table, ids, region="us"):
    table.append(pa.table({"id": pa.array(ids, pa.int64()), "region": [region] * len(ids)}))


def live_files(table):
    return sorted(canonical(e.data_file.file_path) for m in table.current_snapshot().manifests(table.io)
                  if m.content == 0 for e in m.fetch_manifest_entry(table.io, discard_deleted=True))


def compacted(paths):
    return [p for p in paths if os.path.basename(p).startswith("compact-")]


def six_files(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    start = 0
    for n in (10, 5, 8, 12, 3, 15):  # the seed's 10, 5, 8, 12, 3, 15 MB, in rows
        append(t, list(range(start, start + n)))
        start += n
    return lake.table()


def twenty_files(lake):
    """Twenty one-row files; the target (a table property, in bytes) holds eight of them and not nine."""
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(20):
        append(t, [1000 + i])
    [size] = {e.data_file.file_size_in_bytes for m in t.current_snapshot().manifests(t.io)
              for e in m.fetch_manifest_entry(t.io)}
    with t.transaction() as tx:
        tx.set_properties({"write.target-file-size-bytes": str(8 * size + size // 2)})
    return lake.table()


def built(tmp_path, builder, name, monkeypatch):
    """A table a builder of ``tests.support.iceberg_tables`` writes, its catalog configured for apply too."""
    for key, value in iceberg_tables.catalog_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    catalog = iceberg_tables.sql_catalog(tmp_path)
    b = builder(catalog, f"db.{name}")
    return b, IcebergTable(iceberg_tables.CATALOG_NAME, f"db.{name}", catalog=catalog)


# ---- the seed's examples ------------------------------------------------------------------------------


def test_six_small_files_become_one_and_every_snapshot_reads_the_same_rows(lake, tmp_path):
    t = six_files(lake)
    before = rows_by_snapshot(t)
    head = t.current_snapshot()
    p = plan(lake.view())
    assert len(p.scope.bins) == 1 and len(p.actions) == 12 and p.scope.skipped is None
    report = apply(p, tmp_path / "j.duckdb")
    assert report.state == "COMPLETED" and report.whole
    assert (report.counts["WRITTEN"], report.counts["COMMITTED"]) == (6, 6)
    after = lake.table()
    [output] = live_files(after)
    assert output == canonical(f"{t.metadata.location}/data/compact-{p.plan_id}-0.parquet")
    new = after.current_snapshot()
    assert new.summary.operation.value == "replace" and new.parent_snapshot_id == head.snapshot_id
    assert new.summary[COMMIT_ID_PROPERTY] == f"lakesweep-{p.plan_id}-2"
    assert new.summary["total-records"] == "53" and new.summary["total-data-files"] == "1"
    assert new.sequence_number == head.sequence_number + 1
    [entry] = [e for m in new.manifests(after.io) for e in m.fetch_manifest_entry(after.io) if e.status.value == 1]
    # Iceberg's use-starting-sequence-number: the data sequence number of the snapshot the plan compacted (no
    # older delete applies to the output, a later equality delete still does); the file's own is the new one
    assert (entry.sequence_number, entry.file_sequence_number) == (head.sequence_number, new.sequence_number)
    rows = rows_by_snapshot(after)
    assert rows[new.snapshot_id] == before[head.snapshot_id]
    assert {k: v for k, v in rows.items() if k != new.snapshot_id} == before
    assert missing(after) == set()


def test_only_the_partition_with_enough_small_files_is_compacted(lake, tmp_path):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    for i in range(5):
        append(t, [10 * i, 10 * i + 1], "us")
    for i in range(2):
        append(t, [100 + i], "eu")
    t = lake.table()
    eu = [p for p in live_files(t) if "/region=eu/" in p]
    before = rows_by_snapshot(t)
    p = plan(lake.view())
    assert apply(p, tmp_path / "j.duckdb").state == "COMPLETED"
    after = lake.table()
    files = live_files(after)
    assert len(files) == 3 and [p for p in files if "/region=eu/" in p] == eu
    assert compacted(files) == [canonical(f"{t.metadata.location}/data/region=us/compact-{p.plan_id}-0.parquet")]
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == before[t.current_snapshot().snapshot_id]


def test_twenty_files_become_two_outputs_of_eight_and_four_files_left_alone(lake, tmp_path):
    t = twenty_files(lake)
    before = rows_by_snapshot(t)
    p = plan(lake.view())
    assert [len(b["inputs"]) for b in p.scope.bins] == [8, 8]
    assert p.options["target_file_size_bytes"].source == "table-property"
    apply(p, tmp_path / "j.duckdb")
    after = lake.table()
    files = live_files(after)
    assert len(files) == 6 and len(compacted(files)) == 2
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == before[t.current_snapshot().snapshot_id]
    assert missing(after) == set()


# ---- deletes ------------------------------------------------------------------------------------------


def test_position_deletes_are_applied_and_the_consumed_delete_manifest_is_left_out(tmp_path, monkeypatch):
    b, view = built(tmp_path, iceberg_tables.position_deletes, "pd", monkeypatch)
    t = b.table
    before = rows_by_snapshot(t)
    head = t.current_snapshot()
    p = plan(view, min_input_files=2)
    dropped = [m["path"] for m in p.scope.delete_manifests if m["dropped"]]
    carried = [m["path"] for m in p.scope.delete_manifests if not m["dropped"]]
    assert len(dropped) == 1 and len(carried) == 1
    assert apply(p, tmp_path / "j.duckdb").state == "COMPLETED"
    after = b.table.refresh()
    new = after.current_snapshot()
    manifests = [canonical(m.manifest_path) for m in new.manifests(after.io) if m.content == 1]
    assert manifests == carried
    rows = rows_by_snapshot(after)
    assert new.parent_snapshot_id == head.snapshot_id
    assert rows[new.snapshot_id] == before[head.snapshot_id] == b.expected[head.snapshot_id]
    assert {k: v for k, v in rows.items() if k != new.snapshot_id} == before
    assert iceberg_files.rows_from_files(after, new.snapshot_id) == rows[new.snapshot_id]
    assert new.summary["total-position-deletes"] == str(int(head.summary["total-position-deletes"]) - 2)  # the dropped delete file's two rows


def test_equality_deletes_are_applied_and_the_rows_stay_those_the_spec_reads(tmp_path, monkeypatch):
    b, view = built(tmp_path, iceberg_tables.equality_deletes, "eq", monkeypatch)
    t = b.table
    before = {s.snapshot_id: iceberg_files.rows_from_files(t, s.snapshot_id) for s in t.metadata.snapshots}
    p = plan(view, min_input_files=2)
    assert apply(p, tmp_path / "j.duckdb").state == "COMPLETED"
    after = b.table.refresh()
    new = after.current_snapshot()
    assert [m for m in new.manifests(after.io) if m.content == 1] == []  # every equality delete consumed
    assert iceberg_files.rows_from_files(after, new.snapshot_id) == before[new.parent_snapshot_id]
    assert {s.snapshot_id: iceberg_files.rows_from_files(after, s.snapshot_id) for s in after.metadata.snapshots
            if s.snapshot_id != new.snapshot_id} == before
    data = after.scan(snapshot_id=new.snapshot_id).to_arrow()  # no equality delete left: pyiceberg scans it
    assert collections.Counter(zip(*(data.column(c).to_pylist() for c in data.column_names))) == \
        before[new.parent_snapshot_id]


def test_a_bin_whose_every_row_is_deleted_replaces_its_inputs_by_nothing(lake, tmp_path):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(5):
        append(t, [i, 100 + i])
    t = lake.table()
    data = [e.data_file for m in t.current_snapshot().manifests(t.io) for e in m.fetch_manifest_entry(t.io)]
    iceberg_files.commit_delete_files(t, [iceberg_files.write_position_delete_file(t, f, [0, 1]) for f in data])
    t = lake.table()
    before = rows_by_snapshot(t)
    p = plan(lake.view())
    assert [len(b["inputs"]) for b in p.scope.bins] == [5]
    assert [m["dropped"] for m in p.scope.delete_manifests] == [True]
    assert apply(p, tmp_path / "j.duckdb").state == "COMPLETED"
    after = lake.table()
    new = after.current_snapshot()
    assert live_files(after) == []
    assert [m for m in new.manifests(after.io) if m.content == 1] == []
    assert not any(compacted(files_on_disk(after)))
    assert rows_by_snapshot(after)[new.snapshot_id] == before[new.parent_snapshot_id] == collections.Counter()
    assert {k: v for k, v in rows_by_snapshot(after).items() if k != new.snapshot_id} == before
    assert (new.summary["total-records"], new.summary["total-data-files"], new.summary["total-delete-files"]) == \
        ("0", "0", "0")


def test_with_apply_deletes_off_a_table_with_deletes_is_skipped_with_the_seeds_message(tmp_path, monkeypatch):
    b, view = built(tmp_path, iceberg_tables.position_deletes, "pd", monkeypatch)
    p = plan(view, min_input_files=2, apply_deletes=False)
    assert p.scope.skipped == DELETES_NOT_APPLIED and p.actions == () and p.scope.bins == []
    n = len(b.table.metadata.snapshots)
    assert apply(p, tmp_path / "j.duckdb").state == "COMPLETED"
    assert len(b.table.refresh().metadata.snapshots) == n


# ---- refusals, dry run --------------------------------------------------------------------------------


def test_with_strict_an_append_between_plan_and_apply_refuses_the_plan_and_writes_nothing(lake, tmp_path):
    t = six_files(lake)
    p = plan(lake.view())
    append(t, [999])
    on_disk = files_on_disk(lake.table())
    with pytest.raises(StalePlan, match="ref 'main' now points at"):
        apply(p, tmp_path / "j.duckdb", strict=True)
    assert files_on_disk(lake.table()) == on_disk and len(live_files(lake.table())) == 7


def test_a_dry_run_writes_nothing(lake, tmp_path):
    t = six_files(lake)
    on_disk = files_on_disk(t)
    p = plan(lake.view())
    report = dry_run_plan(p, executor=DriverExecutor())
    assert report.state == "DRY_RUN" and (report.counts["WRITTEN"], report.counts["COMMITTED"]) == (6, 6)
    after = lake.table()
    assert files_on_disk(after) == on_disk and len(after.metadata.snapshots) == len(t.metadata.snapshots)


# ---- crashes and resume -------------------------------------------------------------------------------


class CrashBeforeCommit(IcebergCommitter):
    def commit(self, table, actions, commit_id, *, written=None):
        raise Crash("killed after the outputs were written, before the commit")


class CrashAfterCommit(IcebergCommitter):
    def commit(self, table, actions, commit_id, *, written=None):
        super().commit(table, actions, commit_id, written=written)
        raise Crash("killed after the commit, before the journal heard of it")


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def outputs_journaled(journal, plan_id):
    with DuckDBRecorder(journal) as rec:
        return [e for e in rec.events(plan_id=plan_id) if isinstance(e, OutputWritten)]


@pytest.mark.parametrize("lose_output", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["output-reused", "output-rewritten"])
def test_a_crash_before_the_commit_resumes_to_one_commit_and_no_duplicate_rows(lake, tmp_path, lose_output):
    t = twenty_files(lake)
    before = rows_by_snapshot(t)
    n = len(t.metadata.snapshots)
    p = plan(lake.view())
    journal = tmp_path / "j.duckdb"
    with pytest.raises(Crash):
        apply(p, journal, committer=CrashBeforeCommit(p))
    written = outputs_journaled(journal, p.plan_id)
    assert sorted(e.group for e in written) == [0, 1] and len(lake.table().metadata.snapshots) == n
    paths = [canonical(e.path) for e in written]
    content = {path: read(path) for path in paths}
    if lose_output:
        os.remove(paths[1])
    with DuckDBRecorder(journal) as rec:
        [report] = resume(rec, executor=DriverExecutor())
    assert (report.state, report.resumed, report.whole) == ("COMPLETED", True, True), report.reason
    after = lake.table()
    assert len(after.metadata.snapshots) == n + 1
    assert sorted(compacted(live_files(after))) == sorted(paths)
    assert {path: read(path) for path in paths} == content  # the same bytes, under the same names
    assert len(outputs_journaled(journal, p.plan_id)) == (3 if lose_output else 2)
    rows = rows_by_snapshot(after)
    assert rows[after.current_snapshot().snapshot_id] == before[t.current_snapshot().snapshot_id]
    assert missing(after) == set()


def test_a_crash_after_the_commit_is_found_on_resume_and_not_committed_again(lake, tmp_path):
    t = six_files(lake)
    n = len(t.metadata.snapshots)
    p = plan(lake.view())
    journal = tmp_path / "j.duckdb"
    with pytest.raises(Crash):
        apply(p, journal, committer=CrashAfterCommit(p))
    assert len(lake.table().metadata.snapshots) == n + 1
    with DuckDBRecorder(journal) as rec:
        [report] = resume(rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.counts["ALREADY_COMMITTED"] == 6 and report.counts["COMMITTED"] == 0
    assert report.commits[0]["already"] is True
    after = lake.table()
    assert len(after.metadata.snapshots) == n + 1 and len(live_files(after)) == 1
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == \
        rows_by_snapshot(t)[t.current_snapshot().snapshot_id]


def test_a_bin_whose_input_changed_is_left_out_and_its_output_is_an_orphan(lake, tmp_path):
    """Past the plan's own requirements (a moved main refuses a real plan first), the commit still reads the
    inputs again: a bin with an input no longer live is left out, the others committed."""
    t = twenty_files(lake)
    p = plan(lake.view())
    journal = tmp_path / "j.duckdb"
    with pytest.raises(Crash):
        apply(p, journal, committer=CrashBeforeCommit(p))
    written = {e.group: {"location": e.path, "written": e.written, "record_count": e.record_count,
                         "bytes": e.bytes, "statistics": dict(e.statistics)} for e in outputs_journaled(journal, p.plan_id)}
    gone = p.scope.bins[1]["inputs"][0]["path"]
    t.delete(f"id = {pq_id(gone)}")  # copy-on-write: the file is no longer live
    t = lake.table()
    before = rows_by_snapshot(t)[t.current_snapshot().snapshot_id]
    loose = dataclasses.replace(p, requirements=(),
                                scope=dataclasses.replace(p.scope, refs={"main": t.current_snapshot().snapshot_id}))
    committer = IcebergCommitter(loose)
    replace = [a for a in p.actions if str(a.kind) == "compact-replace"]
    committer.commit(lake.view(), replace, "lakesweep-x-2", written=written)
    assert sorted({p.actions[i].bucket for i in committer.left_out}) == [1]
    assert all("no longer a live data file" in why for why in committer.left_out.values())
    after = lake.table()
    files = live_files(after)
    assert compacted(files) == [canonical(written[0]["location"])] and len(files) == 1 + 4 + 7
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == before


def pq_id(path):
    import pyarrow.parquet as pq

    [value] = pq.read_table(path).column("id").to_pylist()
    return value


# ---- the CLI ------------------------------------------------------------------------------------------


def test_plan_compact_on_the_command_line_with_json_output(lake, tmp_path):
    from lakesweep.cli.main import app

    six_files(lake)
    out = str(tmp_path / "p.parquet")
    r = CliRunner().invoke(app, ["plan", "compact", "ns.t", "--catalog", CATALOG, "--out", out,
                                 "--target-file-size-mb", "64", "--min-input-files", "6", "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["plan_kind"] == "compact" and doc["skipped"] is None and doc["nothing_to_do"] is False
    assert [(b["index"], b["inputs"], b["records"]) for b in doc["bins"]] == [(0, 6, 53)]
    r = CliRunner().invoke(app, ["show", out])
    assert r.exit_code == 0 and "merges 6 of the 6 data files of snapshot" in " ".join(r.output.split()), r.output
    r = CliRunner().invoke(app, ["plan", "compact", "ns.t", "--catalog", CATALOG, "--out", out,
                                 "--min-input-files", "7", "--no-apply-deletes", "-o", "json"])
    assert r.exit_code == 0 and json.loads(r.output)["skipped"] == "no files eligible for compaction"
    r = CliRunner().invoke(app, ["plan", "compact", "ns.t", "--catalog", CATALOG, "--out", out,
                                 "--min-input-files", "1"])
    assert r.exit_code == 1 and "--min-input-files must be at least 2" in r.output


# ---- on Spark -----------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.slow
def test_a_compaction_killed_mid_merge_on_spark_resumes_reusing_the_output_it_wrote(lake, tmp_path):
    """The real CLI on local Spark, one task per bin, kill -9 right after the first bin's output and inputs
    are journaled; resume merges only the second bin and commits once."""
    from tests.iceberg.test_resume import killed_apply

    t = twenty_files(lake)
    before = rows_by_snapshot(t)
    n = len(t.metadata.snapshots)
    p = plan(lake.view())
    journal = killed_apply(p, tmp_path, "after-journal:8")
    [first] = outputs_journaled(journal, p.plan_id)
    assert first.group == 0 and first.record_count == 8 and os.path.getsize(canonical(first.path)) == first.bytes
    assert len(lake.table().metadata.snapshots) == n
    with DuckDBRecorder(journal) as rec:
        [report] = resume(rec, executor=DriverExecutor())
    assert (report.state, report.whole) == ("COMPLETED", True) and report.counts["COMMITTED"] == 16
    assert [(e.group, e.path) for e in outputs_journaled(journal, p.plan_id)] == [
        (0, first.path), (1, first.path.replace("-0.parquet", "-1.parquet"))]
    after = lake.table()
    assert len(after.metadata.snapshots) == n + 1 and len(compacted(live_files(after))) == 2
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == before[t.current_snapshot().snapshot_id]
