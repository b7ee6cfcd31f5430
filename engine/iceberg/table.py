"""An Iceberg table as lakesweep reads it: its catalog entry, its metadata, and what each snapshot reaches.

Catalogs and metadata files are read through pyiceberg (``lakesweep[iceberg]``); manifest lists and manifests
through its FileIO, decoded by lakesweep (on every core: ``prefetch``) into the files each snapshot reaches, by
location, read once per view family (a manifest never changes once written), every read failure raised with
the path that could not be read.
Locations are compared in one canonical form (``canonical``: ``file:///x`` is ``/x``, ``s3a://`` and
``s3n://`` are ``s3://``, Iceberg's ``equal_schemes`` default). A table is named ``namespace.table`` in a
catalog named as pyiceberg names them (``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*``).
"""

from __future__ import annotations

import functools
import threading
from io import BytesIO
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, NamedTuple, Sequence

from lakesweep.engine.decode_pool import map_ordered, processes_for
from lakesweep.engine.errors import CatalogError, CorruptMetadata, LakesweepError, MetadataNotFound, UnsupportedTable
from lakesweep.engine.fileio import FileIO, fileio_for, normalize_location

# Manifest entry statuses (Iceberg spec): 0 EXISTING, 1 ADDED, 2 DELETED.
DELETED = 2
# Data file content (Iceberg spec): 0 data, 1 position deletes, 2 equality deletes.
CONTENT_NAMES = {0: "data", 1: "position-deletes", 2: "equality-deletes"}
# The format versions lakesweep commits to. pyiceberg 0.12 reads v3 tables but writes neither their metadata
# (``TableMetadataV3.model_dump_json`` raises NotImplementedError) nor v3 manifests and manifest lists
# (``write_manifest``/``write_manifest_list`` raise ValueError), and cannot upgrade a table to v3.
WRITABLE_FORMAT_VERSIONS = (1, 2)


def canonical(location: str) -> str:
    """A location as lakesweep compares and stores it (``engine.fileio.normalize_location``); a location
    it cannot read is an ``InvalidLocation`` naming it. The two spellings metadata uses, ``file:///...`` and
    ``s3://bucket/...`` with plain segments, take a shortcut to the same result (a manifest names
    hundreds of thousands of files)."""
    if location.startswith("file:///"):
        rest = location[7:]
        if _plain(rest):
            return rest
    elif location.startswith("s3://"):
        rest = location[5:]
        if rest and not rest.startswith("/") and _plain(rest):
            return location
    return normalize_location(location, relative_ok=False)


def _plain(rest: str) -> bool:
    """No empty, ``.`` or ``..`` segment, no trailing '/', no surrounding blanks: ``normalize_location``
    would return it as it is."""
    return ("//" not in rest and "/./" not in rest and "/../" not in rest and not rest.endswith(("/", "/.", "/.."))
            and rest == rest.strip())


def require_pyiceberg():
    try:
        import pyiceberg  # noqa: F401
    except ImportError as e:  # pragma: no cover - the dev and iceberg extras install it
        raise UnsupportedTable("Iceberg tables need pyiceberg: pip install 'lakesweep[iceberg]'") from e


def load_catalog(name: str):
    """The pyiceberg catalog configured under ``name`` (its environment variables, ``.pyiceberg.yaml``)."""
    require_pyiceberg()
    from pyiceberg.catalog import load_catalog as pyiceberg_load
    from pyiceberg.utils.config import Config

    try:
        # The configuration as it is now (pyiceberg reads it once, when it is first imported).
        return pyiceberg_load(name, **(Config().get_catalog_config(name) or {}))
    except Exception as e:  # noqa: BLE001 - each catalog type has its own errors (SQLAlchemy's, HTTP's, boto's...)
        raise CatalogError(f"Iceberg catalog {name!r} cannot be loaded: {e}. Configure it as pyiceberg does "
                           f"(.pyiceberg.yaml, or PYICEBERG_CATALOG__{name.upper()}__URI and friends)") from e


def split_identifier(identifier: str) -> tuple[str, ...]:
    """``namespace.table`` (a namespace may itself have dots) as pyiceberg's identifier tuple."""
    parts = tuple(identifier.split("."))
    if len(parts) < 2 or not all(parts):
        raise CatalogError(f"Iceberg table {identifier!r} must be named namespace.table")
    return parts


