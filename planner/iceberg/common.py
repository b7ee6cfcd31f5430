"""What every Iceberg plan shares: where its table is found, and its paths relative to the table."""

from __future__ import annotations

from typing import Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.planner.plan_kind import PlanFlag

# The option of every Iceberg kind that commits.
MAX_COMMIT_RETRIES = PlanFlag("max_commit_retries", int, "Iceberg: how often apply retries a commit the catalog "
                              "refused, after 50 ms, doubling, at most 5 s, re-checking the plan each time "
                              "(default 5).")


def scope_base(table) -> dict:
    """How apply finds the table again (its catalog and name) and the snapshot the plan saw as current."""
    return {"catalog": table.catalog_name, "identifier": table.identifier,
            "current_snapshot_id": table.current_snapshot_id}


def relative_to(path: str, roots: Sequence[str]) -> str | None:
    """``path`` as a plan stores it: relative to the table location (the first root) when under it, the
    full location when under another root, None when under none (lakesweep keeps such files)."""
    if path.startswith(roots[0] + "/"):
        return path[len(roots[0]) + 1:]
    if any(path.startswith(r + "/") for r in roots[1:]):
        return path
    return None


def refuse_unwritable(table) -> None:
    """Refuse (``PlanRejected``) to plan an operation that commits on a table lakesweep cannot commit to (its
    format version): said now, not when apply reaches the commit."""
    reason = table.cannot_commit()
    if reason is not None:
        raise PlanRejected(reason)


def cannot_maintain(table) -> str | None:
    """Why ``maintain`` skips an operation that commits, before looking further: the reason planning would
    refuse it (``refuse_unwritable``), or that the table has no current snapshot; None when neither."""
    reason = table.cannot_commit()
    if reason is not None:
        return reason
    if table.current_snapshot_id is None:
        return "no current snapshot"
    return None
