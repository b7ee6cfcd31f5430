"""An Iceberg table on S3 (SeaweedFS) listed on Spark, a prefix a task by ListObjectsV2: the same files as the
read step's listing of the table and as the local listing of a copy of its tree, and the same plan."""

from __future__ import annotations

import dataclasses
import time

import pyarrow.parquet as pq
import pytest

from lakesweep.applier.iceberg_listing import list_iceberg_on_spark, task_prefixes
from lakesweep.applier.orphans_used import PlanningSession, iceberg_used_reader
from lakesweep.engine.fileio import FileInfo, fileio_for
from lakesweep.engine.plan_io import write_plan
from lakesweep.planner.iceberg.orphans import plan_iceberg_orphans
from lakesweep.planner.kinds import plan_kind
from tests.applier.test_s3_listing import ICEBERG_HIDDEN, ICEBERG_ORPHANS, MANY, iceberg_table_on_s3, local_tree

pytestmark = pytest.mark.slow


def test_an_iceberg_table_on_s3_lists_on_spark_as_its_local_copy_and_plans_the_same(tmp_path, s3_env, spark):
    view, copy = iceberg_table_on_s3(tmp_path, s3_env, "s3spark")
    assert view.fileio.scheme == "s3"
    tree = local_tree(str(copy))
    assert len(tree) > MANY + 20

    # the prefixes: the location's and data's own files, metadata, each partition and other directory
    assert sorted((p[len(view.location):], recursive) for p, recursive in task_prefixes(view)) == [
        ("", False), ("/data", False), ("/data/.spark-staging-1", True), ("/data/region=eu", True),
        ("/data/region=many", True), ("/data/region=us", True), ("/data/region=zz", True), ("/metadata", True),
        ("/stray", True)]
    listing = list_iceberg_on_spark(view, str(tmp_path / "l.parquet"), spark=spark, master="local[2]",
                                    batch_rows=500)
    rows = pq.read_table(listing.path).to_pylist()
    assert sorted((r["path"][len(view.location) + 1:], r["size"]) for r in rows) == sorted(tree)
    assert listing.files == len(tree) and pq.ParquetFile(listing.path).metadata.num_row_groups > 1
    # the task of data/region=many lists more than a page of ListObjectsV2 (1,000 keys), and goes on to the next
    pages = list(view.fileio.list_pages(view.location + "/data/region=many", recursive=True))
    assert [len(p) for p in pages] == [1000, MANY - 1000]
    assert sum(1 for r in rows if "/data/region=many/" in r["path"]) == MANY

    time.sleep(1.1)  # S3 keeps modification times to the second: every file is older than the cut-off
    cut_ms = int(time.time() * 1000)
    time.sleep(0.1)
    now_ms = int(time.time() * 1000)
    entry = plan_kind("orphans", "iceberg")

    def plan(**lister):
        options = entry.resolve_options(view.options, older_than=str(cut_ms), force=True, **lister)
        return entry.read_and_plan(view, now_ms=now_ms, options=options)

    in_store = plan()
    on_spark = plan(spark="local[2]", lister=lambda t: (list_iceberg_on_spark(
        t, str(tmp_path / "p.parquet"), spark=spark, master="local[2]").path, {"from": "spark"}))
    assert sorted(a.path for a in on_spark.actions) == sorted(ICEBERG_ORPHANS)
    assert on_spark.stats["kept"]["hidden"] == len(ICEBERG_HIDDEN)
    assert on_spark.stats["listing"] == {"from": "spark"} and in_store.stats["listing"] == {"from": "store"}
    same = dataclasses.replace(on_spark, options=in_store.options,
                               stats={**on_spark.stats, "listing": {"from": "store"}})
    assert same.plan_id == in_store.plan_id
    # the used set read on Spark too (manifests decoded by executors through S3): the same plan, byte for byte
    kept: list = []
    used_on_spark = plan(spark="local[2]", lister=lambda t: (list_iceberg_on_spark(
        t, str(tmp_path / "q.parquet"), spark=spark, master="local[2]", keep=kept).path, {"from": "spark"}),
        used_reader=lambda path: iceberg_used_reader(PlanningSession("local[2]", None), kept[0]))
    kept[0].unpersist()
    write_plan(used_on_spark, str(tmp_path / "used.plan"))
    write_plan(on_spark, str(tmp_path / "on_spark.plan"))
    assert (tmp_path / "used.plan").read_bytes() == (tmp_path / "on_spark.plan").read_bytes()

    # the local copy's listing, at the same locations, every file as old as the listed ones
    options = entry.resolve_options(view.options, older_than=str(cut_ms), force=True)
    read = entry.read(view, now_ms=now_ms, options=options)
    at_home = [FileInfo(f"{view.location}/{rel}", size, cut_ms - 1000) for rel, size in sorted(tree)]
    from_copy = plan_iceberg_orphans(read.view, at_home, now_ms=now_ms, options=options,
                                     metadata_owners=read.metadata_owners, neighbours=read.neighbours)
    assert [(a.kind, a.path, a.size) for a in on_spark.actions] == [(a.kind, a.path, a.size)
                                                                    for a in from_copy.actions]
    assert on_spark.stats["kept"] == from_copy.stats["kept"]
    assert {(f.path[len(str(copy)) + 1:], f.size) for p in fileio_for(str(copy)).list_pages(str(copy), recursive=True)
            for f in p} == tree
