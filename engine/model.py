"""Paimon's metadata as immutable values: schema, snapshots, manifests, index manifests, tags, consumers.

Field names follow Paimon's JSON/Avro names in snake_case. Parsing lives in ``engine.metadata`` and
``engine.manifests``; these classes only hold values and check their invariants.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

from engine.types import DataType, parse_type


class FileKind(enum.IntEnum):
    ADD = 0
    DELETE = 1


class FileSource(enum.IntEnum):
    APPEND = 0
    COMPACT = 1


class CommitKind(enum.StrEnum):
    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"


@dataclass(frozen=True, slots=True)
class DataField:
    id: int
    name: str
    type: DataType


@dataclass(frozen=True, slots=True)
class TableSchema:
    id: int
    fields: tuple[DataField, ...]
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: Mapping[str, str]
    highest_field_id: int = -1
    version: int | None = None
    comment: str | None = None
    time_millis: int | None = None

    def __post_init__(self):
        names = [f.name for f in self.fields]
        missing = [k for k in self.partition_keys if k not in names]
        if missing:
            raise ValueError(f"partition keys {missing} are not fields of schema {self.id}")

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def partition_types(self) -> tuple[DataType, ...]:
        return tuple(self.field(k).type for k in self.partition_keys)

    def option(self, key: str, default: str | None = None) -> str | None:
        return self.options.get(key, default)

    @staticmethod
    def from_json(obj: Mapping) -> "TableSchema":
        fields = tuple(DataField(int(f["id"]), str(f["name"]), parse_type(f["type"])) for f in obj["fields"])
        return TableSchema(
            id=int(obj["id"]),
            fields=fields,
            partition_keys=tuple(obj.get("partitionKeys") or ()),
            primary_keys=tuple(obj.get("primaryKeys") or ()),
            options=dict(obj.get("options") or {}),
            highest_field_id=int(obj.get("highestFieldId", -1)),
            version=obj.get("version"),
            comment=obj.get("comment"),
            time_millis=obj.get("timeMillis"),
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot JSON (version 3). Tags and changelog metadata have the same fields."""

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    version: int | None = 3
    changelog_manifest_list: str | None = None
    index_manifest: str | None = None
    statistics: str | None = None
    total_record_count: int | None = None
    delta_record_count: int | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list_size: int | None = None
    uuid: str | None = None
    writer_version: str | None = None
    properties: Mapping[str, str] | None = None
    next_row_id: int | None = None
    operation: str | None = None
    log_offsets: Mapping[str, int] | None = None

    def __post_init__(self):
        if self.id < 0:
            raise ValueError(f"snapshot id {self.id} is negative")
        if not self.base_manifest_list or not self.delta_manifest_list:
            raise ValueError(f"snapshot {self.id} has no base or delta manifest list")

    _JSON_FIELDS = (
        ("id", "id", True),
        ("schema_id", "schemaId", True),
        ("base_manifest_list", "baseManifestList", True),
        ("delta_manifest_list", "deltaManifestList", True),
        ("commit_user", "commitUser", True),
        ("commit_identifier", "commitIdentifier", True),
        ("commit_kind", "commitKind", True),
        ("time_millis", "timeMillis", True),
        ("version", "version", False),
        ("changelog_manifest_list", "changelogManifestList", False),
        ("index_manifest", "indexManifest", False),
        ("statistics", "statistics", False),
        ("total_record_count", "totalRecordCount", False),
        ("delta_record_count", "deltaRecordCount", False),
        ("changelog_record_count", "changelogRecordCount", False),
        ("watermark", "watermark", False),
        ("base_manifest_list_size", "baseManifestListSize", False),
        ("delta_manifest_list_size", "deltaManifestListSize", False),
        ("changelog_manifest_list_size", "changelogManifestListSize", False),
        ("uuid", "uuid", False),
        ("writer_version", "writerVersion", False),
        ("properties", "properties", False),
        ("next_row_id", "nextRowId", False),
        ("operation", "operation", False),
        ("log_offsets", "logOffsets", False),
    )

    @classmethod
    def from_json(cls, obj: Mapping) -> "Snapshot":
        kwargs = {}
        for attr, key, required in cls._JSON_FIELDS:
            if key in obj and obj[key] is not None:
                kwargs[attr] = obj[key]
            elif required:
                raise ValueError(f"field '{key}' is missing")
        kwargs.setdefault("version", None)
        return cls(**kwargs)


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    snapshot: Snapshot
    create_time: tuple[int, ...] | None = None  # Jackson JSR-310 LocalDateTime array, local wall clock
    time_retained: str | None = None


@dataclass(frozen=True, slots=True)
class Consumer:
    consumer_id: str
    next_snapshot: int


@dataclass(frozen=True, slots=True)
class ManifestFileMeta:
    """One entry of a manifest list."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    schema_id: int
    version: int = 2


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    file_name: str
    file_size: int
    row_count: int
    level: int
    schema_id: int
    min_sequence_number: int = 0
    max_sequence_number: int = 0
    extra_files: tuple[str, ...] = ()
    creation_time_ms: int | None = None  # naive local wall clock encoded as if UTC (trap T-10)
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: int | None = None
    external_path: str | None = None
    first_row_id: int | None = None


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    kind: FileKind
    partition: bytes  # the serialized BinaryRow; Java compares partitions by these bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> tuple:
        """Java's ``FileEntry.Identifier``: what ``mergeEntries`` matches an ADD and a DELETE on."""
        f = self.file
        return (self.partition, self.bucket, f.level, f.file_name, f.extra_files, f.embedded_index, f.external_path)


@dataclass(frozen=True, slots=True)
class DeletionVectorRange:
    data_file: str
    offset: int
    length: int
    cardinality: int | None = None


@dataclass(frozen=True, slots=True)
class IndexFileMeta:
    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: tuple[DeletionVectorRange, ...] | None = None
    external_path: str | None = None


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    kind: FileKind
    partition: bytes
    bucket: int
    index_file: IndexFileMeta


@dataclass(frozen=True, slots=True)
class BranchInfo:
    name: str
    schema_ids: tuple[int, ...] = field(default_factory=tuple)
