"""``plan expire --catalog C --spark``: the manifests decoded on executors and the files only expired snapshots
reach chosen by a Spark job give the local planner's plan, byte for byte, on tables pyiceberg and Iceberg Java
(through Spark SQL) wrote."""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from lakesweep.applier import iceberg_expire, spark_tasks
from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.iceberg.table import IcebergTable
from lakesweep.engine.plan_io import read_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.kinds import plan_kind
from tests.iceberg.conftest import CATALOG, make_lake, write_history
from tests.iceberg.java_twins import java_catalog, reference_table, spark_written, with_refs


@pytest.fixture
def lake(tmp_path, monkeypatch, spark):
    """A lake as tests/iceberg's, on the module's Spark session (the CLI plans on it and leaves it running);
    a task for each manifest, so that a file named by several manifests meets itself across tasks."""
    monkeypatch.setattr(iceberg_expire, "TASK_ENTRIES", 1)
    monkeypatch.setattr(spark_tasks, "TASKS_PER_CORE", 10**9)
    return make_lake(tmp_path / "lake", monkeypatch)


def plan_both(tmp_path, ident: str, *flags: str) -> tuple:
    """The plans of ``plan expire`` without and with ``--spark`` at the same --now: (local, spark) bytes, and
    the spark plan read back."""
    now = str(int(time.time() * 1000))
    outs = []
    for extra in ([], ["--spark", "--master", "local[2]"]):
        out = tmp_path / f"{len(outs)}.plan"
        r = CliRunner().invoke(app, ["plan", "expire", ident, "--catalog", CATALOG, "--out", str(out), "--now", now,
                                     *flags, *extra])
        assert r.exit_code == 0, r.output
        outs.append(out)
    return outs[0].read_bytes(), outs[1].read_bytes(), read_plan(str(outs[1]))


