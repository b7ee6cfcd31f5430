"""What a Paimon table still needs: the files reachable from what it keeps.

The holders, for an expiry of one branch: the branch's latest snapshot and the plan's end snapshot (with
their changelog files), or for apply's gate (``every_snapshot``) every snapshot the plan does not delete;
every tag of the branch; every retained changelog; every snapshot and tag of every other branch (main's
included). The planner's guard and apply's re-check both use these holders, so what is protected at plan time
is exactly what is re-checked before each destructive phase. Why each one holds:
docs/design/paimon-tables.md#holders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Callable, Iterator

from lakesweep.engine.errors import MetadataNotFound, TableFormatError
from lakesweep.engine.paimon.model import FileKind, FileSource, Snapshot
from lakesweep.engine.paimon.table import MAIN_BRANCH, PaimonTable


class PathColumn:
    """Full paths held as one Arrow string column: a planned set of a million files without a Python string
    (and a set entry) per path. ``reached(reachable)`` is ``reachable & set(paths)``."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def reached(self, reachable) -> set[str]:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not reachable:
            return set()
        try:
            value_set = pa.array(list(reachable), pa.string())
        except (pa.ArrowException, UnicodeError):  # a path UTF-8 cannot hold: compared as Python strings
            return set(reachable) & set(self.paths.to_pylist())
        return set(self.paths.filter(pc.is_in(self.paths, value_set=value_set)).to_pylist())


@dataclass(frozen=True)
class Holder:
    """One thing the table keeps. ``own`` is true for the branch being expired (its latest and end
    snapshots, tags and changelogs); false for other branches, whose files a plan cannot know about."""

    what: str
    table: PaimonTable
    snapshot: Snapshot
    kind: str  # "snapshot" (with changelog files), "added" (see ``added_files``), "tag", "changelog", "branch"
    own: bool


def reachable_paths(table: PaimonTable, snapshot: Snapshot, *, with_changelog: bool) -> set[str]:
    """Every file a reader of ``snapshot`` needs: lists, manifests, data and extra files, index
    manifest and index files, statistics; with ``with_changelog`` also its changelog list and files."""
    return set(reachable_files(table, snapshot, with_changelog=with_changelog))


def reachable_files(table: PaimonTable, snapshot: Snapshot, *, with_changelog: bool) -> dict[str, int | None]:
    """``reachable_paths`` with the size the metadata records for each file (``None`` where it records
    none: manifest lists, extra files, the index manifest, statistics)."""
    paths = table.paths
    out = snapshot_files(table, snapshot, with_changelog=with_changelog)
    for m in table.data_manifests(snapshot):
        out[paths.manifest(m.file_name)] = m.file_size
    for e in table.live_entries(snapshot):
        out[paths.data_file(e.partition, e.bucket, e.file)] = e.file.file_size
        for x in e.file.extra_files:
            out[paths.extra_file(e.partition, e.bucket, e.file, x)] = None
    return out


def snapshot_files(table: PaimonTable, snapshot: Snapshot, *, with_changelog: bool) -> dict[str, int | None]:
    """What ``snapshot`` needs besides its data manifests and data files: its two lists, its index
    manifest and index files, its statistics, and with ``with_changelog`` its changelog list and files."""
    paths = table.paths
    out: dict[str, int | None] = {paths.manifest(snapshot.base_manifest_list): None,
                                  paths.manifest(snapshot.delta_manifest_list): None}
    if snapshot.index_manifest:
        out[paths.manifest(snapshot.index_manifest)] = None
        for ie in table.index_manifest(snapshot.index_manifest):
            f = ie.index_file
            out[paths.index_file(ie.partition, ie.bucket, f.file_name, f.external_path)] = f.file_size
    if snapshot.statistics:
        out[paths.statistics(snapshot.statistics)] = None
    if with_changelog and snapshot.changelog_manifest_list:
        out.update(changelog_list_files(table, snapshot.changelog_manifest_list))
    return out


