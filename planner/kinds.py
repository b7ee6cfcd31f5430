"""The kinds of plan lakesweep makes: a registry the CLI and the renderers read.

An entry (``PlanKind``) gives a kind's name (the plan's ``kind``, and ``lakesweep plan NAME``), its option
resolver and its planning function as the CLI calls them, and ``describe(plan)``: what a plan of this kind
does, as plain data (``PlanDescription``) that a generic renderer prints. Only an entry's ``describe``
reads kind-specific plan fields. Adding a kind is one entry here plus one short command in
``cli/plan_cmds.py``.

Every kind's planner also leaves in ``plan.stats`` what the generic renderer shows for any plan:
``summary`` (``engine.plan.summarize`` of the actions) and ``warnings`` (a list of strings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from engine.plan import CleanupPlan
from engine.units import human_bytes


@dataclass(frozen=True, slots=True)
class PlanDescription:
    """What a plan does, in plain text lines (no markup) a renderer prints as they are."""

    # The plan does none of the work its kind exists for (it may still carry housekeeping: ``remaining``).
    nothing_to_do: bool
    # One line: what the plan covers, or, when there is nothing to do, why.
    scope: str
    # How the kind says there is nothing to do.
    nothing_label: str = "Nothing to do"
    # When there is nothing to do: what apply still does.
    remaining: tuple[str, ...] = ()
    # What the plan protected, deferred or was bounded by: shown whether or not there is anything to do.
    notes: tuple[str, ...] = ()
    # Keys this kind adds to the plan's JSON document (``lakesweep show --output json``), kept for scripts.
    document: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PlanKind:
    name: str
    # ``resolve_options(table_options, *, overrides, **flags)``: flags as the user gave them (None: not given)
    # over ``overrides`` (``--option key=value``) over the table's options over defaults, each value with
    # its source. Raises ``PlanRejected`` on a bad value.
    resolve_options: Callable[..., Any]
    # ``plan(table, *, now_ms, options)``: the pure planner.
    plan: Callable[..., CleanupPlan]
    describe: Callable[[CleanupPlan], PlanDescription]


# The entries import their planner when called: describing a plan read from a file needs none.

def _resolve_expire(table_options, **flags):
    from planner.paimon.options import resolve_expire_options

    return resolve_expire_options(table_options, **flags)


def _plan_expire(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.paimon.expire import plan_expire

    return plan_expire(table, now_ms=now_ms, options=options)


def describe_expire(plan: CleanupPlan) -> PlanDescription:
    """A snapshot expiry: the range [begin, end) and what bounded it, or why nothing expires."""
    stats = plan.stats
    bound = stats.get("bound")
    expires = plan.deletes_anything
    if expires:
        scope = (f"expires snapshots [{plan.begin}, {plan.end}) — bounded by {bound}; "
                 f"new EARLIEST hint {plan.earliest_hint}")
        remaining: tuple[str, ...] = ()
    else:
        reason = "the table has no snapshots" if bound == "no-snapshots" else f"the range is bounded by {bound}"
        scope = f"{reason} (earliest {stats.get('earliest')}, latest {stats.get('latest')})."
        remaining = (f"apply only writes the missing EARLIEST hint ({plan.earliest_hint}).",) if plan.actions else ()
    notes = [
        f"protected: {stats.get('protected_by_tags', 0)} candidate data files kept by tags; "
        + (f"consumers hold the range at snapshot {plan.end}" if bound == "consumer" else "no consumer bound")
    ]
    if stats.get("deferred_to_changelog"):
        notes.append(f"deferred to changelog expiry: {stats['deferred_to_changelog']} files (decoupled lifecycle)")
    backlog = stats.get("expirable_beyond_limit", 0)
    if backlog:
        limit = plan.options.get("snapshot.expire.limit")
        notes.append(f"{backlog} more snapshot(s) are expirable beyond the expire limit of "
                     f"{limit.value if limit is not None else '?'} (snapshot.expire.limit): about "
                     f"{-(-backlog // limit.value) if limit is not None else '?'} more plan(s) at this limit; "
                     "apply this plan and plan again, or raise --max-deletes")
    return PlanDescription(nothing_to_do=not expires, scope=scope, nothing_label="Nothing to expire",
                           remaining=remaining, notes=tuple(notes),
                           # the keys scripts read before plans had a scope
                           document={"nothing_to_expire": not expires,
                                     "range": {"begin": plan.begin, "end": plan.end},
                                     "earliest_hint": plan.earliest_hint,
                                     "expirable_beyond_limit": backlog})


def _resolve_orphans(table_options, **flags):
    from planner.paimon.options import resolve_orphan_options

    return resolve_orphan_options(table_options, **flags)


def refuse_future_now(table, now_ms: int, what: str) -> None:
    """Refuse (``PlanRejected``) a plan as of a time the clock has not reached: its ``AssertNowReached``
    would have apply refuse it until then."""
    from engine.errors import PlanRejected
    from engine.paimon.requirements import AssertNowReached

    ahead = AssertNowReached(now_ms).problems(table)
    if ahead:
        raise PlanRejected(f"--now: {ahead[0]}. Plan {what} as of the current time or an earlier one")


def _plan_orphans(table, *, now_ms: int, options) -> CleanupPlan:
    """List first, then plan: the listing is made (or the inventory was) before anything says which files
    are used (#3074)."""
    from engine.listing import InventoryScan
    from engine.paimon.neighbours import paimon_neighbours
    from engine.paimon.orphans import list_orphan_candidates
    from engine.paimon.paths import external_roots
    from planner.paimon.orphans import plan_orphans

    options.threshold_ms(now_ms)  # refuse a bad --older-than before listing a large table
    refuse_future_now(table, now_ms, "orphans")  # apply would refuse the plan: say so before listing
    roots = [table.location, *external_roots(table.options)]
    # the other tables of the warehouse, read here (the planner reads nothing); an inventory or another
    # lister's listing is checked path by path for tables under the roots, the store is listed for them
    if options.inventory:
        scan = InventoryScan(options.inventory, roots=roots)
        return plan_orphans(table, scan.files(), now_ms=now_ms, options=options, source=scan.source,
                            neighbours=paimon_neighbours(table, scan=False))
    if options.lister is not None:
        listed, source = options.lister(table)
        scan = InventoryScan([listed], roots=roots)
        return plan_orphans(table, scan.files(), now_ms=now_ms, options=options, source=dict(source),
                            neighbours=paimon_neighbours(table, scan=False))
    listing = list_orphan_candidates(table)
    return plan_orphans(table, listing, now_ms=now_ms, options=options, source={"from": "store"},
                        neighbours=paimon_neighbours(table))


def describe_orphans(plan: CleanupPlan) -> PlanDescription:
    """An orphan cleaning: the threshold, and what was kept (used, too young, no modification time)."""
    from engine.timeutil import MAX_TIME_MS, MIN_TIME_MS

    stats = plan.stats
    at = plan.scope.get("older_than_ms")
    when = _utc(at) if isinstance(at, int) and MIN_TIME_MS <= at <= MAX_TIME_MS else str(at)
    deletes = bool(plan.actions)
    scope = (f"deletes files orphan cleaning lists that were modified before {when} and that no snapshot, tag or "
             "changelog of any branch uses" if deletes else
             f"no listed file modified before {when} is unused ({stats.get('listed', 0)} listed).")
    notes = (_listed_from(stats.get("listing")),
             f"kept: {stats.get('kept_used', 0)} used, {stats.get('kept_young', 0)} modified since {when}, "
             f"{stats.get('kept_unknown_time', 0)} without a modification time",
             "apply checks every candidate again and keeps (SKIPPED_REFERENCED) any that became used",
             *([f"then {stats['empty_dirs']} bucket or partition director(ies) it leaves empty, deepest first, each "
                "removed only if it is empty then (else KEPT_NOT_EMPTY)"] if stats.get("empty_dirs") else []))
    return PlanDescription(nothing_to_do=not deletes, scope=scope, nothing_label="No orphan files",
                           notes=notes, document={"older_than_ms": at, "listing": stats.get("listing")})


def _listed_from(listing) -> str:
    """Where an orphan plan's listing came from, for the reviewer."""
    if isinstance(listing, dict) and listing.get("from") == "spark":
        return (f"listed: on Spark ({listing.get('master')}), a task for each of {listing.get('directories')} "
                f"directories, {listing.get('files')} files, before reading what the table uses")
    if not isinstance(listing, dict) or listing.get("from") != "inventory":
        return "listed: the store, before reading what the table uses"
    files = ", ".join(f"{f.get('file')} ({f.get('form')})" for f in listing.get("inventory", ()))
    left_out = sum((listing.get("left_out") or {}).values())
    return (f"listed: from the inventory {files}, not the store: {listing.get('rows')} rows, "
            f"{listing.get('under_table')} under the table, {listing.get('outside_table')} outside it, "
            f"{left_out} naming no current file; files written after it was made are not candidates")


def _resolve_partitions(table_options, **flags):
    from planner.paimon.options import resolve_partition_options

    return resolve_partition_options(table_options, **flags)


def _plan_partitions(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.paimon.partitions import plan_partitions

    refuse_future_now(table, now_ms, "partition expiry")  # apply would refuse the plan: say so now
    return plan_partitions(table, now_ms=now_ms, options=options)


PARTITIONS_SHOWN = 20  # partitions listed one by one in a plan's description; the JSON has them all


def describe_partitions(plan: CleanupPlan) -> PlanDescription:
    """A partition drop: which partitions, why each expired, and that it is a commit, not a delete."""
    scope = plan.scope
    parts = scope.get("partitions") or []
    strategy, cutoff = scope.get("strategy"), scope.get("cutoff")
    judged = (f"{strategy}, cut-off {cutoff} ({scope.get('time_zone')})")
    if not parts:
        return PlanDescription(nothing_to_do=True, nothing_label="No expired partitions",
                               scope=f"no partition of snapshot {scope.get('snapshot')} expired by {judged}.",
                               document={"partitions": [], "cutoff": cutoff, "strategy": strategy,
                                         "snapshot": scope.get("snapshot")})
    files = sum(p.get("files", 0) for p in parts)
    size = sum(p.get("bytes", 0) for p in parts)
    lines = [f"{p['partition']}: {p['files']} files, {human_bytes(p['bytes'])}; {p['reason']}"
             for p in parts[:PARTITIONS_SHOWN]]
    if len(parts) > PARTITIONS_SHOWN:
        lines.append(f"... and {len(parts) - PARTITIONS_SHOWN} more partitions (all in --output json)")
    notes = (*lines,
             "apply commits one OVERWRITE snapshot marking these files DELETE; nothing is deleted now: snapshot "
             "expiry removes the files once no retained snapshot, tag or branch holds them",
             "apply refuses the plan if any of these partitions changed since planning")
    return PlanDescription(
        nothing_to_do=False,
        scope=(f"drops {len(parts)} partition(s) of snapshot {scope.get('snapshot')} expired by {judged}: "
               f"{files} live files, {human_bytes(size)}"),
        notes=notes,
        document={"partitions": parts, "cutoff": cutoff, "strategy": strategy, "snapshot": scope.get("snapshot"),
                  "time_zone": scope.get("time_zone")})


def _resolve_consumers(table_options, **flags):
    from planner.paimon.options import resolve_consumer_options

    return resolve_consumer_options(table_options, **flags)


def _plan_consumers(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.paimon.consumers import plan_consumers

    refuse_future_now(table, now_ms, "consumer expiry")  # apply would refuse the plan: say so now
    return plan_consumers(table, now_ms=now_ms, options=options)


def describe_consumers(plan: CleanupPlan) -> PlanDescription:
    """A consumer expiry: which consumers have been idle since before the cut-off."""
    listed = plan.scope.get("consumers") or []
    cutoff = plan.scope.get("cutoff_ms")
    when = _utc(cutoff) if isinstance(cutoff, int) else str(cutoff)
    document = {"consumers": listed, "cutoff_ms": cutoff}
    kept = plan.stats.get("consumers_kept", 0)
    if not listed:
        return PlanDescription(nothing_to_do=True, nothing_label="No idle consumers",
                               scope=f"no consumer of branch '{plan.branch}' was last written before {when} "
                                     f"({kept} kept).", document=document)
    notes = (*(f"consumer '{c['consumer']}': last written {c['modified']}" for c in listed),
             f"kept: {kept} written since",
             "apply deletes each only if it has not been written since planning (else SKIPPED_REFERENCED)")
    return PlanDescription(nothing_to_do=False, notes=notes, document=document,
                           scope=f"deletes {len(listed)} consumer file(s) of branch '{plan.branch}' last written "
                                 f"before {when}: snapshot expiry no longer waits for these readers")


def _resolve_tags(table_options, **flags):
    from planner.paimon.options import resolve_tag_options

    return resolve_tag_options(table_options, **flags)


def _plan_tags(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.paimon.tags import plan_tags

    refuse_future_now(table, now_ms, "tag expiry")  # apply would refuse the plan: say so now
    return plan_tags(table, now_ms=now_ms, options=options)


def describe_tags(plan: CleanupPlan) -> PlanDescription:
    """A tag expiry: which tags and why, and what their files free."""
    listed = plan.scope.get("tags") or []
    gone = plan.scope.get("snapshots_gone") or []
    document = {"tags": listed, "snapshots_gone": gone}
    notes = tuple(plan.stats.get("notes") or ())
    if not listed:
        return PlanDescription(nothing_to_do=True, nothing_label="No tags to expire",
                               scope=f"no tag of branch '{plan.branch}' is expired ({plan.stats.get('tags_kept', 0)} "
                                     "kept).", notes=notes, document=document)
    files = sum(1 for a in plan.actions if str(a.kind) != "tag-file")
    lines = tuple(f"tag '{t['tag']}' (snapshot {t['snapshot']}): {t['reason']}"
                  + ("; its files go with it" if t["files_freed"] else "") for t in listed)
    return PlanDescription(
        nothing_to_do=False, document=document,
        scope=(f"deletes {len(listed)} tag(s) of branch '{plan.branch}', then {files} file(s) only they held "
               f"(of snapshot(s) {gone})" if gone else
               f"deletes {len(listed)} tag(s) of branch '{plan.branch}'; their snapshots still exist, so snapshot "
               "expiry frees their files later"),
        notes=(*lines, *notes,
               "files any snapshot, other tag, retained changelog or branch still holds are kept; apply checks "
               "that again before deleting any"))


def _resolve_changelog(table_options, **flags):
    from planner.paimon.options import resolve_expire_options

    keys = {"retain_min": "changelog.num-retained.min", "retain_max": "changelog.num-retained.max",
            "time_retained": "changelog.time-retained"}
    overrides = dict(flags.pop("overrides", None) or {})
    for flag, key in keys.items():
        value = flags.pop(flag, None)
        if value is not None:
            overrides[key] = str(value)
    return resolve_expire_options(table_options, overrides=overrides, **flags)


def _plan_changelog(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.paimon.changelog import plan_changelog

    return plan_changelog(table, now_ms=now_ms, options=options)


def describe_changelog(plan: CleanupPlan) -> PlanDescription:
    """A decoupled changelog expiry: its range, what bounded it, and what it deletes."""
    begin, end = plan.begin, plan.end
    document = {"range": {"begin": begin, "end": end}, "earliest_hint": plan.earliest_hint,
                "bound": plan.scope.get("bound")}
    if begin is None or end is None or not plan.actions:
        return PlanDescription(nothing_to_do=True, nothing_label="No changelogs to expire",
                               scope=f"branch '{plan.branch}' keeps every changelog: none is past what the "
                                     "changelog.* retention keeps, or its changelogs are not decoupled.",
                               document=document)
    notes = [f"bounded by {plan.scope.get('bound')}"]
    if plan.stats.get("protected_by_tags"):
        notes.append(f"{plan.stats['protected_by_tags']} data file(s) kept for tags")
    return PlanDescription(nothing_to_do=False, document=document, notes=tuple(notes),
                           scope=f"expires changelogs [{begin}, {end}) of branch '{plan.branch}', then sets the "
                                 f"changelog EARLIEST hint to {end}")


def _utc(ms: int) -> str:
    from engine.timeutil import format_time_ms

    return format_time_ms(ms)


KINDS: Mapping[str, PlanKind] = {
    k.name: k
    for k in (
        PlanKind("expire", resolve_options=_resolve_expire, plan=_plan_expire, describe=describe_expire),
        PlanKind("orphans", resolve_options=_resolve_orphans, plan=_plan_orphans, describe=describe_orphans),
        PlanKind("partitions", resolve_options=_resolve_partitions, plan=_plan_partitions,
                 describe=describe_partitions),
        PlanKind("consumers", resolve_options=_resolve_consumers, plan=_plan_consumers,
                 describe=describe_consumers),
        PlanKind("tags", resolve_options=_resolve_tags, plan=_plan_tags, describe=describe_tags),
        PlanKind("changelog", resolve_options=_resolve_changelog, plan=_plan_changelog, describe=describe_changelog),
    )
}


# ---- Iceberg ----------------------------------------------------------------------------------------

def _resolve_iceberg_expire(table_options, **flags):
    from planner.iceberg.expire import resolve_expire_options

    return resolve_expire_options(table_options, **flags)


def _plan_iceberg_expire(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.iceberg.expire import plan_iceberg_expire

    _refuse_future_expiry(table, now_ms)
    return plan_iceberg_expire(table, now_ms=now_ms, options=options)


def _refuse_future_expiry(table, now_ms: int) -> None:
    """Apply refuses an expiry as of a time the clock has not reached (``AssertNowReached``: Iceberg's rule
    would expire, as of then, snapshots that it keeps now): say so now, not at apply."""
    from engine.errors import PlanRejected
    from engine.paimon.requirements import AssertNowReached
    from engine.timeutil import format_time_ms, wall_clock_ms

    if AssertNowReached(now_ms).problems(table):
        raise PlanRejected(f"--now {format_time_ms(now_ms)} is after the current time {format_time_ms(wall_clock_ms())}"
                           ": apply would refuse the plan until then. Plan snapshot expiry as of the current time or "
                           "an earlier one")


def describe_iceberg_expire(plan: CleanupPlan) -> PlanDescription:
    expired, refs = plan.scope.get("expired", []), plan.scope.get("removed_refs", [])
    files = plan.stats.get("summary", {}).get("files", 0)
    if not expired and not refs:
        return PlanDescription(nothing_to_do=True, nothing_label="Nothing to expire",
                               scope=f"no snapshot is older than {_utc(plan.scope['cutoff_ms'])} beyond what "
                                     f"refs and retain-last keep ({plan.stats.get('retained_snapshots', 0)} kept).")
    scope = (f"expires {len(expired)} snapshot(s) older than {_utc(plan.scope['cutoff_ms'])}, then deletes "
             f"{files} file(s) only they reached; keeps {plan.stats.get('retained_snapshots', 0)} snapshot(s)")
    notes = (f"refs removed (past max-ref-age-ms): {', '.join(refs)}",) if refs else ()
    return PlanDescription(nothing_to_do=False, scope=scope, nothing_label="Nothing to expire", notes=notes,
                           document={"expired_snapshots": expired, "removed_refs": refs})


def _resolve_iceberg_orphans(table_options, **flags):
    from planner.iceberg.orphans import resolve_orphan_options

    return resolve_orphan_options(table_options, **flags)


def _plan_iceberg_orphans(table, *, now_ms: int, options) -> CleanupPlan:
    """List first, then plan: what the metadata names is read after the listing, so a file committed
    while listing is seen as used."""
    from engine.iceberg.neighbours import catalog_neighbours
    from engine.iceberg.table import metadata_table_uuid
    from planner.iceberg.orphans import metadata_to_read, plan_iceberg_orphans

    options.cutoff_ms(now_ms)  # refuse a bad --older-than before listing a large table
    refuse_future_now(table, now_ms, "orphans")  # apply would refuse the plan: say so before listing
    listed = []
    for root in [table.location, *table.external_roots()]:
        try:
            listed += table.fileio.list(root, recursive=True)
        except FileNotFoundError:
            continue
    view = table.refreshed()
    # the metadata files outside the log that are kept only if they are this table's: read here, the
    # planner reads no file
    owners = {path: metadata_table_uuid(view.fileio, path) for path in metadata_to_read(view, listed)}
    # the other tables of the catalog, read after the listing (a table created meanwhile is seen); the
    # planner refuses one that stores files in this table's roots
    return plan_iceberg_orphans(view, listed, now_ms=now_ms, options=options, metadata_owners=owners,
                                neighbours=catalog_neighbours(view))


def describe_iceberg_orphans(plan: CleanupPlan) -> PlanDescription:
    kept = plan.stats.get("kept", {})
    notes = (f"kept: {kept.get('young', 0)} younger than {_utc(plan.scope['cutoff_ms'])}, "
             f"{kept.get('unknown_age', 0)} of unknown age, {kept.get('newer_metadata', 0)} metadata file(s) newer "
             f"than the metadata log",)
    if not plan.actions:
        return PlanDescription(nothing_to_do=True, nothing_label="No orphan files",
                               scope="every file under the table location is used or too young.", notes=notes)
    return PlanDescription(nothing_to_do=False, scope=f"removes {len(plan.actions)} orphan file(s) no metadata "
                           f"names, older than {_utc(plan.scope['cutoff_ms'])}", notes=notes)


def _resolve_rewrite(table_options, **flags):
    from planner.iceberg.rewrite_manifests import resolve_rewrite_options

    return resolve_rewrite_options(table_options, **flags)


def _plan_rewrite(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.iceberg.rewrite_manifests import plan_rewrite_manifests

    return plan_rewrite_manifests(table, now_ms=now_ms, options=options)


def describe_rewrite(plan: CleanupPlan) -> PlanDescription:
    sc = plan.scope
    if sc.get("skipped"):
        return PlanDescription(nothing_to_do=True, nothing_label="Nothing to rewrite", scope=sc["skipped"],
                               document={"skipped": sc["skipped"]})
    scope = (f"rewrites {sc['data_manifests']} data manifests of snapshot {sc['snapshot_id']} into "
             f"{len(sc['specs'])} ({sc['entries']} entries); carries {sc['delete_manifests']} delete manifest(s) over")
    return PlanDescription(nothing_to_do=False, scope=scope, document={"skipped": None})


def _resolve_compact(table_options, **flags):
    from planner.iceberg.compact import resolve_compact_options

    return resolve_compact_options(table_options, **flags)


def _plan_compact(table, *, now_ms: int, options) -> CleanupPlan:
    from planner.iceberg.compact import plan_compact

    return plan_compact(table, now_ms=now_ms, options=options)


def describe_compact(plan: CleanupPlan) -> PlanDescription:
    sc = plan.scope
    bins = sc.get("bins", [])
    document = {"skipped": sc.get("skipped"),
                "bins": [{"index": b["index"], "partition": b["partition"], "inputs": len(b["inputs"]),
                          "bytes": sum(f["size"] for f in b["inputs"]),
                          "records": sum(f["record_count"] for f in b["inputs"]),
                          "position_deletes": len(b["position_deletes"]),
                          "equality_deletes": len(b["equality_deletes"])} for b in bins]}
    if sc.get("skipped"):
        return PlanDescription(nothing_to_do=True, nothing_label="Nothing to compact", scope=sc["skipped"],
                               document=document)
    inputs = sum(len(b["inputs"]) for b in bins)
    dropped = sum(1 for m in sc.get("delete_manifests", []) if m["dropped"])
    scope = (f"merges {inputs} of the {sc.get('data_files', 0)} data files of snapshot {sc['snapshot_id']} into "
             f"{len(bins)} file(s) of at most {human_bytes(sc['target_bytes'])} each, in one 'replace' commit")
    notes = tuple(f"bin {b['index']} ({b['partition'] or 'unpartitioned'}): {d['inputs']} files, {human_bytes(d['bytes'])}, "
                  f"{d['position_deletes']} position and {d['equality_deletes']} equality delete file(s) applied"
                  for b, d in zip(bins, document["bins"]))
    notes += (f"delete manifests: {dropped} dropped (all they delete is compacted), "
              f"{len(sc.get('delete_manifests', [])) - dropped} carried over",)
    return PlanDescription(nothing_to_do=False, scope=scope, notes=notes, document=document)


ICEBERG_KINDS: Mapping[str, PlanKind] = {
    k.name: k
    for k in (
        PlanKind("expire", resolve_options=_resolve_iceberg_expire, plan=_plan_iceberg_expire,
                 describe=describe_iceberg_expire),
        PlanKind("orphans", resolve_options=_resolve_iceberg_orphans, plan=_plan_iceberg_orphans,
                 describe=describe_iceberg_orphans),
        PlanKind("rewrite-manifests", resolve_options=_resolve_rewrite, plan=_plan_rewrite, describe=describe_rewrite),
        PlanKind("compact", resolve_options=_resolve_compact, plan=_plan_compact, describe=describe_compact),
    )
}
_BY_FORMAT = {"paimon": KINDS, "iceberg": ICEBERG_KINDS}


def plan_kind(name: str, fmt: str) -> PlanKind:
    """The registry entry of ``name`` for table format ``fmt`` (a KeyError for a kind lakesweep does not
    make is a bug)."""
    return _BY_FORMAT[fmt][name]


def describe_plan(plan: CleanupPlan) -> PlanDescription:
    """``plan`` described by its kind's entry; a plan of a kind without one by its action count."""
    entry = _BY_FORMAT.get(plan.format, {}).get(plan.kind)
    if entry is not None:
        return entry.describe(plan)
    if not plan.actions:
        return PlanDescription(nothing_to_do=True, scope="the plan has no actions.")
    return PlanDescription(nothing_to_do=False, scope=f"{len(plan.actions)} actions")
