"""What orphan cleaning reads of a Paimon table: the files it may delete, listed first, and the names the
table uses, read after (``LocalOrphanFilesClean``, §8 of the spec).

``list_orphan_candidates`` is the only code that lists data directories. It walks exactly the directories
Java lists (``OrphanFilesClean#listPaimonFileDirs`` and ``#cleanSnapshotDir``) and keeps the files
``engine.paimon.layout.orphan_kind_of`` accepts, so apply accepts every path it returns. The planner gets
its result as a value: listing before the used set is read is what keeps a file written and committed
in between from looking unused (Paimon #3074).

``used_names`` is every file name reachable from every snapshot, tag and changelog of every branch.
Matching is by bare file name, as in Java: a candidate is kept if anything anywhere names it.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Iterable, Iterator

from engine.errors import MetadataNotFound, PlanRejected, TableFormatError
from engine.fileio import FileInfo, join
from engine.paimon.layout import Layout, orphan_kind_of
from engine.paimon.model import Snapshot
from engine.paimon.paths import external_roots
from engine.paimon.table import BRANCH_PREFIX, SCHEMA_PREFIX, PaimonTable, parse_versioned_id


@dataclass(frozen=True, slots=True)
class ListedFile:
    """One file as listed: its full location, size and modification time (``None`` when the store did not
    say; such a file is never deleted)."""

    path: str
    size: int
    mtime_ms: int | None


def list_orphan_candidates(table: PaimonTable) -> tuple[ListedFile, ...]:
    """Every file orphan cleaning may delete, whatever its age, sorted by path. Raises ``StorageError`` when
    a directory cannot be listed, and ``PlanRejected`` when a listed directory holds another table."""
    if table.branch != "main":
        raise PlanRejected("orphan cleaning covers the whole table, every branch included: open its main branch")
    layout = Layout(table)
    fileio = table.fileio
    found: list[ListedFile] = []

    def files_of(directory: str) -> None:
        for f in fileio.list(directory):
            if f.is_dir:
                _refuse_foreign(table, f)
            elif orphan_kind_of(layout, table.paths.relative(f.path)) is not None:
                found.append(ListedFile(f.path, f.size, f.mtime_ms))

    bases = [table.location] + [join(table.location, "branch", BRANCH_PREFIX + b) for b in table.branch_names()]
    for base in bases:
        files_of(join(base, "snapshot"))
        files_of(join(base, "changelog"))
    for name in ("manifest", "index", "statistics"):
        files_of(join(table.location, name))
    data_root = join(table.location, layout.path_directory) if layout.path_directory else table.location
    for root in [data_root, *external_roots(table.options)]:
        for bucket_dir in _bucket_dirs(table, layout, root):
            files_of(bucket_dir)
    return tuple(sorted(found, key=lambda f: f.path))


def _bucket_dirs(table: PaimonTable, layout: Layout, root: str) -> Iterator[str]:
    """``OrphanFilesClean#listFileDirs``: one level per partition key, then the bucket directories. Only
    directories named as Paimon names them (``key=`` of the key at that level, ``bucket-<n>``): the same
    test apply makes. Another table's metadata met on the way is refused."""
    level = [root]
    for key in layout.keys:
        below = []
        for d in level:
            for f in table.fileio.list(d):
                if f.is_dir and d != table.location:
                    _refuse_foreign(table, f)
                name = posixpath.basename(f.path)
                if f.is_dir and name.startswith(key + "="):
                    below.append(f.path)
        level = below
    for d in level:
        for f in table.fileio.list(d):
            if f.is_dir and d != table.location:
                _refuse_foreign(table, f)
            if f.is_dir and _is_bucket_name(posixpath.basename(f.path)):
                yield f.path


def _is_bucket_name(name: str) -> bool:
    rest = name[len("bucket-"):]
    return name.startswith("bucket-") and (rest == "postpone" or (rest.isascii() and rest.isdigit()))


def _refuse_foreign(table: PaimonTable, directory: FileInfo) -> None:
    """A ``schema`` directory holding ``schema-<n>`` files anywhere orphan cleaning lists, other than the
    table's own: another Paimon table lives there, and its files would all look unused."""
    if posixpath.basename(directory.path) != "schema" or posixpath.dirname(directory.path) == table.location:
        return
    for f in table.fileio.list(directory.path):
        name = posixpath.basename(f.path)
        if not f.is_dir and name.startswith(SCHEMA_PREFIX) and parse_versioned_id(name[len(SCHEMA_PREFIX):]) is not None:
            raise PlanRejected(
                f"{posixpath.dirname(directory.path)} holds another Paimon table's metadata ({f.path}), inside "
                f"what orphan cleaning of {table.location} lists: that table's files would all look unused. "
                "Nothing was planned; move one of the tables (or its data-file.external-paths) elsewhere")


