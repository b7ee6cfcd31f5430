"""Orphan listing on S3 (SeaweedFS): ListObjectsV2 by prefix, on the driver and on Spark tasks, lists a copied
table key for key as the local listing of the same tree does, and the plans made from them are the same."""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

from lakesweep.applier.listing import list_on_spark
from lakesweep.applier.orphans_used import PlanningSession, paimon_used_reader
from lakesweep.engine.fileio import fileio_for
from lakesweep.engine.paimon.orphans import list_orphan_candidates
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import write_plan
from lakesweep.planner.kinds import plan_kind
from tests.applier.test_orphans_apply import JUNK, KEPT
from tests.applier.test_safety import Lake
from tests.planner.test_orphans import age, junk

MANY = 1_100  # files in one bucket directory: more than ListObjectsV2's 1,000 keys a page
NESTED = ["dt=a/bucket-0/nested/data-deep-0.parquet",  # below a bucket directory: Paimon never lists it
          "dt=b/bucket-0/x/y/data-deeper-1.parquet",
          "dt=c/bucket-3/data-lost-partition-0.parquet"]  # a partition no snapshot has
HIDDEN = ["dt=a/bucket-0/.data-0.parquet.crc", "_SUCCESS", "dt=a/_temporary/0/data-t.parquet",
          "dt=b/.spark-staging-1/bucket-0/data-s.parquet"]
MANY_FILES = [f"dt=z/bucket-0/data-many-{i:04d}.parquet" for i in range(MANY)]


def upload(s3, local_root: str, prefix: str) -> None:
    def put(rel: str) -> None:
        with open(os.path.join(local_root, rel), "rb") as f, s3.open_output_stream(f"{prefix}/{rel}") as out:
            out.write(f.read())

    rels = [os.path.relpath(os.path.join(d, n), local_root) for d, _, names in os.walk(local_root) for n in names]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, rels))


def local_tree(root: str) -> set[tuple[str, int]]:
    return {(os.path.relpath(os.path.join(d, n), root), os.path.getsize(os.path.join(d, n)))
            for d, _, names in os.walk(root) for n in names}


def relative(location: str, files) -> list[tuple[str, int]]:
    return sorted((f[0][len(location) + 1:], f[1]) for f in files)


def plan(table, *, now_ms: int, cut_ms: int, lister=None):
    entry = plan_kind("orphans", "paimon")
    options = entry.resolve_options(table.options, older_than=str(cut_ms), force=True, lister=lister)
    return entry.read_and_plan(table, now_ms=now_ms, options=options)


def actions(p) -> list[tuple]:
    return [(a.kind, a.path, a.size, a.partition, a.bucket) for a in p.actions]


