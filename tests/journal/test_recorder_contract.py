"""One contract, every recorder: the in-memory twin and the DuckDB journal run the same tests."""

from __future__ import annotations

import dataclasses
import fnmatch

import pyarrow.parquet as pq
import pytest

from lakesweep.engine.errors import JournalConflict, JournalError
from lakesweep.engine.plan import Action
from lakesweep.engine.paimon.kinds import ActionKind, Phase
from lakesweep.engine.plan_columns import ColumnActions
from lakesweep.engine.plan_io import plan_from_bytes, plan_to_bytes

from lakesweep.journal.audit import count_files, export_files, list_events, list_files, list_plans
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import (ApplyFailed, ApplyRefused, ApplyStarted, FileOutcome, MetadataWritten,
                                      PlanRecorded)
from lakesweep.journal.memory_store import MemoryRecorder
from lakesweep.journal.projection import PlanStatus, RunStatus
from lakesweep.journal.queries import incomplete_applies, plan_done_actions, plan_state, project_apply, unfinished_apply
from lakesweep.journal.recorder import StoredEvent
from lakesweep.journal.rules import FILE_COLUMNS, FileQuery
from tests.journal.builders import ACTIONS, completed, make_plan, phase_done, record, started

PLAN = make_plan()
A = PLAN.actions


def _other_content(plan, **changes) -> PlanRecorded:
    """A PlanRecorded row that claims ``plan``'s id for other content (what a tampered journal holds)."""
    other = make_plan(**changes)
    return dataclasses.replace(_recorded_event(other), plan_id=plan.plan_id)


def _recorded_event(plan) -> PlanRecorded:
    return MemoryRecorder().record_plan(plan, recorded_ms=5)


def _run_everything(recorder, plan=PLAN, apply_id="a1"):
    recorder.append([started(plan, apply_id)])
    recorder.record_files([record(plan, a, apply_id=apply_id, time_ms=100 + a.action_id) for a in plan.actions])
    recorder.append([phase_done(plan, p, apply_id) for p in sorted({int(a.phase) for a in plan.actions})])
    recorder.append([MetadataWritten(apply_id, plan.plan_id, "write-earliest-hint", "snapshot/EARLIEST", 3, 250),
                     completed(plan, apply_id)])


