"""``plan expire TABLE --spark``: a Paimon table's delta and changelog manifests decoded on executors and reduced
by a Spark job give the local planner's plan, byte for byte, on tables Paimon 0.9's Java core and pypaimon
wrote: tags, changelog files, a decoupled changelog lifecycle, nothing to expire, a manifest gone."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from typer.testing import CliRunner

from lakesweep.applier import paimon_expire, spark_tasks
from lakesweep.cli.main import app
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import read_plan
from tests.support import pypaimon_tables as pt
from tests.support.processes import LAKESWEEP

SPARK = ["--spark", "--master", "local[2]"]
EVERYTHING = ["--retain-min", "1", "--time-retained", "0 s", "--max-deletes", "1000"]


@pytest.fixture
def one_per_task(monkeypatch, spark):
    """A task for each manifest, so that a file a delta adds and deletes meets itself across tasks; planned
    on the module's Spark session (the CLI plans on it and leaves it running)."""
    monkeypatch.setattr(paimon_expire, "TASK_BYTES", 1)
    monkeypatch.setattr(spark_tasks, "TASKS_PER_CORE", 10**9)


def plan_both(tmp_path, root: str, *flags: str) -> tuple:
    """The plans of ``plan expire`` without and with ``--spark`` at the same --now: (local, spark) bytes, and
    the spark plan read back."""
    now = str(int(time.time() * 1000))
    outs = []
    for extra in ([], SPARK):
        out = tmp_path / f"{len(outs)}.plan"
        r = CliRunner().invoke(app, ["plan", "expire", root, "--out", str(out), "--now", now, *flags, *extra])
        assert r.exit_code == 0, r.output
        outs.append(out)
    return outs[0].read_bytes(), outs[1].read_bytes(), read_plan(str(outs[1]))


def counts(plan) -> dict[str, int]:
    return {kind: v["count"] for kind, v in plan.stats["summary"]["by_kind"].items()}


@pytest.mark.slow
@pytest.mark.java
@pytest.mark.parametrize("kind,seed", [("pk", 2), ("append", 3)])
def test_spark_plans_a_paimon_0_9_table_with_tags_byte_for_byte_as_the_local_planner(paimon_java, one_per_task,
                                                                                     tmp_path, kind, seed):
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=seed, kind=kind, steps=28, ops={"consumer": 0, "tag": 4, "untag": 0})
    assert open_table(root).tags()
    local, spark, plan = plan_both(tmp_path, root, *EVERYTHING)
    assert counts(plan)["data-file"] > 0 and plan.stats["protected_by_tags"] > 0
    assert spark == local


@pytest.mark.slow
@pytest.mark.java
def test_spark_plans_changelog_files_as_the_local_planner(paimon_java, one_per_task, tmp_path):
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=4, kind="pk", steps=20, options={"changelog-producer": "input"},
                         ops={"consumer": 0})
    local, spark, plan = plan_both(tmp_path, root, *EVERYTHING)
    assert counts(plan)["changelog-file"] > 0 and counts(plan)["data-file"] > 0
    assert spark == local


@pytest.mark.slow
@pytest.mark.java
@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_spark_plans_a_decoupled_changelog_lifecycle_as_the_local_planner(paimon_java, one_per_task, tmp_path,
                                                                          producer):
    """changelog.num-retained.max above the snapshots': with producer none the APPEND files wait for changelog
    expiry (counted as deferred), with lookup the changelog files stay with their changelogs."""
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=5, kind="pk", steps=20, ops={"consumer": 0, "tag": 0, "untag": 0},
                         options={"changelog-producer": producer, "changelog.num-retained.max": "1000"})
    local, spark, plan = plan_both(tmp_path, root, *EVERYTHING, "--retain-max", "3")
    assert plan.stats["changelog_decoupled"] and "changelog-file" not in counts(plan)
    assert (plan.stats["deferred_to_changelog"] > 0) is (producer == "none")
    assert spark == local


