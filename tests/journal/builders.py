"""Real plan values and journal events for the journal tests (no mocks)."""

from __future__ import annotations

from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions
from lakesweep.engine.paimon.kinds import EXPIRE_PHASES, ActionKind
from lakesweep.engine.paimon.requirements import AssertTableIdentity
from lakesweep.engine.paimon.scopes import ExpireScope

from lakesweep.journal.events import ApplyCompleted, ApplyStarted, FileOutcome, FileRecord, PhaseCompleted

TABLE = "/t"
IDENTITY = "schema:abc"

ACTIONS = (
    Action(ActionKind.DATA_FILE, "dt=1/bucket-0/data-1.parquet", snapshot_id=2, partition="dt=1", bucket=0, size=10),
    Action(ActionKind.DATA_FILE, "dt=2/bucket-0/data-2.parquet", snapshot_id=3, partition="dt=2", bucket=0, size=20),
    Action(ActionKind.CHANGELOG_FILE, "dt=1/bucket-0/changelog-1.parquet", snapshot_id=2, partition="dt=1",
           bucket=0, size=5),
    Action(ActionKind.EMPTY_DIR, "dt=3/bucket-0", depth=2),
    Action(ActionKind.MANIFEST, "manifest/manifest-a-0", snapshot_id=2, size=100),
    Action(ActionKind.MANIFEST_LIST, "manifest/manifest-list-a-1", snapshot_id=2, size=50),
    Action(ActionKind.WRITE_CHANGELOG, "changelog/changelog-2", snapshot_id=2, source="snapshot/snapshot-2"),
    Action(ActionKind.SNAPSHOT, "snapshot/snapshot-1", snapshot_id=1, size=1),
    Action(ActionKind.SNAPSHOT, "snapshot/snapshot-2", snapshot_id=2, size=1),
    Action(ActionKind.WRITE_EARLIEST_HINT, "snapshot/EARLIEST", snapshot_id=3),
)


def make_plan(actions=ACTIONS, *, table=TABLE, identity=IDENTITY, now_ms=1) -> CleanupPlan:
    return CleanupPlan(
        kind="expire", table_location=table, table_identity=identity, branch="main", now_ms=now_ms, options={},
        scope=ExpireScope(begin=1, end=3, earliest_hint=3), requirements=(AssertTableIdentity(identity, table, "main"),),
        phases=EXPIRE_PHASES, actions=canonical_actions(actions), stats={},
    )


def success(action: Action) -> FileOutcome:
    return FileOutcome.DELETED if action.verb.deletes else FileOutcome.WRITTEN


def record(plan: CleanupPlan, action: Action, *, apply_id="a1", outcome=None, attempt=1, time_ms=100,
           error=None) -> FileRecord:
    outcome = FileOutcome(outcome or success(action))
    if outcome == FileOutcome.FAILED and error is None:
        error = "permission denied"
    moved_to = f"/quarantine/{plan.plan_id}/{action.path}" if outcome in (FileOutcome.QUARANTINED,
                                                                          FileOutcome.RESTORED) else None
    return FileRecord(apply_id=apply_id, plan_id=plan.plan_id, action_id=action.action_id, path=action.path,
                      kind=action.kind, phase=int(action.phase), bytes=action.size, outcome=outcome, error=error,
                      attempt=attempt, time_ms=time_ms, moved_to=moved_to)


def started(plan: CleanupPlan, apply_id="a1", *, started_ms=10, dry_run=False) -> ApplyStarted:
    return ApplyStarted(apply_id=apply_id, plan_id=plan.plan_id, n_actions=len(plan.actions), bytes=187,
                        master="local[2]", dry_run=dry_run, started_ms=started_ms)


def phase_done(plan: CleanupPlan, phase: int, apply_id="a1", *, finished_ms=200) -> PhaseCompleted:
    return PhaseCompleted(apply_id=apply_id, plan_id=plan.plan_id, phase=phase, counts={"DELETED": 1}, bytes=10,
                          finished_ms=finished_ms)


def completed(plan: CleanupPlan, apply_id="a1", *, finished_ms=300) -> ApplyCompleted:
    return ApplyCompleted(apply_id=apply_id, plan_id=plan.plan_id, counts={"DELETED": 7, "WRITTEN": 2},
                          bytes_reclaimed=187, duration_ms=290, finished_ms=finished_ms)
