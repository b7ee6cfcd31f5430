"""Decoupled changelog expiry planning with Apache Paimon's semantics (``ExpireChangelogImpl``,
``ChangelogDeletion``), as Paimon master does.

The range runs from the earliest changelog to a bound set by the retained counts and time, the oldest
consumer and the newest changelog (never deleted). Each changelog in it gives the files its changelog list
adds, or without one the files its delta deleted and its remaining lists, never what the skipping set
holds; then the changelog files, the directories left empty and the EARLIEST hint. Metadata that cannot be
read stops planning (``skip_unreadable``: kept as master keeps it); the plan is held to the guard. Reads no
clock. The rules, and where 0.9 differs: docs/design/paimon.md#decoupled-changelog-expiry.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from lakesweep.engine.errors import MetadataNotFound, TableFormatError
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.kinds import CHANGELOG_KIND_OF, CHANGELOG_PHASES, ActionKind, ChangelogKind
from lakesweep.engine.paimon.model import FileKind, Snapshot
from lakesweep.engine.paimon.manifests import ROW_BUCKET, ROW_FILE_NAME, ROW_PARTITION
from lakesweep.engine.paimon.plan_reads import changelog_digests, existing_manifests
from lakesweep.engine.paimon.requirements import changelog_requirements
from lakesweep.engine.paimon.scopes import ChangelogScope
from lakesweep.engine.paimon.state import table_identity
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions, summarize
from lakesweep.planner.paimon.expire import _Notes, _Planner, _previous_tag, find_skipping_tags
from lakesweep.planner.paimon.guard import assert_unreachable
from lakesweep.planner.paimon.options import ExpireOptions
from lakesweep.planner.paimon.options import resolve_expire_options
from lakesweep.planner.plan_kind import PlanCommand, PlanDescription, PlanFlag, PlanKind


def changelog_range(table: PaimonTable, *, now_ms: int, opts: ExpireOptions, min_next: int | None) -> tuple[int, int, str] | None:
    """``ExpireChangelogImpl#expire``'s arithmetic: (begin, end exclusive, what bounded it), or None."""
    earliest_s, latest_s = table.earliest_latest()
    earliest_c, latest_c = table.changelog_earliest_latest()
    if None in (earliest_s, latest_s, earliest_c, latest_c):
        return None
    low = max(latest_s - opts.changelog_retain_max + 1, earliest_c)
    bounds = [(latest_s - opts.changelog_retain_min + 1, "changelog.num-retained.min")]
    if min_next is not None:
        bounds.append((min_next, "a consumer"))
    bounds += [(earliest_c + opts.max_deletes, "snapshot.expire.limit"), (latest_c, "the newest changelog")]
    high, bound = min(bounds, key=lambda b: b[0])
    if high <= earliest_c:
        return None
    older_than = now_ms - opts.changelog_time_retained_ms
    for cid in range(low, high + 1):
        try:
            c = table.changelog(cid)
        except MetadataNotFound:
            continue
        if older_than <= c.time_millis:
            return earliest_c, cid, "changelog.time-retained"
    return earliest_c, high, bound


def _skipping_set(planner: _Planner, keep: list[Snapshot]) -> set[str]:
    """``ChangelogDeletion.manifestSkippingSet``: lists (only those that exist) and their manifests, index
    manifests (if they exist) and their files, statistics, of what the range must not touch."""
    table = planner.table
    names: set[str] = set()
    for s in keep:
        for name in (s.base_manifest_list, s.delta_manifest_list):
            try:
                metas = table.manifest_list(name)
            except MetadataNotFound:
                continue
            names.add(name)
            names.update(m.file_name for m in metas)
        if s.index_manifest:
            try:
                entries = table.index_manifest(s.index_manifest)
            except MetadataNotFound:
                entries = None
            if entries is not None:
                names.add(s.index_manifest)
                names.update(e.index_file.file_name for e in entries)
        if s.statistics:
            names.add(s.statistics)
    return names


@dataclass(frozen=True, slots=True)
class ChangelogRead:
    """What changelog expiry needs beyond the table's metadata, read by the caller (``read_changelog``)."""

    consumers: Mapping[str, int]  # consumer id -> its next snapshot
    found: tuple[int, int, str] | None  # ``changelog_range``'s answer
    digests: Mapping[int, str]  # changelog id in the range -> digest of its file; one gone since is left out
    lists: frozenset[str]  # of the base and delta lists of the range's changelogs without a changelog list,
    # those that exist


def read_changelog(table: PaimonTable, *, now_ms: int, options: ExpireOptions) -> ChangelogRead:
    """The range to expire, with the digest of each of its changelog files and which of the manifest lists
    they name exist (``ChangelogDeletion`` deletes a list only if it does)."""
    consumers = {c.consumer_id: c.next_snapshot for c in table.consumers()}
    min_next = min(consumers.values()) if consumers else None
    found = changelog_range(table, now_ms=now_ms, opts=options, min_next=min_next)
    digests: dict[int, str] = {}
    lists: set[str] = set()
    if found is not None and found[1] > found[0]:
        for cid, digest in changelog_digests(table, range(found[0], found[1])).items():
            try:
                c = table.changelog(cid)
            except MetadataNotFound:
                continue
            digests[cid] = digest
            if not c.changelog_manifest_list:
                lists |= {c.delta_manifest_list, c.base_manifest_list}
    return ChangelogRead(consumers, found, digests, existing_manifests(table, lists))


