"""Whole-process measurements for bench_user_path.py: wall time, wait4 rusage and sampled peak RSS.

``run_process`` starts a command, waits for it with ``os.wait4`` and returns its wall time and
``ru_maxrss`` (KiB on Linux). ``ru_maxrss`` from wait4 covers the child and those of its own children
that it waited for; a grandchild the child leaves behind (the JVM a PySpark driver starts, which is
re-parented to init when the driver exits) is not in it. So, optionally, a sampler reads the peak RSS
(``VmHWM`` in ``/proc/PID/status``, a high-water mark kept by the kernel) of the child and of every
descendant while they run, and reports the child, the JVMs and the other descendants separately.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field


@dataclass
class ProcResult:
    cmd: list[str]
    seconds: float
    returncode: int
    maxrss_kib: int  # wait4: the child and the descendants it waited for
    stdout: str
    stderr: str
    peaks_kib: dict[str, int] = field(default_factory=dict)  # sampled VmHWM: "driver", "java", "other"

    def check(self) -> "ProcResult":
        if self.returncode != 0:
            raise SystemExit(
                f"\n*** FAILED: {' '.join(self.cmd)} exited {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout (tail)\n{self.stdout[-3000:]}\n--- stderr (tail)\n{self.stderr[-3000:]}"
            )
        return self


def _status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return out


class TreeSampler:
    """Samples the peak RSS of a process and its descendants every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.2):
        self.pid = pid
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        todo = [self.pid]
        while todo:
            pid = todo.pop()
            hwm = _status_kib(pid, "VmHWM")
            if hwm is not None:
                self.peaks[pid] = max(self.peaks.get(pid, 0), hwm)
                comm = _comm(pid)  # the latest name: spark-submit is a shell script that execs java
                if comm:
                    self.names[pid] = comm
            todo.extend(_children(pid))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        out = {"driver": self.peaks.get(self.pid, 0), "java": 0, "other": 0}
        for pid, kib in self.peaks.items():
            if pid == self.pid:
                continue
            role = "java" if self.names.get(pid) == "java" else "other"
            out[role] = max(out[role], kib)
        return out


def run_process(cmd: list[str], *, sample: bool = False, env: dict | None = None, cwd=None,
                timeout_s: float = 7200) -> ProcResult:
    """Run ``cmd`` to completion; wall time from just before the fork to just after wait4 returns."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd)
        sampler = TreeSampler(proc.pid) if sample else None
        watchdog = threading.Timer(timeout_s, proc.kill)
        watchdog.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            watchdog.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; tell Popen so it does not wait
        peaks = sampler.stop() if sampler else {}
        out.seek(0)
        err.seek(0)
        return ProcResult(cmd=list(cmd), seconds=seconds, returncode=proc.returncode, maxrss_kib=usage.ru_maxrss,
                          stdout=out.read().decode("utf-8", "replace"), stderr=err.read().decode("utf-8", "replace"),
                          peaks_kib=peaks)


def hwm_kib(pid: int) -> int:
    """The peak RSS so far of a running process (0 if it cannot be read)."""
    return _status_kib(pid, "VmHWM") or 0
