"""The executors' Python: lakesweep's own interpreter on this machine, and a preflight task that refuses
executors which cannot run lakesweep's tasks, before any file is touched."""

import os
import shutil
import socket
import subprocess
import sys

import pytest

from lakesweep.applier.spark_exec import PythonChoice, executor_python, master_on_this_machine
from lakesweep.engine.plan_io import write_plan
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.conftest import REPO
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.table_builder import all_files

HOW_TO = (
    "Give the executors a Python that has lakesweep and its dependencies, with one of: "
    "--conf spark.pyspark.python=/path/to/python (an interpreter with lakesweep installed, at that path on "
    "every executor host); --conf spark.archives=lakesweep-env.tar.gz#env --conf "
    "spark.pyspark.python=./env/bin/python (a conda or venv environment with lakesweep installed, packed with "
    "conda-pack or venv-pack); --conf spark.submit.pyFiles=lakesweep.zip (spark-submit's --py-files: "
    "lakesweep's own packages, when the executors' Python already has pyarrow and lakesweep's other "
    "dependencies). Then check with 'lakesweep doctor' and the same --master and --conf options."
)


def words(text: str) -> str:
    """``text`` with every run of whitespace as one space: messages compare the same on one line or several."""
    return " ".join(text.split())


def stand_in_path(directory) -> str:
    """A PATH whose first directory holds ``python3`` and ``python`` stand-ins that run this Python's base
    interpreter with -S (no site-packages: no pyarrow, no lakesweep), as on a fresh machine."""
    base = os.path.join(sys.base_prefix, "bin", "python3")
    os.makedirs(directory, exist_ok=True)
    for name in ("python3", "python"):
        script = os.path.join(directory, name)
        with open(script, "w") as f:
            f.write(f'#!/bin/sh\nexec "{base}" -S "$@"\n')
        os.chmod(script, 0o755)
    return str(directory) + os.pathsep + os.environ["PATH"]


