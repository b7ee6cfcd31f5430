"""Work bench_user_path.py does in a child process, so that its own memory stays small.

A child's ``ru_maxrss`` (from wait4) is at least the parent's resident size when the child was started
(Linux carries the old address space's high-water mark across ``exec``), so the benchmark keeps large
values (plans of 300k actions, decoded manifests) out of its own process and does this here:

    python bench/userpath_helpers.py info --table TABLE --out FILE   # plan in process: what it reads/deletes
    python bench/userpath_helpers.py info --plan PLAN --out FILE     # the same for a plan file
    python bench/userpath_helpers.py journal JOURNAL                 # outcome counts of a journal
    python bench/userpath_helpers.py floors --info FILE --root COPY  # the fastavro and unlink floors

Each prints one JSON line: small facts only; lists of paths go to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RETAIN = 10
MAX_DELETES = 1_000_000
AVRO_KINDS = ("manifest list", "manifest", "index manifest")


class Reads:
    """A ReadObserver that remembers every metadata file the planner read."""

    def __init__(self):
        self.files: dict[str, tuple[str, int]] = {}

    def read(self, path, what, nbytes):
        self.files[path] = (what, nbytes)

    def named(self, names):
        pass


def deleted_paths(plan) -> list[str]:
    return sorted(a.path for a in plan.actions if a.verb.value == "delete-file")


def info(table: str | None, plan_file: str | None, out: str) -> dict:
    avro: list[str] = []
    avro_bytes = 0
    if table is not None:
        from lakesweep.engine.paimon.table import open_table
        from lakesweep.planner.paimon.expire import plan_expire
        from lakesweep.planner.paimon.options import TIME_RULE_OWN, resolve_expire_options

        reads = Reads()
        t = open_table(table, on_read=reads)
        opts = resolve_expire_options(t.options, retain_min=RETAIN, retain_max=RETAIN, time_retained=0,
                                      max_deletes=MAX_DELETES, time_rule=TIME_RULE_OWN)
        plan = plan_expire(t, now_ms=int(time.time() * 1000), options=opts)
        avro = sorted(os.path.relpath(p, table) for p, (what, _) in reads.files.items() if what in AVRO_KINDS)
        avro_bytes = sum(n for what, n in reads.files.values() if what in AVRO_KINDS)
    else:
        from lakesweep.engine.plan_io import read_plan

        plan = read_plan(plan_file)
    deleted = deleted_paths(plan)
    with open(out, "w") as f:
        json.dump({"avro": avro, "deleted": deleted}, f)
    return {"actions": len(plan.actions), "expired": (plan.end - plan.begin) if plan.begin is not None else 0,
            "deletes": len(deleted), "deleted_digest": hashlib.sha256("\n".join(deleted).encode()).hexdigest(),
            "avro_files": len(avro), "avro_bytes": avro_bytes}


def journal(path: str) -> dict:
    import duckdb

    con = duckdb.connect(path, read_only=True)
    try:
        return dict(con.execute("SELECT outcome, count(*) FROM file_records GROUP BY 1").fetchall())
    finally:
        con.close()


def floors(info_file: str, root: str) -> dict:
    """fastavro decoding of the listed manifest files, then a serial os.unlink of the listed files."""
    import fastavro

    with open(info_file) as f:
        lists = json.load(f)
    avro = [os.path.join(root, p) for p in lists["avro"]]
    deleted = [os.path.join(root, p) for p in lists["deleted"]]
    t0 = time.perf_counter()
    for p in avro:
        with open(p, "rb") as fh:
            for _ in fastavro.reader(io.BytesIO(fh.read())):
                pass
    t1 = time.perf_counter()
    for p in deleted:
        os.unlink(p)
    t2 = time.perf_counter()
    return {"avro_s": t1 - t0, "unlink_s": t2 - t1}


def sample(info_file: str, n: int) -> dict:
    """``n`` of the files the plan deletes, evenly spread over the sorted list (to watch an apply's progress)."""
    with open(info_file) as f:
        deleted = json.load(f)["deleted"]
    step = max(len(deleted) // max(n, 1), 1)
    return {"paths": deleted[::step][:n]}


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("info")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--table")
    g.add_argument("--plan")
    p.add_argument("--out", required=True)
    p = sub.add_parser("journal")
    p.add_argument("path")
    p = sub.add_parser("floors")
    p.add_argument("--info", required=True)
    p.add_argument("--root", required=True)
    p = sub.add_parser("sample")
    p.add_argument("--info", required=True)
    p.add_argument("--n", type=int, default=2000)
    args = ap.parse_args()
    if args.cmd == "info":
        result = info(args.table, args.plan, args.out)
    elif args.cmd == "journal":
        result = journal(args.path)
    elif args.cmd == "sample":
        result = sample(args.info, args.n)
    else:
        result = floors(args.info, args.root)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
