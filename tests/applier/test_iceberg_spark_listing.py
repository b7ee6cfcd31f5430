"""``plan orphans --catalog C --spark``: an Iceberg table's roots split into prefixes that Spark tasks list,
streamed back a batch at a time into an inventory, list what the read step lists and plan exactly what it plans."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakesweep.applier.iceberg_listing import list_iceberg_on_spark, task_prefixes
from lakesweep.cli.main import app
from lakesweep.engine.iceberg.plan_reads import list_table_files
from lakesweep.engine.iceberg.table import canonical
from lakesweep.engine.plan_io import read_plan, write_plan
from tests.iceberg.conftest import CATALOG, batch, make_lake, write_history
from tests.iceberg.test_orphans import old

ORPHANS = ["data/region=eu/orphan-0.parquet", "data/region=zz/deep/er/orphan-1.parquet", "data/orphan-2.parquet",
           "metadata/orphan-m.avro", "stray/x.bin", "stray-top.bin"]
HIDDEN = ["data/_SUCCESS", "data/region=eu/.part-0.parquet.crc", "data/.spark-staging-1/part-0.parquet",
          "metadata/_temporary/0/x"]
EXTERNAL_ORPHANS = ["region=us/orphan-x.parquet", "orphan-y.parquet"]


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A pyiceberg table whose later appends go to a write.data.path outside its location, with orphans and
    hidden files in both, every file old."""
    lake = make_lake(tmp_path / "lake", monkeypatch)
    t = write_history(lake, appends=3)
    external = str(tmp_path / "lake" / "ext")
    with t.transaction() as tx:
        tx.set_properties({"write.data.path": f"file://{external}"})
    t = lake.table()
    t.append(batch(900))
    location = canonical(t.metadata.location)
    for root, rels in ((location, ORPHANS + HIDDEN), (external, EXTERNAL_ORPHANS)):
        for rel in rels:
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "wb") as f:
                f.write(b"left behind")
    for root in (location, external):
        for d, _, names in os.walk(root):
            for n in names:
                old(os.path.join(d, n), 30)
    return lake.view(), location, external


def test_the_prefixes_split_the_data_directory_by_partition_and_each_write_path(table):
    view, location, external = table
    assert view.external_roots() == [external]
    relative = [(p.replace(location, "LOC").replace(external, "EXT"), recursive) for p, recursive in
                task_prefixes(view)]
    assert sorted(relative) == sorted([
        ("LOC", False), ("LOC/data", False), ("LOC/metadata", True), ("LOC/stray", True),
        ("LOC/data/region=us", True), ("LOC/data/region=eu", True), ("LOC/data/region=ap", True),
        ("LOC/data/region=zz", True), ("LOC/data/.spark-staging-1", True),
        ("EXT", False), ("EXT/region=us", True), ("EXT/region=eu", True), ("EXT/region=ap", True)])


def test_the_spark_listing_holds_what_the_read_step_lists_written_a_batch_at_a_time(table, spark, tmp_path):
    view, location, external = table
    seen = []
    listing = list_iceberg_on_spark(view, str(tmp_path / "l.parquet"), spark=spark, master="local[2]",
                                    on_files=seen.append, batch_rows=4)
    local = sorted((f.path, f.size, f.mtime_ms) for f in list_table_files(view))
    rows = sorted((r["path"], r["size"], r["mtime_ms"]) for r in pq.read_table(listing.path).to_pylist())
    assert rows == local and listing.files == len(local) and listing.directories == len(task_prefixes(view))
    assert {p[len(location) + 1:] for p, _, _ in local if p.startswith(location + "/")} >= set(ORPHANS + HIDDEN)
    assert {p[len(external) + 1:] for p, _, _ in local if p.startswith(external + "/")} >= set(EXTERNAL_ORPHANS)
    assert seen and seen == sorted(seen) and seen[-1] <= len(local)  # written as it came
    assert pq.ParquetFile(listing.path).metadata.num_row_groups > 1


@pytest.mark.spark
@pytest.mark.slow
def test_plan_orphans_spark_makes_the_plan_the_local_listing_makes(table, tmp_path):
    view, location, external = table
    runner = CliRunner()
    store, spark = tmp_path / "store.plan", tmp_path / "spark.plan"
    now = str(int(time.time() * 1000))
    r = runner.invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", str(store), "--now", now])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", str(spark), "--now", now,
                            "--spark", "--master", "local[2]", "--output", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["out"] == str(spark)
    a, b = read_plan(str(store)), read_plan(str(spark))
    assert sorted(x.path for x in a.actions) == sorted(ORPHANS + [f"{external}/{rel}" for rel in EXTERNAL_ORPHANS])
    assert a.stats["kept"]["hidden"] == len(HIDDEN)
    assert a.stats["listing"] == {"from": "store"} and a.options["spark"].value is None
    files = sum(len(files) for _, _, files in os.walk(location)) + sum(len(f) for _, _, f in os.walk(external))
    assert b.stats["listing"] == {"from": "spark", "master": "local[2]", "directories": 13, "files": files}
    assert b.options["spark"].value == "local[2]" and b.options["spark"].source == "flag"
    # but for where the listing came from, the same plan: the same id and the same bytes
    same = dataclasses.replace(b, options=a.options, stats={**b.stats, "listing": a.stats["listing"]})
    assert same.plan_id == a.plan_id and same.plan_id != b.plan_id
    write_plan(same, str(tmp_path / "same.plan"))
    assert (tmp_path / "same.plan").read_bytes() == store.read_bytes()
    shown = runner.invoke(app, ["show", str(spark)])
    assert "listed: on Spark (local[2]), a task for each of 13 directories" in " ".join(shown.stdout.split())
    shown = runner.invoke(app, ["show", str(store), "-o", "json"])
    assert json.loads(shown.stdout)["listing"] == {"from": "store"}


def test_an_inventory_is_refused_for_an_iceberg_table_with_spark_too(table, tmp_path):
    r = CliRunner().invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", str(tmp_path / "p"),
                                 "--spark", "--inventory", str(tmp_path / "inv.parquet")])
    assert r.exit_code == 1 and "--inventory is an option of Paimon tables" in " ".join(r.output.split())
    assert not (tmp_path / "p").exists()


def test_spark_on_a_bad_master_is_refused_before_anything_is_listed(table, tmp_path):
    out = tmp_path / "p"
    r = CliRunner().invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", str(out), "--spark",
                                 "--master", "bogus[*]"])
    assert r.exit_code == 1, r.output
    assert " ".join(r.output.split()).endswith(
        "error: 'bogus[*]' is not a Spark master URL: use local[*], local[N], spark://host:7077, yarn or "
        "k8s://https://host:port. Nothing was listed and no plan was written.")
    assert not out.exists()
