"""Questions asked of a recorder and answered by the projections: the state of an apply or a plan, what
is unfinished, what resume skips.

They read events (and, for one apply, its file records) through the recorder's public methods and fold
them with ``journal.projection``; the projection module itself knows nothing of recorders.
"""

from __future__ import annotations

from lakesweep.engine.errors import JournalError

from lakesweep.journal.events import ApplyStarted, FileOutcome, FileRecord
from lakesweep.journal.projection import PlanStatus, RunState, RunStatus, latest_by_action, plan_status, project
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
    """The plan's applies (not dry runs, not restores) that completed, from its events alone, in the order they
    finished."""
    events = recorder.events(plan_id=plan_id)
    runs = project(events)
    restores = restore_applies(events)
    done = [run for run in runs.values()
            if run.state == RunStatus.COMPLETED and not run.dry_run and run.apply_id not in restores]
    return sorted(done, key=lambda run: run.finished_ms or 0)


def plan_state(recorder: Recorder, plan_id: str) -> PlanStatus:
    """RECORDED, APPLYING, APPLIED, FAILED or REFUSED; raises ``JournalError`` for an unknown plan."""
    events = recorder.events(plan_id=plan_id)
    if not events:
        raise JournalError(f"plan {plan_id} is not in the journal")
    return plan_status(events)


def plan_done_actions(recorder: Recorder, plan_id: str) -> frozenset[int]:
    """Action ids whose latest record over all (non dry-run) applies of the plan is not FAILED: what resume
    skips. The journal works it out (``Recorder.done_actions``); no record is read back one by one.

    A restore undoes: an action whose latest record is RESTORED is not done (its file is back, a re-apply
    acts on it again), and a restore's FAILED record (a file it refused) leaves the action as it was: its
    file is still in quarantine. Only a plan that was restored reads its records back for this."""
    events = recorder.events(plan_id=plan_id)
    runs = project(events)
    dry = sorted(aid for aid, run in runs.items() if run.dry_run)
    restores = sorted(restore_applies(events))
    if not restores:
        return recorder.done_actions(plan_id, exclude_applies=dry)
    done = recorder.done_actions(plan_id, exclude_applies=dry + restores)
    latest = latest_by_action(r for r in recorder.file_records(plan_id=plan_id) if r.apply_id not in dry)
    return done - {a for a, rec in latest.items() if rec.outcome == FileOutcome.RESTORED}


def apply_modes(events) -> dict[str, str]:
    """The mode of each apply (not dry runs) in ``events``: ``delete``, ``quarantine`` or ``restore``."""
    return {ev.apply_id: ev.mode for ev in events if isinstance(ev, ApplyStarted) and not ev.dry_run}


def restore_applies(events) -> set[str]:
    return {aid for aid, mode in apply_modes(events).items() if mode == "restore"}


def in_quarantine(recorder: Recorder, plan_id: str) -> dict[int, FileRecord]:
    """The plan's actions whose file is in quarantine now, with the QUARANTINED record that says where: the
    latest record over the plan's applies (not dry runs) is QUARANTINED. A restore's FAILED record does not
    count (the restore refused the file or could not move it: it is still in quarantine)."""
    events = recorder.events(plan_id=plan_id)
    modes = apply_modes(events)
    restores = {aid for aid, mode in modes.items() if mode == "restore"}
    latest = latest_by_action(
        r for r in recorder.file_records(plan_id=plan_id)
        if r.apply_id in modes and not (r.apply_id in restores and r.outcome == FileOutcome.FAILED))
    return {a: rec for a, rec in sorted(latest.items()) if rec.outcome == FileOutcome.QUARANTINED}


def quarantined_locations(recorder: Recorder, table_location: str) -> dict[str, tuple[str, str]]:
    """Every file of the table at ``table_location`` that a plan of this journal holds in quarantine now, by its
    original full location: ``(plan id, where it is)``."""
    from lakesweep.engine.fileio import normalize_location

    root = normalize_location(table_location).rstrip("/")
    found: dict[str, tuple[str, str]] = {}
    for plan_id in recorder.plan_ids():
        if normalize_location(recorder.plan_header(plan_id)["table"]["location"]).rstrip("/") != root:
            continue
        for rec in in_quarantine(recorder, plan_id).values():
            relative = not (rec.path.startswith("/") or rec.path.startswith("file:") or "://" in rec.path)
            full = root + "/" + rec.path if relative else normalize_location(rec.path)
            found[full] = (plan_id, rec.moved_to)
    return found
