"""S3 on SeaweedFS (loopback): lakesweep's bulk deletes against one request per object and the floor (a plain
DeleteObjects loop of 1,000 keys: no LIST, no journal, no Spark); orphan planning's listing against a plain
ListObjectsV2 loop. Identical copies of a pypaimon table with N extra data files in 100 bucket directories;
each mode runs in its own process (its own peak RSS): ``listing`` (``list_orphan_candidates``) and
``list-floor`` on the ``bulk`` copy before it is deleted; ``bulk`` and ``per-object`` through
``applier.spark_exec.execute_rows`` (a Spark task's code: 8 threads, batches of 500, 250 keys per DeleteObjects)
without Spark or journal; ``apply`` is what a user runs (bench/s3_cli_arm.py): ``lakesweep plan orphans``, then
``lakesweep apply --master local[2] --journal J``, whole processes (``--delete-batch-size N``: also an apply with
N keys per DeleteObjects, on a copy of its own). Prints keys/s, requests, peak RSS; fails on
any outcome other than DELETED or any object left. ``--per-object-objects`` runs the slowest mode on fewer objects.

    python bench/bench_s3.py [--objects 100000] [--per-object-objects 20000] [--delete-batch-size N] [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DIRS = 100
PARTITIONS = 4  # dt=2024-01-01 .. dt=2024-01-04, 25 bucket directories each


def _settings(settings: dict):
    from lakesweep.engine.fileio import resolve_s3_settings

    return resolve_s3_settings(_props(settings), env={})


def _props(settings: dict) -> dict:
    return {"endpoint": settings["AWS_ENDPOINT_URL"], "region": settings["AWS_REGION"],
            "access_key": settings["AWS_ACCESS_KEY_ID"], "secret_key": settings["AWS_SECRET_ACCESS_KEY"]}


def _client(settings: dict):
    from lakesweep.engine.s3_client import s3_client

    return s3_client(_settings(settings), max_attempts=4)


def _keys(prefix: str, n: int) -> list[str]:
    """The extra data files, sorted as a plan's actions are: each directory's files together."""
    per = DIRS // PARTITIONS
    keys = [f"{prefix}/dt=2024-01-{d // per + 1:02d}/bucket-{d % per}/data-{i:07d}.parquet"
            for i, d in ((i, i * DIRS // n) for i in range(n))]
    return sorted(keys)


WRITERS = 2  # processes writing the extra files (botocore's signing holds the GIL), 16 threads each


def _put_keys(settings: dict, keys: list[str]) -> int:
    client = _client(settings)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=settings["bucket"], Key=k, Body=b"x"), keys))
    return len(keys)


def write_copies(settings: dict, table_dir: str, sizes: dict[str, int]) -> None:
    """Each copy (prefix -> extra files): the table's files, then its extra files, those of every copy
    spread over WRITERS processes."""
    from concurrent.futures import ProcessPoolExecutor

    client, bucket = _client(settings), settings["bucket"]
    table_files = [os.path.join(d, f) for d, _, fs in os.walk(table_dir) for f in fs]

    def put_table_file(prefix_path: tuple[str, str]) -> None:
        prefix, path = prefix_path
        with open(path, "rb") as f:
            client.put_object(Bucket=bucket, Key=f"{prefix}/{os.path.relpath(path, table_dir)}", Body=f.read())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put_table_file, [(p, f) for p in sizes for f in table_files]))
    keys = [k for prefix, n in sizes.items() for k in _keys(prefix, n)]
    with ProcessPoolExecutor(WRITERS) as procs:
        written = sum(procs.map(_put_keys, [settings] * WRITERS, [keys[i::WRITERS] for i in range(WRITERS)]))
    if written != len(keys):
        raise SystemExit(f"wrote {written} extra files, expected {len(keys)}")


def _remaining(client, bucket: str, prefix: str, n: int) -> tuple[int, int]:
    """(extra data files left, directory marker objects: keys ending in '/')."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    keys = [c["Key"] for p in pages for c in p.get("Contents", ())]
    extra = set(_keys(prefix, n))
    return sum(k in extra for k in keys), sum(k.endswith("/") for k in keys)


