"""Planning a Paimon expiry on S3: ``lakesweep plan expire`` as a whole process on a table whose metadata is
in a SeaweedFS bucket on loopback, against the same plan of the same table on local disk and the floor of
fetching its metadata.

The table is one of bench/bench_user_path.py's (cached the same way); its ``schema``, ``snapshot`` and
``manifest`` directories, all an expiry plan reads (it never opens a data file), are uploaded to the bucket.
Both plans expire all but the newest 10 snapshots as of one ``--now``, and must hold the same actions.
Floors, in this process: a GET of every uploaded object on ``READ_THREADS`` threads (the plan reads most of
them, some twice: a manifest list is named by several snapshots but read once), and the rate of GETs on one
thread (the planner's reads before they ran on threads). Peak RSS is ``ru_maxrss`` of each plan's process.

    .venv/bin/python bench/bench_s3_plan.py [--size 1m] [--repeat 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from userpath_proc import run_process  # noqa: E402
from userpath_tables import SPECS, ensure_table  # noqa: E402

from userpath_helpers import MAX_DELETES, RETAIN  # noqa: E402

LAKESWEEP = os.path.join(os.path.dirname(sys.executable), "lakesweep")
METADATA = ("schema", "snapshot", "manifest")  # what an expiry plan reads
NOW = "2026-01-01T00:00:00Z"
ONE_THREAD_SAMPLE = 2_000  # objects fetched on one thread for its rate
UPLOAD_THREADS = 16


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def upload(fs, table: Path, prefix: str) -> list[str]:
    """Put the table's metadata files under ``prefix`` (``bucket/path``); their keys, as ``prefix/...``."""
    rel = [f"{d}/{name}" for d in METADATA for name in sorted(os.listdir(table / d))]

    def put(name: str) -> None:
        with fs.open_output_stream(f"{prefix}/{name}") as out:
            out.write((table / name).read_bytes())

    started = time.perf_counter()
    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        for i, _ in enumerate(pool.map(put, rel), 1):
            if i % 10_000 == 0:
                log(f"uploaded {i:,} of {len(rel):,} objects ({time.perf_counter() - started:.0f} s)")
    return [f"{prefix}/{name}" for name in rel]


def plan(location: str, out: Path, env: dict) -> dict:
    cmd = [LAKESWEEP, "plan", "expire", location, "--out", str(out), "--retain-min", str(RETAIN),
           "--retain-max", str(RETAIN), "--time-retained", "0 s", "--max-deletes", str(MAX_DELETES),
           "--time-rule", "own", "--now", NOW]
    r = run_process(cmd, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return {"seconds": r.seconds, "rss_mib": r.maxrss_kib // 1024}


def fetch_floor(locations: list[str], threads: int) -> float:
    """Seconds to GET every one of ``locations`` on ``threads`` threads."""
    from lakesweep.engine.fileio import fileio_for

    io = fileio_for(locations[0])
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(io.read_bytes, locations):
            pass
    return time.perf_counter() - started


def same_actions(a: Path, b: Path) -> bool:
    from lakesweep.engine.plan_io import read_plan

    return list(read_plan(str(a)).actions) == list(read_plan(str(b)).actions)


def main() -> None:
    from lakesweep.engine.fileio import READ_THREADS
    from tests.support.seaweed import seaweed_s3

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1m", choices=sorted(SPECS))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("LAKESWEEP_BENCH_CACHE", "")
                                                       or Path.home() / ".cache" / "lakesweep-bench"))
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()

    table, _ = ensure_table(SPECS[args.size], args.cache, log)
    with tempfile.TemporaryDirectory(prefix="lakesweep-s3-plan-") as work, seaweed_s3(f"{work}/weed") as s3:
        work = Path(work)
        env = {**os.environ, **{k: v for k, v in s3.items() if k.startswith("AWS_")}}
        os.environ.update({k: v for k, v in s3.items() if k.startswith("AWS_")})  # the floors' FileIO
        log(f"uploading the metadata of {table}")
        keys = upload(s3["fs"], table, f"{s3['bucket']}/t")
        location = f"s3://{s3['bucket']}/t"
        runs: dict[str, list[dict]] = {"local": [], "s3": []}
        for i in range(args.repeat):
            for name, where in (("local", str(table)), ("s3", location)):
                runs[name].append(plan(where, work / f"plan-{name}.parquet", env))
                log(f"plan expire, {name}, run {i + 1}: {runs[name][-1]['seconds']:.2f} s")
        if not same_actions(work / "plan-local.parquet", work / "plan-s3.parquet"):
            raise SystemExit("the plan of the table on S3 holds other actions than the plan of the local table")
        objects = [f"s3://{key}" for key in keys]
        parallel = fetch_floor(objects, READ_THREADS)
        log(f"GET of {len(objects):,} objects on {READ_THREADS} threads: {parallel:.2f} s")
        sample = objects[:: max(1, len(objects) // ONE_THREAD_SAMPLE)][:ONE_THREAD_SAMPLE]
        one_rate = len(sample) / fetch_floor(sample, 1)

    local = statistics.median(r["seconds"] for r in runs["local"])
    remote = statistics.median(r["seconds"] for r in runs["s3"])
    results = {"size": args.size, "objects": len(keys), "runs": runs, "local_s": local, "s3_s": remote,
               "get_all_parallel_s": parallel, "get_one_thread_per_s": one_rate, "threads": READ_THREADS}
    rows = [
        ("lakesweep plan expire, local disk", f"{local:.2f}", f"{max(r['rss_mib'] for r in runs['local']):,} MiB", ""),
        ("lakesweep plan expire, S3", f"{remote:.2f}", f"{max(r['rss_mib'] for r in runs['s3']):,} MiB",
         f"{remote / parallel:.2f}x the floor"),
        (f"floor: GET of all {len(keys):,} metadata objects, {READ_THREADS} threads", f"{parallel:.2f}", "", ""),
        ("GETs on one thread", f"{one_rate:,.0f} objects/s", "", f"{len(keys) / one_rate:,.0f} s for all"),
    ]
    print(f"\nplan expire of the {args.size} table (medians of {args.repeat}; the same actions on both)\n")
    print("| step | s | peak RSS | |\n|---|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
