"""Iceberg orphan removal on tables pyiceberg wrote: what no metadata names and is old enough goes; statistics
files, this table's metadata files newer than the metadata log's oldest, young files and files of unknown age
stay."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.iceberg.kinds import OrphanKind
from lakesweep.engine.iceberg.table import canonical
from lakesweep.engine.plan import Action
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.orphans import resolve_orphan_options
from lakesweep.planner.kinds import plan_kind
from tests.iceberg.conftest import CATALOG, batch, files_on_disk, missing, needed_files, rows_by_snapshot, write_history
from tests.iceberg.test_expire import _edited

DAY = 86_400_000


def old(path: str, days: float = 10) -> str:
    t = os.path.getmtime(path) - days * 86400
    os.utime(path, (t, t))
    return path


def stray(table, rel: str, days: float = 10) -> str:
    path = os.path.join(canonical(table.metadata.location), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"left behind")
    return old(path, days)


def pq_write(path: str, data) -> None:
    import pyarrow.parquet as pq

    pq.write_table(data, path)


def plan(view, **flags):
    return plan_kind("orphans", "iceberg").read_and_plan(view, now_ms=_now(), options=resolve_orphan_options(view.options, **flags))


def _now():
    import time

    return int(time.time() * 1000)


def apply(p, tmp_path):
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        return apply_plan(p, rec, executor=DriverExecutor())


def test_old_unreferenced_files_are_removed_and_young_ones_kept(lake, tmp_path):
    t = write_history(lake)
    before = rows_by_snapshot(t)
    a = stray(t, "data/region=us/00000-dead.parquet")
    b = stray(t, "metadata/compact-failed.avro", days=4)
    young = stray(t, "data/temp-upload.parquet", days=1 / 24)
    p = plan(lake.view())
    assert sorted(x.path for x in p.actions) == ["data/region=us/00000-dead.parquet", "metadata/compact-failed.avro"]
    assert [x.kind for x in p.actions] == [OrphanKind.ORPHAN_DATA_FILE, OrphanKind.ORPHAN_METADATA_FILE]
    assert p.stats["kept"]["young"] == 1
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole and report.counts["DELETED"] == 2
    assert not os.path.exists(a) and not os.path.exists(b) and os.path.exists(young)
    after = lake.table()
    assert rows_by_snapshot(after) == before and missing(after) == set()


def test_every_file_a_pyiceberg_table_uses_is_kept_however_old(lake, tmp_path):
    t = write_history(lake)
    for path in files_on_disk(t):
        old(path, 30)
    p = plan(lake.view())
    assert p.actions == ()
    assert p.stats["kept"] == {"young": 0, "unknown_age": 0, "newer_metadata": 0, "hidden": 0}


def test_a_statistics_file_the_metadata_names_is_kept(lake, tmp_path):
    from pyiceberg.table.statistics import BlobMetadata, StatisticsFile

    t = write_history(lake)
    stats = stray(t, "metadata/stats-1.puffin")
    sid = t.current_snapshot().snapshot_id
    with t.update_statistics() as update:
        update.set_statistics(StatisticsFile(snapshot_id=sid, statistics_path="file://" + stats,
                                             file_size_in_bytes=11, file_footer_size_in_bytes=4,
                                             blob_metadata=[BlobMetadata(type="apache-datasketches-theta-v1",
                                                                         snapshot_id=sid, sequence_number=1,
                                                                         fields=[1], properties={})]))
    unused = stray(t, "metadata/stats-0.puffin")
    p = plan(lake.view())
    assert [x.path for x in p.actions] == ["metadata/stats-0.puffin"]
    apply(p, tmp_path)
    assert os.path.exists(stats) and not os.path.exists(unused)


def copy_metadata(t, rel: str, days: float = 10, **changes) -> str:
    """The table's current metadata file copied to ``rel`` (with ``changes`` to its JSON fields), aged."""
    with open(canonical(t.metadata_location)) as f:
        doc = json.load(f)
    doc.update(changes)
    path = os.path.join(canonical(t.metadata.location), rel)
    with open(path, "w") as f:
        json.dump(doc, f)
    return old(path, days)


