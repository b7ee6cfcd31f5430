"""Decoding Paimon's Avro manifest lists, manifests and index manifests.

Manifest lists and manifests are decoded field by field (``avro_projection``): only the fields the
planners read or check, by name from the file's own writer schema, so files of 0.9 (16 DataFileMeta
fields) and later versions (more trailing fields) read alike; statistics and keys are skipped undecoded.
Anything that does not decode raises ``CorruptMetadata`` naming the file, and so does a file name (of a
manifest, a data or extra file, an index file) that is not a plain file name: lakesweep joins these names
to directories it knows.
"""

from __future__ import annotations

import io
from dataclasses import fields
from typing import Sequence

import fastavro

from lakesweep.engine.errors import CorruptMetadata
from lakesweep.engine.paimon.avro_projection import (INT_CHECK, MISSING, TIMESTAMP, VALUE, Fields,
                                                     read_projected)
from lakesweep.engine.paimon.model import (DataFileMeta, DeletionVectorRange, FileKind, IndexFileMeta,
                                           IndexManifestEntry, ManifestEntry, ManifestFileMeta, plain_name_problem)

AVRO_MAGIC = b"Obj\x01"


def _records(path: str, data: bytes) -> list[dict]:
    if not data.startswith(AVRO_MAGIC):
        raise CorruptMetadata(path, "not an Avro object container file (lakesweep reads Avro manifests only)")
    try:
        return list(fastavro.reader(io.BytesIO(data)))
    except Exception as e:  # fastavro raises many types for truncated or garbled input
        raise CorruptMetadata(path, f"cannot decode Avro: {type(e).__name__}: {e}") from e


def _projected(path: str, data: bytes, fields: Fields) -> list[list]:
    if not data.startswith(AVRO_MAGIC):
        raise CorruptMetadata(path, "not an Avro object container file (lakesweep reads Avro manifests only)")
    try:
        return read_projected(data, fields)
    except Exception as e:  # truncated or garbled input fails in many ways
        raise CorruptMetadata(path, f"cannot decode Avro: {type(e).__name__}: {e}") from e


def _req(value, name: str):
    """A field every record must have (a ``KeyError`` naming it, as a missing key of a whole record)."""
    if value is MISSING:
        raise KeyError(name)
    return value


def _opt(value):
    return None if value is MISSING else value


_FILE_KINDS = {int(k): k for k in FileKind}  # a dict lookup: calling the enum costs a microsecond per entry


def _kind(path: str, v) -> FileKind:
    kind = _FILE_KINDS.get(v) if type(v) is int else None
    if kind is not None:
        return kind
    try:
        return FileKind(int(v))
    except (TypeError, ValueError) as e:
        raise CorruptMetadata(path, f"unknown file kind {v!r}") from e


def _plain_name(path: str, what: str, column: str, name):
    problem = plain_name_problem(name)
    if problem is not None:
        raise CorruptMetadata(path, f"malformed {what}: '{column}' is not a plain file name ({problem}): {name!r}")
    return name


def _check_version(path: str, v, allowed: tuple[int, ...], what: str) -> None:
    if v not in allowed:
        raise CorruptMetadata(path, f"{what} version {v!r} is not supported (expected {allowed})")


# The fields the planners read, and those today's checks convert with int() (INT_CHECK: skipped when the
# writer schema makes them a plain int or long). Statistics, keys and the rest are never decoded.
_LIST_FIELDS = (("_VERSION", VALUE), ("_FILE_NAME", VALUE), ("_FILE_SIZE", VALUE), ("_NUM_ADDED_FILES", INT_CHECK),
                ("_NUM_DELETED_FILES", INT_CHECK), ("_SCHEMA_ID", INT_CHECK))
