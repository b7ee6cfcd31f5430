"""The pypaimon reference tables are real: check what pypaimon 2.1.0 put on disk.

Observed pypaimon 2.1.0 behaviour that these tests pin (and lakesweep relies on):

* ``snapshot/snapshot-N`` is written via a hidden temp file
  ``snapshot/.snapshot-N.<uuid>.tmp`` + rename (``try_to_write_atomic``); its
  JSON has ``"version": 3`` and omits null fields.  ``LATEST`` is written the
  same way on the first commit only: later the rename onto the existing
  ``LATEST`` fails, the temp file is deleted and ``LATEST`` is rewritten in
  place.  ``EARLIEST`` is never written, and snapshots are never expired on
  commit (no expire step in pypaimon's commit path).
* tags (``tag/tag-<name>``: the plain snapshot JSON) and consumers
  (``consumer/consumer-<id>``: ``{"nextSnapshot": N}``) are written in place.
* no stray ``.tmp`` or other hidden files are left in any directory.
* manifests and manifest lists are Avro object container files, codec
  ``zstandard`` (``manifest.compression`` default ``zstd``); data files are
  Parquet with ZSTD.  pypaimon never merges manifests: each base manifest list
  is the previous base + previous delta.
* partition directories (``canonical_partition=True`` path, the one the writer
  uses) follow Java's legacy naming: DATE as epoch days, BOOLEAN lower case,
  NULL and empty/blank strings as ``__DEFAULT_PARTITION__``, and Java's
  ``PartitionPathUtils`` escaping (``%XX`` upper-case hex for ``"#%'*/:=?\\{}[]^``,
  control chars and DEL; space and non-ASCII are kept).

pypaimon's *default* ``FileStorePathFactory.relative_bucket_path``
(``canonical_partition=False``) still renders ``str(value)`` with no escaping and no
legacy names (``p_date=2024-01-01``, ``p_bool=True``, ``p_str=a b/c:d=e%``), which is
not where the files are; ``test_t22_default_path_helper_differs`` pins that difference.
"""

from __future__ import annotations

import datetime
import json
import os
import re

import pyarrow.parquet as pq
from pypaimon import CatalogFactory

from tests.support.pypaimon_tables import (
    DEMO_OVERWRITE_SNAPSHOT,
    DEMO_TAG,
    DEMO_TAG_SNAPSHOT,
    KIND_APPEND,
    KIND_PRIMARY_KEY,
    TYPED_PARTITION_KEYS,
    write_append_table,
    write_demo_table,
    write_pk_table,
    write_typed_partition_table,
)

# Exact partition directories pypaimon 2.1.0 wrote for TYPED_ROWS (relative to the
# table root).  The engine's Java-exact rendering is compared against these.
TYPED_PARTITION_DIRS = {
    1: "p_int=7/p_date=19723/p_big=1234567890123/p_bool=true/p_str=a b%2Fc%3Ad%3De%25",
    2: "p_int=-3/p_date=-1/p_big=-1/p_bool=false/p_str=plain",
    3: "p_int=__DEFAULT_PARTITION__/p_date=__DEFAULT_PARTITION__/p_big=__DEFAULT_PARTITION__"
       "/p_bool=__DEFAULT_PARTITION__/p_str=__DEFAULT_PARTITION__",
    4: "p_int=0/p_date=19723/p_big=0/p_bool=true/p_str=__DEFAULT_PARTITION__",
    5: "p_int=1/p_date=19723/p_big=0/p_bool=true/p_str=\u00fc%23%3F%2A%5B%5D%7B%7D%5E%27%22%5Cx",
}


# --------------------------------------------------------------------------- helpers


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _snapshot_json(table_path: str, snapshot_id: int) -> dict:
    return json.loads(_read(os.path.join(table_path, "snapshot", f"snapshot-{snapshot_id}")))


def _table(wt):
    warehouse = os.path.dirname(os.path.dirname(wt.path))
    name = os.path.basename(wt.path)
    return CatalogFactory.create({"warehouse": warehouse}).get_table(f"db.{name}")