def _peak_rss_mb() -> float:
    """This process's peak RSS since its exec (VmHWM; ru_maxrss keeps the forking parent's peak across exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def _timed_calls(cls, spent: collections.Counter) -> None:
    """Sum the seconds each request kind of ``cls._call`` takes (over all threads)."""
    original = cls._call

    def _call(self, kind, fn, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, kind, fn, **kwargs)
        finally:
            spent[kind] += time.perf_counter() - start

    cls._call = _call


def run_listing(mode: str, settings: dict, prefix: str, n: int) -> dict:
    bucket = settings["bucket"]
    if mode == "list-floor":
        client = _client(settings)
        start = time.perf_counter()
        count = pages = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
            count += len(page.get("Contents", ()))
            pages += 1
        seconds = time.perf_counter() - start
        sent = {"LIST": pages}
    else:
        from lakesweep.engine.fileio import ArrowFileIO
        from lakesweep.engine.paimon.orphans import list_orphan_candidates
        from lakesweep.engine.paimon.table import open_table
        from tests.support.s3_proxy import faulty_s3

        location = f"s3://{bucket}/{prefix}"
        start = time.perf_counter()
        count = len(list_orphan_candidates(open_table(location, ArrowFileIO("s3", _props(settings)))))
        seconds = time.perf_counter() - start
        with faulty_s3(settings) as proxy:  # a second, untimed pass through the proxy counts the requests
            list_orphan_candidates(open_table(location, ArrowFileIO("s3", {**_props(settings),
                                                                           "endpoint": proxy.url})))
            sent = {k: v for k, v in proxy.sent.items() if v}
    if count < n:
        raise SystemExit(f"{mode}: listed {count} keys, fewer than the {n} extra data files")
    return {"mode": mode, "seconds": seconds, "keys": count, "keys_per_s": count / seconds, "requests": sent,
            "spent": {}, "markers": 0, "peak_rss_mb": _peak_rss_mb()}


def run_mode(mode: str, settings: dict, prefix: str, n: int) -> dict:
    """One mode in this process: seconds, requests by kind, peak RSS."""
    if mode in ("listing", "list-floor"):
        return run_listing(mode, settings, prefix, n)
    from lakesweep.applier.spark_exec import DEFAULT_BATCH, DEFAULT_THREADS, execute_rows, task_row
    from lakesweep.engine.fileio import ArrowFileIO
    from lakesweep.engine.plan import Action, Verb
    from lakesweep.engine.s3_bulk import S3BulkDeleter

    bucket = settings["bucket"]
    keys = _keys(prefix, n)
    spent: collections.Counter[str] = collections.Counter()
    if mode == "floor":
        client = _client(settings)
        start = time.perf_counter()
        for i in range(0, n, 1000):
            client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]],
                                                         "Quiet": True})
        seconds = time.perf_counter() - start
        sent = {"DELETE": -(-n // 1000)}
    else:
        class PerObject(ArrowFileIO):
            bulk_deletes = False

        _timed_calls(S3BulkDeleter, spent)
        fileio = (PerObject if mode == "per-object" else ArrowFileIO)("s3", _props(settings))
        root = f"s3://{bucket}/{prefix}"
        actions = [Action("data-file", k[len(prefix) + 1:], verb=Verb.DELETE_FILE, phase=1, action_id=i)
                   for i, k in enumerate(keys)]
        start = time.perf_counter()
        outcomes: collections.Counter[tuple[str, int]] = collections.Counter()
        for batch in execute_rows(map(task_row, actions), fileio, root, [], False, DEFAULT_BATCH, DEFAULT_THREADS,
                                  {"data-file": "data-file"}):
            for row in batch:
                outcomes[(row[1], row[2])] += 1
        seconds = time.perf_counter() - start
        if {o for o, _ in outcomes} != {"DELETED"}:
            raise SystemExit(f"{mode}: outcomes (outcome, attempts) {dict(outcomes)}, expected {n} DELETED")
        sent = dict(fileio.limiter.sent)
    left, markers = _remaining(_client(settings), bucket, prefix, n)
    if left:
        raise SystemExit(f"{mode}: {left} objects left")
    return {"mode": mode, "seconds": seconds, "keys": n, "keys_per_s": n / seconds, "requests": sent,
            "spent": {k: round(v, 1) for k, v in spent.items()}, "markers": markers,
            "peak_rss_mb": _peak_rss_mb()}


def _table(work: str) -> str:
    from tests.support.pypaimon_tables import write_append_table

    return write_append_table(os.path.join(work, "wh"), name="bench_t", commits=3).path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--per-object-objects", type=int, help="objects of the per-object mode (default: --objects)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--delete-batch-size", type=int, help="also run apply with this many keys per DeleteObjects")
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--settings", help=argparse.SUPPRESS)
    ap.add_argument("--prefix", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(run_mode(args.mode, json.loads(args.settings), args.prefix, args.objects)))
        return

    import s3_cli_arm

    from tests.support.seaweed import seaweed_s3

    n = args.objects
    sizes = {"per-object": args.per_object_objects or n}
    copies = ("bulk", "apply", "per-object", "floor")
    modes = (("listing", "bulk"), ("list-floor", "bulk"), ("plan (CLI)", "apply"), ("apply (CLI)", "apply"),
             ("floor", "floor"), ("bulk", "bulk"), ("per-object", "per-object"))
    wide = f"apply (CLI), {args.delete_batch_size} per DeleteObjects"
    if args.delete_batch_size:
        copies += ("wide",)
        modes = modes[:4] + (("plan (CLI)", "wide"), (wide, "wide")) + modes[4:]
    with tempfile.TemporaryDirectory() as work, seaweed_s3(os.path.join(work, "weed")) as settings:
        settings = {k: v for k, v in settings.items() if k != "fs"}
        table_dir = _table(work)
        t = time.perf_counter()
        write_copies(settings, table_dir, {f"copy-{c}": sizes.get(c, n) for c in copies})
        print(f"wrote {len(copies)} copies of a table with {n} extra data files in {time.perf_counter() - t:.0f} s",
              file=sys.stderr)
        time.sleep(1.1)
        cutoff_ms = int(time.time() * 1000) - 100  # every file of every copy is older: the extras are orphans
        plan_path, journal = "plan.parquet", "journal.duckdb"
        results = []
        for mode, copy in modes:
            load = os.getloadavg()[0]
            own = os.path.join(work, "wide-" if copy == "wide" else "")  # the wide apply's plan and journal
            if mode == "plan (CLI)":
                r = s3_cli_arm.plan(settings, f"copy-{copy}", n, own + plan_path, cutoff_ms)
                if copy == "wide":
                    continue  # its plan is timed once, on the apply copy
            elif mode.startswith("apply (CLI)"):
                r = s3_cli_arm.apply(settings, f"copy-{copy}", n, own + plan_path, own + journal, mode=mode,
                                     delete_batch=args.delete_batch_size if copy == "wide" else None)
                left, r["markers"] = _remaining(_client(settings), settings["bucket"], f"copy-{copy}", n)
                if left:
                    raise SystemExit(f"{mode}: {left} objects left")
            else:
                out = subprocess.run([sys.executable, __file__, "--objects", str(sizes.get(mode, n)), "--mode", mode,
                                      "--settings", json.dumps(settings), "--prefix", f"copy-{copy}"],
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"{mode} failed:\n{out.stderr}")
                r = json.loads(out.stdout)
            results.append({**r, "load": load})
            print(f"{mode} done, load average {load:.1f} at its start", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    _report(results, n, sizes)


def _report(results: list[dict], n: int, sizes: dict) -> None:
    by = {r["mode"]: r for r in results}
    floor, per_object = by["floor"]["keys_per_s"], by["per-object"]["keys_per_s"]
    print(f"{n} extra data files ({sizes['per-object']} for per-object) in {DIRS} directories of a Paimon table, "
          f"SeaweedFS on loopback, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'mode':<52} {'seconds':>8} {'keys/s':>9} {'x floor':>8} {'x per-obj':>9} {'peak RSS MB':>12} "
          f"{'load':>5}  requests (request-seconds)")
    rows = []
    for r in results:
        rows.append((r["mode"], r["seconds"], r["keys_per_s"], r))
        if r["mode"].startswith("apply (CLI)"):
            rows.append((r["mode"] + ", excl. Spark start-up", r["excl_seconds"], r["excl_keys_per_s"], r))
    for mode, seconds, rate, r in rows:
        listing = mode.startswith(("list", "plan"))
        base = by["list-floor"]["keys_per_s"] if listing else floor
        x_per = "" if listing else f"{rate / per_object:.1f}"
        reqs = ", ".join(f"{v} {k}" + (f" ({r['spent'][k]} s)" if k in r["spent"] else "")
                         for k, v in sorted(r["requests"].items()))
        if mode == "plan (CLI)":
            reqs = "apply will send " + ", ".join(f"{v} {k}" for k, v in r["planned_requests"].items() if v)
        if r["mode"].startswith("apply (CLI)"):
            reqs = (f"{r['throttled_events']} RequestsThrottled ({r['slowdowns']} SlowDown); JVM "
                    f"{r['peaks_mib']['java']} MB, worker {r['peaks_mib']['other']} MB")
        print(f"{mode:<52} {seconds:>8.1f} {rate:>9.0f} {rate / base:>8.2f} "
              f"{x_per:>9} {r['peak_rss_mb']:>12.0f} {r['load']:>5.1f}  {reqs}")
    a = by["apply (CLI)"]
    print(f"apply (CLI): excl. Spark start-up from its phase bar (delete phase start to end; the bar's elapsed "
          f"{a['bar_elapsed_s']} s); journal ApplyStarted.started_ms to ApplyCompleted {a['journal_span_s']:.1f} s "
          f"(started_ms is taken before Spark starts); first to last file record {a['records_span_s']:.1f} s")


if __name__ == "__main__":
    main()