@pytest.mark.slow
def test_a_paimon_table_copied_to_s3_lists_and_plans_as_its_local_tree(tmp_path, s3_env, spark):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)
    for rel in JUNK + KEPT + NESTED + HIDDEN + MANY_FILES:
        junk(lake.root, rel)
    age(lake.root)
    prefix = f"{s3_env['bucket']}/wh-{uuid.uuid4().hex[:8]}"
    upload(s3_env["fs"], str(tmp_path / "wh"), prefix)
    local, remote = open_table(lake.root), open_table(f"s3://{prefix}/db.db/t")
    assert remote.fileio.scheme == "s3"

    # the whole tree, by ListObjectsV2 without a delimiter (pages of at most 1,000 keys), equals the local one
    pages = list(remote.fileio.list_pages(remote.location, recursive=True))
    assert len(pages) >= 2 and max(len(p) for p in pages) == 1000
    assert {(f.path[len(remote.location) + 1:], f.size) for p in pages for f in p} == local_tree(lake.root)

    # what orphan cleaning lists: the store walk (ListObjectsV2 with a delimiter, by directory prefix) and Spark
    want = relative(local.location, [(f.path, f.size) for f in list_orphan_candidates(local)])
    assert relative(remote.location, [(f.path, f.size) for f in list_orphan_candidates(remote)]) == want
    listing = list_on_spark(remote, str(tmp_path / "l.parquet"), spark=spark, master="local[2]", batch_rows=500)
    rows = pq.read_table(listing.path).to_pylist()
    assert relative(remote.location, [(r["path"], r["size"]) for r in rows]) == want and listing.files == len(want)
    assert sum(1 for rel, _ in want if rel.startswith("dt=z/bucket-0/")) == MANY
    assert pq.ParquetFile(listing.path).metadata.num_row_groups > 1  # written as it came

    time.sleep(1.1)  # S3 keeps modification times to the second: every copied file is older than the cut-off
    cut_ms = int(time.time() * 1000)
    time.sleep(0.1)
    now_ms = int(time.time() * 1000)
    in_store = plan(remote, now_ms=now_ms, cut_ms=cut_ms)
    on_spark = plan(remote, now_ms=now_ms, cut_ms=cut_ms,
                    lister=lambda t: (list_on_spark(t, str(tmp_path / "p.parquet"), spark=spark,
                                                    master="local[2]").path, {"from": "spark"}))
    at_home = plan(local, now_ms=now_ms, cut_ms=cut_ms)
    assert actions(in_store) == actions(at_home) == actions(on_spark)
    # the used set read on Spark too (manifests decoded by executors through S3): the same plan, byte for byte
    kept: list = []
    entry = plan_kind("orphans", "paimon")
    options = entry.resolve_options(
        remote.options, older_than=str(cut_ms), force=True,
        lister=lambda t: (list_on_spark(t, str(tmp_path / "q.parquet"), spark=spark, master="local[2]",
                                        keep=kept).path, {"from": "spark"}),
        used_reader=lambda path: paimon_used_reader(PlanningSession("local[2]", None), kept[0]))
    write_plan(entry.read_and_plan(remote, now_ms=now_ms, options=options), str(tmp_path / "used.plan"))
    kept[0].unpersist()
    write_plan(on_spark, str(tmp_path / "on_spark.plan"))
    assert (tmp_path / "used.plan").read_bytes() == (tmp_path / "on_spark.plan").read_bytes()
    # Paimon's rule has no hidden-path filter inside a bucket directory: its .crc is planned here as at home
    assert sorted(a.path for a in at_home.actions) == sorted(JUNK + MANY_FILES + [NESTED[2], HIDDEN[0]])
    for key in ("listed", "kept_used", "kept_young", "ignored_paths"):
        assert in_store.stats[key] == at_home.stats[key] == on_spark.stats[key], key
    assert on_spark.stats["listing"] == {"from": "spark"} and in_store.stats["listing"] == {"from": "store"}


def test_a_folder_marker_is_not_a_file(s3_env):
    prefix = f"s3://{s3_env['bucket']}/m-{uuid.uuid4().hex[:8]}"
    io = fileio_for(prefix)
    io.write_atomic(prefix + "/d/f", b"x")
    bucket, _, key = prefix[len("s3://"):].partition("/")
    io._s3().put_object(Bucket=bucket, Key=key + "/d/e/", Body=b"")  # a zero-byte "folder" key
    assert [(f.path, f.is_dir) for p in io.list_pages(prefix + "/d") for f in p] == [
        (prefix + "/d/e", True), (prefix + "/d/f", False)]
    assert [f.path for p in io.list_pages(prefix, recursive=True) for f in p] == [prefix + "/d/f"]
    assert list(io.list_pages(prefix + "/none")) == [[]]  # one empty page


ICEBERG_ORPHANS = ["data/region=eu/orphan-0.parquet", "data/region=zz/deep/er/orphan-1.parquet",
                   "metadata/orphan-m.avro", "stray/x.bin"] + [f"data/region=many/orphan-{i:04d}.parquet"
                                                                for i in range(MANY)]
ICEBERG_HIDDEN = ["data/_SUCCESS", "data/region=eu/.part-0.parquet.crc", "data/.spark-staging-1/part-0.parquet",
                  "metadata/_temporary/0/x"]


