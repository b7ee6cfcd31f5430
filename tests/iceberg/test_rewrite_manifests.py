"""Iceberg manifest rewriting on tables pyiceberg wrote: one data manifest per partition spec, the same rows in
every snapshot, SeaweedFS's skip messages, refusal of a stale plan and no second commit after a crash."""

from __future__ import annotations

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import StalePlan
from lakesweep.engine.iceberg.commit import IcebergCommitter
from lakesweep.engine.iceberg.requirements import COMMIT_ID_PROPERTY
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.rewrite_manifests import plan_rewrite_manifests, resolve_rewrite_options
from tests.iceberg.conftest import (SCHEMA, SPEC, batch, missing, raced_committer, rows_by_snapshot, unlisted_manifests,
                                    write_history)


def plan(view, **flags):
    return plan_rewrite_manifests(view, now_ms=0, options=resolve_rewrite_options(view.options, **flags))


def apply(p, tmp_path, **kw):
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        return apply_plan(p, rec, executor=DriverExecutor(), **kw)


def data_manifests(table):
    return [m for m in table.current_snapshot().manifests(table.io) if m.content == 0]


def test_twelve_small_manifests_become_one_and_every_snapshot_reads_the_same_rows(lake, tmp_path):
    t = write_history(lake, appends=12, churn=False)
    before = rows_by_snapshot(t)
    assert len(data_manifests(t)) == 12
    p = plan(lake.view())
    assert len(p.actions) == 12 and p.scope.entries == 36 and p.scope.specs == {"0": 36}
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole and report.counts["COMMITTED"] == 12
    after = lake.table()
    [merged] = data_manifests(after)
    assert merged.existing_files_count == 36 and merged.added_files_count == 0
    head = after.current_snapshot()
    assert head.summary.operation.value == "replace" and head.parent_snapshot_id == t.current_snapshot().snapshot_id
    assert head.summary["manifests-replaced"] == "12" and head.summary["manifests-created"] == "1"
    assert head.summary[COMMIT_ID_PROPERTY] == f"lakesweep-{p.plan_id}-1"
    assert head.summary["total-records"] == t.current_snapshot().summary["total-records"]
    rows = rows_by_snapshot(after)
    assert rows[head.snapshot_id] == before[t.current_snapshot().snapshot_id]
    assert {k: v for k, v in rows.items() if k != head.snapshot_id} == before
    assert missing(after) == set()


def test_below_the_threshold_the_plan_is_skipped_with_the_seeds_message(lake, tmp_path):
    write_history(lake, appends=3, churn=False)
    p = plan(lake.view())
    assert p.actions == () and p.scope.skipped == "only 3 data manifests, below threshold of 5"
    n = len(lake.table().metadata.snapshots)
    assert apply(p, tmp_path).state == "COMPLETED" and len(lake.table().metadata.snapshots) == n


def test_a_table_without_snapshots_is_skipped(lake):
    lake.catalog.create_table("ns.empty", schema=SCHEMA, partition_spec=SPEC)
    assert plan(lake.view("ns.empty")).scope.skipped == "no current snapshot"


def test_a_table_whose_rows_were_all_deleted_has_no_entries_to_rewrite(lake):
    t = write_history(lake, appends=5, churn=False)
    t.delete("id >= 0")
    p = plan(lake.view(), min_manifests=1)
    assert p.scope.skipped == "no data entries to rewrite" and p.actions == ()


def test_each_partition_spec_gets_its_own_manifest(lake, tmp_path):
    from pyiceberg.transforms import IdentityTransform

    t = write_history(lake, appends=4, churn=False)
    with t.update_spec() as update:
        update.add_field("id", IdentityTransform(), "id_part")
    t = lake.table()
    for i in range(3):
        t.append(batch(300 + i * 10))
    before = rows_by_snapshot(lake.table())
    p = plan(lake.view())
    assert p.scope.specs == {"0": 12, "1": 18}
    apply(p, tmp_path)
    after = lake.table()
    assert sorted(m.partition_spec_id for m in data_manifests(after)) == [0, 1]
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == before[p.scope.snapshot_id]