def _s3_properties(io_properties: Mapping[str, str]) -> dict[str, str]:
    """pyiceberg's S3 properties as ``engine.fileio.ArrowFileIO`` names them."""
    names = {"s3.endpoint": "endpoint", "s3.access-key-id": "access_key", "s3.secret-access-key": "secret_key",
             "s3.session-token": "session_token", "s3.region": "region", "client.region": "region"}
    out = {}
    for key, ours in names.items():
        if io_properties.get(key):
            out.setdefault(ours, io_properties[key])
    if str(io_properties.get("s3.path-style-access", "true")).lower() == "false":
        out["path_style"] = "false"
    return out


class FileRef(NamedTuple):
    """A file a manifest entry names: its canonical location, content, size and entry status.

    A named tuple rather than a frozen dataclass: a table of a million files has a million of them, built from
    the decoder's rows in one call (``FileRef._make``) at a fraction of a dataclass's per-field cost."""

    path: str
    content: int  # 0 data, 1 position deletes, 2 equality deletes
    size: int
    status: int
    partition: str

    @property
    def live(self) -> bool:
        return self.status != DELETED


@dataclass(frozen=True, slots=True)
class ManifestRef:
    path: str
    content: int  # 0 data, 1 deletes
    size: int
    spec_id: int
    added_snapshot_id: int | None
    entries: int  # added + existing + deleted files, as the manifest list counts them (None counted as 0)
    holds_live: bool = True  # False when the list counts no added and no existing file (only DELETED entries)


class _Cache:
    """Manifest lists and manifests by location, shared by a view and the views refreshed from it."""

    def __init__(self):
        self.lists: dict[str, tuple[ManifestRef, ...]] = {}
        self.manifests: dict[str, tuple[FileRef, ...]] = {}
        self.files: dict[str, str] = {}  # each manifest's location as its manifest list spells it
        self.lock = threading.Lock()