def test_metadata_files_older_than_the_log_go_and_a_newer_one_of_this_table_left_out_of_it_stays(lake, tmp_path):
    t = write_history(lake, properties={"write.metadata.previous-versions-max": "2"})
    meta_dir = os.path.join(canonical(t.metadata.location), "metadata")
    logged = {canonical(e.metadata_file) for e in t.metadata.metadata_log} | {canonical(t.metadata_location)}
    all_meta = sorted(os.path.join(meta_dir, f) for f in os.listdir(meta_dir) if f.endswith(".metadata.json"))
    for f in all_meta:
        old(f)
    dropped = [f for f in all_meta if f not in logged]
    assert len(logged) == 3 and len(dropped) == len(all_meta) - 3 > 0
    # Metadata a REST catalog left out of the log: this table's (same table-uuid), newer than the log's oldest.
    newer = copy_metadata(t, "metadata/00099-5e3b1a2c-0000-0000-0000-000000000000.metadata.json")
    p = plan(lake.view())
    assert sorted(os.path.join(canonical(t.metadata.location), x.path) for x in p.actions) == dropped
    assert p.stats["kept"]["newer_metadata"] == 1 and newer in p.stats["warnings"][0]
    apply(p, tmp_path)
    assert os.path.exists(newer) and all(os.path.exists(f) for f in logged)
    assert lake.table().scan().to_arrow().num_rows == t.scan().to_arrow().num_rows


def test_a_stray_metadata_file_that_is_not_metadata_is_an_orphan_whatever_its_version(lake, tmp_path):
    """Iceberg's DeleteOrphanFiles deletes a ``*.metadata.json`` that is in no log; lakesweep keeps one only
    when it is this table's metadata, newer than the log's oldest."""
    t = write_history(lake)
    before = rows_by_snapshot(t)
    stale = stray(t, "metadata/00000-stale.metadata.json", days=5)  # version 0: not older than the log's oldest
    future = stray(t, "metadata/00099-garbage.metadata.json", days=5)  # no JSON at all, a version above the log
    other = copy_metadata(t, "metadata/00098-other.metadata.json", days=5,
                          **{"table-uuid": "00000000-0000-4000-8000-000000000042"})  # another table's
    young = stray(t, "metadata/00097-young.metadata.json", days=1 / 24)  # the age guard still holds
    p = plan(lake.view())
    assert sorted(x.path for x in p.actions) == ["metadata/00000-stale.metadata.json",
                                                 "metadata/00098-other.metadata.json",
                                                 "metadata/00099-garbage.metadata.json"]
    assert {x.kind for x in p.actions} == {OrphanKind.ORPHAN_METADATA_FILE}
    assert p.stats["kept"] == {"young": 1, "unknown_age": 0, "newer_metadata": 0, "hidden": 0}
    assert p.stats["warnings"] == []
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
        outcomes = {r.path: r.outcome.value for r in rec.file_records(plan_id=p.plan_id)}
    assert report.state == "COMPLETED" and report.whole and report.counts["DELETED"] == 3
    assert outcomes == {x.path: "DELETED" for x in p.actions}
    assert not any(os.path.exists(f) for f in (stale, future, other)) and os.path.exists(young)
    after = lake.table()
    assert rows_by_snapshot(after) == before and missing(after) == set()


def test_a_candidate_written_again_before_apply_is_skipped(lake, tmp_path):
    t = write_history(lake)
    a = stray(t, "data/a.parquet")
    b = stray(t, "data/b.parquet")
    p = plan(lake.view())
    os.utime(b)  # rewritten: young again
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert (report.counts["DELETED"], report.counts["SKIPPED_REFERENCED"]) == (1, 1)
    assert not os.path.exists(a) and os.path.exists(b)


def test_a_commit_between_plan_and_apply_refuses_the_plan_with_strict(lake, tmp_path):
    t = write_history(lake)
    a = stray(t, "data/a.parquet")
    p = plan(lake.view())
    t.append(batch(700))
    with pytest.raises(StalePlan, match="ref 'main' now points at"):
        with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
            apply_plan(p, rec, executor=DriverExecutor(), strict=True)
    assert os.path.exists(a)