def _rows(table, options=None):
    if options:
        table = table.copy(options)
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()


def _live_files(table, snapshot_id):
    rb = table.copy({"scan.snapshot-id": str(snapshot_id)}).new_read_builder()
    return {f.file_name for s in rb.new_scan().plan().splits() for f in s.files}


def _by_id(rows):
    return sorted(rows, key=lambda r: (str(r.get("dt")), r["id"]))


def _all_files(root):
    for dirpath, _dirnames, filenames in os.walk(root):
        for f in filenames:
            yield os.path.relpath(os.path.join(dirpath, f), root)


def _data_files(table_path):
    return {os.path.basename(p) for p in _all_files(table_path) if p.endswith(".parquet")}


def _zigzag(buf, pos):
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def _avro_header(path):
    """Metadata map of an Avro object container file (stdlib-only parser)."""
    with open(path, "rb") as fh:
        buf = fh.read(64 * 1024)
    assert buf[:4] == b"Obj\x01", path
    pos, meta = 4, {}
    while True:
        count, pos = _zigzag(buf, pos)
        if count == 0:
            return meta
        if count < 0:
            count = -count
            _size, pos = _zigzag(buf, pos)
        for _ in range(count):
            n, pos = _zigzag(buf, pos)
            key = buf[pos:pos + n].decode()
            pos += n
            n, pos = _zigzag(buf, pos)
            meta[key] = buf[pos:pos + n]
            pos += n


def _assert_common_layout(wt):
    snap_dir = os.path.join(wt.path, "snapshot")
    assert wt.snapshots == list(range(1, wt.latest + 1))  # nothing expired
    for sid in wt.snapshots:
        assert os.path.isfile(os.path.join(snap_dir, f"snapshot-{sid}"))
        snap = _snapshot_json(wt.path, sid)
        assert snap["version"] == 3
        assert snap["id"] == sid
        for key in ("baseManifestList", "deltaManifestList"):
            assert os.path.isfile(os.path.join(wt.path, "manifest", snap[key]))
    assert sorted(os.listdir(snap_dir)) == sorted(["LATEST"] + [f"snapshot-{i}" for i in wt.snapshots])
    assert _read(os.path.join(snap_dir, "LATEST")) == str(wt.latest)
    assert not os.path.exists(os.path.join(snap_dir, "EARLIEST"))
    for name, sid in wt.tags.items():
        tag = json.loads(_read(os.path.join(wt.path, "tag", f"tag-{name}")))
        assert tag == _snapshot_json(wt.path, sid)  # a tag is the plain snapshot JSON
    for cid, nxt in wt.consumers.items():
        assert json.loads(_read(os.path.join(wt.path, "consumer", f"consumer-{cid}"))) == {"nextSnapshot": nxt}
    stray = [p for p in _all_files(wt.path)
             if os.path.basename(p).startswith(".") or p.endswith(".tmp")]
    assert stray == []
    schema = json.loads(_read(os.path.join(wt.path, "schema", "schema-0")))
    assert schema["partitionKeys"] == wt.partition_keys
    assert schema["primaryKeys"] == wt.primary_keys


# --------------------------------------------------------------------------- tests


