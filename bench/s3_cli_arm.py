"""bench_s3's user arm: ``lakesweep plan orphans`` and ``lakesweep apply --master local[2] --journal J`` as whole
processes on their own copy, the extra files planted as orphans (older than the cut-off the plan is given).

Apply's stderr is a pseudo-terminal, so it draws its phase bar as it does for a person; the bar's last frame
gives the delete phase's files/s, timed from the phase's start (Spark up, the plan re-checked) to its end: the
apply excluding Spark start-up. The journal is then read: every file record must be DELETED, one per object,
and the copy must hold none of them. Peak RSS is sampled ``VmHWM``: the Python driver, the Spark JVM, the
largest other descendant (a Spark Python worker).
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import threading
import time

from userpath_proc import TreeSampler, run_process  # bench/ is on sys.path: bench_s3 runs from there
from tests.support.processes import LAKESWEEP

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BAR = re.compile(r"(\d[\d,]*)/(\d[\d,]*) files .*? ([\d,.]+) files/s .*?(\d+):(\d\d):(\d\d)")


def _env(settings: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({k: v for k, v in settings.items() if k.startswith("AWS_")})
    env.update(COLUMNS="200", LINES="50", TERM="xterm-256color")
    return env


def _mib(peaks: dict) -> dict:
    return {k: round(v / 1024) for k, v in peaks.items()}


def plan(settings: dict, prefix: str, n: int, out: str, cutoff_ms: int) -> dict:
    """``lakesweep plan orphans`` on the copy: every file written before ``cutoff_ms`` that no snapshot uses."""
    from lakesweep.engine.plan_io import read_plan
    from lakesweep.engine.s3_bulk import plan_requests

    location = f"s3://{settings['bucket']}/{prefix}"
    res = run_process([*LAKESWEEP, "plan", "orphans", location, "--out", out, "--older-than", str(cutoff_ms),
                       "--force", "-o", "json"], sample=True, env=_env(settings)).check()
    p = read_plan(out)
    if len(p.actions) != n:
        raise SystemExit(f"plan orphans planned {len(p.actions)} actions, expected the {n} extra files")
    return {"mode": "plan (CLI)", "seconds": res.seconds, "keys": n, "keys_per_s": n / res.seconds,
            "requests": {}, "spent": {}, "markers": 0, "peak_rss_mb": res.peaks_kib["driver"] / 1024,
            "peaks_mib": _mib(res.peaks_kib), "planned_requests": plan_requests(p)}


def apply(settings: dict, prefix: str, n: int, plan_path: str, journal: str, *, delete_batch: int | None = None,
          mode: str = "apply (CLI)") -> dict:
    """``lakesweep apply PLAN --master local[2] --journal J`` (with ``--delete-batch-size`` when given),
    stderr on a pseudo-terminal."""
    import duckdb

    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    cmd = [*LAKESWEEP, "apply", plan_path, "--master", "local[2]", "--journal", journal]
    if delete_batch is not None:
        cmd += ["--delete-batch-size", str(delete_batch)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=_env(settings))
    sampler = TreeSampler(proc.pid)
    stdout, _ = proc.communicate()
    seconds = time.perf_counter() - t0
    peaks = sampler.stop()
    os.close(slave)
    reader.join(5)
    os.close(master)
    stderr = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
    if proc.returncode != 0:
        raise SystemExit(f"apply exited {proc.returncode}:\n{stdout.decode()[-3000:]}\n{stderr[-3000:]}")
    frames = BAR.findall(stderr)
    if not frames:
        raise SystemExit(f"apply drew no phase bar:\n{stderr[-3000:]}")
    done, total, rate, h, m, s = frames[-1]
    if int(done.replace(",", "")) != n or int(total.replace(",", "")) != n:
        raise SystemExit(f"apply's last bar shows {done}/{total} files, expected {n}/{n}")
    bar_rate = float(rate.replace(",", ""))

    with duckdb.connect(journal, read_only=True) as db:
        outcomes = dict(db.execute("SELECT outcome, count(*) FROM file_records GROUP BY outcome").fetchall())
        distinct = db.execute("SELECT count(DISTINCT action_id) FROM file_records").fetchone()[0]
        first_ms, last_ms = db.execute("SELECT min(time_ms), max(time_ms) FROM file_records").fetchone()
        events = db.execute("SELECT event_type, payload FROM events ORDER BY seq").fetchall()
    if outcomes != {"DELETED": n} or distinct != n:
        raise SystemExit(f"apply journaled {outcomes} over {distinct} actions, expected {n} DELETED")
    by_type: dict[str, list[dict]] = {}
    for kind, payload in events:
        by_type.setdefault(kind, []).append(json.loads(payload))
    started, completed = by_type["ApplyStarted"][0], by_type["ApplyCompleted"][0]
    throttled = by_type.get("RequestsThrottled", [])
    return {"mode": mode, "seconds": seconds, "keys": n, "keys_per_s": n / seconds,
            "excl_keys_per_s": bar_rate, "excl_seconds": n / bar_rate,
            "bar_elapsed_s": int(h) * 3600 + int(m) * 60 + int(s),
            "journal_span_s": (completed["finished_ms"] - started["started_ms"]) / 1000,
            "records_span_s": (last_ms - first_ms) / 1000,
            "throttled_events": len(throttled), "slowdowns": sum(e["slowdowns"] for e in throttled),
            "requests": {}, "spent": {}, "markers": 0, "peak_rss_mb": peaks["driver"] / 1024,
            "peaks_mib": _mib(peaks), "stdout": stdout.decode()[-2000:]}
