"""Is a Paimon table whole? Every file its snapshots, tags, branches and changelogs reference exists, with
the size the metadata records; the hints agree with the files; and what its directories hold that nothing
references.

``verify_table`` reads and lists; it changes nothing. It walks each branch (main first): every snapshot from
the earliest to the latest as Paimon resolves them, every tag and every retained changelog. With ``only``,
just those locations are checked for existence and size (what an apply touched); the walk is the same.
What is a problem and what is only noted: docs/design/paimon-tables.md#verify.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass, field
from typing import AbstractSet, Callable, Iterable, Iterator, Mapping

from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, TableFormatError
from lakesweep.engine.fileio import join
from lakesweep.engine.listing import ListedFile
from lakesweep.engine.paimon.layout import Layout, orphan_kind_of
from lakesweep.engine.paimon.orphans import list_orphan_candidates, used_names
from lakesweep.engine.paimon.model import FileKind, Snapshot
from lakesweep.engine.paimon.reachability import changelog_reachable_files, snapshot_files
from lakesweep.engine.paimon.table import CHANGELOG_PREFIX, MAIN_BRANCH, SNAPSHOT_PREFIX, PaimonTable
from lakesweep.engine.plan import kind_spec

MISSING = "missing"
SIZE = "size"
UNREADABLE = "unreadable"
HINT = "hint"
GAP = "gap"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why the table is not whole: ``kind`` (missing, size, unreadable, hint, gap), the file, what is
    wrong, and what needs the file (the first holder met; ``holders`` counts them all)."""

    kind: str
    path: str
    detail: str
    needed_by: str | None = None
    holders: int = 0

    def to_json(self) -> dict:
        return {"kind": self.kind, "path": self.path, "detail": self.detail, "needed_by": self.needed_by,
                "holders": self.holders}


@dataclass(frozen=True)
class VerifyReport:
    """What ``verify_table`` found. ``unreferenced`` is ``None`` when it was not computed (not asked for,
    or the metadata could not all be read, so the used files are not known)."""

    location: str
    holders: dict[str, int]  # snapshots, tags, changelogs, branches walked
    files: int  # referenced files checked
    problems: tuple[Problem, ...]
    notes: tuple[str, ...] = ()
    unreferenced: tuple[ListedFile, ...] | None = None
    only: int | None = None  # the number of locations asked about, when limited to them
    referenced: frozenset[str] = frozenset()  # every referenced file checked (full locations)
    # missing files a plan's quarantine holds, ``{"path", "plan_id", "where"}``, and the commands that restore them
    quarantined: tuple[dict, ...] = ()
    restore_commands: tuple[str, ...] = ()

    @property
    def whole(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        unref = self.unreferenced
        return {
            "table": self.location, "whole": self.whole, "holders": self.holders, "files_checked": self.files,
            "only": self.only, "problems": [p.to_json() for p in self.problems], "notes": list(self.notes),
            "unreferenced": None if unref is None else [
                {"path": f.path, "size": f.size, "mtime_ms": f.mtime_ms} for f in unref],
            "unreferenced_bytes": None if unref is None else sum(f.size or 0 for f in unref),
            "in_quarantine": list(self.quarantined), "restore_commands": list(self.restore_commands),
        }


@dataclass
class _Needed:
    size: int | None
    first: int  # the first holder (in walk order) that needs the file
    holders: int


@dataclass
class _Walk:
    """What the walk found so far. Holders are numbered in walk order; a data manifest remembers which
    holders read it as a bit mask, so that each manifest is read once and a file's holders are worked out
    from the masks of the manifests that add and delete it (``_live_files``)."""

    table: PaimonTable
    only: AbstractSet[str] | None
    labels: list[str] = field(default_factory=list)
    needed: dict[str, _Needed] = field(default_factory=dict)
    readers: dict[str, int] = field(default_factory=dict)  # data manifest name -> mask of holders reading it
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("snapshots", "tags", "changelogs", "branches"), 0))
    unreadable: bool = False

    def holder(self, label: str) -> int:
        self.labels.append(label)
        return len(self.labels) - 1

    def need(self, path: str, size: int | None, first: int, holders: int = 1) -> None:
        if self.only is not None and path not in self.only:
            return
        n = self.needed.get(path)
        if n is None:
            self.needed[path] = _Needed(size, first, holders)
        else:
            n.holders += holders
            n.first = min(n.first, first)
            if n.size is None:
                n.size = size

    def failed(self, first: int, e: TableFormatError, holders: int = 1) -> None:
        """Metadata that cannot be read: a missing list or manifest is a missing file, anything else is
        unreadable. Either way the files behind it are unknown."""
        self.unreadable = True
        label = self.labels[first] if first >= 0 else None
        if isinstance(e, MetadataNotFound):
            self.problems.append(Problem(MISSING, e.path, "metadata file does not exist", label, holders))
        else:
            self.problems.append(Problem(UNREADABLE, e.path, str(e), label, holders))


