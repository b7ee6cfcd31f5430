"""Restore on a pypaimon table whose orphans a quarantine apply put aside (journaled through the contract:
``FileIO.quarantine`` and QUARANTINED records): what comes back, what is refused, what "done" means after."""

from __future__ import annotations

import os

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, resume
from lakesweep.applier.restore import NothingToRestore, commit_note, restore_plan
from lakesweep.engine.fileio import fileio_for
from lakesweep.engine.quarantine import QUARANTINE_DIR, QuarantineSpec
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import ApplyCompleted, ApplyStarted, FileOutcome, FileRecord
from lakesweep.journal.queries import in_quarantine, plan_done_actions, plan_state
from tests.applier.test_orphans_apply import JUNK, lake  # noqa: F401  (fixture)
from tests.planner.test_orphans import plan as plan_orphans_of
from tests.support.table_builder import all_files

JOURNALED_QUARANTINE_START = 1_000


def quarantine_apply(plan, recorder, root: str, *, only=None) -> dict[str, str]:
    """What ``apply --quarantine`` journals, through the contract's APIs: every delete moved aside and
    journaled QUARANTINED with where it went. Returns where each action path went."""
    spec = QuarantineSpec(plan.plan_id)
    io = fileio_for(root)
    recorder.record_plan(plan, recorded_ms=JOURNALED_QUARANTINE_START)
    aid = "q" + plan.plan_id[:15]
    recorder.append([ApplyStarted(apply_id=aid, plan_id=plan.plan_id, n_actions=len(plan.actions), bytes=0,
                                  master="driver", dry_run=False, started_ms=JOURNALED_QUARANTINE_START,
                                  mode="quarantine", quarantine=spec.to_json())])
    went, records = {}, []
    for a in plan.actions:
        if only is not None and a.path not in only:
            continue
        full = root + "/" + a.path
        _, where = io.quarantine(full, spec.location(full, root))
        went[a.path] = where
        records.append(FileRecord(apply_id=aid, plan_id=plan.plan_id, action_id=a.action_id, path=a.path,
                                  kind=a.kind, phase=a.phase, bytes=a.size, outcome=FileOutcome.QUARANTINED,
                                  error=None, attempt=1, time_ms=JOURNALED_QUARANTINE_START + 1, moved_to=where))
    recorder.record_files(records)
    recorder.append([ApplyCompleted(apply_id=aid, plan_id=plan.plan_id, counts={"QUARANTINED": len(records)},
                                    bytes_reclaimed=0, duration_ms=1, finished_ms=JOURNALED_QUARANTINE_START + 2)])
    return went


@pytest.fixture
def quarantined(lake, tmp_path):  # noqa: F811
    plan = plan_orphans_of(lake.root)
    assert sorted(a.path for a in plan.actions) == sorted(JUNK)
    before = all_files(lake.root)
    recorder = DuckDBRecorder(str(tmp_path / "j.duckdb"))
    went = quarantine_apply(plan, recorder, lake.root)
    yield lake, plan, recorder, went, before
    recorder.close()


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def restored_records(recorder, plan_id):
    return sorted((r.path, r.outcome.value, r.moved_to) for r in recorder.file_records(plan_id=plan_id)
                  if r.outcome != FileOutcome.QUARANTINED)


def test_restore_brings_back_every_quarantined_file_and_journals_where_from(quarantined):
    lake, plan, recorder, went, before = quarantined
    assert all_files(lake.root) == (before - set(JUNK)) | {w[len(lake.root) + 1:] for w in went.values()}
    report = restore_plan(plan, recorder, executor=DriverExecutor())
    assert (report.state, report.restored, report.refused, report.failed, report.left) == ("COMPLETED", 4, [], [], 0)
    assert report.restored_bytes == sum(a.size or 0 for a in plan.actions)
    assert all_files(lake.root) == before
    for rel in JUNK:
        assert read(os.path.join(lake.root, rel)) == "junk"
    assert restored_records(recorder, plan.plan_id) == sorted((p, "RESTORED", w) for p, w in went.items())
    modes = [ev.mode for ev in recorder.events(plan_id=plan.plan_id) if isinstance(ev, ApplyStarted)]
    assert modes == ["quarantine", "restore"]
    assert in_quarantine(recorder, plan.plan_id) == {}
    assert report.commit_note is None  # an orphans plan commits nothing


def test_restore_twice_says_nothing_is_in_quarantine(quarantined):
    lake, plan, recorder, _, before = quarantined
    restore_plan(plan, recorder, executor=DriverExecutor())
    with pytest.raises(NothingToRestore) as e:
        restore_plan(plan, recorder, executor=DriverExecutor())
    assert str(e.value) == (f"plan {plan.plan_id} has no file in quarantine in this journal (it was not applied with "
                            "--quarantine, or its files were restored or purged already); nothing was done")
    assert all_files(lake.root) == before


