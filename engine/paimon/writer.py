"""Writing Paimon metadata: Avro manifests, manifest lists and index manifests, snapshot JSON and hints.

Files are written as Paimon writes them (``ManifestFile``, ``ManifestList``, ``IndexManifestFile``,
``SnapshotManager#commitLatestHint``). A snapshot is published only if its file does not exist yet
(``FileIO.create_if_absent``), then the ``LATEST`` hint is written, as Paimon's ``RenamingSnapshotCommit``.
Entries copied out of existing files are written with the Avro schema and codec they were read with
(``AvroFile``). Versions, names and why: docs/design/paimon-tables.md#partition-drop-commits.
"""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import fastavro

from lakesweep.engine.errors import CorruptMetadata, StorageError
from lakesweep.engine.fileio import FileIO, join

_STATS = {
    "type": "record",
    "name": "stats",
    "fields": [
        {"name": "_MIN_VALUES", "type": "bytes"},
        {"name": "_MAX_VALUES", "type": "bytes"},
        {"name": "_NULL_COUNTS", "type": ["null", {"type": "array", "items": ["null", "long"]}], "default": None},
    ],
}

_FILE = {
    "type": "record",
    "name": "org.apache.paimon.avro.generated.record__FILE",
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": dict(_STATS, name="key_stats")},
        {"name": "_VALUE_STATS", "type": dict(_STATS, name="value_stats")},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
        {"name": "_CREATION_TIME", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
         "default": None},
        {"name": "_DELETE_ROW_COUNT", "type": ["null", "long"], "default": None},
        {"name": "_EMBEDDED_FILE_INDEX", "type": ["null", "bytes"], "default": None},
        {"name": "_FILE_SOURCE", "type": ["null", "int"], "default": None},
        {"name": "_VALUE_STATS_COLS", "type": ["null", {"type": "array", "items": "string"}], "default": None},
        {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None},
    ],
}

# The record schemas of Paimon 1.x (``ManifestEntrySerializer`` & co. as ``AvroSchemaConverter`` renders
# them); 0.9 writes the same minus the last two ``_FILE`` fields.
MANIFEST_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": "org.apache.paimon.avro.generated.record",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"},
        {"name": "_FILE", "type": _FILE},
    ],
})

MANIFEST_LIST_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": "org.apache.paimon.avro.generated.record",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": dict(_STATS, name="partition_stats")},
        {"name": "_SCHEMA_ID", "type": "long"},
    ],
})

INDEX_MANIFEST_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": "org.apache.paimon.avro.generated.record",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_DELETIONS_VECTORS_RANGES", "type": ["null", {"type": "array", "items": {
            "type": "record", "name": "dv", "fields": [
                {"name": "f0", "type": "string"}, {"name": "f1", "type": "int"}, {"name": "f2", "type": "int"},
                {"name": "_CARDINALITY", "type": ["null", "long"], "default": None}]}}], "default": None},
    ],
})

# Avro's codec names as fastavro writes them, by the names Paimon's ``manifest.compression`` takes.
_CODECS = {"null": "null", "none": "null", "deflate": "deflate", "snappy": "snappy", "zstd": "zstandard",
           "zstandard": "zstandard"}


def avro_codec(name: str) -> str:
    """The fastavro codec of a ``manifest.compression`` value (Paimon's default is zstd)."""
    try:
        return _CODECS[name.lower()]
    except KeyError as e:
        raise ValueError(f"manifest compression {name!r} is not one lakesweep writes ({sorted(_CODECS)})") from e


@dataclass(frozen=True)
class AvroFile:
    """An Avro file as read: its writer schema, its codec and its records (plain dicts)."""

    schema: Mapping[str, Any]
    codec: str
    records: list[dict]


def read_avro(path: str, data: bytes) -> AvroFile:
    """The records of an Avro metadata file with the schema and codec it was written with."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        records = list(reader)
        return AvroFile(reader.writer_schema, reader.codec, records)
    except Exception as e:  # fastavro raises many types for garbled input
        raise CorruptMetadata(path, f"cannot decode Avro: {type(e).__name__}: {e}") from e


def avro_bytes(schema: Mapping[str, Any], records: Iterable[Mapping[str, Any]], codec: str = "null") -> bytes:
    """``records`` as an Avro object container file."""
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(dict(schema)) if not _parsed(schema) else schema, records,
                    codec=codec)
    return buf.getvalue()


def _parsed(schema) -> bool:
    return isinstance(schema, dict) and "__fastavro_parsed" in schema


def snapshot_bytes(snapshot: Mapping[str, Any]) -> bytes:
    """A snapshot (or tag) JSON as Paimon's ``JsonSerdeUtil`` pretty-prints it (key order kept)."""
    return json.dumps(dict(snapshot), indent=2).encode("utf-8")


class MetadataWriter:
    """Writes new metadata files of one table and remembers them, so that a commit attempt that loses
    the race for its snapshot id can remove what it wrote (``discard``): Paimon's
    ``cleanUpTmpManifests``."""

    def __init__(self, fileio: FileIO, manifest_dir: str, snapshot_dir: str):
        self.fileio = fileio
        self.manifest_dir = manifest_dir
        self.snapshot_dir = snapshot_dir
        self._uuid = uuid.uuid4()
        self._n = 0
        self.written: list[str] = []

    def name(self, prefix: str) -> str:
        """A new file name: Paimon's ``<prefix>-<uuid>-<n>``."""
        name = f"{prefix}-{self._uuid}-{self._n}"
        self._n += 1
        return name

    def write(self, prefix: str, schema, records: Sequence[Mapping[str, Any]], codec: str) -> tuple[str, int]:
        """A new Avro metadata file in the manifest directory: (its name, its size)."""
        name = self.name(prefix)
        data = avro_bytes(schema, records, codec)
        path = join(self.manifest_dir, name)
        self.fileio.create_if_absent(path, data)
        self.written.append(path)
        return name, len(data)

    def publish(self, snapshot: Mapping[str, Any]) -> bool:
        """Create ``snapshot-<id>`` if no snapshot has that id, then point the ``LATEST`` hint at it.
        False when the id is taken (another commit won): nothing is written then."""
        sid = int(snapshot["id"])
        try:
            self.fileio.create_if_absent(join(self.snapshot_dir, f"snapshot-{sid}"), snapshot_bytes(snapshot))
        except FileExistsError:
            return False
        # The hint only speeds up finding the latest snapshot; Java writes it after the snapshot (and only
        # warns when it cannot), and readers check that snapshot-<hint+1> does not exist before trusting it.
        try:
            self.fileio.write_atomic(join(self.snapshot_dir, "LATEST"), str(sid).encode())
        except StorageError:
            pass  # committed all the same: the next reader lists the snapshot directory
        return True

    def discard(self) -> None:
        """Delete the metadata files this writer wrote (they are referenced by no snapshot)."""
        for path in self.written:
            self.fileio.delete(path)
        self.written.clear()
