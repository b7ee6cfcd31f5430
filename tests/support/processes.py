"""Helpers for the servers tests start (Spark master and worker, SeaweedFS)."""

from __future__ import annotations

import subprocess


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