def test_plan_applied_without_quarantine_has_nothing_to_restore(lake, tmp_path):  # noqa: F811
    plan = plan_orphans_of(lake.root)
    with DuckDBRecorder(str(tmp_path / "j.duckdb")) as recorder:
        apply_plan(plan, recorder, executor=DriverExecutor())
        with pytest.raises(NothingToRestore, match=f"^plan {plan.plan_id} has no file in quarantine in this"):
            restore_plan(plan, recorder, executor=DriverExecutor())


def test_files_glob_restores_only_matching_paths(quarantined):
    lake, plan, recorder, went, before = quarantined
    report = restore_plan(plan, recorder, files="dt=a/*", executor=DriverExecutor())
    data = sorted(p for p in JUNK if p.startswith("dt=a/"))
    assert (report.state, report.restored, report.left) == ("COMPLETED", 2, 2)
    assert sorted(p for p, o, _ in restored_records(recorder, plan.plan_id) if o == "RESTORED") == data
    assert sorted(r.path for r in in_quarantine(recorder, plan.plan_id).values()) == sorted(set(JUNK) - set(data))
    with pytest.raises(NothingToRestore, match=r"whose path matches 'dt=a/\*'"):
        restore_plan(plan, recorder, files="dt=a/*", executor=DriverExecutor())
    assert restore_plan(plan, recorder, executor=DriverExecutor()).restored == 2
    assert all_files(lake.root) == before


def test_a_file_recreated_at_its_path_is_refused_and_kept_the_others_restored(quarantined):
    lake, plan, recorder, went, before = quarantined
    again = "manifest/manifest-dead-0"
    with open(os.path.join(lake.root, again), "w") as f:
        f.write("a writer's new file")
    report = restore_plan(plan, recorder, executor=DriverExecutor())
    full = f"{lake.root}/{again}"
    assert report.state == "FAILED"
    assert report.refused == [{"path": again, "where": went[again]}]
    assert (report.restored, report.failed, report.left) == (3, [], 1)
    assert report.reason == (f"1 file(s) refused because a file exists again at the original path ({again}); their "
                             f"quarantined copies stay where they are. Run 'lakesweep restore {plan.plan_id}' again "
                             "once that is resolved")
    failed = [r for r in recorder.file_records(plan_id=plan.plan_id) if r.outcome == FileOutcome.FAILED]
    assert [(r.path, r.error) for r in failed] == [
        (again, f"refused: {full} exists again; the quarantined copy stays at {went[again]}")]
    assert read(full) == "a writer's new file"
    assert read(went[again]) == "junk"
    # Still in quarantine, still done for a re-apply (the refusal changed nothing).
    assert [r.path for r in in_quarantine(recorder, plan.plan_id).values()] == [again]
    assert again_id(plan, again) in plan_done_actions(recorder, plan.plan_id)
    os.remove(full)  # resolved: the restore that follows brings the file back
    second = restore_plan(plan, recorder, executor=DriverExecutor())
    assert (second.state, second.restored, second.left) == ("COMPLETED", 1, 0)
    assert all_files(lake.root) == before


def again_id(plan, path):
    return next(a.action_id for a in plan.actions if a.path == path)


def test_restored_actions_are_not_done_a_plain_reapply_acts_on_them_again(quarantined):
    lake, plan, recorder, went, before = quarantined
    assert plan_done_actions(recorder, plan.plan_id) == frozenset(range(len(plan.actions)))
    restore_plan(plan, recorder, files="dt=a/*", executor=DriverExecutor())
    data = {a.action_id for a in plan.actions if a.path.startswith("dt=a/")}
    assert plan_done_actions(recorder, plan.plan_id) == frozenset(range(len(plan.actions))) - data
    # A restore is not an apply of the plan: the plan stays APPLIED by its quarantine apply.
    assert plan_state(recorder, plan.plan_id).value == "APPLIED"
    report = apply_plan(plan, recorder, executor=DriverExecutor(), skip_done=True)
    assert (report.state, report.counts["DELETED"]) == ("COMPLETED", 2)
    still = {w[len(lake.root) + 1:] for p, w in went.items() if not p.startswith("dt=a/")}
    assert all(w.startswith(QUARANTINE_DIR + "/") for w in still)
    assert all_files(lake.root) == (before - set(JUNK)) | still
    assert plan_done_actions(recorder, plan.plan_id) == frozenset(range(len(plan.actions)))