def added_files(table: PaimonTable, snapshot: Snapshot) -> dict[str, int | None]:
    """What a reader of ``snapshot`` needs beyond what a reader of the snapshot before it needs: its own
    lists, index files, statistics and changelog files, every data manifest it reads, and the data and
    extra files its own commit added.

    Exact when the snapshot before it is checked too: a snapshot's base list is its predecessor's live
    set, so every file live in it is live in the predecessor or added by its delta (a compaction's upgrade
    is an ADD in the same delta; docs/design/paimon-tables.md#contiguous-lifetimes). Reads one delta's
    entries instead of merging the whole live set of every retained snapshot."""
    paths = table.paths
    out = snapshot_files(table, snapshot, with_changelog=True)
    for m in table.data_manifests(snapshot):
        out[paths.manifest(m.file_name)] = m.file_size
    delta = table.manifest_list(snapshot.delta_manifest_list)
    table.prefetch(delta)
    for m in delta:
        for e in table.manifest(m.file_name):
            if e.kind == FileKind.ADD:
                out[paths.data_file(e.partition, e.bucket, e.file)] = e.file.file_size
                for x in e.file.extra_files:
                    out[paths.extra_file(e.partition, e.bucket, e.file, x)] = None
    return out


def changelog_list_files(table: PaimonTable, name: str) -> dict[str, int | None]:
    """A changelog manifest list, its manifests and the changelog files they add, with recorded sizes."""
    paths = table.paths
    out: dict[str, int | None] = {paths.manifest(name): None}
    metas = table.manifest_list(name)
    table.prefetch(metas)
    for m in metas:
        out[paths.manifest(m.file_name)] = m.file_size
        for e in table.manifest(m.file_name):
            if e.kind == FileKind.ADD:
                out[paths.data_file(e.partition, e.bucket, e.file)] = e.file.file_size
    return out


def changelog_reachable_files(table: PaimonTable, changelog: Snapshot) -> dict[str, int | None]:
    """What a retained changelog still needs, with recorded sizes, as Paimon's changelog expiry
    (``ChangelogDeletion``) will later clean it up: with a changelog list, that list, its manifests and
    the changelog files; without one (``changelog-producer=none``), the base and delta lists that exist,
    their manifests, and the APPEND-sourced files the delta added (what a streaming reader of that
    changelog reads). A list that no longer exists protects nothing, as in Java; one that exists but
    cannot be read raises."""
    if changelog.changelog_manifest_list:
        return changelog_list_files(table, changelog.changelog_manifest_list)
    paths = table.paths
    out: dict[str, int | None] = {}
    for name, delta in ((changelog.base_manifest_list, False), (changelog.delta_manifest_list, True)):
        try:
            metas = table.manifest_list(name)
        except MetadataNotFound:
            continue
        out[paths.manifest(name)] = None
        if delta:
            table.prefetch(metas)
        for m in metas:
            out[paths.manifest(m.file_name)] = m.file_size
            if not delta:
                continue
            for e in table.manifest(m.file_name):
                source = e.file.file_source
                if e.kind == FileKind.ADD and (source is None or source == FileSource.APPEND):
                    out[paths.data_file(e.partition, e.bucket, e.file)] = e.file.file_size
                    for x in e.file.extra_files:
                        out[paths.extra_file(e.partition, e.bucket, e.file, x)] = None
    return out


def holder_files(holder: Holder) -> dict[str, int | None]:
    """The files ``holder`` keeps, with their recorded sizes."""
    if holder.kind == "changelog":
        return changelog_reachable_files(holder.table, holder.snapshot)
    if holder.kind == "added":
        return added_files(holder.table, holder.snapshot)
    return reachable_files(holder.table, holder.snapshot, with_changelog=holder.kind == "snapshot")


