"""Iceberg snapshot expiry, planned as Iceberg's ``RemoveSnapshots`` decides and ``ReachableFileCleanup``
deletes: which snapshots expire is ``engine.iceberg.retention`` (the ref's own values first, then
``--retain-last`` / ``--older-than``, then the table's ``history.expire.*``, then 1 and 5 days). After the
commit: the manifest lists of expired snapshots; the manifests only they list; the data and delete files
that only those manifests name live (``ManifestFiles.readPaths``); and the statistics and
partition-statistics files only expired snapshots had (docs/design/iceberg.md#snapshot-expiry).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import AbstractSet, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.iceberg.retention import expire_rule
from lakesweep.engine.iceberg.table import DELETED
from lakesweep.engine.iceberg.kinds import EXPIRE_PHASES, FILE_KINDS, ExpireKind
from lakesweep.engine.iceberg.requirements import plan_requirements
from lakesweep.engine.iceberg.scopes import ExpireScope
from lakesweep.engine.paimon.requirements import AssertNowReached
from lakesweep.engine.plan import Action, CleanupPlan, OptionValue, summarize
from lakesweep.engine.plan_columns import ActionColumnsBuilder
from lakesweep.planner.iceberg.common import refuse_unwritable, relative_to, scope_base
from lakesweep.planner.iceberg.common import cannot_maintain
from lakesweep.planner.plan_kind import Maintained, PlanDescription, PlanKind, hours, utc

DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 86_400_000  # history.expire.max-snapshot-age-ms
DEFAULT_MIN_SNAPSHOTS = 1  # history.expire.min-snapshots-to-keep
LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class IcebergExpireOptions:
    """``older_than_ms``: the cut-off itself, or None for ``now - max_snapshot_age_ms``."""

    retain_last: int
    max_snapshot_age_ms: int | None
    older_than_ms: int | None
    max_ref_age_ms: int
    max_commit_retries: int
    sources: Mapping[str, OptionValue]

    def cutoff_ms(self, now_ms: int) -> int:
        return self.older_than_ms if self.older_than_ms is not None else now_ms - self.max_snapshot_age_ms


def _int_property(props: Mapping[str, str], key: str, default: int | None) -> tuple[int | None, str]:
    value = props.get(key)
    if value is None:
        return default, "default"
    try:
        return int(str(value).strip()), "table"
    except ValueError as e:
        raise PlanRejected(f"table property {key}={value!r} is not a whole number") from e


def resolve_expire_options(table_options: Mapping[str, str], *, retain_last: int | None = None,
                           older_than: str | None = None, max_commit_retries: int | None = None,
                           **_) -> IcebergExpireOptions:
    """``older_than``: a duration back from the plan's now (``5 d``, ``36 h``) or an instant (ISO-8601,
    epoch ms). Flags win over the table's ``history.expire.*`` properties, which win over Iceberg's
    defaults (1 snapshot, 5 days)."""
    from lakesweep.engine.timeutil import parse_duration_ms, parse_time_ms
    from lakesweep.planner.paimon.options import _UNIT_DURATION

    min_snaps, min_src = _int_property(table_options, "history.expire.min-snapshots-to-keep", DEFAULT_MIN_SNAPSHOTS)
    age, age_src = _int_property(table_options, "history.expire.max-snapshot-age-ms", DEFAULT_MAX_SNAPSHOT_AGE_MS)
    ref_age, ref_src = _int_property(table_options, "history.expire.max-ref-age-ms", LONG_MAX)
    at = None
    if retain_last is not None:
        if retain_last < 1:
            raise PlanRejected(f"--retain-last must be at least 1, got {retain_last}")
        min_snaps, min_src = retain_last, "flag"
    if older_than is not None:
        text = str(older_than).strip()
        if _UNIT_DURATION.match(text):
            age, at = parse_duration_ms(text), None
        else:
            age, at = None, parse_time_ms(text)
        age_src = "flag"
    retries = 5 if max_commit_retries is None else max_commit_retries
    if retries < 0:
        raise PlanRejected(f"--max-commit-retries must be at least 0, got {retries}")
    sources = {"retain_last": OptionValue(min_snaps, min_src),
               "older_than": OptionValue(older_than if older_than is not None else f"{age} ms", age_src),
               "max_ref_age_ms": OptionValue(ref_age, ref_src),
               "max_commit_retries": OptionValue(retries, "default" if max_commit_retries is None else "flag")}
    return IcebergExpireOptions(retain_last=min_snaps, max_snapshot_age_ms=age, older_than_ms=at,
                                max_ref_age_ms=ref_age, max_commit_retries=retries, sources=sources)


def snapshots_to_expire(table, *, now_ms: int, options: IcebergExpireOptions) -> tuple[list[int], list[str]]:
    """(expired snapshot ids, removed ref names) by ``RemoveSnapshots``' rule (``engine.iceberg.retention``)."""
    return expire_rule(table, now_ms=now_ms, cutoff_ms=options.cutoff_ms(now_ms), retain_last=options.retain_last,
                       max_ref_age_ms=options.max_ref_age_ms)


