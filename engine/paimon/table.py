"""A read-only view of one Paimon table (one branch of it) on a FileIO.

Resolution of EARLIEST/LATEST follows ``SnapshotManager``: the LATEST hint may lag but
never lead, the EARLIEST hint is trusted when its snapshot exists. Every read that fails raises a typed
error naming the path; "not found" and "cannot read" are never confused. Many manifests are decoded on
every core (``prefetch``, ``engine.decode_pool``) into the cache the one-by-one reads fill.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from typing import AbstractSet, Callable, Iterable, Iterator, Protocol, Sequence, TypeVar

from lakesweep.engine.decode_pool import processes_for
from lakesweep.engine.errors import (CorruptMetadata, MetadataNotFound, PlanRejected, StorageError, TableFormatError,
                                     UnsupportedTable)
from lakesweep.engine.fileio import FileIO, fileio_for, join, normalize_location, read_each, read_threads
from lakesweep.engine.paimon.manifests import (decode_manifest, decode_manifest_list, decode_manifest_names,
                                               entry_rows, manifest_entries, parse_index_manifest, parse_manifest,
                                               parse_manifest_names)
from lakesweep.engine.paimon.model import (LONG_MAX, Consumer, FileKind, IndexManifestEntry, ManifestEntry,
                                           ManifestFileMeta, Snapshot, TableSchema, Tag, check_json_long, int_list)
from lakesweep.engine.paimon.decode_batches import read_and_decode
from lakesweep.engine.paimon.paths import PATH_SHAPING_OPTIONS, PathFactory, check_path_options_stable

T = TypeVar("T")

MAIN_BRANCH = "main"
SNAPSHOT_PREFIX = "snapshot-"
CHANGELOG_PREFIX = "changelog-"
SCHEMA_PREFIX = "schema-"
TAG_PREFIX = "tag-"
CONSUMER_PREFIX = "consumer-"
BRANCH_PREFIX = "branch-"


_CANONICAL_ID = re.compile(r"0|[1-9][0-9]*")  # ASCII digits only: str.isdigit would take '²' and '１'
_HINT = re.compile(r"[+-]?[0-9]+")
# Reads of a hint file that does not parse before it is refused: Paimon's SnapshotManager reads one 3 times
# (READ_HINT_RETRY_NUM), 1 ms apart; 10 ms here leaves a loaded machine's writer time to finish its write.
HINT_READS = 3
HINT_READ_PAUSE_S = 0.01


def parse_versioned_id(rest: str) -> int | None:
    """The id in the rest of a ``{prefix}{id}`` name, or ``None`` when it is not one.

    Paimon master skips names that ``Long.parseLong`` rejects. ``parseLong`` also takes '01', '+1',
    '１' (fullwidth) and '١' (Arabic-Indic) as 1, but the file Paimon then reads and deletes for id 1 is
    ``{prefix}1``, never the listed one; such names are ignored here, so that no id is counted that no
    file spells. An id beyond a Java long is ignored too (``parseLong`` rejects it).
    """
    if not _CANONICAL_ID.fullmatch(rest):
        return None
    value = int(rest)
    return value if value <= LONG_MAX else None


LIST_BYTES = 1_024  # what a manifest list of unrecorded size is taken to hold, to choose how it is decoded
SNAPSHOT_READS = 4_096  # snapshot files read ahead at once (``prefetch_snapshots``): a few MiB held
IMMUTABLE_KINDS = frozenset({"list", "manifest", "index", "live"})  # "live" is keyed by manifest list names


class ReadObserver(Protocol):
    """Told what a table view reads, e.g. to show progress. Called on the reading thread, after the read
    succeeded; it must not raise. Views made from a view (``refreshed``, ``branch_table``) tell the same
    observer."""

    def read(self, path: str, what: str, nbytes: int) -> None:
        """A metadata file was read from storage: ``what`` is "snapshot", "manifest list", "manifest",
        "index manifest", "schema", "tag", ... Reads answered from the view's cache are not reported."""

    def named(self, names: Sequence[str]) -> None:
        """A snapshot, tag or manifest list just read names these files of the manifest directory
        (manifest lists, manifests, index manifests). An estimate of what may be read next: a name can
        come more than once, and not every named file is read (a kept snapshot's manifests may not be)."""


