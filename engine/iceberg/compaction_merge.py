"""Merging one compaction bin (``engine.iceberg.compaction``): read its Parquet data files, drop the rows its
delete files delete, write one Parquet file, and return what a pyiceberg ``DataFile`` needs.

``merge_bin`` is a plain function of picklable values, so it runs inside a Spark task; it opens no catalog,
and every file goes through the ``FileIO``. Rows are projected as pyiceberg's scan projects them and keep
their order; deletes apply by Iceberg's sequence-number rules; the output is written as pyiceberg writes a
data file, in one ``write_atomic``, at ``output_location`` (``compact-<plan id>-<bin index>.parquet``); a
bin whose every row is deleted writes nothing. The rules: docs/design/iceberg-compaction.md#merging-a-bin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, PlanRejected, StorageError, UnsupportedTable
from lakesweep.engine.fileio import FileIO, join
from lakesweep.engine.iceberg.compaction import DeleteRef, InputFile, resolve_location
from lakesweep.engine.iceberg.table import canonical

_POSITION_DELETES, _EQUALITY_DELETES = 1, 2


@dataclass(frozen=True, slots=True)
class MergedFile:
    """The output of one bin: its location (as the table spells locations), rows and bytes, and the column
    statistics pyiceberg puts in a ``DataFile`` (``column_sizes``, ``value_counts``, ``null_value_counts``,
    ``nan_value_counts``, ``lower_bounds``, ``upper_bounds``, ``split_offsets``)."""

    location: str
    written: bool
    record_count: int
    file_size_in_bytes: int
    rows_read: int
    position_deleted: int
    equality_deleted: int
    statistics: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def data_file(self, *, spec_id: int, partition_values: Sequence):
        """The pyiceberg ``DataFile`` to commit for this output (``CompactionBin.spec_id`` and
        ``partition_values``)."""
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record

        if not self.written:
            raise ValueError(f"{self.location}: every row of the bin was deleted; there is no file to commit")
        data_file = DataFile.from_args(
            content=DataFileContent.DATA, file_path=self.location, file_format=FileFormat.PARQUET,
            partition=Record(*partition_values), file_size_in_bytes=self.file_size_in_bytes,
            sort_order_id=None, equality_ids=None, key_metadata=None, **dict(self.statistics))
        data_file.spec_id = spec_id  # no field of the data_file struct: from_args drops it
        return data_file


_PLAN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def output_location(table_location: str, properties: Mapping[str, str], *, partition: str, plan_id: str,
                    bin_index: int) -> str:
    """Where bin ``bin_index`` of plan ``plan_id`` writes its output (module docstring)."""
    if not _PLAN_ID.fullmatch(plan_id):
        raise PlanRejected(f"plan id {plan_id!r} cannot name a file")
    if bin_index < 0:
        raise PlanRejected(f"bin index {bin_index} is negative")
    root = properties.get("write.data.path") or join(table_location, "data")
    return join(root, partition, f"compact-{plan_id}-{bin_index}.parquet")


def merge_bin(inputs: Sequence[InputFile], position_deletes: Sequence[DeleteRef],
              equality_deletes: Sequence[DeleteRef], *, output_location: str, fileio: FileIO, schema,
              table_location: str, properties: Mapping[str, str] | None = None, format_version: int = 2,
              identity_values: Sequence[tuple[int, object]] = ()) -> MergedFile:
    """Merge ``inputs`` into one Parquet file at ``output_location``, deleted rows dropped (module docstring).

    ``schema`` is the table's current pyiceberg ``Schema``; ``properties`` its table properties;
    ``table_location`` resolves relative paths in position delete files; ``identity_values`` are the
    bin's ``CompactionBin.identity_values``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import (
        _get_parquet_writer_kwargs,
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.schema import sanitize_column_names

    if not inputs:
        raise ValueError("a bin needs at least one input file")
    properties = dict(properties or {})
    write_schema = sanitize_column_names(schema)
    name_mapping = _name_mapping(properties)
    downcast = format_version <= 2
    positions = _PositionDeletes(position_deletes, fileio, table_location)
    equalities = _EqualityDeletes(equality_deletes, fileio, write_schema, name_mapping, downcast)
    row_group_limit = int(properties.get("write.parquet.row-group-limit", 1048576))

    sink = pa.BufferOutputStream()
    writer = None
    pending: list = []
    pending_rows = kept = read = by_position = by_equality = 0

    def flush():
        nonlocal pending, pending_rows
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema=writer.schema),
                               row_group_size=row_group_limit)
            pending, pending_rows = [], 0

    for f in inputs:
        table = _project(_read_parquet(fileio, f.path, "data file"), f.path, write_schema, name_mapping, downcast,
                         dict(identity_values))
        if table.num_rows != f.record_count:
            raise CorruptMetadata(f.path, f"the manifest says {f.record_count} rows, the file has {table.num_rows}")
        read += table.num_rows
        keep = positions.mask(f, table.num_rows)
        by_position += table.num_rows - sum(keep)
        keep, n_eq = equalities.apply(f, table, keep)
        by_equality += n_eq
        table = table.filter(pa.array(keep, pa.bool_()))
        if table.num_rows == 0:
            continue
        if writer is None:
            writer = pq.ParquetWriter(sink, schema=table.schema, store_decimal_as_integer=True,
                                      **_get_parquet_writer_kwargs(properties))
        kept += table.num_rows
        pending.extend(table.to_batches())
        pending_rows += table.num_rows
        if pending_rows >= row_group_limit:
            flush()
    if writer is None:
        return MergedFile(output_location, False, 0, 0, read, by_position, by_equality)
    flush()
    writer.close()
    data = sink.getvalue().to_pybytes()
    fileio.write_atomic(canonical(output_location), data)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=writer.writer.metadata,
        stats_columns=compute_statistics_plan(write_schema, properties),
        parquet_column_mapping=parquet_path_to_id_mapping(write_schema))
    if statistics.record_count != kept:
        raise CorruptMetadata(output_location, f"wrote {statistics.record_count} rows, expected {kept}")
    return MergedFile(output_location, True, kept, len(data), read, by_position, by_equality,
                      statistics.to_serialized_dict())


