"""lakesweep on SeaweedFS's Iceberg REST catalog over S3 (``weed mini`` on loopback), and beside SeaweedFS's own
``iceberg_maintenance`` worker on an identical table."""

from __future__ import annotations

import collections
import time
from typing import Iterator

import pyarrow as pa
import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.kinds import plan_kind
from tests.iceberg.conftest import SCHEMA, SPEC, needed_files as needed
from tests.support.seaweed_iceberg import WeedMini, create_table_bucket, run_iceberg_maintenance, weed_mini

BUCKET = "lake"
CATALOG = "sw"


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeedMini]:
    with weed_mini(str(tmp_path_factory.mktemp("weedmini"))) as m:
        create_table_bucket(m, BUCKET)
        yield m


@pytest.fixture
def sw(mini, monkeypatch):
    """The mini's REST catalog, configured for lakesweep as a user would: pyiceberg's environment variables."""
    for key, value in mini.pyiceberg_env(CATALOG, BUCKET).items():
        monkeypatch.setenv(key, value)
    return mini.catalog(BUCKET)


def history(catalog, namespace: str, *, appends=6, properties=None):
    """Appends of three regions, then a copy-on-write delete of one region: a kept snapshot that records
    data files as DELETED."""
    catalog.create_namespace(namespace)
    t = catalog.create_table(f"{namespace}.t", schema=SCHEMA, partition_spec=SPEC, properties=properties or {})
    for i in range(appends):
        ids = list(range(i * 10, i * 10 + 6))
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "region": [("us", "eu", "ap")[x % 3] for x in ids]}))
        time.sleep(0.005)  # distinct snapshot times
    t.delete("region = 'us'")
    return catalog.load_table(f"{namespace}.t")


def rows_of(table) -> dict[int, collections.Counter]:
    out = {}
    for s in table.metadata.snapshots:
        data = table.scan(snapshot_id=s.snapshot_id).to_arrow()
        out[s.snapshot_id] = collections.Counter(zip(data.column("id").to_pylist(), data.column("region").to_pylist()))
    return out


def objects(view: IcebergTable) -> set[str]:
    return {canonical(f.path) for f in view.fileio.list(view.location, recursive=True) if not f.is_dir}


def run(kind, namespace, tmp_path, *, now_ms=None, **flags):
    view = IcebergTable(CATALOG, f"{namespace}.t")
    entry = plan_kind(kind, "iceberg")
    p = entry.read_and_plan(view, now_ms=now_ms or int(time.time() * 1000), options=entry.resolve_options(view.options, **flags))
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole, report
    return p, report


def test_expire_orphans_and_rewrite_on_the_rest_catalog_over_s3(sw, tmp_path):
    t = history(sw, "ops")
    before = rows_of(t)
    view = IcebergTable(CATALOG, "ops.t")
    assert view.location == "s3://lake/ops/t" and view.fileio.scheme == "s3"

    p, report = run("expire", "ops", tmp_path, retain_last=2, older_than="0 s")
    after = sw.load_table("ops.t")
    kept = {s.snapshot_id for s in after.metadata.snapshots}
    assert len(kept) == 2 and not kept & set(p.scope.expired)
    assert rows_of(after) == {k: v for k, v in before.items() if k in kept}
    on_s3 = objects(view)
    assert needed(after) <= on_s3
    assert {f for f in on_s3 - needed(after) if not f.endswith(".metadata.json")} == set()
    assert report.counts["DELETED"] == len([a for a in p.actions if a.verb.deletes]) > 0

    stray = f"{view.location}/data/region=eu/stray-from-a-failed-write.parquet"
    view.fileio.write_atomic(stray, b"PAR1")
    time.sleep(1.1)  # S3 modification times are whole seconds
    now = int(time.time() * 1000)
    p, report = run("orphans", "ops", tmp_path, now_ms=now, older_than=str(now), force=True)
    assert [a.path for a in p.actions] == ["data/region=eu/stray-from-a-failed-write.parquet"]
    assert stray not in objects(view) and needed(sw.load_table("ops.t")) <= objects(view)

    for i in range(5):
        sw.load_table("ops.t").append(pa.table({"id": pa.array([900 + i], pa.int64()), "region": ["eu"]}))
    before = rows_of(sw.load_table("ops.t"))
    p, report = run("rewrite-manifests", "ops", tmp_path)
    after = sw.load_table("ops.t")
    head = after.current_snapshot()
    assert len([m for m in head.manifests(after.io) if m.content == 0]) == 1
    assert rows_of(after)[head.snapshot_id] == before[head.parent_snapshot_id]
    assert needed(after) <= objects(view)


