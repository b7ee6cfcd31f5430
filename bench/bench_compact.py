"""Benchmark of Iceberg data-file compaction as a user runs it: ``lakesweep plan compact --catalog`` and
``lakesweep apply`` as whole processes (Spark in local mode, a new DuckDB journal), against Iceberg's own
``rewrite_data_files`` procedure on Spark and the floor: reading and writing the same Parquet with pyarrow alone.

    .venv/bin/python bench/bench_compact.py [--sizes 100m,1g] [--repeat 3]
    .venv/bin/python bench/bench_compact.py --quick        # a tiny table: a smoke test of the benchmark

The table (pyiceberg's SQL catalog on SQLite, under ``~/.cache/lakesweep-bench/iceberg-compact``) is
partitioned by an identity string column ``part`` (4 partitions) and holds small Parquet data files
(about 2.4 MiB each, 130,000 to 170,000 rows of random longs, doubles, ints and strings, zstd) written with
pyarrow with Iceberg field ids and added through pyiceberg's ``add_files`` in commits of 50 files, until
they make ``--sizes`` (``1g``: 1 GiB). It is built once; each run restores it (``cp -a``) to the path it
was built at. Each repetition:

* ``lakesweep plan compact ns.t --catalog bench --target-file-size-mb 64`` and ``lakesweep apply
  --master local[2]``, each the console script as its own process. 64 MiB makes about four bins per
  partition (about 26 inputs each), more bins than task slots;
* then, on a fresh restore, the floor in a child process: for each bin of the same plan, read exactly its
  input files with pyarrow (``ParquetFile(path).read()``: a path given to ``read_table`` would add the
  directory's ``part=`` column), concatenate them and write one Parquet file with the writer options
  lakesweep's ``merge_bin`` uses (pyiceberg's ``_get_parquet_writer_kwargs`` of the table's
  properties: zstd by default; ``write.parquet.row-group-limit`` rows per row group), two bins at a time
  on two threads (``local[2]`` has two task slots), nothing else. Its time is measured inside the child
  (imports excluded);
* then, on a fresh restore, Iceberg Java: ``CALL bench.system.rewrite_data_files(table => 'ns.t',
  options => map('target-file-size-bytes', <the same target>))``, Iceberg's Spark runtime (pinned in
  tests/support/maven.py) opening the SQLite catalog with its ``JdbcCatalog``, in a new process on
  ``local[2]``: timed whole (Python, JVM, session, call) and the call alone. It bins by its own rules, so
  its outputs differ from lakesweep's; its rows must not (the checksum below). ``ls/iceberg`` is lakesweep's
  plan + apply over that whole process;
* from apply's journal (its events' clock): the merge phase, from ApplyStarted to its end (Spark's
  start-up, on a thread meanwhile, included), and the commit with the check after it, to ApplyCompleted;
* peak RSS: of the planning process (``ru_maxrss`` from ``wait4``) and, sampled (``VmHWM``), of apply's
  driver, its Spark JVM and its largest Spark Python worker (where the bins are merged).

Throughput is the plan's input bytes (the inputs' sizes as the manifests give them) and rows per second of
the apply process, and of the floor's work. Afterwards the table must hold the same rows (a multiset
checksum over every data file of the current snapshot read with pyarrow: row count, sums of the integer
columns, null counts, and the sum and the sum of squares modulo 2^64 of a 64-bit hash of each row,
pandas' ``hash_pandas_object``), the current snapshot must have (files not compacted + bins) data files,
and every input of the plan must be DELETED in it; after Iceberg's procedure the table must hold the same
rows in a new snapshot; or the benchmark says so and exits 1. Medians of ``--repeat`` runs.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iceberg_bench_support import (CACHE_ROOT, CATALOG, LAKESWEEP, checked, env_for, iceberg_procedure,  # noqa: E402
                                   log, restore)
from userpath_proc import run_process  # noqa: E402

CACHE = CACHE_ROOT / "iceberg-compact"
PARTITIONS = 4
ROWS_PER_FILE = 150_000  # about 2.4 MiB of zstd Parquet
TARGET_MB = 64
QUICK = dict(size=8 * 1024 * 1024, rows=10_000, target_mb=1)  # files of about 180 kB, bins of about 5
MIB = 1024 * 1024

BUILD = r"""
import json, os, sys, time
import numpy as np, pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType
root, size, rows, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(root + "/wh")
cat = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
cat.create_namespace("ns")
schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "part", StringType(), required=False),
                NestedField(3, "user_id", LongType(), required=False), NestedField(4, "amount", DoubleType(), required=False),
                NestedField(5, "name", StringType(), required=False), NestedField(6, "qty", IntegerType(), required=False))