def plan_changelog(table: PaimonTable, *, now_ms: int, options: ExpireOptions, read: ChangelogRead) -> CleanupPlan:
    """Plan the expiry of ``table``'s (branch's) decoupled changelogs as Paimon would run it at ``now_ms``,
    over the range ``read`` (``read_changelog``) holds."""
    consumers = read.consumers
    found = read.found
    notes = _Notes(strict=not options.skip_unreadable)
    planner = _Planner(table, options, notes)
    tags = table.tags()
    scope = ChangelogScope(begin=None, end=None, earliest_hint=None, bound=None)
    requirements = ()
    changelogs: dict[int, str] = {}
    if found is not None and found[1] > found[0]:
        begin, end, bound = found
        try:
            end_changelog = table.changelog(end)
        except MetadataNotFound:
            end_changelog = None  # master: logs an error and expires nothing
        if end_changelog is not None:
            earliest_s = table.snapshot(table.earliest_latest()[0])
            keep = [t.snapshot for t in find_skipping_tags(tags, begin, end)] + [end_changelog, earliest_s]
            skip = _skipping_set(planner, keep)
            for cid in range(begin, end):
                if cid not in read.digests:
                    continue  # master: a changelog that is gone is skipped (#7923); 0.9 failed here
                c = table.changelog(cid)
                if _plan_one(planner, c, tags, skip, read.lists):
                    changelogs[cid] = read.digests[cid]
                    planner._add(ActionKind.SNAPSHOT, table.changelog_path(cid), snapshot_id=cid)
            if options.clean_empty_dirs:
                planner.plan_empty_dirs()
            planner._add(ActionKind.WRITE_EARLIEST_HINT, join(table.changelog_dir, "EARLIEST"), snapshot_id=end)
            scope = ChangelogScope(begin=begin, end=end, earliest_hint=end, bound=bound)
            requirements = changelog_requirements(
                identity=table_identity(table), location=table.location, branch=table.branch, begin=begin, end=end,
                hint=end, schema_id=table.schema.id, branches=table.branch_names(),
                tags={t.name: t.snapshot.id for t in tags}, consumers=consumers, changelogs=changelogs)
    if not requirements:
        from lakesweep.engine.paimon.requirements import AssertTableIdentity

        requirements = (AssertTableIdentity(table_identity(table), table.location, table.branch),)
    actions = canonical_actions([_as_changelog_kind(a) for a in planner.actions])
    if actions:
        # the guard's kept snapshot is the earliest one, which the skipping set held; the changelogs this
        # plan deletes hold nothing once it is done
        assert_unreachable(table, actions, end=table.earliest_latest()[0],
                           tolerate=None if notes.strict else notes.tolerate, without_changelogs=frozenset(changelogs))
    return CleanupPlan(
        kind="changelog",
        format="paimon",
        table_location=table.location,
        table_identity=table_identity(table),
        branch=table.branch,
        now_ms=now_ms,
        options=dict(options.sources),
        scope=scope,
        requirements=requirements,
        phases=CHANGELOG_PHASES,
        actions=actions,
        stats={"summary": summarize(actions), "warnings": list(notes.warnings),
               "changelogs": len(changelogs), "protected_by_tags": notes.protected_by_tags,
               "skipped_changelogs": sorted(set(notes.skipped_snapshots))},
    )


def _plan_one(planner: _Planner, c: Snapshot, tags, skip: set[str], lists: frozenset[str]) -> bool:
    """One changelog's data files and manifests (``ExpireChangelogImpl#expireUntil``'s loop body); False
    when its files are kept whole, changelog file included (the tag before it cannot be read: master's
    ``continue``)."""
    # master builds the skipper for every changelog, one with a changelog list too, before anything else
    tag = _previous_tag(tags, c.id)
    protected = planner._tag_live_files(tag) if tag is not None else frozenset()
    if protected is None:
        planner.notes.skipped_snapshots.append(c.id)
        return False
    if c.changelog_manifest_list:
        _plan_changelog_list_files(planner, c)
        planner._manifest_list(c, c.changelog_manifest_list, c.changelog_manifest_list_size, skip)
        return True
    if c.delta_manifest_list in lists:
        try:
            deleted = planner._deleted_in_delta(c)
        except TableFormatError as e:
            # planDeletedInDeltaManifest: any read error cancels this changelog's data deletions
            planner.notes.tolerate(e, f"data files deleted by changelog {c.id} are kept")
            deleted = {}
        for path, row in deleted.items():
            if (row[ROW_PARTITION], row[ROW_BUCKET], row[ROW_FILE_NAME]) in protected:
                planner.notes.protected_by_tags += 1
                continue
            planner.add_deleted(c.id, path, row)
        planner._manifest_list(c, c.delta_manifest_list, c.delta_manifest_list_size, skip)
    if c.base_manifest_list in lists:
        planner._manifest_list(c, c.base_manifest_list, c.base_manifest_list_size, skip)
    return True