def test_beside_seaweedfs_worker_the_same_snapshots_remain_and_lakesweep_also_frees_deleted_files(mini, sw, tmp_path):
    """The same writes to two tables; SeaweedFS's worker expires one (max_snapshots_to_keep=1, retention 1 ms
    through the table property), lakesweep the other (--retain-last 1 --older-than '0 s'). The one snapshot
    kept is the delete's, which records the 'us' files as DELETED."""
    props = {"history.expire.max-snapshot-age-ms": "1"}
    theirs, ours = history(sw, "theirs", properties=props), history(sw, "ours", properties=props)
    before_theirs, before_ours = rows_of(theirs), rows_of(ours)
    job = run_iceberg_maintenance(mini, operations="expire_snapshots", config={"max_snapshots_to_keep": 1},
                                  bucket=BUCKET, namespace="theirs", table="t")
    assert job.succeeded, job
    p, report = run("expire", "ours", tmp_path, retain_last=1, older_than="0 s")
    expired = len(p.scope.expired)
    assert job.messages["expire_snapshots"].startswith(f"expired {expired} snapshot(s), deleted ")
    theirs, ours = sw.load_table("theirs.t"), sw.load_table("ours.t")

    assert len(theirs.metadata.snapshots) == len(ours.metadata.snapshots) == 1
    assert sorted(rows_of(theirs).values(), key=sorted) == sorted(rows_of(ours).values(), key=sorted)
    # both tables are whole; lakesweep also freed the data files only a DELETED entry of a kept snapshot
    # names (Iceberg's ReachableFileCleanup reads live entries), which SeaweedFS's worker leaves behind
    view_theirs, view_ours = IcebergTable(CATALOG, "theirs.t"), IcebergTable(CATALOG, "ours.t")
    assert needed(theirs) <= objects(view_theirs) and needed(ours) <= objects(view_ours)
    left_theirs = {f for f in objects(view_theirs) - needed(theirs) if not f.endswith(".metadata.json")}
    left_ours = {f for f in objects(view_ours) - needed(ours) if not f.endswith(".metadata.json")}
    assert left_ours == set()
    assert left_theirs and all("/data/region=us/" in f for f in left_theirs), left_theirs
    deleted_in_kept = set()
    for s in theirs.metadata.snapshots:
        for m in s.manifests(theirs.io):
            deleted_in_kept |= {canonical(e.data_file.file_path) for e in m.fetch_manifest_entry(theirs.io, discard_deleted=False)
                                if e.status == 2}
    assert left_theirs == deleted_in_kept
    assert before_theirs and before_ours


def test_beside_seaweedfs_worker_manifests_are_rewritten_alike(mini, sw, tmp_path):
    theirs, ours = history(sw, "rtheirs"), history(sw, "rours")
    job = run_iceberg_maintenance(mini, operations="rewrite_manifests", config={"min_manifests_to_rewrite": 2},
                                  bucket=BUCKET, namespace="rtheirs", table="t")
    assert job.succeeded, job
    p, report = run("rewrite-manifests", "rours", tmp_path, min_manifests=2)
    n = p.scope.data_manifests
    assert job.messages["rewrite_manifests"] == f"rewrote {n} manifests into 1 ({p.scope.entries} entries)"
    theirs, ours = sw.load_table("rtheirs.t"), sw.load_table("rours.t")
    for t in (theirs, ours):
        assert len([m for m in t.current_snapshot().manifests(t.io) if m.content == 0]) == 1
    rows = lambda t: collections.Counter(zip(*(t.scan().to_arrow().column(c).to_pylist() for c in ("id", "region"))))  # noqa: E731
    assert rows(theirs) == rows(ours)