def test_an_append_between_plan_and_apply_refuses_the_plan_with_strict(lake, tmp_path):
    t = write_history(lake, appends=6, churn=False)
    p = plan(lake.view())
    t.append(batch(900))
    with pytest.raises(StalePlan, match="ref 'main' now points at"):
        apply(p, tmp_path, strict=True)
    assert len(data_manifests(lake.table())) == 7


def test_an_append_between_plan_and_apply_is_carried_over_beside_the_rewritten_manifests(lake, tmp_path):
    t = write_history(lake, appends=6, churn=False)
    p = plan(lake.view())
    t.append(batch(900))
    newest = lake.table().current_snapshot()
    added = [m.manifest_path for m in newest.manifests(t.io) if m.added_snapshot_id == newest.snapshot_id]
    before = rows_by_snapshot(lake.table())
    report = apply(p, tmp_path)
    after = lake.table()
    assert report.state == "COMPLETED" and report.counts["COMMITTED"] == len(p.actions) == 6
    assert after.current_snapshot().parent_snapshot_id == newest.snapshot_id
    paths = sorted(m.manifest_path for m in data_manifests(after))
    assert len(paths) == 2 and added[0] in paths  # the six planned ones rewritten into one, the new one carried
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == before[newest.snapshot_id]
    assert missing(after) == set()


def test_a_planned_manifest_replaced_since_planning_leaves_the_rewrite_and_the_rest_goes_on(lake, tmp_path):
    t = write_history(lake, appends=6, churn=False)
    p = plan(lake.view())
    # another rewrite of its own since planning: every planned manifest is gone from the head
    apply(plan(lake.view(), min_manifests=2), tmp_path / "other")
    t = lake.table()
    t.append(batch(900))
    t.append(batch(950))
    head = lake.table().current_snapshot()
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
        rows = rec.file_records(plan_id=p.plan_id)
    assert report.nothing_safe and report.counts["DROPPED"] == 6 and not report.commits
    assert lake.table().current_snapshot().snapshot_id == head.snapshot_id  # nothing committed
    assert {r.error for r in rows} == {f"manifest {a.path} is no longer in the current snapshot" for a in p.actions}


def test_a_rewrite_commits_on_top_of_appends_with_every_entry_as_it_was(lake, tmp_path):
    t = write_history(lake, appends=6, churn=False)
    p = plan(lake.view())
    view = lake.view()
    t.append(batch(900))  # after apply read the table: the commit itself finds the new head
    head = lake.table().current_snapshot()
    entries = {(e.data_file.file_path, e.snapshot_id, e.sequence_number, e.file_sequence_number)
               for m in head.manifests(t.io) for e in m.fetch_manifest_entry(t.io, discard_deleted=True)}
    committer = IcebergCommitter(p, sleep=lambda s: None)
    sid = committer.commit(view, list(p.actions), "x")
    after = lake.table()
    new = after.snapshot_by_id(sid)
    assert new.parent_snapshot_id == head.snapshot_id and committer.attempts == 1 and not committer.left_out
    assert {(e.data_file.file_path, e.snapshot_id, e.sequence_number, e.file_sequence_number)
            for m in new.manifests(t.io) for e in m.fetch_manifest_entry(t.io, discard_deleted=True)} == entries


def test_a_crash_after_the_commit_is_found_on_resume_and_not_committed_again(lake, tmp_path):
    write_history(lake, appends=6, churn=False)
    p = plan(lake.view())
    IcebergCommitter(p).commit(lake.view(), list(p.actions), f"lakesweep-{p.plan_id}-1")  # the crashed apply's commit
    n = len(lake.table().metadata.snapshots)
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.counts["ALREADY_COMMITTED"] == 6 and report.counts["COMMITTED"] == 0
    assert len(lake.table().metadata.snapshots) == n and len(data_manifests(lake.table())) == 1


