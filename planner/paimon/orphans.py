"""Orphan-file cleaning planning with Apache Paimon's semantics (``LocalOrphanFilesClean#clean``).

``plan_orphans(table, listing, now_ms=..., options=...)`` lists nothing: ``listing`` was made before the
planner reads which files the table uses (Paimon #3074). Of the listed files, those modified before the
threshold are candidates: the stray files of snapshot and changelog directories as they are, the others
unless a file of their name is used by any snapshot, tag or changelog of any branch. Another table storing
files where orphan cleaning lists refuses the plan (``SharedStorage``; docs/design/listing.md). Reads no
clock, writes nothing.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence, Sized

from lakesweep.engine.errors import PlannerInvariantViolated
from lakesweep.engine.listing import check_listing_complete
from lakesweep.engine.paimon.kinds import ORPHAN_PHASES, OrphanKind
from lakesweep.engine.neighbours import Neighbour, refuse_shared_storage
from lakesweep.engine.paimon.layout import Layout, is_orphan_empty_dir, orphan_dir_segments
from lakesweep.engine.paimon.neighbours import nested_neighbour, table_roots
from lakesweep.engine.paimon.orphans import (ListedDirs, ListedFile, UsedNames, expected_in_listing,
                                              read_used_names)
from lakesweep.engine.paimon.reachability import first_reachable
from lakesweep.engine.paimon.requirements import orphan_requirements
from lakesweep.engine.paimon.scopes import OrphanScope
from lakesweep.engine.paimon.state import table_identity
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions, kind_spec, summarize
from lakesweep.planner.paimon.options import OrphanOptions
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.plan_kind import Maintained, PlanDescription, PlanKind, hours, refuse_future_now, utc


def _bucket_of(rel: str, layout: Layout) -> tuple[str | None, int | None]:
    """The partition (``k1=v1/k2=v2``) and bucket of a file of a bucket directory, for review."""
    segments = rel.split("/")[:-1]
    if rel.startswith("/") or "://" in rel:
        segments = segments[-(len(layout.keys) + 1):]
    elif layout.path_directory:
        segments = segments[len(layout.path_directory.split("/")):]
    bucket = segments[-1][len("bucket-"):] if segments else ""
    return "/".join(segments[:-1]), (int(bucket) if bucket.isdigit() else None)


def _newest(a: ListedFile, b: ListedFile) -> ListedFile:
    """Of two listings of one path, the one that keeps it longer: no modification time, else the newer."""
    if a.mtime_ms is None:
        return a
    if b.mtime_ms is None or b.mtime_ms > a.mtime_ms:
        return b
    return a


def _emptied_dirs(layout: Layout, seen: set[str], kept: set[str]) -> list[Action]:
    """The bucket and partition directories the plan leaves empty, as far as the listing shows: of the
    directories holding listed files (``seen``) and their partition directories, those holding no file the
    plan keeps (``kept``) and whose sub-directories all go too; deepest first, up to but never including a
    data root. What the listing does not show (a directory beside them, a file written since) keeps a
    directory: apply removes each only if it is empty."""
    below: dict[str, set[str]] = defaultdict(set)  # directory -> its sub-directories holding listed files
    for d in seen:
        while is_orphan_empty_dir(layout, d):
            up = posixpath.dirname(d)
            if d in below[up]:
                break
            below[up].add(d)
            d = up
    known = sorted({d for subs in below.values() for d in subs}, key=lambda d: (-len(d.split("/")), d))
    emptied: set[str] = set()
    out = []
    for d in known:  # children before their parents
        if d not in kept and below.get(d, set()) <= emptied:
            emptied.add(d)
            out.append(Action(OrphanKind.EMPTY_DIR, d, depth=len(orphan_dir_segments(layout, d))))
    return out


def plan_orphans(table: PaimonTable, listing: Iterable[ListedFile | tuple], *, now_ms: int,
                 options: OrphanOptions,
                 source: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
                 neighbours: Sequence[Neighbour] = (),
                 used_reader: Callable[[PaimonTable], UsedNames] | None = None) -> CleanupPlan:
    """Plan the deletion of ``table``'s orphan files, as Paimon's orphan clean would delete them at
    ``now_ms`` from what ``listing`` holds (``(path, size, mtime_ms)`` each): a listing already made,
    iterated once after the used set is read (an inventory scan streams it a batch at a time). ``source``
    says where the listing came from (``{"from": "store"}`` by default; an inventory's ``source()``, or a
    function giving it once the listing has been read), and the plan keeps it in ``stats["listing"]``.

    Refuses (``PlanRejected``) an ``older_than`` at or after now, or within an hour of it without
    ``force``; a used set it cannot read, or one that misses a file a branch's newest snapshot
    references; a non-empty listing that misses a file a branch's newest snapshot references and that was
    modified before the threshold (it is incomplete: ``check_listing_complete``); another table's
    ``schema/schema-<n>`` in a listed directory. A listed path outside the directories orphan cleaning lists
    (``ListedDirs``) is ignored; a file without a modification time is kept; a path listed more than once
    counts with its newest modification time.
    ``PlannerInvariantViolated`` if a planned file is still reachable (a bug). ``neighbours``: the other
    tables that could store files here (``engine.paimon.neighbours.paimon_neighbours``); one that does, or
    another table's metadata in the listing, refuses the plan (``SharedStorage``). ``used_reader``: reads
    the used set elsewhere (``read_used_names``' ``reader``: on Spark, against the same listing).
    """
    threshold = options.threshold_ms(now_ms)
    name = f"Paimon table {table.location}"
    roots = table_roots(table.location, table.options)
    refuse_shared_storage(name, roots, neighbours, outcome="Nothing was planned")
    dirs = ListedDirs(table)
    layout = dirs.layout
    paths = table.paths
    # The listing is complete: it was made (or the inventory was) before the used set is read here (#3074).
    # It is then read once, keeping only what is not used: the planned files, and the young ones and those
    # without a time (which keep a path listed again later), never every file listed.
    # An empty listing plans nothing. Any other must show every file the newest snapshots reference that
    # was there when it was made (by name, as the used set matches), or it is incomplete.
    empty = isinstance(listing, Sized) and len(listing) == 0
    if empty:
        read = None
    else:
        read = read_used_names(table) if used_reader is None else read_used_names(table, reader=used_reader)
    used = frozenset() if read is None else read.names
    expected = {} if read is None else expected_in_listing(read, dirs)
    held: dict[str, tuple[OrphanKind, ListedFile]] = {}
    ignored = kept_used = 0
    twice: set[str] = set()  # held paths listed more than once (counted only)
    # --empty-dirs: the directories holding listed files, and those holding one the plan keeps
    seen_dirs: set[str] | None = set() if options.empty_dirs else None
    kept_dirs: set[str] = set()
    for item in listing:
        f = item if isinstance(item, ListedFile) else ListedFile(*item)
        if dirs.quarantined(f.path):  # put aside by apply --quarantine: not the table's, never an orphan
            ignored += 1
            continue
        dirs.check_foreign(f.path)
        if f.path.endswith(".metadata.json") or "/schema/" in f.path:
            nested = nested_neighbour(table, f.path)
            if nested is not None:
                refuse_shared_storage(name, roots, [nested], outcome="Nothing was planned")
        kind = dirs.kind_of(f.path)
        if kind is None:
            ignored += 1
            if seen_dirs is not None:
                kept_dirs.add(posixpath.dirname(paths.relative(f.path)))
            continue
        rel = paths.relative(f.path)
        expected.pop(posixpath.basename(rel), None)
        if seen_dirs is not None:
            seen_dirs.add(posixpath.dirname(rel))
        if kind_spec(kind).by_name and posixpath.basename(rel) in used:
            kept_used += 1
            if seen_dirs is not None:
                kept_dirs.add(posixpath.dirname(rel))
            continue
        seen = held.get(rel)
        if seen is not None:
            twice.add(rel)
            f = _newest(seen[1], f)
        held[rel] = (kind, f)
    check_listing_complete(table, (expected[name] for name in sorted(expected)), threshold_ms=threshold)
    if callable(source):
        source = source()
    actions: list[Action] = []
    young = unknown_time = 0
    for rel, (kind, f) in held.items():
        if f.mtime_ms is None:
            unknown_time += 1
            kept_dirs.add(posixpath.dirname(rel))
        elif f.mtime_ms >= threshold:
            young += 1
            kept_dirs.add(posixpath.dirname(rel))
        else:
            partition, bucket = _bucket_of(rel, layout) if kind is OrphanKind.ORPHAN_DATA_FILE else (None, None)
            actions.append(Action(kind, rel, partition=partition, bucket=bucket, size=f.size))
    if seen_dirs is not None:
        actions += _emptied_dirs(layout, seen_dirs, kept_dirs)
    planned = canonical_actions(actions)

    # Subtracted by name above; checked again by path against what the table keeps (STYLE 5).
    full = {paths.absolute(a.path): a for a in planned if a.kind is not OrphanKind.EMPTY_DIR}
    hit = first_reachable(table, frozenset(full), end=None)
    if hit is not None:
        holder, path = hit
        raise PlannerInvariantViolated(
            f"refusing the plan: {full[path].kind} {full[path].path} is still referenced by {holder.what}. "
            "Nothing was deleted; please report this with the table's metadata.")

    identity = table_identity(table)
    warnings = []
    if unknown_time:
        warnings.append(f"{unknown_time} listed file(s) have no modification time and are kept")
    source = dict(source) if source is not None else {"from": "store"}
    if source.get("from") == "inventory" and not source.get("under_table"):
        warnings.append("the inventory lists no file under the table's location or its external paths: is it "
                        "an inventory of the table's bucket?")
    if twice:
        warnings.append(f"{len(twice)} path(s) were listed more than once; each counts with its newest modification "
                        "time")
    stats = {
        "older_than_ms": threshold,
        "listed": len(held) + kept_used,
        "kept_used": kept_used,
        "kept_young": young,
        "kept_unknown_time": unknown_time,
        "empty_dirs": sum(1 for a in planned if a.kind is OrphanKind.EMPTY_DIR),
        "ignored_paths": ignored,
        "listing": source,
        "warnings": warnings,
        "summary": summarize(planned, by_partition=frozenset({OrphanKind.ORPHAN_DATA_FILE})),
    }
    return CleanupPlan(
        kind="orphans",
        format="paimon",
        table_location=table.location,
        table_identity=identity,
        branch=table.branch,
        now_ms=now_ms,
        options=dict(options.sources),
        scope=OrphanScope(older_than_ms=threshold),
        requirements=orphan_requirements(identity=identity, location=table.location, deletes=bool(planned),
                                         now_ms=now_ms),
        phases=ORPHAN_PHASES,
        actions=planned,
        stats=stats,
    )


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OrphanRead:
    """What orphan planning needs beyond the table's metadata, read by the caller (``_read``)."""

    files: Iterable[ListedFile]  # the listing (may stream: the planner reads it once)
    source: Any  # where it came from, for the plan's stats (a dict, or a callable giving one once read)
    neighbours: tuple  # the other tables of the warehouse (``engine.neighbours.Neighbour``)
    used_reader: Any = None  # reads the used set elsewhere, against this listing (``plan_orphans``)


def _read(table, *, now_ms: int, options) -> OrphanRead:
    """List first, then plan: the listing is made (or the inventory was) before anything says which files
    are used (#3074)."""
    from lakesweep.engine.listing import InventoryScan
    from lakesweep.engine.paimon.neighbours import paimon_neighbours
    from lakesweep.engine.paimon.orphans import list_orphan_candidates
    from lakesweep.engine.paimon.paths import external_roots

    options.threshold_ms(now_ms)  # refuse a bad --older-than before listing a large table
    refuse_future_now(table, now_ms, "orphans")  # apply would refuse the plan: say so before listing
    roots = [table.location, *external_roots(table.options)]
    # the other tables of the warehouse, read here (the planner reads nothing); an inventory or another
    # lister's listing is checked path by path for tables under the roots, the store is listed for them
    if options.inventory:
        scan = InventoryScan(options.inventory, roots=roots)
        return OrphanRead(scan.files(), scan.source, paimon_neighbours(table, scan=False))
    if options.lister is not None:
        listed, source = options.lister(table)
        scan = InventoryScan([listed], roots=roots)
        reader = options.used_reader(listed) if options.used_reader is not None else None
        return OrphanRead(scan.files(), dict(source), paimon_neighbours(table, scan=False), reader)
    listing = list_orphan_candidates(table)
    return OrphanRead(listing, {"from": "store"}, paimon_neighbours(table))


def _plan(table, *, now_ms: int, options, read: OrphanRead) -> CleanupPlan:
    return plan_orphans(table, read.files, now_ms=now_ms, options=options, source=read.source,
                        neighbours=read.neighbours, used_reader=read.used_reader)


def describe_orphans(plan: CleanupPlan) -> PlanDescription:
    """An orphan cleaning: the threshold, and what was kept (used, too young, no modification time)."""
    from lakesweep.engine.timeutil import MAX_TIME_MS, MIN_TIME_MS

    stats = plan.stats
    at = plan.scope.older_than_ms
    when = utc(at) if isinstance(at, int) and MIN_TIME_MS <= at <= MAX_TIME_MS else str(at)
    deletes = bool(plan.actions)
    scope = (f"deletes files orphan cleaning lists that were modified before {when} and that no snapshot, tag or "
             "changelog of any branch uses" if deletes else
             f"no listed file modified before {when} is unused ({stats.get('listed', 0)} listed).")
    notes = (listed_from(stats.get("listing")),
             f"kept: {stats.get('kept_used', 0)} used, {stats.get('kept_young', 0)} modified since {when}, "
             f"{stats.get('kept_unknown_time', 0)} without a modification time",
             "apply checks every candidate again and keeps (SKIPPED_REFERENCED) any that became used",
             *([f"then {stats['empty_dirs']} bucket or partition director(ies) it leaves empty, deepest first, each "
                "removed only if it is empty then (else KEPT_NOT_EMPTY)"] if stats.get("empty_dirs") else []))
    return PlanDescription(nothing_to_do=not deletes, scope=scope, nothing_label="No orphan files",
                           notes=notes, document={"older_than_ms": at, "listing": stats.get("listing")})


def listed_from(listing) -> str:
    """Where an orphan plan's listing came from, for the reviewer."""
    if isinstance(listing, dict) and listing.get("from") == "spark":
        return (f"listed: on Spark ({listing.get('master')}), a task for each of {listing.get('directories')} "
                f"directories, {listing.get('files')} files, before reading what the table uses")
    if not isinstance(listing, dict) or listing.get("from") != "inventory":
        return "listed: the store, before reading what the table uses"
    files = ", ".join(f"{f.get('file')} ({f.get('form')})" for f in listing.get("inventory", ()))
    left = dict(listing.get("left_out") or {})
    quarantined = left.pop("quarantine", 0)
    return (f"listed: from the inventory {files}, not the store: {listing.get('rows')} rows, "
            f"{listing.get('under_table')} under the table, {listing.get('outside_table')} outside it, "
            f"{sum(left.values())} naming no current file"
            + (f", {quarantined} in a quarantine folder" if quarantined else "")
            + "; files written after it was made are not candidates")


def _applied(plan: CleanupPlan, counts) -> str:
    return f"removed {counts.get('DELETED', 0)} orphan file(s)"


KIND = PlanKind("orphans", resolve_options=resolve_orphan_options, plan=_plan, read=_read,
                describe=describe_orphans, format="paimon",
                maintain=Maintained(order=30, flags=lambda options, th: {"older_than": hours(th.orphan_older_than_hours)},
                                    applied=_applied, nothing_message="no orphan files to remove"))
