"""Reading tables pypaimon wrote, Java's hint semantics, and failing closed on damaged metadata."""

import os
import shutil

import pytest

from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, UnsupportedTable
from lakesweep.engine.paimon.inspect import inspect_table
from lakesweep.engine.paimon.table import PaimonTable, open_table
from tests.support import pypaimon_tables as pt


def test_reads_every_snapshot_pypaimon_wrote(append_table):
    t = open_table(append_table.path)
    assert t.list_snapshot_ids() == append_table.snapshots
    assert t.earliest_latest() == (min(append_table.snapshots), max(append_table.snapshots))
    assert {tag.name: tag.snapshot.id for tag in t.tags()} == append_table.tags
    assert {c.consumer_id: c.next_snapshot for c in t.consumers()} == append_table.consumers
    assert t.schema.partition_keys == tuple(append_table.partition_keys)


def test_live_files_exist_on_disk_for_every_snapshot(pk_table):
    t = open_table(pk_table.path)
    for sid in t.list_snapshot_ids():
        live = t.live_entries(t.snapshot(sid))
        assert live, f"snapshot {sid} has no live files"
        for e in live:
            p = t.paths.data_file(e.partition, e.bucket, e.file)
            assert os.path.isfile(p), p
            assert os.path.getsize(p) == e.file.file_size


def test_partition_paths_match_the_directories_pypaimon_wrote(tmp_path):
    w = pt.write_typed_partition_table(str(tmp_path / "wh"))
    t = open_table(w.path)
    computed = set()
    for e in t.live_entries(t.snapshot(t.earliest_latest()[1])):
        computed.add(t.paths.relative(t.paths.bucket_dir(e.partition, e.bucket)))
    on_disk = set()
    for dirpath, dirnames, _ in os.walk(w.path):
        for d in dirnames:
            if d.startswith("bucket-"):
                on_disk.add(os.path.relpath(os.path.join(dirpath, d), w.path))
    assert computed == on_disk
    assert "p_int=7/p_date=19723/p_big=1234567890123/p_bool=true/p_str=a b%2Fc%3Ad%3De%25/bucket-0" in computed


def test_latest_hint_may_lag_but_never_lead(append_table):
    snap_dir = os.path.join(append_table.path, "snapshot")
    with open(os.path.join(snap_dir, "LATEST"), "w") as f:
        f.write("2")  # lags: snapshot-3 exists, so the listing wins
    assert PaimonTable(append_table.path).earliest_latest()[1] == append_table.latest


def test_earliest_hint_is_trusted_when_its_snapshot_exists(append_table):
    snap_dir = os.path.join(append_table.path, "snapshot")
    with open(os.path.join(snap_dir, "EARLIEST"), "w") as f:
        f.write("3")
    assert PaimonTable(append_table.path).earliest_latest()[0] == 3
    with open(os.path.join(snap_dir, "EARLIEST"), "w") as f:
        f.write("99")  # points at nothing: fall back to the listing
    assert PaimonTable(append_table.path).earliest_latest()[0] == 1


def test_stray_non_numeric_snapshot_names_are_ignored(append_table):
    open(os.path.join(append_table.path, "snapshot", "snapshot-1abc.tmp"), "w").close()
    assert PaimonTable(append_table.path).list_snapshot_ids() == append_table.snapshots


def test_malformed_hint_is_refused_not_guessed(append_table):
    path = os.path.join(append_table.path, "snapshot", "LATEST")
    with open(path, "w") as f:
        f.write("garbage")
    with pytest.raises(CorruptMetadata, match=f"{path}: hint file holds 'garbage'"):
        PaimonTable(append_table.path).earliest_latest()


def test_a_hint_caught_while_a_writer_rewrites_it_is_read_again(append_table, monkeypatch):
    table = PaimonTable(append_table.path)
    path = os.path.join(append_table.path, "snapshot", "LATEST")
    real = table.fileio.read_bytes
    reads = []

    def rewriting(location):  # the writer's rewrite in place: empty at the first read, whole at the second
        if location == path:
            reads.append(location)
            if len(reads) == 1:
                return b""
        return real(location)

    monkeypatch.setattr(table.fileio, "read_bytes", rewriting)
    assert table.read_hint("LATEST") == append_table.snapshots[-1] and len(reads) == 2