def verify_table(table: PaimonTable, *, only: Iterable[str] | None = None, unreferenced: bool = False,
                 progress: Callable[[str], None] | None = None) -> VerifyReport:
    """Check ``table`` (every branch; open its main branch). ``only``: full locations to limit the check
    to. ``unreferenced``: also list the files of Paimon's directories that nothing references (by name, as
    orphan cleaning decides; stray files of the snapshot and changelog directories included), whatever
    their age. Raises ``StorageError`` when a directory cannot be listed.

    Costs one read of each manifest list and manifest, and one listing of each directory holding a
    referenced file, however many snapshots share them."""
    walk = _Walk(table, None if only is None else only if isinstance(only, AbstractSet) else frozenset(only))
    views = [table]
    try:
        views += [table.branch_table(name) for name in table.branch_names()]
    except TableFormatError as e:
        walk.failed(-1, e, 0)
    walk.counts["branches"] = len(views) - 1
    for view in views:
        if progress is not None:
            progress(f"branch '{view.branch}'")
        _walk_branch(walk, view)
    if progress is not None:
        progress(f"{len(walk.readers)} manifests")
    _live_files(walk)
    _check_exist(walk)
    unref = None
    if unreferenced and not walk.unreadable and only is None:
        unref = _unreferenced(table)
    return VerifyReport(table.location, walk.counts, len(walk.needed), tuple(walk.problems), tuple(walk.notes),
                        unref, None if only is None else len(walk.only), frozenset(walk.needed))


def _label(view: PaimonTable, what: str) -> str:
    return what if view.branch == MAIN_BRANCH else f"{what} of branch '{view.branch}'"


def _walk_branch(walk: _Walk, view: PaimonTable) -> None:
    for directory, prefix, kind in ((view.snapshot_dir, SNAPSHOT_PREFIX, "snapshot"),
                                    (view.changelog_dir, CHANGELOG_PREFIX, "changelog")):
        read = view.snapshot if kind == "snapshot" else view.changelog
        for sid in _ids_in_range(walk, view, directory, prefix, kind):
            try:
                s = read(sid)
            except MetadataNotFound as e:
                if e.path == join(directory, f"{prefix}{sid}") and _expired_meanwhile(view, kind, sid):
                    continue  # an expiry running now deleted it after the listing
                walk.failed(walk.holder(_label(view, f"{kind} {sid}")), e)
                continue
            except TableFormatError as e:
                walk.failed(walk.holder(_label(view, f"{kind} {sid}")), e)
                continue
            i = walk.holder(_label(view, f"{kind} {sid}"))
            walk.counts[kind + "s"] += 1
            if kind == "snapshot":
                _snapshot_holder(walk, view, i, s, with_changelog=True)
                continue
            try:
                files = changelog_reachable_files(view, s)
            except TableFormatError as e:
                walk.failed(i, e)
                continue
            for path, size in files.items():
                walk.need(path, size, i)
    try:
        tags = view.tags()
    except TableFormatError as e:
        walk.failed(walk.holder(_label(view, "the tags")), e)
        return
    for t in tags:
        walk.counts["tags"] += 1
        _snapshot_holder(walk, view, walk.holder(_label(view, f"tag '{t.name}'")), t.snapshot, with_changelog=False)


def _expired_meanwhile(view: PaimonTable, kind: str, sid: int) -> bool:
    """A snapshot (or changelog) listed a moment ago and gone now, below the earliest one left: an expiry
    running at the same time took it, which is no damage."""
    left = _listed_ids(view, kind)
    return not left or sid < left[0]


