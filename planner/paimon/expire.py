"""Snapshot expiration planning with Apache Paimon's exact semantics.

``plan_expire(table, now_ms=..., options=...)`` mirrors ``ExpireSnapshotsImpl#expire`` and
``#expireUntil`` (master) but only *plans*: it reads metadata through the
table view, reads no clock, writes nothing, and returns a deterministic ``CleanupPlan``.

Where Java tolerates an unreadable file by keeping what depends on it, the planner does the same only
with ``skip_unreadable``; by default it raises naming the file (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

from lakesweep.engine.errors import MetadataNotFound, StorageError, TableFormatError
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.model import FileKind, FileSource, ManifestEntry, Snapshot, Tag
from lakesweep.engine.plan import CleanupPlan, Verb, summarize
from lakesweep.engine.plan_columns import ActionColumnsBuilder, ColumnActions, values, values_of_kind
from lakesweep.engine.paimon.manifests import (ROW_BUCKET, ROW_EXTERNAL_PATH, ROW_EXTRA_FILES, ROW_FILE_NAME,
                                               ROW_FILE_SIZE, ROW_FILE_SOURCE, ROW_KIND, ROW_PARTITION, entry_rows,
                                               row_entry)
from lakesweep.engine.paimon.kinds import EXPIRE_PHASES, PARTITIONED_KINDS, ActionKind
from lakesweep.engine.paimon.requirements import expire_requirements
from lakesweep.engine.paimon.scopes import ExpireScope
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.paimon.state import snapshot_pins, table_fingerprint, table_identity
from lakesweep.planner.paimon.guard import assert_unreachable
from lakesweep.planner.paimon.options import INT_MAX, TIME_RULE_OWN, ExpireOptions
from lakesweep.planner.paimon.options import resolve_expire_options
from lakesweep.planner.plan_kind import Maintained, PlanDescription, PlanKind


_DELETING = frozenset(v for v in Verb if v.deletes)  # a verb, or its text (equal to it)


@dataclass
class _Notes:
    """What the planner saw on the way: warnings for the reviewer, counts for ``show``."""

    strict: bool
    warnings: list[str] = field(default_factory=list)
    protected_by_tags: int = 0
    deferred_to_changelog: int = 0
    skipped_snapshots: list[int] = field(default_factory=list)

    def tolerate(self, error: TableFormatError, consequence: str) -> None:
        """Java keeps what depends on an unreadable file; lakesweep raises unless told to skip."""
        if self.strict:
            raise error
        self.warnings.append(f"{error} -> {consequence}")


def compute_end(table: PaimonTable, earliest: int, latest: int, opts: ExpireOptions, now_ms: int, consumers) -> tuple[int, str]:
    """The first snapshot to keep (``endExclusive``) and what bounded it."""
    older_than = now_ms - opts.time_retained_ms
    low = max(latest - opts.retain_max + 1, earliest)
    end, bound = latest - opts.retain_min + 1, "retain-min"
    if not opts.consumer_changelog_only and consumers:
        slowest = min(c.next_snapshot for c in consumers)
        if slowest < end:
            end, bound = slowest, "consumer"
    if earliest + opts.max_deletes < end:
        end, bound = earliest + opts.max_deletes, "expire-limit"
    for sid in range(low, end):
        if opts.time_rule == TIME_RULE_OWN:
            snap = table.try_snapshot(sid)  # Paimon < 2.0: the snapshot's own time
        else:
            snap = table.try_snapshot(sid + 1)  # Paimon 2.0: its successor's time
        if snap is not None and older_than <= snap.time_millis:
            return sid, "time-retained"
    return end, bound


def find_skipping_tags(tags: list[Tag], begin: int, end: int) -> list[Tag]:
    """``SnapshotManager.findSkippingTags``: the last tag at or before ``begin`` and every tag inside."""
    right = max((i for i, t in enumerate(tags) if t.snapshot.id < end), default=-1)
    if right < 0:
        return []
    left = max(max((i for i, t in enumerate(tags) if t.snapshot.id <= begin), default=-1), 0)
    return tags[left:right + 1]


def _previous_tag(tags: list[Tag], snapshot_id: int) -> Tag | None:
    prev = None
    for t in tags:
        if t.snapshot.id < snapshot_id:
            prev = t
        else:
            break
    return prev


class Reads(Protocol):
    """Manifests read for the planner elsewhere (``applier.paimon_expire``), answering as the table's own reads."""

    def deleted_in_delta(self, snapshot: Snapshot) -> dict[str, tuple]:
        """``_Planner._deleted_in_delta`` of one of the snapshots read (in any order), ``decode_manifest``'s
        rows by path; raises what it raises."""

    def changelog_manifest(self, name: str) -> list[ManifestEntry]:
        """The ADD entries of a changelog manifest read (at least); raises what ``PaimonTable.manifest`` raises."""


