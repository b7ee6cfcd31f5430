"""``plan orphans --spark``: the listing made on Spark, a task for each bucket and metadata directory,
streamed back a batch at a time, plans exactly what the store walk plans and refuses what it refuses."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakesweep.applier.listing import list_on_spark, task_directories
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.orphans import ListedDirs, list_orphan_candidates
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import read_plan
from tests.applier.test_orphans_apply import JUNK, KEPT, lake  # noqa: F401  (the fixture)
from tests.planner.test_orphans import junk


def test_the_listing_has_a_task_for_each_directory_and_holds_a_batch(lake, spark, tmp_path):  # noqa: F811
    t = open_table(lake.root)
    dirs = task_directories(t, ListedDirs(t))
    assert sorted(d[len(lake.root) + 1:] for d in dirs) == sorted(
        ["snapshot", "changelog", "manifest", "index", "statistics", "dt=a/bucket-0", "dt=a/bucket-7",
         "dt=b/bucket-0"])
    seen = []
    listing = list_on_spark(t, str(tmp_path / "l.parquet"), spark=spark, master="local[2]", on_files=seen.append,
                            batch_rows=2)
    assert listing.directories == len(dirs)
    store = {(f.path, f.size, f.mtime_ms) for f in list_orphan_candidates(t)}
    rows = pq.read_table(listing.path).to_pylist()
    assert {(r["path"], r["size"], r["mtime_ms"]) for r in rows} == store and listing.files == len(store)
    assert seen and seen == sorted(seen) and seen[-1] <= len(store)  # written as it came, a batch at a time
    assert pq.ParquetFile(listing.path).metadata.num_row_groups > 1


def test_another_tables_metadata_in_a_bucket_directory_is_refused(lake, spark, tmp_path):  # noqa: F811
    junk(lake.root, "dt=a/bucket-0/schema/schema-0")  # a table nested in a bucket directory
    t = open_table(lake.root)
    with pytest.raises(PlanRejected, match="holds another Paimon table's metadata") as on_spark:
        list_on_spark(t, str(tmp_path / "l.parquet"), spark=spark, master="local[2]")
    with pytest.raises(PlanRejected) as in_store:
        list_orphan_candidates(t)
    assert str(on_spark.value) == str(in_store.value)


@pytest.mark.spark
def test_plan_orphans_spark_plans_what_the_store_walk_plans(lake, tmp_path):  # noqa: F811
    runner = CliRunner()
    store, spark = tmp_path / "store.plan", tmp_path / "spark.plan"
    r = runner.invoke(app, ["plan", "orphans", lake.root, "--out", str(store)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["plan", "orphans", lake.root, "--out", str(spark), "--spark", "--master", "local[2]",
                            "--output", "json"])
    assert r.exit_code == 0, r.output
    a, b = read_plan(str(store)), read_plan(str(spark))
    assert [(x.kind, x.path, x.size) for x in a.actions] == [(x.kind, x.path, x.size) for x in b.actions]
    assert sorted(x.path for x in b.actions) == sorted(JUNK)
    assert b.stats["listing"]["from"] == "spark" and b.options["spark"].value == "local[2]"
    shown = runner.invoke(app, ["show", str(spark)])
    assert "listed: on Spark (local[2]), a task for each of 8 directories" in shown.stdout
    doc = json.loads(r.stdout)
    assert doc["out"] == str(spark)


def test_spark_and_an_inventory_together_are_refused(lake, tmp_path):  # noqa: F811
    r = CliRunner().invoke(app, ["plan", "orphans", lake.root, "--out", str(tmp_path / "p"), "--spark",
                                 "--inventory", str(tmp_path / "inv.parquet")])
    assert r.exit_code == 1 and "give one of them" in r.output
    assert not (tmp_path / "p").exists()
