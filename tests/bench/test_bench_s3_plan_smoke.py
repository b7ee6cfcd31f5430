"""The S3 planning benchmark runs end to end on a tiny table.

``bench/bench_s3_plan.py --size quick --repeat 1`` writes a small table with Paimon's Java core, uploads its
metadata to SeaweedFS, plans its expiry there and on local disk as whole processes (it exits 1 when the two
plans hold other actions), times the floors and prints its table. This test reads it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.java, pytest.mark.s3, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ROWS = ["lakesweep plan expire, local disk", "lakesweep plan expire, S3", "floor: GET of all", "GETs on one thread"]


def test_s3_planning_benchmark_plans_the_same_actions_on_s3_and_prints_every_row(tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_s3_plan.py"), "--size", "quick",
                           "--repeat", "1", "--cache", str(tmp_path / "cache"), "--json", str(report)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| step")]
    assert len(rows) == len(ROWS) and all(row.startswith("| " + r) for row, r in zip(rows, ROWS)), proc.stdout
    results = json.loads(report.read_text())
    table = next((tmp_path / "cache" / "tables").iterdir()) / "table"
    uploaded = sum(len(list((table / d).iterdir())) for d in ("schema", "snapshot", "manifest"))
    assert results["objects"] == uploaded > 0
    assert results["s3_s"] > 0 and results["local_s"] > 0 and results["get_all_parallel_s"] > 0
    assert [len(results["runs"][w]) for w in ("local", "s3")] == [1, 1]
