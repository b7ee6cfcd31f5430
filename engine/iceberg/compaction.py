"""Iceberg data-file compaction, its core: which small data files merge into which output (the bins), and
which delete files each bin must apply (``plan_bins``); merging one bin is ``compaction_merge.merge_bin``.

Candidates, thresholds, bins and skip messages follow SeaweedFS's maintenance worker (``compact.go``:
``buildCompactionBins``, ``splitOversizedBin``); which deletes apply follows the Iceberg spec's scan planning,
not SeaweedFS; a delete manifest is dropped only when each of its delete files applies only to compacted
files. ``check_bins`` checks the plan's bins against the live table at apply. Anything that cannot be read
raises with its path. The rules and where they come from: docs/design/iceberg-compaction.md.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from dataclasses import dataclass
from typing import Mapping, Sequence

from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, PlanRejected, StorageError, UnsupportedTable
from lakesweep.engine.fileio import join
from lakesweep.engine.iceberg.table import canonical

DEFAULT_TARGET_FILE_SIZE_MB = 256
DEFAULT_MIN_INPUT_FILES = 5
BYTES_PER_MB = 1024 * 1024
TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"

NO_CURRENT_SNAPSHOT = "no current snapshot"
NO_ELIGIBLE_FILES = "no files eligible for compaction"
DELETES_NOT_APPLIED = "compaction skipped: delete manifests present and apply_deletes is disabled"

_DATA, _POSITION_DELETES, _EQUALITY_DELETES = 0, 1, 2
_DELETED = 2  # manifest entry status


# ---- values -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InputFile:
    """A data file a bin merges: its location as the manifest spells it, its canonical path, size, record
    count, and the entry's snapshot id and data / file sequence numbers."""

    location: str
    path: str
    size: int
    record_count: int
    sequence_number: int
    file_sequence_number: int | None
    snapshot_id: int | None


@dataclass(frozen=True, slots=True)
class DeleteRef:
    """A live delete file: position (content 1) or equality (content 2), with its data sequence number, its
    equality field ids, and the delete manifest that lists it."""

    location: str
    path: str
    content: int
    sequence_number: int
    equality_ids: tuple[int, ...]
    size: int
    record_count: int
    manifest: str


@dataclass(frozen=True, slots=True)
class CompactionBin:
    """Files of one spec and partition that merge into one output. ``partition`` is the partition's path
    text (``region=us/dt=2024-01-01``, empty when unpartitioned), ``partition_values`` the partition
    record's values as the manifests hold them, ``identity_values`` the value of each identity-partitioned
    source field (by field id) for files that lack that column. The deletes are those that apply to at
    least one input; ``merge_bin`` applies each only to the inputs the sequence-number rules allow."""

    index: int
    spec_id: int
    partition: str
    partition_values: tuple
    identity_values: tuple[tuple[int, object], ...]
    inputs: tuple[InputFile, ...]
    position_deletes: tuple[DeleteRef, ...]
    equality_deletes: tuple[DeleteRef, ...]

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.inputs)

    @property
    def record_count(self) -> int:
        return sum(f.record_count for f in self.inputs)


@dataclass(frozen=True, slots=True)
class DeleteManifestFate:
    """A delete manifest of the current snapshot and whether the compaction's snapshot drops it."""

    path: str
    live_files: int
    dropped: bool


@dataclass(frozen=True, slots=True)
class CompactionScope:
    """What ``plan_bins`` found: the bins (empty when ``skipped`` says why), and each delete manifest's fate."""

    snapshot_id: int | None
    sequence_number: int | None
    schema_id: int | None
    target_bytes: int
    min_input_files: int
    apply_deletes: bool
    bins: tuple[CompactionBin, ...]
    delete_manifests: tuple[DeleteManifestFate, ...]
    skipped: str | None
    data_files: int = 0
    small_files: int = 0

    @property
    def dropped_delete_manifests(self) -> tuple[str, ...]:
        return tuple(m.path for m in self.delete_manifests if m.dropped)

    @property
    def carried_delete_manifests(self) -> tuple[str, ...]:
        return tuple(m.path for m in self.delete_manifests if not m.dropped)