def expiry(table, *, now_ms: int, options: IcebergExpireOptions) -> tuple[list[int], list[str]]:
    """``snapshots_to_expire``, once the table is one lakesweep expires (writable, ``gc.enabled``)."""
    refuse_unwritable(table)
    if not table.gc_enabled():
        raise PlanRejected(f"Iceberg table {table.identifier} has gc.enabled=false: Iceberg refuses to expire "
                           f"snapshots with file cleanup there (its files may belong to other tables)")
    return snapshots_to_expire(table, now_ms=now_ms, options=options)


class FoundActions:
    """Actions as an expiry finds them, their paths made relative to the table's roots, gathered as Arrow
    columns a batch at a time (``ActionColumnsBuilder``: no Python string is held per file found); files
    outside the roots are kept and counted (``outside``, a warning of the plan)."""

    def __init__(self, table):
        self.roots = [table.location, *table.external_roots()]
        self.inside, self.cut = self.roots[0] + "/", len(self.roots[0]) + 1  # relative_to's common case
        self.actions = ActionColumnsBuilder()
        self.outside = 0

    def add(self, kind, path: str, size, sid, partition=None, times: int = 1) -> None:
        """``times``: how many entries named the file (each counts once outside the roots)."""
        rel = path[self.cut:] if path.startswith(self.inside) else relative_to(path, self.roots)
        if rel is None:
            self.outside += times
            return
        self.actions.add(kind, rel, snapshot_id=sid, partition=partition, size=size)

    def canonical(self) -> Sequence[Action]:
        """The actions found, as ``canonical_actions`` orders, de-duplicates and numbers them (once)."""
        return self.actions.canonical()


def expired_metadata(table, expired: list[int], gone: AbstractSet[int], kept_manifests: AbstractSet[str],
                     found: FoundActions) -> list[tuple[object, int]]:
    """Plan into ``found`` what the expired snapshots hold above their data files: each one's manifest list
    (the snapshot's own action and the file), each manifest no retained snapshot lists (attributed to the
    first expired snapshot listing it, in ``expired`` order) and the statistics files only expired snapshots
    have. Returns those manifests that may name a live file (``ManifestRef.holds_live``: a manifest of only
    DELETED entries names none), each with its snapshot, in that order: the ones whose entries are read."""
    kept_stats = {p for s, p, _ in table.statistics_files() if s not in gone}
    freed: dict[str, tuple[object, int]] = {}
    for sid in expired:
        snap = table.snapshots[sid]
        found.add(ExpireKind.EXPIRE_SNAPSHOT, _canon(snap.manifest_list), None, sid)
        found.add(ExpireKind.MANIFEST_LIST, _canon(snap.manifest_list), None, sid)
        for m in table.manifest_list(snap):
            if m.path not in kept_manifests and m.path not in freed:
                freed[m.path] = (m, sid)
                found.add(ExpireKind.MANIFEST, m.path, m.size, sid)
        for _, path, size in table.statistics_files(sid):
            if path not in kept_stats:
                found.add(ExpireKind.STATISTICS, path, size, sid)
    return [(m, sid) for m, sid in freed.values() if m.holds_live]


def plan_iceberg_expire(table, *, now_ms: int, options: IcebergExpireOptions) -> CleanupPlan:
    expired, removed_refs = expiry(table, now_ms=now_ms, options=options)
    gone = set(expired)
    retained = [s for s in sorted(table.snapshots) if s not in gone]
    found = FoundActions(table)
    if expired:
        kept = {m.path: m for sid in retained for m in table.manifest_list(table.snapshots[sid])}
        freed = expired_metadata(table, expired, gone, kept.keys(), found)
        # one pass on every core, the kept manifests first; no manifest's entries are held after it is used
        entries = table.read_each([*kept.values(), *(m for m, _ in freed)])
        kept_files = {f.path for _, refs in itertools.islice(entries, len(kept)) for f in refs if f.status != DELETED}
        # the order actions are found in does not matter: canonical_actions sorts them and keeps the earliest
        for (m, sid), (_, refs) in zip(freed, entries):
            for f in refs:
                if f.status != DELETED and f.path not in kept_files:
                    found.add(_ENTRY_KINDS[f.content], f.path, f.size, sid, f.partition)
    return expire_plan(table, now_ms=now_ms, options=options, expired=expired, removed_refs=removed_refs,
                       retained=len(retained), found=found)


