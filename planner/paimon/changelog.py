"""Decoupled changelog expiry planning with Apache Paimon's semantics (``ExpireChangelogImpl``,
``ChangelogDeletion``).

When changelogs outlive snapshots (``changelog.num-retained.*`` or ``changelog.time-retained`` above the
snapshot settings), snapshot expiry leaves a ``changelog/changelog-<id>`` file for every snapshot it
expires, and keeps what a streaming reader of it needs: its changelog list and files, or (``changelog-
producer=none``) its base and delta lists and the APPEND-sourced files its delta deleted. This planner
expires those changelogs as Paimon master does:

* the range: from the earliest changelog up to the first changelog at or after
  ``max(latest snapshot - retain-max + 1, earliest changelog)`` that is younger than the time retained,
  bounded by ``latest snapshot - retain-min + 1``, the oldest consumer's next snapshot, the expire limit
  and the newest changelog (never deleted); nothing when that is not past the earliest changelog (#7923);
* each changelog in it: with a changelog list, every file the list adds and the list's manifests; without
  one, the files its delta deleted (a tag before it keeps its files) and the delta and base lists that
  still exist, with their manifests; never what the skipping set holds (the tags inside the range, the
  changelog at its end and the earliest snapshot); index manifests and statistics are not touched;
* then the changelog files in ascending id, the directories that leaves empty (only with
  ``snapshot.clean-empty-directories``, as Java's ``cleanEmptyDirectories``) and the changelog EARLIEST
  hint.

Metadata that cannot be read stops planning, naming the file; with ``skip_unreadable`` the planner keeps
what depends on it as master does (an unreadable changelog list or manifest leaks the files it names, a
delta that cannot be read keeps its data files, a tag before a changelog that cannot be read keeps that
changelog whole, its file included). The plan is then held to the guard: nothing it deletes is reachable
from the latest or earliest snapshot, a tag, a changelog it keeps or another branch.

Where 0.9 differs (it read every list of every changelog and ran both data branches, bug #7429; it has no
#7923 guard) docs/design/paimon.md says so. Reads no clock.
"""

from __future__ import annotations

import dataclasses

from lakesweep.engine.errors import MetadataNotFound, TableFormatError
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.kinds import CHANGELOG_KIND_OF, CHANGELOG_PHASES, ActionKind, ChangelogKind
from lakesweep.engine.paimon.model import FileKind, Snapshot
from lakesweep.engine.paimon.requirements import changelog_requirements
from lakesweep.engine.paimon.state import snapshot_digest, table_identity
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions, summarize
from lakesweep.planner.paimon.expire import _Notes, _Planner, _previous_tag, find_skipping_tags
from lakesweep.planner.paimon.guard import assert_unreachable
from lakesweep.planner.paimon.options import ExpireOptions
from lakesweep.planner.paimon.options import resolve_expire_options
from lakesweep.planner.plan_kind import PlanDescription, PlanKind


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


def _exists(table: PaimonTable, name: str) -> bool:
    return table.fileio.exists(table.paths.manifest(name))


def plan_changelog(table: PaimonTable, *, now_ms: int, options: ExpireOptions) -> CleanupPlan:
    """Plan the expiry of ``table``'s (branch's) decoupled changelogs as Paimon would run it at ``now_ms``."""
    consumers = {c.consumer_id: c.next_snapshot for c in table.consumers()}
    min_next = min(consumers.values()) if consumers else None
    found = changelog_range(table, now_ms=now_ms, opts=options, min_next=min_next)
    notes = _Notes(strict=not options.skip_unreadable)
    planner = _Planner(table, options, notes)
    tags = table.tags()
    scope: dict = {"begin": None, "end": None, "earliest_hint": None, "bound": None}
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
                try:
                    data = table.fileio.read_bytes(table.changelog_path(cid))
                    c = table.changelog(cid)
                except (FileNotFoundError, MetadataNotFound):
                    continue  # master: a changelog that is gone is skipped (#7923); 0.9 failed here
                if _plan_one(planner, c, tags, skip):
                    changelogs[cid] = snapshot_digest(data)
                    planner._add(ActionKind.SNAPSHOT, table.changelog_path(cid), snapshot_id=cid)
            if options.clean_empty_dirs:
                planner.plan_empty_dirs()
            planner._add(ActionKind.WRITE_EARLIEST_HINT, join(table.changelog_dir, "EARLIEST"), snapshot_id=end)
            scope = {"begin": begin, "end": end, "earliest_hint": end, "bound": bound}
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


def _plan_one(planner: _Planner, c: Snapshot, tags, skip: set[str]) -> bool:
    """One changelog's data files and manifests (``ExpireChangelogImpl#expireUntil``'s loop body); False
    when its files are kept whole, changelog file included (the tag before it cannot be read: master's
    ``continue``)."""
    table = planner.table
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
    if _exists(table, c.delta_manifest_list):
        try:
            deleted = planner._deleted_in_delta(c)
        except TableFormatError as e:
            # planDeletedInDeltaManifest: any read error cancels this changelog's data deletions
            planner.notes.tolerate(e, f"data files deleted by changelog {c.id} are kept")
            deleted = {}
        for path, entry in deleted.items():
            if (entry.partition, entry.bucket, entry.file.file_name) in protected:
                planner.notes.protected_by_tags += 1
                continue
            part = planner._partition(entry.partition)
            planner._add(ActionKind.DATA_FILE, path, snapshot_id=c.id, partition=part, bucket=entry.bucket,
                         size=entry.file.file_size)
            for extra in entry.file.extra_files:
                planner._add(ActionKind.EXTRA_FILE, planner.paths.extra_file(entry.partition, entry.bucket, entry.file,
                                                                             extra),
                             snapshot_id=c.id, partition=part, bucket=entry.bucket)
            planner.deletion_buckets.setdefault(entry.partition, set()).add(entry.bucket)
        planner._manifest_list(c, c.delta_manifest_list, c.delta_manifest_list_size, skip)
    if _exists(table, c.base_manifest_list):
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


def _plan(table, *, now_ms: int, options, read=None) -> CleanupPlan:
    return plan_changelog(table, now_ms=now_ms, options=options)


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


KIND = PlanKind("changelog", resolve_options=_resolve, plan=_plan, describe=describe_changelog, format="paimon")
