"""What a journal holds in quarantine: each file ``apply --quarantine`` put aside, by its latest QUARANTINED or
RESTORED record, with its apply's retention, and whether a purge journaled its deletion since
(``engine.purge.Quarantined``): what ``plan purge`` plans from and what apply checks a purge plan against."""

from __future__ import annotations

from lakesweep.engine.errors import JournalError
from lakesweep.engine.plan import Verb
from lakesweep.engine.purge import PURGE, Quarantined, retention_of

from lakesweep.journal.events import ApplyStarted, FileOutcome, PlanRecorded
from lakesweep.journal.recorder import Recorder

_MOVED = (FileOutcome.QUARANTINED, FileOutcome.RESTORED)
_GONE = (FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT)


def quarantine_records(recorder: Recorder) -> tuple[Quarantined, ...]:
    """Every file of every table the journal ever quarantined, by plan and action: its latest QUARANTINED or
    RESTORED record over every apply of its plan, with the retention of the apply that quarantined it, and
    whether a purge plan's latest record for it (by its ``where``) deleted it, or found it gone, since.
    A quarantine whose apply names no retention raises ``JournalError``: its files are never purged."""
    plans: dict[str, PlanRecorded] = {}
    retention: dict[str, int | None] = {}
    for ev in recorder.events():
        if isinstance(ev, PlanRecorded):
            plans.setdefault(ev.plan_id, ev)
        elif isinstance(ev, ApplyStarted) and ev.mode == "quarantine":
            retention[ev.apply_id] = retention_of(ev.quarantine)
    latest = {}
    purged: dict[str, int] = {}
    for plan_id, recorded in plans.items():
        records = recorder.file_records(plan_id=plan_id)
        if recorded.plan_kind == PURGE:
            actions = recorder.plan_actions(plan_id)
            last = {r.action_id: r for r in records}  # sequence order: the latest record wins
            for action_id, r in last.items():
                a = actions[action_id]
                if r.outcome in _GONE and a.verb is not Verb.DELETE_EMPTY_DIR and a.source:
                    purged[a.source] = max(purged.get(a.source, r.time_ms), r.time_ms)
            continue
        for r in records:
            if r.outcome in _MOVED:
                latest[(plan_id, r.action_id)] = r
    out = []
    for (plan_id, action_id), r in sorted(latest.items()):
        restored = r.outcome is FileOutcome.RESTORED
        keep = retention.get(r.apply_id) if not restored else 0
        if keep is None:
            raise JournalError(f"apply {r.apply_id} of plan {plan_id} quarantined {r.path} but its start names no "
                               "retention; the journal is damaged, and nothing it quarantined is purged")
        gone = purged.get(r.moved_to)
        out.append(Quarantined(plans[plan_id].table_location, plan_id, r.apply_id, action_id, r.path, r.moved_to,
                               r.bytes, r.time_ms, keep, restored=restored,
                               purged=gone is not None and gone >= r.time_ms))
    return tuple(out)
