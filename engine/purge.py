"""Purging a quarantine (``lakesweep plan purge``): one plan kind for both formats, deleting for good what
``apply --quarantine`` put aside once its retention has passed. Here: its action kinds and phases, the
journaled quarantine a planner reads (``Quarantined``), and the checks apply makes of a purge plan's paths
and of its journal whatever the plan says (``purge_targets``, ``check_journaled``). Why one kind, and the
rules: docs/design/quarantine.md#purge.
"""

from __future__ import annotations

import enum
import posixpath
from dataclasses import dataclass
from typing import Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paths import PathResolver, refuse_symlinked_parents
from lakesweep.engine.plan import (ActionKindSpec, ActionOrder, CleanupPlan, PhaseMode, PhaseSpec, Verb,
                                   register_action_kinds)
from lakesweep.engine.quarantine import QUARANTINE_DIR, VersionedDelete
from lakesweep.engine.timeutil import format_time_ms

PURGE = "purge"  # the plan kind, the same name in every format

PURGE_PHASES: tuple[PhaseSpec, ...] = (
    PhaseSpec("purge_files", PhaseMode.BULK),
    PhaseSpec("purge_empty_dirs", PhaseMode.ORDERED),  # deepest first, once their files are gone
)


class PurgeKind(enum.StrEnum):
    """What a purge deletes. ``source`` is always the journaled ``where`` of the quarantine (the record's
    ``moved_to``), which apply finds again in its journal."""

    QUARANTINED_FILE = "purge-quarantined-file"  # path: the moved file, in <root>/_lakesweep_quarantine/<plan>/
    QUARANTINED_VERSION = "purge-quarantined-version"  # path: the file's own key; a versioned S3 delete
    QUARANTINE_DIR = "purge-quarantine-dir"  # a directory of a plan's quarantine folder (or it) left empty


SPECS: dict[str, ActionKindSpec] = {
    PurgeKind.QUARANTINED_FILE.value: ActionKindSpec(PurgeKind.QUARANTINED_FILE.value, Verb.DELETE_FILE, 1),
    PurgeKind.QUARANTINED_VERSION.value: ActionKindSpec(PurgeKind.QUARANTINED_VERSION.value, Verb.PURGE_VERSION, 1),
    PurgeKind.QUARANTINE_DIR.value: ActionKindSpec(PurgeKind.QUARANTINE_DIR.value, Verb.DELETE_EMPTY_DIR, 2,
                                                   ActionOrder(0, "deepest")),
}
register_action_kinds(SPECS, PurgeKind)
KINDS = {k.value: k for k in PurgeKind}


@dataclass(frozen=True, slots=True)
class Quarantined:
    """One file ``apply --quarantine`` put aside, as the journal tells it: the plan and action that did, the
    action's path, where it went (``where``), when (the record's time) and the apply's retention; whether a
    later record restored it, or a purge journaled its deletion since."""

    table_location: str
    plan_id: str
    apply_id: str
    action_id: int
    path: str
    where: str
    size: int | None
    quarantined_ms: int
    retention_ms: int
    restored: bool = False
    purged: bool = False

    @property
    def due_ms(self) -> int:
        """When its retention has passed: a purge as of this time or later deletes it."""
        return self.quarantined_ms + self.retention_ms

    @property
    def in_quarantine(self) -> bool:
        return not self.restored and not self.purged


def quarantine_folder(location: str, roots: Sequence[str]) -> tuple[str, str] | None:
    """(the quarantine folder of one plan, ``<root>/_lakesweep_quarantine/<plan id>``, and the plan id) that
    the full ``location`` lies in, below one of ``roots``; None when it lies in none."""
    for root in sorted((r.rstrip("/") for r in roots), key=len, reverse=True):
        head = f"{root}/{QUARANTINE_DIR}/"
        if location.startswith(head):
            plan_id = location[len(head):].split("/", 1)[0]
            if plan_id:
                return head + plan_id, plan_id
    return None


