"""apply as a user runs it: refusals before Spark, dry runs that say what they looked at, a plan applied
once already, and the Spark UI on request."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import lakesweep.applier.executors
from lakesweep.applier.spark_exec import session_conf
from lakesweep.cli.main import app
from lakesweep.engine.errors import SparkUnavailable
from lakesweep.engine.plan_io import read_plan
from tests.support import pypaimon_tables as pt

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def table(tmp_path):
    return pt.write_append_table(str(tmp_path / "wh"))


@pytest.fixture
def sessions(monkeypatch):
    """Every Spark session or context asked for, as (master, conf, on_ui); none is started (SparkUnavailable)."""
    asked = []

    def no_spark(master, conf, *, consequence, on_ui=None):
        asked.append((master, dict(conf or {}), on_ui))
        raise SparkUnavailable(f"no Spark in this test; {consequence}")

    monkeypatch.setattr(lakesweep.applier.executors, "start_session", no_spark)
    monkeypatch.setattr(lakesweep.applier.executors, "start_context", no_spark)
    return asked


def plan_of(table, tmp_path):
    out = tmp_path / "plan.parquet"
    r = run("plan", "expire", table.path, "--out", out, "--retain-min", 1, "--time-retained", "0 s",
            "--now", "2100-01-01T00:00:00Z")
    assert r.exit_code == 0, r.output
    return out


def a_deleted_file(table, plan_path):
    """A file the plan deletes in a bulk phase (on Spark when an apply looks at it)."""
    plan = read_plan(str(plan_path))
    a = next(a for a in plan.actions if str(a.kind) == "manifest-list")
    return os.path.join(table.path, a.path)


def test_a_plan_for_a_dropped_and_recreated_table_is_refused_without_starting_spark(table, tmp_path, sessions):
    plan = plan_of(table, tmp_path)
    shutil.rmtree(table.path)
    again = pt.write_append_table(str(tmp_path / "wh"), seed=1)
    assert again.path == table.path
    r = run("apply", plan, "--journal", tmp_path / "j.duckdb")
    assert r.exit_code == 1
    assert "the plan is for another table: it was made for" in r.stderr
    assert sessions == []


def test_a_dry_run_reads_metadata_only_and_says_so(table, tmp_path, sessions):
    plan = plan_of(table, tmp_path)
    gone = a_deleted_file(table, plan)
    os.remove(gone)
    doc = json.loads(run("apply", plan, "--dry-run", "-o", "json").stdout)
    assert (doc["state"], doc["files_checked"], doc["counts"]["ALREADY_ABSENT"]) == ("DRY_RUN", False, 0)
    assert doc["counts"]["DELETED"] == sum(1 for a in read_plan(str(plan)).actions if a.verb.deletes)
    text = run("apply", plan, "--dry-run")
    assert text.exit_code == 0, text.output
    assert "  checked: the table's metadata, not each file (--check-files looks)" in text.stdout.splitlines()
    assert sessions == []


def test_check_files_goes_with_dry_run(table, tmp_path, sessions):
    r = run("apply", plan_of(table, tmp_path), "--check-files", "--journal", tmp_path / "j.duckdb")
    assert r.exit_code == 1
    assert "--check-files goes with --dry-run (an apply looks at every file anyway)" in r.stderr
    assert sessions == []


def test_spark_ui_turns_the_ui_on_for_apply_resume_and_maintain(table, tmp_path, sessions):
    plan = plan_of(table, tmp_path)
    journal = tmp_path / "j.duckdb"
    assert run("apply", plan, "--journal", journal).exit_code == 1  # no Spark here: nothing started
    assert run("apply", plan, "--journal", journal, "--spark-ui").exit_code == 1
    plan_id = read_plan(str(plan)).plan_id
    assert run("resume", plan_id, "--journal", journal, "--spark-ui").exit_code == 1
    expirable = pt.write_append_table(str(tmp_path / "wh2"), options={"snapshot.num-retained.min": "1",
                                                                       "snapshot.time-retained": "1 ms"})
    run("maintain", "--warehouse", tmp_path / "wh2", "--operations", "expire", "--journal", tmp_path / "m.duckdb",
        "--spark-ui")
    assert sessions[-1][0] == "local[*]", expirable
    (_, plain, no_ui), *with_ui = sessions
    assert "spark.ui.enabled" not in plain and no_ui is None
    assert session_conf("local[*]", plain)["spark.ui.enabled"] == "false"
    assert len(with_ui) == 3
    for _, conf, on_ui in with_ui:
        assert session_conf("local[*]", conf)["spark.ui.enabled"] == "true"
        assert on_ui is not None


@pytest.mark.spark
@pytest.mark.slow
def test_a_finished_plan_says_when_it_was_applied_and_again_runs_it(table, tmp_path):
    plan = plan_of(table, tmp_path)
    plan_id = read_plan(str(plan)).plan_id
    journal = tmp_path / "j.duckdb"
    os.remove(a_deleted_file(table, plan))
    # a whole process, as a user runs it: one that already has a Spark session (the suite's) keeps its UI off
    looked = subprocess.run([sys.executable, "-m", "lakesweep.cli", "apply", str(plan), "--dry-run", "--check-files",
                             "--spark-ui", "--master", "local[1]", "-o", "json"],
                            capture_output=True, text=True, timeout=300)
    assert looked.returncode == 0, looked.stderr
    doc = json.loads(looked.stdout)
    assert (doc["files_checked"], doc["counts"]["ALREADY_ABSENT"]) == (True, 1)
    assert [line for line in looked.stderr.splitlines() if line.startswith("Spark UI: http://")], looked.stderr
    text = run("apply", plan, "--dry-run", "--check-files")
    assert "  checked: the table's metadata and every file" in text.stdout.splitlines()
    first = json.loads(run("apply", plan, "--journal", journal, "-o", "json").stdout)
    assert first["state"] == "COMPLETED"
    second = run("apply", plan, "--journal", journal)
    assert second.exit_code == 0, second.output
    assert second.stdout.startswith(f"Already applied: plan {plan_id} was already applied: apply {first['apply_id']} "
                                    "completed at ")
    assert "; nothing was done. To run it again (it deletes nothing already deleted), add --again" in second.stdout
    rerun = json.loads(run("apply", plan, "--journal", journal, "--again", "-o", "json").stdout)
    assert (rerun["state"], rerun["counts"]["DELETED"]) == ("COMPLETED", 0)
    assert rerun["apply_id"] != first["apply_id"]
