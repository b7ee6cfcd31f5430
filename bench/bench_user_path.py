"""Benchmark of what a user runs: ``lakesweep plan expire`` and ``lakesweep apply`` as whole processes,
against Apache Paimon's own snapshot expiry (0.9 and current), the physical floors, and the journal's audit
commands.

    .venv/bin/python bench/bench_user_path.py [--sizes 30k,300k,1m,3m] [--repeat 3] [--journal-rows 10000000]
    .venv/bin/python bench/bench_user_path.py --quick        # tiny sizes: a smoke test of the benchmark

Tables are written by Paimon 0.9's Java core (tests/support/java/PaimonHarness.java) and cached under
``~/.cache/lakesweep-bench`` (``--cache``); the 1m and 3m tables are written small by it and grown to a
million and three million files with Paimon's own Avro schemas and hard links of its data files (bench/paimon_grow.py). Each size
expires all but the newest 10 snapshots, each repetition on fresh copies (``cp -a``) of the same table:

* Paimon, whole process: a JVM started for one ``ExpireSnapshotsImpl`` call, JVM start included;
* Paimon, warm JVM: the same call in a JVM that is already running and has expired this table before;
* current Paimon (``paimon-bundle``, pinned in tests/support/maven.py), whole process: a JVM started for
  ``ExpireSnapshotsImpl`` (tests/support/java/CurrentPaimon.java, which first makes a call that expires
  nothing, to load its classes), JVM start included; its tree must equal Paimon 0.9's;
* ``lakesweep plan expire`` and ``lakesweep apply`` (local Spark ``local[*]``, a new DuckDB journal),
  each the console script as its own process; afterwards the table's file tree (directories and the
  EARLIEST hint included) must equal Paimon's, or the benchmark says so and exits 1;
* Spark start-up: ``applier.spark_exec.spark_context("local[*]")`` (what apply starts: a SparkContext and the
  executor preflight) to ``.stop()``, in a new process;
* floors, timed inside a child process: fastavro decoding of exactly the manifest lists and manifests
  the planner reads, and a serial ``os.unlink`` of exactly the files the plan deletes;
* peak RSS: ``os.wait4``'s ``ru_maxrss`` and the kernel's high-water mark (``VmHWM``) of the planning
  process; for apply, ``VmHWM`` of the lakesweep driver process and, separately, of the Spark JVM and
  Python workers it starts (``ru_maxrss`` of a child is at least its parent's size when it started, so
  this process stays small: plans and floors are handled in child processes, bench/userpath_helpers.py);
* the journal: the append rate of ``Recorder.record_files`` and, over a journal of ``--journal-rows``
  file records (a real apply's journal cloned in DuckDB, cached), ``lakesweep journal files --path``,
  ``lakesweep journal plans`` and ``lakesweep journal query`` on the ``file_audit`` view.

Medians of ``--repeat`` runs; every ratio compares medians measured in this run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
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

from userpath_proc import hwm_kib, run_process  # noqa: E402
from userpath_tables import SPECS, copy_table, differences, ensure_table  # noqa: E402

from userpath_helpers import MAX_DELETES, RETAIN  # noqa: E402
from tests.support.maven import JAVA_REFERENCES  # noqa: E402

CURRENT = JAVA_REFERENCES["paimon-bundle"].version  # current Paimon's version

LAKESWEEP = os.path.join(os.path.dirname(sys.executable), "lakesweep")
# Paimon's JVM: the harness's tuning for short runs (C1 only, serial GC), which made Paimon's whole-process
# expiry fastest here, with room for the largest table
PAIMON_JVM = ("-Xmx4g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
HELPERS = str(Path(__file__).resolve().parent / "userpath_helpers.py")
SPARK_SNIPPET = """
import time
t0 = time.perf_counter()
from lakesweep.applier.spark_exec import spark_context
spark_context("local[*]").stop()
print(time.perf_counter() - t0)
"""
QUICK_JOURNAL_ROWS = 20_000

# targets of issue 9 (the 1m row: issue 33; the 3m rows: issue 28); "size" is the table size a target is about (None: the journal)
TARGETS = [
    ("end to end (plan + apply) / Paimon whole process", "30k", "e2e", "<=", 2.0, "x"),
    ("end to end (plan + apply) / Paimon whole process", "300k", "e2e", "<=", 1.0, "x"),
    (f"end to end (plan + apply) / Paimon {CURRENT} whole process", "1m", "e2e_current", "<=", 0.5, "x"),
    ("apply throughput excl. Spark start-up / serial unlink", "300k", "apply_throughput", ">=", 0.3, "x"),
    ("planning / fastavro floor", "30k", "plan_floor", "<=", 3.0, "x"),
    ("planning / fastavro floor", "300k", "plan_floor", "<=", 3.0, "x"),
    ("planner peak RSS", "300k", "plan_rss", "<=", 1536, "MiB"),
    ("apply driver peak RSS", "300k", "apply_rss", "<=", 1024, "MiB"),
    ("planner peak RSS", "3m", "plan_rss", "<=", 1024, "MiB"),  # issue 28
    ("apply driver peak RSS", "3m", "apply_rss", "<=", 1024, "MiB"),
    ("journal files --path", None, "q_files", "<=", 2.0, "s"),
    ("journal plans", None, "q_plans", "<=", 2.0, "s"),
    ("audit view query (journal query on file_audit)", None, "q_audit", "<=", 2.0, "s"),
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def helper(*args: str, cwd: Path) -> dict:
    """Run bench/userpath_helpers.py in a child process (keeps this process small) and parse its answer."""
    res = run_process([sys.executable, HELPERS, *args], cwd=cwd).check()
    return json.loads(res.stdout.strip().splitlines()[-1])


def paimon_process(classpath: list[str], table: Path) -> tuple[float, int, int]:
    """Paimon's expiry in a JVM started for it: (seconds incl. JVM start and exit, expired, peak RSS KiB)."""
    from tests.support.paimon_java import Harness

    t0 = time.perf_counter()
    h = Harness(classpath, jvm_options=PAIMON_JVM, timeout_s=4 * 3600)
    try:
        expired = h.expire(table, retain_min=RETAIN, retain_max=RETAIN, time_retained_ms=0,
                           max_deletes=MAX_DELETES)["expired"]
        rss = hwm_kib(h.pid)
    finally:
        h.close()
    return time.perf_counter() - t0, expired, rss