class IcebergTable:
    """One read of an Iceberg table: the metadata its catalog points at now.

    ``fileio`` is lakesweep's FileIO for the table location (deletes run through it on Spark executors);
    ``io`` is pyiceberg's (metadata reads). ``refreshed()`` reads the catalog again; manifests already read
    are reused. ``on_read`` (an ``engine.paimon.table.ReadObserver``: ``read(path, what, nbytes)`` and
    ``named(names)``) is told of every manifest list and manifest read, and of the manifests a list names.
    """

    format = "iceberg"

    def __init__(self, catalog_name: str, identifier: str, *, catalog=None, on_read=None,
                 _cache: _Cache | None = None):
        self.catalog_name = catalog_name
        self.identifier = identifier
        self.catalog = catalog if catalog is not None else load_catalog(catalog_name)
        self.on_read = on_read
        self._cache = _cache or _Cache()
        try:
            self.table = self.catalog.load_table(split_identifier(identifier))
        except LakesweepError:
            raise
        except Exception as e:  # pyiceberg raises NoSuchTableError, NoSuchNamespaceError, OSError...
            raise CatalogError(f"Iceberg table {identifier} cannot be loaded from catalog {catalog_name!r}: "
                               f"{type(e).__name__}: {e}") from e
        self.metadata = self.table.metadata
        self.metadata_location = canonical(self.table.metadata_location)
        self.location = canonical(self.metadata.location)
        self.io = self.table.io
        self.fileio: FileIO = fileio_for(self.location, _s3_properties(self.io.properties))
        self.uuid = str(self.metadata.table_uuid)

    # ---- metadata -------------------------------------------------------------------------------------

    @property
    def options(self) -> Mapping[str, str]:
        """The table properties (``gc.enabled``, ``history.expire.*``, ``write.*``)."""
        return self.metadata.properties

    @functools.cached_property
    def snapshots(self) -> dict[int, object]:
        """Snapshot id -> snapshot, built once per view (a view's metadata never changes; ``refreshed``
        reads anew): planning and the gates look snapshots up once per snapshot."""
        return {s.snapshot_id: s for s in self.metadata.snapshots}

    @property
    def current_snapshot_id(self) -> int | None:
        return self.metadata.current_snapshot_id

    def refs(self) -> dict[str, int]:
        """Every branch and tag, by name, with its snapshot id."""
        return {name: ref.snapshot_id for name, ref in sorted(self.metadata.refs.items())}

    def refreshed(self) -> "IcebergTable":
        return IcebergTable(self.catalog_name, self.identifier, catalog=self.catalog, on_read=self.on_read,
                            _cache=self._cache)

    @property
    def format_version(self) -> int:
        return int(self.metadata.format_version)

    def cannot_commit(self) -> str | None:
        """Why lakesweep cannot commit to this table (its format version), or None when it can."""
        if self.format_version in WRITABLE_FORMAT_VERSIONS:
            return None
        return (f"Iceberg table {self.identifier} is format version {self.format_version}: lakesweep cannot commit "
                f"to it yet (pyiceberg 0.12 writes the metadata and manifests of format versions 1 and 2 only); "
                f"orphans, which commits nothing, works")

    def gc_enabled(self) -> bool:
        return str(self.options.get("gc.enabled", "true")).strip().lower() != "false"

    def external_roots(self) -> list[str]:
        """Locations outside the table location that its properties write to (``write.data.path``,
        ``write.metadata.path``, ``write.object-storage.path``)."""
        roots = []
        for key in ("write.data.path", "write.metadata.path", "write.object-storage.path",
                    "write.folder-storage.path"):
            value = self.options.get(key)
            if value:
                root = canonical(value)
                if root != self.location and not root.startswith(self.location + "/"):
                    roots.append(root)
        return sorted(set(roots))

    def partition_specs(self) -> list:
        """Every partition spec the table has had (pyiceberg ``PartitionSpec`` values), by spec id."""
        return [spec for _, spec in sorted(self.metadata.specs().items())]

    def metadata_files(self) -> list[str]:
        """The current metadata file and those its metadata log keeps."""
        found = [self.metadata_location]
        found += [canonical(e.metadata_file) for e in self.metadata.metadata_log]
        return found

    def statistics_files(self, snapshot_id: int | None = None) -> list[tuple[int, str, int]]:
        """(snapshot id, location, size) of each statistics and partition-statistics file, of one snapshot
        or all."""
        out = []
        for s in list(self.metadata.statistics) + list(self.metadata.partition_statistics):
            if snapshot_id is None or s.snapshot_id == snapshot_id:
                size = getattr(s, "file_size_in_bytes", None)
                out.append((s.snapshot_id, canonical(s.statistics_path), size))
        return out

    # ---- manifests ------------------------------------------------------------------------------------

    def manifest_list(self, snapshot) -> tuple[ManifestRef, ...]:
        """The manifests a snapshot's manifest list names (read once per view family)."""
        path = canonical(snapshot.manifest_list)
        cached = self._cache.lists.get(path)
        if cached is not None:
            return cached
        rows = decode_manifest_list((path, self._read(snapshot.manifest_list, path, "manifest list")))
        refs = tuple(ManifestRef(canonical(raw), *rest) for raw, *rest in rows)
        self._tell(path, "manifest list", 0)
        if self.on_read is not None:
            self.on_read.named([m.path.rsplit("/", 1)[-1] for m in refs])
        with self._cache.lock:
            self._cache.lists[path] = refs
            for ref, row in zip(refs, rows):
                self._cache.files[ref.path] = row[0]
        return refs

    def manifest_entries(self, manifest: ManifestRef) -> tuple[FileRef, ...]:
        """Every entry of a manifest (all statuses), read once per view family."""
        cached = self._cache.manifests.get(manifest.path)
        if cached is not None:
            return cached
        rows = decode_manifest((manifest.path, self._read(self.manifest_location(manifest), manifest.path, "manifest")))
        return self._store(manifest, rows)

    def prefetch(self, manifests: Iterable[ManifestRef]) -> None:
        """Read and decode, on every core (``engine.decode_pool``), each of ``manifests`` not read yet, in the
        order given; ``manifest_entries`` then answers from memory. Fails as ``manifest_entries`` fails, at
        the first manifest that cannot be read."""
        todo: dict[str, ManifestRef] = {}
        for m in manifests:
            if m.path not in todo and m.path not in self._cache.manifests:
                todo[m.path] = m
        if not todo:
            return
        wanted = [(m, self.manifest_location(m)) for m in todo.values()]
        items = ((m.path, self._read(location, m.path, "manifest")) for m, location in wanted)
        processes = processes_for(sum(m.size for m in todo.values()))
        for (m, _), rows in zip(wanted, map_ordered(decode_manifest, items, processes=processes)):
            self._store(m, rows)

    def read_each(self, manifests: Sequence[ManifestRef]) -> Iterator[tuple[ManifestRef, tuple[FileRef, ...]]]:
        """Each of ``manifests`` with its entries, in order, decoded on every core as ``prefetch`` decodes
        them but not kept: for a single pass over more entries than memory should hold (one read already
        answers from memory). Fails as ``manifest_entries`` fails, when the pass reaches the manifest."""
        fresh = [m.path not in self._cache.manifests for m in manifests]
        todo = [m for m, new in zip(manifests, fresh) if new]
        items = ((m.path, self._read(self.manifest_location(m), m.path, "manifest")) for m in todo)
        decoded = map_ordered(decode_manifest, items, processes=processes_for(sum(m.size for m in todo)))
        for m, new in zip(manifests, fresh):
            if not new:
                yield m, self._cache.manifests[m.path]
                continue
            refs = tuple(map(FileRef._make, next(decoded)))
            self._tell(m.path, "manifest", m.size)
            yield m, refs

    def prefetch_snapshots(self, snapshot_ids: Iterable[int]) -> None:
        """``prefetch`` of every manifest the snapshots list, their manifest lists read first."""
        self.prefetch(m for sid in snapshot_ids for m in self.manifest_list(self.snapshots[sid]))

    def manifest_location(self, manifest: ManifestRef) -> str:
        """Where ``manifest`` is read from: its location as the manifest list names it."""
        location = self._cache.files.get(manifest.path)
        if location is None:
            raise CorruptMetadata(manifest.path, "manifest read before the manifest list that names it")
        return location

    def _read(self, location: str, shown: str, what: str) -> bytes:
        return read_metadata_bytes(self.io, location, shown, what)

    def _store(self, manifest: ManifestRef, rows) -> tuple[FileRef, ...]:
        refs = tuple(map(FileRef._make, rows))
        self._tell(manifest.path, "manifest", manifest.size)
        with self._cache.lock:
            self._cache.manifests[manifest.path] = refs
        return refs

    def _tell(self, path: str, what: str, nbytes: int) -> None:
        if self.on_read is not None:
            self.on_read.read(path, what, nbytes)

    def snapshot_files(self, snapshot_id: int, *, live_only: bool) -> Iterator[tuple[str, str, int | None]]:
        """(kind, location, size) of every file a snapshot reaches: its manifest list, its manifests, their
        data and delete files (only live entries when ``live_only``) and its statistics files."""
        snapshot = self.snapshots[snapshot_id]
        yield "manifest-list", canonical(snapshot.manifest_list), None
        for m in self.manifest_list(snapshot):
            yield "manifest", m.path, m.size
            for f in self.manifest_entries(m):
                if f.live or not live_only:
                    yield _FILE_KIND[f.content], f.path, f.size
        for _, path, size in self.statistics_files(snapshot_id):
            yield "statistics", path, size


