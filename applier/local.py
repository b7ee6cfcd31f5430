"""Executing a plan in this process, in phase order, without Spark or a journal.

Used by tests to compare a plan's effect with Paimon's own expiry, and as the reference the Spark
applier must agree with.
"""

from __future__ import annotations

from lakesweep.engine.fileio import FileIO, fileio_for
from lakesweep.engine.plan import CleanupPlan

from lakesweep.applier.actions import ActionResult, Outcome, execute_with_retry


def apply_locally(plan: CleanupPlan, fileio: FileIO | None = None, *, external: list[str] = ()) -> list[ActionResult]:
    """Run every action in order (actions are already sorted by phase). Stops after a phase with failures."""
    fileio = fileio or fileio_for(plan.table_location)
    results: list[ActionResult] = []
    phase = None
    for action in plan.actions:
        if phase is not None and action.phase != phase and any(r.outcome == Outcome.FAILED for r in results):
            break
        phase = action.phase
        results.append(execute_with_retry(fileio, plan.table_location, action, external_roots=external))
    return results
