"""Benchmark of a partition drop as a user runs it: ``lakesweep plan partitions`` and ``lakesweep apply`` as
whole processes, against Apache Paimon's own ``PartitionExpire`` and the physical floor.

    .venv/bin/python bench/bench_partitions.py [--sizes 30k,300k] [--repeat 3]
    .venv/bin/python bench/bench_partitions.py --quick        # a tiny table: a smoke test of the benchmark

The tables are bench_user_path.py's (bench/userpath_tables.py: written by Paimon 0.9's Java core, cached
under ``~/.cache/lakesweep-bench``), their partitions ``dt`` days from 2024-01-01. Each repetition drops,
on fresh copies (``cp -a``) of the same table, every partition before the middle one (values-time):

* Paimon, warm JVM: ``PartitionExpire`` (the ``expire_partitions`` procedure's run) in a JVM that is
  already running and has dropped partitions of a copy of this table before;
* ``lakesweep plan partitions`` and ``lakesweep apply`` (a new DuckDB journal), each the console script
  as its own process; apply commits without starting Spark (the plan has only a commit phase);
* the floor, timed in a child process: fastavro decoding of the latest snapshot's manifest lists and
  manifests, which any drop must read, and nothing else;
* peak RSS of the planning and the applying process (``ru_maxrss`` from ``wait4``).

Afterwards the OVERWRITE snapshot each side committed must mark exactly the same files DELETE, or the
benchmark says so and exits 1. Medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from userpath_proc import run_process  # noqa: E402
from userpath_tables import SPECS, copy_table, ensure_table  # noqa: E402

LAKESWEEP = os.path.join(os.path.dirname(sys.executable), "lakesweep")
PAIMON_JVM = ("-Xmx4g", "-XX:+UseParallelGC")
FLOOR = """
import io, json, sys, time
import fastavro
root = sys.argv[1]
t0 = time.perf_counter()
latest = int(open(root + "/snapshot/LATEST").read())
snap = json.load(open(f"{root}/snapshot/snapshot-{latest}"))
n = 0
for lst in (snap["baseManifestList"], snap["deltaManifestList"]):
    for meta in fastavro.reader(open(f"{root}/manifest/{lst}", "rb")):
        for rec in fastavro.reader(open(f"{root}/manifest/{meta['_FILE_NAME']}", "rb")):
            n += 1
print(json.dumps({"seconds": time.perf_counter() - t0, "entries": n}))
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def deleted_by_latest(root: Path) -> set[tuple[str, int, str]]:
    """(partition, bucket, file) of the DELETE entries the newest snapshot's delta holds."""
    from lakesweep.engine.paimon.model import FileKind
    from lakesweep.engine.paimon.table import open_table

    t = open_table(str(root))
    snap = t.snapshot(t.earliest_latest()[1])
    assert snap.commit_kind == "OVERWRITE", snap.commit_kind
    return {(t.paths.partition_path(e.partition), e.bucket, e.file.file_name)
            for m in t.manifest_list(snap.delta_manifest_list) for e in t.manifest(m.file_name)
            if e.kind == FileKind.DELETE}


