"""Paimon's metadata as immutable values: schema, snapshots, manifests, index manifests, tags, consumers.

Field names follow Paimon's JSON/Avro names in snake_case. Schema and snapshot JSON is parsed here
(``from_json``, every field's JSON type checked as Jackson would type it, bool never an integer); Avro
lives in ``engine.paimon.manifests``. Names of metadata files must be plain file names (``plain_name_problem``).
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from lakesweep.engine.paimon.types import DataType, parse_type

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _integer(key: str, value: Any, low: int = LONG_MIN, high: int = LONG_MAX, java: str = "long") -> int:
    # bool is an int in Python, not in JSON; and Jackson would truncate 5.5 to 5: refuse both.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field '{key}' must be an integer, not {_shown(value)}")
    if not low <= value <= high:
        raise ValueError(f"field '{key}' is {value}, outside the range of a Java {java}")
    return value


def _java_int(key: str, value: Any) -> int:
    return _integer(key, value, INT_MIN, INT_MAX, "int")


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"field '{key}' must be a string, not {_shown(value)}")
    return value


def plain_name_problem(name: Any) -> str | None:
    """Why ``name`` is not a plain file name (``None`` when it is one).

    Metadata names a file inside a known directory (``manifest/``, ``statistics/``, a bucket directory);
    a name that is a path could point anywhere, e.g. ``../snapshot/snapshot-35``.
    """
    if (type(name) is str and name and name != "." and name != ".." and "/" not in name and "\\" not in name
            and "\x00" not in name):
        return None  # the common case, in one expression
    if not isinstance(name, str):
        return f"it is {_shown(name)}, not a string"
    if name == "":
        return "it is empty"
    if name in (".", ".."):
        return f"it is '{name}'"
    for sep in ("/", "\\"):
        if sep in name:
            return f"it contains '{sep}'"
    if "\x00" in name:
        return "it contains a NUL character"
    return None


def _file_name(key: str, value: Any) -> str:
    problem = plain_name_problem(_string(key, value))
    if problem is not None:
        raise ValueError(f"field '{key}' is not a plain file name ({problem}): {value!r}")
    return value


def _string_map(key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"field '{key}' must map strings to strings, not {_shown(value)}")
    return dict(value)


def _long_map(key: str, value: Any) -> dict[str, int]:
    """Java's ``Map<Integer, Long>``: JSON keys are decimal integers, values integers."""
    ok = isinstance(value, dict) and all(
        re.fullmatch(r"-?[0-9]+", k) and isinstance(v, int) and not isinstance(v, bool) and LONG_MIN <= v <= LONG_MAX
        for k, v in value.items()
    )
    if not ok:
        raise ValueError(f"field '{key}' must map integers to integers, not {_shown(value)}")
    return dict(value)


def _string_list(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"field '{key}' must be a list of strings, not {_shown(value)}")
    return tuple(value)


def int_list(key: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"field '{key}' must be a list of integers, not {_shown(value)}")
    return tuple(value)


def check_json_long(key: str, value: Any) -> int:
    """A JSON field that Java reads as a ``long``; raises ``ValueError`` naming the field otherwise."""
    return _integer(key, value)


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
        """Parse schema JSON, checking every field's JSON type; raises ``ValueError`` naming the field."""
        fields_json = obj.get("fields")
        if not isinstance(fields_json, list) or not all(isinstance(f, dict) for f in fields_json):
            raise ValueError(f"field 'fields' must be a list of objects, not {_shown(fields_json)}")
        fields = []
        for i, f in enumerate(fields_json):
            for key in ("id", "name", "type"):
                if key not in f:
                    raise ValueError(f"field 'fields[{i}].{key}' is missing")
            ftype = f["type"]
            if not isinstance(ftype, (str, dict)):
                raise ValueError(f"field 'fields[{i}].type' must be a string or an object, not {_shown(ftype)}")
            fields.append(DataField(_java_int(f"fields[{i}].id", f["id"]), _string(f"fields[{i}].name", f["name"]),
                                    parse_type(ftype)))

        def optional(key, check, default=None):
            value = obj.get(key)
            return default if value is None else check(key, value)

        if "id" not in obj:
            raise ValueError("field 'id' is missing")
        return TableSchema(
            id=_integer("id", obj["id"]),
            fields=tuple(fields),
            partition_keys=optional("partitionKeys", _string_list, ()),
            primary_keys=optional("primaryKeys", _string_list, ()),
            options=optional("options", _string_map, {}),
            highest_field_id=optional("highestFieldId", _java_int, -1),
            version=optional("version", _java_int),
            comment=optional("comment", _string),
            time_millis=optional("timeMillis", _integer),
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

    # (attribute, JSON key, required, check): the JSON types of Java's Snapshot fields.
    _JSON_FIELDS = (
        ("id", "id", True, _integer),
        ("schema_id", "schemaId", True, _integer),
        ("base_manifest_list", "baseManifestList", True, _file_name),
        ("delta_manifest_list", "deltaManifestList", True, _file_name),
        ("commit_user", "commitUser", True, _string),
        ("commit_identifier", "commitIdentifier", True, _integer),
        ("commit_kind", "commitKind", True, _string),
        ("time_millis", "timeMillis", True, _integer),
        ("version", "version", False, _java_int),
        ("changelog_manifest_list", "changelogManifestList", False, _file_name),
        ("index_manifest", "indexManifest", False, _file_name),
        ("statistics", "statistics", False, _file_name),
        ("total_record_count", "totalRecordCount", False, _integer),
        ("delta_record_count", "deltaRecordCount", False, _integer),
        ("changelog_record_count", "changelogRecordCount", False, _integer),
        ("watermark", "watermark", False, _integer),
        ("base_manifest_list_size", "baseManifestListSize", False, _integer),
        ("delta_manifest_list_size", "deltaManifestListSize", False, _integer),
        ("changelog_manifest_list_size", "changelogManifestListSize", False, _integer),
        ("uuid", "uuid", False, _string),
        ("writer_version", "writerVersion", False, _string),
        ("properties", "properties", False, _string_map),
        ("next_row_id", "nextRowId", False, _integer),
        ("operation", "operation", False, _string),
        ("log_offsets", "logOffsets", False, _long_map),
    )

    @classmethod
    def from_json(cls, obj: Mapping) -> "Snapshot":
        """Parse snapshot JSON (also a tag's or a changelog's), checking every field's JSON type and that
        manifest list, index manifest and statistics names are plain file names. Raises ``ValueError``
        naming the field; the caller names the file."""
        kwargs = {}
        for attr, key, required, check in cls._JSON_FIELDS:
            if key in obj and obj[key] is not None:
                kwargs[attr] = check(key, obj[key])
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
    """One entry of a manifest list (the fields lakesweep reads; the others are checked, not kept)."""

    file_name: str
    file_size: int


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    """A data file of a manifest entry: the fields lakesweep reads (statistics, keys and counts are not kept)."""

    file_name: str
    file_size: int
    level: int
    extra_files: tuple[str, ...] = ()
    creation_time_ms: int | None = None  # naive local wall clock encoded as if UTC
    embedded_index: bytes | None = None
    file_source: int | None = None
    external_path: str | None = None


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    kind: FileKind
    partition: bytes  # the serialized BinaryRow; Java compares partitions by these bytes
    bucket: int
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
