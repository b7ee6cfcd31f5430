"""Deleting many objects on S3 (SeaweedFS on loopback): lakesweep's bulk path against one request per object
and against the floor, a plain DeleteObjects loop of 1,000 keys with no LIST, no journal and no Spark.

Three identical copies of N objects (default 100,000, in 100 directories) are written; each mode deletes
one copy in its own process, so that each process's peak RSS is its own. ``bulk`` and ``per-object`` run
``applier.spark_exec.execute_rows``, the code each Spark task runs (8 threads, batches of 500 actions),
on this process, with no Spark and no journal: ``bulk`` through DeleteObjects (``FileIO.delete_batch``),
``per-object`` through a HEAD and a DELETE per file; ``bulk`` sends 250 keys per DeleteObjects (the
default), ``bulk-1000`` 1,000 (``--delete-batch-size 1000``). Prints keys/s, requests sent and peak RSS per mode.

    python bench/bench_s3.py [--objects 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DIRS = 100


def _props(settings: dict) -> dict:
    return {"endpoint": settings["AWS_ENDPOINT_URL"], "region": settings["AWS_REGION"],
            "access_key": settings["AWS_ACCESS_KEY_ID"], "secret_key": settings["AWS_SECRET_ACCESS_KEY"]}


def _keys(prefix: str, n: int) -> list[str]:
    """Sorted, as a plan's actions are: each directory's files together."""
    return [f"{prefix}/bucket-{i * DIRS // n:03d}/data-{i:07d}.parquet" for i in range(n)]


def write_copy(client, bucket: str, prefix: str, n: int) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x"), _keys(prefix, n)))


def _remaining(client, bucket: str, prefix: str) -> tuple[int, int]:
    """(objects left, directory markers left: keys ending in '/', which pyarrow's delete_file writes when it
    empties a directory)."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    keys = [c["Key"] for p in pages for c in p.get("Contents", ())]
    markers = sum(k.endswith("/") for k in keys)
    return len(keys) - markers, markers


def run_mode(mode: str, settings: dict, prefix: str, n: int) -> dict:
    """One mode in this process: seconds, requests by kind, peak RSS."""
    from lakesweep.applier.spark_exec import DEFAULT_BATCH, DEFAULT_THREADS, execute_rows, task_row
    from lakesweep.engine.fileio import ArrowFileIO
    from lakesweep.engine.plan import Action, Verb
    from lakesweep.engine.s3_bulk import RequestBudget, s3_client

    bucket = settings["bucket"]
    keys = _keys(prefix, n)
    if mode == "floor":
        client = s3_client(_props(settings))
        start = time.perf_counter()
        for i in range(0, n, 1000):
            client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]],
                                                         "Quiet": True})
        seconds = time.perf_counter() - start
        sent = {"DELETE": -(-n // 1000)}
    else:
        class PerObject(ArrowFileIO):
            bulk_deletes = False

        fileio = (PerObject if mode == "per-object" else ArrowFileIO)("s3", _props(settings))
        if mode == "bulk-1000":
            fileio = fileio.with_budget(RequestBudget(delete_batch=1000))
        root = f"s3://{bucket}/{prefix}"
        actions = [Action("data-file", k[len(prefix) + 1:], verb=Verb.DELETE_FILE, phase=1, action_id=i)
                   for i, k in enumerate(keys)]
        start = time.perf_counter()
        outcomes: dict[str, int] = {}
        for batch in execute_rows(map(task_row, actions), fileio, root, [], False, DEFAULT_BATCH, DEFAULT_THREADS,
                                  {"data-file": "data-file"}):
            for row in batch:
                outcomes[row[1]] = outcomes.get(row[1], 0) + 1
        seconds = time.perf_counter() - start
        if outcomes != {"DELETED": n}:
            raise SystemExit(f"{mode}: outcomes {outcomes}, expected {n} DELETED")
        sent = dict(fileio.limiter.sent)
    left, markers = _remaining(s3_client(_props(settings)), bucket, prefix)
    if left:
        raise SystemExit(f"{mode}: {left} objects left")
    return {"mode": mode, "seconds": seconds, "keys_per_s": n / seconds, "requests": sent, "markers": markers,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--settings", help=argparse.SUPPRESS)
    ap.add_argument("--prefix", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(run_mode(args.mode, json.loads(args.settings), args.prefix, args.objects)))
        return

    from lakesweep.engine.s3_bulk import s3_client
    from tests.support.seaweed import seaweed_s3

    n = args.objects
    with tempfile.TemporaryDirectory() as work, seaweed_s3(os.path.join(work, "weed")) as settings:
        settings = {k: v for k, v in settings.items() if k != "fs"}
        client = s3_client(_props(settings))
        modes = ("bulk", "bulk-1000", "per-object", "floor")
        t = time.perf_counter()
        for mode in modes:
            write_copy(client, settings["bucket"], f"copy-{mode}", n)
        print(f"wrote {len(modes)} copies of {n} objects in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        results = []
        for mode in modes:
            out = subprocess.run([sys.executable, __file__, "--objects", str(n), "--mode", mode,
                                  "--settings", json.dumps(settings), "--prefix", f"copy-{mode}"],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{mode} failed:\n{out.stderr}")
            results.append(json.loads(out.stdout))
    floor = next(r for r in results if r["mode"] == "floor")["keys_per_s"]
    per_object = next(r for r in results if r["mode"] == "per-object")["keys_per_s"]
    print(f"{n} objects in {DIRS} directories, SeaweedFS on loopback, {os.cpu_count()} cores")
    print(f"{'mode':<11} {'seconds':>8} {'keys/s':>9} {'x floor':>8} {'x per-obj':>9} {'peak RSS MB':>12} "
          f"{'markers':>8}  requests")
    for r in results:
        reqs = ", ".join(f"{v} {k}" for k, v in sorted(r["requests"].items()))
        print(f"{r['mode']:<11} {r['seconds']:>8.1f} {r['keys_per_s']:>9.0f} {r['keys_per_s'] / floor:>8.2f} "
              f"{r['keys_per_s'] / per_object:>9.1f} {r['peak_rss_mb']:>12.0f} {r['markers']:>8}  {reqs}")
    print("markers: directory marker objects left behind (pyarrow's delete_file writes one when it empties a "
          "directory)")


if __name__ == "__main__":
    main()
