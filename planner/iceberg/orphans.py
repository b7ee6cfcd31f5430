"""Iceberg orphan removal, planned as Iceberg's ``DeleteOrphanFiles`` decides, failing closed where it would
guess. Used: every location the metadata names (``engine.iceberg.reachability.all_referenced``). A candidate
is a listed file under the table location (or a write path its properties name) that is not used and older
than the cut-off; hidden paths never are, nor a root's ``_lakesweep_quarantine``. A ``*.metadata.json`` of
this table above the log's oldest is kept. The plan is refused on a bucket mismatch
(``prefix_mismatch_mode=ERROR``), another table's metadata under the location, a catalog neighbour whose
paths overlap (apache/iceberg#17213, #17448), or a listing that misses a file the current state reads. The
planner reads no file: ``metadata_to_read`` says which, and ``metadata_owners`` is handed in. The rules:
docs/design/iceberg.md#orphan-removal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Iterable, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import FileInfo
from lakesweep.engine.listing import check_listing_complete
from lakesweep.engine.iceberg.kinds import ORPHAN_PHASES, OrphanKind
from lakesweep.engine.iceberg.hidden import below_root, hidden_partition_prefixes, is_hidden
from lakesweep.engine.iceberg.neighbours import table_roots
from lakesweep.engine.iceberg.requirements import AssertOrphansUnreferenced, plan_requirements
from lakesweep.engine.iceberg.scopes import OrphanScope
from lakesweep.engine.paimon.requirements import AssertNowReached
from lakesweep.engine.neighbours import Neighbour, refuse_shared_storage
from lakesweep.engine.plan import Action, CleanupPlan, OptionValue, canonical_actions, summarize
from lakesweep.engine.quarantine import quarantined
from lakesweep.planner.iceberg.common import relative_to, scope_base
from lakesweep.planner.paimon.options import ORPHAN_FORCE_BELOW_MS
from lakesweep.planner.plan_kind import Maintained, PlanDescription, PlanKind, hours, refuse_future_now, utc

DEFAULT_OLDER_THAN = "3 d"
_VERSION = re.compile(r"^(?:v)?(\d+)(?:[-.].*)?\.metadata\.json$")


@dataclass(frozen=True)
class IcebergOrphanOptions:
    older_than: str
    duration_ms: int | None
    at_ms: int | None
    force: bool
    sources: Mapping[str, OptionValue]
    # lists the table elsewhere (on Spark): returns a plain inventory file of the listing and its source
    lister: Callable[[Any], tuple[str, Mapping[str, Any]]] | None = None
    # with ``lister``: ``used_reader(listing file)`` reads what the metadata names elsewhere (on Spark), as
    # far as that listing goes (``plan_iceberg_orphans``' ``used_reader``)
    used_reader: Callable[[str], Callable[[Any], Any]] | None = None

    def cutoff_ms(self, now_ms: int) -> int:
        """The cut-off; one less than an hour back from ``now_ms`` is refused without ``force`` (a writer
        may not have committed a younger file yet; Iceberg's Spark procedure asks for a day)."""
        cutoff = self.at_ms if self.at_ms is not None else now_ms - self.duration_ms
        if now_ms - cutoff < ORPHAN_FORCE_BELOW_MS and not self.force:
            raise PlanRejected(f"--older-than {self.older_than} is less than 1 h before the plan's now: files a "
                               f"writer has not committed yet would look orphaned. Use at least 1 h, or add "
                               f"--force if no writer is running")
        return cutoff


def resolve_orphan_options(table_options: Mapping[str, str], *, older_than: str | None = None, force: bool = False,
                           spark: str | None = None,
                           lister: Callable[[Any], tuple[str, Mapping[str, Any]]] | None = None,
                           used_reader: Callable[[str], Callable[[Any], Any]] | None = None,
                           **_) -> IcebergOrphanOptions:
    """``older_than``: a duration back from the plan's now (default ``3 d``, Iceberg's) or an instant.
    ``lister``: lists the table instead of the read step's recursive listing (``--spark``: ``spark`` is its
    master), writing a plain inventory file the planner reads as an inventory; ``used_reader`` reads what the
    metadata names against that file."""
    from lakesweep.engine.timeutil import parse_duration_ms, parse_time_ms
    from lakesweep.planner.paimon.options import _UNIT_DURATION

    text = DEFAULT_OLDER_THAN if older_than is None else str(older_than).strip()
    if _UNIT_DURATION.match(text):
        duration, at = parse_duration_ms(text), None
    else:
        duration, at = None, parse_time_ms(text)
    return IcebergOrphanOptions(text, duration, at, bool(force),
                                {"older_than": OptionValue(text, "default" if older_than is None else "flag"),
                                 "force": OptionValue(bool(force), "flag" if force else "default"),
                                 "spark": OptionValue(spark, "flag" if spark else "default")},
                                lister=lister, used_reader=used_reader if lister is not None else None)


def metadata_version(name: str) -> int | None:
    m = _VERSION.match(name)
    return int(m.group(1)) if m else None


def _oldest_logged(table) -> int | None:
    logged = [metadata_version(u.rsplit("/", 1)[1]) for u in table.metadata_files()]
    return min((v for v in logged if v is not None), default=None)


def _metadata_roots(table) -> list[str]:
    return [table.location + "/metadata/"] + [r + "/" for r in table.external_roots()]


def _may_be_kept(name: str, oldest_logged: int | None) -> bool:
    """A metadata file not in the log that is kept if it is this table's: its version is above the log's
    oldest, or one of the two cannot be told."""
    version = metadata_version(name)
    return version is None or oldest_logged is None or version > oldest_logged


def metadata_to_read(table, listed: Iterable[FileInfo]) -> list[str]:
    """The listed ``*.metadata.json`` files (canonical locations, sorted) whose ``table-uuid`` decides
    whether ``plan_iceberg_orphans`` keeps them: in a metadata directory, not current or in the log, and
    with a version above the log's oldest. The caller reads them (``engine.iceberg.table.metadata_table_uuid``)
    and hands the result in as ``metadata_owners``."""
    from lakesweep.engine.iceberg.table import canonical

    logged = set(table.metadata_files())
    oldest = _oldest_logged(table)
    roots = _metadata_roots(table)
    table_roots = [table.location, *table.external_roots()]
    out = set()
    for info in listed:
        if info.is_dir:
            continue
        path = canonical(info.path)
        if quarantined(path, table_roots):
            continue
        name = path.rsplit("/", 1)[1]
        if name.endswith(".metadata.json") and path not in logged and any(path.startswith(r) for r in roots) \
                and _may_be_kept(name, oldest):
            out.add(path)
    return sorted(out)


def _key(location: str) -> str:
    """A location without its scheme and authority (``s3://bucket/a/b`` -> ``a/b``)."""
    if "://" in location:
        return location.split("://", 1)[1].partition("/")[2]
    return location


def plan_iceberg_orphans(table, listed: Iterable[FileInfo], *, now_ms: int, options: IcebergOrphanOptions,
                         metadata_owners: Mapping[str, str | None] | None = None,
                         neighbours: Sequence[Neighbour] = (), source: Mapping[str, Any] | None = None,
                         used_reader: Callable[[Any], tuple[Container[str], Mapping[str, str], int]] | None = None
                         ) -> CleanupPlan:
    """``metadata_owners``: the ``table-uuid`` of each file ``metadata_to_read`` names (``None``: it does not
    parse as table metadata); a file not in it counts as not parsing. ``neighbours``: the other tables of
    the catalog (``engine.iceberg.neighbours.catalog_neighbours``); one storing files in this table's roots
    refuses the plan (``SharedStorage``). Asks the store for the modification time of each file the current
    state reads that ``listed`` misses (``check_listing_complete``). ``listed`` is iterated once, and no
    set of every listed path is kept. ``source``: where the listing came from, kept in ``stats["listing"]``
    (``{"from": "store"}`` by default). ``used_reader(table)``: what the metadata names, read elsewhere (on
    Spark) as far as ``listed`` goes: ``(used, keys, count)``, ``path in used`` for each listed path, ``keys``
    the used location of each such path's key (``_key``) that it is not, ``count`` how many are used."""
    from lakesweep.engine.iceberg.reachability import all_referenced, current_references
    from lakesweep.engine.iceberg.table import canonical

    if not table.gc_enabled():
        raise PlanRejected(f"Iceberg table {table.identifier} has gc.enabled=false: Iceberg refuses to remove "
                           f"orphan files there (its files may belong to other tables)")
    cutoff = options.cutoff_ms(now_ms)
    refuse_shared_storage(f"Iceberg table {table.identifier}", table_roots(table), neighbours,
                          outcome="Nothing was planned")
    if used_reader is None:
        used = all_referenced(table)
        used_keys, used_count = {_key(u): u for u in used}, len(used)
    else:
        used, used_keys, used_count = used_reader(table)
    roots = [table.location, *table.external_roots()]
    metadata_dir = table.location + "/metadata/"
    metadata_roots = _metadata_roots(table)
    oldest_logged = _oldest_logged(table)
    owners = metadata_owners or {}
    kept = {"young": 0, "unknown_age": 0, "newer_metadata": 0, "hidden": 0}
    partition_prefixes = hidden_partition_prefixes(table)
    warnings: list[str] = []
    actions: list[Action] = []
    # what the current state reads under the roots, until the listing shows it
    unseen: dict[str, str] = {}
    for path, holder in current_references(table):
        if relative_to(path, roots) is not None:
            unseen.setdefault(path, holder)
    any_listed = False
    for info in listed:
        if info.is_dir:
            continue
        path = canonical(info.path)
        if quarantined(path, roots):
            # put aside by apply --quarantine: not the table's, never an orphan, never another table's
            # metadata; hidden as Iceberg's own listing hides any directory named with a leading "_"
            kept["hidden"] += 1
            continue
        any_listed = True
        unseen.pop(path, None)
        name = path.rsplit("/", 1)[1]
        if name.endswith(".metadata.json") and not any(path.startswith(r) for r in metadata_roots):
            raise PlanRejected(f"{path} is the metadata of another Iceberg table under {table.location}: its files "
                               f"are not this table's orphans. No orphan plan is made for a location that holds "
                               f"other tables")
        if path in used:
            continue
        other = used_keys.get(_key(path))
        if other is not None:
            raise PlanRejected(f"{path} is not used as listed, but the metadata names {other}: the same path with "
                               f"another scheme or bucket. Nothing is planned; check which prefix is right")
        if name == "version-hint.text":
            continue
        below = below_root(path, roots)
        if below is not None and is_hidden(below, partition_prefixes):
            kept["hidden"] += 1
            continue
        if info.mtime_ms is None:
            kept["unknown_age"] += 1
            continue
        if info.mtime_ms >= cutoff:
            kept["young"] += 1
            continue
        if name.endswith(".metadata.json") and owners.get(path) == table.uuid and _may_be_kept(name, oldest_logged):
            version = metadata_version(name)
            kept["newer_metadata"] += 1
            why = "its version cannot be read from its name" if version is None else \
                f"version {version} is newer than the metadata log's oldest ({oldest_logged})"
            warnings.append(f"{path} is not in the metadata log, but it is this table's metadata and {why}; kept")
            continue
        rel = relative_to(path, roots)
        if rel is None:
            continue
        kind = (OrphanKind.ORPHAN_METADATA_FILE if path.startswith(metadata_dir)
                else OrphanKind.ORPHAN_DATA_FILE if path.startswith(table.location + "/data/") or rel == path
                else OrphanKind.ORPHAN_FILE)
        actions.append(Action(kind, rel, size=info.size))
    if any_listed and unseen:
        check_listing_complete(table, sorted(unseen.items()), threshold_ms=cutoff)
    canonical_list = canonical_actions(actions)
    return CleanupPlan(
        kind="orphans", format="iceberg", table_location=table.location, table_identity=table.uuid, branch="main",
        now_ms=now_ms, options=dict(options.sources),
        scope=OrphanScope(**scope_base(table), cutoff_ms=cutoff, refs=dict(table.refs())),
        requirements=(*plan_requirements(table), AssertNowReached(now_ms),
                      AssertOrphansUnreferenced(cutoff, force=options.force)),
        phases=ORPHAN_PHASES, actions=canonical_list,
        stats={"kept": kept, "used": used_count, "neighbours": len(neighbours), "summary": summarize(canonical_list),
               "warnings": sorted(warnings), "listing": dict(source) if source is not None else {"from": "store"}},
    )


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OrphanRead:
    """What orphan planning needs beyond the table's metadata, read by the caller (``_read``)."""

    view: Any  # the table as read after the listing: what the metadata names is read from it
    listed: Iterable[FileInfo]  # a list, or an inventory file read again each time it is iterated
    metadata_owners: Mapping[str, Any]  # metadata file outside the log -> the table UUID it names
    neighbours: tuple  # the other tables of the catalog (``engine.neighbours.Neighbour``)
    source: Mapping[str, Any] = field(default_factory=lambda: {"from": "store"})  # where the listing came from
    used_reader: Any = None  # reads what the metadata names elsewhere, against this listing


def _read(table, *, now_ms: int, options) -> OrphanRead:
    """List first, then plan: what the metadata names is read after the listing, so a file committed
    while listing is seen as used. ``options.lister`` lists into an inventory file, read as one."""
    from lakesweep.engine.iceberg.neighbours import catalog_neighbours
    from lakesweep.engine.iceberg.plan_reads import InventoryListing, list_table_files, metadata_owners

    options.cutoff_ms(now_ms)  # refuse a bad --older-than before listing a large table
    refuse_future_now(table, now_ms, "orphans")  # apply would refuse the plan: say so before listing
    reader = None
    if options.lister is not None:
        location, source = options.lister(table)
        listed, source = InventoryListing(location, [table.location, *table.external_roots()]), dict(source)
        reader = options.used_reader(location) if options.used_reader is not None else None
    else:
        listed, source = list_table_files(table), {"from": "store"}
    view = table.refreshed()
    # the metadata files outside the log that are kept only if they are this table's: read here, the
    # planner reads no file
    owners = metadata_owners(view, metadata_to_read(view, listed))
    # the other tables of the catalog, read after the listing (a table created meanwhile is seen); the
    # planner refuses one that stores files in this table's roots
    return OrphanRead(view, listed, owners, catalog_neighbours(view), source, reader)


def _plan(table, *, now_ms: int, options, read: OrphanRead) -> CleanupPlan:
    """``table`` as ``read`` saw it after the listing (``read.view``) is planned."""
    return plan_iceberg_orphans(read.view, read.listed, now_ms=now_ms, options=options,
                                metadata_owners=read.metadata_owners, neighbours=read.neighbours, source=read.source,
                                used_reader=read.used_reader)


def describe_iceberg_orphans(plan: CleanupPlan) -> PlanDescription:
    from lakesweep.planner.paimon.orphans import listed_from

    kept = plan.stats.get("kept", {})
    listing = plan.stats.get("listing")
    notes = (*((listed_from(listing),) if listing is not None else ()),
             f"kept: {kept.get('young', 0)} younger than {utc(plan.scope.cutoff_ms)}, "
             f"{kept.get('unknown_age', 0)} of unknown age, {kept.get('newer_metadata', 0)} metadata file(s) newer "
             f"than the metadata log",)
    document = {"listing": listing} if listing is not None else {}
    if not plan.actions:
        return PlanDescription(nothing_to_do=True, nothing_label="No orphan files",
                               scope="every file under the table location is used or too young.", notes=notes,
                               document=document)
    return PlanDescription(nothing_to_do=False, scope=f"removes {len(plan.actions)} orphan file(s) no metadata "
                           f"names, older than {utc(plan.scope.cutoff_ms)}", notes=notes, document=document)


def _applied(plan: CleanupPlan, counts) -> str:
    return f"removed {counts.get('DELETED', 0)} orphan file(s)"


KIND = PlanKind("orphans", resolve_options=resolve_orphan_options, plan=_plan, read=_read,
                describe=describe_iceberg_orphans, format="iceberg",
                maintain=Maintained(order=30, flags=lambda options, th: {"older_than": hours(th.orphan_older_than_hours)},
                                    applied=_applied, nothing_message="no orphan files to remove"))