_FILE_KIND = {0: "data-file", 1: "position-delete-file", 2: "equality-delete-file"}


def read_metadata_bytes(io, location: str, shown: str, what: str) -> bytes:
    """The bytes of the manifest or manifest list at ``location`` (pyiceberg's ``io``); ``shown`` names it in
    the ``MetadataNotFound`` or ``CorruptMetadata`` raised when it cannot be read."""
    try:
        with io.new_input(location).open() as stream:
            return stream.read()  # one read: fastavro's many small reads through a pyarrow stream cost more
    except FileNotFoundError as e:
        raise MetadataNotFound(shown, what) from e
    except Exception as e:
        raise CorruptMetadata(shown, f"{what} cannot be read: {type(e).__name__}: {e}") from e


def read_manifest(io, location: str, shown: str) -> tuple[FileRef, ...]:
    """Every entry of the manifest at ``location``, all statuses (a Spark task's read, outside any view)."""
    return tuple(map(FileRef._make, decode_manifest((shown, read_metadata_bytes(io, location, shown, "manifest")))))


def decode_manifest(item: tuple[str, bytes]) -> list[tuple[str, int, int, int, str]]:
    """The entries, all statuses, of the manifest ``item`` = (location shown in errors, its bytes): rows of
    ``FileRef``'s fields. A top-level function, so that ``engine.decode_pool`` runs it in worker processes.

    Decoded with fastavro rather than pyiceberg's reader: what reachability needs is five fields of each
    entry, and pyiceberg builds a full ``DataFile`` (every statistic) per entry, four times the time on a
    table of 200,000 files. fastavro given a reader schema of those five fields is slower still than its
    whole-record decode (it resolves the schemas again for each record), so each record is decoded whole and
    reduced to its row at once. The fields are the spec's, in manifests of format 1 (no ``content``: data)
    and 2 alike; anything else is a ``CorruptMetadata`` naming the file."""
    import fastavro

    shown, data = item
    rows = []
    partitions: dict[str, str] = {}  # one string per partition: rows pickle and are held more compactly
    try:
        for r in fastavro.reader(BytesIO(data)):
            try:
                f = r["data_file"]
                partition = "/".join(["null" if v is None else str(v) for v in (f.get("partition") or {}).values()])
                rows.append((canonical(f["file_path"]), int(f.get("content") or 0), int(f["file_size_in_bytes"]),
                             int(r["status"]), partitions.setdefault(partition, partition)))
            except (KeyError, TypeError, ValueError) as e:
                raise CorruptMetadata(shown, f"a manifest entry lacks a field the Iceberg spec requires: {e}") from e
    except LakesweepError:
        raise
    except Exception as e:
        raise CorruptMetadata(shown, f"manifest cannot be read: {type(e).__name__}: {e}") from e
    return rows