# -- the used set ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UsedNames:
    """Every file name the table uses, and the snapshot each branch's newest listed snapshot (which
    ``check_latest_covered`` tests the names against)."""

    names: frozenset[str]
    latest: tuple[tuple[PaimonTable, Snapshot], ...]


def branch_views(table: PaimonTable) -> list[PaimonTable]:
    """Main and every branch. A branch without a schema raises (Java aborts orphan cleaning, T-8)."""
    return [table] + [table.branch_table(name) for name in table.branch_names()]


def used_names(table: PaimonTable) -> UsedNames:
    """The names of every file reachable from every snapshot, tag and changelog file of every branch:
    manifest lists, manifests, every entry's file and extra files (ADD and DELETE alike), index manifests
    and index files, statistics.

    Fails closed where Java tolerates: a snapshot, tag or changelog that exists but cannot be read, and
    a manifest list, manifest or index manifest they name that is missing or unreadable, raise
    ``TableFormatError`` naming it. Two absences are normal and tolerated, as Paimon's expiry makes them:
    a tag's changelog list (tags do not protect changelog files, L-2) and a retained changelog's base or
    delta list (``engine.paimon.reachability.changelog_reachable_files``). A snapshot or changelog file
    listed but gone when read was expired meanwhile: skipped, as in Java.
    """
    names: set[str] = set()
    manifests: set[str] = set()
    latest = []
    for view in branch_views(table):
        newest = None
        for sid in view.list_snapshot_ids():
            s = view.try_snapshot(sid)
            if s is not None:
                _collect(view, s, names, manifests, tolerate_missing=())
                newest = s
        if newest is not None:
            latest.append((view, newest))
        for tag in view.tags():
            _collect(view, tag.snapshot, names, manifests, tolerate_missing=("changelog",))
        for cid in view.list_changelog_ids():
            try:
                c = view.changelog(cid)
            except MetadataNotFound:
                continue
            _collect(view, c, names, manifests, tolerate_missing=("base", "delta", "changelog"))
    for m in sorted(manifests):
        for e in table.manifest(m):
            names.add(e.file.file_name)
            names.update(e.file.extra_files)
    return UsedNames(frozenset(names), tuple(latest))


def _collect(view: PaimonTable, s: Snapshot, names: set[str], manifests: set[str],
             tolerate_missing: Iterable[str]) -> None:
    """``OrphanFilesClean#collectWithoutDataFile``: the lists, their manifests, the index manifest and its
    files, the statistics file of one snapshot-like object."""
    for which, name in (("changelog", s.changelog_manifest_list), ("delta", s.delta_manifest_list),
                        ("base", s.base_manifest_list)):
        if not name:
            continue
        names.add(name)
        try:
            metas = view.manifest_list(name)
        except MetadataNotFound:
            if which in tolerate_missing:
                continue
            raise
        for m in metas:
            names.add(m.file_name)
            manifests.add(m.file_name)
    if s.index_manifest:
        names.add(s.index_manifest)
        names.update(e.index_file.file_name for e in view.index_manifest(s.index_manifest))
    if s.statistics:
        names.add(s.statistics)


def check_latest_covered(table: PaimonTable, used: UsedNames) -> None:
    """Every file the newest snapshot of each branch references must be in the used set (Paimon #7710: a
    used set that misses live files deletes them). A miss is a bug or a table that changed under the read:
    raise ``PlanRejected`` naming the file."""
    from engine.paimon.reachability import reachable_paths

    for view, snapshot in used.latest:
        for path in sorted(reachable_paths(view, snapshot, with_changelog=True)):
            if posixpath.basename(path) not in used.names:
                raise PlanRejected(
                    f"the used files read for orphan cleaning miss {path}, which snapshot {snapshot.id} of "
                    f"branch '{view.branch}' references; nothing was planned. Re-run 'lakesweep plan orphans' "
                    "and report this if it happens again")


def read_used_names(table: PaimonTable) -> UsedNames:
    """``used_names`` checked with ``check_latest_covered``; a ``TableFormatError`` while reading becomes a
    refusal that names the file."""
    try:
        used = used_names(table)
        check_latest_covered(table, used)
    except TableFormatError as e:
        raise PlanRejected(f"orphan cleaning cannot tell which files {table.location} uses: {e} "
                           "(lakesweep deletes no file it cannot prove unused)") from e
    return used