def paimon_current_process(classpath: list[str], table: Path) -> tuple[float, int, int]:
    """Current Paimon's expiry in a JVM started for it (CurrentPaimon.java, Paimon 0.9's JVM options): (seconds
    incl. JVM start and exit, expired, peak RSS KiB). Every snapshot older than now is eligible, as with 0.9's
    time-retained 0: the tables were written before."""
    from tests.support.paimon_java import JVM_QUIET_OPTIONS

    cmd = ["java", *JVM_QUIET_OPTIONS, *PAIMON_JVM, "-cp", os.pathsep.join(classpath), "CurrentPaimon", "expire",
           str(table), str(RETAIN), str(RETAIN), str(MAX_DELETES), str(int(time.time() * 1000))]
    res = run_process(cmd, sample=True).check()
    return res.seconds, int(res.stdout.split()[-2]), res.peaks_kib["driver"]


def paimon_warm(harness, table: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    expired = harness.expire(table, retain_min=RETAIN, retain_max=RETAIN, time_retained_ms=0,
                             max_deletes=MAX_DELETES)["expired"]
    return time.perf_counter() - t0, expired


def fresh(work: Path, name: str) -> Path:
    p = work / name
    if p.exists():
        shutil.rmtree(p)
    return p


def plan_cmd(table: Path, plan_file: Path) -> list[str]:
    return [LAKESWEEP, "plan", "expire", str(table), "--out", str(plan_file), "--retain-min", str(RETAIN),
            "--retain-max", str(RETAIN), "--time-retained", "0 s", "--max-deletes", str(MAX_DELETES),
            "--time-rule", "own"]


def crash_and_resume(name: str, table: Path, work: Path, lists: Path, actions: int, theirs: Path,
                     failures: list[str], kill_fraction: float = 0.5, must_kill: bool = True) -> dict:
    """``kill -9`` a ``lakesweep apply`` once about ``kill_fraction`` of a sample of the files it deletes
    are gone, then time ``lakesweep resume`` as a whole process. The journal must then hold one record
    per action, none failed, and the tree must equal Paimon's."""
    copy = copy_table(table, fresh(work, f"{name}-resume"))
    plan_file, journal = work / f"{name}-resume-plan.parquet", work / f"{name}-resume-journal.duckdb"
    for p in (plan_file, journal):
        if p.exists():
            p.unlink()
    run_process(plan_cmd(copy, plan_file), cwd=work).check()
    watched = [copy / p for p in helper("sample", "--info", str(lists), "--n", "2000", cwd=work)["paths"]]
    os.sync()
    t0 = time.perf_counter()
    proc = subprocess.Popen([LAKESWEEP, "apply", str(plan_file), "--journal", str(journal), "--master", "local[*]"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=work, start_new_session=True)
    while proc.poll() is None:
        gone = sum(not p.exists() for p in watched)
        if gone >= kill_fraction * len(watched):
            break
        time.sleep(0.05)
    killed_at = time.perf_counter() - t0
    finished = proc.poll() is not None
    os.kill(proc.pid, 9)  # the driver only, as a user's kill -9 would; its JVM and workers follow it
    proc.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, 9)
        failures.append(f"{name}: Spark outlived the killed apply driver by a minute")
    if finished and must_kill:
        failures.append(f"{name}: the apply finished before it could be killed")
    journaled = sum(helper("journal", str(journal), cwd=work).values())
    res = run_process([LAKESWEEP, "resume", "--journal", str(journal), "--master", "local[*]"], cwd=work)
    if res.returncode != 0:
        failures.append(f"{name}: lakesweep resume exited {res.returncode}: {res.stderr[-500:]}")
    counts = helper("journal", str(journal), cwd=work)
    if sum(counts.values()) != actions or counts.get("FAILED"):
        failures.append(f"{name}: after kill -9 and resume the journal holds {counts} for {actions} actions")
    diff = differences(copy, theirs)
    if diff:
        failures.append(f"{name}: kill -9 and resume left a different tree than Paimon's: " + "; ".join(diff))
    shutil.rmtree(copy)
    plan_file.unlink()
    journal.unlink()
    return {"killed_at": killed_at, "finished": finished, "journaled": journaled, "left": actions - journaled, "resume": res.seconds,
            "already_absent": counts.get("ALREADY_ABSENT", 0)}


def bench_size(name: str, args, work: Path, classpath, current_classpath, warm, failures: list[str]) -> dict:
    spec = SPECS[name]
    table, meta = ensure_table(spec, args.cache, log)
    log(f"[{name}] {meta['snapshots']} snapshots, {meta['files']} files ({meta['data_files']} data files)"
        f"{' (cached)' if meta.get('cached') else ''}; planning in a child process to list what the plan "
        f"reads and deletes ...")
    lists = work / f"{name}-lists.json"
    info = helper("info", "--table", str(table), "--out", str(lists), cwd=work)
    r = {k: [] for k in ("paimon", "warm", "plan", "apply", "spark", "avro", "unlink", "plan_rss", "plan_hwm",
                         "apply_driver", "apply_java", "apply_workers", "apply_wait4", "paimon_rss",
                         "paimon_current", "paimon_current_rss")}
    r.update(table=meta, actions=info["actions"], deletes=info["deletes"], avro_files=info["avro_files"],
             avro_bytes=info["avro_bytes"], expired=info["expired"])

    log(f"[{name}] {info['actions']} actions, {info['deletes']} files to delete; "
        f"the planner reads {info['avro_files']} Avro files; warming the resident Paimon JVM on a copy ...")
    warm_copy = copy_table(table, fresh(work, "warmup"))
    paimon_warm(warm, warm_copy)
    shutil.rmtree(warm_copy)

    for i in range(args.repeat):
        log(f"[{name}] run {i + 1}/{args.repeat}: copying the table 5 times ...")
        theirs, warm_t, current, ours, floor = (copy_table(table, fresh(work, f"{name}-{k}")) for k in
                                                ("paimon", "paimon-warm", "paimon-current", "lakesweep", "floor"))
        os.sync()
        secs, expired, rss = paimon_process(classpath, theirs)
        r["paimon"].append(secs)
        r["paimon_rss"].append(rss)
        os.sync()
        secs, expired_warm = paimon_warm(warm, warm_t)
        r["warm"].append(secs)
        if expired != info["expired"] or expired_warm != info["expired"]:
            failures.append(f"{name}: Paimon expired {expired} (warm: {expired_warm}) snapshots, "
                            f"the plan expires {info['expired']}")
        os.sync()
        secs, expired_current, rss = paimon_current_process(current_classpath, current)
        r["paimon_current"].append(secs)
        r["paimon_current_rss"].append(rss)
        if expired_current != info["expired"]:
            failures.append(f"{name}: Paimon {CURRENT} expired {expired_current} snapshots, the plan expires "
                            f"{info['expired']}")
        diff = differences(current, theirs)
        if diff:
            failures.append(f"{name} run {i + 1}: Paimon {CURRENT} left a different tree than Paimon 0.9's "
                            "whole-process expiry: " + "; ".join(diff))

        plan_file = work / f"{name}-plan-{i}.parquet"
        journal = work / f"{name}-journal-{i}.duckdb"
        for p in (plan_file, journal):
            if p.exists():
                p.unlink()
        os.sync()
        res = run_process(plan_cmd(ours, plan_file), sample=True, cwd=work).check()
        r["plan"].append(res.seconds)
        r["plan_rss"].append(res.maxrss_kib)
        r["plan_hwm"].append(res.peaks_kib["driver"])
        os.sync()
        res = run_process([LAKESWEEP, "apply", str(plan_file), "--journal", str(journal), "--master", "local[*]"],
                          sample=True, cwd=work).check()
        r["apply"].append(res.seconds)
        r["apply_driver"].append(res.peaks_kib["driver"])
        r["apply_java"].append(res.peaks_kib["java"])
        r["apply_workers"].append(res.peaks_kib["other"])
        r["apply_wait4"].append(res.maxrss_kib)

        cli = helper("info", "--plan", str(plan_file), "--out", str(work / "cli-lists.json"), cwd=work)
        if (cli["deletes"], cli["deleted_digest"]) != (info["deletes"], info["deleted_digest"]):
            failures.append(f"{name}: the CLI's plan deletes {cli['deletes']} files, the plan made in a child "
                            f"process {info['deletes']} (or other ones)")
        counts = helper("journal", str(journal), cwd=work)
        if sum(counts.values()) != cli["actions"] or counts.get("FAILED"):
            failures.append(f"{name}: the journal holds {counts} for {cli['actions']} actions")
        for label, other in (("lakesweep", ours), ("Paimon in a warm JVM", warm_t)):
            diff = differences(other, theirs)
            if diff:
                failures.append(f"{name} run {i + 1}: {label} left a different tree than Paimon's whole-process "
                                f"expiry: " + "; ".join(diff))
        if i == 0:
            r["plan_file"], r["journal"] = str(plan_file), str(journal)
        else:
            plan_file.unlink()
            journal.unlink()

        os.sync()
        fl = helper("floors", "--info", str(lists), "--root", str(floor), cwd=work)
        r["avro"].append(fl["avro_s"])
        r["unlink"].append(fl["unlink_s"])
        res = run_process([sys.executable, "-c", SPARK_SNIPPET], cwd=work).check()
        r["spark"].append(float(res.stdout.strip().splitlines()[-1]))
        if i == args.repeat - 1:
            log(f"[{name}] kill -9 of an apply halfway, then lakesweep resume ...")
            r["crash"] = crash_and_resume(name, table, work, lists, info["actions"], theirs, failures,
                                          must_kill=not args.quick)
        for d in (theirs, warm_t, current, ours, floor):
            shutil.rmtree(d)
        log(f"[{name}] run {i + 1}: paimon {r['paimon'][-1]:.2f} s, warm {r['warm'][-1]:.2f} s, "
            f"paimon {CURRENT} {r['paimon_current'][-1]:.2f} s, "
            f"plan {r['plan'][-1]:.2f} s, apply {r['apply'][-1]:.2f} s, spark start {r['spark'][-1]:.2f} s, "
            f"avro floor {r['avro'][-1]:.2f} s, unlink floor {r['unlink'][-1]:.2f} s")
    return r


def bench_journal(base: str, sizes_results: dict, args, work: Path) -> dict:
    from lakesweep.engine.plan_io import read_plan
    from userpath_journal import build_large_journal, journal_facts, replay_append_rate, schema_fingerprint

    base_r = sizes_results[base]
    source, plan = Path(base_r["journal"]), read_plan(base_r["plan_file"])
    out = {"append_rows": 0, "append": []}
    for i in range(args.repeat):
        target = work / f"append-{i}.duckdb"
        rows, secs = replay_append_rate(source, plan, target)
        out["append"].append(rows / secs)
        out["append_rows"] = rows
        target.unlink()
    cache = args.cache / "journals" / f"journal-{args.journal_rows}-{base}-{SPECS[base].key()}-{schema_fingerprint()}.duckdb"
    if not cache.is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        log(f"building a journal of {args.journal_rows} file records (cached in {cache}) ...")
        build_large_journal(source, args.journal_rows, cache, f"/lake/{base}-table-", log)
    journal = work / "large-journal.duckdb"
    shutil.copyfile(cache, journal)
    facts = journal_facts(journal)
    out["facts"] = facts
    glob = f"*{facts['file_name']}"
    sql = (f"SELECT count(*) AS files, sum(bytes) AS bytes FROM file_audit WHERE \"table\" = '{facts['table']}' "
           f"AND kind = 'data-file' AND outcome = 'DELETED' AND snapshot_id <= {facts['snapshot_mid']}")
    commands = {
        "q_files": [LAKESWEEP, "journal", "files", "--journal", str(journal), "--path", glob],
        "q_plans": [LAKESWEEP, "journal", "plans", "--journal", str(journal)],
        "q_audit": [LAKESWEEP, "journal", "query", sql, "--journal", str(journal)],
    }
    out["commands"] = {k: " ".join(c[1:3]) + (f" --path '{glob}'" if k == "q_files" else "")
                       + (f' "{sql}"' if k == "q_audit" else "") for k, c in commands.items()}
    for k, cmd in commands.items():
        out[k] = []
        for _ in range(args.repeat):
            res = run_process(cmd, cwd=work).check()
            out[k].append(res.seconds)
        if k == "q_files" and f"{facts['plans']} file record(s)" not in res.stdout:
            raise SystemExit(f"journal files --path {glob!r} did not list the {facts['plans']} records expected:\n"
                             f"{res.stdout[-2000:]}")
    journal.unlink()
    return out


# ---------------------------------------------------------------------------------------------------- report


def derived(r: dict) -> dict:
    m = {k: median(r[k]) for k in ("paimon", "warm", "paimon_current", "plan", "apply", "spark", "avro", "unlink")}
    m["e2e"] = median([p + a for p, a in zip(r["plan"], r["apply"])])
    m["apply_excl"] = median([a - s for a, s in zip(r["apply"], r["spark"])])
    mib = {k: median(r[k]) / 1024 for k in ("plan_rss", "plan_hwm", "apply_driver", "apply_java", "apply_workers",
                                            "apply_wait4", "paimon_rss", "paimon_current_rss")}
    ratios = {
        "e2e": m["e2e"] / m["paimon"],
        "e2e_current": m["e2e"] / m["paimon_current"],
        "plan_floor": m["plan"] / m["avro"],
        "apply_throughput": m["unlink"] / m["apply_excl"] if m["apply_excl"] > 0 else float("inf"),
        "plan_rss": mib["plan_rss"],
        "apply_rss": mib["apply_driver"],
    }
    return {"m": m, "mib": mib, "ratios": ratios}


def fmt(x, digits=2):
    return "" if x is None else f"{x:,.{digits}f}"


def print_size(name: str, r: dict, d: dict) -> None:
    m, mib, t = d["m"], d["mib"], r["table"]
    paimon = m["paimon"]
    print(f"\n### {name}: {t['snapshots']:,} snapshots, {t['files']:,} files ({t['data_files']:,} data files), "
          f"{t['spec']['kind']} table, bucket {t['bucket']}, {t['partitions']} partitions, "
          f"{t['options'].get('file.format')}")
    print(f"expire all but {RETAIN} snapshots: {r['expired']:,} snapshots, {r['actions']:,} actions, "
          f"{r['deletes']:,} files deleted; the planner reads {r['avro_files']:,} manifest lists and manifests "
          f"({r['avro_bytes'] / 2**20:,.1f} MiB)\n")
    rows = [
        ("Paimon expire, whole process (JVM start included)", m["paimon"], None),
        ("Paimon expire, warm JVM", m["warm"], None),
        (f"Paimon {CURRENT} expire, whole process (JVM start included)", m["paimon_current"], None),
        ("lakesweep plan expire (process)", m["plan"], ("fastavro", m["plan"] / m["avro"])),
        ("lakesweep apply (process, local[*], DuckDB journal)", m["apply"], None),
        ("lakesweep plan + apply (end to end)", m["e2e"], None),
        ("Spark start-up as apply starts it (process: import, SparkContext, preflight, stop)", m["spark"], None),
        ("lakesweep apply excluding Spark start-up", m["apply_excl"], ("unlink", m["apply_excl"] / m["unlink"])),
        (f"floor: fastavro decode of the {r['avro_files']:,} manifest files planning reads", m["avro"], None),
        (f"floor: serial os.unlink of the {r['deletes']:,} files the plan deletes "
         f"({m['unlink'] / max(r['deletes'], 1) * 1e6:,.0f} µs each)", m["unlink"], None),
    ]
    print(f"| step | median s | × Paimon whole process | × Paimon {CURRENT} whole process | × floor |")
    print("|---|---:|---:|---:|---:|")
    for label, secs, floor in rows:
        vs = f"{secs / paimon:.2f}×" if paimon else ""
        vs_current = f"{secs / m['paimon_current']:.2f}×" if m["paimon_current"] else ""
        fl = f"{floor[1]:.2f}× {floor[0]}" if floor else ""
        print(f"| {label} | {fmt(secs)} | {vs} | {vs_current} | {fl} |")
    c = r.get("crash")
    if c:
        left = c["left"] / max(r["actions"], 1)
        done_share = (c["resume"] - m["spark"]) / max(m["apply_excl"], 1e-9)
        print(f"\nkill -9 of an apply {c['killed_at']:.1f} s after it started"
              f"{' (it had already finished)' if c['finished'] else ''}: {c['journaled']:,} of {r['actions']:,} "
              f"actions journaled; lakesweep resume (process) then took {c['resume']:.2f} s for the "
              f"{c['left']:,} left ({left:.0%} of the plan; {c['already_absent']:,} found already deleted). "
              f"Resume excluding Spark start-up is {done_share:.0%} of a whole apply's.")
    print("\n| peak RSS | median MiB |")
    print("|---|---:|")
    for label, v in (
        ("lakesweep plan expire (process; wait4 ru_maxrss)", mib["plan_rss"]),
        ("lakesweep plan expire (process; VmHWM)", mib["plan_hwm"]),
        ("lakesweep apply driver (the lakesweep Python process; VmHWM)", mib["apply_driver"]),
        ("lakesweep apply's Spark JVM (a child of the driver; VmHWM)", mib["apply_java"]),
        ("lakesweep apply's largest Spark Python worker (VmHWM)", mib["apply_workers"]),
        ("lakesweep apply (wait4 ru_maxrss: the driver and the children it reaped)", mib["apply_wait4"]),
        ("Paimon expire JVM (whole process; VmHWM)", mib["paimon_rss"]),
        (f"Paimon {CURRENT} expire JVM (whole process; VmHWM)", mib["paimon_current_rss"]),
    ):
        print(f"| {label} | {fmt(v, 0)} |")


def print_journal(j: dict) -> None:
    f = j["facts"]
    print(f"\n### journal: {f['file_records']:,} file records, {f['plans']:,} plans\n")
    print("| step | median |")
    print("|---|---:|")
    print(f"| append through Recorder.record_files ({j['append_rows']:,} records in 500-record batches) "
          f"| {median(j['append']):,.0f} rows/s |")
    for k, label in (("q_files", "lakesweep {} ({} rows)".format(j["commands"]["q_files"], f["plans"])),
                     ("q_plans", f"lakesweep journal plans ({f['plans']} rows)"),
                     ("q_audit", "lakesweep {}".format(j["commands"]["q_audit"]))):
        print(f"| {label} | {median(j[k]):.2f} s |")


def evaluate(targets, derived_by_size: dict, journal: dict | None, quick: bool) -> list[tuple]:
    out = []
    for label, size, key, op, limit, unit in targets:
        if quick:
            size = "quick" if size is not None else None
        if size is not None:
            if size not in derived_by_size:
                continue
            value = derived_by_size[size]["ratios"][key]
        else:
            if journal is None:
                continue
            value = median(journal[key])
        met = value <= limit if op == "<=" else value >= limit
        where = size or f"{journal['facts']['file_records']:,} records"
        row = (f"{label} ({where})", value, f"{'≤' if op == '<=' else '≥'} {limit:g}{'×' if unit == 'x' else ' ' + unit}",
               unit, "met" if met else "MISSED")
        if all(r[0] != row[0] for r in out):  # --quick maps both sizes onto one: keep the first
            out.append(row)
    return out


def print_targets(rows) -> None:
    print("\n### targets (issues 9, 33 and 28)\n")
    print("| target | measured | limit | |")
    print("|---|---:|---:|---|")
    for label, value, limit, unit, verdict in rows:
        shown = f"{value:,.0f} MiB" if unit == "MiB" else (f"{value:.2f} s" if unit == "s" else f"{value:.2f}×")
        print(f"| {label} | {shown} | {limit} | {verdict} |")


def machine() -> str:
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        mem = f", {kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores{mem}, Python "
            f"{platform.python_version()}, {java[0] if java else 'java ?'}")