# ---- reading ------------------------------------------------------------------------------------------


def _name_mapping(properties: Mapping[str, str]):
    raw = properties.get("schema.name-mapping.default")
    if not raw:
        return None
    from pyiceberg.table.name_mapping import parse_mapping_from_json

    return parse_mapping_from_json(raw)


def _read_parquet(fileio: FileIO, path: str, what: str):
    import pyarrow.parquet as pq

    try:
        with fileio.open_input(path) as stream:
            return pq.read_table(stream)
    except FileNotFoundError as e:
        raise MetadataNotFound(path, what) from e
    except StorageError:
        raise
    except Exception as e:
        raise CorruptMetadata(path, f"{what} cannot be read as Parquet: {type(e).__name__}: {e}") from e


def _project(table, path: str, requested, name_mapping, downcast: bool, identity_values: dict):
    """``table`` (as read) projected by field id onto the ``requested`` schema, with field ids."""
    import pyarrow as pa
    from pyiceberg.io.fileformat import FileFormatFactory
    from pyiceberg.io.pyarrow import _to_requested_schema, pyarrow_to_schema, schema_to_pyarrow
    from pyiceberg.manifest import FileFormat

    try:
        file_schema = pyarrow_to_schema(table.schema, name_mapping, downcast_ns_timestamp_to_us=downcast)
        missing = {fid: v for fid, v in identity_values.items() if fid not in file_schema.field_ids}
        batches = [_to_requested_schema(requested, file_schema, batch, downcast_ns_timestamp_to_us=downcast,
                                        include_field_ids=True, projected_missing_fields=missing,
                                        format_model=FileFormatFactory.get(FileFormat.PARQUET))
                   for batch in table.combine_chunks().to_batches()]
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise CorruptMetadata(path, f"cannot be read into the table schema: {e}") from e
    # one Arrow schema for every input (a column a file lacks comes back as a small string, say)
    target = schema_to_pyarrow(requested, include_field_ids=True)
    try:
        return pa.Table.from_batches([b.cast(target) for b in batches], schema=target)
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise CorruptMetadata(path, f"cannot be read into the table schema: {e}") from e


