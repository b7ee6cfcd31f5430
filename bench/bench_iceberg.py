"""Benchmark of Iceberg snapshot expiry as a user runs it: ``lakesweep plan expire --catalog`` and
``lakesweep apply`` as whole processes (Spark in local mode, a new DuckDB journal), against Iceberg's own
``expire_snapshots`` procedure on Spark, pyiceberg's own expiry and the physical floor.

    .venv/bin/python bench/bench_iceberg.py [--sizes 20k,200k,1m] [--repeat 3]
    .venv/bin/python bench/bench_iceberg.py --quick        # a tiny table: a smoke test of the benchmark

The table (pyiceberg's SQL catalog on SQLite, under ``~/.cache/lakesweep-bench/iceberg``) has 40 snapshots;
each appends N/40 data files (hard links to one small Parquet file, so building is quick) and, from the
third on, deletes the files appended two snapshots before (pyiceberg's overwrite producer). Each repetition
works on a fresh copy (``cp -a`` of the warehouse and catalog) and expires every snapshot but the last:

* pyiceberg: ``table.maintenance.expire_snapshots().older_than(...)`` in its own process. It commits the
  metadata only and deletes no file (pyiceberg 0.12 has no file cleanup), so it is the metadata floor of
  the engine's own implementation, not a like-for-like;
* ``lakesweep plan expire`` and ``lakesweep apply``, each the console script as its own process;
* Iceberg Java: ``CALL bench.system.expire_snapshots(table => 'ns.t', older_than => TIMESTAMP <now>,
  retain_last => 1)``, Iceberg's Spark runtime (pinned in tests/support/maven.py) opening the SQLite catalog
  with its ``JdbcCatalog``, in a new process on ``local[2]``: timed whole (Python, JVM, session, call) and
  the call alone. It deletes files, so it is the like-for-like of plan + apply (``ls/iceberg``);
* the floors, in a child process: fastavro decoding of every manifest list and manifest whole (``decode``,
  what any expiry must read), decoding only the fields an expiry reads (``project``: a reader schema of the
  writer's), the same over a process per core (``par``), and ``os.unlink`` of the files lakesweep's plan
  deletes on a thread per core (``unlink``);
* peak RSS of each process (``ru_maxrss`` from ``wait4``).

Afterwards the table's last snapshot must read the same data files, exactly the planned files must be gone,
and Iceberg's procedure must have deleted exactly the files lakesweep deleted (the trees against the
pristine one), or the benchmark says so and exits 1. Medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import datetime
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iceberg_bench_support import (CACHE_ROOT, CATALOG, LAKESWEEP, checked, env_for, iceberg_procedure,  # noqa: E402
                                   iso_utc, log, restore, tree_files)
from userpath_proc import run_process  # noqa: E402

CACHE = CACHE_ROOT / "iceberg"
SNAPSHOTS = 40

BUILD = r"""
import os, sys, uuid
import pyarrow as pa, pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType
root, files, snapshots = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root + "/wh")
cat = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
cat.create_namespace("ns")
schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "part", StringType(), required=False))
t = cat.create_table("ns.t", schema=schema, partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part")))
seed = root + "/seed.parquet"
pq.write_table(pa.table({"id": pa.array(range(10), pa.int64()), "part": ["p"] * 10}), seed)
size = os.path.getsize(seed)
per = files // snapshots
batches = []
for s in range(snapshots):
    batch = []
    source = f"{root}/seed-{s}.parquet"  # a seed per snapshot: a file takes at most 65,000 hard links
    with open(seed, "rb") as src, open(source, "wb") as dst:
        dst.write(src.read())
    for i in range(per):
        part = f"p{i % 50}"
        path = f"{t.location()}/data/part={part}/{s:03d}-{i:06d}-{uuid.uuid4().hex[:8]}.parquet"
        local = path[len("file://"):]
        os.makedirs(os.path.dirname(local), exist_ok=True)
        os.link(source, local)
        df = DataFile.from_args(content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
                                partition=Record(part), record_count=10, file_size_in_bytes=size)
        df.spec_id = 0
        batch.append(df)
    with t.transaction() as tx:
        with tx.update_snapshot().fast_append() as app:
            for df in batch:
                app.append_data_file(df)
    if s >= 2:
        with t.transaction() as tx:
            with tx.update_snapshot().overwrite() as ow:
                for df in batches[s - 2]:
                    ow.delete_data_file(df)
    batches.append(batch)
t = cat.load_table("ns.t")
print(len(t.metadata.snapshots), "snapshots")
"""

PYICEBERG_EXPIRE = r"""
import datetime, sys
from pyiceberg.catalog.sql import SqlCatalog
root = sys.argv[1]
cat = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
t = cat.load_table("ns.t")
last = max(s.timestamp_ms for s in t.metadata.snapshots)
t.maintenance.expire_snapshots().older_than(datetime.datetime.fromtimestamp(last / 1000, tz=datetime.timezone.utc)).commit()
"""

FLOOR = r"""
import io, json, os, sys, time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
import fastavro

# the fields an expiry's rules read; a partition record is kept whole
KEEP = {"status", "snapshot_id", "sequence_number", "file_sequence_number", "data_file", "content", "file_path",
        "file_size_in_bytes", "partition", "manifest_path", "manifest_length", "partition_spec_id",
        "added_snapshot_id", "added_files_count", "existing_files_count", "deleted_files_count"}

def project(t):
    if isinstance(t, list):
        return [project(x) for x in t]
    if isinstance(t, dict) and t.get("type") == "record":
        return {**t, "fields": [{**f, "type": f["type"] if f["name"] == "partition" else project(f["type"])}
                                for f in t["fields"] if f["name"] in KEEP]}
    return t

def full(path):
    with open(path, "rb") as f:
        return sum(1 for _ in fastavro.reader(f))

def projected(path):
    with open(path, "rb") as f:
        data = f.read()
    schema = project(fastavro.reader(io.BytesIO(data)).writer_schema)
    return sum(1 for _ in fastavro.reader(io.BytesIO(data), reader_schema=schema))

def unlink_all(chunk):
    for p in chunk:
        os.unlink(p)

if __name__ == "__main__":
    root, listing = sys.argv[1], sys.argv[2]
    meta = root + "/wh/ns/t/metadata"
    files = sorted(os.path.join(meta, n) for n in os.listdir(meta) if n.endswith(".avro"))
    workers = os.cpu_count() or 1
    t0 = time.perf_counter()
    n = sum(map(full, files))
    t1 = time.perf_counter()
    assert sum(map(projected, files)) == n
    t2 = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        assert sum(pool.map(projected, files)) == n
    t3 = time.perf_counter()
    paths = json.load(open(listing))
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(unlink_all, [paths[i:i + 1000] for i in range(0, len(paths), 1000)]))
    t4 = time.perf_counter()
    print(json.dumps({"read_s": t1 - t0, "projected_s": t2 - t1, "parallel_s": t3 - t2, "delete_s": t4 - t3,
                      "records": n, "deleted": len(paths), "workers": workers}))