def file_system(path: Path) -> str:
    """The mount a path lives on, as "type (device at mount point)"."""
    path = str(path.resolve())
    best = ("", "?", "?")
    try:
        with open("/proc/mounts") as f:
            for line in f:
                dev, mnt, fstype = line.split()[:3]
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
                    best = (mnt, dev, fstype)
    except OSError:
        pass
    return f"{best[2]} ({best[1]} at {best[0]})"


# ---------------------------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="30k,300k", help="comma-separated: 30k, 300k, 1m, 3m (default: 30k,300k)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per measurement (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="tiny table and journal: checks the benchmark runs")
    ap.add_argument("--journal-rows", type=int, default=None, help="file records in the large journal "
                    f"(default 10,000,000; {QUICK_JOURNAL_ROWS:,} with --quick)")
    ap.add_argument("--no-journal", action="store_true", help="leave out the journal's measurements")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("LAKESWEEP_BENCH_CACHE", "")
                                                       or Path.home() / ".cache" / "lakesweep-bench"))
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a new temporary one)")
    ap.add_argument("--json", type=Path, default=None, help="also write every measurement to this file")
    args = ap.parse_args(argv)
    sizes = ["quick"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in SPECS:
            ap.error(f"unknown size {s!r}; choose from {', '.join(k for k in SPECS if k != 'quick')}")
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.journal_rows = args.journal_rows or (QUICK_JOURNAL_ROWS if args.quick else 10_000_000)
    if not os.path.isfile(LAKESWEEP):
        ap.error(f"{LAKESWEEP} not found: run this with the Python of the venv lakesweep is installed in")

    from tests.support.paimon_current import classpath as paimon_current_classpath
    from tests.support.paimon_java import Harness, harness_classpath

    started = datetime.datetime.now().astimezone()
    work = Path(tempfile.mkdtemp(prefix="lakesweep-bench-", dir=args.work))
    classpath = harness_classpath()
    current_classpath = paimon_current_classpath()
    warm = Harness(classpath, jvm_options=PAIMON_JVM, timeout_s=4 * 3600)
    failures: list[str] = []
    results: dict = {}
    try:
        for name in sizes:
            results[name] = bench_size(name, args, work, classpath, current_classpath, warm, failures)
        journal = None if args.no_journal else bench_journal(sizes[0], results, args, work)
    finally:
        warm.close()
        shutil.rmtree(work, ignore_errors=True)

    der = {name: derived(r) for name, r in results.items()}
    print(f"## lakesweep user-path benchmark, {started:%Y-%m-%d}\n")
    print(f"command: {' '.join(['python', 'bench/bench_user_path.py', *(argv if argv is not None else sys.argv[1:])])}")
    print(f"machine: {machine()}")
    print(f"table copies, plans and journals on: {file_system(work.parent)}")
    print(f"medians of {args.repeat} run(s); Paimon 0.9 and {CURRENT} JVM options: {' '.join(PAIMON_JVM)}")
    for name in sizes:
        print_size(name, results[name], der[name])
    if journal is not None:
        print_journal(journal)
    print_targets(evaluate(TARGETS, der, journal, args.quick))
    if args.json:
        args.json.write_text(json.dumps({"results": results, "derived": der, "journal": journal,
                                         "failures": failures}, indent=1, default=str))
    if failures:
        print("\n*** EQUALITY / CONSISTENCY CHECK FAILED ***")
        for f in failures:
            print(f"*** {f}")
        return 1
    print(f"\nequality: after every lakesweep run the table's files, directories and EARLIEST hint were "
          f"identical to Paimon's expiry of the same copy ({sum(len(r['plan']) for r in results.values())} runs); "
          f"Paimon {CURRENT}'s expiry of another copy left the same tree as Paimon 0.9's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