class _PositionDeletes:
    """Deleted positions per data file path, read from each delete file once."""

    def __init__(self, deletes: Sequence[DeleteRef], fileio: FileIO, table_location: str):
        for d in deletes:
            if d.content != _POSITION_DELETES:
                raise ValueError(f"{d.location} is not a position delete file")
        self.deletes = list(deletes)
        self.fileio = fileio
        self.table_location = table_location
        self._read: dict[str, dict[str, list]] = {}

    def _positions(self, d: DeleteRef) -> dict[str, list]:
        if d.path not in self._read:
            import pyarrow.compute as pc

            table = _read_parquet(self.fileio, d.path, "position delete file")
            if "file_path" not in table.column_names or "pos" not in table.column_names:
                raise CorruptMetadata(d.path, "a position delete file needs the columns file_path and pos")
            by_path: dict[str, list] = {}
            paths = table.column("file_path")
            for raw in pc.unique(paths).to_pylist():
                if raw is None:
                    raise CorruptMetadata(d.path, "a position delete names no file (file_path is null)")
                rows = table.filter(pc.equal(paths, raw)).column("pos").to_pylist()
                by_path.setdefault(resolve_location(raw, self.table_location), []).extend(rows)
            self._read[d.path] = by_path
        return self._read[d.path]

    def mask(self, f: InputFile, n: int) -> list[bool]:
        keep = [True] * n
        for d in self.deletes:
            if f.sequence_number <= d.sequence_number:
                for pos in self._positions(d).get(f.path, ()):
                    if pos is not None and 0 <= pos < n:
                        keep[pos] = False
        return keep


class _EqualityDeletes:
    """The keys of each equality delete file, read once, matched by field id."""

    def __init__(self, deletes: Sequence[DeleteRef], fileio: FileIO, schema, name_mapping, downcast: bool):
        self.names = {f.field_id: f.name for f in schema.fields}
        for d in deletes:
            if d.content != _EQUALITY_DELETES:
                raise ValueError(f"{d.location} is not an equality delete file")
            if not d.equality_ids:
                raise CorruptMetadata(d.path, "an equality delete file without equality_ids")
            absent = [i for i in d.equality_ids if i not in self.names]
            if absent:
                raise UnsupportedTable(f"equality delete file {d.location} matches on field ids {absent}, which "
                                       f"are not top-level columns of the current schema; lakesweep does not "
                                       f"compact such files")
        self.deletes = list(deletes)
        self.fileio = fileio
        self.schema = schema
        self.name_mapping = name_mapping
        self.downcast = downcast
        self._keys: dict[str, set] = {}

    def _read(self, d: DeleteRef) -> set:
        if d.path not in self._keys:
            from pyiceberg.schema import Schema

            fields = Schema(*[self.schema.find_field(i) for i in d.equality_ids])
            table = _project(_read_parquet(self.fileio, d.path, "equality delete file"), d.path, fields,
                             self.name_mapping, self.downcast, {})
            columns = [table.column(self.names[i]).to_pylist() for i in d.equality_ids]
            self._keys[d.path] = set(zip(*columns))
        return self._keys[d.path]

    def apply(self, f: InputFile, table, keep: list[bool]) -> tuple[list[bool], int]:
        groups: dict[tuple[int, ...], set] = {}
        for d in self.deletes:
            if f.sequence_number < d.sequence_number:
                groups.setdefault(d.equality_ids, set()).update(self._read(d))
        deleted = 0
        for ids, keys in groups.items():
            if not keys:
                continue
            columns = [table.column(self.names[i]).to_pylist() for i in ids]
            for pos, key in enumerate(zip(*columns)):
                if keep[pos] and key in keys:
                    keep[pos] = False
                    deleted += 1
        return keep, deleted
