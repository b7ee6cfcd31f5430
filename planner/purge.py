"""``lakesweep plan purge``: delete for good the files ``apply --quarantine`` put aside once their retention has
passed. One kind for both formats (``engine.purge``); its registry entries are ``KIND`` (Paimon) and
``ICEBERG_KIND``. The planner is pure: its input is what the journal holds in quarantine
(``engine.purge.Quarantined``, read by the caller) and ``now_ms``. Design: docs/design/quarantine.md#purge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.plan import Action, CleanupPlan, OptionValue, canonical_actions, summarize
from lakesweep.engine.purge import PURGE, PURGE_PHASES, PurgeKind, Quarantined, emptied_dirs, quarantine_folder
from lakesweep.engine.quarantine import VersionedDelete
from lakesweep.planner.plan_kind import Maintained, PlanDescription, PlanKind, refuse_future_now, utc


@dataclass(frozen=True)
class PurgeOptions:
    journal: str
    records: tuple[Quarantined, ...]  # what the journal holds in quarantine (``journal.quarantined``)
    sources: Mapping[str, OptionValue]


def resolve_purge_options(table_options: Mapping[str, str], *, overrides: Mapping[str, str] | None = None,
                          journal: str | None = None, records: Sequence[Quarantined] = (), **_) -> PurgeOptions:
    """``journal``: the journal whose quarantine is purged (its ``records``, read by the caller)."""
    if not journal:
        raise PlanRejected("plan purge needs --journal: the journal the quarantining apply wrote")
    return PurgeOptions(str(journal), tuple(records), {"journal": OptionValue(str(journal), "flag")})


def plan_purge(records: Sequence[Quarantined], *, location: str, external_roots: Sequence[str], now_ms: int,
               options: PurgeOptions, table_identity: str, requirements: tuple, scope, fmt: str) -> CleanupPlan:
    """Plan the deletion of the table's (``location``) files in quarantine whose retention has passed at
    ``now_ms`` (``quarantined_ms + retention_ms <= now_ms``): a moved file in a plan's quarantine folder of the
    table's roots; a versioned S3 delete's version; and once a quarantine plan has no file left waiting, the
    folders its files leave empty, deepest first. A restored or purged file is never planned; one moved to a
    quarantine root outside the table's roots is left (a warning says so)."""
    roots = (location, *external_roots)
    mine = [q for q in records if q.table_location == location]
    held = [q for q in mine if q.in_quarantine]
    due = [q for q in held if q.due_ms <= now_ms]
    waiting = [q for q in held if q.due_ms > now_ms]
    actions: list[Action] = []
    outside = 0
    purged_from: set[str] = set()
    for q in due:
        if VersionedDelete.parse(q.where) is not None:
            actions.append(Action(PurgeKind.QUARANTINED_VERSION, q.path, size=q.size, source=q.where))
            purged_from.add(q.plan_id)
        elif quarantine_folder(q.where, roots) is None:
            outside += 1
        else:
            actions.append(Action(PurgeKind.QUARANTINED_FILE, _relative(q.where, location), size=q.size,
                                  source=q.where))
            purged_from.add(q.plan_id)
    still = {q.plan_id for q in waiting}
    for plan_id in sorted(purged_from - still):
        folders: dict[str, list[str]] = {}
        for q in mine:
            found = quarantine_folder(q.where, roots) if q.plan_id == plan_id else None
            if found is not None:
                folders.setdefault(found[0], []).append(q.where)
        for folder, wheres in sorted(folders.items()):
            actions += [Action(PurgeKind.QUARANTINE_DIR, _relative(d, location), depth=depth)
                        for d, depth in emptied_dirs(wheres, folder)]
    planned = canonical_actions(actions)
    warnings = []
    if outside:
        warnings.append(f"{outside} quarantined file(s) whose retention has passed lie in a quarantine root outside "
                        "the table's roots: a purge deletes only in the table's own _lakesweep_quarantine; delete "
                        "them there yourself once you no longer need them")
    stats = {
        "due": len(due) - outside, "waiting": len(waiting), "outside_roots": outside,
        "next_due_ms": min((q.due_ms for q in waiting), default=None),
        "restored": sum(1 for q in mine if q.restored), "purged_before": sum(1 for q in mine if q.purged),
        "summary": summarize(planned), "warnings": warnings,
    }
    return CleanupPlan(kind=PURGE, format=fmt, table_location=location, table_identity=table_identity, branch="main",
                       now_ms=now_ms, options=dict(options.sources), scope=scope, requirements=requirements,
                       phases=PURGE_PHASES, actions=planned, stats=stats)


