"""The fold itself, on plain lists of events: one branch per event type, illegal transitions refused."""

from __future__ import annotations

import dataclasses

import pytest

from lakesweep.engine.errors import JournalError

from lakesweep.journal.events import ApplyFailed, ApplyRefused, Committed, FileOutcome, MetadataWritten, Verified
from lakesweep.journal.projection import PlanStatus, RunState, RunStatus, plan_status, project
from tests.journal.builders import completed, make_plan, phase_done, record, started

PLAN = make_plan()
A = PLAN.actions
PID = PLAN.plan_id


def test_an_empty_journal_has_no_applies():
    assert project([], []) == {}


def test_a_started_apply_is_running_with_nothing_done():
    assert project([started(PLAN)]) == {"a1": RunState(
        apply_id="a1", plan_id=PID, state=RunStatus.RUNNING, master="local[2]", n_actions=10, planned_bytes=187,
        started_ms=10)}


def test_file_outcomes_fold_into_counts_latest_record_wins():
    records = [record(PLAN, A[0], outcome="FAILED"), record(PLAN, A[0], attempt=2),
               record(PLAN, A[1], outcome="ALREADY_ABSENT"), record(PLAN, A[2]),
               record(PLAN, A[2], outcome="FAILED", attempt=2), record(PLAN, A[9])]
    hint = MetadataWritten("a1", PID, "write-earliest-hint", "snapshot/EARLIEST", 3, 20)
    run = project([started(PLAN), hint], records)["a1"]
    assert (run.done, run.failed, run.metadata) == (frozenset({0, 1, 9}), frozenset({2}), (("write-earliest-hint", 3),))
    assert run.counts == {**{o: 0 for o in FileOutcome}, FileOutcome.DELETED: 1, FileOutcome.ALREADY_ABSENT: 1,
                          FileOutcome.WRITTEN: 1, FileOutcome.FAILED: 1}
    assert run.bytes_reclaimed == 10  # ALREADY_ABSENT and the later-failed DELETED reclaim nothing


@pytest.mark.parametrize("events, message", [
    ([completed(PLAN)], "apply a1: ApplyCompleted does not fit: the apply never started"),
    ([phase_done(PLAN, 1)], r"apply a1: PhaseCompleted \(phase 1\) does not fit: the apply never started"),
    ([started(PLAN), completed(PLAN), phase_done(PLAN, 1)],
     r"apply a1: PhaseCompleted \(phase 1\) does not fit: the apply is already COMPLETED"),
    ([started(PLAN), completed(PLAN), completed(PLAN)], "the apply is already COMPLETED"),
    ([started(PLAN), ApplyFailed("a1", PID, "x", 1, 2), completed(PLAN)], "the apply is already FAILED"),
    ([ApplyRefused(PID, "stale", 1, apply_id="a1"), started(PLAN)],
     r"apply a1: ApplyStarted does not fit: the apply already exists \(REFUSED\); resume with a new apply id"),
    ([started(PLAN), phase_done(PLAN, 2), phase_done(PLAN, 2)],
     r"phases run in order and phase 2 is already complete"),
    ([started(PLAN), MetadataWritten("a1", PID, "write-earliest-hint", "snapshot/EARLIEST", 3, 1),
      MetadataWritten("a1", PID, "write-earliest-hint", "snapshot/EARLIEST", 4, 2)],
     r"apply a1: MetadataWritten does not fit: write-earliest-hint was already written \(3\)"),
    ([started(PLAN), Committed("a1", PID, 8, "lakesweep-x-8", 12, False, 1), Committed("a1", PID, 8, "lakesweep-x-8", 12, True, 2)],
     r"apply a1: Committed does not fit: phase 8 already committed"),
    ([started(PLAN), Verified("a1", PID, True, 3, 0, 1), Verified("a1", PID, True, 3, 0, 2)],
     r"apply a1: Verified does not fit: the apply was already verified"),
    ([started(PLAN), completed(PLAN), Verified("a1", PID, True, 3, 0, 2)],
     r"apply a1: Verified does not fit: the apply is already COMPLETED"),
    ([started(PLAN), dataclasses.replace(completed(PLAN), plan_id="other")],
     f"apply a1: ApplyCompleted does not fit: the apply belongs to plan {PID}, the event names plan other"),
])
def test_illegal_transitions_raise_naming_the_apply_and_event(events, message):
    with pytest.raises(JournalError, match=message):
        project(events)


@pytest.mark.parametrize("events, rec, message", [
    ([], record(PLAN, A[0]), "the apply never started"),
    ([ApplyRefused(PID, "stale", 1, apply_id="a1")], record(PLAN, A[0]), "the apply was refused before it started"),
    ([started(PLAN)], dataclasses.replace(record(PLAN, A[0]), plan_id="other"), f"names plan other, the apply "
                                                                              f"belongs to plan {PID}"),
])
def test_file_records_that_do_not_fit_raise(events, rec, message):
    with pytest.raises(JournalError, match=message):
        project(events, [rec])


def test_plan_status_follows_the_latest_apply_and_applied_sticks():
    refused_first = [ApplyRefused(PID, "stale", 1)]
    assert plan_status(refused_first) == PlanStatus.REFUSED
    failed = [started(PLAN), ApplyFailed("a1", PID, "x", 1, 2)]
    assert plan_status(failed) == PlanStatus.FAILED
    resumed = failed + [started(PLAN, "a2")]
    assert plan_status(resumed) == PlanStatus.APPLYING
    done = resumed + [completed(PLAN, "a2"), ApplyRefused(PID, "stale", 9)]
    assert plan_status(done) == PlanStatus.APPLIED


def test_the_check_after_the_last_phase_is_kept_on_the_run():
    assert project([started(PLAN)])["a1"].whole is None
    run = project([started(PLAN), Verified("a1", PID, False, 3, 1, 5), completed(PLAN)])["a1"]
    assert run.whole is False and run.state == RunStatus.COMPLETED
