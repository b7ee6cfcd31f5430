"""A reference decoder of Paimon manifests and manifest lists: whole records with fastavro, then the values
lakesweep keeps, as ``engine.paimon.manifests``'s ``decode_*`` functions return them. It is the decoding
lakesweep did before it read only the fields it needs; tests compare the two on engine-written tables."""

from __future__ import annotations

import datetime as dt
import io

import fastavro

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _records(data: bytes) -> list[dict]:
    return list(fastavro.reader(io.BytesIO(data)))


def _millis(v) -> int | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return (v - _EPOCH) // dt.timedelta(milliseconds=1)
    return int(v)


def manifest_list(data: bytes) -> list[tuple[str, int]]:
    out = []
    for rec in _records(data):
        assert rec["_VERSION"] == 2
        for key in ("_NUM_ADDED_FILES", "_NUM_DELETED_FILES", "_SCHEMA_ID"):
            int(rec[key])
        out.append((rec["_FILE_NAME"], int(rec["_FILE_SIZE"])))
    return out


def manifest(data: bytes) -> list[tuple]:
    out = []
    for rec in _records(data):
        assert rec["_VERSION"] == 2
        f = rec["_FILE"]
        int(rec["_TOTAL_BUCKETS"]), int(f["_ROW_COUNT"]), int(f["_SCHEMA_ID"])
        int(f.get("_MIN_SEQUENCE_NUMBER") or 0), int(f.get("_MAX_SEQUENCE_NUMBER") or 0)
        out.append((rec["_KIND"], bytes(rec["_PARTITION"]), int(rec["_BUCKET"]), f["_FILE_NAME"], int(f["_FILE_SIZE"]),
                    int(f["_LEVEL"]), tuple(f.get("_EXTRA_FILES") or ()), _millis(f.get("_CREATION_TIME")),
                    f.get("_EMBEDDED_FILE_INDEX"), f.get("_FILE_SOURCE"), f.get("_EXTERNAL_PATH")))
    return out


def manifest_names(data: bytes) -> list[str]:
    out = []
    for rec in _records(data):
        out.append(rec["_FILE"]["_FILE_NAME"])
        out.extend(rec["_FILE"].get("_EXTRA_FILES") or ())
    return out


def data_file_fields(data: bytes) -> list[str]:
    """The names of the ``_FILE`` record's fields in a manifest's writer schema."""
    schema = fastavro.reader(io.BytesIO(data)).writer_schema
    (f,) = [f for f in schema["fields"] if f["name"] == "_FILE"]
    return [x["name"] for x in f["type"]["fields"]]