class _Planner:
    def __init__(self, table: PaimonTable, opts: ExpireOptions, notes: _Notes):
        self.table = table
        self.paths = table.paths
        self.opts = opts
        self.notes = notes
        self.actions = ActionColumnsBuilder()  # a million files as columns, not as ``Action`` objects
        self._partitions: dict[bytes, str] = {}
        self.deletion_buckets: dict[bytes, set[int]] = {}
        self._tag_files: dict[int, frozenset | None] = {}

    # -- helpers --------------------------------------------------------------------------------

    def _add(self, kind: ActionKind, full_path: str, **kw) -> None:
        self.actions.add(kind, self.paths.relative(full_path), **kw)

    def _partition(self, entry_partition: bytes) -> str:
        """The partition's path, one string for all the actions of a partition."""
        part = self._partitions.get(entry_partition)
        if part is None:
            part = self._partitions[entry_partition] = self.paths.partition_path(entry_partition).rstrip("/")
        return part

    def _tag_live_files(self, tag: Tag) -> frozenset | None:
        """``(partition, bucket, fileName)`` of the tag's merged live files; ``None`` if unreadable."""
        if tag.snapshot.id not in self._tag_files:
            try:
                entries = self.table.live_entries(tag.snapshot)
                self._tag_files[tag.snapshot.id] = frozenset(
                    (e.partition, e.bucket, e.file.file_name) for e in entries
                )
            except TableFormatError as e:
                self.notes.tolerate(e, f"data files of snapshots after tag '{tag.name}' are kept")
                self._tag_files[tag.snapshot.id] = None
        return self._tag_files[tag.snapshot.id]

    # -- (3) data files ------------------------------------------------------------------------

    def plan_data_files(self, snapshots: list[Snapshot], begin: int, tags: list[Tag],
                        reads: "Reads | None", kept: list[int] = ()) -> None:
        """``kept``: ids of snapshots whose manifests are read again after (by the guard)."""
        defer_append = self.opts.changelog_decoupled and self.opts.changelog_producer == "none"
        if reads is None:
            deleted_in_delta = _DeltaStream(self, [s for s in snapshots if s.id != begin],
                                            [t.snapshot for t in tags], kept)
        else:
            deleted_in_delta = reads.deleted_in_delta
        for s in snapshots:
            if s.id == begin:
                continue
            tag = _previous_tag(tags, s.id)
            protected = self._tag_live_files(tag) if tag is not None else frozenset()
            if protected is None:
                self.notes.skipped_snapshots.append(s.id)
                continue
            try:
                to_delete = deleted_in_delta(s)
            except TableFormatError as e:
                self.notes.tolerate(e, f"data files deleted by snapshot {s.id} are kept")
                self.notes.skipped_snapshots.append(s.id)
                continue
            for path, row in to_delete.items():
                if (row[ROW_PARTITION], row[ROW_BUCKET], row[ROW_FILE_NAME]) in protected:
                    self.notes.protected_by_tags += 1
                    continue
                if defer_append and (row[ROW_FILE_SOURCE] is None or row[ROW_FILE_SOURCE] == FileSource.APPEND):
                    self.notes.deferred_to_changelog += 1
                    continue
                self.add_deleted(s.id, path, row)
        if reads is None:
            deleted_in_delta.close()

    def add_deleted(self, snapshot_id: int, path: str, row: tuple) -> None:
        """The actions for a data file at ``path`` that ``snapshot_id``'s delta deletes (``row``, a row of
        ``_deleted_in``'s): the file and its extra files."""
        partition, bucket = row[ROW_PARTITION], row[ROW_BUCKET]
        part = self._partition(partition)
        self._add(ActionKind.DATA_FILE, path, snapshot_id=snapshot_id, partition=part, bucket=bucket,
                  size=row[ROW_FILE_SIZE])
        if row[ROW_EXTRA_FILES]:
            file = row_entry(row).file
            for extra in file.extra_files:
                self._add(ActionKind.EXTRA_FILE, self.paths.extra_file(partition, bucket, file, extra),
                          snapshot_id=snapshot_id, partition=part, bucket=bucket)
        self.deletion_buckets.setdefault(partition, set()).add(bucket)

    def _deleted_in_delta(self, s: Snapshot) -> dict[str, tuple]:
        """``planDeletedInDeltaManifest``: DELETE entries of the delta (as ``decode_manifest``'s rows) keyed by
        resolved path; a later ADD of the same path (an upgrade) cancels the DELETE. Any read error raises."""
        return self._deleted_in(entry_rows(self.table.manifest(meta.file_name))
                                for meta in self.table.manifest_list(s.delta_manifest_list))

    def _deleted_in(self, manifests) -> dict[str, tuple]:
        """``_deleted_in_delta`` of the delta manifests' rows ``manifests`` (``decode_manifest``'s).

        An ADD only cancels a DELETE read before it of the same path, so the same last name: an ADD whose
        name no DELETE so far had is passed over without making its path (most of a delta's ADDs: the files
        its snapshot wrote). No entry is built: the rows are kept as they came."""
        to_delete: dict[str, tuple] = {}
        names: set[str] = set()  # the last name of every DELETE's path so far
        data_path = self.paths.data_path
        for rows in manifests:
            for row in rows:
                if row[ROW_KIND] == FileKind.ADD:
                    if not to_delete or (row[ROW_EXTERNAL_PATH] is None and row[ROW_FILE_NAME] not in names):
                        continue
                    to_delete.pop(data_path(row[ROW_PARTITION], row[ROW_BUCKET], row[ROW_FILE_NAME],
                                            row[ROW_EXTERNAL_PATH]), None)
                else:
                    path = data_path(row[ROW_PARTITION], row[ROW_BUCKET], row[ROW_FILE_NAME], row[ROW_EXTERNAL_PATH])
                    to_delete[path] = row
                    names.add(path.rpartition("/")[2])
        return to_delete

    # -- (4) changelog files -------------------------------------------------------------------

    def plan_changelog_files(self, expiring: list[Snapshot], reads: "Reads | None") -> None:
        if reads is None:
            self.table.prefetch_ahead(m for s in expiring if s.changelog_manifest_list
                                      for m in self.table.manifest_list(s.changelog_manifest_list))
            manifest = self.table.manifest
        else:
            manifest = reads.changelog_manifest
        for s in expiring:
            if not s.changelog_manifest_list:
                continue
            try:
                metas = self.table.manifest_list(s.changelog_manifest_list)
            except TableFormatError as e:
                self.notes.tolerate(e, f"changelog files of snapshot {s.id} are kept")
                continue
            for meta in metas:
                try:
                    entries = manifest(meta.file_name)
                except TableFormatError as e:
                    self.notes.tolerate(e, f"changelog files listed in it (snapshot {s.id}) are kept")
                    continue
                for entry in entries:
                    if entry.kind != FileKind.ADD:
                        continue
                    self._add(ActionKind.CHANGELOG_FILE, self.paths.data_file(entry.partition, entry.bucket, entry.file),
                              snapshot_id=s.id, partition=self._partition(entry.partition), bucket=entry.bucket,
                              size=entry.file.file_size)
                    self.deletion_buckets.setdefault(entry.partition, set()).add(entry.bucket)

    # -- (5) empty directories -----------------------------------------------------------------

    def plan_empty_dirs(self) -> None:
        """Bucket directories, then partition directories deepest first (``cleanEmptyDirectories``).

        Apply deletes a directory only if it is empty, never recursively.
        """
        for partition in sorted(self.deletion_buckets):
            for bucket in sorted(self.deletion_buckets[partition]):
                rel = self.paths.relative_bucket_dir(partition, bucket)
                self.actions.add(ActionKind.EMPTY_DIR, rel, bucket=bucket, depth=rel.count("/") + 1,
                                 partition=self._partition(partition))
            for d in self.paths.partition_dirs(partition):
                rel = self.paths.relative(d)
                self.actions.add(ActionKind.EMPTY_DIR, rel, depth=rel.count("/") + 1,
                                 partition=self._partition(partition))

    # -- (6) manifests, index files, statistics ------------------------------------------------

    def skipping_set(self, keep: list[Snapshot]) -> set[str] | None:
        """``manifestSkippingSet``: every metadata name the kept snapshots and skipping tags use."""
        names: set[str] = set()
        for s in keep:
            try:
                names.add(s.base_manifest_list)
                names.add(s.delta_manifest_list)
                names.update(m.file_name for m in self.table.data_manifests(s))
                if s.index_manifest:
                    names.add(s.index_manifest)
                    names.update(e.index_file.file_name for e in self.table.index_manifest(s.index_manifest))
                if s.statistics:
                    names.add(s.statistics)
            except TableFormatError as e:
                self.notes.tolerate(e, "no manifest, index or statistics file is deleted")
                return None
        return names

    def plan_metadata(self, expiring: list[Snapshot], skip: set[str]) -> None:
        decoupled = self.opts.changelog_decoupled
        delete_data_lists = not decoupled or self.opts.changelog_producer != "none"
        delete_changelog = not decoupled
        self.table.prefetch_lists(
            (name, size) for s in expiring for name, size, wanted in (
                (s.base_manifest_list, s.base_manifest_list_size, delete_data_lists),
                (s.delta_manifest_list, s.delta_manifest_list_size, delete_data_lists),
                (s.changelog_manifest_list, s.changelog_manifest_list_size, delete_changelog)) if wanted and name)
        for s in expiring:
            if delete_data_lists:
                self._manifest_list(s, s.base_manifest_list, s.base_manifest_list_size, skip)
                self._manifest_list(s, s.delta_manifest_list, s.delta_manifest_list_size, skip)
            if delete_changelog and s.changelog_manifest_list:
                self._manifest_list(s, s.changelog_manifest_list, s.changelog_manifest_list_size, skip)
            if s.index_manifest:
                try:
                    entries = self.table.index_manifest(s.index_manifest)
                except MetadataNotFound:
                    entries = None  # Java: FileNotFound -> nothing to do for this index manifest
                except TableFormatError:
                    raise  # Java: any other IOException fails the run
                if entries is not None:
                    for e in entries:
                        f = e.index_file
                        if f.file_name not in skip:
                            skip.add(f.file_name)
                            self._add(ActionKind.INDEX_FILE,
                                      self.paths.index_file(e.partition, e.bucket, f.file_name, f.external_path),
                                      snapshot_id=s.id, partition=self._partition(e.partition), bucket=e.bucket,
                                      size=f.file_size)
                    if s.index_manifest not in skip:
                        skip.add(s.index_manifest)
                        self._add(ActionKind.INDEX_MANIFEST, self.paths.manifest(s.index_manifest), snapshot_id=s.id)
            if s.statistics and s.statistics not in skip:
                skip.add(s.statistics)
                self._add(ActionKind.STATISTICS, self.paths.statistics(s.statistics), snapshot_id=s.id)

    def _manifest_list(self, s: Snapshot, name: str, size: int | None, skip: set[str]) -> None:
        try:
            metas = self.table.manifest_list(name)
        except TableFormatError as e:
            # Java's tryReadManifestList: the list's manifests leak, the list itself is still deleted.
            self.notes.tolerate(e, f"the manifests it lists (snapshot {s.id}) are kept")
            metas = []
        for m in metas:
            if m.file_name not in skip:
                skip.add(m.file_name)
                self._add(ActionKind.MANIFEST, self.paths.manifest(m.file_name), snapshot_id=s.id, size=m.file_size)
        if name not in skip:
            skip.add(name)
            self._add(ActionKind.MANIFEST_LIST, self.paths.manifest(name), snapshot_id=s.id, size=size)

    # -- (7) snapshot files and the hint -------------------------------------------------------

    def plan_snapshots(self, expiring: list[Snapshot], end: int) -> None:
        for s in expiring:
            snap_path = self.table.snapshot_path(s.id)
            if self.opts.changelog_decoupled:
                self._add(ActionKind.WRITE_CHANGELOG, self.table.changelog_path(s.id), snapshot_id=s.id,
                          source=self.paths.relative(snap_path))
            self._add(ActionKind.SNAPSHOT, snap_path, snapshot_id=s.id)
        self.plan_hint(end)

    def plan_hint(self, value: int) -> None:
        self._add(ActionKind.WRITE_EARLIEST_HINT, join(self.table.snapshot_dir, "EARLIEST"), snapshot_id=value)