@pytest.mark.slow
def test_spark_plans_a_pypaimon_primary_key_table_as_the_local_planner(one_per_task, tmp_path):
    """Never compacted: its expiry frees metadata only."""
    written = pt.write_pk_table(str(tmp_path / "wh"), commits=8)
    local, spark, plan = plan_both(tmp_path, written.path, *EVERYTHING)
    assert (plan.begin, plan.end) == (1, 8) and counts(plan)["manifest-list"] == 12
    assert spark == local


def test_spark_plans_a_pypaimon_append_table_whose_tag_protects_what_an_overwrite_deleted(one_per_task, tmp_path):
    written = pt.write_append_table(str(tmp_path / "wh"), commits=8)
    os.remove(os.path.join(written.path, "consumer", "consumer-c1"))
    local, spark, plan = plan_both(tmp_path, written.path, *EVERYTHING)
    assert (plan.begin, plan.end) == (1, 9) and plan.stats["protected_by_tags"] > 0
    assert spark == local


@pytest.mark.java
def test_spark_plans_nothing_when_nothing_expires_as_the_local_planner(paimon_java, one_per_task, tmp_path):
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=2, kind="pk", steps=12, ops={"consumer": 0})
    local, spark, plan = plan_both(tmp_path, root, "--retain-min", "1000")
    assert not plan.deletes_anything and plan.stats["bound"] == "retain-min"
    assert spark == local


def delta_manifest_gone(paimon_java, tmp_path) -> tuple[str, str]:
    """A Paimon 0.9 table with the first delta manifest of its third snapshot removed: (root, its path)."""
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=2, kind="pk", steps=16, ops={"consumer": 0, "tag": 0, "untag": 0})
    t = open_table(root)
    path = t.paths.manifest(t.manifest_list(t.snapshot(3).delta_manifest_list)[0].file_name)
    os.remove(path)
    return root, path


@pytest.mark.java
@pytest.mark.slow
def test_a_delta_manifest_gone_refuses_the_plan_naming_it_on_spark_as_locally(paimon_java, one_per_task, tmp_path):
    root, path = delta_manifest_gone(paimon_java, tmp_path)
    outputs = []
    for extra in ([], SPARK):
        out = tmp_path / f"{len(outputs)}.plan"
        r = CliRunner().invoke(app, ["plan", "expire", root, "--out", str(out), *EVERYTHING, *extra])
        assert r.exit_code == 1 and not out.exists()
        outputs.append(" ".join(r.output.split()))
    assert f"{path}: manifest not found" in outputs[0] and outputs[1] == outputs[0]


@pytest.mark.slow
@pytest.mark.java
def test_a_delta_manifest_gone_is_skipped_with_the_same_warning_on_spark_as_locally(paimon_java, one_per_task,
                                                                                    tmp_path):
    root, path = delta_manifest_gone(paimon_java, tmp_path)
    local, spark, plan = plan_both(tmp_path, root, *EVERYTHING, "--skip-unreadable")
    assert plan.stats["skipped_snapshots"] == [3]
    assert f"{path}: manifest not found -> data files deleted by snapshot 3 are kept" in plan.stats["warnings"]
    assert spark == local


@pytest.mark.slow
@pytest.mark.spark
def test_the_cli_on_spark_writes_the_plan_it_writes_without(tmp_path):
    """``lakesweep plan expire PATH --spark`` as a user runs it (its own session on local[2])."""
    written = pt.write_pk_table(str(tmp_path / "wh"), commits=6)
    now = str(int(time.time() * 1000))
    outs = []
    for extra in ([], SPARK):
        out = tmp_path / f"{len(outs)}.plan"
        r = subprocess.run([*LAKESWEEP, "plan", "expire", written.path, "--out", str(out), "--now", now,
                            *EVERYTHING, *extra],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        outs.append(out.read_bytes())
    assert read_plan(str(tmp_path / "1.plan")).actions
    assert outs[1] == outs[0]