def test_a_hint_that_stays_unreadable_is_refused_after_three_reads(append_table, monkeypatch):
    table = PaimonTable(append_table.path)
    path = os.path.join(append_table.path, "snapshot", "LATEST")
    reads = []
    monkeypatch.setattr(table.fileio, "read_bytes", lambda location: reads.append(location) or b"")
    with pytest.raises(CorruptMetadata, match=f"{path}: hint file holds '', not a snapshot id"):
        table.read_hint("LATEST")
    assert reads == [path] * 3


def test_malformed_snapshot_json_names_the_file(append_table):
    path = os.path.join(append_table.path, "snapshot", "snapshot-2")
    with open(path, "w") as f:
        f.write('{"id": 2, "schemaId": 0')
    with pytest.raises(CorruptMetadata, match=f"{path}: malformed snapshot JSON"):
        PaimonTable(append_table.path).snapshot(2)


def test_snapshot_json_missing_fields_names_the_file(append_table):
    path = os.path.join(append_table.path, "snapshot", "snapshot-2")
    with open(path, "w") as f:
        f.write('{"id": 2}')
    with pytest.raises(CorruptMetadata, match=f"{path}: malformed snapshot: field 'schemaId' is missing"):
        PaimonTable(append_table.path).snapshot(2)


def test_truncated_avro_manifest_names_the_file(append_table):
    t = PaimonTable(append_table.path)
    name = t.manifest_list(t.snapshot(1).delta_manifest_list)[0].file_name
    path = os.path.join(append_table.path, "manifest", name)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(CorruptMetadata, match=f"{path}: cannot decode Avro"):
        PaimonTable(append_table.path).manifest(name)


def test_non_avro_manifest_names_the_file(append_table):
    t = PaimonTable(append_table.path)
    name = t.snapshot(1).delta_manifest_list
    path = os.path.join(append_table.path, "manifest", name)
    with open(path, "wb") as f:
        f.write(b"PAR1 not avro")
    with pytest.raises(CorruptMetadata, match=f"{path}: not an Avro object container file"):
        PaimonTable(append_table.path).manifest_list(name)


def test_missing_manifest_is_not_found_not_empty(append_table):
    t = PaimonTable(append_table.path)
    name = t.manifest_list(t.snapshot(2).delta_manifest_list)[0].file_name
    os.remove(os.path.join(append_table.path, "manifest", name))
    with pytest.raises(MetadataNotFound, match=f"manifest/{name}: manifest not found"):
        PaimonTable(append_table.path).live_entries(t.snapshot(2))


def test_missing_schema_means_not_a_table(append_table):
    shutil.rmtree(os.path.join(append_table.path, "schema"))
    with pytest.raises(MetadataNotFound, match="schema .is this a Paimon table"):
        open_table(append_table.path)


def test_corrupt_consumer_file_raises(append_table):
    path = os.path.join(append_table.path, "consumer", "consumer-c1")
    with open(path, "w") as f:
        f.write("")
    with pytest.raises(CorruptMetadata, match=f"{path}: malformed consumer JSON"):
        PaimonTable(append_table.path).consumers()


def test_corrupt_tag_file_raises(append_table):
    path = os.path.join(append_table.path, "tag", "tag-t_early")
    with open(path, "w") as f:
        f.write("{}")
    with pytest.raises(CorruptMetadata, match=f"{path}: malformed tag"):
        PaimonTable(append_table.path).tags()


def test_non_avro_manifest_format_is_refused(tmp_path):
    w = pt.write_append_table(str(tmp_path / "wh"), options={"manifest.format": "orc"})
    with pytest.raises(UnsupportedTable, match="manifest.format=orc"):
        open_table(w.path)


def test_inspect_summarises_live_and_reclaimable_files(append_table):
    info = inspect_table(open_table(append_table.path))
    assert [s["id"] for s in info["snapshots"]] == append_table.snapshots
    assert info["latest"] == append_table.latest
    assert info["tags"] == sorted(
        [{"name": n, "snapshot_id": i} for n, i in append_table.tags.items()], key=lambda x: x["name"]
    )
    # The overwrite of one partition leaves files only older snapshots hold.
    assert info["older_only"]["files"] > 0 and info["older_only"]["bytes"] > 0
    assert info["latest_live"]["files"] > 0
    assert info["problems"] == []
