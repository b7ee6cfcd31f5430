"""The ``lakesweep`` console script (``python -m lakesweep.cli`` too): the app of ``cli.app`` with every command
module registered on it, run with lakesweep's exit codes (see ``cli.app``)."""

from __future__ import annotations

import gc
import os
import sys

from lakesweep.cli.app import app
# Each command module registers its commands on the app when imported; the order is the order of --help.
from lakesweep.cli import plan_cmds  # noqa: F401  (inspect, show, plan ...)
from lakesweep.cli import verify_cmds  # noqa: F401  (verify)
from lakesweep.cli import demo  # noqa: F401  (demo)
from lakesweep.cli import apply_cmds  # noqa: F401  (apply, resume)
from lakesweep.cli import restore_cmds  # noqa: F401  (restore)
from lakesweep.cli import doctor  # noqa: F401  (doctor)
from lakesweep.cli import journal_cmds  # noqa: F401  (journal ...)
from lakesweep.cli import maintain_cmds  # noqa: F401  (maintain, journal maintenance)
from lakesweep.cli import report_cmds  # noqa: F401  (journal report)

__all__ = ["app", "main"]

# A command builds millions of small objects that live until it ends and form no cycles (manifest entries,
# actions, journal rows). With CPython's default thresholds the collector walks them all again and again: a
# quarter of planning a 300,000-file table. Cycles are still collected, after 100,000 allocations instead of 700.
GC_THRESHOLDS = (100_000, 50, 100)


def main():  # console script entry point
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        app()
        code = 0
    except SystemExit as e:
        if isinstance(e.code, str):
            sys.stderr.write(e.code + "\n")
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:  # a closed pipe (lakesweep ... | head): nothing left to tell
            pass
    # Every file, journal and Spark session is closed by now. pyarrow 19 can still abort the interpreter while
    # its thread pools are torn down at exit ("terminate called without an active exception", exit -6), which
    # would turn a finished command's exit code into a crash: leave without running C++ static destructors.
    os._exit(code)