class _DeltaStream:
    """``_Planner._deleted_in_delta`` of ``snapshots``, asked in their order (some may be passed over), their
    delta manifests read ahead and decoded on every core but not kept (a million-file expiry would otherwise
    hold every entry it read until it ends), but those the tags and the ``kept`` snapshots also use, which the
    guard reads again: each manifest is read once. At the first manifest list or manifest
    that cannot be read, that snapshot and those after it are read one by one, which raises the error (or
    the caller tolerates it) where and as it would without reading ahead."""

    def __init__(self, planner: _Planner, snapshots: list[Snapshot], tagged: list[Snapshot], kept: list[int]):
        self.planner = planner
        table = planner.table
        used: set[str] = set()  # manifests the tags and the ``kept`` ids use: read again later, so kept
        for s in [*tagged, *kept]:
            try:
                s = table.try_snapshot(s) if isinstance(s, int) else s
                if s is not None:
                    used.update(m.file_name for m in table.data_manifests(s))
            except (TableFormatError, StorageError):
                pass  # not a result: whoever reads it later raises it, or tolerates it, then
        self.streamed: set[int] = set()
        metas = []
        owners = []
        table.prefetch_lists((s.delta_manifest_list, s.delta_manifest_list_size) for s in snapshots)
        for s in snapshots:
            try:
                listed = table.manifest_list(s.delta_manifest_list)
            except (TableFormatError, StorageError):
                break
            self.streamed.add(s.id)
            metas += listed
            owners += [s.id] * len(listed)
        self.owners = owners
        self.position = 0
        self.entries = table.manifests_once(metas, keep=used)

    def __call__(self, s: Snapshot) -> dict[str, tuple]:
        if s.id in self.streamed:
            manifests = []
            try:
                while self.position < len(self.owners) and self.owners[self.position] != s.id:
                    self._next()  # a snapshot passed over (an unreadable tag keeps its files)
                while self.position < len(self.owners) and self.owners[self.position] == s.id:
                    manifests.append(self._next())
                return self.planner._deleted_in(manifests)
            except (TableFormatError, StorageError):
                self.streamed.clear()  # this one and those after it: one by one
        return self.planner._deleted_in_delta(s)

    def _next(self) -> list[tuple]:
        self.position += 1
        return next(self.entries)

    def close(self) -> None:
        """Stop reading ahead (the snapshots after the last one asked for are not read)."""
        self.entries.close()