def test_a_journal_where_the_quarantine_does_not_put_the_file_is_refused(lake, tmp_path):  # noqa: F811
    plan = plan_orphans_of(lake.root)
    with DuckDBRecorder(str(tmp_path / "j.duckdb")) as recorder:
        went = quarantine_apply(plan, recorder, lake.root, only={"snapshot/UNKNOWN-1"})
        # A second record for the same action naming another place: a damaged journal, never followed.
        aid = next(ev.apply_id for ev in recorder.events(plan_id=plan.plan_id) if isinstance(ev, ApplyStarted))
        assert went  # the real one
        elsewhere = str(tmp_path / "elsewhere")
        recorder.append([ApplyStarted(apply_id="other", plan_id=plan.plan_id, n_actions=len(plan.actions), bytes=0,
                                      master="driver", dry_run=False, started_ms=5, mode="quarantine",
                                      quarantine=QuarantineSpec(plan.plan_id).to_json())])
        a = next(a for a in plan.actions if a.path == "snapshot/UNKNOWN-1")
        recorder.record_files([FileRecord(apply_id="other", plan_id=plan.plan_id, action_id=a.action_id,
                                          path=a.path, kind=a.kind, phase=a.phase, bytes=a.size,
                                          outcome=FileOutcome.QUARANTINED, error=None, attempt=1, time_ms=6,
                                          moved_to=elsewhere)])
        recorder.append([ApplyCompleted(apply_id="other", plan_id=plan.plan_id, counts={}, bytes_reclaimed=0,
                                        duration_ms=1, finished_ms=7)])
        report = restore_plan(plan, recorder, executor=DriverExecutor())
        assert aid != "other" and report.state == "FAILED" and report.restored == 0
        expected = QuarantineSpec(plan.plan_id).location(f"{lake.root}/{a.path}", lake.root)
        assert report.failed == [{"path": a.path, "error": (
            f"refused: the journal says {lake.root}/{a.path} was put at {elsewhere}, not where apply other's "
            f"quarantine puts it ({expected})")}]
        assert os.path.exists(went["snapshot/UNKNOWN-1"]) and not os.path.exists(f"{lake.root}/{a.path}")


def test_resume_finishes_a_restore_that_stopped_before_its_end(quarantined):
    lake, plan, recorder, went, before = quarantined
    # A restore that moved and journaled one file, then died: its start and one record are in the journal.
    first = sorted(went)[0]
    restore_plan(plan, recorder, files=first, executor=DriverExecutor())
    aid = "crashed00restore"
    recorder.append([ApplyStarted(apply_id=aid, plan_id=plan.plan_id, n_actions=len(plan.actions), bytes=0,
                                  master="driver", dry_run=False, started_ms=10, mode="restore")])
    second = sorted(went)[1]
    os.rename(went[second], f"{lake.root}/{second}")  # moved back, not journaled: the kill came in between
    assert plan_state(recorder, plan.plan_id).value == "APPLIED"
    reports = resume(recorder, plan.plan_id, executor=DriverExecutor())
    assert [(r.apply_id, r.state, r.resumed, r.counts) for r in reports] == [
        (aid, "COMPLETED", True, {"RESTORED": 3, "FAILED": 0})]
    assert all_files(lake.root) == before
    assert in_quarantine(recorder, plan.plan_id) == {}
    assert sorted(p for p, o, _ in restored_records(recorder, plan.plan_id)) == sorted(JUNK)


def test_commit_note_names_the_engines_way_back_only_for_plans_that_commit(quarantined):
    _, plan, _, _, _ = quarantined
    assert commit_note(plan) is None


def test_a_partition_drop_restored_names_paimons_rollback_to_the_snapshot_it_judged(tmp_path):
    from tests.applier.test_partitions_apply import plan_drop
    from tests.applier.test_safety import Lake

    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    plan = plan_drop(lake.root)
    assert plan.scope.snapshot == 2
    note = (f"plan {plan.plan_id} (partitions) committed new table metadata; restoring its files does not undo that "
            "commit. Paimon's way back: roll the table back to a tag or to the snapshot before the commit, e.g. "
            "CALL sys.rollback_to(`table` => '<database>.<table>', snapshot_id => 2) (or tag => '<tag>'); the files "
            "it reads are back.")
    assert commit_note(plan) == note
    with DuckDBRecorder(str(tmp_path / "j.duckdb")) as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=QuarantineSpec(plan.plan_id))
        assert report.state == "COMPLETED" and lake.rows() == [1]
        with pytest.raises(NothingToRestore) as e:  # a drop commits and deletes nothing: nothing to bring back
            restore_plan(plan, recorder, executor=DriverExecutor())
        assert str(e.value).endswith(f"purged already); nothing was done. {note}")


def test_restore_files_outcomes_moved_already_moved_refused_and_lost():
    from lakesweep.applier.restore import restore_files
    from lakesweep.engine.fileio import MemoryFileIO

    io = MemoryFileIO(clock=lambda: 1)
    q = "/t/_lakesweep_quarantine/p"
    io.put(f"{q}/a", b"a")  # in quarantine: moved back
    io.put("/t/b", b"b")  # moved back by an earlier attempt, not journaled
    io.put(f"{q}/c", b"c")
    io.put("/t/c", b"new c")  # re-created at its path: refused
    items = [(0, "/t/a", f"{q}/a"), (1, "/t/b", f"{q}/b"), (2, "/t/c", f"{q}/c"), (3, "/t/d", f"{q}/d")]
    out = [(a, o, e) for a, o, e, _ in restore_files(io, items)]
    assert out == [(0, "RESTORED", None), (1, "RESTORED", None),
                   (2, "FAILED", f"refused: /t/c exists again; the quarantined copy stays at {q}/c"),
                   (3, "FAILED", f"/t/d is not there and its quarantined copy {q}/d is gone")]
    assert {p: d for p, (d, _) in io.files.items()} == {"/t/a": b"a", "/t/b": b"b", "/t/c": b"new c", f"{q}/c": b"c"}
