"""A journal of three days of maintenance, written through the recorder with real events: plans of real
tables (``plans.py``) applied, failed and re-applied, killed and resumed, refused, and a ``maintain`` run
over two tables."""

from __future__ import annotations

from lakesweep.engine.plan import CleanupPlan
from lakesweep.journal.events import (ApplyCompleted, ApplyFailed, ApplyRefused, ApplyStarted, FileOutcome, FileRecord,
                                      MaintenanceOutcome, MaintenanceResult)

DAY_MS = 86_400_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FAILURE = "s3://bucket/t/data-0.parquet: AccessDenied <403> & no retry left"


def _records(plan: CleanupPlan, apply_id: str, actions, *, at: int, outcome=None, error=None, attempt=1):
    return [FileRecord(apply_id=apply_id, plan_id=plan.plan_id, action_id=a.action_id, path=a.path, kind=a.kind,
                       phase=int(a.phase), bytes=a.size,
                       outcome=FileOutcome(outcome or ("DELETED" if a.verb.deletes else "WRITTEN")), error=error,
                       attempt=attempt, time_ms=at + i) for i, a in enumerate(actions)]


def _start(plan: CleanupPlan, apply_id: str, at: int) -> ApplyStarted:
    return ApplyStarted(apply_id=apply_id, plan_id=plan.plan_id, n_actions=len(plan.actions),
                        bytes=sum(a.size or 0 for a in plan.actions), master="local[2]", dry_run=False, started_ms=at)


def _done(plan: CleanupPlan, apply_id: str, *, start: int, end: int, reclaimed: int, counts: dict) -> ApplyCompleted:
    return ApplyCompleted(apply_id=apply_id, plan_id=plan.plan_id, counts=counts, bytes_reclaimed=reclaimed,
                          duration_ms=end - start, finished_ms=end)


def write_journal(recorder, plans: dict[str, CleanupPlan]) -> dict[str, str]:
    """Fill ``recorder``; returns the apply ids by what happened to them."""
    expire, orphans, parts = plans["paimon-expire"], plans["paimon-orphans"], plans["paimon-partitions"]
    ice, compact = plans["iceberg-expire"], plans["iceberg-compact"]
    for i, p in enumerate(plans.values()):
        recorder.record_plan(p, recorded_ms=T0 + i)

    # day 1: the Paimon expiry completes
    t = T0 + 3_600_000
    recorder.append([_start(expire, "ok1", t)])
    deleted = [a for a in expire.actions if a.verb.deletes]
    written = [a for a in expire.actions if not a.verb.deletes]
    recorder.record_files(_records(expire, "ok1", deleted, at=t + 10) + _records(expire, "ok1", written, at=t + 50))
    recorder.append([_done(expire, "ok1", start=t, end=t + 60_000, reclaimed=sum(a.size or 0 for a in deleted),
                           counts={"DELETED": len(deleted), "WRITTEN": len(written)})])

    # day 1: the Iceberg expiry fails on a file; day 2 a second apply of the plan completes it
    t = T0 + 5 * 3_600_000
    recorder.append([_start(ice, "fail1", t)])
    files = [a for a in ice.actions if a.verb.deletes]
    recorder.record_files(_records(ice, "fail1", files[:1], at=t + 5, outcome="FAILED", error=FAILURE, attempt=4))
    recorder.append([ApplyFailed(apply_id="fail1", plan_id=ice.plan_id, reason=f"1 action failed: {FAILURE}",
                                 phase=1, finished_ms=t + 30_000)])
    t = T0 + DAY_MS + 3_600_000
    recorder.append([_start(ice, "again1", t)])
    commits = [a for a in ice.actions if not a.verb.deletes]
    recorder.record_files(_records(ice, "again1", commits, at=t + 5, outcome="COMMITTED")
                          + _records(ice, "again1", files, at=t + 20))
    recorder.append([_done(ice, "again1", start=t, end=t + 90_000, reclaimed=0,
                           counts={"COMMITTED": len(commits), "DELETED": len(files)})])

    # day 2: orphan cleaning is killed half way; day 3 'resume' goes on under the same apply id
    t = T0 + DAY_MS + 5 * 3_600_000
    recorder.append([_start(orphans, "crash1", t)])
    half = len(orphans.actions) // 2
    recorder.record_files(_records(orphans, "crash1", orphans.actions[:half], at=t + 10))
    t3 = T0 + 2 * DAY_MS + 3_600_000
    recorder.record_files(_records(orphans, "crash1", orphans.actions[half - 1:], at=t3, outcome=None))
    recorder.append([_done(orphans, "crash1", start=t, end=t3 + 5_000, reclaimed=sum(a.size or 0 for a in orphans.actions),
                           counts={"DELETED": len(orphans.actions)})])

    # day 3: the partition drop is killed and not resumed yet; the compaction is refused
    t = T0 + 2 * DAY_MS + 5 * 3_600_000
    recorder.append([_start(parts, "killed1", t)])
    recorder.record_files(_records(parts, "killed1", parts.actions[:1], at=t + 10, outcome="COMMITTED")[:0])
    recorder.append([ApplyRefused(plan_id=compact.plan_id, reason="the table changed since planning: snapshot 7 "
                                  "is no longer current; re-run 'lakesweep plan compact'", refused_ms=t + 60_000)])

    # day 3: a maintain run over two tables: one apply, skips, a failure, a dry-run plan
    t = T0 + 2 * DAY_MS + 8 * 3_600_000
    recorder.append([_start(expire, "maint1", t)])
    recorder.append([_done(expire, "maint1", start=t, end=t + 20_000, reclaimed=0, counts={})])
    paimon = f"paimon:{expire.table_location}"
    iceberg = "iceberg:lsreport/ns.t"
    results = [
        (paimon, "expire", MaintenanceOutcome.APPLIED, "applied: 0 B reclaimed", expire.plan_id, "maint1"),
        (paimon, "orphans", MaintenanceOutcome.SKIPPED, "no orphan files older than 168 h", None, None),
        (paimon, "compact", MaintenanceOutcome.SKIPPED, "not an Iceberg table", None, None),
        (iceberg, "expire", MaintenanceOutcome.FAILED, "catalog lsreport: <connection refused>", None, None),
        (iceberg, "orphans", MaintenanceOutcome.PLANNED, "dry run: plan written, 3 file(s), 12.0 KiB", None, None),
        (iceberg, "compact", MaintenanceOutcome.SKIPPED, "no bin has 5 files", None, None),
    ]
    recorder.append([MaintenanceResult(run_id="run1", cycle=1, table=tbl, operation=op, outcome=outcome,
                                       message=msg, plan_id=pid, recorded_ms=t + 30_000 + i,
                                       applied_by=by)
                     for i, (tbl, op, outcome, msg, pid, by) in enumerate(results)])
    return {"completed": "ok1", "failed": "fail1", "again": "again1", "resumed": "crash1", "killed": "killed1",
            "maintained": "maint1"}