def test_append_table(tmp_path):
    wt = write_append_table(str(tmp_path), commits=5, seed=0)
    assert wt.kind == KIND_APPEND
    assert wt.path == str(tmp_path / "db.db" / "append_t")
    assert wt.snapshots == [1, 2, 3, 4, 5, 6]
    assert wt.tags == {"t_early": 2, "t_late": 5}
    assert wt.consumers == {"c1": 4}
    assert (wt.partition_keys, wt.primary_keys) == (["dt"], [])
    _assert_common_layout(wt)

    kinds = [_snapshot_json(wt.path, i)["commitKind"] for i in wt.snapshots]
    assert kinds == ["APPEND"] * 5 + ["OVERWRITE"]
    assert _snapshot_json(wt.path, 6)["totalRecordCount"] == len(wt.expected_rows)
    assert _snapshot_json(wt.path, 6)["deltaRecordCount"] < 0  # the overwrite dropped rows

    part_dirs = sorted(d for d in os.listdir(wt.path) if d.startswith("dt="))
    assert part_dirs == ["dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-03"]
    for d in part_dirs:
        assert os.listdir(os.path.join(wt.path, d)) == ["bucket-0"]  # unaware-bucket append

    table = _table(wt)
    got = _rows(table)
    assert _by_id(got) == _by_id(wt.expected_rows)
    assert {r["name"] for r in got if r["dt"] == "2024-01-01"} == {"ow0", "ow1"}  # overwrite applied
    # the tag still sees the pre-overwrite rows of dt=2024-01-01
    early = _rows(table, {"scan.tag-name": "t_early"})
    assert not any(r["name"].startswith("ow") for r in early)
    assert len(early) == _snapshot_json(wt.path, 2)["totalRecordCount"]

    # file formats: Avro+zstandard manifests / manifest lists, Parquet+ZSTD data
    for f in os.listdir(os.path.join(wt.path, "manifest")):
        meta = _avro_header(os.path.join(wt.path, "manifest", f))
        assert meta["avro.codec"] == b"zstandard"
        record = json.loads(meta["avro.schema"])["name"]
        assert record == ("ManifestFileMeta" if f.startswith("manifest-list-") else "ManifestEntry")
    some = next(p for p in _all_files(wt.path) if p.endswith(".parquet"))
    col = pq.ParquetFile(os.path.join(wt.path, some)).metadata.row_group(0).column(0)
    assert col.compression == "ZSTD"
    assert re.fullmatch(r"dt=[^/]+/bucket-0/data-[0-9a-f-]{36}-0\.parquet", some)


def test_pk_table(tmp_path):
    wt = write_pk_table(str(tmp_path), commits=5, seed=0, bucket=2)
    assert wt.kind == KIND_PRIMARY_KEY
    assert wt.snapshots == [1, 2, 3, 4, 5]
    assert wt.tags == {"pk_tag": 2}
    assert wt.consumers == {}
    assert (wt.partition_keys, wt.primary_keys) == (["dt"], ["dt", "id"])
    _assert_common_layout(wt)
    assert {_snapshot_json(wt.path, i)["commitKind"] for i in wt.snapshots} == {"APPEND"}

    schema = json.loads(_read(os.path.join(wt.path, "schema", "schema-0")))
    assert schema["options"] == {"bucket": "2", "rowkind.field": "op"}

    # bucket dirs under each partition dir; first commit spreads 6 keys over both buckets
    for dt in ("2024-01-01", "2024-01-02"):
        assert sorted(os.listdir(os.path.join(wt.path, f"dt={dt}"))) == ["bucket-0", "bucket-1"]
    for d in os.listdir(wt.path):
        if d.startswith("dt="):
            assert set(os.listdir(os.path.join(wt.path, d))) <= {"bucket-0", "bucket-1"}

    # row kinds really are on disk (_VALUE_KIND: 0 +I, 2 +U, 3 -D)
    kinds = set()
    for p in _all_files(wt.path):
        if p.endswith(".parquet"):
            t = pq.read_table(os.path.join(wt.path, p), partitioning=None)
            assert t.column_names[:3] == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND"]
            kinds |= set(t.column("_VALUE_KIND").to_pylist())
    assert kinds == {0, 2, 3}

    got = _rows(_table(wt))
    assert _by_id(got) == _by_id(wt.expected_rows)
    assert any(r["op"] == "+U" for r in got)
    assert all(r["op"] != "-D" for r in got)