def _relative(full: str, location: str) -> str:
    return full[len(location) + 1:] if full.startswith(location + "/") else full


def _quarantines(records: Sequence[Quarantined], location: str, now_ms: int) -> list[str]:
    return sorted({q.plan_id for q in records if q.table_location == location and q.in_quarantine
                   and q.due_ms <= now_ms})


def _plan_paimon(table, *, now_ms: int, options: PurgeOptions, read=None) -> CleanupPlan:
    from lakesweep.engine.paimon.paths import external_roots
    from lakesweep.engine.paimon.requirements import AssertNowReached, AssertTableIdentity
    from lakesweep.engine.paimon.scopes import PurgeScope
    from lakesweep.engine.paimon.state import table_identity

    if table.branch != "main":
        raise PlanRejected("a purge covers the whole table's quarantine: open its main branch")
    refuse_future_now(table, now_ms, PURGE)
    identity = table_identity(table)
    return plan_purge(options.records, location=table.location, external_roots=external_roots(table.options),
                      now_ms=now_ms, options=options, table_identity=identity, fmt="paimon",
                      requirements=(AssertTableIdentity(identity, table.location, "main"), AssertNowReached(now_ms)),
                      scope=PurgeScope(quarantines=_quarantines(options.records, table.location, now_ms)))


def _plan_iceberg(table, *, now_ms: int, options: PurgeOptions, read=None) -> CleanupPlan:
    from lakesweep.engine.iceberg.requirements import plan_requirements
    from lakesweep.engine.iceberg.scopes import PurgeScope
    from lakesweep.engine.paimon.requirements import AssertNowReached
    from lakesweep.planner.iceberg.common import scope_base

    refuse_future_now(table, now_ms, PURGE)
    return plan_purge(options.records, location=table.location, external_roots=table.external_roots(),
                      now_ms=now_ms, options=options, table_identity=table.uuid, fmt="iceberg",
                      requirements=(*plan_requirements(table), AssertNowReached(now_ms)),
                      scope=PurgeScope(**scope_base(table),
                                       quarantines=_quarantines(options.records, table.location, now_ms)))


def describe_purge(plan: CleanupPlan) -> PlanDescription:
    """A purge: how many quarantined files (and of which plans) it deletes, and what still waits."""
    stats, quarantines = plan.stats, list(plan.scope.quarantines)
    files = stats.get("due", 0)
    waiting, next_due = stats.get("waiting", 0), stats.get("next_due_ms")
    notes = [f"{waiting} quarantined file(s) wait for their retention" + (f", the first until {utc(next_due)}"
                                                                        if next_due is not None else "")]
    if stats.get("restored"):
        notes.append(f"{stats['restored']} restored file(s) are never purged")
    notes.append("apply checks each file again in its journal: quarantined there, not restored, retention passed")
    scope = (f"deletes for good {files} quarantined file(s) of plan(s) {', '.join(quarantines)} whose retention "
             f"has passed" if plan.actions else "no quarantined file's retention has passed.")
    return PlanDescription(nothing_to_do=not plan.actions, scope=scope, nothing_label="Nothing to purge",
                           notes=tuple(notes), document={"quarantines": quarantines, "waiting": waiting,
                                                         "next_due_ms": next_due})


def _applied(plan: CleanupPlan, counts) -> str:
    return f"purged {counts.get('DELETED', 0)} quarantined file(s) and folder(s)"


# maintain runs it last, on a table whose quarantine its journal holds, with that journal (maintain.run)
MAINTAINED = Maintained(order=90, flags=lambda options, th: {}, applied=_applied,
                        nothing_message="no quarantined file's retention has passed")
KIND = PlanKind(PURGE, resolve_options=resolve_purge_options, plan=_plan_paimon, describe=describe_purge,
                format="paimon", maintain=MAINTAINED)
ICEBERG_KIND = PlanKind(PURGE, resolve_options=resolve_purge_options, plan=_plan_iceberg, describe=describe_purge,
                        format="iceberg", maintain=MAINTAINED)