def branch_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a branch other than main (``None`` when it can).

    Paimon's ``BranchManager.validateBranch`` refuses ``main``, a blank name and a name made only of
    digits (``Character.isDigit``, i.e. any Unicode decimal digit). It does not refuse path separators or
    ``..``, which would make ``branch/branch-<name>`` point somewhere else (``../../..`` is the table
    root): lakesweep refuses those too, and NUL.
    """
    if not isinstance(name, str):
        return "it is not a string"
    if name == MAIN_BRANCH:
        return f"'{MAIN_BRANCH}' is the default branch"
    if not name.strip():
        return "it is blank"
    if name.isdecimal():
        return "it is purely numeric (Paimon would read it as a snapshot id)"
    if name in (".", ".."):
        return f"it is '{name}'"
    for bad, shown in (("/", "'/'"), ("\\", "'\\'"), ("\x00", "a NUL character")):
        if bad in name:
            return f"it contains {shown}"
    return None


def check_branch_name(name: str) -> str:
    """``name`` if it names the main branch or a valid branch; ``PlanRejected`` otherwise."""
    if name == MAIN_BRANCH:
        return name
    problem = branch_name_problem(name)
    if problem is not None:
        raise PlanRejected(f"branch name {name!r} is not a valid Paimon branch name: {problem}")
    return name


def _versioned_ids(files, prefix: str) -> list[int]:
    """Ids of ``{prefix}{id}`` names; other names starting with the prefix are stray files, ignored."""
    ids = []
    for f in files:
        if f.is_dir:
            continue
        name = f.path.rsplit("/", 1)[-1]
        if name.startswith(prefix):
            value = parse_versioned_id(name[len(prefix):])
            if value is not None:
                ids.append(value)
    return sorted(ids)


def _entry_names(entries: Sequence[ManifestEntry]) -> list[str]:
    """The file names (and extra files) of manifest entries, as ``parse_manifest_names`` gives them."""
    return [n for e in entries for n in (e.file.file_name, *e.file.extra_files)]


class PaimonTable:
    """Metadata of one branch of a Paimon table. Data files are never opened."""

    def __init__(self, location: str, fileio: FileIO | None = None, branch: str = MAIN_BRANCH,
                 on_read: ReadObserver | None = None):
        self.location = normalize_location(location) if fileio is None or fileio.scheme != "memory" else location
        self.fileio = fileio or fileio_for(self.location)
        self.branch = check_branch_name(branch)
        self.base = self.location if branch == MAIN_BRANCH else join(self.location, "branch", BRANCH_PREFIX + branch)
        self._cache: dict[tuple[str, str], object] = {}
        self._digests: dict[str, str] = {}  # snapshot and changelog files read: the digest of their bytes
        self._lock = threading.Lock()
        # Manifests, lists and index manifests are named by UUID and never rewritten: views of the same
        # table (other branches, a refreshed view) share what was read of them.
        self._files: dict[tuple[str, str], object] = {}
        self._files_lock = threading.Lock()
        self._schema: TableSchema | None = None
        self._paths: PathFactory | None = None
        self._threads: int | None = None
        self.on_read = on_read

    def __repr__(self):
        return f"PaimonTable({self.location!r}, branch={self.branch!r})"

    # -- low level reads -----------------------------------------------------------------------

    def _read(self, path: str, what: str) -> bytes:
        try:
            data = self.fileio.read_bytes(path)
        except FileNotFoundError as e:
            raise MetadataNotFound(path, what) from e
        if self.on_read is not None:
            self.on_read.read(path, what, len(data))
        return data

    def _read_manifest(self, path: str) -> bytes:
        return self._read(path, "manifest")

    def _named(self, names: Iterable[str | None]) -> None:
        if self.on_read is not None:
            self.on_read.named([n for n in names if n])

    def _json(self, path: str, what: str) -> dict:
        return _parsed_json(path, what, self._read(path, what))

    @property
    def _read_threads(self) -> int:
        """The threads to read this table's metadata files on (``read_threads``), asked once per view."""
        if self._threads is None:
            self._threads = read_threads(self.fileio, self.location)
        return self._threads

    def _cached(self, kind: str, name: str, load: Callable[[], T]) -> T:
        key = (kind, name)
        store, lock = (self._files, self._files_lock) if kind in IMMUTABLE_KINDS else (self._cache, self._lock)
        with lock:
            if key in store:
                return store[key]  # type: ignore[return-value]
        value = load()  # only successful reads are cached
        with lock:
            store[key] = value
        return value

    def refreshed(self, branch: str | None = None) -> "PaimonTable":
        """A new view of this branch (or of ``branch``) that reads snapshots, tags, hints and schemas anew,
        sharing what was already read of the files that never change."""
        t = PaimonTable(self.location, self.fileio, self.branch if branch is None else branch, self.on_read)
        t._files, t._files_lock, t._threads = self._files, self._files_lock, self._threads
        return t

    # -- schema and paths ----------------------------------------------------------------------

    def schema_ids(self) -> list[int]:
        return _versioned_ids(self.fileio.list(join(self.base, "schema")), SCHEMA_PREFIX)

    def read_schema(self, schema_id: int) -> TableSchema:
        path = join(self.base, "schema", f"{SCHEMA_PREFIX}{schema_id}")

        def load():
            obj = self._json(path, "schema")
            try:
                schema = TableSchema.from_json(obj)
            except (KeyError, TypeError, ValueError) as e:
                raise CorruptMetadata(path, f"malformed schema: {e}") from e
            _check_id_matches_name(path, "schema", schema.id, schema_id)
            return schema

        return self._cached("schema", path, load)

    @property
    def schema(self) -> TableSchema:
        """The latest schema (max id): its options and partition types are what Java uses."""
        if self._schema is None:
            ids = self.schema_ids()
            if not ids:
                raise MetadataNotFound(join(self.base, "schema"), "schema (is this a Paimon table?)")
            self._schema = self.read_schema(ids[-1])
        return self._schema

    @property
    def options(self):
        return self.schema.options

    def check_supported(self) -> None:
        """Refuse what lakesweep cannot handle exactly like Paimon (fail closed)."""
        opts = self.options
        fmt = opts.get("manifest.format", "avro").lower()
        if fmt != "avro":
            raise UnsupportedTable(f"{self.location}: manifest.format={fmt}; lakesweep reads Avro manifests only")
        if opts.get("type", "table").lower() not in ("table", "paimon"):
            raise UnsupportedTable(f"{self.location}: table type '{opts.get('type')}' is not a Paimon file store table")
        check_path_options_stable([self.read_schema(i) for i in self.schema_ids()], PATH_SHAPING_OPTIONS)
        for k, t in zip(self.schema.partition_keys, self.schema.partition_types):
            if not t.is_atomic or t.root == "UNKNOWN":
                raise UnsupportedTable(f"{self.location}: partition field '{k}' has an unsupported type {t.raw}")

    @property
    def paths(self) -> PathFactory:
        if self._paths is None:
            s = self.schema
            self._paths = PathFactory(self.location, s.partition_keys, s.partition_types, s.options)
        return self._paths

    # -- snapshots -----------------------------------------------------------------------------

    @property
    def snapshot_dir(self) -> str:
        return join(self.base, "snapshot")

    def snapshot_path(self, snapshot_id: int) -> str:
        return join(self.snapshot_dir, f"{SNAPSHOT_PREFIX}{snapshot_id}")

    def list_snapshot_ids(self) -> list[int]:
        return _versioned_ids(self.fileio.list(self.snapshot_dir), SNAPSHOT_PREFIX)

    def read_hint(self, name: str, directory: str | None = None) -> int | None:
        """The id in a hint file; ``None`` when the file is absent. A writer rewrites a hint in place, so a
        read can find it empty or half written: like Paimon's ``readHint`` it is read up to
        ``HINT_READS`` times before giving up. A hint that still does not parse raises: Java would fall back
        to listing, lakesweep refuses to guess."""
        path = join(directory or self.snapshot_dir, name)
        for attempt in range(1, HINT_READS + 1):
            try:
                data = self.fileio.read_bytes(path)
            except FileNotFoundError:
                return None
            text = data.decode("utf-8", errors="replace").strip()
            # Java's Long.parseLong would also read '１' as 1; Paimon only ever writes ASCII, so refuse.
            if _HINT.fullmatch(text) and -LONG_MAX - 1 <= int(text) <= LONG_MAX:
                return int(text)
            if attempt < HINT_READS:
                time.sleep(HINT_READ_PAUSE_S)
        raise CorruptMetadata(path, f"hint file holds {text[:40]!r}, not a snapshot id")

    def _resolve(self, directory: str, prefix: str, listed: list[int] | None = None) -> tuple[int | None, int | None]:
        def exists(i):
            return self.fileio.exists(join(directory, f"{prefix}{i}"))

        ids = listed
        latest_hint = self.read_hint("LATEST", directory)
        if latest_hint is not None and latest_hint > 0 and not exists(latest_hint + 1):
            latest = latest_hint
        else:
            ids = ids if ids is not None else _versioned_ids(self.fileio.list(directory), prefix)
            latest = ids[-1] if ids else None
        earliest_hint = self.read_hint("EARLIEST", directory)
        if earliest_hint is not None and exists(earliest_hint):
            earliest = earliest_hint
        else:
            ids = ids if ids is not None else _versioned_ids(self.fileio.list(directory), prefix)
            earliest = ids[0] if ids else None
        return earliest, latest

    def earliest_latest(self) -> tuple[int | None, int | None]:
        """``(earliestSnapshotId, latestSnapshotId)`` as Java's SnapshotManager resolves them."""
        return self._resolve(self.snapshot_dir, SNAPSHOT_PREFIX)

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot ``snapshot_id``. Its JSON id must be the one its file name says: Paimon deletes by the
        id it looped over, so a file that says otherwise is corrupt, not a different snapshot."""
        return self._read_snapshot_like(self.snapshot_path(snapshot_id), "snapshot", snapshot_id)

    def try_snapshot(self, snapshot_id: int) -> Snapshot | None:
        """The snapshot, or ``None`` only when its file does not exist. Unreadable files raise."""
        try:
            return self.snapshot(snapshot_id)
        except MetadataNotFound:
            return None

    def _read_snapshot_like(self, path: str, what: str, expected_id: int) -> Snapshot:
        with self._lock:
            kept = self._cache.get((what, path))
        if kept is not None:
            return kept
        data = self._read(path, what)
        return self._keep(what, path, self._snapshot_of(path, what, expected_id, data), data)

    def _keep(self, what: str, path: str, snap: Snapshot, data: bytes) -> Snapshot:
        """Keep ``snap``, parsed from ``data``, and the digest of ``data``: the first kept of a file is what
        this view answers with from then on, and what its digest names (``read_digest``)."""
        digest = snapshot_digest(data)
        with self._lock:
            kept = self._cache.setdefault((what, path), snap)
            if kept is snap:
                self._digests[path] = digest
        return kept

    def read_digest(self, path: str) -> str | None:
        """``snapshot_digest`` of the bytes of the snapshot (or changelog) file ``path`` this view read and
        answers with; None when it has not read it."""
        with self._lock:
            return self._digests.get(path)

    def _snapshot_of(self, path: str, what: str, expected_id: int, data: bytes) -> Snapshot:
        try:
            snap = Snapshot.from_json(_parsed_json(path, what, data))
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadata(path, f"malformed {what}: {e}") from e
        _check_id_matches_name(path, what, snap.id, expected_id)
        self._named(_snapshot_names(snap))
        return snap

    def prefetch_snapshots(self, snapshot_ids: Iterable[int]) -> None:
        """Read ahead the snapshot files of ``snapshot_ids`` this view has not read, ``SNAPSHOT_READS`` at a
        time through ``read_each`` (on S3, a million-file table's expiry reads some 16,700 snapshot files:
        one GET each, now many at once); ``snapshot`` and ``try_snapshot`` then answer from memory. A file
        that is absent, cannot be read or does not parse is not kept: reading it again finds it gone or
        raises its error, where and as it did without reading ahead."""
        with self._lock:
            todo = [(sid, path) for sid in snapshot_ids
                    if ("snapshot", path := self.snapshot_path(sid)) not in self._cache]
        for i in range(0, len(todo), SNAPSHOT_READS):
            part = todo[i:i + SNAPSHOT_READS]
            try:
                found = read_each(self.fileio, [path for _, path in part], bytes, threads=self._read_threads)
            except StorageError:
                return  # not a result: ``snapshot`` reads the file again and raises there
            for (sid, path), data in zip(part, found):
                if data is None:
                    continue
                if self.on_read is not None:
                    self.on_read.read(path, "snapshot", len(data))
                try:
                    snap = self._snapshot_of(path, "snapshot", sid, data)
                except CorruptMetadata:
                    continue
                self._keep("snapshot", path, snap, data)

    # -- changelogs (decoupled lifecycle) ------------------------------------------------------

    @property
    def changelog_dir(self) -> str:
        return join(self.base, "changelog")

    def changelog_path(self, changelog_id: int) -> str:
        return join(self.changelog_dir, f"{CHANGELOG_PREFIX}{changelog_id}")

    def list_changelog_ids(self) -> list[int]:
        return _versioned_ids(self.fileio.list(self.changelog_dir), CHANGELOG_PREFIX)

    def changelog_earliest_latest(self) -> tuple[int | None, int | None]:
        return self._resolve(self.changelog_dir, CHANGELOG_PREFIX)

    def changelog(self, changelog_id: int) -> Snapshot:
        return self._read_snapshot_like(self.changelog_path(changelog_id), "changelog", changelog_id)

    # -- manifests -----------------------------------------------------------------------------

    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        path = self.paths.manifest(name)

        def load():
            return self._list_metas(decode_manifest_list((path, self._read_list(path))))

        return self._cached("list", path, load)

    def manifest(self, name: str) -> list[ManifestEntry]:
        path = self.paths.manifest(name)
        return self._cached("manifest", path, lambda: parse_manifest(path, self._read(path, "manifest")))

    def manifest_names(self, name: str) -> list[str]:
        """The file names (and extra files) of a manifest's entries. Read without being kept: a used set
        over every manifest of a large table would otherwise hold every decoded entry."""
        path = self.paths.manifest(name)
        with self._files_lock:
            entries = self._files.get(("manifest", path))
        if entries is not None:
            return _entry_names(entries)
        return parse_manifest_names(path, self._read(path, "manifest"))

    def prefetch(self, manifests: Iterable[ManifestFileMeta]) -> None:
        """Read and decode, on every core for a large input (``engine.decode_pool``), each of ``manifests`` not
        read yet, in the order given; ``manifest`` then answers from memory. Fails as reading them one by one
        with ``manifest`` fails: at the first that cannot be read, those before it kept."""
        self._read_ahead("manifest", [(m.file_name, m.file_size) for m in manifests], self._read_manifest,
                         decode_manifest, manifest_entries)

    def prefetch_lists(self, lists: Iterable[tuple[str, int | None]]) -> None:
        """Read ahead the manifest lists ``lists`` (name, and size where the snapshot records it) not read yet,
        decoded on every core when there are many (a million-file table's expiry reads some 33,000);
        ``manifest_list`` then answers from memory. At the first that cannot be read or decoded it stops,
        leaving that one and those after it to ``manifest_list``, which raises the error (or its caller
        tolerates it) where and as it did without reading ahead."""
        try:
            self._read_ahead("list", [(name, size or LIST_BYTES) for name, size in lists], self._read_list,
                             decode_manifest_list, self._list_metas)
        except (TableFormatError, StorageError):
            pass  # not a result: manifest_list reads it again and raises it there

    def _read_ahead(self, kind: str, files: list[tuple[str, int]], read: Callable[[str], bytes],
                    decode: Callable, build: Callable) -> None:
        """``files`` (name, size) of the manifest directory not yet kept as ``kind``: read here, decoded
        (``decode``, a top-level function) on every core for a large input, and kept as ``build(rows)``, in
        order. ``files`` is a list: a generator that read a manifest list would take the lock held here."""
        todo: dict[str, int] = {}
        with self._files_lock:
            for name, size in files:
                path = self.paths.manifest(name)
                if path not in todo and (kind, path) not in self._files:
                    todo[path] = size
        for path, rows in read_and_decode(list(todo), read, decode, processes=processes_for(sum(todo.values())),
                                          threads=self._read_threads):
            value = build(rows)
            with self._files_lock:
                self._files[(kind, path)] = value

    def _list_metas(self, rows: list[tuple[str, int]]) -> list[ManifestFileMeta]:
        """A manifest list's decoded rows as its metas, the files they name told to the observer."""
        metas = [ManifestFileMeta(name, size) for name, size in rows]
        self._named(m.file_name for m in metas)
        return metas

    def _read_list(self, path: str) -> bytes:
        return self._read(path, "manifest list")

    def prefetch_ahead(self, manifests: Iterable[ManifestFileMeta]) -> None:
        """``prefetch`` for a loop that then reads the same manifests and handles their errors itself: a
        manifest that cannot be read (or listed, when ``manifests`` reads lists) is left to that loop, which
        reads it again and fails, or tolerates it, where and as it did without the prefetch."""
        try:
            self.prefetch(manifests)
        except (TableFormatError, StorageError):
            pass  # not a result: the caller's own read of the same file raises it again

    def manifests_names(self, manifests: Sequence[ManifestFileMeta]) -> Iterator[list[str]]:
        """``manifest_names`` of each of ``manifests``, in order, those not cached decoded on every core for a
        large input and not kept. Fails as ``manifest_names`` one by one fails."""
        with self._files_lock:
            cached = {m.file_name: self._files.get(("manifest", self.paths.manifest(m.file_name)))
                      for m in manifests}
        todo = [m for m in manifests if cached[m.file_name] is None]
        decoded = read_and_decode([self.paths.manifest(m.file_name) for m in todo], self._read_manifest,
                                  decode_manifest_names, processes=processes_for(sum(m.file_size for m in todo)),
                                  threads=self._read_threads)
        for m in manifests:
            entries = cached[m.file_name]
            if entries is None:
                yield next(decoded)[1]
            else:
                yield _entry_names(entries)

    def manifests_once(self, manifests: Sequence[ManifestFileMeta], keep: AbstractSet[str] = frozenset()
                       ) -> Iterator[list[tuple]]:
        """``manifest`` of each of ``manifests``, in order, as ``decode_manifest``'s rows (``row_entry`` makes
        an entry of one, for the loop to build only those it uses), those not cached decoded on every core for
        a large input and not kept but those named in ``keep`` (read again later): for a loop that reads each
        manifest once (an expiry over a million files would otherwise hold every decoded entry until it
        ends). Fails as ``manifest`` one by one fails."""
        with self._files_lock:
            cached = [self._files.get(("manifest", self.paths.manifest(m.file_name))) for m in manifests]
        todo = [m for m, entries in zip(manifests, cached) if entries is None]
        decoded = read_and_decode([self.paths.manifest(m.file_name) for m in todo], self._read_manifest,
                                  decode_manifest, processes=processes_for(sum(m.file_size for m in todo)),
                                  threads=self._read_threads)
        for m, entries in zip(manifests, cached):
            if entries is None:
                path, rows = next(decoded)
                if m.file_name in keep:
                    with self._files_lock:
                        self._files.setdefault(("manifest", path), manifest_entries(rows))
                yield rows
            else:
                yield entry_rows(entries)

    def index_manifest(self, name: str) -> list[IndexManifestEntry]:
        path = self.paths.manifest(name)
        return self._cached(
            "index", path, lambda: parse_index_manifest(path, self._read(path, "index manifest"))
        )

    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """Base then delta manifests of a snapshot; raises if either list is missing or unreadable."""
        return self.manifest_list(snapshot.base_manifest_list) + self.manifest_list(snapshot.delta_manifest_list)

    def entries(self, manifests: Iterable[ManifestFileMeta]) -> list[ManifestEntry]:
        manifests = list(manifests)
        self.prefetch(manifests)
        out: list[ManifestEntry] = []
        for m in manifests:
            out.extend(self.manifest(m.file_name))
        return out

    def live_entries(self, snapshot: Snapshot) -> tuple[ManifestEntry, ...]:
        """The merged ADD entries of base + delta (``FileEntry.mergeEntries``): the files a reader reads.

        Cached by the snapshot's manifest lists (immutable), so the planner's tag skipper, the guard and
        inspect merge each snapshot or tag once."""
        key = f"{snapshot.base_manifest_list}|{snapshot.delta_manifest_list}"
        return self._cached("live", key, lambda: tuple(merge_entries(self.entries(self.data_manifests(snapshot)))))

    # -- tags, consumers, branches -------------------------------------------------------------

    @property
    def tag_dir(self) -> str:
        return join(self.base, "tag")

    def tag_names(self) -> list[str]:
        return sorted(
            f.path.rsplit("/", 1)[-1][len(TAG_PREFIX):]
            for f in self.fileio.list(self.tag_dir)
            if not f.is_dir and f.path.rsplit("/", 1)[-1].startswith(TAG_PREFIX)
        )

    def tag(self, name: str) -> Tag:
        path = join(self.tag_dir, TAG_PREFIX + name)
        obj = self._json(path, "tag")
        # A tag holds the JSON of the snapshot it points at (its id is that snapshot's, not a name's), plus
        # Jackson's LocalDateTime array and Duration (decimal seconds) of the tag's own fields.
        create, retained = obj.get("tagCreateTime"), obj.get("tagTimeRetained")
        try:
            snap = Snapshot.from_json(obj)
            if create is not None:
                create = int_list("tagCreateTime", create)
            if retained is not None and (isinstance(retained, bool) or not isinstance(retained, (int, float, str))):
                raise ValueError(f"field 'tagTimeRetained' must be a number or a string, not {json.dumps(retained)}")
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadata(path, f"malformed tag: {e}") from e
        self._named(_snapshot_names(snap))
        return Tag(
            name=name,
            snapshot=snap,
            create_time=create,
            time_retained=None if retained is None else str(retained),
        )

    def tags(self) -> list[Tag]:
        """Every tag, sorted by snapshot id then name. A tag file listed but gone when read is skipped (as
        in Java); a tag that exists but cannot be read raises."""
        out = []
        for name in self.tag_names():
            try:
                out.append(self.tag(name))
            except MetadataNotFound:
                continue
        return sorted(out, key=lambda t: (t.snapshot.id, t.name))

    @property
    def consumer_dir(self) -> str:
        return join(self.base, "consumer")

    def consumers(self) -> list[Consumer]:
        """Every consumer. An empty or malformed consumer file raises (it blocks expiry, as in Java)."""
        out = []
        for f in self.fileio.list(self.consumer_dir):
            name = f.path.rsplit("/", 1)[-1]
            if f.is_dir or not name.startswith(CONSUMER_PREFIX):
                continue
            try:
                obj = self._json(f.path, "consumer")
            except MetadataNotFound:
                continue
            if "nextSnapshot" not in obj:
                raise CorruptMetadata(f.path, "malformed consumer: field 'nextSnapshot' is missing")
            try:
                nxt = check_json_long("nextSnapshot", obj["nextSnapshot"])
            except ValueError as e:
                raise CorruptMetadata(f.path, f"malformed consumer: {e}") from e
            out.append(Consumer(name[len(CONSUMER_PREFIX):], nxt))
        return sorted(out, key=lambda c: c.consumer_id)

    def branch_names(self) -> list[str]:
        """Branches other than main (directories ``branch/branch-<name>``).

        Paimon lists every such directory as a branch, without checking its name. A directory whose name
        Paimon would refuse to create (``branch-main``, ``branch-123``, ``branch-``) cannot be opened as a
        branch here, and ignoring it would leave its files unprotected: it raises ``CorruptMetadata``.
        """
        if self.branch != MAIN_BRANCH:
            return []
        out = []
        for f in self.fileio.list(join(self.location, "branch")):
            dirname = f.path.rsplit("/", 1)[-1]
            if f.is_dir and dirname.startswith(BRANCH_PREFIX):
                name = dirname[len(BRANCH_PREFIX):]
                problem = branch_name_problem(name)
                if problem is not None:
                    raise CorruptMetadata(
                        f.path, f"branch directory for {name!r}, a name Paimon does not allow ({problem}); "
                        "lakesweep cannot open it as a branch and protect its files: rename or remove it"
                    )
                out.append(name)
        return sorted(out)

    def branch_table(self, name: str) -> "PaimonTable":
        t = self.refreshed(name)
        if not t.schema_ids():
            raise CorruptMetadata(t.base, f"branch '{name}' has no schema")
        # Branch data shares the main table's directories; paths use the main table's factory.
        t._paths = self.paths
        return t


def snapshot_digest(data: bytes) -> str:
    """What a plan pins of a snapshot file's bytes: the first 128 bits of their SHA-256, in hex."""
    return hashlib.sha256(data).hexdigest()[:32]


def _parsed_json(path: str, what: str, data: bytes) -> dict:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptMetadata(path, f"malformed {what} JSON: {e}") from e
    if not isinstance(obj, dict):
        raise CorruptMetadata(path, f"{what} JSON is not an object")
    return obj


def _snapshot_names(snap: Snapshot) -> tuple[str | None, ...]:
    return (snap.base_manifest_list, snap.delta_manifest_list, snap.changelog_manifest_list, snap.index_manifest)


def _check_id_matches_name(path: str, what: str, json_id: int, name_id: int) -> None:
    if json_id != name_id:
        raise CorruptMetadata(
            path, f"the {what} JSON holds id {json_id}, but its file name says {name_id}; "
            f"lakesweep will not guess which {what} this is"
        )


def merge_entries(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """``FileEntry.mergeEntries``, then the ADD survivors: the files a reader of these entries reads.

    As in Java: an ADD of an identifier already in the map is corrupt metadata; a DELETE removes whatever
    the map holds for its identifier, or is remembered (its ADD is in an earlier manifest).
    """
    merged: dict[tuple, ManifestEntry] = {}
    for e in entries:
        ident = e.identifier
        if e.kind == FileKind.ADD:
            if ident in merged:
                raise CorruptMetadata(
                    e.file.file_name, "the same file is added twice without a delete in between"
                )
            merged[ident] = e
        elif ident in merged:
            del merged[ident]
        else:
            merged[ident] = e
    return [e for e in merged.values() if e.kind == FileKind.ADD]


def open_table(location: str, fileio: FileIO | None = None, branch: str = MAIN_BRANCH,
               on_read: ReadObserver | None = None) -> PaimonTable:
    """Open a table for reading and check that lakesweep supports it. ``on_read`` is told every
    metadata file the view (and any view made from it) reads."""
    table = PaimonTable(location, fileio, branch, on_read)
    table.check_supported()
    return table


def discover_tables(warehouse: str, fileio: FileIO | None = None) -> list[tuple[str, str, str]]:
    """The Paimon tables of a filesystem warehouse, as Paimon's filesystem catalog lays them out
    (``<warehouse>/<database>.db/<table>/schema/``): (database, table, location), sorted. A directory
    without a ``schema`` directory is not a table; a warehouse that cannot be listed raises."""
    from lakesweep.engine.errors import StorageError
    from lakesweep.engine.fileio import fileio_for, normalize_location

    root = normalize_location(warehouse)
    io = fileio or fileio_for(root)
    try:
        listed = io.list(root)
    except FileNotFoundError as e:
        raise StorageError(root, "no such warehouse directory") from e
    if not listed:
        check_warehouse(warehouse, io)  # a typo must not pass for a warehouse without tables
    databases = [f for f in listed if f.is_dir and f.path.rstrip("/").endswith(".db")]
    found = []
    for db in databases:
        db_name = db.path.rstrip("/").rsplit("/", 1)[1][:-len(".db")]
        for t in io.list(db.path):
            if t.is_dir and io.exists(t.path.rstrip("/") + "/schema"):
                found.append((db_name, t.path.rstrip("/").rsplit("/", 1)[1], normalize_location(t.path)))
    return sorted(found)


def check_warehouse(warehouse: str, fileio: FileIO | None = None) -> None:
    """Refuse (``StorageError``) a warehouse that does not exist or is not a directory. One that lists
    entries is one (an object store's prefix has no directory of its own to look at)."""
    from lakesweep.engine.errors import StorageError
    from lakesweep.engine.fileio import fileio_for, normalize_location

    root = normalize_location(warehouse)
    io = fileio or fileio_for(root)
    if io.list(root):
        return
    info = io.info(root)
    if info is None:
        raise StorageError(root, "no such warehouse directory")
    if not info.is_dir:
        raise StorageError(root, "is a file, not a warehouse directory")
