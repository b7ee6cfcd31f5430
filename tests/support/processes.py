"""Helpers for the processes tests start: the CLI as a user runs it, and servers (Spark master and worker,
SeaweedFS)."""

from __future__ import annotations

import subprocess
import sys

# lakesweep as a new process: the console script's module, run by this interpreter
LAKESWEEP = (sys.executable, "-m", "lakesweep.cli")


def stop(*procs: subprocess.Popen, timeout: float = 20) -> None:
    """Terminate every process, then wait for each; kill one that has not exited within ``timeout``."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
