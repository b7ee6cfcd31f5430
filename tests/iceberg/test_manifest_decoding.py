"""The manifest decoder (``engine.iceberg.table.decode_manifest`` and ``decode_manifest_list``, in worker
processes or not) gives exactly the values a whole-record decode gives (``tests.support.iceberg_reference_decode``)
on tables pyiceberg wrote: format 1 and 2, several partition specs and fields, null partition values, position
and equality deletes, statistics; and plans are byte for byte the same with the process pool as without."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import time
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, DecimalType, LongType, NestedField, StringType, TimestampType

from lakesweep.engine.decode_pool import ENV
from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from tests.support import iceberg_reference_decode as reference
from tests.support import iceberg_tables as it
from tests.support.processes import LAKESWEEP

IDENT = f"{it.NAMESPACE}.t"
NULLS_SCHEMA = Schema(NestedField(1, "id", LongType(), required=False),
                      NestedField(2, "region", StringType(), required=False),
                      NestedField(3, "day", DateType(), required=False),
                      NestedField(4, "ts", TimestampType(), required=False),
                      NestedField(5, "price", DecimalType(9, 2), required=False))
NULLS_SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"),
                           PartitionField(3, 1001, IdentityTransform(), "day"),
                           PartitionField(4, 1002, IdentityTransform(), "ts"),
                           PartitionField(5, 1003, IdentityTransform(), "price"))


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "region": pa.array([None if i % 4 == 0 else ("us", "eu", "ap")[i % 3] for i in ids], pa.string()),
        "day": pa.array([None if i % 5 == 0 else dt.date(2024, 1, 1 + i % 3) for i in ids], pa.date32()),
        "ts": pa.array([None if i % 6 == 0 else dt.datetime(2024, 2, 1 + i % 2, 3) for i in ids], pa.timestamp("us")),
        "price": pa.array([None if i % 7 == 0 else Decimal(i % 2) + Decimal("0.50") for i in ids], pa.decimal128(9, 2)),
    })


def partitioned_with_nulls(catalog, ident: str, *, format_version: int) -> None:
    """Four partition fields (string, date, timestamp, decimal), each null in some files; a second
    spec (the id added as a fifth field), then a copy-on-write delete that leaves DELETED entries."""
    t = catalog.create_table(ident, schema=NULLS_SCHEMA, partition_spec=NULLS_SPEC,
                             properties={"format-version": str(format_version)})
    for i in range(3):
        t.append(_rows(i * 20, 20))
    with t.update_spec() as update:
        update.add_identity("id")
    t = catalog.load_table(ident)
    t.append(_rows(100, 20))
    t.delete("id < 10")


BUILDERS = {"churn": it.churn, "position": it.position_deletes, "equality": it.equality_deletes,
            "statistics": it.with_statistics,
            "nulls-v1": lambda c, i: partitioned_with_nulls(c, i, format_version=1),
            "nulls-v2": lambda c, i: partitioned_with_nulls(c, i, format_version=2)}


@pytest.fixture
def catalog(tmp_path, monkeypatch):
    for key, value in it.catalog_env(tmp_path / "lake").items():
        monkeypatch.setenv(key, value)
    return it.sql_catalog(tmp_path / "lake")


def assert_decoded_as_the_reference(table, view: IcebergTable) -> list:
    """Every snapshot's manifest list and every manifest, through ``view``, equal the reference; the
    entries, all of them."""
    entries = []
    for s in table.metadata.snapshots:
        refs = view.manifest_list(view.snapshots[s.snapshot_id])
        assert refs == reference.manifest_refs(table, s)
        for m, raw in zip(refs, s.manifests(table.io)):
            got = view.manifest_entries(m)
            assert got == reference.file_refs(table, raw.manifest_path), m.path
            entries.extend(got)
    return entries


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_manifests_decode_as_a_whole_record_decode_does_in_this_process_and_in_workers(catalog, name, monkeypatch):
    BUILDERS[name](catalog, IDENT)
    table = catalog.load_table(IDENT)
    monkeypatch.setenv(ENV, "1")
    entries = assert_decoded_as_the_reference(table, IcebergTable(it.CATALOG_NAME, IDENT))
    monkeypatch.setenv(ENV, "2")
    view = IcebergTable(it.CATALOG_NAME, IDENT)
    view.prefetch_snapshots(view.snapshots)
    assert len(view._cache.manifests) == len(reference.every_manifest(table))
    assert assert_decoded_as_the_reference(table, view) == entries
    # the table exercises what it is here for
    assert 1 in {f.status for f in entries} and all(f.path.startswith("/") for f in entries)
    if name in ("churn", "nulls-v1", "nulls-v2"):
        assert 2 in {f.status for f in entries}
    contents = {f.content for f in entries}
    if name.startswith("nulls"):
        assert table.metadata.format_version == int(name[-1]) and len(table.metadata.specs()) == 2
        partitions = {f.partition for f in entries}
        assert {p.count("/") for p in partitions} == {3, 4}
        assert any(p.startswith("null/") for p in partitions) and any("/null/" in p for p in partitions)
        assert any("2024-01-02" in p and "0.50" in p for p in partitions)
    if name in ("position", "equality"):
        assert contents == {0, {"position": 1, "equality": 2}[name]}


def _plan(kind: str, out, now_ms: int, processes: str, *flags: str, ident: str = IDENT,
          catalog: str = it.CATALOG_NAME) -> bytes:
    env = {**os.environ, ENV: processes}
    r = subprocess.run([*LAKESWEEP, "plan", kind, ident, "--catalog", catalog, "--out", str(out),
                        "--now", str(now_ms), *flags], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    with open(out, "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", ["churn", "nulls-v1"])
@pytest.mark.slow
def test_plans_are_the_same_bytes_with_the_process_pool_as_without(catalog, name, tmp_path):
    BUILDERS[name](catalog, IDENT)
    table = catalog.load_table(IDENT)
    root = canonical(table.metadata.location)
    stray = os.path.join(root, "data", "left-behind.parquet")
    with open(stray, "wb") as f:
        f.write(b"x")
    now = int(time.time() * 1000)
    for path in it.files_on_disk(table) | {stray}:
        os.utime(canonical(path), (1, 1))
    expire = [_plan("expire", tmp_path / f"expire-{p}.parquet", now, p, "--older-than", "0 s") for p in ("1", "2")]
    orphans = [_plan("orphans", tmp_path / f"orphans-{p}.parquet", now, p) for p in ("1", "2")]
    assert expire[0] == expire[1] and orphans[0] == orphans[1]
    from lakesweep.engine.plan_io import read_plan

    assert len(read_plan(str(tmp_path / "expire-2.parquet")).actions) > 10
    assert [a.path for a in read_plan(str(tmp_path / "orphans-2.parquet")).actions] == ["data/left-behind.parquet"]


def expiry_with_and_without_skipping(catalog: str, ident: str, monkeypatch) -> tuple:
    """The expiry plan of ``ident`` (every snapshot but the current one) as the planner makes it, and as it makes
    it when every manifest list says each manifest may hold live entries (every manifest read): (bytes, bytes,
    manifests decoded, manifests decoded)."""
    from lakesweep.engine.iceberg import table as table_module
    from lakesweep.engine.plan_io import plan_to_bytes
    from lakesweep.planner.kinds import plan_kind

    monkeypatch.setenv(ENV, "1")
    decoded: list[str] = []
    decode = table_module.decode_manifest
    monkeypatch.setattr(table_module, "decode_manifest", lambda item: decoded.append(item[0]) or decode(item))
    entry = plan_kind("expire", "iceberg")
    now = int(time.time() * 1000)
    out = []
    for every in (False, True):
        if every:
            lists = table_module.decode_manifest_list
            monkeypatch.setattr(table_module, "decode_manifest_list",
                                lambda item: [(*row[:-1], True) for row in lists(item)])
        decoded.clear()
        view = IcebergTable(catalog, ident)
        plan = entry.read_and_plan(view, now_ms=now, options=entry.resolve_options(view.options, older_than="0 s"))
        out.append((plan_to_bytes(plan), len(decoded)))
    return out[0][0], out[1][0], out[0][1], out[1][1]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_expiry_reads_no_manifest_of_only_deleted_entries_and_plans_the_same_bytes_as_reading_every_one(
        catalog, name, monkeypatch):
    """A manifest whose list counts no added and no existing file names no file the expiry may delete
    (Iceberg's own scans skip it: ``hasAddedFiles() || hasExistingFiles()``); skipping it changes nothing."""
    BUILDERS[name](catalog, IDENT)
    skipped, whole, read, every = expiry_with_and_without_skipping(it.CATALOG_NAME, IDENT, monkeypatch)
    assert skipped == whole
    assert every - read == len(deleted_only_and_freed(catalog.load_table(IDENT)))
    if name == "churn":
        assert read < every


def deleted_only_and_freed(table) -> set[str]:
    """The manifests, as pyiceberg reads the lists, that only snapshots other than the current one list and
    whose list counts no added and no existing file."""
    kept = {m.manifest_path for m in table.current_snapshot().manifests(table.io)}
    return {m.manifest_path for s in table.metadata.snapshots for m in s.manifests(table.io)
            if m.manifest_path not in kept and not (m.has_added_files() or m.has_existing_files())}


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_truncated_manifest_fails_planning_naming_it_with_or_without_workers(catalog, processes, monkeypatch):
    it.churn(catalog, IDENT)
    table = catalog.load_table(IDENT)
    victim = sorted(reference.every_manifest(table))[0]
    with open(victim, "r+b") as f:
        f.truncate(os.path.getsize(victim) // 2)
    monkeypatch.setenv(ENV, processes)
    view = IcebergTable(it.CATALOG_NAME, IDENT)
    with pytest.raises(CorruptMetadata) as e:
        view.prefetch_snapshots(view.snapshots)
    assert e.value.path == victim and str(e.value).startswith(f"{victim}: manifest cannot be read: ")


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_missing_manifest_fails_planning_naming_it_with_or_without_workers(catalog, processes, monkeypatch,
                                                                             tmp_path):
    it.churn(catalog, IDENT)
    table = catalog.load_table(IDENT)
    victim = sorted(reference.every_manifest(table))[-1]
    shutil.move(victim, tmp_path / "aside.avro")
    monkeypatch.setenv(ENV, processes)
    view = IcebergTable(it.CATALOG_NAME, IDENT)
    with pytest.raises(MetadataNotFound) as e:
        view.prefetch_snapshots(view.snapshots)
    assert str(e.value) == f"{victim}: manifest not found"


def test_a_manifest_list_that_lacks_a_required_field_is_corrupt(catalog, tmp_path):
    it.churn(catalog, IDENT)
    table = catalog.load_table(IDENT)
    import fastavro

    from lakesweep.engine.iceberg.table import decode_manifest_list

    snapshot = table.current_snapshot()
    with table.io.new_input(snapshot.manifest_list).open() as f:
        reader = fastavro.reader(f)
        schema = dict(reader.writer_schema)
        records = list(reader)
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "manifest_length"]
    buf = tmp_path / "list.avro"
    with open(buf, "wb") as f:
        fastavro.writer(f, schema, [{k: v for k, v in r.items() if k != "manifest_length"} for r in records])
    with pytest.raises(CorruptMetadata) as e:
        decode_manifest_list(("/x/snap.avro", buf.read_bytes()))
    assert str(e.value) == ("/x/snap.avro: a manifest list entry lacks a field the Iceberg spec requires: "
                            "'manifest_length'")


# --------------------------------------------------------------------------- tables Iceberg Java wrote


def spark_v1_with_nulls(ice, lake, ident: str) -> None:
    """A format 1 table Iceberg Java writes through Spark SQL: three partition fields (string, date, decimal),
    each null in some file, a fourth (a bucket of the id) added later, and a copy-on-write delete."""
    from tests.iceberg.java_twins import java_catalog

    with java_catalog(ice, lake) as cat:
        t = f"{cat}.{ident}"
        ice.sql(f"CREATE TABLE {t} (id BIGINT, region STRING, day DATE, price DECIMAL(9,2)) USING iceberg "
                "PARTITIONED BY (region, day, price) TBLPROPERTIES ('format-version'='1')")
        ice.sql(f"INSERT INTO {t} VALUES (1, 'us', DATE '2024-01-01', 1.50), (2, NULL, DATE '2024-01-02', NULL), "
                "(3, 'eu', NULL, 0.50)")
        ice.sql(f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id)")
        ice.sql(f"INSERT INTO {t} VALUES (4, NULL, NULL, NULL), (5, 'ap', DATE '2024-01-03', 2.25)")
        ice.sql(f"DELETE FROM {t} WHERE id = 1")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_manifests_iceberg_java_wrote_decode_as_a_whole_record_decode_does_and_plan_alike(ice, lake, tmp_path,
                                                                                          monkeypatch):
    from tests.iceberg.conftest import CATALOG
    from tests.iceberg.java_twins import spark_written

    spark_written(ice, lake, "ns.s")
    spark_v1_with_nulls(ice, lake, "ns.v1")
    for ident in ("ns.s", "ns.v1"):
        table = lake.table(ident)
        monkeypatch.setenv(ENV, "1")
        entries = assert_decoded_as_the_reference(table, IcebergTable(CATALOG, ident))
        monkeypatch.setenv(ENV, "2")
        view = IcebergTable(CATALOG, ident)
        view.prefetch_snapshots(view.snapshots)
        assert assert_decoded_as_the_reference(table, view) == entries
        if ident == "ns.s":
            assert {f.content for f in entries} == {0, 1}
        else:
            assert table.metadata.format_version == 1 and 2 in {f.status for f in entries}
            partitions = {f.partition for f in entries}
            assert "eu/null/0.50" in partitions and "us/2024-01-01/1.50" in partitions, partitions
            assert {p.rsplit("/", 1)[0] for p in partitions if p.count("/") == 3} == {"null/null/null",
                                                                                      "ap/2024-01-03/2.25"}
    now = int(time.time() * 1000)
    expire = [_plan("expire", tmp_path / f"e-{p}.parquet", now, p, "--older-than", "0 s", ident="ns.s",
                    catalog=CATALOG) for p in ("1", "2")]
    orphans = [_plan("orphans", tmp_path / f"o-{p}.parquet", now, p, ident="ns.s", catalog=CATALOG)
               for p in ("1", "2")]
    assert expire[0] == expire[1] and orphans[0] == orphans[1]
    for ident in ("ns.s", "ns.v1"):
        skipped, whole, read, every = expiry_with_and_without_skipping(CATALOG, ident, monkeypatch)
        assert skipped == whole and every - read == len(deleted_only_and_freed(lake.table(ident)))
