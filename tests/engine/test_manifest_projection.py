"""Decoding only the fields lakesweep reads gives exactly what decoding whole records gave.

On tables Paimon wrote (Java 0.9, current Paimon's partition expiry commit, pypaimon; primary-key tables
with deletion vectors and index manifests, append tables with file indexes in the manifest and beside the
data files), every manifest list and manifest decodes field by field to the values of the whole-record
reference decoder (tests/support/paimon_manifest_reference.py). Files missing a field or typing it
differently fail as before, naming the file.
"""

from __future__ import annotations

import datetime as dt
import io
import pickle
import shutil
from pathlib import Path

import fastavro
import pytest

from lakesweep.engine.errors import CorruptMetadata
from lakesweep.engine.paimon.manifests import decode_manifest, decode_manifest_list, parse_manifest_names
from tests.support import paimon_manifest_reference as reference
from tests.support import pypaimon_tables as pt
from tests.support.avro_metadata import metadata_files

JAVA_TABLES = {
    "pk-dv": ("pk", 11, {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"}),
    "append-embedded-index": ("append", 5, {"file-index.bloom-filter.columns": "v",
                                            "file-index.in-manifest-threshold": "1 mb"}),
    "append-index-files": ("append", 6, {"file-index.bloom-filter.columns": "v",
                                         "file-index.in-manifest-threshold": "1 b"}),
}


def _compare(root: Path) -> dict[str, int]:
    """Every manifest list and manifest of the table decodes to the reference's values; the record counts."""
    files = metadata_files(root)
    counts = {"manifest-list": 0, "manifest": 0}
    for p in files["manifest-list"]:
        data = p.read_bytes()
        assert decode_manifest_list((str(p), data)) == reference.manifest_list(data), p
        counts["manifest-list"] += len(reference.manifest_list(data))
    for p in files["manifest"]:
        data = p.read_bytes()
        assert decode_manifest((str(p), data)) == reference.manifest(data), p
        assert parse_manifest_names(str(p), data) == reference.manifest_names(data), p
        counts["manifest"] += len(reference.manifest(data))
    return counts


def _entries(root: Path):
    for p in metadata_files(root)["manifest"]:
        yield from reference.manifest(p.read_bytes())


@pytest.mark.java
@pytest.mark.parametrize("name", sorted(JAVA_TABLES))
def test_paimon_0_9_tables_decode_as_whole_records(paimon_java, tmp_path, name):
    kind, seed, options = JAVA_TABLES[name]
    root = tmp_path / "t"
    paimon_java.generate(root, seed=seed, kind=kind, steps=16, options=options, ops={"consumer": 0})
    counts = _compare(root)
    assert counts["manifest-list"] > 0 and counts["manifest"] > 0
    some = next(iter(metadata_files(root)["manifest"])).read_bytes()
    assert len(reference.data_file_fields(some)) == 16  # 0.9's DataFileMeta
    entries = list(_entries(root))
    assert {e[0] for e in entries} == {0, 1}  # ADD and DELETE
    if name == "pk-dv":
        assert metadata_files(root)["index-manifest"]
        assert {e[9] for e in entries} == {0, 1}  # APPEND and COMPACT sources
    if name == "append-embedded-index":
        assert any(e[8] is not None for e in entries)
    if name == "append-index-files":
        assert any(e[6] for e in entries)


@pytest.mark.java
def test_current_paimon_commit_decodes_as_whole_records(paimon_java, tmp_path):
    from tests.support.paimon_current import CurrentPaimon

    root = tmp_path / "t"
    kind, seed, options = JAVA_TABLES["pk-dv"]
    paimon_java.generate(root, seed=seed, kind=kind, steps=16, options=options, ops={"consumer": 0})
    before = {p.name for files in metadata_files(root).values() for p in files}
    out = CurrentPaimon().expire_partitions(root, expiration_time="1 d", now="2100-01-01T00:00")
    assert out["expired"] and out["snapshots"]
    written = [p for p in metadata_files(root)["manifest"] if p.name not in before]
    assert written, "current Paimon's partition expiry wrote no manifest"
    fields = reference.data_file_fields(written[0].read_bytes())
    assert len(fields) > 16 and "_EXTERNAL_PATH" in fields  # a later DataFileMeta
    _compare(root)


@pytest.mark.parametrize("writer", [pt.write_append_table, pt.write_pk_table], ids=["append", "pk"])
def test_pypaimon_tables_decode_as_whole_records(written_once, writer):
    table = written_once(writer)
    counts = _compare(Path(table.path))
    assert counts["manifest-list"] > 0 and counts["manifest"] > 0


def test_the_decode_pickles_by_reference_and_its_values_round_trip(written_once):
    root = Path(written_once(pt.write_append_table).path)
    p = metadata_files(root)["manifest"][0]
    rows = decode_manifest((str(p), p.read_bytes()))
    assert pickle.loads(pickle.dumps(decode_manifest)) is decode_manifest
    assert pickle.loads(pickle.dumps(rows)) == rows


def _rewritten(src: Path, dst: Path, field: str, new_type=None, value=None) -> Path:
    """``src`` with ``_FILE.<field>`` dropped (``new_type`` None) or retyped and set to ``value``."""
    reader = fastavro.reader(io.BytesIO(src.read_bytes()))
    schema, records = reader.writer_schema, list(reader)
    (file_field,) = [f for f in schema["fields"] if f["name"] == "_FILE"]
    fields = file_field["type"]["fields"]
    i = [f["name"] for f in fields].index(field)
    if new_type is None:
        del fields[i]
    else:
        fields[i] = {"name": field, "type": new_type}
    for r in records:
        if new_type is None:
            del r["_FILE"][field]
        else:
            r["_FILE"][field] = value
    with open(dst, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), records, codec="null")
    return dst


def test_missing_and_retyped_fields_fail_as_whole_records_did(written_once, tmp_path):
    src = metadata_files(Path(written_once(pt.write_append_table).path))["manifest"][0]
    missing = _rewritten(src, tmp_path / "missing", "_ROW_COUNT")
    with pytest.raises(CorruptMetadata) as e:
        decode_manifest((str(missing), missing.read_bytes()))
    assert str(e.value) == f"{missing}: malformed manifest entry: KeyError('_ROW_COUNT')"

    null = _rewritten(src, tmp_path / "null", "_SCHEMA_ID", ["null", "long"], None)
    with pytest.raises(CorruptMetadata) as e:
        decode_manifest((str(null), null.read_bytes()))
    assert str(e.value) == (f"{null}: malformed manifest entry: TypeError(\"int() argument must be a string, "
                            "a bytes-like object or a real number, not 'NoneType'\")")

    text = _rewritten(src, tmp_path / "text", "_ROW_COUNT", "string", "12")  # int("12") passes, as before
    assert decode_manifest((str(text), text.read_bytes())) == reference.manifest(text.read_bytes())

    micros = _rewritten(src, tmp_path / "micros", "_CREATION_TIME",  # another timestamp unit: the same millis
                        ["null", {"type": "long", "logicalType": "timestamp-micros"}],
                        dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc))
    rows = decode_manifest((str(micros), micros.read_bytes()))
    assert rows == reference.manifest(micros.read_bytes()) and rows[0][7] == 1714979289123

    no_seq = _rewritten(src, tmp_path / "no-seq", "_MIN_SEQUENCE_NUMBER")  # optional: still reads
    assert decode_manifest((str(no_seq), no_seq.read_bytes())) == reference.manifest(no_seq.read_bytes())

    truncated = tmp_path / "truncated"
    shutil.copy(missing, truncated)
    truncated.write_bytes(missing.read_bytes()[:-30])
    with pytest.raises(CorruptMetadata, match=f"^{truncated}: cannot decode Avro: "):
        decode_manifest((str(truncated), truncated.read_bytes()))