# ---- options ------------------------------------------------------------------------------------------


def target_file_size(properties: Mapping[str, str], target_file_size_mb: int | None = None) -> tuple[int, str]:
    """The target size in bytes and where it came from (``table-property``, ``flag``, ``default``).

    As SeaweedFS's ``resolveTableConfig`` (default ``table_properties_override=true``): the table's
    ``write.target-file-size-bytes`` wins when it is a positive integer (anything else is ignored, as
    its ``propInt64`` ignores it), then ``target_file_size_mb`` * 1 MiB, then 256 MiB.
    """
    raw = properties.get(TARGET_FILE_SIZE_PROPERTY)
    if raw is not None:
        try:
            value = int(str(raw).strip())
        except ValueError:
            value = 0
        if value > 0:
            return value, "table-property"
    if target_file_size_mb is not None:
        if target_file_size_mb < 1:
            raise PlanRejected(f"--target-file-size-mb must be at least 1, got {target_file_size_mb}")
        return target_file_size_mb * BYTES_PER_MB, "flag"
    return DEFAULT_TARGET_FILE_SIZE_MB * BYTES_PER_MB, "default"


def resolve_location(location: str, table_location: str) -> str:
    """A file reference in canonical form; a relative one is taken relative to the table location."""
    if location.startswith(("/", "file:")) or "://" in location:
        return canonical(location)
    return canonical(join(canonical(table_location), location))


# ---- bin packing (pure) -------------------------------------------------------------------------------


def pack(sizes: Sequence[int], *, target_bytes: int, min_input_files: int) -> list[list[int]]:
    """The bins of one group of small files, as lists of indexes into ``sizes`` (the group's files in
    manifest order): SeaweedFS's ``buildCompactionBins`` / ``splitOversizedBin`` (module docstring)."""
    if len(sizes) < min_input_files:
        return []
    if sum(sizes) <= target_bytes:
        return [list(range(len(sizes)))]
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])  # stable: ties keep manifest order
    packed: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i in order:
        if total > 0 and total + sizes[i] > target_bytes:
            packed.append(current)
            current, total = [], 0
        current.append(i)
        total += sizes[i]
    if current:
        packed.append(current)
    kept = [b for b in packed if len(b) >= min_input_files]
    totals = [sum(sizes[i] for i in b) for b in kept]
    for runt in (b for b in packed if len(b) < min_input_files):
        for i in runt:
            best = None
            for k, t in enumerate(totals):
                room = target_bytes - t - sizes[i]
                if room >= 0 and (best is None or room < best[1]):
                    best = (k, room)
            if best is not None:
                kept[best[0]].append(i)
                totals[best[0]] += sizes[i]
    return kept


# ---- planning -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    file: InputFile
    content: int
    spec_id: int
    key: tuple
    partition_values: tuple
    file_format: str
    equality_ids: tuple[int, ...]
    manifest: str


