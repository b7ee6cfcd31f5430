"""pyspark is the ``spark`` extra: without it, plan, show, verify, inspect, journal and a dry run work, and apply
and doctor say what to install, before anything is done. Each command runs as a new interpreter in which
``import pyspark`` fails, as it does where the package is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.plan_io import read_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.cli.test_input_errors import REPO, tree
from tests.support import pypaimon_tables as pt

NO_PYSPARK = ("import sys; sys.modules['pyspark'] = None; from lakesweep.cli.main import main; "
              "sys.argv[0] = 'lakesweep'; main()")
MISSING = ("pyspark is not installed, and this runs on Spark: install it with  pip install 'lakesweep[spark]'  "
           "(plan, show, verify, inspect and journal work without it)")


def without_pyspark(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_PYSPARK, *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "COLUMNS": "200"})


def test_everything_but_spark_work_runs_without_pyspark_and_apply_says_what_to_install(tmp_path):
    table = pt.write_demo_table(str(tmp_path / "wh")).path
    plan, journal = tmp_path / "plan.parquet", tmp_path / "j.duckdb"
    blocked = subprocess.run([sys.executable, "-c", NO_PYSPARK.split("; from")[0] + "; import pyspark"],
                             capture_output=True, text=True, timeout=60)
    assert "ModuleNotFoundError: import of pyspark halted" in blocked.stderr  # the block holds

    def runs(*args):
        r = without_pyspark(*args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        assert "pyspark" not in r.stderr, (args, r.stderr)

    runs("inspect", table)
    runs("plan", "expire", table, "--out", plan, "--retain-min", 1, "--time-retained", "0 s")
    runs("show", plan)
    runs("apply", plan, "--dry-run", "--journal", journal)
    before = tree(table)
    r = without_pyspark("apply", plan, "--journal", journal, "--output", "json")
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip() == f"error: {MISSING}. Nothing was deleted and no apply was started."
    assert json.loads(r.stdout)["error"]["type"] == "SparkUnavailable"
    assert tree(table) == before

    # the journal of an apply made in this process, without Spark, read where pyspark is missing
    with DuckDBRecorder(str(journal)) as recorder:
        apply_plan(read_plan(str(plan)), recorder, executor=DriverExecutor())
    runs("verify", table)
    runs("journal", "plans", "--journal", journal)
    runs("journal", "files", "--journal", journal)

    r = without_pyspark("doctor", "--journal", tmp_path / "doctor" / "j.duckdb", "--output", "json")
    assert r.returncode == 1, r.stderr
    spark = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "spark")
    assert spark == {"name": "spark", "status": "failed", "found": {"pyspark": "not installed"},
                     "problem": "pyspark is not installed",
                     "fix": "install it with  pip install 'lakesweep[spark]'  (plan, show, verify, inspect and "
                            "journal work without it)"}
