"""What the Iceberg benchmarks share: the console script, the cache of pristine tables, restoring a table to
the one path it was built at (its metadata names absolute locations), the catalog's environment, and
stopping on a failed process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

LAKESWEEP = os.path.join(os.path.dirname(sys.executable), "lakesweep")
CACHE_ROOT = Path(os.environ.get("LAKESWEEP_BENCH_CACHE", Path.home() / ".cache" / "lakesweep-bench"))
CATALOG = "bench"


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