_FILE_FIELDS = (("_FILE_NAME", VALUE), ("_FILE_SIZE", VALUE), ("_ROW_COUNT", INT_CHECK), ("_LEVEL", VALUE),
                ("_SCHEMA_ID", INT_CHECK), ("_MIN_SEQUENCE_NUMBER", INT_CHECK), ("_MAX_SEQUENCE_NUMBER", INT_CHECK),
                ("_EXTRA_FILES", VALUE), ("_CREATION_TIME", TIMESTAMP), ("_EMBEDDED_FILE_INDEX", VALUE),
                ("_FILE_SOURCE", VALUE), ("_EXTERNAL_PATH", VALUE))
_ENTRY_FIELDS = (("_VERSION", VALUE), ("_KIND", VALUE), ("_PARTITION", VALUE), ("_BUCKET", VALUE),
                 ("_TOTAL_BUCKETS", INT_CHECK), ("_FILE", _FILE_FIELDS))
_NAME_FIELDS = (("_VERSION", VALUE), ("_FILE", (("_FILE_NAME", VALUE), ("_EXTRA_FILES", VALUE))))


def decode_manifest_list(item: tuple[str, bytes]) -> list[tuple[str, int]]:
    """``(file name, file size)`` of each entry of the manifest list ``item`` = (path, bytes)."""
    path, data = item
    out = []
    for version, name, size, added, deleted, schema_id in _projected(path, data, _LIST_FIELDS):
        _check_version(path, _opt(version), (2,), "manifest list")
        try:
            name = _plain_name(path, "manifest list entry", "_FILE_NAME", _req(name, "_FILE_NAME"))
            size = int(_req(size, "_FILE_SIZE"))
            int(_req(added, "_NUM_ADDED_FILES")), int(_req(deleted, "_NUM_DELETED_FILES"))
            int(_req(schema_id, "_SCHEMA_ID"))
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadata(path, f"malformed manifest list entry: {e!r}") from e
        out.append((name, size))
    return out


def parse_manifest_list(path: str, data: bytes) -> list[ManifestFileMeta]:
    return [ManifestFileMeta(name, size) for name, size in decode_manifest_list((path, data))]


def _extra_files(path: str, what: str, names) -> tuple[str, ...]:
    if not names:  # most files have none
        return ()
    return tuple(_plain_name(path, what, "_EXTRA_FILES", x) for x in names)


def _entry(path: str, rec: list) -> tuple:
    what = "manifest entry"
    kind = _kind(path, _req(rec[1], "_KIND"))
    partition = bytes(_req(rec[2], "_PARTITION"))
    bucket = int(_req(rec[3], "_BUCKET"))
    int(_req(rec[4], "_TOTAL_BUCKETS"))
    name, size, rows, level, schema_id, min_seq, max_seq, extra, created, index, source, external = _req(rec[5],
                                                                                                         "_FILE")
    name = _plain_name(path, what, "_FILE_NAME", _req(name, "_FILE_NAME"))
    size = int(_req(size, "_FILE_SIZE"))
    int(_req(rows, "_ROW_COUNT"))
    level = int(_req(level, "_LEVEL"))
    int(_req(schema_id, "_SCHEMA_ID"))
    int(_opt(min_seq) or 0), int(_opt(max_seq) or 0)
    extra = _extra_files(path, what, _opt(extra))
    created = None if created is None or created is MISSING else int(created)
    return (kind, partition, bucket, name, size, level, extra, created, _opt(index), _opt(source), _opt(external))


def decode_manifest(item: tuple[str, bytes]) -> list[tuple]:
    """The entries of the manifest ``item`` = (path, bytes) as ``ManifestEntry`` takes them: ``(kind,
    partition, bucket, *file)``, ``file`` being ``DataFileMeta``'s fields in order. A top-level function of
    one picklable item, as ``engine.decode_pool.map_ordered`` maps."""
    path, data = item
    out = []
    for rec in _projected(path, data, _ENTRY_FIELDS):
        _check_version(path, _opt(rec[0]), (2,), "manifest entry")
        try:
            out.append(_entry(path, rec))
        except CorruptMetadata:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadata(path, f"malformed manifest entry: {e!r}") from e
    return out