"""



def ensure_table(files: int) -> Path:
    """The pristine table of ``files`` files. Its metadata names absolute locations, so every run restores
    it to the one path it was built at (``work``) instead of copying it elsewhere."""
    base = CACHE / f"t{files}"
    pristine, work = base / "pristine", base / "work"
    if not (pristine / "catalog.db").exists():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", BUILD, str(work), str(files), str(SNAPSHOTS)], check=True)
        subprocess.run(["cp", "-a", str(work), str(pristine)], check=True)
        log(f"built {files} files in {time.perf_counter() - t0:.0f} s at {work}")
    return base




def rows_at_head(copy: str) -> str:
    """The data files pyiceberg's scan of the head reads (the files are hard links of one seed, so the
    file set, not the rows, tells tables apart)."""
    code = ("import sys; from pyiceberg.catalog.sql import SqlCatalog; r=sys.argv[1]; "
            "c=SqlCatalog('bench', uri=f'sqlite:///{r}/catalog.db', warehouse=f'file://{r}/wh'); "
            "print(sorted(t.file.file_path for t in c.load_table('ns.t').scan().plan_files()))")
    return subprocess.run([sys.executable, "-c", code, copy], check=True, capture_output=True, text=True).stdout



def one_run(base: Path, scratch: str, pristine: set[str]) -> dict:
    from lakesweep.engine.plan_io import read_plan

    out = {}
    copy = restore(base)
    out["pyiceberg"] = checked(run_process([sys.executable, "-c", PYICEBERG_EXPIRE, copy]), "pyiceberg expiry")
    copy = restore(base)
    rows = rows_at_head(copy)
    env = env_for(copy)
    plan, journal = os.path.join(scratch, "plan.parquet"), os.path.join(scratch, "j.duckdb")
    for f in (plan, journal):
        if os.path.exists(f):
            os.remove(f)
    out["plan"] = checked(run_process([LAKESWEEP, "plan", "expire", "ns.t", "--catalog", CATALOG, "--out", plan,
                                       "--older-than", "0 s", "-o", "json"], env=env), "lakesweep plan")
    p = read_plan(plan)
    targets = [os.path.join(p.table_location, a.path) for a in p.actions if a.verb.deletes]
    out["apply"] = checked(run_process([LAKESWEEP, "apply", plan, "--journal", journal, "--master", "local[2]",
                                        "-o", "json"], env=env), "lakesweep apply")
    gone = [t for t in targets if os.path.exists(t)]
    if gone or rows_at_head(copy) != rows:
        log(f"MISMATCH: {len(gone)} planned files still exist, or the head reads other files than before")
        sys.exit(1)
    ours = pristine - tree_files(copy)
    copy = restore(base)  # Iceberg's own procedure on Spark, as an Iceberg user would run it instead
    older_than = iso_utc(datetime.datetime.now(datetime.timezone.utc))
    out["iceberg"], answer = iceberg_procedure(
        copy, f"CALL {CATALOG}.system.expire_snapshots(table => 'ns.t', older_than => TIMESTAMP '{older_than}', "
              "retain_last => 1)", "Iceberg expire_snapshots")
    out["iceberg_call"], out["iceberg_rows"] = answer["call_s"], answer["rows"][0]
    theirs = pristine - tree_files(copy)
    if theirs != ours or rows_at_head(copy) != rows:
        log(f"MISMATCH: Iceberg's expire_snapshots deleted {len(theirs)} files, lakesweep {len(ours)}; "
            f"{len(theirs - ours)} only by Iceberg (e.g. {sorted(theirs - ours)[:3]}), {len(ours - theirs)} only "
            f"by lakesweep (e.g. {sorted(ours - theirs)[:3]}); or Iceberg's head reads other files than before")
        sys.exit(1)
    copy = restore(base)  # the floor: read every manifest, unlink the same files
    listing = os.path.join(scratch, "listing.json")
    with open(listing, "w") as f:
        json.dump(targets, f)
    floor = checked(run_process([sys.executable, "-c", FLOOR, copy, listing]), "floor")
    out["floor"] = json.loads(floor.stdout)
    out["deleted"], out["expired"] = len(targets), len(p.scope.expired)
    return out


def parse_size(text: str) -> int:
    """``20k``, ``1m``, ``400``: a number of data files."""
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20k,200k")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = [400] if args.quick else [parse_size(s) for s in args.sizes.split(",")]
    repeat = 1 if args.quick else args.repeat
    print(f"{'files':>8} {'deleted':>8} | {'pyiceberg':>9} {'plan':>7} {'apply':>7} | {'decode':>7} {'project':>7} "
          f"{'par':>7} {'unlink':>7} | {'plan/par':>8} {'apply/unlink':>12} | {'RSS plan':>8} {'RSS apply':>9} | "
          f"{'iceberg':>8} {'call':>7} {'ls/iceberg':>10} {'RSS ice':>8}", flush=True)
    for n in sizes:
        base = ensure_table(n)
        pristine = tree_files(str(base / "pristine"))
        runs = []
        with tempfile.TemporaryDirectory(prefix="lakesweep-bench-") as scratch:
            for k in range(repeat):
                runs.append(one_run(base, scratch, pristine))
                r = runs[-1]
                log(f"{n} run {k + 1}: plan {r['plan'].seconds:.2f} s, apply {r['apply'].seconds:.2f} s, "
                    f"Iceberg expire_snapshots {r['iceberg'].seconds:.2f} s (call {r['iceberg_call']:.2f} s)")
        med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
        py, plan, apply = med(lambda r: r["pyiceberg"].seconds), med(lambda r: r["plan"].seconds), \
            med(lambda r: r["apply"].seconds)
        fread, fproj = med(lambda r: r["floor"]["read_s"]), med(lambda r: r["floor"]["projected_s"])
        fpar, fdel = med(lambda r: r["floor"]["parallel_s"]), med(lambda r: r["floor"]["delete_s"])
        ice, ends = med(lambda r: r["iceberg"].seconds), med(lambda r: r["plan"].seconds + r["apply"].seconds)
        print(f"{n:>8} {runs[0]['deleted']:>8} | {py:>8.2f}s {plan:>6.2f}s {apply:>6.2f}s | {fread:>6.2f}s "
              f"{fproj:>6.2f}s {fpar:>6.2f}s {fdel:>6.2f}s | {plan / fpar:>7.1f}x {apply / max(fdel, 1e-3):>11.1f}x | "
              f"{med(lambda r: r['plan'].maxrss_kib) / 1024:>6.0f}Mi {med(lambda r: r['apply'].maxrss_kib) / 1024:>7.0f}Mi | "
              f"{ice:>7.2f}s {med(lambda r: r['iceberg_call']):>6.2f}s {ends / ice:>9.2f}x "
              f"{med(lambda r: r['iceberg'].peaks_kib['java']) / 1024:>6.0f}Mi")
        counts = runs[0]["iceberg_rows"]
        print(f"{'':>8} Iceberg expire_snapshots deleted {counts['deleted_data_files_count']} data files, "
              f"{counts['deleted_manifest_files_count']} manifests and {counts['deleted_manifest_lists_count']} "
              f"manifest lists: the same {runs[0]['deleted']} files lakesweep deleted, checked after each of "
              f"{repeat} runs; ls/iceberg is lakesweep plan + apply over Iceberg's whole process", flush=True)


if __name__ == "__main__":
    main()