def plan_bins(table_view, *, target_bytes: int, min_input_files: int, apply_deletes: bool) -> CompactionScope:
    """The compaction bins of the current snapshot of ``table_view`` (an ``engine.iceberg.table.IcebergTable``).

    Reads metadata and the ``file_path`` column of position delete files; writes nothing. The same table
    state gives the same scope.
    """
    if min_input_files < 2:
        raise PlanRejected(f"--min-input-files must be at least 2, got {min_input_files}")
    if target_bytes < 1:
        raise PlanRejected(f"the target file size must be at least 1 byte, got {target_bytes}")
    metadata = table_view.metadata
    current = table_view.current_snapshot_id
    base = dict(target_bytes=target_bytes, min_input_files=min_input_files, apply_deletes=apply_deletes)
    snapshot = table_view.snapshots.get(current) if current is not None else None
    if snapshot is None or not snapshot.manifest_list:
        return CompactionScope(None, None, None, bins=(), delete_manifests=(), skipped=NO_CURRENT_SNAPSHOT, **base)
    head = (current, snapshot.sequence_number, metadata.current_schema_id)
    manifests = _manifest_files(table_view, snapshot)
    delete_manifests = [m for m in manifests if int(m.content) != 0]
    if delete_manifests and not apply_deletes:
        return CompactionScope(*head, bins=(), delete_manifests=(), skipped=DELETES_NOT_APPLIED, **base)
    specs = metadata.specs()
    schema = metadata.schema()
    data = [e for m in manifests if int(m.content) == 0 for e in _entries(table_view, m, specs, schema)]
    small = [e for e in data if e.file_format.lower() == "parquet" and e.file.size < target_bytes]
    groups: dict[tuple, list[_Entry]] = {}
    for e in small:
        groups.setdefault((e.spec_id, e.key), []).append(e)
    packed: list[tuple[tuple, list[_Entry]]] = []
    for group_key in sorted(groups, key=lambda k: (k[0], _partition_path(specs, schema, groups[k][0]), repr(k))):
        members = groups[group_key]
        for idx in pack([e.file.size for e in members], target_bytes=target_bytes, min_input_files=min_input_files):
            packed.append((group_key, [members[i] for i in idx]))
    counts = dict(data_files=len(data), small_files=len(small))
    if not packed:
        return CompactionScope(*head, bins=(), delete_manifests=(), skipped=NO_ELIGIBLE_FILES, **base, **counts)

    deletes = [e for m in delete_manifests for e in _entries(table_view, m, specs, schema)]
    for e in deletes:
        if e.file_format.lower() != "parquet":
            raise UnsupportedTable(f"delete file {e.file.location} is {e.file_format}; lakesweep's compaction "
                                   f"applies Parquet position and equality deletes only")
    binned = {group_key for group_key, _ in packed}
    by_partition: dict[tuple, list[_Entry]] = {}
    for f in data:
        by_partition.setdefault((f.spec_id, f.key), []).append(f)
    references: dict[str, frozenset[str]] = {}

    def targets(d: _Entry) -> list[_Entry]:
        """The live data files ``d`` applies to (Iceberg spec, "Scan Planning")."""
        named = None
        if d.content == _POSITION_DELETES:
            if (d.spec_id, d.key) not in binned:
                return []  # read only where a bin may need it; its manifest is carried over either way
            if d.file.path not in references:
                references[d.file.path] = _referenced_paths(table_view, d.file)
            named = references[d.file.path]
        scope = data if _global(d, specs) else by_partition.get((d.spec_id, d.key), ())
        return [f for f in scope if _applies(d, f, specs, named)]

    applies_to = {d.file.path: {f.file.path for f in targets(d)} for d in deletes}
    compacted = {f.file.path for _, members in packed for f in members}
    bins = []
    for index, ((spec_id, _), members) in enumerate(packed):
        first = members[0]
        paths = {f.file.path for f in members}
        found = [d for d in deletes if applies_to[d.file.path] & paths]
        bins.append(CompactionBin(
            index=index, spec_id=spec_id, partition=_partition_path(specs, schema, first),
            partition_values=first.partition_values, identity_values=_identity_values(specs[spec_id], first),
            inputs=tuple(f.file for f in members),
            position_deletes=tuple(_delete_ref(d) for d in found if d.content == _POSITION_DELETES),
            equality_deletes=tuple(_delete_ref(d) for d in found if d.content == _EQUALITY_DELETES)))

    def consumed(d: _Entry) -> bool:
        return bool(applies_to[d.file.path]) and applies_to[d.file.path] <= compacted

    fates = []
    for m in delete_manifests:
        path = canonical(m.manifest_path)
        live = [d for d in deletes if d.manifest == path]
        fates.append(DeleteManifestFate(path, len(live), bool(live) and all(consumed(d) for d in live)))
    return CompactionScope(*head, bins=tuple(bins), delete_manifests=tuple(fates), skipped=None, **base, **counts)


