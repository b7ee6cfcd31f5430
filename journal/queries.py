"""Questions asked of a recorder and answered by the projections: the state of an apply or a plan, what
is unfinished, what resume skips.

They read events (and, for one apply, its file records) through the recorder's public methods and fold
them with ``journal.projection``; the projection module itself knows nothing of recorders.
"""

from __future__ import annotations

from lakesweep.engine.errors import JournalError

from lakesweep.journal.projection import PlanStatus, RunState, RunStatus, plan_status, project
from lakesweep.journal.recorder import Recorder


def project_apply(recorder: Recorder, apply_id: str) -> RunState:
    """The state of one apply; raises ``JournalError`` if the journal does not know it."""
    runs = project(recorder.events(apply_id=apply_id), recorder.file_records(apply_id=apply_id))
    if apply_id not in runs:
        raise JournalError(f"apply {apply_id} is not in the journal")
    return runs[apply_id]


def incomplete_applies(recorder: Recorder) -> list[RunState]:
    """Applies that started and have no end (a crash, or still running), in start order."""
    lifecycle = project(recorder.events())
    return [project_apply(recorder, aid) for aid, run in lifecycle.items() if run.state == RunStatus.RUNNING]


def unfinished_apply(recorder: Recorder, plan_id: str) -> str | None:
    """The id of the plan's first apply (not a dry run) that started and has no end, from its events
    alone (no file records are read); None when there is none."""
    runs = project(recorder.events(plan_id=plan_id))
    return next((aid for aid, run in runs.items() if run.state == RunStatus.RUNNING and not run.dry_run), None)


def completed_applies(recorder: Recorder, plan_id: str) -> list[RunState]:
    """The plan's applies (not dry runs) that completed, from its events alone, in the order they finished."""
    runs = project(recorder.events(plan_id=plan_id))
    done = [run for run in runs.values() if run.state == RunStatus.COMPLETED and not run.dry_run]
    return sorted(done, key=lambda run: run.finished_ms or 0)


def plan_state(recorder: Recorder, plan_id: str) -> PlanStatus:
    """RECORDED, APPLYING, APPLIED, FAILED or REFUSED; raises ``JournalError`` for an unknown plan."""
    events = recorder.events(plan_id=plan_id)
    if not events:
        raise JournalError(f"plan {plan_id} is not in the journal")
    return plan_status(events)


def plan_done_actions(recorder: Recorder, plan_id: str) -> frozenset[int]:
    """Action ids whose latest record over all (non dry-run) applies of the plan is not FAILED: what resume
    skips. The journal works it out (``Recorder.done_actions``); no record is read back one by one."""
    runs = project(recorder.events(plan_id=plan_id))
    dry = sorted(aid for aid, run in runs.items() if run.dry_run)
    return recorder.done_actions(plan_id, exclude_applies=dry)
