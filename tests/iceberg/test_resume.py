"""kill -9 of an Iceberg apply (the real CLI, Spark in local mode) right after its commit landed and before the
journal heard of it, or in the middle of its deletes; then resume: the commit is found, not made twice, and
the table ends as an uninterrupted apply leaves it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from lakesweep.applier.apply import DriverExecutor, resume
from lakesweep.engine.plan_io import write_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.expire import plan_iceberg_expire, resolve_expire_options
from lakesweep.planner.iceberg.rewrite_manifests import plan_rewrite_manifests, resolve_rewrite_options
from tests.applier.conftest import REPO
from tests.iceberg.conftest import files_on_disk, missing, needed_files, rows_by_snapshot, write_history



def killed_apply(plan, tmp_path, crash: str) -> str:
    plan_file = str(tmp_path / "plan.parquet")
    write_plan(plan, plan_file)
    journal = str(tmp_path / "j.duckdb")
    env = dict(os.environ, LAKESWEEP_TEST_CRASH=crash, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "lakesweep.cli", "apply", plan_file, "--journal", journal,
                           "--master", "local[1]", "-o", "json"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    return journal


@pytest.mark.spark
@pytest.mark.parametrize("crash", ["before-journal:1", "after-journal:LAST_COMMIT_PLUS_1"])
@pytest.mark.slow
def test_a_killed_expiry_resumes_without_a_second_commit(lake, tmp_path, crash):
    t = write_history(lake)
    view = lake.view()
    p = plan_iceberg_expire(view, now_ms=int(time.time() * 1000),
                            options=resolve_expire_options(view.options, older_than="0 s"))
    crash = crash.replace("LAST_COMMIT_PLUS_1", str(len(p.scope.expired) + 1))
    before = rows_by_snapshot(t)
    n_log = len(t.metadata.metadata_log)
    journal = killed_apply(p, tmp_path, crash)
    assert not set(p.scope.expired) & {s.snapshot_id for s in lake.table().metadata.snapshots}  # it committed
    with DuckDBRecorder(journal) as rec:
        [report] = resume(rec, executor=DriverExecutor())
    assert (report.state, report.resumed, report.whole) == ("COMPLETED", True, True)
    after = lake.table()
    assert len(after.metadata.metadata_log) == n_log + 1  # one commit, not two
    assert rows_by_snapshot(after) == {k: v for k, v in before.items() if k not in p.scope.expired}
    assert missing(after) == set() and files_on_disk(after) == needed_files(after)


@pytest.mark.spark
def test_a_killed_manifest_rewrite_is_found_on_resume(lake, tmp_path):
    write_history(lake, appends=6, churn=False)
    view = lake.view()
    p = plan_rewrite_manifests(view, now_ms=0, options=resolve_rewrite_options(view.options))
    n = len(lake.table().metadata.snapshots)
    journal = killed_apply(p, tmp_path, "before-journal:1")
    assert len(lake.table().metadata.snapshots) == n + 1
    with DuckDBRecorder(journal) as rec:
        [report] = resume(rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.counts["ALREADY_COMMITTED"] == len(p.actions)
    assert len(lake.table().metadata.snapshots) == n + 1
