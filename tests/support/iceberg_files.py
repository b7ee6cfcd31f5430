"""Iceberg files pyiceberg 0.12 cannot write itself, written to the spec and committed through pyiceberg.

pyiceberg 0.12 writes data files only: its ``delete()`` is copy-on-write (with
``write.delete.mode=merge-on-read`` it warns and falls back), it has no row-delta
producer, no puffin writer and no public partition-statistics setter. Tests of
lakesweep's Iceberg maintenance still need tables whose metadata references
position deletes, equality deletes, statistics and partition statistics, so
this module writes those files with pyarrow and the standard library, from the
Iceberg spec, and commits them through pyiceberg's own machinery:

* delete files: ``commit_delete_files`` runs a ``_FastAppendFiles`` subclass
  (pyiceberg's snapshot producer, so snapshot ids, sequence numbers, manifest
  lists, summaries and the branch ref are pyiceberg's) that also writes one
  DELETES manifest per partition spec. The operation is ``delete``, as Java's
  ``BaseRowDelta`` records a commit that adds delete files only.
* statistics: ``table.update_statistics().set_statistics(StatisticsFile)``.
* partition statistics: a ``SetPartitionStatisticsUpdate`` staged on a
  transaction (pyiceberg applies it; it only lacks a public builder method).

pyiceberg's scan applies position deletes (parquet) but refuses equality
deletes (``ValueError: PyIceberg does not yet support equality deletes``), so
``rows_from_files`` reads a snapshot independently (manifests through pyiceberg,
parquet through pyarrow, deletes applied by the spec's sequence-number rules)
to check tables that carry equality deletes.
"""

from __future__ import annotations

import collections
import json
import struct
import uuid
from typing import Iterable, Sequence

import mmh3
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.statistics import BlobMetadata, PartitionStatisticsFile, StatisticsFile
from pyiceberg.table.update import SetPartitionStatisticsUpdate
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record

#: Reserved field ids of the position delete schema (Iceberg spec, "Position Delete Files").
FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545

_FIELD_ID_KEY = b"PARQUET:field_id"


def _field(name: str, type_: pa.DataType, field_id: int, nullable: bool) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={_FIELD_ID_KEY: str(field_id).encode()})


def _new_location(table: Table, name: str) -> str:
    return f"{table.location()}/data/{name}"


def _write_parquet(table: Table, location: str, arrow: pa.Table) -> int:
    with table.io.new_output(location).create(overwrite=False) as out:
        pq.write_table(arrow, out)
    return len(table.io.new_input(location))


# --------------------------------------------------------------------------- delete files


def write_position_delete_file(table: Table, data_file: DataFile, positions: Sequence[int]) -> DataFile:
    """Write a parquet position delete file hiding ``positions`` (0-based row numbers) of ``data_file``.

    The returned ``DataFile`` carries the data file's partition and spec id and,
    as Java's writers do for a delete file naming one data file, ``file_path``
    bounds equal to that path (pyiceberg's ``DeleteFileIndex`` then indexes it
    by path).
    """
    if not positions:
        raise ValueError("a position delete file needs at least one position")
    ordered = sorted(set(positions))
    if ordered[-1] >= data_file.record_count or ordered[0] < 0:
        raise ValueError(f"positions {ordered} outside {data_file.file_path} ({data_file.record_count} rows)")
    schema = pa.schema(
        [_field("file_path", pa.string(), FILE_PATH_FIELD_ID, False), _field("pos", pa.int64(), POS_FIELD_ID, False)]
    )
    arrow = pa.table({"file_path": [data_file.file_path] * len(ordered), "pos": ordered}, schema=schema)
    location = _new_location(table, f"{uuid.uuid4()}-pos-deletes.parquet")
    size = _write_parquet(table, location, arrow)
    path_bytes = data_file.file_path.encode()
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=data_file.partition,
        record_count=len(ordered),
        file_size_in_bytes=size,
        lower_bounds={FILE_PATH_FIELD_ID: path_bytes, POS_FIELD_ID: struct.pack("<q", ordered[0])},
        upper_bounds={FILE_PATH_FIELD_ID: path_bytes, POS_FIELD_ID: struct.pack("<q", ordered[-1])},
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
    )
    # spec_id is no field of the data_file struct: from_args drops it, the attribute carries it
    delete_file.spec_id = data_file.spec_id
    return delete_file


