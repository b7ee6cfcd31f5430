"""The Iceberg expiry benchmark runs end to end on a tiny table and prints its row.

``bench/bench_iceberg.py --quick`` builds an Iceberg table of 400 data files in 78 snapshots (pyiceberg's SQL
catalog), expires copies of it with pyiceberg, with ``lakesweep plan expire`` and ``lakesweep apply`` on
local Spark and with Iceberg's own ``expire_snapshots`` on Spark, checks that lakesweep and Iceberg deleted
the same files, runs the floors (whole, projected and parallel decoding; unlink on a thread per core), and
prints one row. This test reads what it printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Two Spark sessions (lakesweep apply, Iceberg's procedure) on top of the quick table: the slow tier.
pytestmark = [pytest.mark.java, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
S = r"([0-9]+\.[0-9]{2})s"
N = r"([0-9][0-9,]*\.?[0-9]*)"


def test_quick_iceberg_expiry_benchmark_prints_its_row(tmp_path):
    env = dict(os.environ, LAKESWEEP_BENCH_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_iceberg.py"), "--quick"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr[-4000:]}"

    rows = [line for line in out.splitlines() if line.lstrip().startswith("400 ")]
    assert len(rows) == 1, out
    m = re.fullmatch(rf"\s*400\s+532 \|\s+{S}\s+{S}\s+{S} \|\s+{S}\s+{S}\s+{S}\s+{S} \|\s+{N}x\s+{N}x \|"
                     rf"\s+(\d+)Mi\s+(\d+)Mi \|\s+{S}\s+{S}\s+{N}x\s+(\d+)Mi", rows[0])
    assert m, rows[0]
    plan, apply = float(m.group(2)), float(m.group(3))
    decode, projected, parallel, unlink = (float(m.group(i)) for i in (4, 5, 6, 7))
    assert 0 < plan and 0 < apply and 0 < decode and 0 < projected and 0 < parallel and 0 <= unlink
    assert float(m.group(8)) == pytest.approx(plan / parallel, rel=0.05, abs=0.05), rows[0]
    assert all(int(m.group(i)) > 50 for i in (10, 11)), rows[0]
    iceberg, call = float(m.group(12)), float(m.group(13))
    assert 0 < call < iceberg and float(m.group(14)) == pytest.approx((plan + apply) / iceberg, rel=0.05, abs=0.02)
    assert int(m.group(15)) > 100, rows[0]  # Iceberg's Spark JVM
    assert ("Iceberg expire_snapshots deleted 380 data files, 75 manifests and 77 manifest lists: the same 532 "
            "files lakesweep deleted, checked after each of 1 runs") in out