def halfway(table) -> str:
    stamps = sorted(s.timestamp_ms for s in table.metadata.snapshots)
    return str(stamps[len(stamps) // 2])


def compact(ident: str, tmp_path) -> None:
    """lakesweep's compaction of ``ident``, applied: the data files it merges and the delete files that
    applied to them leave the current snapshot (pyiceberg itself cannot drop a delete file)."""
    entry = plan_kind("compact", "iceberg")
    view = IcebergTable(CATALOG, ident)
    p = entry.read_and_plan(view, now_ms=int(time.time() * 1000),
                            options=entry.resolve_options(view.options, min_input_files=2))
    with DuckDBRecorder(tmp_path / "compact.duckdb") as rec:
        assert apply_plan(p, rec, executor=DriverExecutor()).state == "COMPLETED"


@pytest.mark.parametrize("builder,compacted,freed", [
    ("churn", False, "data-file"), ("with_statistics", False, "statistics"),
    ("position_deletes", True, "position-delete-file"), ("equality_deletes", True, "equality-delete-file")])
@pytest.mark.slow
def test_spark_plans_the_reference_tables_expiry_byte_for_byte_as_the_local_planner(lake, tmp_path, builder,
                                                                                   compacted, freed):
    """Schema and spec evolution, branches and tags, position and equality deletes, statistics files."""
    reference_table(lake, builder, "ns.x")
    if compacted:
        compact("ns.x", tmp_path)
    local, spark, plan = plan_both(tmp_path, "ns.x", "--older-than", "0 s")
    assert plan.stats["summary"]["by_kind"][freed]["count"] > 0
    assert spark == local


@pytest.mark.slow
def test_spark_plans_a_history_with_deletes_and_overwrites_as_the_local_planner(lake, tmp_path):
    t = write_history(lake)
    local, spark, plan = plan_both(tmp_path, "ns.t", "--older-than", "0 s")
    kinds = plan.stats["summary"]["by_kind"]
    assert kinds["data-file"]["count"] > 0 and kinds["manifest"]["count"] > 0
    assert len(plan.scope.expired) == len(t.metadata.snapshots) - 1
    assert spark == local


def test_spark_plans_half_a_history_as_the_local_planner(lake, tmp_path):
    t = write_history(lake)
    local, spark, plan = plan_both(tmp_path, "ns.t", "--older-than", halfway(t))
    assert 0 < len(plan.scope.expired) < len(t.metadata.snapshots) - 1
    assert spark == local


@pytest.mark.parametrize("retain_last", ["1", "3"])
def test_spark_keeps_what_branches_and_tags_keep_as_the_local_planner(lake, tmp_path, retain_last):
    t = with_refs(lake)
    local, spark, plan = plan_both(tmp_path, "ns.r", "--older-than", "0 s", "--retain-last", retain_last)
    assert plan.scope.removed_refs == ["stale"] and plan.scope.expired
    assert plan.stats["retained_snapshots"] >= 3 and len(plan.scope.expired) < len(t.metadata.snapshots)
    assert spark == local


def test_spark_plans_nothing_when_nothing_expires_as_the_local_planner(lake, tmp_path):
    t = write_history(lake)
    local, spark, plan = plan_both(tmp_path, "ns.t", "--older-than", "10000 d")
    assert plan.scope.expired == [] and plan.actions == ()
    assert plan.stats["retained_snapshots"] == len(t.metadata.snapshots)
    assert spark == local


@pytest.mark.slow
def test_a_file_outside_the_table_is_counted_as_often_as_the_local_planner_meets_it(lake, tmp_path):
    """Data written to a write.data.path that is later dropped: outside every root, kept, and counted in the
    warning once per manifest entry that names it, on either side."""
    external = os.path.join(lake.root, "ext")
    t = write_history(lake, properties={"write.data.path": f"file://{external}"})
    with t.transaction() as tx:
        tx.remove_properties("write.data.path")
    t = lake.table()
    local, spark, plan = plan_both(tmp_path, "ns.t", "--older-than", "0 s")
    assert any("outside the table location" in w for w in plan.stats["warnings"])
    assert spark == local


def test_a_manifest_gone_refuses_the_plan_naming_it_on_spark_as_locally(lake, tmp_path):
    t = write_history(lake)
    first = t.metadata.snapshots[0]
    manifest = first.manifests(t.io)[0].manifest_path.removeprefix("file://")
    os.remove(manifest)
    outputs = []
    for extra in ([], ["--spark", "--master", "local[2]"]):
        out = tmp_path / f"{len(outputs)}.plan"
        r = CliRunner().invoke(app, ["plan", "expire", "ns.t", "--catalog", CATALOG, "--out", str(out),
                                     "--older-than", "0 s", *extra])
        assert r.exit_code == 1 and not out.exists()
        outputs.append(" ".join(r.output.split()))
    assert f"{manifest}: manifest not found" in outputs[0] and outputs[1] == outputs[0]


@pytest.mark.slow
def test_json_output_of_a_spark_plan_names_the_plan_written(lake, tmp_path):
    write_history(lake)
    out = tmp_path / "p.plan"
    r = CliRunner().invoke(app, ["plan", "expire", "ns.t", "--catalog", CATALOG, "--out", str(out), "--older-than",
                                 "0 s", "--spark", "--master", "local[2]", "--output", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["out"] == str(out) and doc["plan_id"] == read_plan(str(out)).plan_id


@pytest.mark.slow
@pytest.mark.java
def test_spark_plans_an_iceberg_java_table_with_a_rollback_a_tag_and_deletes_as_the_local_planner(ice, lake,
                                                                                                 tmp_path):
    """Written by Iceberg Java through Spark SQL: statistics, a tag, a rollback leaving a snapshot no ref
    reaches, merge-on-read position deletes, then Iceberg's own compaction, which drops the delete files."""
    spark_written(ice, lake)
    with java_catalog(ice, lake) as cat:
        ice.sql(f"CALL {cat}.system.rewrite_data_files(table => 'ns.s', options => map('min-input-files', '1', "
                "'delete-file-threshold', '1', 'remove-dangling-deletes', 'true'))")
    local, spark, plan = plan_both(tmp_path, "ns.s", "--older-than", "0 s")
    kinds = plan.stats["summary"]["by_kind"]
    assert plan.scope.expired and kinds["data-file"]["count"] > 0 and kinds["position-delete-file"]["count"] > 0
    assert spark == local