def _plan_changelog_list_files(planner: _Planner, c: Snapshot) -> None:
    """``planAddedInChangelogManifest``: every file the changelog's manifests add, no tag skipper (tags do
    not hold changelog files). An unreadable list or manifest leaks what it names, as in Java."""
    table = planner.table
    try:
        metas = table.manifest_list(c.changelog_manifest_list)
    except TableFormatError as e:
        planner.notes.tolerate(e, f"the changelog files of changelog {c.id} are kept")
        return
    for meta in metas:
        try:
            entries = table.manifest(meta.file_name)
        except TableFormatError as e:
            planner.notes.tolerate(e, f"the changelog files it lists (changelog {c.id}) are kept")
            continue
        for entry in entries:
            if entry.kind == FileKind.ADD:
                planner._add(ActionKind.CHANGELOG_FILE, planner.paths.data_file(entry.partition, entry.bucket, entry.file),
                             snapshot_id=c.id, partition=planner._partition(entry.partition), bucket=entry.bucket,
                             size=entry.file.file_size)
                planner.deletion_buckets.setdefault(entry.partition, set()).add(entry.bucket)


_META = {ActionKind.SNAPSHOT: ChangelogKind.CHANGELOG_META,
         ActionKind.WRITE_EARLIEST_HINT: ChangelogKind.WRITE_EARLIEST_HINT}


def _as_changelog_kind(a: Action) -> Action:
    kind = CHANGELOG_KIND_OF.get(a.kind) or _META[a.kind]
    return dataclasses.replace(a, kind=kind, verb=None, phase=0)


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

def _resolve(table_options, **flags):
    keys = {"retain_min": "changelog.num-retained.min", "retain_max": "changelog.num-retained.max",
            "time_retained": "changelog.time-retained"}
    overrides = dict(flags.pop("overrides", None) or {})
    for flag, key in keys.items():
        value = flags.pop(flag, None)
        if value is not None:
            overrides[key] = str(value)
    return resolve_expire_options(table_options, overrides=overrides, **flags)


def _plan(table, *, now_ms: int, options, read: ChangelogRead) -> CleanupPlan:
    return plan_changelog(table, now_ms=now_ms, options=options, read=read)


def describe_changelog(plan: CleanupPlan) -> PlanDescription:
    """A decoupled changelog expiry: its range, what bounded it, and what it deletes."""
    begin, end = plan.begin, plan.end
    document = {"range": {"begin": begin, "end": end}, "earliest_hint": plan.earliest_hint,
                "bound": plan.scope.bound}
    if begin is None or end is None or not plan.actions:
        return PlanDescription(nothing_to_do=True, nothing_label="No changelogs to expire",
                               scope=f"branch '{plan.branch}' keeps every changelog: none is past what the "
                                     "changelog.* retention keeps, or its changelogs are not decoupled.",
                               document=document)
    notes = [f"bounded by {plan.scope.bound}"]
    if plan.stats.get("protected_by_tags"):
        notes.append(f"{plan.stats['protected_by_tags']} data file(s) kept for tags")
    return PlanDescription(nothing_to_do=False, document=document, notes=tuple(notes),
                           scope=f"expires changelogs [{begin}, {end}) of branch '{plan.branch}', then sets the "
                                 f"changelog EARLIEST hint to {end}")


COMMAND = PlanCommand(
    short_help="Expire decoupled changelogs (Paimon).",
    help="Plan the expiry of decoupled changelogs as Apache Paimon would run it, and save the plan.\n\n"
         "When changelogs outlive snapshots, snapshot expiry leaves changelog/changelog-<id> files and the files "
         "streaming readers of them need; this plans their expiry with Paimon's changelog.num-retained.* and "
         "changelog.time-retained arithmetic and deletion rules.\n\n"
         "Nothing is deleted now. Review the plan with 'lakesweep show PLAN'.",
    flags=(PlanFlag("retain_min", int, "Keep at least this many newest changelogs (changelog.num-retained.min, "
                    "default: the snapshot setting)."),
           PlanFlag("retain_max", int, "Keep at most this many (changelog.num-retained.max)."),
           PlanFlag("time_retained", str, "Keep changelogs younger than this, e.g. '7 d' (changelog.time-retained)."),
           PlanFlag("max_deletes", int, "Expire at most this many changelogs in one plan (snapshot.expire.limit, "
                    "default 50)."),
           PlanFlag("skip_unreadable", bool, "Do as Paimon does with unreadable metadata: keep what depends on it "
                    "and plan the rest (warnings list it). Without it, planning stops and names the file.",
                    default=False)),
    branch="Branch whose changelogs to expire.")

KIND = PlanKind("changelog", resolve_options=_resolve, plan=_plan, describe=describe_changelog, format="paimon",
                command=COMMAND, read=read_changelog)
