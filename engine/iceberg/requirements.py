"""What an Iceberg plan relies on, checked against the live table before apply touches anything and again
before each phase (pyiceberg's ``AssertTableUUID`` and ``AssertRefSnapshotId``, and more).

The catalog checks the same facts again inside every commit lakesweep makes (``engine.iceberg.commit``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.plan import Action, ActionCheck, Requirement, requirement

COMMIT_ID_PROPERTY = "lakesweep.commit-id"  # the snapshot summary key a lakesweep commit carries
ORPHAN_MIN_AGE_MS = 3_600_000  # an orphan younger than this is deleted only with --force


@requirement
@dataclass(frozen=True, slots=True)
class AssertTableUUID(Requirement):
    """The catalog entry still names the table the plan was made for (its ``table-uuid``): a table dropped
    and created again under the same name is another table."""

    TYPE = "iceberg.table-uuid"
    uuid: str
    identifier: str

    def problems(self, view, *, done: AbstractSet[str] = frozenset()) -> list[str]:
        if view.uuid != self.uuid:
            raise PlanRejected(f"Iceberg table {self.identifier} is now table {view.uuid}, not {self.uuid} the plan "
                               f"was made for; nothing was done")
        return []


@requirement
@dataclass(frozen=True, slots=True)
class AssertRefsUnchanged(Requirement):
    """Every branch and tag points where it did at planning, and none was added: a tag or branch created
    since can pin a snapshot the plan expires, and a moved branch means the plan's view is old.

    Tolerated: a ref in ``removed`` that is gone (the plan removes it), and a branch whose head is a
    snapshot lakesweep committed (``COMMIT_ID_PROPERTY``) directly on the planned head once this apply
    has done its commit (a resumed apply).

    Checked only by ``apply --strict``: by default an apply goes ahead on a table that has moved, and
    each commit re-reads the live refs instead (``engine.iceberg.commit``)."""

    TYPE = "iceberg.refs-unchanged"
    STRICT_ONLY = True
    refs: Mapping[str, int]
    removed: tuple[str, ...] = ()

    def __post_init__(self):
        # as stored: a JSON object and a list; their values are checked by ``Requirement.from_json``
        object.__setattr__(self, "refs", dict(sorted(self.refs.items())) if isinstance(self.refs, Mapping)
                           else self.refs)
        if isinstance(self.removed, list):
            object.__setattr__(self, "removed", tuple(self.removed))

    def problems(self, view, *, done: AbstractSet[str] = frozenset()) -> list[str]:
        live = view.refs()
        found = []
        for name, sid in sorted(self.refs.items()):
            now = live.get(name)
            if now == sid:
                continue
            if now is None:
                if name not in self.removed:
                    found.append(f"ref '{name}' (snapshot {sid} at planning) is gone")
                continue
            snap = view.snapshots.get(now)
            ours = (snap is not None and snap.parent_snapshot_id == sid and done_any(done)
                    and COMMIT_ID_PROPERTY in (snap.summary.additional_properties if snap.summary else {}))
            if not ours:
                found.append(f"ref '{name}' now points at snapshot {now}, not {sid} as at planning")
        for name in sorted(set(live) - set(self.refs)):
            found.append(f"ref '{name}' (snapshot {live[name]}) was created since planning")
        return found


def done_any(done) -> bool:
    """Whether ``done`` (a set or a membership view of done locations) holds anything."""
    ids = getattr(done, "ids", None)
    return bool(ids) if ids is not None else bool(done)


@requirement
@dataclass(frozen=True, slots=True)
class AssertGcEnabled(Requirement):
    """``gc.enabled`` is not false: Iceberg refuses to delete files of such a table (its files may belong to
    other tables too), and so does lakesweep."""

    TYPE = "iceberg.gc-enabled"

    def problems(self, view, *, done: AbstractSet[str] = frozenset()) -> list[str]:
        if not view.gc_enabled():
            raise PlanRejected(f"Iceberg table {view.identifier} has gc.enabled=false: deleting its files may "
                               f"corrupt other tables, so nothing is deleted")
        return []


@requirement
@dataclass(frozen=True, slots=True)
class AssertOrphansUnreferenced(ActionCheck):
    """Each orphan candidate is, at apply time, still named by no metadata of the live table, still older
    than the cut-off (a file rewritten since is young again), and not hidden (``engine.iceberg.hidden``: a
    plan that names one was edited); any other is skipped, not deleted."""

    TYPE = "iceberg.orphans-unreferenced"
    older_than_ms: int
    force: bool = False

    def problems(self, view, *, done: AbstractSet[str] = frozenset()) -> list[str]:
        from lakesweep.engine.timeutil import format_time_ms, wall_clock_ms

        if not self.force and self.older_than_ms > wall_clock_ms() - ORPHAN_MIN_AGE_MS:
            return [f"its cut-off {format_time_ms(self.older_than_ms)} is less than 1 h ago: files a writer has not "
                    f"committed yet would be deleted"]
        return []

    def skipped(self, view, actions: Sequence[Action], targets: Sequence[str]) -> AbstractSet[int]:
        from lakesweep.engine.iceberg.hidden import below_root, hidden_partition_prefixes, is_hidden
        from lakesweep.engine.iceberg.reachability import all_referenced

        used = all_referenced(view)
        roots = [view.location, *view.external_roots()]
        prefixes = hidden_partition_prefixes(view)
        skip = set()
        for a in actions:
            full = targets[a.action_id]
            below = below_root(full, roots)
            if full in used or (below is not None and is_hidden(below, prefixes)):  # a forged plan's hidden file
                skip.add(a.action_id)
                continue
            info = view.fileio.info(full)
            if info is not None and (info.mtime_ms is None or info.mtime_ms >= self.older_than_ms):
                skip.add(a.action_id)
        return skip


def plan_requirements(view, *, removed_refs: Sequence[str] = (), gc: bool = True) -> tuple[Requirement, ...]:
    """What every Iceberg plan relies on: the table, its refs, and (for plans that delete) ``gc.enabled``."""
    reqs: list[Requirement] = [AssertTableUUID(view.uuid, view.identifier),
                               AssertRefsUnchanged(dict(view.refs()), tuple(sorted(removed_refs)))]
    if gc:
        reqs.append(AssertGcEnabled())
    return tuple(reqs)