def _global(d: _Entry, specs) -> bool:
    """An equality delete of an unpartitioned spec applies to every partition."""
    return d.content == _EQUALITY_DELETES and specs[d.spec_id].is_unpartitioned()


def _applies(d: _Entry, f: _Entry, specs, named: frozenset[str] | None) -> bool:
    """Whether delete ``d`` applies to data file ``f`` (Iceberg spec, "Scan Planning"); ``named``: the data
    files a position delete names."""
    if d.content == _POSITION_DELETES:
        return ((d.spec_id, d.key) == (f.spec_id, f.key) and f.file.path in (named or ())
                and f.file.sequence_number <= d.file.sequence_number)
    return (_global(d, specs) or (d.spec_id, d.key) == (f.spec_id, f.key)) \
        and f.file.sequence_number < d.file.sequence_number


def check_bins(table_view, bins: Sequence[CompactionBin], *, sequence_number: int | None) -> None:
    """Refuse (``PlanRejected``) bins whose stored facts are not what the live table says of their inputs,
    whatever the plan file says: each input still live must be the entry the plan names (location, data and
    file sequence numbers, record count), of the bin's spec, partition values, partition path and identity
    values; and the bin's deletes must be exactly the live deletes, up to the plan snapshot's
    ``sequence_number``, that apply to one of its live inputs, each with its live content, sequence number
    and equality ids. A delete committed since is no reason to refuse: the commit leaves such a bin out.

    An edited plan could otherwise file rows under another partition, or delete rows through a forged
    "delete" (a bin's own input given as an equality delete)."""
    current = table_view.current_snapshot_id
    snapshot = table_view.snapshots.get(current) if current is not None else None
    if snapshot is None or not bins:
        return
    metadata = table_view.metadata
    specs, schema = metadata.specs(), metadata.schema()
    manifests = _manifest_files(table_view, snapshot)
    data: dict[str, _Entry] = {}
    deletes: list[_Entry] = []
    for m in manifests:
        for e in _entries(table_view, m, specs, schema):
            if int(m.content) == 0:
                data[e.file.path] = e
            elif sequence_number is None or e.file.sequence_number <= sequence_number:
                deletes.append(e)
    live_deletes = {d.file.path: d for d in deletes}
    references: dict[str, frozenset[str]] = {}
    for b in bins:
        key = _partition_key(tuple(b.partition_values))
        live = []
        for f in b.inputs:
            e = data.get(f.path)
            if e is None:
                continue  # no longer live: the commit leaves the bin out
            if (e.file != f or e.spec_id != b.spec_id or e.key != key or _partition_path(specs, schema, e) != b.partition
                    or _identity_values(specs[e.spec_id], e) != tuple(tuple(x) for x in b.identity_values)):
                raise PlanRejected(f"bin {b.index}: input {f.path} is not what the live table says of it (its entry, "
                                   f"spec {e.spec_id}, partition {_partition_path(specs, schema, e)!r}); the plan "
                                   f"is refused")
            live.append(e)
        applying = set()
        for d in deletes:
            named = None
            if d.content == _POSITION_DELETES and any((d.spec_id, d.key) == (e.spec_id, e.key) for e in live):
                if d.file.path not in references:
                    references[d.file.path] = _referenced_paths(table_view, d.file)
                named = references[d.file.path]
            if any(_applies(d, e, specs, named) for e in live):
                applying.add(d.file.path)
        stored = {d.path: d for d in (*b.position_deletes, *b.equality_deletes)}
        forged = sorted(p for p, d in stored.items() if p not in live_deletes
                        or _delete_ref(live_deletes[p]) != dataclasses.replace(d, manifest=live_deletes[p].manifest))
        if forged or (live and set(stored) != applying):
            what = forged[0] if forged else sorted(set(stored) ^ applying)[0]
            raise PlanRejected(f"bin {b.index}: its deletes are not those the live table applies to its inputs "
                               f"({what}); the plan is refused")