def cut_off(table: Path) -> tuple[str, int]:
    """The expiration time (whole days back from now) that drops the partitions before the middle one,
    and how many partitions there are."""
    days = sorted(p.name[len("dt="):] for p in table.iterdir() if p.name.startswith("dt="))
    middle = datetime.date.fromisoformat(days[len(days) // 2])
    return f"{(datetime.date.today() - middle).days} d", len(days)


def bench_size(name: str, args, work: Path, warm, failures: list[str]) -> dict:
    table, meta = ensure_table(SPECS[name], args.cache, log)
    table = table / "table" if (table / "table").is_dir() else table
    expiration, n_partitions = cut_off(table)
    r: dict = {"meta": meta, "partitions": n_partitions, "plan": [], "apply": [], "paimon": [], "floor": [],
               "plan_rss": [], "apply_rss": []}
    warmup = copy_table(table, work / f"{name}-warm")
    now = datetime.datetime.now().replace(microsecond=0).isoformat()
    warm.expire_partitions(str(warmup), expiration_time=expiration, now=now)
    shutil.rmtree(warmup)
    for i in range(args.repeat):
        ours, theirs = copy_table(table, work / f"{name}-ours-{i}"), copy_table(table, work / f"{name}-theirs-{i}")
        now = datetime.datetime.now().replace(microsecond=0)
        t0 = time.perf_counter()
        java = warm.expire_partitions(str(theirs), expiration_time=expiration, now=now.isoformat())
        r["paimon"].append(time.perf_counter() - t0)
        plan_file = work / f"{name}-{i}.parquet"
        p = run_process([LAKESWEEP, "plan", "partitions", str(ours), "--out", str(plan_file), "--expiration-time",
                         expiration, "--max-expires", "100000", "--time-zone", "UTC", "-o", "json"]).check()
        a = run_process([LAKESWEEP, "apply", str(plan_file), "--journal", str(work / f"{name}-{i}.duckdb"),
                         "-o", "json"]).check()
        r["plan"].append(p.seconds)
        r["apply"].append(a.seconds)
        r["plan_rss"].append(p.maxrss_kib / 1024)
        r["apply_rss"].append(a.maxrss_kib / 1024)
        f = run_process([sys.executable, "-c", FLOOR, str(ours)]).check()
        import json

        r["floor"].append(json.loads(f.stdout)["seconds"])
        r["dropped"] = len(java["expired"])
        mine, paimons = deleted_by_latest(ours), deleted_by_latest(theirs)
        r["files"] = len(mine)
        if mine != paimons:
            failures.append(f"{name} run {i}: lakesweep marked {len(mine)} files DELETE, Paimon {len(paimons)}; "
                            f"e.g. {sorted(mine ^ paimons)[:3]}")
        shutil.rmtree(ours)
        shutil.rmtree(theirs)
        log(f"{name} run {i}: Paimon {r['paimon'][-1]:.1f} s, plan {p.seconds:.1f} s, apply {a.seconds:.1f} s")
    return r


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="30k,300k", help="comma-separated: 30k, 300k (default: both)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per measurement (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="a tiny table: checks the benchmark runs")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("LAKESWEEP_BENCH_CACHE", "")
                                                       or Path.home() / ".cache" / "lakesweep-bench"))
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a new temporary one)")
    args = ap.parse_args(argv)
    sizes = ["quick"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in SPECS:
            ap.error(f"unknown size {s!r}; choose from {', '.join(k for k in SPECS if k != 'quick')}")
    args.repeat = args.repeat or (1 if args.quick else 3)

    from tests.support.paimon_java import Harness, harness_classpath

    work = Path(tempfile.mkdtemp(prefix="lakesweep-bench-partitions-", dir=args.work))
    warm = Harness(harness_classpath(), jvm_options=PAIMON_JVM, timeout_s=4 * 3600)
    failures: list[str] = []
    results = {}
    try:
        for name in sizes:
            results[name] = bench_size(name, args, work, warm, failures)
    finally:
        warm.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"## lakesweep partition-drop benchmark, {datetime.date.today()}\n")
    print(f"medians of {args.repeat} run(s); Paimon 0.9 JVM options: {' '.join(PAIMON_JVM)}\n")
    print("| size | data files | partitions dropped | files marked DELETE | Paimon warm (s) | plan (s) | apply (s) "
          "| floor (s) | (plan+apply)/Paimon | plan/floor | plan RSS (MiB) | apply RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        pa, pl, ap_, fl = med(r["paimon"]), med(r["plan"]), med(r["apply"]), med(r["floor"])
        print(f"| {name} | {r['meta'].get('data_files', '?')} | {r.get('dropped')} of {r['partitions']} | "
              f"{r.get('files')} | {pa:.2f} | {pl:.2f} | {ap_:.2f} | {fl:.2f} | {(pl + ap_) / pa:.2f}x | "
              f"{pl / fl:.2f}x | {med(r['plan_rss']):.0f} | {med(r['apply_rss']):.0f} |")
    if failures:
        print("\n*** EQUALITY CHECK FAILED ***")
        for f in failures:
            print(f"*** {f}")
        return 1
    print("\nequality: in every run lakesweep's OVERWRITE snapshot marked exactly the files Paimon's did DELETE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