# Manifest list fields by field id (Iceberg spec), with the names format 2 gives them: format 1 names the
# counts ``added_data_files_count`` and so on, and has no ``content``.
_LIST_FIELDS = {500: "manifest_path", 501: "manifest_length", 502: "partition_spec_id", 517: "content",
                503: "added_snapshot_id", 504: "added_files_count", 505: "existing_files_count",
                506: "deleted_files_count"}


def decode_manifest_list(item: tuple[str, bytes]) -> list[tuple]:
    """The manifests the manifest list ``item`` = (location shown in errors, its bytes) names, as rows
    (location as spelled, then ``ManifestRef``'s fields after its path). Fields are found by their field id,
    as pyiceberg finds them; a list that lacks one the spec requires is a ``CorruptMetadata``. ``holds_live``
    is Iceberg's ``hasAddedFiles() || hasExistingFiles()``: a count the list leaves out may be anything."""
    import fastavro

    shown, data = item
    try:
        reader = fastavro.reader(BytesIO(data))
        ids = {f.get("field-id"): f["name"] for f in reader.writer_schema["fields"]}
        name = {fid: ids.get(fid, spec) for fid, spec in _LIST_FIELDS.items()}
        records = list(reader)
    except Exception as e:
        raise CorruptMetadata(shown, f"manifest list cannot be read: {type(e).__name__}: {e}") from e
    try:
        return [(r[name[500]], int(r.get(name[517]) or 0), int(r[name[501]]), int(r[name[502]]),
                 r.get(name[503]), sum(r.get(name[fid]) or 0 for fid in (504, 505, 506)),
                 any(r.get(name[fid]) != 0 for fid in (504, 505)))
                for r in records]
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptMetadata(shown, f"a manifest list entry lacks a field the Iceberg spec requires: {e}") from e


def metadata_table_uuid(fileio: FileIO, location: str) -> str | None:
    """The ``table-uuid`` of the Iceberg table metadata file at ``location`` (``*.gz.metadata.json``
    gunzipped first), or ``None`` when the file is gone or does not parse as table metadata (pyiceberg's
    ``TableMetadataUtil``). Any other failure to read it raises: orphan planning keeps no file for being
    "this table's" without having read it, and deletes none it could not read."""
    import gzip
    import zlib

    from pyiceberg.exceptions import ValidationError
    from pyiceberg.table.metadata import TableMetadataUtil

    try:
        data = fileio.read_bytes(location)
    except FileNotFoundError:
        return None
    try:
        if location.endswith(".gz.metadata.json"):
            data = gzip.decompress(data)
        return str(TableMetadataUtil.parse_raw(data).table_uuid)
    except (ValidationError, ValueError, EOFError, zlib.error, gzip.BadGzipFile):
        return None


def list_tables(catalog_name: str, catalog=None) -> list[str]:
    """Every table of a catalog as ``namespace.table`` (nested namespaces joined with dots), sorted."""
    catalog = catalog if catalog is not None else load_catalog(catalog_name)
    found: list[str] = []
    seen: set[tuple] = set()

    def walk(parent: tuple) -> None:
        try:
            children = catalog.list_namespaces(parent) if parent else catalog.list_namespaces()
        except Exception as e:  # pyiceberg raises its own errors per catalog type
            raise CatalogError(f"the namespaces of {'.'.join(parent) or 'catalog ' + catalog_name} cannot be "
                               f"listed: {type(e).__name__}: {e}") from e
        for ns in children:
            ns = tuple(ns)
            if ns in seen or ns == parent:
                continue
            seen.add(ns)
            try:
                tables = catalog.list_tables(ns)
            except Exception as e:
                raise CatalogError(f"the tables of namespace {'.'.join(ns)} cannot be listed: "
                                   f"{type(e).__name__}: {e}") from e
            found.extend(".".join(t) for t in tables)
            walk(ns)

    walk(())
    return sorted(set(found))

