"""Benchmark of the journal while apply runs: ``lakesweep apply`` of an orphan plan as a whole process,
alone and with ``lakesweep journal plans`` read in a loop by another process meanwhile.

    .venv/bin/python bench/bench_live_journal.py [--files 30000] [--repeat 3] [--master local[2]]

The table is a pypaimon table with ``--files`` orphan files (old placeholder data files in its bucket
directories), built once per run in a scratch directory and copied (``cp -a``) for each repetition, so
every apply deletes the same files. The apply's wall time (process start to exit, Spark start-up
included) is the median of ``--repeat`` runs. With a reader, the number of reads that succeeded and
the longest read are reported too; every read must succeed and see a count that never goes down.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LAKESWEEP = os.path.join(os.path.dirname(sys.executable), "lakesweep")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build_lake(work: Path, files: int) -> Path:
    """A pypaimon table with ``files`` orphan files three days old; returns the table root."""
    from tests.applier.test_safety import Lake

    shutil.rmtree(work, ignore_errors=True)
    lake = Lake(work / "wh")
    lake.commit("a")
    lake.commit("b")
    old = time.time() - 3 * 86400
    for i in range(files):
        d = os.path.join(lake.root, f"dt={'ab'[i % 2]}", f"bucket-{i % 4}")
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"data-orphan-{i:07d}.parquet")
        with open(p, "w") as f:
            f.write("x")
        os.utime(p, (old, old))
    return Path(lake.root)


READER = """
import json, subprocess, sys, time
journal, stop = sys.argv[1], sys.argv[2]
import os
reads, failures, counts, longest = 0, [], [], 0.0
while not os.path.exists(stop):
    t0 = time.perf_counter()
    p = subprocess.run([sys.argv[3], "journal", "plans", "--journal", journal, "-o", "json"],
                       capture_output=True, text=True)
    longest = max(longest, time.perf_counter() - t0)
    if p.returncode != 0:
        if "does not exist" not in p.stderr:
            failures.append(p.stderr.strip()[-300:])
        continue
    rows = json.loads(p.stdout)
    reads += 1
    counts.append(sum(r["deleted"] + r["already_absent"] + r["failed"] for r in rows))
print(json.dumps({"reads": reads, "failures": failures, "counts": counts, "longest_s": longest}))
"""


def one_apply(table: Path, plan: Path, work: Path, master: str, *, reader: bool) -> dict:
    copy = work / "run"
    if copy.exists():
        shutil.rmtree(copy)
    subprocess.run(["cp", "-a", str(table), str(copy)], check=True)
    # the plan names the table's location: apply a plan made for the copy
    plan_file = work / "run.plan"
    subprocess.run([LAKESWEEP, "plan", "orphans", str(copy), "--out", str(plan_file)], check=True,
                   capture_output=True)
    journal, stop = work / "run.duckdb", work / "stop"
    for p in (journal, Path(f"{journal}.wal"), Path(f"{journal}.lock"), stop):
        if p.exists():
            p.unlink()
    proc = None
    if reader:
        proc = subprocess.Popen([sys.executable, "-c", READER, str(journal), str(stop), LAKESWEEP],
                                stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    res = subprocess.run([LAKESWEEP, "apply", str(plan_file), "--journal", str(journal), "--master", master,
                          "--no-verify", "-o", "json"], capture_output=True, text=True)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"apply failed ({res.returncode}): {res.stderr[-2000:]}")
    out = {"apply_s": took}
    if proc is not None:
        stop.touch()
        seen = json.loads(proc.communicate(timeout=120)[0])
        counts = seen["counts"]
        out.update(reads=seen["reads"], failures=seen["failures"], longest_read_s=seen["longest_s"],
                   monotonic=all(a <= b for a, b in zip(counts, counts[1:])),
                   distinct_counts=len(set(counts)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-reader", action="store_true", help="time the apply alone only")
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="lakesweep-live-journal-"))
    work.mkdir(parents=True, exist_ok=True)
    log(f"building a table with {args.files} orphan files in {work}")
    table = build_lake(work / "src", args.files)
    results = {}
    for reader in ([False] if args.no_reader else [False, True]):
        runs = []
        for i in range(args.repeat):
            r = one_apply(table, work / "plan", work, args.master, reader=reader)
            log(f"{'with reader' if reader else 'alone'} #{i + 1}: {json.dumps(r)[:300]}")
            runs.append(r)
        results["with_reader" if reader else "alone"] = {
            "apply_s_median": statistics.median(r["apply_s"] for r in runs), "runs": runs}
    print(json.dumps({"files": args.files, "master": args.master, **results}, indent=1))
    if args.work is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
