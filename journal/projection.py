"""The state of an apply is a fold over its events and file records, never a re-scan of the table.

``project`` has one branch per event type and refuses an event that does not fit the apply's state
(an ``ApplyCompleted`` for an apply that never started, a ``PhaseCompleted`` after ``ApplyCompleted``...).
The recorder runs the same fold before it appends, so an illegal transition never reaches the journal.
Projections are functions of values; the helpers that read them from a recorder live in ``journal.queries``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from lakesweep.engine.errors import JournalError

from lakesweep.journal.events import (ApplyCompleted, ApplyFailed, ApplyRefused, ApplyStarted, Event, FileOutcome,
                                      FileRecord, Committed, MetadataWritten, OutputOrphaned, OutputWritten,
                                      PhaseCompleted, RequestsThrottled, PlanRecorded, Verified)


class RunStatus(enum.StrEnum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    REFUSED = "REFUSED"


class PlanStatus(enum.StrEnum):
    RECORDED = "RECORDED"
    APPLYING = "APPLYING"
    APPLIED = "APPLIED"
    FAILED = "FAILED"
    REFUSED = "REFUSED"


def _zero_counts() -> dict[FileOutcome, int]:
    return {o: 0 for o in FileOutcome}


@dataclass(frozen=True, slots=True)
class RunState:
    """One apply as the journal knows it. ``done``/``failed``/``counts`` use each action's latest record."""

    apply_id: str
    plan_id: str
    state: RunStatus
    dry_run: bool = False
    master: str | None = None
    n_actions: int | None = None  # None: refused before it started
    planned_bytes: int | None = None
    started_ms: int | None = None
    finished_ms: int | None = None
    completed_phases: tuple[int, ...] = ()
    metadata: tuple[tuple[str, int], ...] = ()  # (kind, value) of every MetadataWritten, in order
    commits: tuple[tuple[int, int], ...] = ()  # (phase, version) of every Committed, in order
    whole: bool | None = None  # what the check after the last phase found (None: not checked)
    reason: str | None = None  # why it failed or was refused
    failed_phase: int | None = None
    done: frozenset[int] = frozenset()  # latest record is not FAILED
    failed: frozenset[int] = frozenset()  # latest record is FAILED
    counts: Mapping[FileOutcome, int] = field(default_factory=_zero_counts)
    bytes_reclaimed: int = 0  # bytes of actions whose latest record is DELETED

    @property
    def finished(self) -> bool:
        return self.state != RunStatus.RUNNING


def _illegal(apply_id: str | None, event: Event, why: str) -> JournalError:
    detail = f" (phase {event.phase})" if isinstance(event, PhaseCompleted) else ""
    return JournalError(f"apply {apply_id}: {event.EVENT_TYPE}{detail} does not fit: {why}")


def _require_running(run: RunState | None, event: Event) -> RunState:
    if run is None:
        raise _illegal(event.event_apply_id, event, "the apply never started")
    if run.state != RunStatus.RUNNING:
        raise _illegal(run.apply_id, event, f"the apply is already {run.state.value}")
    return run


def step(run: RunState | None, ev: Event) -> RunState:
    """The apply's state after one more of its events (``run`` is None before ``ApplyStarted``); raises
    ``JournalError`` for an event that does not fit. ``project`` is a fold of this."""
    aid = ev.event_apply_id
    if run is not None and run.plan_id != ev.plan_id:
        raise _illegal(aid, ev, f"the apply belongs to plan {run.plan_id}, the event names plan {ev.plan_id}")
    match ev:
        case ApplyStarted():
            if run is not None:
                raise _illegal(aid, ev, f"the apply already exists ({run.state.value}); resume with a new apply id")
            return RunState(
                apply_id=ev.apply_id, plan_id=ev.plan_id, state=RunStatus.RUNNING, dry_run=ev.dry_run,
                master=ev.master, n_actions=ev.n_actions, planned_bytes=ev.bytes, started_ms=ev.started_ms,
            )
        case ApplyRefused():
            if run is None:  # refused before it started: nothing was touched
                return RunState(apply_id=aid, plan_id=ev.plan_id, state=RunStatus.REFUSED, reason=ev.reason,
                                finished_ms=ev.refused_ms)
            run = _require_running(run, ev)
            return dataclasses.replace(run, state=RunStatus.REFUSED, reason=ev.reason, finished_ms=ev.refused_ms)
        case PhaseCompleted():
            run = _require_running(run, ev)
            if run.completed_phases and ev.phase <= run.completed_phases[-1]:
                raise _illegal(aid, ev, f"phases run in order and phase {run.completed_phases[-1]} is already complete")
            return dataclasses.replace(run, completed_phases=run.completed_phases + (ev.phase,))
        case MetadataWritten():
            run = _require_running(run, ev)
            if any(kind == ev.kind for kind, _ in run.metadata):
                raise _illegal(aid, ev, f"{ev.kind} was already written ({dict(run.metadata)[ev.kind]})")
            return dataclasses.replace(run, metadata=run.metadata + ((ev.kind, ev.value),))
        case OutputWritten() | OutputOrphaned() | RequestsThrottled():
            return _require_running(run, ev)  # what the merge phase wrote: read by the apply, not folded here
        case Committed():
            run = _require_running(run, ev)
            if any(phase == ev.phase for phase, _ in run.commits):
                raise _illegal(aid, ev, f"phase {ev.phase} already committed")
            return dataclasses.replace(run, commits=run.commits + ((ev.phase, ev.version),))
        case Verified():
            run = _require_running(run, ev)
            if run.whole is not None:
                raise _illegal(aid, ev, "the apply was already verified")
            return dataclasses.replace(run, whole=ev.whole)
        case ApplyCompleted():
            run = _require_running(run, ev)
            return dataclasses.replace(run, state=RunStatus.COMPLETED, finished_ms=ev.finished_ms)
        case ApplyFailed():
            run = _require_running(run, ev)
            return dataclasses.replace(run, state=RunStatus.FAILED, reason=ev.reason, failed_phase=ev.phase,
                                       finished_ms=ev.finished_ms)
        case _:
            raise _illegal(aid, ev, "not an apply event")