def test_old_files_a_writer_commits_between_plan_and_apply_are_skipped_and_the_rest_deleted(lake, tmp_path):
    t = write_history(lake)
    a = stray(t, "data/a.parquet")
    b = stray(t, "data/b.parquet")  # an old Parquet file, as one copied in: older than the cut-off on disk
    import pyarrow as pa

    pq_write(b, pa.table({"id": pa.array([800, 801], pa.int64()), "region": ["us", "us"]}))
    os.utime(b, (1_000_000, 1_000_000))
    p = plan(lake.view())
    assert {x.path for x in p.actions} >= {"data/a.parquet", "data/b.parquet"}
    t.add_files([b])  # the writer commits it: an add_files of old Parquet
    t = lake.table()
    t.append(batch(700))
    before = rows_by_snapshot(lake.table())
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
        rows = {r.path: r.outcome.value for r in rec.file_records(plan_id=p.plan_id)}
    assert report.state == "COMPLETED" and report.whole
    assert (rows["data/a.parquet"], rows["data/b.parquet"]) == ("DELETED", "SKIPPED_REFERENCED")
    assert not os.path.exists(a) and os.path.exists(b)
    assert rows_by_snapshot(lake.table()) == before and missing(lake.table()) == set()


def test_an_edited_plan_naming_a_used_file_deletes_only_the_real_orphan(lake, tmp_path):
    t = write_history(lake)
    a = stray(t, "data/a.parquet")
    p = plan(lake.view())
    used = sorted(needed_files(t) - {canonical(t.metadata_location)})
    data = next(u for u in used if u.endswith(".parquet"))
    rel = data[len(p.table_location) + 1:]
    report = apply(_edited(p, [Action(OrphanKind.ORPHAN_DATA_FILE, rel)]), tmp_path)
    assert (report.counts["DELETED"], report.counts["SKIPPED_REFERENCED"]) == (1, 1)
    assert not os.path.exists(a) and os.path.exists(data) and missing(lake.table()) == set()
    current = canonical(t.metadata_location)[len(p.table_location) + 1:]
    with pytest.raises(PlanRejected, match="current metadata file"):
        apply(_edited(p, [Action(OrphanKind.ORPHAN_METADATA_FILE, current)]), tmp_path)
    with pytest.raises(PlanRejected, match="not under the table's metadata directory"):
        apply(_edited(p, [Action(OrphanKind.ORPHAN_METADATA_FILE, rel)]), tmp_path)
    with pytest.raises(PlanRejected, match="outside the table root"):
        apply(_edited(p, [Action(OrphanKind.ORPHAN_DATA_FILE, "/etc/hostname")]), tmp_path)


def test_a_table_under_the_table_location_refuses_the_plan(lake, tmp_path):
    t = write_history(lake)
    from tests.iceberg.conftest import SCHEMA

    lake.catalog.create_table("ns.inner", schema=SCHEMA, location=canonical(t.metadata.location) + "/data/inner")
    with pytest.raises(PlanRejected, match="Iceberg table ns.inner stores files at .*/data/inner \\(location\\), "
                                           "which lies in"):
        plan(lake.view())


def test_gc_disabled_is_refused(lake):
    from lakesweep.engine.errors import PlanRejected

    write_history(lake, properties={"gc.enabled": "false"})
    with pytest.raises(PlanRejected, match="gc.enabled=false"):
        plan(lake.view())


