"""A FileIO that injects faults, for apply tests. It pickles to Spark executors; its fault state lives in a
directory on disk so that every executor process sees the same counts."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import time

from lakesweep.engine.errors import StorageError
from lakesweep.engine.fileio import ArrowFileIO, DeleteOutcome


class FaultyFileIO(ArrowFileIO):
    """Local files, except that deletes of paths matching ``pattern``:

    * ``mode="transient"``: fail the first ``failures`` attempts per path, then succeed;
    * ``mode="denied"``: always fail with "permission denied" (until ``heal()``);
    * ``mode="slow"``: succeed after ``delay_s``.
    """

    def __init__(self, state_dir: str, pattern: str, mode: str, failures: int = 2, delay_s: float = 0.0):
        super().__init__("file")
        self.properties = {"state_dir": state_dir, "pattern": pattern, "mode": mode,
                           "failures": str(failures), "delay_s": str(delay_s)}

    def _counter(self, path: str) -> str:
        return os.path.join(self.properties["state_dir"], hashlib.sha1(path.encode()).hexdigest())

    def heal(self) -> None:
        open(os.path.join(self.properties["state_dir"], "HEALED"), "w").close()

    def attempts(self, path: str) -> int:
        try:
            with open(self._counter(path)) as f:
                return len(f.read())
        except FileNotFoundError:
            return 0

    def delete(self, path: str) -> DeleteOutcome:
        p = self.properties
        if fnmatch.fnmatch(path, p["pattern"]) and not os.path.exists(os.path.join(p["state_dir"], "HEALED")):
            with open(self._counter(path), "a") as f:
                f.write("x")
            if p["mode"] == "denied":
                raise StorageError(path, "cannot delete: [Errno 13] Permission denied")
            if p["mode"] == "transient" and self.attempts(path) <= int(p["failures"]):
                raise StorageError(path, "cannot delete: 503 Slow Down (transient)")
            if p["mode"] == "slow":
                time.sleep(float(p["delay_s"]))
        return super().delete(path)