def plan_expire(table: PaimonTable, *, now_ms: int, options: ExpireOptions,
                read_manifests: Callable[[PaimonTable, list[Snapshot], list[Snapshot]], Reads] | None = None
                ) -> CleanupPlan:
    """Plan a snapshot expiration of ``table`` as Paimon would run it at ``now_ms``.

    Pure: reads only through ``table``, no clock, no writes. Raises ``TableFormatError`` (naming the
    file) when metadata it needs cannot be read, unless ``options.skip_unreadable``;
    ``PlannerInvariantViolated`` if a planned path is still reachable (a bug, never silenced).
    ``read_manifests(table, data, changelog)``: reads the delta manifests of the ``data`` snapshots and the
    changelog manifests of the ``changelog`` ones elsewhere (on Spark) instead of one by one through ``table``.
    """
    notes = _Notes(strict=not options.skip_unreadable)
    fingerprint = table_fingerprint(table)
    earliest, latest = fingerprint.earliest, fingerprint.latest
    consumers = table.consumers()
    tags = table.tags()
    planner = _Planner(table, options, notes)

    def finish(begin, end, hint, bound, backlog=0, end_exists=False):
        """``end_exists``: planning found the snapshot ``end`` (pinned: apply holds it to what it held)."""
        actions = planner.actions.canonical()
        if actions:
            assert_unreachable(table, actions, end=end, tags=tags, tolerate=None if notes.strict else notes.tolerate)
        expired = values_of_kind(actions, "snapshot_id", ActionKind.SNAPSHOT)
        pinned = set(expired)
        if end_exists:
            pinned.add(end)
        stats = {
            "bound": bound,
            "protected_by_tags": notes.protected_by_tags,
            "deferred_to_changelog": notes.deferred_to_changelog,
            "skipped_snapshots": sorted(set(notes.skipped_snapshots)),
            "warnings": notes.warnings,
            "changelog_decoupled": options.changelog_decoupled,
            "earliest": earliest,
            "latest": latest,
            "summary": summarize(actions, by_partition=PARTITIONED_KINDS),
        }
        if bound == "expire-limit":  # what a user with a backlog needs to know: how many more plans to go
            stats["expirable_beyond_limit"] = backlog
        identity = table_identity(table)
        pins = snapshot_pins(table, pinned)  # also refuses a snapshot replaced while planning
        deletes = (actions.deletes_anything() if isinstance(actions, ColumnActions)
                   else any(map(_DELETING.__contains__, values(actions, "verb"))))
        requirements = expire_requirements(
            identity=identity, location=table.location, branch=table.branch, begin=begin, end=end, hint=hint,
            deletes=deletes, schema_id=fingerprint.schema_id, branches=tuple(fingerprint.branches),
            tags=fingerprint.tags, consumers=fingerprint.consumers,
            consumer_changelog_only=options.consumer_changelog_only,
            snapshots=expired,
            pins=pins,
        )
        return CleanupPlan(
            kind="expire",
            format="paimon",
            table_location=table.location,
            table_identity=identity,
            branch=table.branch,
            now_ms=now_ms,
            options=dict(options.sources),
            scope=ExpireScope(begin=begin, end=end, earliest_hint=hint),
            requirements=requirements,
            phases=EXPIRE_PHASES,
            actions=actions,
            stats=stats,
        )

    if latest is None or earliest is None:
        return finish(None, None, None, "no-snapshots")

    end, bound = compute_end(table, earliest, latest, options, now_ms, consumers)
    backlog = 0
    if bound == "expire-limit":
        unbounded, _ = compute_end(table, earliest, latest, replace(options, max_deletes=INT_MAX), now_ms, consumers)
        backlog = unbounded - end
    if end > latest:  # impossible with retain-min >= 1; checked because it would expire everything
        raise AssertionError(f"end {end} is beyond the latest snapshot {latest}")

    if end <= earliest:
        hint = None
        if table.read_hint("EARLIEST") is None:
            planner.plan_hint(earliest)  # Java writes a missing EARLIEST hint even when nothing expires
            hint = earliest
        # the earliest snapshot exists: ``earliest_latest`` found its file
        return finish(earliest, earliest, hint, bound, backlog, end_exists=True)

    snapshots = []
    table.prefetch_snapshots(range(earliest, end + 1))
    for sid in range(earliest, end + 1):
        s = table.try_snapshot(sid)
        if s is None:
            notes.warnings.append(f"snapshot {sid} is missing: the files it deleted are left for orphan cleaning")
        else:
            snapshots.append(s)
    if not snapshots:
        return finish(None, end, None, bound, backlog)
    begin = snapshots[0].id
    expiring = [s for s in snapshots if s.id != end]

    reads = None if read_manifests is None else read_manifests(
        table, [s for s in snapshots if s.id != begin], [] if options.changelog_decoupled else expiring)
    planner.plan_data_files(snapshots, begin, tags, reads, kept=sorted({end, latest}))
    if not options.changelog_decoupled:
        planner.plan_changelog_files(expiring, reads)
    if options.clean_empty_dirs:
        planner.plan_empty_dirs()

    if snapshots[-1].id != end:
        # Java stops here: data is deleted, manifests and snapshot files stay for the next run (L-3).
        notes.tolerate(
            MetadataNotFound(table.snapshot_path(end), "end snapshot"),
            "manifests and snapshot files are kept; only data files are deleted",
        )
        return finish(begin, end, None, bound, backlog)

    keep = [t.snapshot for t in find_skipping_tags(tags, begin, end)] + [snapshots[-1]]
    skip = planner.skipping_set(keep)
    if skip is not None:
        planner.plan_metadata(expiring, skip)
    planner.plan_snapshots(expiring, end)
    return finish(begin, end, end, bound, backlog, end_exists=True)


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

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


def _applied(plan: CleanupPlan, counts) -> str:
    return f"expired snapshots [{plan.begin}, {plan.end}), deleted {counts.get('DELETED', 0)} file(s)"


def _plan(table, *, now_ms: int, options, read=None) -> CleanupPlan:
    return plan_expire(table, now_ms=now_ms, options=options)


KIND = PlanKind("expire", resolve_options=resolve_expire_options, plan=_plan, describe=describe_expire,
                format="paimon", maintain=Maintained(order=20, flags=lambda options, th: {}, applied=_applied))