def holders(
    table: PaimonTable,
    *,
    end: int | None,
    tolerate: Callable[[TableFormatError, str], None] | None = None,
    without_tags: AbstractSet[str] = frozenset(),
    without_changelogs: AbstractSet[int] = frozenset(),
    every_snapshot: bool = False,
    without_snapshots: AbstractSet[int] = frozenset(),
) -> Iterator[Holder]:
    """Every holder of ``table``'s branch and of every other branch (see the module docstring), except the
    branch's tags named in ``without_tags`` and changelogs in ``without_changelogs`` (those a plan deletes
    along with the files only they hold).

    With ``every_snapshot`` (apply's gate, which trusts nothing the plan says about its range), every
    snapshot of the branch from the earliest (as Paimon resolves it: files below the EARLIEST hint are not
    part of the table) is a holder but those in ``without_snapshots`` (the snapshot files the plan
    deletes): the latest, then the others in ascending order, the first of each run of consecutive ids
    whole and each next one by what it added (``added_files``). ``end`` is then one of them.

    A holder that cannot be read raises its ``TableFormatError``; with ``tolerate`` (the planner's
    skip-unreadable mode) it is reported through it and skipped.
    """

    def guarded(sid_reader, what):
        try:
            return sid_reader()
        except TableFormatError as e:
            if tolerate is None:
                raise
            tolerate(e, f"the guard could not check the plan against {what}")
            return None

    earliest, latest = table.earliest_latest()
    for sid, what in ((latest, f"the latest snapshot {latest}"), (end, f"the retained snapshot {end}")):
        if sid is None or (what.startswith("the retained") and (end == latest or every_snapshot)):
            continue
        s = guarded(lambda: table.try_snapshot(sid), what)
        if s is not None:
            yield Holder(what, table, s, "snapshot", True)
    if every_snapshot:
        yield from _retained_snapshots(table, earliest, latest, without_snapshots, guarded)
    for t in table.tags():
        if t.name not in without_tags:
            yield Holder(f"tag '{t.name}' (snapshot {t.snapshot.id})", table, t.snapshot, "tag", True)
    for cid in table.list_changelog_ids():
        if cid in without_changelogs:
            continue
        what = f"the retained changelog {cid}"
        c = guarded(lambda: _try_changelog(table, cid), what)
        if c is not None:
            yield Holder(what, table, c, "changelog", True)
    for other in other_branches(table):
        label = "main" if other.branch == MAIN_BRANCH else f"branch '{other.branch}'"
        for sid in other.list_snapshot_ids():
            s = other.try_snapshot(sid)
            if s is not None:
                yield Holder(f"snapshot {sid} of {label}", other, s, "branch", False)
        for t in other.tags():
            yield Holder(f"tag '{t.name}' of {label} (snapshot {t.snapshot.id})", other, t.snapshot, "branch", False)


def _retained_snapshots(table: PaimonTable, earliest: int | None, latest: int | None, without: AbstractSet[int],
                        guarded: Callable) -> Iterator[Holder]:
    """Every listed snapshot of ``table``'s branch from ``earliest`` on, but the latest and those in
    ``without``, ascending: one whose predecessor was yielded as ``added``, any other whole."""
    previous = None
    for sid in table.list_snapshot_ids():
        if earliest is None or sid < earliest or sid == latest or sid in without:
            previous = None
            continue
        what = f"the retained snapshot {sid}"
        s = guarded(lambda: table.try_snapshot(sid), what)
        if s is not None:
            yield Holder(what, table, s, "added" if previous == sid - 1 else "snapshot", True)
        previous = sid if s is not None else None


def _try_changelog(table: PaimonTable, cid: int) -> Snapshot | None:
    try:
        return table.changelog(cid)
    except MetadataNotFound:
        return None


def other_branches(table: PaimonTable) -> list[PaimonTable]:
    """Views of every branch other than ``table``'s, main included when ``table`` is a branch."""
    main = table if table.branch == MAIN_BRANCH else table.refreshed(MAIN_BRANCH)
    out = [] if table.branch == MAIN_BRANCH else [main]
    out += [main.branch_table(name) for name in main.branch_names() if name != table.branch]
    return out


def first_reachable(
    table: PaimonTable,
    planned: AbstractSet[str] | PathColumn,
    *,
    end: int | None,
    tolerate: Callable[[TableFormatError, str], None] | None = None,
    without_tags: AbstractSet[str] = frozenset(),
    without_changelogs: AbstractSet[int] = frozenset(),
    every_snapshot: bool = False,
    without_snapshots: AbstractSet[int] = frozenset(),
) -> tuple[Holder, str] | None:
    """The first holder (in ``holders`` order) that reaches one of the ``planned`` full paths, with that
    path; ``None`` when no holder reaches any of them. ``planned`` that is no set of Python's own (a view
    through an index) is asked about each of a holder's files: intersecting would walk all of it."""
    if not planned:
        return None
    for holder in holders(table, end=end, tolerate=tolerate, without_tags=without_tags,
                          without_changelogs=without_changelogs, every_snapshot=every_snapshot,
                          without_snapshots=without_snapshots):
        try:
            reachable = holder_files(holder).keys()
        except TableFormatError as e:
            if tolerate is None:
                raise
            tolerate(e, f"the guard could not check the plan against {holder.what}")
            continue
        if isinstance(planned, PathColumn):
            hits = planned.reached(reachable)
        elif isinstance(planned, (set, frozenset)):
            hits = reachable & planned
        else:
            hits = [path for path in reachable if path in planned]
        if hits:
            return holder, min(hits)
    return None
