"""Decoding Paimon's Avro manifest lists, manifests and index manifests (fastavro).

Fields are read by name from the file's own writer schema, so files of 0.9 (16 DataFileMeta fields)
and later versions (more trailing fields) read alike. Anything that does not decode raises
``CorruptMetadata`` naming the file, and so does a file name (of a manifest, a data or extra file, an
index file) that is not a plain file name: lakesweep joins these names to directories it knows.
"""

from __future__ import annotations

import datetime as _dt
import io

import fastavro

from lakesweep.engine.errors import CorruptMetadata
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


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_ONE_MS = _dt.timedelta(milliseconds=1)


def _millis(v) -> int | None:
    if v is None:
        return None
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        return (v - _EPOCH) // _ONE_MS
    return int(v)


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


def _check_version(path: str, rec: dict, allowed: tuple[int, ...], what: str) -> None:
    v = rec.get("_VERSION")
    if v not in allowed:
        raise CorruptMetadata(path, f"{what} version {v!r} is not supported (expected {allowed})")


def parse_manifest_list(path: str, data: bytes) -> list[ManifestFileMeta]:
    out = []
    for rec in _records(path, data):
        _check_version(path, rec, (2,), "manifest list")
        try:
            out.append(
                ManifestFileMeta(
                    file_name=_plain_name(path, "manifest list entry", "_FILE_NAME", rec["_FILE_NAME"]),
                    file_size=int(rec["_FILE_SIZE"]),
                    num_added_files=int(rec["_NUM_ADDED_FILES"]),
                    num_deleted_files=int(rec["_NUM_DELETED_FILES"]),
                    schema_id=int(rec["_SCHEMA_ID"]),
                    version=rec["_VERSION"],
                )
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadata(path, f"malformed manifest list entry: {e!r}") from e
    return out


def _data_file(path: str, f: dict) -> DataFileMeta:
    what = "manifest entry"
    return DataFileMeta(
        file_name=_plain_name(path, what, "_FILE_NAME", f["_FILE_NAME"]),
        file_size=int(f["_FILE_SIZE"]),
        row_count=int(f["_ROW_COUNT"]),
        level=int(f["_LEVEL"]),
        schema_id=int(f["_SCHEMA_ID"]),
        min_sequence_number=int(f.get("_MIN_SEQUENCE_NUMBER") or 0),
        max_sequence_number=int(f.get("_MAX_SEQUENCE_NUMBER") or 0),
        extra_files=_extra_files(path, what, f.get("_EXTRA_FILES")),
        creation_time_ms=_millis(f.get("_CREATION_TIME")),
        delete_row_count=f.get("_DELETE_ROW_COUNT"),
        embedded_index=f.get("_EMBEDDED_FILE_INDEX"),
        file_source=f.get("_FILE_SOURCE"),
        external_path=f.get("_EXTERNAL_PATH"),
        first_row_id=f.get("_FIRST_ROW_ID"),
    )


def _extra_files(path: str, what: str, names) -> tuple[str, ...]:
    if not names:  # most files have none
        return ()
    return tuple(_plain_name(path, what, "_EXTRA_FILES", x) for x in names)


def parse_manifest(path: str, data: bytes) -> list[ManifestEntry]:
    out = []
    for rec in _records(path, data):
        _check_version(path, rec, (2,), "manifest entry")
        try:
            out.append(
                ManifestEntry(
                    kind=_kind(path, rec["_KIND"]),
                    partition=bytes(rec["_PARTITION"]),
                    bucket=int(rec["_BUCKET"]),
                    total_buckets=int(rec["_TOTAL_BUCKETS"]),
                    file=_data_file(path, rec["_FILE"]),
                )
            )
        except CorruptMetadata:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadata(path, f"malformed manifest entry: {e!r}") from e
    return out


def parse_manifest_names(path: str, data: bytes) -> list[str]:
    """The names of the files a manifest's entries name, ADD and DELETE alike, with their extra files,
    checked as ``parse_manifest`` checks them, without building the entries (a used set needs names only)."""
    out: list[str] = []
    for rec in _records(path, data):
        _check_version(path, rec, (2,), "manifest entry")
        try:
            f = rec["_FILE"]
            out.append(_plain_name(path, "manifest entry", "_FILE_NAME", f["_FILE_NAME"]))
            out.extend(_extra_files(path, "manifest entry", f.get("_EXTRA_FILES")))
        except (KeyError, TypeError) as e:
            raise CorruptMetadata(path, f"malformed manifest entry: {e!r}") from e
    return out


def parse_index_manifest(path: str, data: bytes) -> list[IndexManifestEntry]:
    out = []
    for rec in _records(path, data):
        _check_version(path, rec, (1,), "index manifest entry")
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