def write_equality_delete_file(
    table: Table, *, partition: Record, spec_id: int, rows: Sequence[dict]
) -> DataFile:
    """Write a parquet equality delete file deleting every row equal to one of ``rows`` on their columns.

    All ``rows`` name the same columns (of the current schema); those columns'
    field ids become the file's ``equality_ids``. ``partition``/``spec_id`` scope
    the file: it applies only to data files of that spec and partition (an
    unpartitioned spec makes it global).
    """
    if not rows:
        raise ValueError("an equality delete file needs at least one row")
    names = list(rows[0])
    if any(list(row) != names for row in rows):
        raise ValueError("every equality delete row must name the same columns in the same order")
    schema = table.schema()
    fields = [schema.find_field(name) for name in names]
    arrow_schema = schema.select(*names).as_arrow()
    arrow = pa.Table.from_pylist(list(rows), schema=arrow_schema)
    location = _new_location(table, f"{uuid.uuid4()}-eq-deletes.parquet")
    size = _write_parquet(table, location, arrow)
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=len(rows),
        file_size_in_bytes=size,
        sort_order_id=None,
        equality_ids=[field.field_id for field in fields],
        key_metadata=None,
    )
    delete_file.spec_id = spec_id
    return delete_file


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest writer whose manifest holds delete files (content ``deletes``)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AddDeleteFiles(_FastAppendFiles):
    """pyiceberg's fast append, plus a DELETES manifest per spec for ``delete_files``."""

    def __init__(self, transaction, io, delete_files: Sequence[DataFile], branch: str | None, snapshot_properties):
        super().__init__(Operation.DELETE, transaction, io, snapshot_properties=snapshot_properties, branch=branch)
        self._delete_files = list(delete_files)

    def _manifests(self) -> list[ManifestFile]:
        by_spec: dict[int, list[DataFile]] = collections.defaultdict(list)
        for delete_file in self._delete_files:
            by_spec[delete_file.spec_id].append(delete_file)
        written = []
        for spec_id in sorted(by_spec):
            writer = _DeleteManifestWriter(
                self.spec(spec_id), self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
            )
            with writer:
                for delete_file in by_spec[spec_id]:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=delete_file,
                        )
                    )
            written.append(writer.to_manifest_file())
        return written + super()._manifests()

    def _summary(self, snapshot_properties=None):
        # The summary collector counts delete files by content (added-position-deletes, ...);
        # the base class only feeds it _added_data_files, which must stay data-only for
        # _write_added_manifest.
        data_only = self._added_data_files
        self._added_data_files = data_only + self._delete_files
        try:
            return super()._summary(snapshot_properties or {})
        finally:
            self._added_data_files = data_only


def commit_delete_files(
    table: Table,
    delete_files: Iterable[DataFile],
    *,
    branch: str = MAIN_BRANCH,
    snapshot_properties: dict[str, str] | None = None,
) -> int:
    """Commit ``delete_files`` as one ``delete`` snapshot on ``branch``; returns the new snapshot id."""
    delete_files = list(delete_files)
    if not delete_files:
        raise ValueError("nothing to commit: no delete files")
    with table.transaction() as tx:
        producer = _AddDeleteFiles(tx, table.io, delete_files, branch, snapshot_properties or {})
        snapshot_id = producer.snapshot_id
        producer.commit()
    return snapshot_id


# --------------------------------------------------------------------------- statistics

_PUFFIN_MAGIC = b"PFA1"
#: DataSketches' default update seed and the 16-bit hash of it that compact sketches carry.
_THETA_SEED = 9001
_THETA_SEED_HASH = mmh3.hash64(struct.pack("<q", _THETA_SEED), 0, signed=False)[0] & 0xFFFF


def theta_sketch(values: Iterable[bytes]) -> bytes:
    """A compact, ordered, exact-mode DataSketches theta sketch (serial version 3) of ``values``.

    Each value is hashed as DataSketches' ``update(byte[])`` does (MurmurHash3
    x64-128 with seed 9001, first half shifted right by one). Exact mode only:
    fine for the few distinct values a test table holds. Written from the
    serialization format; no DataSketches library is available to read it back.
    """
    hashes = sorted({mmh3.hash64(value, _THETA_SEED, signed=False)[0] >> 1 for value in values} - {0})
    if not hashes:
        # empty sketch: one preamble long, flags READ_ONLY | EMPTY | COMPACT | ORDERED
        return struct.pack("<BBBBBBH", 1, 3, 3, 0, 0, 0b11110, _THETA_SEED_HASH)
    preamble = struct.pack("<BBBBBBHII", 2, 3, 3, 0, 0, 0b11010, _THETA_SEED_HASH, len(hashes), 0x3F800000)
    return preamble + b"".join(struct.pack("<Q", h) for h in hashes)


def _single_value_bytes(value) -> bytes:
    # Iceberg's single-value serialization, which Iceberg hashes into its NDV sketches.
    if isinstance(value, bool):
        return b"\x01" if value else b"\x00"
    if isinstance(value, int):
        return struct.pack("<q", value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"no single-value serialization here for {type(value).__name__}")