@pytest.mark.spark
def test_the_cli_plans_shows_applies_and_journals_iceberg_orphans(lake, tmp_path):
    t = write_history(lake)
    a = stray(t, "data/x.parquet", days=5)
    out, journal = str(tmp_path / "o.parquet"), str(tmp_path / "j.duckdb")
    runner = CliRunner()
    r = runner.invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", out,
                            "--orphan-older-than-hours", "72", "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["plan_kind"], doc["format"], [a["path"] for a in doc.get("actions", [])]) == ("orphans", "iceberg", [])
    assert doc["options"]["older_than"] == {"value": "72 h", "source": "flag"} and not doc["nothing_to_do"]
    r = runner.invoke(app, ["apply", out, "--journal", journal, "--master", "local[1]", "-o", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["counts"]["DELETED"] == 1 and not os.path.exists(a)
    r = runner.invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", out, "--empty-dirs"])
    assert r.exit_code == 1 and "--empty-dirs is an option of Paimon tables" in r.output
    r = runner.invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", out, "--older-than", "10 min"])
    assert r.exit_code == 1 and "less than 1 h before the plan's now" in " ".join(r.output.split())
    r = runner.invoke(app, ["plan", "orphans", str(tmp_path), "--out", out, "--orphan-older-than-hours", "3"])
    assert r.exit_code == 1 and "--orphan-older-than-hours is an option of Iceberg tables" in r.output


def test_an_edited_cut_off_less_than_an_hour_ago_is_refused_at_apply(lake, tmp_path):
    import dataclasses

    from lakesweep.engine.iceberg.requirements import AssertOrphansUnreferenced

    t = write_history(lake)
    a = stray(t, "data/a.parquet")
    p = plan(lake.view())
    reqs = tuple(dataclasses.replace(r, older_than_ms=_now()) if isinstance(r, AssertOrphansUnreferenced) else r
                 for r in p.requirements)
    edited = _edited(p, [])
    edited = dataclasses.replace(edited, requirements=reqs)
    with pytest.raises(StalePlan, match="less than 1 h ago"):
        apply(edited, tmp_path)
    assert os.path.exists(a)


def _live_data_file(table) -> str:
    head = table.current_snapshot()
    return canonical(next(e.data_file.file_path for m in head.manifests(table.io) for e in m.fetch_manifest_entry(table.io)))


def test_hidden_paths_are_never_orphans_as_in_icebergs_listing(lake, tmp_path):
    t = write_history(lake)
    live = _live_data_file(t)
    rel_live = live[len(canonical(t.metadata.location)) + 1:]
    folder, name = rel_live.rsplit("/", 1)
    hidden = [stray(t, f"{folder}/.{name}.crc"),  # a live file's checksum sidecar
              stray(t, "data/_SUCCESS"),
              stray(t, "data/.spark-staging-0f3a/region=us/part-00000.parquet"),  # a running write
              stray(t, "data/_temporary/0/part-00001.parquet"),
              stray(t, "metadata/.snap-1-1-abc.avro.crc")]
    orphan = stray(t, f"{folder}/00000-dead.parquet")
    p = plan(lake.view())
    assert [x.path for x in p.actions] == [f"{folder}/00000-dead.parquet"]
    assert p.stats["kept"]["hidden"] == len(hidden)
    report = apply(p, tmp_path)
    assert report.whole and report.counts["DELETED"] == 1
    assert not os.path.exists(orphan) and all(os.path.exists(h) for h in hidden)


def test_a_partition_whose_field_name_starts_with_underscore_is_not_hidden(lake, tmp_path):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType
    import pyarrow as pa

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "_cat", StringType(), required=False))
    t = lake.catalog.create_table("ns.u", schema=schema,
                                  partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "_cat")))
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "_cat": ["a", "b"]}))
    t = lake.table("ns.u")
    assert os.path.isdir(os.path.join(canonical(t.metadata.location), "data", "_cat=a"))
    orphan = stray(t, "data/_cat=a/00000-dead.parquet")
    sidecar = stray(t, "data/_cat=a/.00000-dead.parquet.crc")
    p = plan(lake.view("ns.u"))
    assert [x.path for x in p.actions] == ["data/_cat=a/00000-dead.parquet"]
    assert p.stats["kept"]["hidden"] == 1
    apply(p, tmp_path)
    assert not os.path.exists(orphan) and os.path.exists(sidecar)


def test_an_edited_orphan_plan_naming_a_hidden_file_deletes_nothing_there(lake, tmp_path):
    t = write_history(lake)
    staging = stray(t, "data/.spark-staging-0f3a/part-00000.parquet")
    p = plan(lake.view())
    bad = _edited(p, [Action(OrphanKind.ORPHAN_DATA_FILE, "data/.spark-staging-0f3a/part-00000.parquet", size=11)])
    report = apply(bad, tmp_path)
    assert report.counts.get("DELETED", 0) == 0 and os.path.exists(staging)
