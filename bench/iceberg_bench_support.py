"""What the Iceberg benchmarks share: the console script, the cache of pristine tables, restoring a table to
the one path it was built at (its metadata names absolute locations), the catalog's environment, stopping
on a failed process, and a procedure of Iceberg's own Spark runtime run as a whole process."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

LAKESWEEP = os.path.join(os.path.dirname(sys.executable), "lakesweep")
CACHE_ROOT = Path(os.environ.get("LAKESWEEP_BENCH_CACHE", Path.home() / ".cache" / "lakesweep-bench"))
CATALOG = "bench"
ICEBERG_MASTER = "local[2]"

# One Spark session with Iceberg's runtime, one statement timed alone, the session stopped; the answer is
# the last line of stdout (Spark logs to stderr).
ICEBERG_CALL = r"""
import json, sys, time
conf, statement = json.loads(sys.argv[1]), sys.argv[2]
from pyspark.sql import SparkSession
builder = SparkSession.builder.appName("iceberg-procedure")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
t0 = time.perf_counter()
rows = [r.asDict() for r in spark.sql(statement).collect()]
call = time.perf_counter() - t0
spark.stop()
print(json.dumps({"call_s": call, "rows": rows}, default=str))
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def restore(base: Path) -> str:
    """``base/pristine`` copied over ``base/work`` (``cp -a``, hard links kept); the work copy's path."""
    work = base / "work"
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(["cp", "-a", str(base / "pristine"), str(work)], check=True)
    return str(work)


def env_for(copy: str) -> dict:
    """This environment with the pyiceberg settings of the SQL catalog ``bench`` of the table at ``copy``."""
    prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
    return dict(os.environ, **{prefix + "URI": f"sqlite:///{copy}/catalog.db", prefix + "WAREHOUSE": f"file://{copy}/wh",
                               prefix + "TYPE": "sql"})


def checked(result, what: str):
    """``result`` of ``run_process``; a failed process ends the benchmark with its output."""
    if result.returncode != 0:
        log(f"{what} failed ({result.returncode}): {result.stdout[-2000:]}\n{result.stderr[-3000:]}")
        sys.exit(1)
    return result


def iso_utc(when: datetime.datetime) -> str:
    """``when`` as a Spark SQL ``TIMESTAMP`` literal's text, in UTC (the session's time zone)."""
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def iceberg_procedure(copy: str, statement: str, what: str):
    """``statement`` (a ``CALL bench.system...``) run by Iceberg's Spark runtime (the jars pinned in
    tests/support/maven.py) on the table restored at ``copy``, whose SQLite catalog Iceberg's
    ``JdbcCatalog`` opens as catalog ``bench``: a new ``sys.executable`` process on ``local[2]``, timed
    whole with its VmHWM sampled. Returns that ``ProcResult`` and the child's answer: ``call_s``, the
    statement alone, and ``rows``, what the procedure returned."""
    from tests.support import maven
    from tests.support.iceberg_spark import SESSION_CONF, catalog_conf
    from userpath_proc import run_process

    jars = ",".join(map(str, maven.java_references("iceberg-spark", "sqlite-jdbc")))
    conf = {"spark.master": ICEBERG_MASTER, "spark.jars": jars, **SESSION_CONF,
            **catalog_conf(CATALOG, os.path.join(copy, "catalog.db"), os.path.join(copy, "wh"))}
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    result = checked(run_process([sys.executable, "-c", ICEBERG_CALL, json.dumps(conf), statement], env=env,
                                 sample=True), what)
    return result, json.loads(result.stdout.strip().splitlines()[-1])


def tree_files(root: str) -> set[str]:
    """Every file under ``root``, as a path relative to it."""
    out = set()
    for d, _, names in os.walk(root):
        rel = os.path.relpath(d, root)
        out.update(os.path.normpath(os.path.join(rel, n)) for n in names)
    return out
