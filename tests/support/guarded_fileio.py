"""A local FileIO that, once ``armed``, refuses every call not made from the modules it allows: what a test
uses to show that planning asks the store nothing after its kind's read step."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lakesweep.engine.fileio import ArrowFileIO

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("read_bytes", "open_input", "exists", "info", "list", "delete", "delete_empty_dir", "write_atomic",
           "create_if_absent", "check_create_if_absent")


def caller() -> str:
    """The product module (path relative to the repository) that called into the FileIO."""
    frame = sys._getframe(1)
    while frame is not None:
        where = Path(frame.f_code.co_filename).resolve()
        if where.is_relative_to(ROOT) and not where.is_relative_to(ROOT / "tests") \
                and where != ROOT / "engine" / "fileio.py":
            return where.relative_to(ROOT).as_posix()
        frame = frame.f_back
    return "?"


class GuardedFileIO(ArrowFileIO):
    """Once ``armed``, a call made from outside ``allowed`` (module paths) raises AssertionError and is kept
    in ``refused``."""

    def __init__(self, allowed: frozenset[str] = frozenset()):
        super().__init__("file")
        self.allowed = allowed
        self.armed = False
        self.refused: list[str] = []

    def _check(self, method: str, path: str) -> None:
        who = caller()
        if self.armed and who not in self.allowed:
            self.refused.append(f"{who}: {method}({os.path.basename(str(path))})")
            raise AssertionError(f"{who} called {method}({path}) after the read step")


def _guarded(method: str):
    def call(self, path, *args, **kwargs):
        self._check(method, path)
        return getattr(ArrowFileIO, method)(self, path, *args, **kwargs)
    return call


for _name in METHODS:
    setattr(GuardedFileIO, _name, _guarded(_name))
