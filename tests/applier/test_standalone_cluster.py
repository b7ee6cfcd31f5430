"""Apply on a real Spark standalone cluster: a master and a worker on loopback, started with the
spark-class launcher shipped in the pyspark wheel."""

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

import pyspark
from lakesweep.engine.plan import Verb
from lakesweep.engine.plan_io import read_plan, write_plan
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.journal.audit import list_files
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.conftest import REPO
from tests.applier.test_s3_credentials import SECRET, cli, files_holding, shared_files, table_on_s3
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.seaweed import list_tree
from tests.support.processes import stop

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass(frozen=True)
class Cluster:
    url: str
    work_dir: str  # the worker's: a directory per application, a directory per executor in it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = os.path.dirname(pyspark.__file__)
    logs = tmp_path_factory.mktemp("spark-logs")
    # No AWS variables: the executors get S3 credentials from the driver (forward_credentials), not from here.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(logs), PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(logs / "work"))
    mport, wport = free_port(), free_port()
    spark_class = os.path.join(home, "bin", "spark-class")
    master_log, worker_log = open(logs / "master.out", "wb"), open(logs / "worker.out", "wb")
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(mport), "--webui-port", str(free_port())],
                              env=env, stdout=master_log, stderr=subprocess.STDOUT)
    url = f"spark://127.0.0.1:{mport}"
    worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                               "--port", str(wport), "--webui-port", str(free_port()), "--cores", "1",
                               "--memory", "1g"],
                              env=env, stdout=worker_log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: b"Successfully registered with master" in (logs / "worker.out").read_bytes(), 90,
                 "the worker to register")
        yield Cluster(url, str(logs / "work"))
    finally:
        stop(worker, master)
        master_log.close()
        worker_log.close()


def test_apply_on_a_standalone_master_and_worker(cluster, tmp_path):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    plan = make_plan(w.path, retain_min=3)
    plan_file = str(tmp_path / "plan.parquet")
    write_plan(plan, plan_file)
    journal = str(tmp_path / "j.duckdb")
    env = dict(os.environ, PYTHONPATH=REPO, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(
        [sys.executable, "-m", "lakesweep.cli", "apply", plan_file, "--journal", journal, "--master", cluster.url,
         "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1", "-o", "json"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert PaimonTable(w.path).earliest_latest() == (6, 8)
    with DuckDBRecorder(journal) as rec:
        started = [e for e in rec.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "ApplyStarted"]
        assert [e.master for e in started] == [cluster.url]
        rows = list_files(rec, plan_id=plan.plan_id, kind="data-file")
    assert [r["outcome"] for r in rows] == ["DELETED"]


@pytest.mark.slow
def test_an_s3_plan_is_applied_by_executors_in_their_own_processes(cluster, s3, tmp_path):
    kept, prefix = table_on_s3(s3, tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    # A profile, as on a developer's machine: the worker has no AWS variables, so the executors sign with it
    # only because the driver hands AWS_PROFILE and the files' paths over (the master runs on this machine).
    env = {"AWS_ENDPOINT_URL": s3["AWS_ENDPOINT_URL"], "AWS_PROFILE": "lake", **shared_files(tmp_path / "aws"),
           "PYTHONPATH": REPO, "PYSPARK_PYTHON": sys.executable}
    assert cli("plan", "expire", f"s3://{prefix}", "--out", run / "plan.parquet", "--retain-min", "3",
               "--time-retained", "0 s", env=env, cwd=run).returncode == 0
    plan = read_plan(str(run / "plan.parquet"))
    before = set(os.listdir(cluster.work_dir))
    proc = cli("apply", run / "plan.parquet", "--journal", run / "j.duckdb", "--master", cluster.url, "-o", "json",
               "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1", env=env, cwd=run)
    assert proc.returncode == 0, proc.stderr[-3000:]

    apps = sorted(set(os.listdir(cluster.work_dir)) - before)
    assert len(apps) == 1 and os.listdir(os.path.join(cluster.work_dir, apps[0])), apps  # its executor ran there
    with DuckDBRecorder(str(run / "j.duckdb")) as rec:
        rows = list_files(rec, plan_id=plan.plan_id)
    outcome = {Verb.DELETE_FILE: "DELETED", Verb.WRITE_FILE: "WRITTEN"}
    assert sorted((r["path"], r["outcome"]) for r in rows) == sorted((a.path, outcome[a.verb]) for a in plan.actions)
    assert list_tree(s3["fs"], prefix) == kept
    deleted = {a.path for a in plan.actions if a.verb == Verb.DELETE_FILE}
    assert len(deleted) == 14 and deleted.isdisjoint(kept)
    assert files_holding(run, SECRET) == []