def check_file_record(run: RunState | None, rec: FileRecord) -> None:
    """Raise if ``rec`` cannot belong to ``run`` (unknown apply, other plan, refused, action out of range)."""
    if run is not None and run.plan_id == rec.plan_id and run.n_actions is not None and rec.action_id < run.n_actions:
        return  # the common case, without building the message
    where = f"apply {rec.apply_id}: file record for action {rec.action_id} ({rec.path})"
    if run is None:
        raise JournalError(f"{where} does not fit: the apply never started")
    if run.plan_id != rec.plan_id:
        raise JournalError(f"{where} names plan {rec.plan_id}, the apply belongs to plan {run.plan_id}")
    if run.n_actions is None:
        raise JournalError(f"{where} does not fit: the apply was refused before it started")
    if rec.action_id >= run.n_actions:
        raise JournalError(f"{where} does not fit: the plan has {run.n_actions} actions")


def latest_by_action(records: Iterable[FileRecord]) -> dict[int, FileRecord]:
    """The latest record per action id; ``records`` must be in sequence order."""
    latest: dict[int, FileRecord] = {}
    for rec in records:
        latest[rec.action_id] = rec
    return latest


def _with_files(run: RunState, latest: Mapping[int, FileRecord]) -> RunState:
    counts = _zero_counts()
    for rec in latest.values():
        counts[rec.outcome] += 1
    return dataclasses.replace(
        run,
        done=frozenset(a for a, r in latest.items() if r.outcome != FileOutcome.FAILED),
        failed=frozenset(a for a, r in latest.items() if r.outcome == FileOutcome.FAILED),
        counts=counts,
        bytes_reclaimed=sum(r.bytes or 0 for r in latest.values() if r.outcome == FileOutcome.DELETED),
    )


def project(events: Iterable[Event], file_records: Iterable[FileRecord] = ()) -> dict[str, RunState]:
    """Fold events (in sequence order) and file records (in sequence order) into one state per apply id.

    Plan-level events (``PlanRecorded``, an ``ApplyRefused`` without apply id) do not make an apply.
    Raises ``JournalError`` naming the apply and the event for any event or record that does not fit.
    """
    runs: dict[str, RunState] = {}
    for ev in events:
        aid = ev.event_apply_id
        if isinstance(ev, PlanRecorded) or aid is None:
            continue
        runs[aid] = step(runs.get(aid), ev)
    latest: dict[str, dict[int, FileRecord]] = {}
    for rec in file_records:
        check_file_record(runs.get(rec.apply_id), rec)
        latest.setdefault(rec.apply_id, {})[rec.action_id] = rec
    return {aid: _with_files(run, latest.get(aid, {})) for aid, run in runs.items()}


def plan_status(events: Sequence[Event]) -> PlanStatus:
    """The state of a plan from its events: RECORDED, then the outcome of its latest apply or refusal.

    Dry runs and restores (``ApplyStarted.mode`` ``restore``) do not count. APPLIED stays once reached: a later
    refusal (the table moved on, say) does not un-apply an applied plan.
    """
    runs = project(events)  # validates the transitions
    dry = {aid for aid, run in runs.items() if run.dry_run}
    dry |= {ev.apply_id for ev in events if isinstance(ev, ApplyStarted) and ev.mode == "restore"}
    state = PlanStatus.RECORDED
    for ev in events:
        if ev.event_apply_id in dry or state == PlanStatus.APPLIED:
            continue
        match ev:
            case ApplyStarted():
                state = PlanStatus.APPLYING
            case ApplyCompleted():
                state = PlanStatus.APPLIED
            case ApplyFailed():
                state = PlanStatus.FAILED
            case ApplyRefused():
                state = PlanStatus.REFUSED
    return state