def manifest_entries(rows: list[tuple]) -> list[ManifestEntry]:
    """The entries of ``decode_manifest``'s rows (built where they are used, e.g. after a process pool)."""
    return list(map(row_entry, rows))


def row_entry(row: tuple) -> ManifestEntry:
    """The entry of one of ``decode_manifest``'s rows."""
    return ManifestEntry(row[0], row[1], row[2], DataFileMeta(*row[3:]))


_FILE_FIELDS = tuple(f.name for f in fields(DataFileMeta))
# where a row of ``decode_manifest`` holds what an entry's path is made of
ROW_KIND, ROW_PARTITION, ROW_BUCKET = 0, 1, 2
ROW_FILE_NAME, ROW_FILE_SIZE, ROW_EXTRA_FILES, ROW_FILE_SOURCE, ROW_EXTERNAL_PATH = (
    3 + _FILE_FIELDS.index(name) for name in ("file_name", "file_size", "extra_files", "file_source", "external_path"))


def entry_rows(entries: Sequence[ManifestEntry]) -> list[tuple]:
    """``decode_manifest``'s rows of ``entries``: ``row_entry`` undone."""
    return [(e.kind, e.partition, e.bucket, *(getattr(e.file, n) for n in _FILE_FIELDS)) for e in entries]


def parse_manifest(path: str, data: bytes) -> list[ManifestEntry]:
    return manifest_entries(decode_manifest((path, data)))


def parse_manifest_names(path: str, data: bytes) -> list[str]:
    """The names of the files a manifest's entries name, ADD and DELETE alike, with their extra files,
    checked as ``parse_manifest`` checks them, without building the entries (a used set needs names only)."""
    out: list[str] = []
    for version, f in _projected(path, data, _NAME_FIELDS):
        _check_version(path, _opt(version), (2,), "manifest entry")
        try:
            name, extra = _req(f, "_FILE")
            out.append(_plain_name(path, "manifest entry", "_FILE_NAME", _req(name, "_FILE_NAME")))
            out.extend(_extra_files(path, "manifest entry", _opt(extra)))
        except (KeyError, TypeError) as e:
            raise CorruptMetadata(path, f"malformed manifest entry: {e!r}") from e
    return out


def decode_manifest_names(item: tuple[str, bytes]) -> list[str]:
    """``parse_manifest_names`` of ``item`` = (path, bytes): a top-level function, as ``map_ordered`` maps."""
    return parse_manifest_names(*item)


def parse_index_manifest(path: str, data: bytes) -> list[IndexManifestEntry]:
    out = []
    for rec in _records(path, data):
        _check_version(path, rec.get("_VERSION"), (1,), "index manifest entry")
        try:
            ranges = rec.get("_DELETIONS_VECTORS_RANGES")
            dv = None
            if ranges is not None:
                dv = tuple(
                    DeletionVectorRange(r["f0"], int(r["f1"]), int(r["f2"]), r.get("_CARDINALITY")) for r in ranges
                )
            out.append(
                IndexManifestEntry(
                    kind=_kind(path, rec["_KIND"]),
                    partition=bytes(rec["_PARTITION"]),
                    bucket=int(rec["_BUCKET"]),
                    index_file=IndexFileMeta(
                        index_type=rec["_INDEX_TYPE"],
                        file_name=_plain_name(path, "index manifest entry", "_FILE_NAME", rec["_FILE_NAME"]),
                        file_size=int(rec["_FILE_SIZE"]),
                        row_count=int(rec["_ROW_COUNT"]),
                        dv_ranges=dv,
                        external_path=rec.get("_EXTERNAL_PATH"),
                    ),
                )
            )
        except CorruptMetadata:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadata(path, f"malformed index manifest entry: {e!r}") from e
    return out