def test_typed_partition_table(tmp_path):
    wt = write_typed_partition_table(str(tmp_path))
    assert wt.snapshots == [1]
    assert (wt.tags, wt.consumers) == ({}, {})
    assert wt.partition_keys == TYPED_PARTITION_KEYS
    _assert_common_layout(wt)

    bucket_dirs = {os.path.dirname(os.path.dirname(p)) for p in _all_files(wt.path) if p.endswith(".parquet")}
    assert bucket_dirs == set(TYPED_PARTITION_DIRS.values())
    for rel in TYPED_PARTITION_DIRS.values():
        assert os.listdir(os.path.join(wt.path, rel)) == ["bucket-0"]

    # read back: NULL partition values come back NULL, "" comes back "" (only its dir is default)
    got = sorted(_rows(_table(wt)), key=lambda r: r["id"])
    assert got == sorted(wt.expected_rows, key=lambda r: r["id"])


def test_t22_default_path_helper_differs(tmp_path):
    """pypaimon's default relative_bucket_path != what its writer (and Java) produce."""
    wt = write_typed_partition_table(str(tmp_path))
    factory = _table(wt).path_factory()
    part = (7, datetime.date(2024, 1, 1), 1234567890123, True, "a b/c:d=e%")
    assert factory.relative_bucket_path(part, 0) == \
        "p_int=7/p_date=2024-01-01/p_big=1234567890123/p_bool=True/p_str=a b/c:d=e%/bucket-0"
    assert factory.relative_bucket_path(part, 0, canonical_partition=True) == TYPED_PARTITION_DIRS[1] + "/bucket-0"


def test_demo_table(tmp_path):
    wt = write_demo_table(str(tmp_path))
    assert wt.snapshots == list(range(1, 9))
    assert wt.tags == {DEMO_TAG: DEMO_TAG_SNAPSHOT}
    _assert_common_layout(wt)
    kinds = [_snapshot_json(wt.path, i)["commitKind"] for i in wt.snapshots]
    assert kinds == ["OVERWRITE" if i == DEMO_OVERWRITE_SNAPSHOT else "APPEND" for i in wt.snapshots]
    assert sorted(d for d in os.listdir(wt.path) if d.startswith("dt=")) == \
        ["dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-03"]

    table = _table(wt)
    assert _by_id(_rows(table)) == _by_id(wt.expected_rows)

    # retain-min 3 keeps snapshots 6..8: some data files become deletable, some only the tag keeps
    retained = set().union(*(_live_files(table, s) for s in (6, 7, 8)))
    tagged = _live_files(table, DEMO_TAG_SNAPSHOT)
    on_disk = _data_files(wt.path)
    assert retained | tagged <= on_disk
    deletable = on_disk - retained - tagged
    protected_by_tag = tagged - retained
    assert len(deletable) == 1        # dt=2024-01-01 file of snapshot 3
    assert len(protected_by_tag) == 2  # dt=2024-01-01 files of snapshots 1 and 2


def test_snapshot_written_via_temp_file(tmp_path, monkeypatch):
    from pypaimon.filesystem.local_file_io import LocalFileIO

    calls = []
    original = LocalFileIO.rename

    def recording_rename(self, src, dst):
        ok = original(self, src, dst)
        calls.append((os.path.basename(str(src)), os.path.basename(str(dst)), ok))
        return ok

    monkeypatch.setattr(LocalFileIO, "rename", recording_rename)
    wt = write_append_table(str(tmp_path), commits=3)
    snap_renames = [(s, d) for s, d, ok in calls if d.startswith("snapshot-") and ok]
    assert [d for _, d in snap_renames] == [f"snapshot-{i}" for i in wt.snapshots]
    for src, dst in snap_renames:
        assert re.fullmatch(rf"\.{dst}\.[0-9a-f-]{{36}}\.tmp", src)
    latest = [ok for _s, d, ok in calls if d == "LATEST"]
    assert latest == [True] + [False] * (len(wt.snapshots) - 1)  # then rewritten in place
    assert not [d for _s, d, _ok in calls if d.startswith(("tag-", "consumer-"))]


def test_pypaimon_never_expires_on_commit(tmp_path):
    opts = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
            "snapshot.time-retained": "1 ms"}
    wt = write_append_table(str(tmp_path), commits=4, options=opts)
    assert wt.snapshots == [1, 2, 3, 4, 5]
    assert not os.path.exists(os.path.join(wt.path, "snapshot", "EARLIEST"))