def _manifest_files(view, snapshot) -> list:
    path = canonical(snapshot.manifest_list)
    try:
        return list(snapshot.manifests(view.io))
    except FileNotFoundError as e:
        raise MetadataNotFound(path, "manifest list") from e
    except Exception as e:
        raise CorruptMetadata(path, f"manifest list cannot be read: {type(e).__name__}: {e}") from e


def _entries(view, manifest, specs, schema) -> list[_Entry]:
    """The live entries of a manifest, with what compaction needs of each."""
    path = canonical(manifest.manifest_path)
    try:
        entries = manifest.fetch_manifest_entry(view.io, discard_deleted=True)
    except FileNotFoundError as e:
        raise MetadataNotFound(path, "manifest") from e
    except Exception as e:
        raise CorruptMetadata(path, f"manifest cannot be read: {type(e).__name__}: {e}") from e
    spec_id = int(manifest.partition_spec_id)
    if spec_id not in specs:
        raise CorruptMetadata(path, f"manifest of partition spec {spec_id}, which the table metadata lacks")
    out = []
    for entry in entries:
        if int(entry.status) == _DELETED:
            continue
        f = entry.data_file
        values = tuple(f.partition[i] for i in range(len(specs[spec_id].fields)))
        seq = entry.sequence_number if entry.sequence_number is not None else 0  # v1: sequence number 0
        ref = InputFile(location=f.file_path, path=resolve_location(f.file_path, view.location),
                        size=int(f.file_size_in_bytes), record_count=int(f.record_count), sequence_number=int(seq),
                        file_sequence_number=entry.file_sequence_number, snapshot_id=entry.snapshot_id)
        fmt = f.file_format.value if hasattr(f.file_format, "value") else str(f.file_format)
        out.append(_Entry(ref, int(f.content), spec_id, _partition_key(values), values, str(fmt),
                          tuple(f.equality_ids or ()), path))
    return out


def _partition_key(values: tuple) -> tuple:
    """Partition values as a grouping key: ``None`` apart from every value, floats by their bits with NaN
    normalized (the spec's partition equality, note 3 of "Scan Planning")."""
    out = []
    for v in values:
        if v is None:
            out.append(("null",))
        elif isinstance(v, float):
            out.append(("float", struct.pack(">d", math.nan if math.isnan(v) else v)))
        else:
            out.append((type(v).__name__, v))
    return tuple(out)


def _partition_path(specs, schema, entry: _Entry) -> str:
    spec = specs[entry.spec_id]
    if spec.is_unpartitioned():
        return ""
    from pyiceberg.typedef import Record

    try:
        return spec.partition_to_path(Record(*entry.partition_values), schema)
    except ValueError as e:
        raise UnsupportedTable(f"partition spec {entry.spec_id} names a field the current schema lacks "
                               f"({e}); lakesweep does not compact such partitions") from e


def _identity_values(spec, entry: _Entry) -> tuple[tuple[int, object], ...]:
    from pyiceberg.transforms import IdentityTransform

    return tuple((pf.source_id, entry.partition_values[i]) for i, pf in enumerate(spec.fields)
                 if isinstance(pf.transform, IdentityTransform) and entry.partition_values[i] is not None)


def _delete_ref(d: _Entry) -> DeleteRef:
    f = d.file
    return DeleteRef(f.location, f.path, d.content, f.sequence_number, d.equality_ids, f.size, f.record_count,
                     d.manifest)


def _referenced_paths(view, delete_file: InputFile) -> frozenset[str]:
    """The data files a position delete file names (its ``file_path`` column), in canonical form."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        with view.fileio.open_input(delete_file.path) as stream:
            column = pq.read_table(stream, columns=["file_path"]).column("file_path")
    except FileNotFoundError as e:
        raise MetadataNotFound(delete_file.path, "position delete file") from e
    except StorageError:
        raise
    except Exception as e:
        raise CorruptMetadata(delete_file.path, f"position delete file cannot be read: {type(e).__name__}: {e}") from e
    return frozenset(resolve_location(p, view.location) for p in pc.unique(column).to_pylist())