def write_statistics_file(table: Table, snapshot_id: int, column_names: Sequence[str]) -> StatisticsFile:
    """Write a puffin file with one ``apache-datasketches-theta-v1`` blob per column, ``ndv`` property set.

    The sketches cover the rows pyiceberg's scan returns at ``snapshot_id``. The
    file lands at ``metadata/<snapshot-id>-<uuid>.stats``, where Java writes it.
    """
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise ValueError(f"no snapshot {snapshot_id} in {table.name()}")
    arrow = table.scan(snapshot_id=snapshot_id, selected_fields=tuple(column_names)).to_arrow()
    schema = table.schema()
    body = bytearray(_PUFFIN_MAGIC)
    blobs = []
    for name in column_names:
        values = {v for v in arrow.column(name).to_pylist() if v is not None}
        payload = theta_sketch(_single_value_bytes(v) for v in values)
        blobs.append(
            {
                "type": "apache-datasketches-theta-v1",
                "fields": [schema.find_field(name).field_id],
                "snapshot-id": snapshot_id,
                "sequence-number": snapshot.sequence_number,
                "offset": len(body),
                "length": len(payload),
                "properties": {"ndv": str(len(values))},
            }
        )
        body += payload
    footer_payload = json.dumps({"blobs": blobs, "properties": {"created-by": "lakesweep tests"}}).encode()
    footer = _PUFFIN_MAGIC + footer_payload + struct.pack("<i", len(footer_payload)) + bytes(4) + _PUFFIN_MAGIC
    location = f"{table.location()}/metadata/{snapshot_id}-{uuid.uuid4()}.stats"
    with table.io.new_output(location).create(overwrite=False) as out:
        out.write(bytes(body) + footer)
    return StatisticsFile(
        snapshot_id=snapshot_id,
        statistics_path=location,
        file_size_in_bytes=len(body) + len(footer),
        file_footer_size_in_bytes=len(footer),
        blob_metadata=[
            BlobMetadata(
                type=b["type"],
                snapshot_id=snapshot_id,
                sequence_number=b["sequence-number"],
                fields=b["fields"],
                properties=b["properties"],
            )
            for b in blobs
        ],
    )


def write_partition_statistics_file(table: Table, snapshot_id: int) -> PartitionStatisticsFile:
    """Write a parquet partition-statistics file (the spec's schema, field ids 1-12) for ``snapshot_id``.

    Counts come from the snapshot's live manifest entries. Single-spec tables
    only: the ``partition`` struct is that spec's partition type, which is the
    unified partition type only while the table has one spec.
    """
    metadata = table.metadata
    if len(metadata.partition_specs) != 1:
        raise ValueError("partition statistics here support a single partition spec")
    spec = metadata.spec()
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise ValueError(f"no snapshot {snapshot_id} in {table.name()}")
    partition_type = spec.partition_type(table.schema())
    stats: dict[tuple, dict[str, int]] = {}
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            f = entry.data_file
            key = tuple(f.partition[i] for i in range(len(partition_type.fields)))
            s = stats.setdefault(key, collections.Counter())
            if f.content == DataFileContent.DATA:
                s["data_record_count"] += f.record_count
                s["data_file_count"] += 1
                s["total_data_file_size_in_bytes"] += f.file_size_in_bytes
            elif f.content == DataFileContent.POSITION_DELETES:
                s["position_delete_record_count"] += f.record_count
                s["position_delete_file_count"] += 1
            else:
                s["equality_delete_record_count"] += f.record_count
                s["equality_delete_file_count"] += 1
    partition_arrow = pa.struct(
        [_field(pf.name, _arrow_type(pf.field_type), pf.field_id, True) for pf in partition_type.fields]
    )
    columns = [
        ("spec_id", pa.int32(), 2, False),
        ("data_record_count", pa.int64(), 3, False),
        ("data_file_count", pa.int32(), 4, False),
        ("total_data_file_size_in_bytes", pa.int64(), 5, False),
        ("position_delete_record_count", pa.int64(), 6, True),
        ("position_delete_file_count", pa.int32(), 7, True),
        ("equality_delete_record_count", pa.int64(), 8, True),
        ("equality_delete_file_count", pa.int32(), 9, True),
        ("total_record_count", pa.int64(), 10, True),
        ("last_updated_at", pa.int64(), 11, True),
        ("last_updated_snapshot_id", pa.int64(), 12, True),
    ]
    arrow_schema = pa.schema([_field("partition", partition_arrow, 1, False)] + [_field(*c) for c in columns])
    rows = []
    for key in sorted(stats, key=repr):
        s = stats[key]
        rows.append(
            {
                "partition": {pf.name: value for pf, value in zip(partition_type.fields, key)},
                "spec_id": spec.spec_id,
                **{name: s[name] for name, *_ in columns[1:8]},
                "total_record_count": None,
                "last_updated_at": snapshot.timestamp_ms,
                "last_updated_snapshot_id": snapshot_id,
            }
        )
    arrow = pa.Table.from_pylist(rows, schema=arrow_schema)
    location = f"{table.location()}/metadata/partition-stats-{snapshot_id}-{uuid.uuid4()}.parquet"
    size = _write_parquet(table, location, arrow)
    return PartitionStatisticsFile(snapshot_id=snapshot_id, statistics_path=location, file_size_in_bytes=size)


