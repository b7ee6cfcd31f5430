"""Orphan-planning listing on S3 (SeaweedFS on loopback): the driver's peak RSS with and without Spark.

A pypaimon table is copied to the store and N orphan files (default 100,000) are written into 20 of its
bucket directories. Each mode runs in its own process, so that each peak RSS is its own: ``plain`` is a
ListObjectsV2 loop over the table prefix that only counts keys; ``store`` the store walk
(``list_orphan_candidates``, on the driver); ``spark`` the listing on Spark (``local[2]``, a task per
directory, the driver writing Arrow batches to a Parquet file); ``plan-store`` and ``plan-spark`` the
whole ``plan orphans`` read and plan. Prints keys, seconds and the peak RSS (``VmHWM``: ``ru_maxrss`` would
carry over the parent's size across fork) of the Python driver and of its largest child, the Spark JVM,
sampled every half second.

    python bench/bench_orphan_listing.py [--objects 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DIRS = 20
MODES = ("plain", "store", "spark", "plan-store", "plan-spark")


def _hwm_mib(pid: str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) // 1024
    except (OSError, StopIteration):
        return 0


def _children() -> list[str]:
    out = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                out += f.read().split()
        except OSError:
            pass
    return out


def run_mode(mode: str, location: str, scratch: str) -> dict:
    import threading

    from lakesweep.engine.paimon.table import open_table

    jvm = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.5):
            jvm[0] = max([jvm[0], *(_hwm_mib(pid) for pid in _children())])

    threading.Thread(target=sample, daemon=True).start()

    t = open_table(location)
    start = time.perf_counter()
    if mode == "plain":
        bucket, _, key = location[len("s3://"):].partition("/")
        keys = 0
        for page in t.fileio._s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key + "/"):
            keys += len(page.get("Contents", ()))
    elif mode == "store":
        from lakesweep.engine.paimon.orphans import list_orphan_candidates

        keys = len(list_orphan_candidates(t))
    elif mode == "spark":
        from lakesweep.applier.listing import list_with_session

        keys = list_with_session(t, os.path.join(scratch, "l.parquet"), master="local[2]").files
    else:
        from lakesweep.planner.kinds import plan_kind

        lister = None
        if mode == "plan-spark":
            from lakesweep.applier.listing import list_with_session

            def lister(table):
                listing = list_with_session(table, os.path.join(scratch, "p.parquet"), master="local[2]")
                return listing.path, listing.source()
        entry = plan_kind("orphans", "paimon")
        now = int(time.time() * 1000)
        options = entry.resolve_options(t.options, older_than=str(now - 1000), force=True, lister=lister)
        keys = len(entry.read_and_plan(t, now_ms=now, options=options).actions)
    seconds = time.perf_counter() - start
    done.set()
    return {"mode": mode, "keys": keys, "seconds": round(seconds, 1), "driver_rss_mib": _hwm_mib(),
            "children_rss_mib": jvm[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--location")
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps(run_mode(args.child, args.location, scratch)))
        return

    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    from tests.support.seaweed import seaweed_s3, upload_tree

    with tempfile.TemporaryDirectory() as work, seaweed_s3(os.path.join(work, "weed")) as s3:
        wh = os.path.join(work, "wh")
        catalog = CatalogFactory.create({"warehouse": wh})
        catalog.create_database("db", True)
        schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
        catalog.create_table("db.t", Schema.from_pyarrow_schema(schema, partition_keys=["dt"]), False)
        table = catalog.get_table("db.t")
        for i in range(DIRS):
            builder = table.new_batch_write_builder()
            write, commit = builder.new_write(), builder.new_commit()
            write.write_arrow(pa.Table.from_pylist([{"id": i, "dt": f"p{i:02d}"}], schema=schema))
            commit.commit(write.prepare_commit())
            write.close()
            commit.close()
        prefix = f"{s3['bucket']}/wh"
        upload_tree(s3["fs"], wh, prefix)
        root = f"{prefix}/db.db/t"
        fs = s3["fs"]

        def put(i: int) -> None:
            with fs.open_output_stream(f"{root}/dt=p{i % DIRS:02d}/bucket-0/data-orphan-{i:07d}.parquet") as out:
                out.write(b"x")

        start = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, range(args.objects)))
        print(f"wrote {args.objects} orphans in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        time.sleep(1.1)
        env = {**os.environ, **{k: v for k, v in s3.items() if k.startswith("AWS_")}}
        print(f"{'mode':<11} {'keys':>8} {'seconds':>8} {'driver RSS':>11} {'JVM RSS':>11}")
        for mode in MODES:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, "--location",
                                  f"s3://{root}"], env=env, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{r['mode']:<11} {r['keys']:>8} {r['seconds']:>8} {r['driver_rss_mib']:>8} MiB "
                  f"{r['children_rss_mib']:>7} MiB", flush=True)


if __name__ == "__main__":
    main()