def expire_plan(table, *, now_ms: int, options: IcebergExpireOptions, expired: list[int], removed_refs: list[str],
                retained: int, found: FoundActions) -> CleanupPlan:
    """The expiry plan of the actions ``found`` (each file planned once or more, as each expired snapshot
    finds it; ``canonical_actions`` keeps the earliest) and of the files outside the table's roots it met.
    Both the local planner and the one on Spark (``applier.iceberg_expire``) end here."""
    warnings: list[str] = []
    if found.outside:
        warnings.append(f"{found.outside} file(s) outside the table location and its write paths are kept")
    canonical = found.canonical()
    counts = {"expired_snapshots": len(expired), "retained_snapshots": retained}
    return CleanupPlan(
        kind="expire", format="iceberg", table_location=table.location, table_identity=table.uuid, branch="main",
        now_ms=now_ms, options=dict(options.sources),
        scope=ExpireScope(**scope_base(table), expired=expired, removed_refs=removed_refs,
                          cutoff_ms=options.cutoff_ms(now_ms), refs=dict(table.refs())),
        # a plan as of a later time would expire what Iceberg's rule keeps now
        requirements=(*plan_requirements(table, removed_refs=removed_refs), AssertNowReached(now_ms)),
        phases=EXPIRE_PHASES, actions=canonical,
        stats={**counts, "summary": summarize(canonical), "warnings": warnings},
    )


_FILE_KIND = {0: "data-file", 1: "position-delete-file", 2: "equality-delete-file"}
_ENTRY_KINDS = {content: FILE_KINDS[kind] for content, kind in _FILE_KIND.items()}


def _canon(location: str) -> str:
    from lakesweep.engine.iceberg.table import canonical

    return canonical(location)


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

def _plan(table, *, now_ms: int, options, read=None) -> CleanupPlan:
    refuse_future_expiry(table, now_ms)
    return plan_iceberg_expire(table, now_ms=now_ms, options=options)


def refuse_future_expiry(table, now_ms: int) -> None:
    """Apply refuses an expiry as of a time the clock has not reached (``AssertNowReached``: Iceberg's rule
    would expire, as of then, snapshots that it keeps now): say so now, not at apply."""
    from lakesweep.engine.errors import PlanRejected
    from lakesweep.engine.paimon.requirements import AssertNowReached
    from lakesweep.engine.timeutil import format_time_ms, wall_clock_ms

    if AssertNowReached(now_ms).problems(table):
        raise PlanRejected(f"--now {format_time_ms(now_ms)} is after the current time {format_time_ms(wall_clock_ms())}"
                           ": apply would refuse the plan until then. Plan snapshot expiry as of the current time or "
                           "an earlier one")


def describe_iceberg_expire(plan: CleanupPlan) -> PlanDescription:
    expired, refs = plan.scope.expired, plan.scope.removed_refs
    files = plan.stats.get("summary", {}).get("files", 0)
    if not expired and not refs:
        return PlanDescription(nothing_to_do=True, nothing_label="Nothing to expire",
                               scope=f"no snapshot is older than {utc(plan.scope.cutoff_ms)} beyond what "
                                     f"refs and retain-last keep ({plan.stats.get('retained_snapshots', 0)} kept).")
    scope = (f"expires {len(expired)} snapshot(s) older than {utc(plan.scope.cutoff_ms)}, then deletes "
             f"{files} file(s) only they reached; keeps {plan.stats.get('retained_snapshots', 0)} snapshot(s)")
    notes = (f"refs removed (past max-ref-age-ms): {', '.join(refs)}",) if refs else ()
    return PlanDescription(nothing_to_do=False, scope=scope, nothing_label="Nothing to expire", notes=notes,
                           document={"expired_snapshots": expired, "removed_refs": refs})


def _flags(options, th) -> dict:
    return {"retain_last": None if "history.expire.min-snapshots-to-keep" in options else th.max_snapshots_to_keep,
            "older_than": None if "history.expire.max-snapshot-age-ms" in options
            else hours(th.snapshot_retention_hours), "max_commit_retries": th.max_commit_retries}


def _detect(view, th, now_ms: int) -> str | None:
    reason = cannot_maintain(view)
    if reason is not None:
        return reason
    o = resolve_expire_options(view.options, **_flags(view.options, th))
    expired, removed = expire_rule(view, now_ms=now_ms, cutoff_ms=o.cutoff_ms(now_ms), retain_last=o.retain_last,
                                   max_ref_age_ms=o.max_ref_age_ms)
    if not expired and not removed:
        return f"no snapshot to expire ({len(view.snapshots)} snapshot(s), retention kept them all)"
    return None


def _applied(plan: CleanupPlan, counts) -> str:
    return (f"expired {len(plan.scope.expired)} snapshot(s), deleted {counts.get('DELETED', 0)} "
            "unreferenced file(s)")


KIND = PlanKind("expire", resolve_options=resolve_expire_options, plan=_plan, describe=describe_iceberg_expire,
                format="iceberg", maintain=Maintained(order=20, flags=_flags, applied=_applied, detect=_detect))