t = cat.create_table("ns.t", schema=schema, partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part")))
arrow_schema = schema_to_pyarrow(schema, include_field_ids=True)
total, i, first, batch = 0, 0, 0, []
while total < size:
    rng = np.random.default_rng(i)
    n = int(rows * rng.uniform(0.87, 1.13))
    part = f"p{i % parts}"
    uid = rng.integers(0, 10**7, n)
    amount = np.round(rng.random(n) * 1000, 2)
    amount[rng.random(n) < 0.01] = np.nan
    table = pa.table([pa.array(np.arange(first, first + n, dtype=np.int64)), pa.array([part] * n, pa.string()),
                      pa.array(uid), pa.array(amount, from_pandas=True),
                      pc.binary_join_element_wise("user-", pc.cast(pa.array(uid % 100000), pa.string()), ""),
                      pa.array(rng.integers(0, 100, n, dtype=np.int32))], schema=arrow_schema)
    path = f"{t.location()}/data/part={part}/small-{i:06d}.parquet"
    local = path[len("file://"):]
    os.makedirs(os.path.dirname(local), exist_ok=True)
    pq.write_table(table, local, compression="zstd")
    total += os.path.getsize(local)
    batch.append(path)
    first += n
    i += 1
    if len(batch) == 50 or total >= size:
        t.add_files(batch)
        batch = []
print(json.dumps({"files": i, "bytes": total, "rows": first}))
"""

# The multiset checksum of a table's rows: every data file of the current snapshot, read with pyarrow.
CHECKSUM = r"""
import json, sys
import numpy as np, pandas as pd, pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestEntryStatus
root = sys.argv[1]
cat = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
t = cat.load_table("ns.t")
names = [f.name for f in t.schema().fields]
out = {"rows": 0, "sums": {}, "nulls": {n: 0 for n in names}, "hash_sum": 0, "hash_sq": 0, "files": []}
h_sum, h_sq = np.uint64(0), np.uint64(0)
sums = {}
for task in t.scan().plan_files():
    if task.delete_files:
        raise SystemExit(f"{task.file.file_path} has delete files; the checksum reads data files only")
    path = task.file.file_path
    out["files"].append(path)
    table = pq.ParquetFile(path[len("file://"):] if path.startswith("file://") else path).read(columns=names)
    out["rows"] += table.num_rows
    for n in names:
        out["nulls"][n] += table.column(n).null_count
    df = table.to_pandas()
    for n in ("id", "user_id", "qty"):
        sums[n] = sums.get(n, 0) + int(df[n].sum())
    h = pd.util.hash_pandas_object(df, index=False).to_numpy()
    with np.errstate(over="ignore"):
        h_sum += h.sum(dtype=np.uint64)
        h_sq += (h * h).sum(dtype=np.uint64)
out["sums"], out["hash_sum"], out["hash_sq"] = sums, int(h_sum), int(h_sq)
snap = t.current_snapshot()
out["snapshot_id"] = snap.snapshot_id
out["deleted"] = sorted(e.data_file.file_path for m in snap.manifests(t.io)
                        for e in m.fetch_manifest_entry(t.io, discard_deleted=False)
                        if e.status == ManifestEntryStatus.DELETED and e.snapshot_id == snap.snapshot_id)
print(json.dumps(out))
"""

# The floor: each bin's inputs read with pyarrow and written as one Parquet file, two bins at a time.
FLOOR = r"""
import json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
import pyarrow as pa, pyarrow.parquet as pq
spec = json.load(open(sys.argv[1]))
t0 = time.perf_counter()
def merge(job):
    index, inputs = job
    table = pa.concat_tables([pq.ParquetFile(p).read() for p in inputs])
    out = os.path.join(spec["out"], f"bin-{index}.parquet")
    with pq.ParquetWriter(out, schema=table.schema, store_decimal_as_integer=True, **spec["writer"]) as w:
        w.write_table(table, row_group_size=spec["row_group_limit"])
    return table.num_rows, os.path.getsize(out)
with ThreadPoolExecutor(spec["workers"]) as pool:
    done = list(pool.map(merge, enumerate(spec["bins"])))
print(json.dumps({"seconds": time.perf_counter() - t0, "rows": sum(r for r, _ in done),
                  "bytes_out": sum(b for _, b in done), "files_out": len(done)}))
"""



def parse_size(text: str) -> int:
    text = text.strip().lower()
    units = {"k": 1024, "m": MIB, "g": 1024 * MIB}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def checksum(copy: str) -> dict:
    result = subprocess.run([sys.executable, "-c", CHECKSUM, copy], capture_output=True, text=True)
    if result.returncode != 0:
        log(f"checksum failed ({result.returncode}): {result.stderr[-3000:]}")
        sys.exit(1)
    return json.loads(result.stdout)


def ensure_table(label: str, size: int, rows: int) -> Path:
    """The pristine table of ``size`` bytes of files of about ``rows`` rows, and its checksum. Its metadata
    names absolute locations, so every run restores it to the one path it was built at (``work``)."""
    base = CACHE / f"{label}-r{rows}-p{PARTITIONS}"
    pristine, work = base / "pristine", base / "work"
    if not (base / "checksum.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        t0 = time.perf_counter()
        built = subprocess.run([sys.executable, "-c", BUILD, str(work), str(size), str(rows), str(PARTITIONS)],
                               check=True, capture_output=True, text=True)
        facts = json.loads(built.stdout)
        subprocess.run(["cp", "-a", str(work), str(pristine)], check=True)
        (base / "build.json").write_text(json.dumps({**facts, "seconds": time.perf_counter() - t0}))
        (base / "checksum.json").write_text(json.dumps(checksum(str(work))))
        log(f"built {facts['files']} files, {facts['bytes'] / MIB:,.0f} MiB, {facts['rows']:,} rows in "
            f"{time.perf_counter() - t0:.0f} s at {work}")
    return base





def writer_options(copy: str) -> tuple[dict, int]:
    """The Parquet writer options ``merge_bin`` uses for this table, and its row-group limit."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    cat = SqlCatalog("bench", uri=f"sqlite:///{copy}/catalog.db", warehouse=f"file://{copy}/wh")
    props = dict(cat.load_table("ns.t").properties)
    return _get_parquet_writer_kwargs(props), int(props.get("write.parquet.row-group-limit", 1048576))


def mismatches(before: dict, after: dict, scope, stats: dict) -> list[str]:
    out = []
    for key in ("rows", "sums", "nulls", "hash_sum", "hash_sq"):
        if before[key] != after[key]:
            out.append(f"{key}: {before[key]} before, {after[key]} after")
    inputs = sorted(f["location"] for b in scope.bins for f in b["inputs"])
    expected = scope.data_files - len(inputs) + len(scope.bins)
    if len(after["files"]) != expected:
        out.append(f"{len(after['files'])} data files after, expected {expected} ({scope.data_files} - "
                   f"{len(inputs)} inputs + {len(scope.bins)} bins)")
    if after["deleted"] != inputs:
        out.append(f"{len(after['deleted'])} files DELETED in snapshot {after['snapshot_id']}, the plan's "
                   f"{len(inputs)} inputs expected ({len(set(inputs) - set(after['deleted']))} not DELETED)")
    if after["snapshot_id"] == scope.snapshot_id or stats["bins"] != len(scope.bins):
        out.append(f"no new snapshot (still {scope.snapshot_id}), or stats and scope disagree on the bins")
    return out


def journal_spans(journal: str) -> dict:
    """Seconds, by the journal's clock, from ApplyStarted to the end of the merge phase (Spark starts on a
    thread meanwhile) and from there to ApplyCompleted (the commit and the check after it)."""
    import duckdb

    with duckdb.connect(journal, read_only=True) as db:
        rows = db.sql("SELECT event_type, recorded_ms FROM events ORDER BY seq").fetchall()
    started = next(ms for kind, ms in rows if kind == "ApplyStarted")
    merged = next(ms for kind, ms in rows if kind == "PhaseCompleted")
    completed = next(ms for kind, ms in rows if kind == "ApplyCompleted")
    return {"merge_s": (merged - started) / 1000, "commit_s": (completed - merged) / 1000}


def one_run(base: Path, scratch: str, target_mb: int, before: dict) -> dict:
    from lakesweep.engine.plan_io import read_plan

    out = {}
    copy = restore(base)
    env = env_for(copy)
    plan, journal = os.path.join(scratch, "plan.parquet"), os.path.join(scratch, "j.duckdb")
    for f in (plan, journal):
        if os.path.exists(f):
            os.remove(f)
    out["plan"] = checked(run_process([LAKESWEEP, "plan", "compact", "ns.t", "--catalog", CATALOG, "--out", plan,
                                       "--target-file-size-mb", str(target_mb), "-o", "json"], env=env),
                          "lakesweep plan compact")
    p = read_plan(plan)
    if p.scope.skipped:
        log(f"the plan is skipped: {p.scope.skipped}")
        sys.exit(1)
    out["apply"] = checked(run_process([LAKESWEEP, "apply", plan, "--journal", journal, "--master", "local[2]",
                                        "-o", "json"], env=env, sample=True), "lakesweep apply")
    out["spans"] = journal_spans(journal)
    after = checksum(copy)
    problems = mismatches(before, after, p.scope, p.stats)
    if problems:
        log("MISMATCH after apply:\n  " + "\n  ".join(problems))
        sys.exit(1)
    out["files_after"] = len(after["files"])

    copy = restore(base)  # the floor: the same bins' inputs, read and written with pyarrow alone
    writer, row_group_limit = writer_options(copy)
    floor_out = os.path.join(scratch, "floor")
    shutil.rmtree(floor_out, ignore_errors=True)
    os.makedirs(floor_out)
    spec = os.path.join(scratch, "floor.json")
    with open(spec, "w") as f:
        json.dump({"bins": [[i["path"] for i in b["inputs"]] for b in p.scope.bins], "out": floor_out,
                   "writer": writer, "row_group_limit": row_group_limit, "workers": 2}, f)
    out["floor"] = json.loads(checked(run_process([sys.executable, "-c", FLOOR, spec]), "floor").stdout)
    shutil.rmtree(floor_out)

    copy = restore(base)  # Iceberg's own procedure on Spark, as an Iceberg user would run it instead
    out["iceberg"], answer = iceberg_procedure(
        copy, f"CALL {CATALOG}.system.rewrite_data_files(table => 'ns.t', options => "
              f"map('target-file-size-bytes', '{target_mb * MIB}'))", "Iceberg rewrite_data_files")
    out["iceberg_call"], out["iceberg_rows"] = answer["call_s"], answer["rows"][0]
    theirs = checksum(copy)
    problems = [f"{key}: {before[key]} before, {theirs[key]} after"
                for key in ("rows", "sums", "nulls", "hash_sum", "hash_sq") if before[key] != theirs[key]]
    if theirs["snapshot_id"] == p.scope.snapshot_id:
        problems.append(f"no new snapshot (still {p.scope.snapshot_id})")
    if problems:
        log("MISMATCH after Iceberg's rewrite_data_files:\n  " + "\n  ".join(problems))
        sys.exit(1)
    out["iceberg_files_after"] = len(theirs["files"])
    out["bins"] = len(p.scope.bins)
    out["inputs"] = sum(len(b["inputs"]) for b in p.scope.bins)
    out["input_bytes"] = sum(f["size"] for b in p.scope.bins for f in b["inputs"])
    out["rows"] = sum(f["record_count"] for b in p.scope.bins for f in b["inputs"])
    out["partitions"] = len({b["partition"] for b in p.scope.bins})
    out["data_files"] = p.scope.data_files
    if out["floor"]["rows"] != out["rows"]:
        log(f"MISMATCH: the floor wrote {out['floor']['rows']} rows, the plan's bins hold {out['rows']}")
        sys.exit(1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1g")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        sizes, rows, target_mb, repeat = [("quick", QUICK["size"])], QUICK["rows"], QUICK["target_mb"], 1
    else:
        sizes = [(s.strip().lower(), parse_size(s)) for s in args.sizes.split(",")]
        rows, target_mb, repeat = ROWS_PER_FILE, TARGET_MB, args.repeat
    print(f"{'size':>6} {'files':>6} {'inputs':>6} {'bins':>5} {'in MiB':>8} {'rows':>11} | {'plan':>7} "
          f"{'apply':>7} {'merge':>7} {'commit':>7} {'MiB/s':>7} {'rows/s':>10} | "
          f"{'floor':>7} {'MiB/s':>7} {'rows/s':>10} | "
          f"{'apply/floor':>11} | {'RSS plan':>8} {'driver':>6} {'JVM':>6} {'worker':>6} | "
          f"{'iceberg':>8} {'call':>7} {'ls/iceberg':>10} {'RSS ice':>8}", flush=True)
    for label, size in sizes:
        base = ensure_table(label, size, rows)
        before = json.loads((base / "checksum.json").read_text())
        runs = []
        with tempfile.TemporaryDirectory(prefix="lakesweep-bench-") as scratch:
            for k in range(repeat):
                runs.append(one_run(base, scratch, target_mb, before))
                r = runs[-1]
                log(f"{label} run {k + 1}: plan {r['plan'].seconds:.2f} s, apply {r['apply'].seconds:.2f} s "
                    f"(merge {r['spans']['merge_s']:.2f} s, commit {r['spans']['commit_s']:.2f} s), "
                    f"floor {r['floor']['seconds']:.2f} s, Iceberg rewrite_data_files {r['iceberg'].seconds:.2f} s "
                    f"(call {r['iceberg_call']:.2f} s)")
        med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
        r0 = runs[0]
        mib, rows_in = r0["input_bytes"] / MIB, r0["rows"]
        plan, apply, floor = med(lambda r: r["plan"].seconds), med(lambda r: r["apply"].seconds), \
            med(lambda r: r["floor"]["seconds"])
        peak = lambda key: med(lambda r: r["apply"].peaks_kib.get(key, 0)) / 1024  # noqa: E731
        ice, ends = med(lambda r: r["iceberg"].seconds), med(lambda r: r["plan"].seconds + r["apply"].seconds)
        print(f"{label:>6} {r0['data_files']:>6} {r0['inputs']:>6} {r0['bins']:>5} {mib:>8,.0f} {rows_in:>11,} | "
              f"{plan:>6.2f}s {apply:>6.2f}s {med(lambda r: r['spans']['merge_s']):>6.2f}s "
              f"{med(lambda r: r['spans']['commit_s']):>6.2f}s {mib / apply:>7.1f} {rows_in / apply:>10,.0f} | "
              f"{floor:>6.2f}s {mib / floor:>7.1f} {rows_in / floor:>10,.0f} | {apply / floor:>10.1f}x | "
              f"{med(lambda r: r['plan'].maxrss_kib) / 1024:>6.0f}Mi {peak('driver'):>4.0f}Mi {peak('java'):>4.0f}Mi "
              f"{peak('other'):>4.0f}Mi | {ice:>7.2f}s {med(lambda r: r['iceberg_call']):>6.2f}s "
              f"{ends / ice:>9.2f}x {med(lambda r: r['iceberg'].peaks_kib['java']) / 1024:>6.0f}Mi")
        print(f"{'':>6} {r0['partitions']} partitions, {r0['bins']} bins, {r0['data_files'] - r0['inputs']} files "
              f"not compacted; {r0['files_after']} data files after; rows, checksums and DELETED inputs "
              f"checked after each of {repeat} runs")
        ir = r0["iceberg_rows"]
        print(f"{'':>6} Iceberg rewrite_data_files rewrote {ir['rewritten_data_files_count']} files into "
              f"{ir['added_data_files_count']}; {r0['iceberg_files_after']} data files after; the same rows "
              f"checked after each of {repeat} runs; ls/iceberg is lakesweep plan + apply over Iceberg's "
              f"whole process", flush=True)


if __name__ == "__main__":
    main()