def appends_only(catalog, namespace: str, appends: int = 6):
    catalog.create_namespace(namespace)
    t = catalog.create_table(f"{namespace}.t", schema=SCHEMA, partition_spec=SPEC)
    for i in range(appends):
        ids = list(range(i * 10, i * 10 + 6))
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "region": [("us", "eu", "ap")[x % 3] for x in ids]}))
    return catalog.load_table(f"{namespace}.t")


def data_files(table) -> int:
    return sum(1 for _ in table.scan().plan_files())


@pytest.mark.slow
def test_beside_seaweedfs_worker_compaction_merges_the_same_files_into_as_many_outputs(mini, sw, tmp_path):
    theirs, ours = appends_only(sw, "ctheirs"), appends_only(sw, "cours")
    rows_before = rows_of(ours)[ours.current_snapshot().snapshot_id]
    job = run_iceberg_maintenance(mini, operations="compact", config={"min_input_files": 5},
                                  bucket=BUCKET, namespace="ctheirs", table="t")
    assert job.succeeded, job
    p, report = run("compact", "cours", tmp_path, min_input_files=5)
    bins = p.scope.bins
    inputs = sum(len(b["inputs"]) for b in bins)
    assert job.messages["compact"] == f"compacted {inputs} files into {len(bins)} (across {len(bins)} bins)"
    theirs, ours = sw.load_table("ctheirs.t"), sw.load_table("cours.t")
    assert data_files(ours) == data_files(theirs) == 3 and inputs == 18
    assert rows_of(ours)[ours.current_snapshot().snapshot_id] == rows_before
    assert collections.Counter(rows_of(theirs)[theirs.current_snapshot().snapshot_id]) == rows_before
    assert needed(ours) <= objects(IcebergTable(CATALOG, "cours.t"))


@pytest.mark.spark
@pytest.mark.slow
def test_maintain_on_the_rest_catalog_over_s3(sw, tmp_path):
    from lakesweep.maintain import Maintenance, Thresholds
    from lakesweep.journal.audit import list_maintenance

    appends_only(sw, "mnt")
    before = rows_of(sw.load_table("mnt.t"))
    head = sw.load_table("mnt.t").current_snapshot().snapshot_id
    rec = DuckDBRecorder(tmp_path / "m.duckdb")
    # real Spark: the merge tasks and the deletes run on executors that reach S3 through the pickled FileIO
    run_ = Maintenance(rec, str(tmp_path / "plans"), catalog=CATALOG, namespace_filter="mnt",
                       thresholds=Thresholds(max_snapshots_to_keep=1, snapshot_retention_hours=0,
                                             min_manifests_to_rewrite=2, orphan_older_than_hours=1),
                       master="local[2]")
    with rec:
        report = run_.run()
        rows = list_maintenance(rec)
    assert [(r["operation"], r["outcome"]) for r in rows] == [
        ("compact", "applied"), ("expire", "applied"), ("orphans", "skipped"), ("rewrite-manifests", "applied")]
    assert rows[0]["message"] == "compacted 18 files into 3 (across 3 bins)"
    assert rows[2]["message"] == "no orphan files to remove"
    # the replace rewrote each of the six append manifests (their entries DELETED) and added one for the outputs
    assert rows[3]["message"] == "rewrote 7 manifests into 1 (3 entries)"
    after = sw.load_table("mnt.t")
    assert len(after.metadata.snapshots) == 2 and data_files(after) == 3 and report.failed == 0  # replace + rewrite
    assert rows_of(after)[after.current_snapshot().snapshot_id] == before[head]
    view = IcebergTable(CATALOG, "mnt.t")
    assert needed(after) <= objects(view)
    # the compacted inputs, freed by expiry, are gone from S3: only what the one snapshot needs is left
    assert {f for f in objects(view) - needed(after) if not f.endswith(".metadata.json")} == set()