def _snapshot_holder(walk: _Walk, view: PaimonTable, i: int, s: Snapshot, *, with_changelog: bool) -> None:
    """A snapshot or tag: its lists, index manifest and files, statistics and (``with_changelog``) its
    changelog list and files are needed now; its data manifests are remembered as read by holder ``i``."""
    paths = view.paths
    try:
        metas = view.data_manifests(s)
        files = snapshot_files(view, s, with_changelog=with_changelog)
    except TableFormatError as e:
        walk.failed(i, e)
        return
    bit = 1 << i
    for m in metas:
        files[paths.manifest(m.file_name)] = m.file_size
        walk.readers[m.file_name] = walk.readers.get(m.file_name, 0) | bit
    for path, size in files.items():
        walk.need(path, size, i)


def _live_files(walk: _Walk) -> None:
    """The data and extra files some holder reads. A file (by ``FileEntry.Identifier``) is live in a
    holder when one of the holder's manifests adds it and none deletes it, as ``FileEntry.mergeEntries``
    merges base and delta; so its holders are the OR of the masks of the manifests adding it, less those
    of the manifests deleting it."""
    table = walk.table
    paths = table.paths
    seen: dict[tuple, list] = {}  # identifier -> [mask of holders adding it, mask deleting it, ADD entry]
    for name in sorted(walk.readers):
        mask = walk.readers[name]
        try:
            entries = table.manifest(name)
        except TableFormatError as e:
            walk.failed(_first(mask), e, mask.bit_count())
            continue
        for e in entries:
            ident = e.identifier
            rec = seen.get(ident)
            if e.kind == FileKind.ADD:
                if rec is None:
                    seen[ident] = [mask, 0, e]
                    continue
                if rec[0] & mask:
                    walk.failed(_first(rec[0] & mask), CorruptMetadata(
                        paths.manifest(name), f"{e.file.file_name} is added twice without a delete in between"))
                rec[0] |= mask
                rec[2] = e
            elif rec is None:
                seen[ident] = [0, mask, None]
            else:
                rec[1] |= mask
    for adding, deleting, e in seen.values():
        live = adding & ~deleting
        if not live:
            continue
        first, holders = _first(live), live.bit_count()
        walk.need(paths.data_file(e.partition, e.bucket, e.file), e.file.file_size, first, holders)
        for x in e.file.extra_files:
            walk.need(paths.extra_file(e.partition, e.bucket, e.file, x), None, first, holders)


