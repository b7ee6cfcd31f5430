"""Benchmark: snapshot expiry with lakesweep versus Paimon's Java implementation and the physical floor.

    python bench/bench_expire.py [--steps 150] [--seed 7] [--kind pk] [--repeat 3]

One table is written by Paimon's Java core (tests/support/java harness), copied, and expired:

* paimon     Paimon 0.9's ExpireSnapshotsImpl (plan and delete in one call, in a warm JVM)
* plan       lakesweep's planner (metadata reads + planning), cold caches
* apply      lakesweep's in-process executor over the plan (the Spark applier adds job overhead)
* avro floor fastavro decoding every manifest list and manifest the planner reads, nothing else
* unlink     os.unlink of exactly the files the plan deletes, nothing else

Ratios are printed side by side; the median of --repeat runs is used. Peak Python memory of planning
(tracemalloc) is printed too.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fastavro  # noqa: E402

from applier.local import apply_locally  # noqa: E402
from engine.table import open_table  # noqa: E402
from planner.expire import plan_expire  # noqa: E402
from planner.options import TIME_RULE_OWN, resolve_expire_options  # noqa: E402
from tests.support.paimon_java import ensure_harness  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def expire_settings(n_snapshots: int) -> dict:
    return dict(retain_min=max(1, n_snapshots // 10), retain_max=max(1, n_snapshots // 10), max_deletes=10**6)


def plan_once(root: str, settings: dict):
    table = open_table(root)
    opts = resolve_expire_options(table.options, retain_min=settings["retain_min"],
                                  retain_max=settings["retain_max"], time_retained=0,
                                  max_deletes=settings["max_deletes"], time_rule=TIME_RULE_OWN)
    return plan_expire(table, now_ms=2**62, options=opts)


def manifest_files(root: str) -> list[str]:
    d = os.path.join(root, "manifest")
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if not n.startswith("index-manifest")]


def avro_floor(paths: list[str]) -> int:
    n = 0
    for p in paths:
        with open(p, "rb") as f:
            n += sum(1 for _ in fastavro.reader(io.BytesIO(f.read())))
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kind", default="pk", choices=["pk", "append"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="lakesweep-bench-")
    harness = ensure_harness()
    try:
        base = os.path.join(work, "base")
        t_gen, gen = timed(lambda: harness.generate(base, seed=args.seed, kind=args.kind, steps=args.steps,
                                                    ops={"consumer": 0}))
        n = len(gen["snapshots"])
        settings = expire_settings(n)
        files_total = sum(len(fs) for _, _, fs in os.walk(base))
        print(f"table: {args.kind}, {n} snapshots, {files_total} files (written by Paimon in {t_gen:.1f} s); "
              f"expire keeping {settings['retain_min']}")

        rows = {k: [] for k in ("paimon", "plan", "apply", "avro floor", "unlink floor")}
        peak = 0
        deleted = 0
        for i in range(args.repeat):
            theirs, ours, floor = (os.path.join(work, f"{name}{i}") for name in ("paimon", "ours", "floor"))
            for d in (theirs, ours, floor):
                shutil.copytree(base, d)
            rows["paimon"].append(timed(lambda: harness.expire(theirs, max_deletes=settings["max_deletes"],
                                                               retain_min=settings["retain_min"],
                                                               retain_max=settings["retain_max"],
                                                               time_retained_ms=0))[0])
            tracemalloc.start()
            t_plan, plan = timed(lambda: plan_once(ours, settings))
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            rows["plan"].append(t_plan)
            rows["apply"].append(timed(lambda: apply_locally(plan))[0])
            rows["avro floor"].append(timed(lambda: avro_floor(manifest_files(floor)))[0])
            targets = [os.path.join(floor, a.path) for a in plan.actions if a.kind.deletes and a.kind.value != "empty-dir"]
            rows["unlink floor"].append(timed(lambda: [os.unlink(p) for p in targets])[0])
            deleted = len(targets)
            for d in (theirs, ours, floor):
                shutil.rmtree(d)

        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"files deleted per run: {deleted}")
        print(f"{'step':<14}{'median s':>10}")
        for k, v in med.items():
            print(f"{k:<14}{v:>10.3f}")
        print("ratios:")
        print(f"  lakesweep plan+apply / paimon expire   {(med['plan'] + med['apply']) / med['paimon']:6.2f}x")
        print(f"  lakesweep plan / avro decoding floor   {med['plan'] / med['avro floor']:6.2f}x")
        print(f"  lakesweep apply / raw unlink floor     {med['apply'] / max(med['unlink floor'], 1e-9):6.2f}x")
        print(f"  peak Python memory while planning      {peak / 2**20:6.1f} MiB")
    finally:
        harness.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
