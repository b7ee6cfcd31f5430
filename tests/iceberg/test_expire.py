"""Iceberg snapshot expiry on tables pyiceberg wrote: Iceberg's retention rule, the commit, and the files
only expired snapshots reached deleted, with every retained snapshot reading exactly what it read before."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, dry_run_plan, resume
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.iceberg.commit import IcebergCommitter, backoff_s
from lakesweep.engine.iceberg.kinds import ExpireKind
from lakesweep.engine.iceberg.table import canonical
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.expire import plan_iceberg_expire, resolve_expire_options
from tests.iceberg.conftest import files_on_disk, missing, needed_files, rows_by_snapshot, write_history

def plan(view, *, now=None, **flags):
    """A plan as of now (``older_than='0 s'``: every snapshot written so far is older)."""
    import time

    now = int(time.time() * 1000) if now is None else now
    return plan_iceberg_expire(view, now_ms=now, options=resolve_expire_options(view.options, **flags))


def apply(p, tmp_path, **kw):
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        return apply_plan(p, rec, executor=DriverExecutor(), **kw)


def snapshot_ids(table):
    return [s.snapshot_id for s in sorted(table.metadata.snapshots, key=lambda s: (s.timestamp_ms, s.snapshot_id))]


def test_expiry_keeps_retained_rows_and_leaves_no_file_only_expired_snapshots_reached(lake, tmp_path):
    t = write_history(lake)
    before = rows_by_snapshot(t)
    ids = snapshot_ids(t)
    cutoff = t.metadata.snapshot_by_id(ids[6]).timestamp_ms
    p = plan(lake.view(), older_than=str(cutoff))
    expected = sorted(s.snapshot_id for s in t.metadata.snapshots if s.timestamp_ms < cutoff)
    assert p.scope.expired == expected and len(expected) >= 6
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole
    after = lake.table()
    assert sorted(s.snapshot_id for s in after.metadata.snapshots) == sorted(set(ids) - set(expected))
    assert rows_by_snapshot(after) == {sid: rows for sid, rows in before.items() if sid not in expected}
    assert missing(after) == set()
    # every file still on disk is one the remaining metadata needs: nothing the expired snapshots freed is left
    assert files_on_disk(after) == needed_files(after)
    assert report.counts["DELETED"] == len([a for a in p.actions if a.verb.deletes]) > 0


def test_the_same_snapshots_remain_as_after_pyicebergs_own_expiry_on_a_linear_history(lake, tmp_path):
    t = write_history(lake)
    cutoff = t.metadata.snapshot_by_id(snapshot_ids(t)[5]).timestamp_ms
    twin = write_history(lake, "ns.twin")  # pyiceberg's own expiry runs on this one, by timestamp
    twin_cutoff = twin.metadata.snapshot_by_id(snapshot_ids(twin)[5]).timestamp_ms
    twin_position = {sid: i for i, sid in enumerate(snapshot_ids(twin))}
    twin.maintenance.expire_snapshots().older_than(
        dt.datetime.fromtimestamp(twin_cutoff / 1000, tz=dt.timezone.utc)).commit()
    apply(plan(lake.view(), older_than=str(cutoff)), tmp_path)
    ours, theirs = lake.table(), lake.table("ns.twin")
    position = {sid: i for i, sid in enumerate(snapshot_ids(t))}
    assert sorted(position[s.snapshot_id] for s in ours.metadata.snapshots) == \
        sorted(twin_position[s.snapshot_id] for s in theirs.metadata.snapshots) == list(range(5, 12))


def test_retain_last_keeps_that_many_ancestors_whatever_their_age(lake, tmp_path):
    t = write_history(lake)
    p = plan(lake.view(), retain_last=4, older_than="0 s")
    kept = set(snapshot_ids(t)) - set(p.scope.expired)
    assert kept == set(snapshot_ids(t)[-4:])


def test_a_tagged_snapshot_and_what_it_reads_survive(lake, tmp_path):
    t = write_history(lake)
    first = snapshot_ids(t)[0]
    t.manage_snapshots().create_tag(first, "v1").commit()
    rows = rows_by_snapshot(lake.table())[first]
    p = plan(lake.view(), older_than="0 s")
    assert first not in p.scope.expired and p.scope.expired
    assert apply(p, tmp_path).whole
    after = lake.table()
    assert rows_by_snapshot(after)[first] == rows and missing(after) == set()
    assert files_on_disk(after) == needed_files(after)


def test_a_branch_keeps_its_min_snapshots_to_keep_and_an_aged_tag_is_removed(lake, tmp_path):
    t = write_history(lake)
    ids = snapshot_ids(t)
    t.manage_snapshots().create_branch(ids[4], "b", min_snapshots_to_keep=3).commit()
    t = lake.table()
    t.manage_snapshots().create_tag(ids[1], "old", max_ref_age_ms=1).commit()
    p = plan(lake.view(), older_than="0 s")
    assert p.scope.removed_refs == ["old"]
    assert set(ids[2:5]).isdisjoint(p.scope.expired) and {ids[0], ids[1]} <= set(p.scope.expired)
    assert apply(p, tmp_path).whole
    after = lake.table()
    assert "old" not in after.metadata.refs and after.metadata.refs["b"].snapshot_id == ids[4]
    assert missing(after) == set() and files_on_disk(after) == needed_files(after)


def test_a_tag_created_between_plan_and_apply_refuses_the_plan_with_strict(lake, tmp_path):
    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    victim = p.scope.expired[0]
    t.manage_snapshots().create_tag(victim, "late").commit()
    on_disk = files_on_disk(lake.table())
    with pytest.raises(StalePlan, match="ref 'late' .* was created since planning"):
        apply(p, tmp_path, strict=True)
    after = lake.table()
    assert victim in {s.snapshot_id for s in after.metadata.snapshots} and files_on_disk(after) == on_disk


def test_a_tag_created_between_plan_and_apply_keeps_its_snapshot_and_files_and_expires_the_rest(lake, tmp_path):
    t = write_history(lake)
    before = rows_by_snapshot(t)
    p = plan(lake.view(), older_than="0 s")
    victim = p.scope.expired[-1]
    t.manage_snapshots().create_tag(victim, "late").commit()
    report = apply(p, tmp_path)
    after = lake.table()
    assert report.state == "COMPLETED" and report.whole and not report.nothing_safe
    # the tagged snapshot and every file it needs stay; every other planned snapshot is gone
    assert {s.snapshot_id for s in after.metadata.snapshots} == {*set(before) - set(p.scope.expired), victim}
    assert rows_by_snapshot(after) == {sid: rows for sid, rows in before.items() if sid in
                                       {s.snapshot_id for s in after.metadata.snapshots}}
    assert missing(after) == set() and files_on_disk(after) == needed_files(after)
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        rows = {r.action_id: r for r in rec.file_records(plan_id=p.plan_id)}
    commit = next(a for a in p.actions if a.kind is ExpireKind.EXPIRE_SNAPSHOT and a.snapshot_id == victim)
    assert rows[commit.action_id].outcome.value == "SKIPPED_REFERENCED"
    assert rows[commit.action_id].error == f"snapshot {victim} is kept: ref 'late' points at it"
    # the planned files left are exactly those only the tagged snapshot holds, each journaled with its holder
    only_victim = needed_files(after) - needed_files(after, without={victim})
    kept = {a.action_id for a in p.actions if a.verb.deletes and canonical_path(p, a) in needed_files(after)}
    assert kept and {canonical_path(p, p.actions[i]) for i in kept} <= only_victim
    assert {i for i, r in rows.items() if r.outcome.value == "SKIPPED_REFERENCED"} == kept | {commit.action_id}
    assert all(rows[i].error == f"snapshot {victim} (ref late) still needs it: the live table keeps that snapshot"
               for i in kept)
    assert report.counts["DELETED"] == len([a for a in p.actions if a.verb.deletes]) - len(kept) > 0


def canonical_path(p, a) -> str:
    return canonical(a.path if "://" in a.path or a.path.startswith("/") else f"{p.table_location}/{a.path}")


def test_an_append_between_plan_and_apply_refuses_the_plan_with_strict(lake, tmp_path):
    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    from tests.iceberg.conftest import batch

    n = len(t.metadata.snapshots)
    t.append(batch(900))
    with pytest.raises(StalePlan, match="ref 'main' now points at snapshot"):
        apply(p, tmp_path, strict=True)
    assert len(lake.table().metadata.snapshots) == n + 1


def test_an_append_between_plan_and_apply_is_no_reason_to_refuse(lake, tmp_path):
    from tests.iceberg.conftest import batch

    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    t.append(batch(900))
    head = lake.table().current_snapshot().snapshot_id
    before = rows_by_snapshot(lake.table())
    report = apply(p, tmp_path)
    after = lake.table()
    assert report.state == "COMPLETED" and report.whole and report.commits[0]["attempts"] == 1
    assert after.current_snapshot().snapshot_id == head
    assert {s.snapshot_id for s in after.metadata.snapshots} == set(before) - set(p.scope.expired)
    assert rows_by_snapshot(after)[head] == before[head] and missing(after) == set()


def _edited(p: CleanupPlan, extra: list[Action], **scope) -> CleanupPlan:
    return CleanupPlan(kind=p.kind, format=p.format, table_location=p.table_location, table_identity=p.table_identity,
                       branch=p.branch, now_ms=p.now_ms, options=p.options, scope=dataclasses.replace(p.scope, **scope),
                       requirements=p.requirements, phases=p.phases,
                       actions=canonical_actions([*p.actions, *extra]), stats=p.stats)


def test_an_edited_plan_naming_a_live_data_file_is_refused_before_the_commit(lake, tmp_path):
    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    head = t.current_snapshot()
    live = next(e.data_file.file_path for m in head.manifests(t.io) for e in m.fetch_manifest_entry(t.io))
    rel = canonical(live)[len(p.table_location) + 1:]
    bad = _edited(p, [Action(ExpireKind.DATA_FILE, rel, snapshot_id=p.scope.expired[0])])
    with pytest.raises(StalePlan, match=f"data-file {rel} is still used by snapshot {head.snapshot_id}"):
        apply(bad, tmp_path)
    assert len(lake.table().metadata.snapshots) == len(t.metadata.snapshots) and os.path.exists(canonical(live))


def test_an_edited_plan_expiring_the_current_snapshot_is_refused(lake, tmp_path):
    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    head = t.current_snapshot()
    bad = _edited(p, [Action(ExpireKind.EXPIRE_SNAPSHOT, canonical(head.manifest_list)[len(p.table_location) + 1:],
                             snapshot_id=head.snapshot_id)],
                  expired=sorted([*p.scope.expired, head.snapshot_id]))
    with pytest.raises(PlanRejected, match=f"snapshot {head.snapshot_id}"):
        apply(bad, tmp_path)
    assert lake.table().current_snapshot().snapshot_id == head.snapshot_id


def test_an_edited_plan_removing_main_is_refused(lake, tmp_path):
    write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    with pytest.raises(PlanRejected, match="'main'"):
        apply(_edited(p, [], removed_refs=["main"]), tmp_path)
    assert "main" in lake.table().metadata.refs


def test_a_crash_after_the_commit_resumes_without_committing_twice(lake, tmp_path, monkeypatch):
    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    n_meta = len(t.metadata.metadata_log)
    view = lake.view()
    committer = IcebergCommitter(p)
    committer.commit(view, [a for a in p.actions if a.kind is ExpireKind.EXPIRE_SNAPSHOT], "x")  # as a crashed apply did
    committed = lake.table()
    assert len(committed.metadata.metadata_log) == n_meta + 1
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole
    assert report.counts["ALREADY_COMMITTED"] == len(p.scope.expired) and report.counts["COMMITTED"] == 0
    after = lake.table()
    assert len(after.metadata.metadata_log) == n_meta + 1  # no second commit
    assert files_on_disk(after) == needed_files(after)


def test_a_concurrent_commit_that_changes_no_ref_is_kept_beside_the_expiry(lake, tmp_path):
    write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    view = lake.view()  # read before the concurrent commit
    lake.table().transaction().set_properties({"owner": "someone"}).commit_transaction()
    committer = IcebergCommitter(p)
    committer.commit(view, [a for a in p.actions if a.kind is ExpireKind.EXPIRE_SNAPSHOT], "x")
    after = lake.table()
    assert after.metadata.properties["owner"] == "someone"
    assert not set(p.scope.expired) & {s.snapshot_id for s in after.metadata.snapshots}


def test_a_commit_the_catalog_refuses_is_retried_with_backoff_after_the_plan_is_checked_again(lake, monkeypatch):
    from pyiceberg.exceptions import CommitFailedException

    write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    view = lake.view()
    real = type(view.catalog).commit_table
    calls = []

    def lose_twice(catalog, *args, **kwargs):
        calls.append(1)
        if len(calls) <= 2:
            raise CommitFailedException("Table has been updated by another process")
        return real(catalog, *args, **kwargs)

    monkeypatch.setattr(type(view.catalog), "commit_table", lose_twice)
    waits = []
    committer = IcebergCommitter(p, sleep=waits.append)
    committer.commit(view, [a for a in p.actions if a.kind is ExpireKind.EXPIRE_SNAPSHOT], "x")
    assert committer.attempts == 3 and waits == [0.05, 0.1]
    assert not set(p.scope.expired) & {s.snapshot_id for s in lake.table().metadata.snapshots}


def test_retries_stop_at_max_commit_retries_and_nothing_is_committed(lake, monkeypatch):
    from lakesweep.engine.errors import LakesweepError
    from pyiceberg.exceptions import CommitFailedException

    write_history(lake)
    p = plan(lake.view(), older_than="0 s", max_commit_retries=2)
    view = lake.view()

    def always_lose(catalog, *args, **kwargs):
        raise CommitFailedException("Table has been updated by another process")

    monkeypatch.setattr(type(view.catalog), "commit_table", always_lose)
    committer = IcebergCommitter(p, sleep=lambda s: None)
    with pytest.raises(LakesweepError, match="refused the commit 3 times"):
        committer.commit(view, [a for a in p.actions if a.kind is ExpireKind.EXPIRE_SNAPSHOT], "x")
    monkeypatch.undo()
    assert set(p.scope.expired) <= {s.snapshot_id for s in lake.table().metadata.snapshots}


def test_a_tag_created_after_apply_read_the_table_is_seen_before_the_commit(lake, tmp_path):
    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    view = lake.view()
    t.manage_snapshots().create_tag(p.scope.expired[0], "late").commit()
    committer = IcebergCommitter(p, strict=True, sleep=lambda s: None)
    with pytest.raises(StalePlan, match="ref 'late'"):
        committer.commit(view, [a for a in p.actions if a.kind is ExpireKind.EXPIRE_SNAPSHOT], "x")
    after = lake.table()
    assert p.scope.expired[0] in {s.snapshot_id for s in after.metadata.snapshots} and "late" in after.metadata.refs


def test_a_tag_created_after_apply_read_the_table_keeps_its_snapshot_in_the_commit(lake, tmp_path):
    t = write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    view = lake.view()
    victim = p.scope.expired[0]
    t.manage_snapshots().create_tag(victim, "late").commit()
    committer = IcebergCommitter(p, sleep=lambda s: None)
    commits = [a for a in p.actions if a.kind is ExpireKind.EXPIRE_SNAPSHOT]
    committer.commit(view, commits, "x")
    after = lake.table()
    assert {s.snapshot_id for s in after.metadata.snapshots} & set(p.scope.expired) == {victim}
    assert after.metadata.refs["late"].snapshot_id == victim
    assert committer.kept == {a.action_id: f"snapshot {victim} is kept: ref 'late' points at it"
                              for a in commits if a.snapshot_id == victim}


def test_the_catalog_itself_refuses_a_commit_when_a_ref_appeared_after_the_last_check(lake):
    from pyiceberg.exceptions import CommitFailedException

    from lakesweep.engine.iceberg.commit import _assert_refs_exactly

    t = write_history(lake)
    refs = {n: r.snapshot_id for n, r in t.metadata.refs.items()}
    t.manage_snapshots().create_tag(t.metadata.snapshots[0].snapshot_id, "late").commit()
    with pytest.raises(CommitFailedException, match="refs are"):
        _assert_refs_exactly(refs).validate(lake.table().metadata)
    _assert_refs_exactly({**refs, "late": t.metadata.snapshots[0].snapshot_id}).validate(lake.table().metadata)


def test_backoff_doubles_from_50_ms_up_to_5_s():
    assert [backoff_s(n) for n in range(1, 10)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_gc_disabled_tables_are_refused(lake):
    write_history(lake, properties={"gc.enabled": "false"})
    with pytest.raises(PlanRejected, match="gc.enabled=false"):
        plan(lake.view(), older_than="0 s")


def test_a_dry_run_changes_nothing_and_a_second_apply_changes_nothing(lake, tmp_path):
    write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    before = files_on_disk(lake.table())
    dry = dry_run_plan(p, executor=DriverExecutor())
    assert dry.state == "DRY_RUN" and files_on_disk(lake.table()) == before
    assert apply(p, tmp_path).state == "COMPLETED"
    after = files_on_disk(lake.table())
    again = apply(p, tmp_path)
    assert again.state == "COMPLETED" and files_on_disk(lake.table()) == after


def test_resume_finishes_a_plan_whose_deletes_failed(lake, tmp_path):
    from tests.support.faulty_fileio import FaultyFileIO

    write_history(lake)
    p = plan(lake.view(), older_than="0 s")
    assert any(a.kind is ExpireKind.MANIFEST for a in p.actions)
    state = tmp_path / "faults"
    state.mkdir()
    failing = FaultyFileIO(str(state), "*/metadata/*-m0.avro", "denied")
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        first = apply_plan(p, rec, executor=DriverExecutor(), fileio=failing)
        assert first.state == "FAILED" and first.failed_phase == "manifests"
        failing.heal()
        [second] = resume(rec, executor=DriverExecutor(), fileio=failing)
    assert second.state == "COMPLETED" and second.whole
    after = lake.table()
    assert files_on_disk(after) == needed_files(after)


def test_a_commit_that_keeps_failing_stops_the_apply_before_any_file_is_deleted(lake, tmp_path, monkeypatch):
    from pyiceberg.exceptions import CommitFailedException

    write_history(lake)
    p = plan(lake.view(), older_than="0 s", max_commit_retries=1)
    before = files_on_disk(lake.table())
    monkeypatch.setattr("lakesweep.engine.iceberg.commit.time.sleep", lambda s: None)

    def always_lose(catalog, *args, **kwargs):
        raise CommitFailedException("Table has been updated by another process")

    monkeypatch.setattr("pyiceberg.catalog.sql.SqlCatalog.commit_table", always_lose)
    report = apply(p, tmp_path)
    assert report.state == "FAILED" and report.failed_phase == "expire_snapshots"
    assert "refused the commit 2 times" in report.reason
    monkeypatch.undo()
    assert files_on_disk(lake.table()) == before and len(lake.table().metadata.snapshots) == 12


def test_planning_tells_its_observer_every_manifest_list_and_manifest_it_reads_once(lake):
    from lakesweep.engine.iceberg.table import IcebergTable
    from tests.iceberg.conftest import CATALOG

    class Seen:
        def __init__(self):
            self.reads, self.names = [], set()

        def read(self, path, what, nbytes):
            self.reads.append((what, path))

        def named(self, names):
            self.names.update(names)

    t = write_history(lake)
    seen = Seen()
    plan(IcebergTable(CATALOG, "ns.t", on_read=seen), older_than="0 s")
    lists = [p for w, p in seen.reads if w == "manifest list"]
    manifests = [p for w, p in seen.reads if w == "manifest"]
    assert len(lists) == len(set(lists)) == len(t.metadata.snapshots)
    # every manifest named is read, but those only expired snapshots list whose list counts only DELETED entries
    kept = {m.manifest_path for m in t.current_snapshot().manifests(t.io)}
    unread = {m.manifest_path.rsplit("/", 1)[-1] for s in t.metadata.snapshots for m in s.manifests(t.io)
              if m.manifest_path not in kept and not (m.has_added_files() or m.has_existing_files())}
    assert len(manifests) == len(set(manifests)) == len(seen.names) - len(unread) > 0
    assert unread and not unread & {p.rsplit("/", 1)[-1] for p in manifests}


def test_a_plan_made_as_of_a_later_time_is_refused(lake, tmp_path):
    import time

    write_history(lake)
    p = plan(lake.view(), now=int(time.time() * 1000) + 3_600_000, older_than="0 s")
    with pytest.raises(StalePlan, match="after the current time"):
        apply(p, tmp_path)
    assert len(lake.table().metadata.snapshots) == 12
