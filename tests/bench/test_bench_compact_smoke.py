"""The compaction benchmark runs end to end on a tiny table and prints its row.

``bench/bench_compact.py --quick`` builds a small partitioned Iceberg table of small Parquet files (pyiceberg's
SQL catalog), compacts a copy with ``lakesweep plan compact`` and ``lakesweep apply`` on local Spark, checks
the rows (a multiset checksum), the data file count and the DELETED inputs, runs the pyarrow floor on the
same bins, compacts another copy with Iceberg's own ``rewrite_data_files`` on Spark and checks its rows, and
prints one row. This test reads what it printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# lakesweep's apply and Iceberg's rewrite_data_files, each with its Spark session: the slow tier
pytestmark = [pytest.mark.java, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
S = r"([0-9]+\.[0-9]{2})s"
N = r"([0-9][0-9,]*\.?[0-9]*)"


def test_quick_compaction_benchmark_prints_its_row(tmp_path):
    env = dict(os.environ, LAKESWEEP_BENCH_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_compact.py"), "--quick"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr[-4000:]}"

    rows = [line for line in out.splitlines() if line.lstrip().startswith("quick ")]
    assert len(rows) == 1, out
    m = re.fullmatch(
        rf"\s*quick\s+45\s+40\s+8\s+7\s+407,862 \|\s+{S}\s+{S}\s+{S}\s+{S}\s+{N}\s+{N} \|\s+{S}\s+{N}\s+{N} \|"
        rf"\s+{N}x \|\s+(\d+)Mi\s+(\d+)Mi\s+(\d+)Mi\s+(\d+)Mi \|\s+{S}\s+{S}\s+{N}x\s+(\d+)Mi", rows[0])
    assert m, rows[0]
    plan, apply, merge, commit = (float(m.group(i)) for i in range(1, 5))
    assert 0 < plan and 0 < commit < merge < apply
    floor = float(m.group(7))
    assert 0 < floor and float(m.group(10)) == pytest.approx(apply / floor, rel=0.05, abs=0.1)
    # the plan's process, apply's driver, its Spark JVM and a Python worker each hold real memory
    assert all(int(m.group(i)) > 50 for i in range(11, 15)), rows[0]
    iceberg, call = float(m.group(15)), float(m.group(16))
    assert 0 < call < iceberg and float(m.group(17)) == pytest.approx((plan + apply) / iceberg, rel=0.05, abs=0.02)
    assert int(m.group(18)) > 100, rows[0]  # Iceberg's Spark JVM
    assert ("4 partitions, 8 bins, 5 files not compacted; 13 data files after; rows, checksums and DELETED "
            "inputs checked after each of 1 runs") in out