def _first(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


def _ids_in_range(walk: _Walk, view: PaimonTable, directory: str, prefix: str, kind: str) -> Iterator[int]:
    """The ids from earliest to latest as Paimon resolves them; the hints checked against the listing.
    LATEST is read before the listing and EARLIEST after it: a commit (LATEST only grows) or an expiry
    (EARLIEST only grows) landing in between leaves a hint behind the listing, never ahead of it."""
    hints = {"LATEST": _hint(walk, view, "LATEST", directory)}
    listed = _listed_ids(view, kind)
    if not listed:
        return
    hints["EARLIEST"] = _hint(walk, view, "EARLIEST", directory)
    newest, oldest = listed[-1], listed[0]
    latest_hint, earliest_hint = hints["LATEST"], hints["EARLIEST"]
    where = _label(view, f"{kind} directory")
    latest = newest
    if latest_hint is not None and latest_hint > newest:
        walk.problems.append(Problem(
            HINT, posixpath.join(directory, "LATEST"),
            f"LATEST says {kind} {latest_hint}, but the newest {kind} is {newest}: readers look for a {kind} "
            "that does not exist", None, 0))
    elif latest_hint is not None and latest_hint not in listed:
        _missing_hint(walk, directory, "LATEST", kind, latest_hint, oldest, newest)
    elif latest_hint is not None and latest_hint < newest:
        walk.notes.append(f"the {where}'s LATEST hint ({latest_hint}) lags the newest {kind} ({newest}); "
                          "Paimon lists the directory then")
    earliest = oldest
    if earliest_hint is not None:
        if earliest_hint in listed:
            earliest = earliest_hint
            below = [i for i in listed if i < earliest_hint]
            if below:
                walk.notes.append(
                    f"{len(below)} {kind} file(s) of the {where} lie below its EARLIEST hint ({earliest_hint}), "
                    f"e.g. {prefix}{below[0]}: not part of the table, their files were not checked")
        else:
            _missing_hint(walk, directory, "EARLIEST", kind, earliest_hint, oldest, newest)
    expected = earliest
    for i in listed:
        if i < earliest or i > latest:
            continue
        if i > expected:
            _gap(walk, directory, prefix, kind, expected, i - 1, earliest, latest)
        expected = i + 1
        yield i


def _missing_hint(walk: _Walk, directory: str, name: str, kind: str, value: int, oldest: int, newest: int) -> None:
    # Paimon lists the directory when a hint names a missing file, so readers still find the table; but
    # the hint is wrong all the same: a stale plan wrote it over a later expiry's, or an expiry stopped
    # between deleting snapshots and writing its hint (resuming it writes the hint).
    walk.problems.append(Problem(
        HINT, posixpath.join(directory, name),
        f"{name} says {kind} {value}, which does not exist (the earliest is {oldest}, the newest {newest}): "
        f"resume the expiry that stopped before writing it, or write {oldest if name == 'EARLIEST' else newest} "
        "into it (or remove it: Paimon then lists the directory)", None, 0))


def _gap(walk: _Walk, directory: str, prefix: str, kind: str, first: int, last: int, earliest: int,
         latest: int) -> None:
    which = f"{kind} {first} is" if first == last else f"{kind}s {first} to {last} are"
    walk.problems.append(Problem(
        GAP, posixpath.join(directory, f"{prefix}{first}"),
        f"{which} missing between the earliest ({earliest}) and the latest ({latest})", None, 0))


def _hint(walk: _Walk, view: PaimonTable, name: str, directory: str) -> int | None:
    try:
        return view.read_hint(name, directory)
    except TableFormatError as e:
        walk.problems.append(Problem(HINT, e.path, str(e), None, 0))
        return None


def _listed_ids(view: PaimonTable, kind: str) -> list[int]:
    return view.list_snapshot_ids() if kind == "snapshot" else view.list_changelog_ids()


def _check_exist(walk: _Walk) -> None:
    """List each directory that holds a needed file once; a file not listed is missing, one listed with
    another size than its metadata records is damaged."""
    by_dir: dict[str, list[str]] = defaultdict(list)
    for path in walk.needed:
        by_dir[posixpath.dirname(path)].append(path)
    fileio = walk.table.fileio
    found: list[Problem] = []
    for directory in sorted(by_dir):
        sizes = {f.path: f.size for f in fileio.list(directory) if not f.is_dir}
        for path in sorted(by_dir[directory]):
            n = walk.needed[path]
            size = sizes.get(path)
            if size is None:
                found.append(Problem(MISSING, path, "file does not exist", walk.labels[n.first], n.holders))
            elif n.size is not None and size != n.size:
                found.append(Problem(SIZE, path, f"{size} bytes, but the metadata records {n.size}",
                                     walk.labels[n.first], n.holders))
    walk.problems[:0] = found


def verify_kept(table: PaimonTable, files: Mapping[str, int | None], needed_by: str) -> VerifyReport:
    """The check after an apply that deleted nothing (a commit): every one of ``files`` (full location ->
    recorded size, None when unknown) is still in place, as the snapshots that ``needed_by`` names need
    them. One listing per directory; no snapshot is walked (the commit changed no older snapshot)."""
    by_dir: dict[str, list[str]] = defaultdict(list)
    for path in files:
        by_dir[posixpath.dirname(path)].append(path)
    problems: list[Problem] = []
    for directory in sorted(by_dir):
        sizes = {f.path: f.size for f in table.fileio.list(directory) if not f.is_dir}
        for path in sorted(by_dir[directory]):
            size, want = sizes.get(path), files[path]
            if size is None:
                problems.append(Problem(MISSING, path, "file does not exist", needed_by, 1))
            elif want is not None and size != want:
                problems.append(Problem(SIZE, path, f"{size} bytes, but the metadata records {want}", needed_by, 1))
    return VerifyReport(table.location, {}, len(files), tuple(problems), (), None, len(files),
                        frozenset(files))


def _unreferenced(table: PaimonTable) -> tuple[ListedFile, ...]:
    """The files orphan cleaning lists that no snapshot, tag or changelog of any branch names."""
    listing = list_orphan_candidates(table)
    used = used_names(table).names
    layout = Layout(table)
    out = []
    for f in listing:
        kind = orphan_kind_of(layout, table.paths.relative(f.path))
        if kind is not None and (not kind_spec(kind).by_name or posixpath.basename(f.path) not in used):
            out.append(f)
    return tuple(out)