def _arrow_type(iceberg_type) -> pa.DataType:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(iceberg_type)


def set_partition_statistics(table: Table, partition_statistics: PartitionStatisticsFile) -> None:
    """Commit ``partition_statistics`` into the table metadata (replacing any for the same snapshot)."""
    with table.transaction() as tx:
        tx._apply((SetPartitionStatisticsUpdate(partition_statistics=partition_statistics),), ())


# --------------------------------------------------------------------------- independent reader


def _read_by_field_id(location: str, table: Table, schema) -> pa.Table:
    """Read a parquet file into ``schema``'s columns by field id; columns the file lacks read as nulls."""
    with table.io.new_input(location).open() as f:
        arrow = pq.read_table(f)
    by_id = {int(field.metadata[_FIELD_ID_KEY]): field.name for field in arrow.schema if field.metadata}
    columns = {}
    for field in schema.fields:
        if field.field_id in by_id:
            columns[field.name] = arrow.column(by_id[field.field_id])
        else:
            columns[field.name] = pa.nulls(arrow.num_rows)
    return pa.table(columns)


def rows_from_files(table: Table, snapshot_id: int) -> collections.Counter:
    """The rows of ``snapshot_id`` read without pyiceberg's scan, position and equality deletes applied.

    Live manifest entries come from pyiceberg's manifest reader; data and
    delete files are read with pyarrow. Per the Iceberg spec a position delete
    applies to a data file whose data sequence number is <= its own, an
    equality delete to one whose data sequence number is < its own, in the
    same spec and partition unless the delete's spec is unpartitioned.
    Rows are tuples in the snapshot schema's column order.
    """
    metadata = table.metadata
    snapshot = metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise ValueError(f"no snapshot {snapshot_id} in {table.name()}")
    schema = next(s for s in metadata.schemas if s.schema_id == snapshot.schema_id)
    entries = [
        entry
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    ]
    positions: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)  # path -> [(seq, pos)]
    equality: list[tuple[int, ManifestEntry, set[tuple]]] = []
    id_to_name = {f.field_id: f.name for f in metadata.schema().fields}
    for entry in entries:
        f = entry.data_file
        if f.content == DataFileContent.POSITION_DELETES:
            with table.io.new_input(f.file_path).open() as stream:
                deletes = pq.read_table(stream)
            for path, pos in zip(deletes.column("file_path").to_pylist(), deletes.column("pos").to_pylist()):
                positions[path].append((entry.sequence_number, pos))
        elif f.content == DataFileContent.EQUALITY_DELETES:
            names = [id_to_name[i] for i in f.equality_ids]
            with table.io.new_input(f.file_path).open() as stream:
                deletes = pq.read_table(stream).select(names)
            equality.append((entry.sequence_number, entry, {tuple(r.values()) for r in deletes.to_pylist()}))
    rows: collections.Counter = collections.Counter()
    names = [field.name for field in schema.fields]
    for entry in entries:
        f = entry.data_file
        if f.content != DataFileContent.DATA:
            continue
        seq = entry.sequence_number
        hidden = {pos for delete_seq, pos in positions.get(f.file_path, ()) if delete_seq >= seq}
        applicable = [
            (eq_entry.data_file.equality_ids, keys)
            for delete_seq, eq_entry, keys in equality
            if delete_seq > seq
            and (
                metadata.specs()[eq_entry.data_file.spec_id].is_unpartitioned()
                or (eq_entry.data_file.spec_id == f.spec_id and eq_entry.data_file.partition == f.partition)
            )
        ]
        for pos, row in enumerate(_read_by_field_id(f.file_path, table, schema).to_pylist()):
            if pos in hidden:
                continue
            if any(tuple(row[id_to_name[i]] for i in ids) in keys for ids, keys in applicable):
                continue
            rows[tuple(row[name] for name in names)] += 1
    return rows
