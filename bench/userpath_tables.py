"""Tables for bench_user_path.py: written by Paimon 0.9's Java core through the test harness, cached.
A spec with ``grow_to`` is written small by Paimon and then grown to that many files (bench/paimon_grow.py).

A table is built once per set of parameters under ``<cache>/tables/<name>-<key>/table`` (the key hashes
every parameter) and copied with ``cp -a`` for each run, so every run starts from the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

CACHE_FORMAT = 1  # bump when the layout of the cache changes
# generation runs for minutes: the JVM's default JIT (C2) and a parallel collector beat the harness's
# C1-only serial settings, which suit its many short test commands
GENERATE_JVM = ("-Xmx4g", "-XX:+UseParallelGC")


@dataclass(frozen=True)
class TableSpec:
    """What ``PaimonHarness generate`` is asked for, and what the result must reach."""

    name: str
    kind: str
    seed: int
    steps: int
    options: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)
    partitions: int | None = None
    rows_per_write: int | None = None
    min_snapshots: int = 0
    min_data_files: int = 0
    grow_to: int | None = None  # files; None: Paimon writes the whole table

    def key(self) -> str:
        spec = {k: v for k, v in asdict(self).items() if k != "grow_to" or v is not None}
        blob = json.dumps({"format": CACHE_FORMAT, **spec}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


NO_AUTO_EXPIRE = {"snapshot.num-retained.min": "100000", "snapshot.num-retained.max": "200000"}
QUIET_OPS = {"consumer": 0, "tag": 0, "untag": 0}  # nothing that holds snapshots back from expiry

# what the grown tables have Paimon write first: the 300k table's shape, 300 steps
GROWN = dict(kind="append", seed=7, steps=300, partitions=80, rows_per_write=400,
             options={"bucket": "-1", "bucket-key": None, "compaction.min.file-num": None, "file.format": "avro",
                      "async-file-write": "false", "manifest.merge-min-count": "30", **NO_AUTO_EXPIRE},
             ops={**QUIET_OPS, "write": 70, "compact": 28, "overwrite": 2})

SPECS = {
    # a few dozen snapshots, for --quick
    "quick": TableSpec("quick", kind="pk", seed=7, steps=40, ops=QUIET_OPS),
    # the harness's random primary-key table (options drawn from the seed: 3 buckets, changelog
    # producer "input", ORC), 5 partitions and 40 rows per write: ~1,800 snapshots, ~31k files
    "30k": TableSpec("30k", kind="pk", seed=7, steps=1100, partitions=5, rows_per_write=40,
                     options=NO_AUTO_EXPIRE, ops=QUIET_OPS, min_snapshots=1500, min_data_files=10_000),
    # daily partitions, 80 written by every commit: an append table with Paimon's own manifest
    # merge threshold (30) and synchronous file writes (many small files)
    "300k": TableSpec("300k", kind="append", seed=7, steps=5600, partitions=80, rows_per_write=400,
                      options={"bucket": "-1", "bucket-key": None, "compaction.min.file-num": None,
                               "file.format": "avro", "async-file-write": "false",
                               "manifest.merge-min-count": "30", **NO_AUTO_EXPIRE},
                      ops={**QUIET_OPS, "write": 70, "compact": 28, "overwrite": 2},
                      min_snapshots=5000, min_data_files=300_000),
    # the 300k table's shape, 300 steps written by Paimon and grown to a million files
    "1m": TableSpec("1m", **GROWN, min_snapshots=15_000, min_data_files=900_000, grow_to=1_000_000),
    # the same history grown on to three million files (issue 28's size)
    "3m": TableSpec("3m", **GROWN, min_snapshots=45_000, min_data_files=2_700_000, grow_to=3_000_000),
}
GROW_OPS = {"APPEND": 70, "COMPACT": 28, "OVERWRITE": 2}  # the weights of the 300k table's history


def count_files(root: Path) -> dict[str, int]:
    files = data = 0
    for _, _, names in os.walk(root):
        files += len(names)
        data += sum(1 for n in names if n.startswith("data-"))
    return {"files": files, "data_files": data}


def ensure_table(spec: TableSpec, cache: Path, log) -> tuple[Path, dict]:
    """The cached table for ``spec`` (built now if missing) and its description."""
    from tests.support.paimon_java import ensure_harness

    final = cache / "tables" / f"{spec.name}-{spec.key()}"
    meta_path = final / "meta.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        meta["cached"] = True
        return final / "table", meta
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    log(f"building table {spec.name} with Paimon's Java core ({spec.steps} steps; cached in {final}) ...")
    t0 = time.perf_counter()
    with ensure_harness(timeout_s=4 * 3600, jvm_options=GENERATE_JVM) as h:
        info = h.generate(tmp / "table", seed=spec.seed, kind=spec.kind, steps=spec.steps,
                          options=spec.options or None, ops=spec.ops or None, partitions=spec.partitions,
                          rows_per_write=spec.rows_per_write, bucket_dirs=False)
    seconds = time.perf_counter() - t0
    snapshots, grow = len(info["snapshots"]), {}
    if spec.grow_to is not None:
        from paimon_grow import open_grower

        log(f"  written by Paimon in {seconds:.0f} s; growing it to {spec.grow_to:,} files ...")
        t1 = time.perf_counter()
        grower = open_grower(tmp / "table", seed=spec.seed,
                             merge_min_count=int(spec.options["manifest.merge-min-count"]))
        grower.grow(spec.grow_to, GROW_OPS)
        snapshots += grower.written["snapshots"]
        grow = {"grow_s": round(time.perf_counter() - t1, 1), "grown": grower.written}
        seconds = time.perf_counter() - t0
    counts = count_files(tmp / "table")
    meta = {"spec": asdict(spec), "snapshots": snapshots, **counts, "generate_s": round(seconds, 1), **grow,
            "options": info["options"], "bucket": info["bucket"], "partitions": len(info["partitions"])}
    if meta["snapshots"] < spec.min_snapshots or meta["data_files"] < spec.min_data_files:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(f"table {spec.name}: {meta['snapshots']} snapshots and {meta['data_files']} data files, "
                         f"fewer than the {spec.min_snapshots} and {spec.min_data_files} it must have")
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    os.replace(tmp, final)
    log(f"  {meta['snapshots']} snapshots, {meta['files']} files ({meta['data_files']} data files) "
        f"in {seconds:.0f} s")
    meta["cached"] = False
    return final / "table", meta


def copy_table(src: Path, dst: Path) -> Path:
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


def tree(root: Path) -> tuple[set[str], set[str]]:
    files, dirs = set(), set()
    for d, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(d, root)
        for n in filenames:
            files.add(os.path.normpath(os.path.join(rel, n)))
        for n in dirnames:
            dirs.add(os.path.normpath(os.path.join(rel, n)))
    return files, dirs


def hint(root: Path) -> str | None:
    try:
        return (root / "snapshot" / "EARLIEST").read_text().strip()
    except FileNotFoundError:
        return None


def differences(ours: Path, theirs: Path) -> list[str]:
    """How the two trees differ (files, directories, EARLIEST hint); empty when they are identical."""
    (of, od), (tf, td) = tree(ours), tree(theirs)
    out = []
    for what, extra, missing in (("files", of - tf, tf - of), ("directories", od - td, td - od)):
        if extra:
            out.append(f"{len(extra)} {what} kept that Paimon deleted, e.g. {sorted(extra)[:3]}")
        if missing:
            out.append(f"{len(missing)} {what} deleted that Paimon kept, e.g. {sorted(missing)[:3]}")
    if hint(ours) != hint(theirs):
        out.append(f"EARLIEST hint {hint(ours)!r}, Paimon's {hint(theirs)!r}")
    return out