def purge_targets(plan: CleanupPlan, location: str, external_roots: Sequence[str], *, local: bool) -> list[str]:
    """Each action's full location, by action id; refuse (``PlanRejected``) a purge plan holding any action
    other than a purge kind with its verb and phase, a moved file or a directory that is not in a plan's
    quarantine folder of the table's roots (``<root>/_lakesweep_quarantine/<plan id>/``), a file whose
    ``source`` is not its own location, a version whose ``source`` names no versions, or (local storage) a
    path reached through a symbolic link."""
    resolver = PathResolver(location, external_roots)
    roots = resolver.allowed
    checked: set[str] = set()
    targets: list[str] = []
    for a in plan.actions:
        def refuse(why: str):
            raise PlanRejected(f"action {a.action_id} ({a.kind} {a.path!r}) is refused: {why}; the purge plan is "
                               "refused and nothing was deleted")

        kind = KINDS.get(str(a.kind))
        spec = SPECS.get(str(a.kind))
        if kind is None or spec is None:
            refuse("a purge deletes only quarantined files, their versions and their emptied folders")
        if a.verb is not spec.verb or a.phase != spec.phase:
            refuse(f"a {kind} action is a {spec.verb} in phase {spec.phase}, not a {a.verb} in phase {a.phase}")
        full = resolver.full(a.path)
        folder = quarantine_folder(full, roots)
        if kind is PurgeKind.QUARANTINED_VERSION:
            if VersionedDelete.parse(a.source or "") is None:
                refuse(f"its source {a.source!r} names no versioned delete (s3-version:<version>:<marker>)")
            if folder is not None:
                refuse("a versioned delete leaves the file at its own key, never in a quarantine folder")
        elif folder is None or (kind is PurgeKind.QUARANTINED_FILE and full == folder[0]):
            refuse(f"it is not in a quarantine folder of the table ({QUARANTINE_DIR}/<plan id>/ under "
                   f"{' or '.join(roots)})")
        elif kind is PurgeKind.QUARANTINED_FILE and a.source != full:
            refuse(f"its source {a.source!r} is not where the file is ({full})")
        if local and full[:full.rfind("/")] not in checked:
            refuse_symlinked_parents(full, resolver.containing_root(full), checked)
        targets.append(full)
    return targets


def check_journaled(plan: CleanupPlan, targets: Sequence[str], journaled: Sequence[Quarantined], *, now_ms: int,
                    location: str, external_roots: Sequence[str], skip: frozenset = frozenset()) -> None:
    """Refuse (``PlanRejected``) a purge plan unless every action (but those in ``skip``, done by an earlier
    apply of the plan) deletes a file the journal holds in quarantine (its latest record QUARANTINED, not
    restored since) whose retention has passed at ``now_ms``, the apply's own clock: a moved file at the
    location the journal says; a version of the file at the key the journal says; a directory in the
    quarantine folder of a plan that quarantined files of this table."""
    resolver = PathResolver(location, external_roots)
    held = {q.where: q for q in journaled if q.table_location == plan.table_location and not q.restored}
    plans = {q.plan_id for q in journaled if q.table_location == plan.table_location}
    for a in plan.actions:
        if a.action_id in skip:
            continue

        def refuse(why: str):
            raise PlanRejected(f"action {a.action_id} ({a.kind} {a.path!r}) is refused: {why}; the purge plan is "
                               "refused and nothing was deleted")

        full = targets[a.action_id]
        if a.kind == PurgeKind.QUARANTINE_DIR:
            folder = quarantine_folder(full, resolver.allowed)
            if folder is None or folder[1] not in plans:
                refuse("this journal holds no quarantine of the table in that folder")
            continue
        q = held.get(a.source or "")
        if q is None:
            refuse("this journal does not hold the file in quarantine (never quarantined here, or restored since)")
        if a.kind == PurgeKind.QUARANTINED_VERSION and resolver.full(q.path) != full:
            refuse(f"the journal's versioned delete {q.where} is of {q.path}, not of this key")
        if q.due_ms > now_ms:
            refuse(f"it was quarantined at {format_time_ms(q.quarantined_ms)} with a retention up to "
                   f"{format_time_ms(q.due_ms)}, which has not passed; re-run 'lakesweep plan purge' after it")


def emptied_dirs(wheres: Sequence[str], folder: str) -> list[tuple[str, int]]:
    """Every directory between each of ``wheres`` (files in the quarantine folder ``folder``) and the
    folder itself, the folder included, with its depth below the folder's parent."""
    base = posixpath.dirname(folder)
    dirs: set[str] = set()
    for where in wheres:
        d = posixpath.dirname(where)
        while (d == folder or d.startswith(folder + "/")) and d not in dirs:
            dirs.add(d)
            if d == folder:
                break
            d = posixpath.dirname(d)
    return sorted((d, d[len(base):].count("/")) for d in dirs)


def retention_of(quarantine: Mapping | None) -> int | None:
    """The retention an ``ApplyStarted.quarantine`` (a ``QuarantineSpec``'s JSON) names, None when it names
    none."""
    value = (quarantine or {}).get("retention_ms")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