def lakesweep(*args, cwd, path=None, extra_env=None):
    """The CLI in a fresh process (its own JVM), with no Spark or Python settings inherited from the tests."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    if path is not None:
        env["PATH"] = path
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "lakesweep.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def planned(tmp_path):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    plan = make_plan(w.path, retain_min=3)
    plan_file = tmp_path / "plan.parquet"
    write_plan(plan, str(plan_file))
    return w, plan_file


def test_local_masters_and_loopback_standalone_masters_run_on_this_machine():
    for master in ("local", "local[*]", "local[2]", "local[2,3]", "local[*, 4]", "local-cluster[2,1,1024]",
                   "spark://127.0.0.1:7077", "spark://localhost:7077", f"spark://{socket.gethostname()}:7077",
                   "spark://[::1]:7077", "spark://127.0.0.1:7077,localhost:7078"):
        assert master_on_this_machine(master), master
    for master in ("yarn", "k8s://https://10.0.0.1:6443", "spark://192.0.2.10:7077",
                   "spark://127.0.0.1:7077,192.0.2.10:7077", "local[x]", "mesos://127.0.0.1:5050"):
        assert not master_on_this_machine(master), master


def test_executor_python_follows_spark_precedence_then_this_interpreter():
    env = {"PYSPARK_PYTHON": "/env/python"}
    assert executor_python("yarn", {"spark.pyspark.python": "/conf/python"}, env) == PythonChoice(
        "/conf/python", "--conf spark.pyspark.python")
    assert executor_python("local[*]", {}, env) == PythonChoice("/env/python", "PYSPARK_PYTHON")
    assert executor_python("local[*]", {}, {"PYSPARK_DRIVER_PYTHON": "/driver/python"}).python == sys.executable
    assert executor_python("spark://127.0.0.1:7077", {}, {}).python == sys.executable
    assert executor_python("spark://192.0.2.10:7077", {}, {}) == PythonChoice(
        None, "Spark's default: python3 on the executors' PATH")


@pytest.mark.spark
def test_apply_refuses_executors_without_lakesweep_and_touches_nothing(planned, tmp_path):
    w, plan_file = planned
    stand_in = tmp_path / "bin" / "python3"
    stand_in_path(stand_in.parent)
    before = all_files(w.path)
    r = lakesweep("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]",
                  "--conf", f"spark.pyspark.python={stand_in}", cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    base = os.path.join(sys.base_prefix, "bin", "python3")
    assert (
        f"error: the Spark executors cannot run lakesweep's tasks (master local[1]; executors' Python "
        f"'{stand_in}', from --conf spark.pyspark.python): on {socket.gethostname()}, {base} "
        f"(Python {sys.version.split()[0]}) "
        "cannot import pyarrow, pyarrow.fs (ModuleNotFoundError: No module named 'pyarrow'); "
        "cannot import lakesweep.engine.errors, lakesweep.engine.plan, lakesweep.engine.fileio, "
        "lakesweep.engine.paimon.kinds, lakesweep.engine.iceberg.kinds, lakesweep.journal.events, "
        "lakesweep.applier.actions, lakesweep.applier.spark_exec, lakesweep.applier.listing "
        "(ModuleNotFoundError: No module named 'lakesweep'). " + HOW_TO
    ) in words(r.stderr)
    assert "\tat " not in r.stderr and "Traceback" not in r.stderr and "Py4J" not in r.stderr
    assert all_files(w.path) == before
    # The session (and its preflight) comes before ApplyStarted: no unfinished apply is left to resume.
    with DuckDBRecorder(str(tmp_path / "j.duckdb")) as rec:
        assert [e.EVENT_TYPE for e in rec.events()] == ["PlanRecorded"]


@pytest.mark.spark
@pytest.mark.slow
def test_apply_refuses_an_interpreter_that_cannot_start_in_one_line(planned, tmp_path):
    w, plan_file = planned
    before = all_files(w.path)
    r = lakesweep("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]",
                  "--conf", "spark.pyspark.python=/nonexistent/python", cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    assert (
        "error: the Spark executors cannot run a Python task (master local[1]; executors' Python "
        "'/nonexistent/python', from --conf spark.pyspark.python): java.io.IOException: Cannot run program "
        '"/nonexistent/python": error=2, No such file or directory ' + HOW_TO
    ) in words(r.stderr)
    assert "\tat " not in r.stderr and "Traceback" not in r.stderr
    assert all_files(w.path) == before


@pytest.mark.spark
@pytest.mark.slow
def test_apply_refuses_executors_running_other_lakesweep_code(planned, tmp_path):
    w, plan_file = planned
    other = tmp_path / "other-lakesweep"
    for package in ("engine", "journal", "applier", "planner"):
        shutil.copytree(os.path.join(REPO, package), other / "lakesweep" / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "lakesweep" / "applier" / "actions.py", "a") as f:
        f.write("\nOLDER_RELEASE = True\n")
    before = all_files(w.path)
    r = lakesweep("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]",
                  "--conf", f"spark.executorEnv.PYTHONPATH={other}", cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    assert (
        f"error: the Spark executors cannot run lakesweep's tasks (master local[1]; executors' Python "
        f"'{sys.executable}', from lakesweep's own interpreter (the master runs on this machine)): on "
        f"{socket.gethostname()}, {sys.executable} (Python {sys.version.split()[0]}) has other lakesweep code "
        "(version 0.1.0, fingerprint "
    ) in words(r.stderr)
    assert " than the driver (version 0.1.0, fingerprint " in words(r.stderr)
    assert HOW_TO in words(r.stderr)
    assert all_files(w.path) == before


@pytest.mark.spark
@pytest.mark.slow
def test_default_local_session_runs_lakesweeps_interpreter_whatever_python3_is_on_path(planned, tmp_path):
    w, plan_file = planned
    path = stand_in_path(tmp_path / "stand-ins")
    r = lakesweep("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]", "-o", "json",
                  cwd=tmp_path, path=path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert PaimonTable(w.path).earliest_latest() == (6, 8)


@pytest.mark.spark
@pytest.mark.slow
def test_py_files_ship_lakesweep_to_executors_whose_python_has_only_its_dependencies(planned, tmp_path):
    # The executors' Python: this interpreter without site processing (so without the installed lakesweep)
    # and with site-packages on its path (so with pyarrow); lakesweep itself comes from the zip.
    import sysconfig

    w, plan_file = planned
    bare = tmp_path / "bin" / "python3"
    bare.parent.mkdir()
    bare.write_text(f'#!/bin/sh\nPYTHONPATH="{sysconfig.get_paths()["purelib"]}${{PYTHONPATH:+:$PYTHONPATH}}" '
                    f'exec "{sys.executable}" -S "$@"\n')
    bare.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # other tests may have set it to the repo
    assert subprocess.run([bare, "-c", "import pyarrow"], cwd=tmp_path, env=clean).returncode == 0
    # (an empty lakesweep/ folder a replaced install left in site-packages imports as a namespace: its code
    # is what must be missing)
    assert subprocess.run([bare, "-c", "import lakesweep.engine"], cwd=tmp_path, env=clean,
                          capture_output=True).returncode == 1
    # as docs/cluster.md builds it: the installed package, zipped with its directory entries
    target = tmp_path / "py-files"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "-q",
                    "--target", target, REPO], cwd=tmp_path, check=True, capture_output=True)
    archive = tmp_path / "lakesweep.zip"
    subprocess.run([sys.executable, "-m", "zipfile", "-c", archive, "lakesweep"], cwd=target, check=True)
    r = lakesweep("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]",
                  "--conf", f"spark.pyspark.python={bare}", "--conf", f"spark.submit.pyFiles={archive}",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert PaimonTable(w.path).earliest_latest() == (6, 8)


@pytest.mark.spark
@pytest.mark.slow
def test_preflight_gives_up_when_no_executor_comes(tmp_path):
    # A standalone master with no worker: the preflight task never gets an executor.
    import pyspark

    from tests.applier.test_standalone_cluster import free_port, wait_for
    from tests.support.processes import stop

    home = os.path.dirname(pyspark.__file__)
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp_path))
    port = free_port()
    with open(tmp_path / "master.out", "wb") as log:
        master = subprocess.Popen([os.path.join(home, "bin", "spark-class"), "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: b"I have been elected leader" in (tmp_path / "master.out").read_bytes(), 90,
                     "the master to start")
            code = (
                "import sys\n"
                "from lakesweep.applier.spark_exec import spark_session\n"
                "from lakesweep.applier.preflight import check_executors\n"
                "from lakesweep.engine.errors import ExecutorEnvironmentError\n"
                f"s = spark_session('spark://127.0.0.1:{port}', {{'spark.executor.memory': '512m'}}, preflight=False)\n"
                "try:\n"
                "    check_executors(s.sparkContext, timeout_s=5)\n"
                "except ExecutorEnvironmentError as e:\n"
                "    print(e)\n"
                "    sys.exit(3)\n"
                "finally:\n"
                "    s.stop()\n"
            )
            r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                               env={k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"})
        finally:
            stop(master)
    assert r.returncode == 3, r.stderr[-3000:]
    assert r.stdout.strip() == (
        f"no Spark executor ran lakesweep's preflight task within 5 s (master spark://127.0.0.1:{port}; "
        f"executors' Python '{sys.executable}', from the running SparkContext): the cluster has no free "
        "executor, or the master is unreachable. Check the master and the cluster's free cores and memory "
        "(spark.executor.memory, spark.cores.max)."
    )
