"""The user-path benchmark runs end to end on a tiny table and prints every row of its report.

``bench/bench_user_path.py --quick`` writes a small table with Paimon's Java core, expires copies of it
with Paimon 0.9 (a JVM per run and a resident one), with current Paimon (a JVM per run) and with the
``lakesweep`` console script on local Spark,
checks that the trees agree, times the floors, Spark start-up and the journal commands, and prints the
tables. This test reads what it printed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.maven import JAVA_REFERENCES

pytestmark = [pytest.mark.java, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
NUM = r"[0-9][0-9,]*\.?[0-9]*"
CURRENT = JAVA_REFERENCES["paimon-bundle"].version

STEP_ROWS = [
    "Paimon expire, whole process (JVM start included)",
    "Paimon expire, warm JVM",
    f"Paimon {CURRENT} expire, whole process (JVM start included)",
    "lakesweep plan expire (process)",
    "lakesweep apply (process, local[*], DuckDB journal)",
    "lakesweep plan + apply (end to end)",
    "Spark start-up as apply starts it (process: import, SparkContext, preflight, stop)",
    "lakesweep apply excluding Spark start-up",
    "floor: fastavro decode of the",
    "floor: serial os.unlink of the",
]
RSS_ROWS = [
    "lakesweep plan expire (process; wait4 ru_maxrss)",
    "lakesweep plan expire (process; VmHWM)",
    "lakesweep apply driver (the lakesweep Python process; VmHWM)",
    "lakesweep apply's Spark JVM (a child of the driver; VmHWM)",
    "lakesweep apply's largest Spark Python worker (VmHWM)",
    "lakesweep apply (wait4 ru_maxrss: the driver and the children it reaped)",
    "Paimon expire JVM (whole process; VmHWM)",
    f"Paimon {CURRENT} expire JVM (whole process; VmHWM)",
]
JOURNAL_ROWS = [
    "append through Recorder.record_files",
    "lakesweep journal files --path '*",
    "lakesweep journal plans (",
    "lakesweep journal query \"SELECT count(*) AS files, sum(bytes) AS bytes FROM file_audit WHERE",
]
TARGET_ROWS = [
    "end to end (plan + apply) / Paimon whole process (quick)",
    "apply throughput excl. Spark start-up / serial unlink (quick)",
    "planning / fastavro floor (quick)",
    "planner peak RSS (quick)",
    "apply driver peak RSS (quick)",
    "journal files --path (",
    "journal plans (",
    "audit view query (journal query on file_audit) (",
]


def _row(out: str, prefix: str) -> str:
    rows = [line for line in out.splitlines() if line.startswith("| " + prefix)]
    assert len(rows) == 1, f"expected one row starting with {prefix!r}, got {rows}\n{out}"
    return rows[0]


@pytest.mark.slow  # a minute; the other benchmark smoke tests are slow too (the benchmarks are not the product)
def test_quick_benchmark_prints_every_row(tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_user_path.py"), "--quick", "--cache", str(tmp_path / "cache"),
         "--work", str(tmp_path), "--json", str(report)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr[-4000:]}"

    for prefix in STEP_ROWS:
        row = _row(out, prefix)
        assert re.search(rf"\| {NUM} \| {NUM}× \| {NUM}× \|", row), row
    assert re.search(rf"\| {NUM}× fastavro \|$", _row(out, "lakesweep plan expire (process)"))
    assert re.search(rf"\| {NUM}× unlink \|$", _row(out, "lakesweep apply excluding Spark start-up"))
    for prefix in RSS_ROWS:
        assert re.search(rf"\| {NUM} \|$", _row(out, prefix))
    assert re.search(rf"\| {NUM} rows/s \|$", _row(out, JOURNAL_ROWS[0]))
    for prefix in JOURNAL_ROWS[1:]:
        assert re.search(rf"\| {NUM} s \|$", _row(out, prefix))
    for prefix in TARGET_ROWS:
        assert re.search(r"\| (met|MISSED) \|$", _row(out, prefix))
    assert (f"identical to Paimon's expiry of the same copy (1 runs); Paimon {CURRENT}'s expiry of another copy "
            "left the same tree as Paimon 0.9's") in out

    data = json.loads(report.read_text())
    assert data["failures"] == []
    quick = data["results"]["quick"]
    assert quick["deletes"] > 100 and quick["expired"] == quick["table"]["snapshots"] - 10
    for key in ("paimon", "warm", "paimon_current", "plan", "apply", "spark", "avro", "unlink"):
        assert len(quick[key]) == 1 and quick[key][0] > 0, key
    # the Spark JVM is seen apart from the Python driver, and both hold real memory
    assert quick["apply_java"][0] > 100 * 1024 and quick["apply_driver"][0] > 50 * 1024
    assert quick["plan_hwm"][0] > 50 * 1024 and quick["plan_rss"][0] >= quick["plan_hwm"][0]
    assert quick["paimon_current_rss"][0] > 50 * 1024
    assert data["journal"]["facts"]["file_records"] >= 20_000