def test_a_commit_the_catalog_refuses_leaves_no_written_manifest_behind(lake, monkeypatch):
    import os

    from pyiceberg.exceptions import CommitFailedException

    from lakesweep.engine.errors import LakesweepError
    from tests.iceberg.conftest import files_on_disk

    write_history(lake, appends=6, churn=False)
    p = plan(lake.view(), max_commit_retries=1)
    view = lake.view()
    before = files_on_disk(lake.table())

    def lose(catalog, *args, **kwargs):
        raise CommitFailedException("Table has been updated by another process")

    monkeypatch.setattr(type(view.catalog), "commit_table", lose)
    with pytest.raises(LakesweepError, match="refused the commit 2 times"):
        IcebergCommitter(p, sleep=lambda s: None).commit(view, list(p.actions), "c")
    monkeypatch.undo()
    assert files_on_disk(lake.table()) == before and all(os.path.exists(f) for f in before)


def test_on_the_command_line_a_plan_the_live_table_left_nothing_of_exits_1_and_says_why(lake, tmp_path):
    from typer.testing import CliRunner

    from lakesweep.cli.main import app
    from lakesweep.engine.plan_io import write_plan

    write_history(lake, appends=6, churn=False)
    p = plan(lake.view())
    plan_file = str(tmp_path / "p.parquet")
    write_plan(p, plan_file)
    apply(plan(lake.view(), min_manifests=2), tmp_path / "other")  # another rewrite replaced every manifest
    r = CliRunner().invoke(app, ["apply", plan_file, "--journal", str(tmp_path / "j.duckdb"), "--master", "local[1]"],
                           env={"COLUMNS": "80"})
    assert r.exit_code == 1, r.output
    assert ("nothing was done: the live table has made every action of the plan unsafe. First: rewrite-manifest "
            in " ".join(r.output.split()))
    assert "is no longer in the current snapshot" in " ".join(r.output.split())
    assert f"lakesweep journal files --plan {p.plan_id}" in " ".join(r.output.split())



def raced(p, race, races, monkeypatch):
    from lakesweep.engine.iceberg.rewrite import RewriteManifests

    return raced_committer(p, race, races=races, producer=RewriteManifests, monkeypatch=monkeypatch)


def test_an_attempt_after_appends_won_the_race_writes_only_its_manifest_list(lake, tmp_path, monkeypatch):
    t = write_history(lake, appends=6, churn=False)
    before = rows_by_snapshot(t)[t.current_snapshot().snapshot_id]
    p = plan(lake.view())
    committer = raced(p, lambda n: lake.table().append(batch(900 + 10 * n, 3)), 2, monkeypatch)
    report = apply(p, tmp_path, committer=committer)
    after = lake.table()
    assert report.state == "COMPLETED" and committer.attempts == 3 and report.counts["COMMITTED"] == 6
    # the first attempt reads the 6 manifests and writes their merge; the later ones read and write none
    assert [committer.reads[n] for n in (1, 2, 3)] == [6, 0, 0]
    assert [committer.writes[n] for n in (1, 2, 3)] == [1, 0, 0]
    merged, *appended = data_manifests(after)
    assert merged.existing_files_count == 18 and len(appended) == 2
    assert after.current_snapshot().summary["manifests-replaced"] == "6"
    rows = rows_by_snapshot(after)[after.current_snapshot().snapshot_id]
    assert sum(rows.values()) == sum(before.values()) + 6
    assert unlisted_manifests(after) == set() and missing(after) == set()


def test_a_manifest_a_writer_rewrote_between_attempts_is_left_out_and_the_merge_made_again(lake, tmp_path,
                                                                                          monkeypatch):
    write_history(lake, appends=6, churn=False)
    p = plan(lake.view())
    left_by_writer = set()

    def delete_a_row(attempt):
        before = unlisted_manifests(lake.table())
        lake.table().delete("id == 0")  # copy-on-write: the first append's manifest is rewritten
        left_by_writer.update(unlisted_manifests(lake.table()) - before)

    committer = raced(p, delete_a_row, 1, monkeypatch)
    report = apply(p, tmp_path, committer=committer)
    after = lake.table()
    assert report.state == "COMPLETED" and committer.attempts == 2
    assert report.counts["COMMITTED"] == 5 and report.counts["DROPPED"] == 1
    assert [committer.writes[n] for n in (1, 2)] == [1, 1]
    assert after.current_snapshot().summary["manifests-replaced"] == "5"
    assert 0 not in {i for i, _ in rows_by_snapshot(after)[after.current_snapshot().snapshot_id]}
    assert unlisted_manifests(after) == left_by_writer and missing(after) == set()