def iceberg_table_on_s3(tmp_path, s3_env, name: str):
    """A pyiceberg table on S3 with ``ICEBERG_ORPHANS`` and ``ICEBERG_HIDDEN`` written beside its files, and a
    local copy of its tree: (the table, the copy's directory)."""
    import pyarrow as pa
    from pyarrow import fs as pafs
    from pyiceberg.catalog.sql import SqlCatalog

    from lakesweep.engine.iceberg.table import IcebergTable
    from tests.iceberg.conftest import SCHEMA, SPEC

    catalog = SqlCatalog(name, uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                         warehouse=f"s3://{s3_env['bucket']}/ice-{uuid.uuid4().hex[:8]}",
                         **{"s3.endpoint": s3_env["AWS_ENDPOINT_URL"], "s3.region": "us-east-1"})
    catalog.create_namespace("ns")
    written = catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    for i in range(3):
        written.append(pa.table({"id": pa.array([i, i + 10], pa.int64()), "region": ["us", "eu"]}))
    written.delete("region = 'us'")
    view = IcebergTable(name, "ns.t", catalog=catalog)
    native = view.location[len("s3://"):]
    s3 = s3_env["fs"]

    def put(rel: str) -> None:
        with s3.open_output_stream(f"{native}/{rel}") as out:
            out.write(b"junk")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, ICEBERG_ORPHANS + ICEBERG_HIDDEN))
    copy = tmp_path / "copy"
    pafs.copy_files(native, str(copy), source_filesystem=s3, destination_filesystem=pafs.LocalFileSystem())
    return view, copy


@pytest.mark.slow
def test_an_iceberg_table_on_s3_lists_and_plans_as_a_local_copy_of_its_tree(tmp_path, s3_env):
    from lakesweep.engine.errors import PlanRejected
    from lakesweep.engine.fileio import FileInfo
    from lakesweep.planner.iceberg.orphans import plan_iceberg_orphans

    view, copy = iceberg_table_on_s3(tmp_path, s3_env, "s3list")

    time.sleep(1.1)  # S3 keeps modification times to the second
    cut_ms = int(time.time() * 1000)
    time.sleep(0.1)
    now_ms = int(time.time() * 1000)
    entry = plan_kind("orphans", "iceberg")
    options = entry.resolve_options(view.options, older_than=str(cut_ms), force=True)
    read = entry.read(view, now_ms=now_ms, options=options)
    # the local listing of the copied tree, as the read step lists a local table
    tree = {(f.path[len(str(copy)) + 1:], f.size) for p in fileio_for(str(copy)).list_pages(str(copy), recursive=True)
            for f in p}
    assert tree == local_tree(str(copy))
    assert {(f.path[len(view.location) + 1:], f.size) for f in read.listed} == tree
    assert len(tree) > MANY + 20

    on_s3 = entry.plan(view, now_ms=now_ms, options=options, read=read)
    # the local copy's listing, at the same locations, every file as old as the copied ones
    at_home = [FileInfo(f"{view.location}/{rel}", size, cut_ms - 1000) for rel, size in sorted(tree)]
    from_copy = plan_iceberg_orphans(read.view, at_home, now_ms=now_ms, options=options,
                                     metadata_owners=read.metadata_owners, neighbours=read.neighbours)
    assert [(a.kind, a.path, a.size) for a in on_s3.actions] == [(a.kind, a.path, a.size) for a in from_copy.actions]
    assert sorted(a.path for a in on_s3.actions) == sorted(ICEBERG_ORPHANS)
    assert on_s3.stats["kept"] == from_copy.stats["kept"] == {"young": 0, "unknown_age": 0, "newer_metadata": 0,
                                                              "hidden": len(ICEBERG_HIDDEN)}

    # a listing that misses a file the table reads, there since before the cut-off, is refused on S3 too
    data = sorted((f for f in read.listed if "/data/region=eu/" in f.path and f.path.endswith(".parquet")
                   and "orphan" not in f.path), key=lambda f: f.path)[0]
    short = [f for f in read.listed if f.path != data.path]
    try:
        plan_iceberg_orphans(read.view, short, now_ms=now_ms, options=options, metadata_owners=read.metadata_owners)
    except PlanRejected as e:
        assert str(e).startswith(f"the listing is incomplete: it misses {data.path}, which ")
    else:
        raise AssertionError("an incomplete listing was planned")
