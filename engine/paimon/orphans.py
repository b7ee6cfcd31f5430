"""What orphan cleaning reads of a Paimon table: the files it may delete, listed first, and the names the
table uses, read after (``LocalOrphanFilesClean``).

``ListedDirs`` is the one rule for where orphan cleaning looks (the directories Java lists, and in them the
files ``engine.paimon.layout.orphan_kind_of`` accepts); ``list_orphan_candidates`` is the only code that
lists data directories. ``used_names`` is every file name reachable from every snapshot, tag and changelog
of every branch, matched by bare file name as in Java. Why the listing comes first (Paimon #3074):
docs/design/paimon.md#orphan-files.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Callable, Container, Iterable, Iterator

from lakesweep.engine.errors import MetadataNotFound, PlanRejected, TableFormatError
from lakesweep.engine.fileio import FileInfo, join
from lakesweep.engine.listing import ListedFile
from lakesweep.engine.paimon.kinds import OrphanKind
from lakesweep.engine.paimon.layout import Layout, orphan_kind_of
from lakesweep.engine.paimon.model import ManifestFileMeta, Snapshot
from lakesweep.engine.paimon.table import BRANCH_PREFIX, SCHEMA_PREFIX, PaimonTable, parse_versioned_id
from lakesweep.engine.quarantine import quarantined


class ListedDirs:
    """The directories orphan cleaning lists (``OrphanFilesClean#listPaimonFileDirs`` and
    ``#cleanSnapshotDir``), as one rule: ``list_orphan_candidates`` walks exactly these, and a listing made
    elsewhere (an inventory) counts only files directly in them.

    * the ``snapshot/`` and ``changelog/`` directories of main and of every branch that exists;
    * ``manifest/``, ``index/``, ``statistics/``;
    * in each data tree (the table root, or its ``data-file.path-directory``, and every external root):
      the root, the partition directories, one level per key and named ``key=`` of the key at that level,
      and the bucket directories below the last (``Layout.partition_dir``, ``Layout.bucket_dir``);
    * never anything in a root's ``_lakesweep_quarantine`` (``quarantined``): what apply put aside.
    """

    def __init__(self, table: PaimonTable):
        self.table = table
        self.layout = Layout(table)
        loc = table.location
        bases = [loc] + [join(loc, "branch", BRANCH_PREFIX + b) for b in table.branch_names()]
        self.metadata = tuple(join(b, d) for b in bases for d in ("snapshot", "changelog")) + tuple(
            join(loc, d) for d in ("manifest", "index", "statistics"))
        pd = self.layout.path_directory
        self.data_roots = (join(loc, pd) if pd else loc, *self.layout.external)
        self.roots = (loc, *self.layout.external)  # where a quarantine folder lies (``engine.quarantine``)
        self._metadata = frozenset(self.metadata)
        self._listed: dict[str, bool] = {}  # directory -> listed (asked once per file of a listing)

    def in_tree(self, root: str, directory: str) -> bool:
        """``directory`` is a partition or bucket directory of the data tree under ``root``."""
        if not directory.startswith(root + "/"):
            return False
        segments = directory[len(root) + 1:].split("/")
        return self.layout.partition_dir(segments) or self.layout.bucket_dir(segments, with_path_directory=False)

    def lists(self, directory: str) -> bool:
        """Orphan cleaning lists the files of ``directory`` (a full location)."""
        found = self._listed.get(directory)
        if found is None:
            found = self._listed[directory] = not self.quarantined(directory) and (
                directory in self._metadata or directory in self.data_roots
                or any(self.in_tree(root, directory) for root in self.data_roots))
        return found

    def quarantined(self, path: str) -> bool:
        """``path`` (a full location) lies in a root's quarantine folder: not the table's, never listed."""
        return quarantined(path, self.roots)

    def kind_of(self, path: str) -> OrphanKind | None:
        """What orphan cleaning may delete at ``path`` (a full location): ``orphan_kind_of`` for a file
        directly in a listed directory, ``None`` for any other."""
        kind = orphan_kind_of(self.layout, self.table.paths.relative(path))
        return kind if kind is not None and self.lists(posixpath.dirname(path)) else None

    def check_foreign(self, path: str) -> None:
        """Refuse (``PlanRejected``) when ``path`` is ``<d>/schema/schema-<n>`` with ``d`` a listed
        directory other than the table root: another Paimon table lives in ``d``."""
        schema_dir = posixpath.dirname(path)
        holder = posixpath.dirname(schema_dir)
        if (posixpath.basename(schema_dir) == "schema" and holder != self.table.location
                and is_schema_file(posixpath.basename(path)) and self.lists(holder)):
            refuse_foreign_table(self.table, holder, path)


def list_orphan_candidates(table: PaimonTable) -> tuple[ListedFile, ...]:
    """Every file orphan cleaning may delete, whatever its age, sorted by path: the files ``ListedDirs``
    accepts, found by listing its directories. Raises ``StorageError`` when a directory cannot be
    listed, and ``PlanRejected`` when a listed directory holds another table."""
    if table.branch != "main":
        raise PlanRejected("orphan cleaning covers the whole table, every branch included: open its main branch")
    dirs = ListedDirs(table)
    found: list[ListedFile] = []

    def walk(directory: str, root: str | None) -> None:
        """List ``directory``; with a ``root``, go on into the partition and bucket directories of its
        data tree."""
        for page in table.fileio.list_pages(directory):
            for f in page:
                if not f.is_dir:
                    if dirs.kind_of(f.path) is not None:
                        found.append(ListedFile(f.path, f.size, f.mtime_ms))
                    continue
                if dirs.quarantined(f.path):
                    continue
                if directory != table.location:
                    refuse_foreign(table, f)
                if root is not None and dirs.in_tree(root, f.path):
                    walk(f.path, root)

    for directory in dirs.metadata:
        walk(directory, None)
    for root in dirs.data_roots:
        walk(root, root)
    return tuple(sorted(found, key=lambda f: f.path))


def is_schema_file(name: str) -> bool:
    return name.startswith(SCHEMA_PREFIX) and parse_versioned_id(name[len(SCHEMA_PREFIX):]) is not None


def refuse_foreign(table: PaimonTable, directory: FileInfo) -> None:
    """A ``schema`` directory holding ``schema-<n>`` files anywhere orphan cleaning lists, other than the
    table's own: another Paimon table lives there, and its files would all look unused."""
    if posixpath.basename(directory.path) != "schema" or posixpath.dirname(directory.path) == table.location:
        return
    for f in table.fileio.list(directory.path):
        if not f.is_dir and is_schema_file(posixpath.basename(f.path)):
            refuse_foreign_table(table, posixpath.dirname(directory.path), f.path)


def refuse_foreign_table(table: PaimonTable, holder: str, schema_file: str) -> None:
    raise PlanRejected(
        f"{holder} holds another Paimon table's metadata ({schema_file}), inside what orphan cleaning of "
        f"{table.location} lists: that table's files would all look unused. Nothing was planned; move one of "
        "the tables (or its data-file.external-paths) elsewhere")


# -- the used set ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UsedNames:
    """Every file name the table uses, and the snapshot each branch's newest listed snapshot (which
    ``check_latest_covered`` tests the names against)."""

    names: Container[str]  # a frozenset; read elsewhere, the answer for each listed name (``read_used_names``)
    latest: tuple[tuple[PaimonTable, Snapshot], ...]


def branch_views(table: PaimonTable) -> list[PaimonTable]:
    """Main and every branch. A branch without a schema raises (Java aborts orphan cleaning)."""
    return [table] + [table.branch_table(name) for name in table.branch_names()]


def used_names(table: PaimonTable) -> UsedNames:
    """The names of every file reachable from every snapshot, tag and changelog file of every branch:
    manifest lists, manifests, every entry's file and extra files (ADD and DELETE alike), index manifests
    and index files, statistics.

    Fails closed where Java tolerates: a snapshot, tag or changelog that exists but cannot be read, and
    a manifest list, manifest or index manifest they name that is missing or unreadable, raise
    ``TableFormatError`` naming it. Some absences are normal and tolerated, as Paimon's expiry makes them:
    a tag's changelog list (tags do not hold changelog files: ``ExpireSnapshotsImpl``), and a retained
    changelog's base or delta list (``engine.paimon.reachability.changelog_reachable_files``) and index
    manifest (expiry keeps the index manifests of the end snapshot and the tags only; Java reads it "if it
    exists"). A snapshot or changelog file listed but gone when read was expired meanwhile: skipped, as in
    Java.
    """
    names, manifests, latest = used_metadata(table)
    for found in table.manifests_names([manifests[m] for m in sorted(manifests)]):
        names.update(found)
    return UsedNames(frozenset(names), latest)


def used_metadata(table: PaimonTable) -> tuple[set[str], dict[str, ManifestFileMeta], tuple]:
    """``used_names`` but for the manifests' entries: the names it reads from snapshots, tags and
    changelogs, their lists and index manifests; the data manifests they list (by name), whose entries'
    names complete the used set; and ``UsedNames.latest``. Fails as ``used_names`` fails."""
    names: set[str] = set()
    manifests: dict[str, ManifestFileMeta] = {}
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
            _collect(view, c, names, manifests, tolerate_missing=("base", "delta", "changelog", "index"))
    return names, manifests, tuple(latest)


def _collect(view: PaimonTable, s: Snapshot, names: set[str], manifests: dict[str, ManifestFileMeta],
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
            manifests.setdefault(m.file_name, m)
    if s.index_manifest:
        names.add(s.index_manifest)
        try:
            names.update(e.index_file.file_name for e in view.index_manifest(s.index_manifest))
        except MetadataNotFound:
            if "index" not in tolerate_missing:
                raise
    if s.statistics:
        names.add(s.statistics)


def check_latest_covered(table: PaimonTable, used: UsedNames) -> None:
    """Every file the newest snapshot of each branch references must be in the used set (Paimon #7710: a
    used set that misses live files deletes them). A miss is a bug or a table that changed under the read:
    raise ``PlanRejected`` naming the file."""
    for view, snapshot, named in latest_named(used.latest):
        for name, what in named:
            if name not in used.names:
                refuse_uncovered(view, snapshot, what)


def latest_named(latest: Iterable[tuple[PaimonTable, Snapshot]]) -> Iterator[tuple[PaimonTable, Snapshot, list]]:
    """``(view, snapshot, [(name, what), ...])`` for each branch's newest snapshot: every name it references,
    read again from the snapshot (``check_latest_covered``), in the order it is checked."""
    from lakesweep.engine.paimon.reachability import snapshot_files

    for view, snapshot in latest:
        # Read again from the snapshot: its lists, index files, statistics and changelog files, and the
        # names of its data manifests' entries (every one a reader may need; names only, not kept).
        named = [(posixpath.basename(p), p) for p in sorted(snapshot_files(view, snapshot, with_changelog=True))]
        for m in view.data_manifests(snapshot):
            named.append((m.file_name, view.paths.manifest(m.file_name)))
            named.extend((n, f"{n} (named by manifest {m.file_name})") for n in view.manifest_names(m.file_name))
        yield view, snapshot, named


def refuse_uncovered(view: PaimonTable, snapshot: Snapshot, what: str) -> None:
    raise PlanRejected(
        f"the used files read for orphan cleaning miss {what}, which snapshot {snapshot.id} of "
        f"branch '{view.branch}' references; nothing was planned. Re-run 'lakesweep plan orphans' "
        "and report this if it happens again")


def read_used_names(table: PaimonTable, *, reader: Callable[[PaimonTable], UsedNames] | None = None) -> UsedNames:
    """``used_names`` checked with ``check_latest_covered``; a ``TableFormatError`` while reading becomes a
    refusal that names the file. A table in which no branch has a snapshot is refused too (as Java aborts: a used
    set that is unexpectedly empty): an empty or unreadable snapshot listing would make every file of the
    table look unused, tags or not. ``reader``: reads and checks the used set elsewhere (on Spark), failing
    as those two fail, its ``names`` answering for the names of the listing only."""
    try:
        if reader is not None:
            used = reader(table)
        else:
            used = used_names(table)
            check_latest_covered(table, used)
    except TableFormatError as e:
        raise PlanRejected(f"orphan cleaning cannot tell which files {table.location} uses: {e} "
                           "(lakesweep deletes no file it cannot prove unused)") from e
    if not used.latest:
        raise PlanRejected(
            f"orphan cleaning found no snapshot in {table.location} or any of its branches, so every file of "
            "the table would look unused; nothing was planned. If the table really has no snapshot, nothing "
            "in it is Paimon's to keep: remove it yourself")
    return used


# -- the listing is complete ----------------------------------------------------------------------------


def expected_in_listing(used: UsedNames, dirs: ListedDirs) -> dict[str, tuple[str, str]]:
    """What a complete listing must show: every file the newest snapshot of each branch references in a
    place orphan cleaning lists (``ListedDirs.kind_of``), by name (as the used set matches), with its full
    location and what references it."""
    from lakesweep.engine.paimon.reachability import reachable_paths

    out: dict[str, tuple[str, str]] = {}
    for view, snapshot in used.latest:
        for path in sorted(reachable_paths(view, snapshot, with_changelog=True)):
            if dirs.kind_of(path) is not None:
                out.setdefault(posixpath.basename(path), (path, f"snapshot {snapshot.id} of branch '{view.branch}'"))
    return out

