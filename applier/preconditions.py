"""Before apply touches anything: is this the plan's table, is the plan still safe, are its paths sane?

Later snapshots committed by writers never make a plan stale; what does is anything that changes what
the plan's range protects (spec B-1): tags, consumers, snapshots of the range, schema, branches.
"""

from __future__ import annotations

from typing import AbstractSet

from engine.errors import PlanRejected, StalePlan
from engine.plan import ActionKind, CleanupPlan
from engine.table import PaimonTable
from planner.fingerprint import table_fingerprint, table_identity

from applier.actions import resolve_action_path
from applier.local import external_roots


def verify_table(plan: CleanupPlan, table: PaimonTable) -> None:
    """The plan must be for this table (same identity and branch)."""
    if plan.kind != "expire":
        raise PlanRejected(f"plan kind '{plan.kind}' is not supported by this lakesweep")
    identity = table_identity(table)
    if identity != plan.table_identity:
        raise PlanRejected(
            f"the plan is for another table: it was made for {plan.table_location} ({plan.table_identity}), "
            f"but {table.location} is {identity}"
        )
    if table.branch != plan.branch:
        raise PlanRejected(f"the plan is for branch '{plan.branch}', not '{table.branch}'")


def verify_paths(plan: CleanupPlan, table: PaimonTable) -> None:
    """Every action must resolve inside the table root or its declared external paths."""
    roots = external_roots(table.options)
    for a in plan.actions:
        resolve_action_path(table.location, a.path, roots)
        if a.kind == ActionKind.WRITE_CHANGELOG:
            resolve_action_path(table.location, a.source or "", roots)


def check_not_stale(plan: CleanupPlan, table: PaimonTable, *, done_snapshot_deletes: AbstractSet[int] = frozenset()) -> None:
    """Raise ``StalePlan`` naming what changed. ``done_snapshot_deletes`` are snapshot ids this same plan
    already deleted (a resumed apply), which may be missing."""
    if not plan.deletes_anything or plan.end is None:
        return
    begin, end = plan.begin, plan.end
    old = plan.fingerprint
    now = table_fingerprint(table)
    problems: list[str] = []

    if now.schema_id != old.schema_id:
        problems.append(f"the schema changed from {old.schema_id} to {now.schema_id}")
    if set(now.branches) != set(old.branches):
        added = sorted(set(now.branches) - set(old.branches))
        removed = sorted(set(old.branches) - set(now.branches))
        problems.append(f"branches changed (added {added or 'none'}, removed {removed or 'none'})")

    # A tag at or after 'end' protects nothing the plan deletes; any tag below it can.
    for name in sorted(set(old.tags) | set(now.tags)):
        was, is_ = old.tags.get(name), now.tags.get(name)
        if was == is_:
            continue
        touches = any(x is not None and x < end for x in (was, is_))
        if not touches:
            continue
        if was is None:
            problems.append(f"tag '{name}' was added at snapshot {is_}, inside the plan's protection range (< {end})")
        elif is_ is None:
            problems.append(f"tag '{name}' (snapshot {was}) was removed")
        else:
            problems.append(f"tag '{name}' moved from snapshot {was} to {is_}")

    consumer_only = bool(plan.options.get("consumer.changelog-only") and plan.options["consumer.changelog-only"].value)
    if not consumer_only:
        for cid, nxt in sorted(now.consumers.items()):
            if nxt < end and old.consumers.get(cid) != nxt:
                problems.append(f"consumer '{cid}' now reads from snapshot {nxt}, inside the plan's range [{begin}, {end})")

    planned = sorted(a.snapshot_id for a in plan.actions if a.kind == ActionKind.SNAPSHOT)
    missing = [sid for sid in planned if sid not in done_snapshot_deletes and not table.fileio.exists(table.snapshot_path(sid))]
    if missing:
        problems.append(
            f"snapshot(s) {missing} of the plan's range are gone, removed by something other than this plan "
            "(another expiry ran?)"
        )
    if not table.fileio.exists(table.snapshot_path(end)):
        problems.append(f"the plan's end snapshot {end} no longer exists")

    if problems:
        raise StalePlan(
            f"the plan {plan.plan_id} is stale: " + "; ".join(problems) + ". Re-run 'lakesweep plan expire'."
        )