class RecorderContract:
    @pytest.fixture
    def recorder(self):
        raise NotImplementedError

    # -- plans -------------------------------------------------------------------------------------

    def test_recorded_plan_round_trips_its_actions_and_header(self, recorder):
        event = recorder.record_plan(PLAN, recorded_ms=5)
        assert recorder.plan_actions(PLAN.plan_id) == PLAN.actions
        assert recorder.plan_header(PLAN.plan_id) == PLAN.header()
        assert recorder.plan_ids() == [PLAN.plan_id]
        assert recorder.events() == [event]
        assert (event.table_location, event.table_identity, event.plan_kind) == ("/t", "schema:abc", "expire")
        assert (event.n_actions, event.bytes, event.now_ms, event.recorded_ms) == (10, 187, 1, 5)

    def test_recording_the_same_plan_again_changes_nothing(self, recorder):
        first = recorder.record_plan(PLAN, recorded_ms=5)
        again = recorder.record_plan(PLAN, recorded_ms=99)
        assert again == first
        assert recorder.events() == [first]
        assert recorder.plan_actions(PLAN.plan_id) == PLAN.actions

    def test_same_plan_id_with_other_header_is_a_conflict(self, recorder):
        recorder._insert_plan(StoredEvent.of(_other_content(PLAN, now_ms=2)), PLAN.actions)
        with pytest.raises(JournalConflict, match=rf"plan {PLAN.plan_id} is already in the journal with different "
                                                  r"content \(header fields \['now_ms'\] differ\); the journal or "
                                                  r"the plan file was altered: re-run 'lakesweep plan'"):
            recorder.record_plan(PLAN, recorded_ms=5)

    def test_same_plan_id_with_other_actions_is_a_conflict(self, recorder):
        tampered = (dataclasses.replace(A[0], path="dt=1/bucket-0/other.parquet"),) + A[1:]
        recorder._insert_plan(StoredEvent.of(_recorded_event(PLAN)), tampered)
        with pytest.raises(JournalConflict, match=r"action 0 differs: recorded data-file 'dt=1/bucket-0/other.parquet'"):
            recorder.record_plan(PLAN, recorded_ms=5)
        with pytest.raises(JournalError, match=rf"plan {PLAN.plan_id}: the journal's copy no longer matches its id"):
            recorder.plan_actions(PLAN.plan_id)

    def test_an_empty_plan_round_trips(self, recorder):
        empty = make_plan(())
        recorder.record_plan(empty, recorded_ms=5)
        assert recorder.plan_actions(empty.plan_id) == ()
        assert plan_state(recorder, empty.plan_id) == PlanStatus.RECORDED

    def test_unknown_plan_is_an_error_not_an_empty_plan(self, recorder):
        with pytest.raises(JournalError, match="plan nope is not in the journal"):
            recorder.plan_actions("nope")
        with pytest.raises(JournalError, match="plan nope is not in the journal"):
            plan_state(recorder, "nope")

    # -- events ------------------------------------------------------------------------------------

    def test_events_come_back_in_order_with_increasing_sequence_numbers(self, recorder):
        other = make_plan(table="/u")
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.record_plan(other, recorded_ms=6)
        s1 = recorder.append([started(PLAN), phase_done(PLAN, 1)])
        f1 = recorder.record_files([record(PLAN, A[0]), record(PLAN, A[1])])
        s2 = recorder.append([started(other, "b1"), phase_done(PLAN, 3), completed(PLAN)])
        seqs = s1 + f1 + s2
        assert seqs == sorted(seqs) and len(set(seqs)) == 7
        assert recorder.events(apply_id="a1") == [started(PLAN), phase_done(PLAN, 1), phase_done(PLAN, 3),
                                                  completed(PLAN)]
        assert [type(e) for e in recorder.events(plan_id=other.plan_id)] == [PlanRecorded, ApplyStarted]
        assert recorder.events(plan_id=other.plan_id, apply_id="a1") == []
        assert recorder.append([]) == []

    def test_a_refused_batch_writes_nothing(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        with pytest.raises(JournalError, match="apply a1: ApplyCompleted does not fit: the apply is already COMPLETED"):
            recorder.append([started(PLAN), completed(PLAN), completed(PLAN)])
        assert [type(e) for e in recorder.events()] == [PlanRecorded]

    @pytest.mark.parametrize("batches, message", [
        ([[completed(PLAN)]], "apply a1: ApplyCompleted does not fit: the apply never started"),
        ([[started(PLAN), completed(PLAN)], [phase_done(PLAN, 1)]],
         r"apply a1: PhaseCompleted \(phase 1\) does not fit: the apply is already COMPLETED"),
        ([[started(PLAN)], [started(PLAN)]], r"apply a1: ApplyStarted does not fit: the apply already exists \(RUNNING\)"),
        ([[started(PLAN), phase_done(PLAN, 3)], [phase_done(PLAN, 1)]],
         r"apply a1: PhaseCompleted \(phase 1\) does not fit: phases run in order and phase 3 is already complete"),
        ([[started(PLAN), ApplyFailed("a1", PLAN.plan_id, "boom", 1, 50)], [completed(PLAN)]],
         "apply a1: ApplyCompleted does not fit: the apply is already FAILED"),
        ([[dataclasses.replace(started(PLAN), n_actions=3)]],
         f"apply a1: ApplyStarted counts 3 actions, plan {PLAN.plan_id} has 10"),
        ([[dataclasses.replace(started(PLAN), plan_id="p-unknown")]],
         "apply a1: plan p-unknown is not recorded; record_plan comes first"),
        ([[_recorded_event(PLAN)]], f"plan {PLAN.plan_id}: PlanRecorded is written by record_plan"),
    ])
    def test_illegal_transitions_are_refused(self, recorder, batches, message):
        recorder.record_plan(PLAN, recorded_ms=5)
        for batch in batches[:-1]:
            recorder.append(batch)
        before = recorder.events()
        with pytest.raises(JournalError, match=message):
            recorder.append(batches[-1])
        assert recorder.events() == before

    def test_old_payload_written_raw_is_upcast_on_read(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        v1 = {"apply_id": "a1", "plan_id": PLAN.plan_id, "n_actions": 10, "bytes": 187, "dry_run": False,
              "started_ms": 10}
        recorder._append_rows([StoredEvent("ApplyStarted", 1, PLAN.plan_id, "a1", v1, 10)])
        assert recorder.events(apply_id="a1") == [dataclasses.replace(started(PLAN), master=None)]
        recorder.append([completed(PLAN)])  # the upcast event takes part in the guarded fold
        assert project_apply(recorder, "a1").state == RunStatus.COMPLETED

    def test_unreadable_events_fail_loudly(self, recorder):
        recorder._append_rows([StoredEvent("ApplyStarted", 4, "p", "a1", {}, 10)])
        with pytest.raises(JournalError, match=r"ApplyStarted v4 is newer than this lakesweep understands \(v3\)"):
            recorder.events()

    # -- file records and projections --------------------------------------------------------------

    def test_a_later_record_supersedes_an_earlier_one_and_all_are_kept(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN)])
        rows = [record(PLAN, A[0], outcome="FAILED", time_ms=100), record(PLAN, A[1], outcome="ALREADY_ABSENT"),
                record(PLAN, A[3], outcome="KEPT_NOT_EMPTY"), record(PLAN, A[2], outcome="FAILED")]
        recorder.record_files(rows)
        recorder.record_files([record(PLAN, A[0], attempt=2, time_ms=110)])
        assert recorder.file_records(apply_id="a1") == rows + [record(PLAN, A[0], attempt=2, time_ms=110)]
        assert recorder.file_records(plan_id="other") == []
        run = project_apply(recorder, "a1")
        assert (run.state, run.done, run.failed) == (RunStatus.RUNNING, frozenset({0, 1, 3}), frozenset({2}))
        assert run.counts == {**{o: 0 for o in FileOutcome}, FileOutcome.DELETED: 1, FileOutcome.ALREADY_ABSENT: 1,
                              FileOutcome.KEPT_NOT_EMPTY: 1, FileOutcome.FAILED: 1}
        assert run.bytes_reclaimed == 10
        assert recorder.outcome_totals(PLAN.plan_id)[FileOutcome.DELETED] == (1, 10)

    def test_large_batches_round_trip(self, recorder):
        big = make_plan([Action(ActionKind.DATA_FILE, f"dt={i % 7}/bucket-0/data-{i}.parquet", snapshot_id=2,
                                partition=f"dt={i % 7}", bucket=0, size=i) for i in range(300)])
        recorder.record_plan(big, recorded_ms=5)
        assert recorder.plan_actions(big.plan_id) == big.actions
        recorder.append([started(big)])
        rows = [record(big, a, outcome="FAILED" if a.action_id % 10 == 0 else None) for a in big.actions]
        seqs = recorder.record_files(rows)
        assert seqs == list(range(seqs[0], seqs[0] + 300))
        assert recorder.file_records() == rows
        run = project_apply(recorder, "a1")
        assert (len(run.done), len(run.failed), run.bytes_reclaimed) == (
            270, 30, sum(a.size for a in big.actions if a.action_id % 10))

    @pytest.mark.parametrize("bad, message", [
        (record(PLAN, A[0], apply_id="a9"), r"apply a9: file record for action 0 \(dt=1/bucket-0/data-1.parquet\) "
                                            r"does not fit: the apply never started"),
        (dataclasses.replace(record(PLAN, A[0]), path="dt=1/elsewhere.parquet"),
         "apply a1: file record for action 0 names data-file 'dt=1/elsewhere.parquet', which is not that action"),
        (dataclasses.replace(record(PLAN, A[0]), action_id=10), "does not fit: the plan has 10 actions"),
    ])
    def test_file_records_that_do_not_match_the_plan_are_refused(self, recorder, bad, message):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN)])
        with pytest.raises(JournalError, match=message):
            recorder.record_files([record(PLAN, A[1]), bad])
        assert recorder.file_records() == []

    @pytest.mark.parametrize("as_columns", [False, True])
    def test_outcome_rows_are_stored_as_the_file_records_they_stand_for(self, recorder, as_columns):
        big = make_plan([Action(ActionKind.DATA_FILE, f"dt={i % 7}/bucket-0/data-{i}.parquet", snapshot_id=2,
                                partition=f"dt={i % 7}", bucket=0, size=None if i % 5 == 0 else i)
                         for i in range(300)])
        if as_columns:  # as apply reads a plan file: the file's columns, each action built where it is read
            big = plan_from_bytes(plan_to_bytes(big), as_columns=True)
            assert isinstance(big.actions, ColumnActions)
        recorder.record_plan(big, recorded_ms=5)
        recorder.append([started(big)])
        outcomes = ["FAILED", "ALREADY_ABSENT", "QUARANTINED", "DELETED", "SKIPPED_REFERENCED", "DELETED"]
        expected = [record(big, a, outcome=outcomes[a.action_id % 6], attempt=1 + a.action_id % 3,
                           time_ms=1000 + a.action_id, error="held" if a.action_id % 6 == 4 else None)
                    for a in reversed(big.actions)]
        rows = [(r.action_id, r.outcome.value, r.attempt, r.error, r.time_ms, r.moved_to) for r in expected]
        seqs = recorder.record_outcomes("a1", big.plan_id, rows[:120]) + recorder.record_outcomes(
            "a1", big.plan_id, rows[120:])
        assert seqs == list(range(seqs[0], seqs[0] + 300))
        assert recorder.file_records() == expected
        assert [(r["action_id"], r["bytes"]) for r in recorder.file_rows(FileQuery())] == [
            (a.action_id, a.size) for a in reversed(big.actions)]

    @pytest.mark.parametrize("bad, message", [
        ((0, "DELETED", 1, None, 100, None, "a9"), r"apply a9: file record for action 1 "
                                                   r"\(dt=2/bucket-0/data-2.parquet\) does not fit: the apply never started"),
        ((10, "DELETED", 1, None, 100, None, "a1"), "does not fit: the plan has 10 actions"),
        ((0, "WRITTEN", 1, None, 100, None, "a1"), "apply a1: outcome WRITTEN does not fit action 0"),
    ])
    @pytest.mark.parametrize("as_columns", [False, True])
    def test_outcome_rows_are_refused_as_their_file_records_would_be(self, recorder, bad, message, as_columns):
        recorder.record_plan(plan_from_bytes(plan_to_bytes(PLAN), as_columns=True) if as_columns else PLAN,
                             recorded_ms=5)
        recorder.append([started(PLAN)])
        with pytest.raises(JournalError, match=message):
            recorder.record_outcomes(bad[-1], PLAN.plan_id, [(1, "DELETED", 1, None, 100, None), bad[:-1]])
        assert recorder.file_records() == []

    @pytest.mark.parametrize("row, message", [
        ((0, "FAILED", 1, None, 100, None), "a FAILED record needs an error"),
        ((0, "DELETED", 0, None, 100, None), "attempt 0 >= 1"),
        ((0, "QUARANTINED", 1, None, 100, None), "says where the file went"),
    ])
    def test_outcome_rows_that_no_file_record_can_hold_are_refused(self, recorder, row, message):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN)])
        with pytest.raises(ValueError, match=message):
            recorder.record_outcomes("a1", PLAN.plan_id, [(1, "DELETED", 1, None, 100, None), row])
        assert recorder.file_records() == []

    def test_no_outcome_rows_after_the_end(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN), completed(PLAN)])
        with pytest.raises(JournalError, match="the apply is already COMPLETED"):
            recorder.record_outcomes("a1", PLAN.plan_id, [(0, "DELETED", 1, None, 100, None)])

    def test_no_file_records_after_the_end(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN), completed(PLAN)])
        with pytest.raises(JournalError, match="apply a1: file record for action 0 does not fit: "
                                               "the apply is already COMPLETED"):
            recorder.record_files([record(PLAN, A[0])])

    def test_crashed_apply_is_incomplete(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN), phase_done(PLAN, 1)])
        recorder.record_files([record(PLAN, A[0]), record(PLAN, A[1], outcome="FAILED")])
        [run] = incomplete_applies(recorder)
        assert (run.apply_id, run.plan_id, run.state, run.done, run.failed) == (
            "a1", PLAN.plan_id, RunStatus.RUNNING, frozenset({0}), frozenset({1}))
        assert (run.completed_phases, run.started_ms, run.finished_ms, run.master) == ((1,), 10, None, "local[2]")
        assert plan_state(recorder, PLAN.plan_id) == PlanStatus.APPLYING
        assert unfinished_apply(recorder, PLAN.plan_id) == "a1"
        recorder.append([completed(PLAN), started(PLAN, "dry", dry_run=True)])
        assert unfinished_apply(recorder, PLAN.plan_id) is None  # a dry run is not an apply to finish

    def test_every_action_recorded_and_completed_is_a_completed_apply(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        _run_everything(recorder)
        run = project_apply(recorder, "a1")
        assert (run.state, run.done, run.failed) == (RunStatus.COMPLETED, frozenset(range(10)), frozenset())
        assert run.completed_phases == tuple(int(p) for p in Phase)
        assert (run.metadata, run.bytes_reclaimed, run.finished_ms) == ((("write-earliest-hint", 3),), 187, 300)
        assert run.counts[FileOutcome.DELETED] == 8 and run.counts[FileOutcome.WRITTEN] == 2
        assert incomplete_applies(recorder) == []
        assert plan_state(recorder, PLAN.plan_id) == PlanStatus.APPLIED
        assert plan_done_actions(recorder, PLAN.plan_id) == frozenset(range(10))

    def test_a_failed_apply_resumed_by_a_new_apply(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN)])
        recorder.record_files([record(PLAN, A[0]), record(PLAN, A[1], outcome="FAILED")])
        recorder.append([ApplyFailed("a1", PLAN.plan_id, "executor lost", 1, 50)])
        assert plan_state(recorder, PLAN.plan_id) == PlanStatus.FAILED
        assert plan_done_actions(recorder, PLAN.plan_id) == frozenset({0})
        failed = project_apply(recorder, "a1")
        assert (failed.state, failed.reason, failed.failed_phase) == (RunStatus.FAILED, "executor lost", 1)
        recorder.append([started(PLAN, "a2", started_ms=60)])
        recorder.record_files([record(PLAN, A[1], apply_id="a2", attempt=2, time_ms=70)])
        assert plan_done_actions(recorder, PLAN.plan_id) == frozenset({0, 1})
        assert recorder.outcome_totals(PLAN.plan_id)[FileOutcome.FAILED] == (0, 0)
        assert recorder.outcome_totals(PLAN.plan_id, exclude_applies=["a2"])[FileOutcome.FAILED] == (1, 20)

    def test_all_outcome_totals_agree_with_each_plans_outcome_totals(self, recorder):
        """One query for every plan (journal plans) must count as the per-plan ranking does: a plan whose
        actions were recorded once, one resumed after a failure, one re-applied after it was deleted,
        with a dry run and an excluded apply in the mix."""
        once, resumed, again = PLAN, make_plan(table="/t2"), make_plan(table="/t3")
        for p in (once, resumed, again):
            recorder.record_plan(p, recorded_ms=5)
        _run_everything(recorder, once, "a1")
        recorder.append([started(resumed, "r1")])
        recorder.record_files([record(resumed, a, apply_id="r1", outcome="FAILED" if a.action_id % 3 == 0 else None)
                               for a in resumed.actions])
        recorder.append([ApplyFailed("r1", resumed.plan_id, "executor lost", 1, 50), started(resumed, "r2")])
        recorder.record_files([record(resumed, a, apply_id="r2", attempt=2)
                               for a in resumed.actions if a.action_id % 3 == 0])
        _run_everything(recorder, again, "g1")
        recorder.append([started(again, "g2")])
        recorder.record_files([record(again, a, apply_id="g2", outcome="ALREADY_ABSENT") for a in again.actions[:4]])
        recorder.append([started(again, "dry", dry_run=True)])
        recorder.record_files([record(again, a, apply_id="dry", outcome="FAILED") for a in again.actions[4:]])
        for excluded in ([], ["dry"], ["r2", "dry"], ["g1"]):
            every = recorder.all_outcome_totals(exclude_applies=excluded)
            assert every == {p.plan_id: recorder.outcome_totals(p.plan_id, exclude_applies=excluded)
                             for p in (once, resumed, again)}
        every = recorder.all_outcome_totals(exclude_applies=["dry"])
        assert every[resumed.plan_id][FileOutcome.FAILED] == (0, 0)
        assert every[again.plan_id][FileOutcome.DELETED] == every[once.plan_id][FileOutcome.DELETED]
        assert recorder.all_outcome_totals(exclude_applies=["r2"])[resumed.plan_id][FileOutcome.FAILED][0] == 4

    def test_done_actions_is_the_latest_record_per_action_over_the_plans_applies(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        assert recorder.done_actions(PLAN.plan_id) == frozenset()
        recorder.append([started(PLAN)])
        recorder.record_files([record(PLAN, A[0]), record(PLAN, A[1], outcome="FAILED"),
                               record(PLAN, A[2], outcome="FAILED"), record(PLAN, A[3], outcome="KEPT_NOT_EMPTY")])
        recorder.record_files([record(PLAN, A[2], attempt=2, time_ms=110)])
        recorder.append([ApplyFailed("a1", PLAN.plan_id, "executor lost", 1, 150)])
        assert recorder.done_actions(PLAN.plan_id) == frozenset({0, 2, 3})
        recorder.append([started(PLAN, "a2", started_ms=160)])
        recorder.record_files([record(PLAN, A[1], apply_id="a2", time_ms=170),
                               record(PLAN, A[0], apply_id="a2", outcome="FAILED", time_ms=171)])
        assert recorder.done_actions(PLAN.plan_id) == frozenset({1, 2, 3})  # a2's failure of 0 is the latest
        assert recorder.done_actions(PLAN.plan_id, exclude_applies=["a2"]) == frozenset({0, 2, 3})
        assert recorder.done_actions(PLAN.plan_id, exclude_applies=["a1", "a2"]) == frozenset()
        assert recorder.done_actions("other") == frozenset()

    def test_apply_totals_count_each_actions_latest_record_in_that_apply(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN), started(PLAN, "a2", started_ms=11)])
        recorder.record_files([record(PLAN, A[0], outcome="FAILED"), record(PLAN, A[1], outcome="ALREADY_ABSENT"),
                               record(PLAN, A[6]), record(PLAN, A[4], apply_id="a2")])
        recorder.record_files([record(PLAN, A[0], attempt=2, time_ms=110), record(PLAN, A[1], outcome="FAILED")])
        totals = recorder.apply_totals("a1")
        assert totals == {**{o: (0, 0) for o in FileOutcome}, FileOutcome.DELETED: (1, 10),
                          FileOutcome.WRITTEN: (1, 0), FileOutcome.FAILED: (1, 20)}
        run = project_apply(recorder, "a1")
        assert {o: n for o, (n, _) in totals.items()} == run.counts
        assert totals[FileOutcome.DELETED][1] == run.bytes_reclaimed
        assert recorder.apply_totals("a2")[FileOutcome.DELETED] == (1, 100)
        assert recorder.apply_totals("nope") == {o: (0, 0) for o in FileOutcome}

    def test_deleted_without_size_names_the_deleted_actions_whose_size_is_unknown(self, recorder):
        unsized = [dataclasses.replace(A[4], size=None), dataclasses.replace(A[5], size=None)]
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN)])
        recorder.record_files([record(PLAN, A[0]), record(PLAN, A[3]), record(PLAN, unsized[0]),
                               record(PLAN, unsized[1], outcome="FAILED")])
        assert recorder.deleted_without_size("a1") == frozenset({A[3].action_id, A[4].action_id})
        assert recorder.apply_totals("a1")[FileOutcome.DELETED] == (3, 10)  # the unknown sizes are not summed
        recorder.record_files([record(PLAN, unsized[1], attempt=2, time_ms=120)])
        assert recorder.deleted_without_size("a1") == frozenset({A[3].action_id, A[4].action_id, A[5].action_id})
        assert recorder.deleted_without_size("nope") == frozenset()

    def test_appending_reads_nothing_back_once_the_apply_is_known(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN)])
        reads = []
        for name in ("_event_rows", "_load_plan"):
            method = getattr(recorder, name)
            setattr(recorder, name, lambda *args, _name=name, _method=method: reads.append(_name) or _method(*args))
        for a in A[:8]:  # one batch per action, as the driver's ordered phases may write them
            recorder.record_files([record(PLAN, a)])
        recorder.append([phase_done(PLAN, p) for p in (1, 2, 3, 4, 5, 6)])
        recorder.record_files([record(PLAN, A[8]), record(PLAN, A[9])])
        recorder.append([phase_done(PLAN, 7), completed(PLAN)])
        assert reads == []
        with pytest.raises(JournalError, match="apply a1: file record for action 0 does not fit: the apply is "
                                               "already COMPLETED"):
            recorder.record_files([record(PLAN, A[0])])
        assert project_apply(recorder, "a1").state == RunStatus.COMPLETED

    def test_refusals_and_dry_runs(self, recorder):
        recorder.record_plan(PLAN, recorded_ms=5)
        assert plan_state(recorder, PLAN.plan_id) == PlanStatus.RECORDED
        recorder.append([started(PLAN, "dry", dry_run=True), completed(PLAN, "dry")])
        assert plan_state(recorder, PLAN.plan_id) == PlanStatus.RECORDED  # a dry run applies nothing
        recorder.append([ApplyRefused(PLAN.plan_id, "tag 't1' now points into the range", 40)])
        assert plan_state(recorder, PLAN.plan_id) == PlanStatus.REFUSED
        recorder.append([ApplyRefused(PLAN.plan_id, "stale", 41, apply_id="a0")])
        assert project_apply(recorder, "a0").state == RunStatus.REFUSED
        with pytest.raises(JournalError, match="apply a0: file record .* the apply was refused before it started"):
            recorder.record_files([record(PLAN, A[0], apply_id="a0")])
        _run_everything(recorder)
        recorder.append([ApplyRefused(PLAN.plan_id, "snapshot 1 is gone", 400)])
        assert plan_state(recorder, PLAN.plan_id) == PlanStatus.APPLIED  # a later refusal does not un-apply

    # -- audit -------------------------------------------------------------------------------------

    def test_list_plans(self, recorder):
        other = make_plan(table="/u", identity="schema:def")
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.record_plan(other, recorded_ms=6)
        recorder.append([started(PLAN), phase_done(PLAN, 1)])
        recorder.record_files([record(PLAN, A[0]), record(PLAN, A[1], outcome="ALREADY_ABSENT"),
                               record(PLAN, A[2], outcome="FAILED")])
        recorder.append([ApplyFailed("a1", PLAN.plan_id, "boom", 2, 150), ApplyRefused("p-tampered", "bad hash", 160)])
        rows = list_plans(recorder)
        assert rows == [
            {"plan_id": PLAN.plan_id, "table": "/t", "table_identity": "schema:abc", "kind": "expire",
             "state": "FAILED", "n_actions": 10, "planned_bytes": 187, "applies": 1, "deleted": 1,
             "already_absent": 1, "failed": 1, "written": 0, "kept": 0, "bytes_reclaimed": 10,
             "quarantined": 0, "quarantined_bytes": 0, "restored": 0, "restored_bytes": 0, "recorded_ms": 5,
             "started_ms": 10, "finished_ms": 150, "whole": None, "unknown_size_files": 0},
            {"plan_id": other.plan_id, "table": "/u", "table_identity": "schema:def", "kind": "expire",
             "state": "RECORDED", "n_actions": 10, "planned_bytes": 187, "applies": 0, "deleted": 0,
             "already_absent": 0, "failed": 0, "written": 0, "kept": 0, "bytes_reclaimed": 0,
             "quarantined": 0, "quarantined_bytes": 0, "restored": 0, "restored_bytes": 0, "recorded_ms": 6,
             "started_ms": None, "finished_ms": None, "whole": None, "unknown_size_files": 0},
            {"plan_id": "p-tampered", "table": None, "table_identity": None, "kind": None, "state": "REFUSED",
             "n_actions": None, "planned_bytes": None, "applies": 0, "deleted": 0, "already_absent": 0,
             "failed": 0, "written": 0, "kept": 0, "bytes_reclaimed": 0,
             "quarantined": 0, "quarantined_bytes": 0, "restored": 0, "restored_bytes": 0, "recorded_ms": None,
             "started_ms": None, "finished_ms": 160, "whole": None, "unknown_size_files": 0},
        ]
        assert [e["event_type"] for e in list_events(recorder, apply_id="a1")] == [
            "ApplyStarted", "PhaseCompleted", "ApplyFailed"]

    def test_list_plans_counts_the_files_deleted_without_a_size(self, recorder):
        unsized = [dataclasses.replace(A[4], size=None), dataclasses.replace(A[5], size=None)]
        recorder.record_plan(PLAN, recorded_ms=5)
        recorder.append([started(PLAN)])
        recorder.record_files([record(PLAN, A[0]), record(PLAN, A[3]), record(PLAN, unsized[0]),
                               record(PLAN, unsized[1], outcome="FAILED")])
        [row] = list_plans(recorder)
        # the directory (A[3]) has no size to know; the failed delete reclaimed nothing
        assert (row["bytes_reclaimed"], row["unknown_size_files"]) == (10, 1)

    def _two_tables(self, recorder):
        other = make_plan(table="/u", identity="schema:def")
        for plan, aid, t in ((PLAN, "a1", 100), (other, "b1", 500)):
            recorder.record_plan(plan, recorded_ms=5)
            recorder.append([started(plan, aid)])
            recorder.record_files([record(plan, a, apply_id=aid, time_ms=t + a.action_id) for a in plan.actions[:4]])
        recorder.record_files([record(PLAN, A[3], outcome="FAILED", attempt=2, time_ms=600)])
        return other

    def test_list_files_joins_table_and_snapshot(self, recorder):
        self._two_tables(recorder)
        rows = list_files(recorder, plan_id=PLAN.plan_id)
        assert rows[0] == {"seq": rows[0]["seq"], "plan_id": PLAN.plan_id, "apply_id": "a1", "table": "/t",
                           "table_identity": "schema:abc", "action_id": 0, "path": "dt=1/bucket-0/data-1.parquet",
                           "kind": "data-file", "phase": 1, "snapshot_id": 2, "outcome": "DELETED", "error": None,
                           "attempt": 1, "bytes": 10, "time_ms": 100, "moved_to": None}
        assert list(rows[0]) == list(FILE_COLUMNS)
        assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows) and len(rows) == 5

    @pytest.mark.parametrize("filters, expected", [
        ({}, [("a1", 0), ("a1", 1), ("a1", 2), ("a1", 3), ("b1", 0), ("b1", 1), ("b1", 2), ("b1", 3), ("a1", 3)]),
        ({"table": "/u"}, [("b1", 0), ("b1", 1), ("b1", 2), ("b1", 3)]),
        ({"table": "schema:abc", "kind": "data-file"}, [("a1", 0), ("a1", 1)]),
        ({"kind": "empty-dir"}, [("a1", 3), ("b1", 3), ("a1", 3)]),
        ({"outcome": "FAILED"}, [("a1", 3)]),
        ({"outcome": FileOutcome.DELETED, "since_ms": 502}, [("b1", 2), ("b1", 3)]),
        ({"since_ms": 600}, [("a1", 3)]),
        ({"path_glob": "dt=1/*"}, [("a1", 0), ("a1", 2), ("b1", 0), ("b1", 2)]),
        ({"path_glob": "*/data-?.parquet", "apply_id": "b1"}, [("b1", 0), ("b1", 1)]),
        ({"path_glob": "dt=[!1]/*"}, [("a1", 1), ("a1", 3), ("b1", 1), ("b1", 3), ("a1", 3)]),
        ({"path_glob": "*.parquet", "limit": 3}, [("a1", 0), ("a1", 1), ("a1", 2)]),
        ({"limit": 0}, []),
    ])
    def test_list_files_filters(self, recorder, filters, expected):
        self._two_tables(recorder)
        assert [(r["apply_id"], r["action_id"]) for r in list_files(recorder, **filters)] == expected
        unlimited = {k: v for k, v in filters.items() if k != "limit"}
        assert count_files(recorder, **unlimited) == len(list_files(recorder, **unlimited))

    @pytest.mark.parametrize("filters, message", [
        ({"kind": "datafile"}, "unknown kind 'datafile'; use one of: data-file, extra-file"),
        ({"outcome": "deleted"}, "unknown outcome 'deleted'; use one of: DELETED, ALREADY_ABSENT"),
        ({"path_glob": "dt=[9-1]/*"}, r"path glob 'dt=\[9-1\]/\*': range 9-1 is reversed"),
        ({"limit": -1}, "limit must be >= 0, got -1"),
    ])
    def test_bad_filters_are_user_errors(self, recorder, filters, message):
        with pytest.raises(JournalError, match=message):
            list_files(recorder, **filters)

    @pytest.mark.parametrize("pattern", ["*", "dt=1/*", "*/bucket-?/*", "dt=[12]/*", "dt=[!2]/*", "*[a-c]*.parquet",
                                         "[*]x", "a.b", "x[", "?", "*-[]]*", "dt=1/bucket-0/data-1.parquet"])
    def test_path_glob_has_fnmatch_semantics(self, recorder, pattern):
        paths = ["dt=1/bucket-0/data-1.parquet", "dt=2/bucket-0/data-2.parquet", "*x", "axb", "a.b", "x[", "]",
                 "a-]b", "dt=1"]
        actions = [dataclasses.replace(ACTIONS[0], path=p) for p in paths]
        plan = make_plan(actions)
        recorder.record_plan(plan, recorded_ms=5)
        recorder.append([started(plan)])
        recorder.record_files([record(plan, a) for a in plan.actions])
        got = sorted(r["path"] for r in list_files(recorder, path_glob=pattern))
        assert got == sorted(p for p in paths if fnmatch.fnmatchcase(p, pattern))

    def test_export_files_to_parquet(self, recorder, tmp_path):
        self._two_tables(recorder)
        out = tmp_path / "out" / "files.parquet"
        assert export_files(recorder, out) == 9
        table = pq.read_table(out)
        assert table.num_rows == 9 and table.column_names == list(FILE_COLUMNS)
        assert table.column("path").to_pylist() == [r["path"] for r in list_files(recorder)]

    def test_a_closed_recorder_refuses_work(self, recorder):
        recorder.close()
        recorder.close()
        with pytest.raises(JournalError, match="closed"):
            recorder.events()
        with pytest.raises(JournalError, match="closed"):
            recorder.record_plan(PLAN, recorded_ms=5)


class TestMemoryRecorder(RecorderContract):
    @pytest.fixture
    def recorder(self):
        with MemoryRecorder() as r:
            yield r


class TestDuckDBRecorder(RecorderContract):
    @pytest.fixture
    def recorder(self, tmp_path):
        with DuckDBRecorder(tmp_path / "state" / "journal.duckdb") as r:
            yield r
