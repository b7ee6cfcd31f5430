"""The S3 benchmark runs end to end on a small table and prints a row for every arm.

``bench/bench_s3.py --objects 600 --per-object-objects 200`` starts SeaweedFS, writes four copies of a pypaimon
table with the extra files, lists, plans and applies (``lakesweep plan orphans`` and ``lakesweep apply`` on
local Spark as whole processes), runs the floor, the task code's bulk and per-object paths, checks that every
object is gone and the journal holds one DELETED record for each, and prints its table. This test reads it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# SeaweedFS, a Spark session and seven child processes: the slow tier.
pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MODES = ["listing", "list-floor", "plan (CLI)", "apply (CLI)", "apply (CLI), excl. Spark start-up", "floor", "bulk",
         "per-object"]


def test_small_s3_benchmark_prints_a_row_for_every_arm(tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_s3.py"), "--objects", "600",
                           "--per-object-objects", "200", "--json", str(report)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"

    rows = [line for line in proc.stdout.splitlines()
            if re.match(r"(list|plan|apply|floor|bulk|per-object)[^:]*\s{2,}[0-9]", line)]
    assert [re.split(r"\s{2,}", row)[0] for row in rows] == MODES, proc.stdout
    results = {r["mode"]: r for r in json.loads(report.read_text())}
    assert [results[m]["keys"] for m in ("floor", "bulk", "apply (CLI)", "per-object")] == [600, 600, 600, 200]
    # 600 keys, 6 in each of 100 directories, in DeleteObjects of 250: directories 0-41, 41-83 and 83-99 listed
    assert {k: v for k, v in results["plan (CLI)"]["planned_requests"].items() if v} == {"LIST": 102, "DELETE": 3}
    applied = results["apply (CLI)"]
    assert applied["throttled_events"] == 0
    assert 0 < applied["excl_seconds"] < applied["seconds"]
    assert applied["peaks_mib"]["driver"] > 0 and applied["peaks_mib"]["java"] > 0
