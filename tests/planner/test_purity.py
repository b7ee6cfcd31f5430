"""Planners are pure: what they need from the store beyond the table's metadata is read by their kind's ``read``
step, and they never touch a FileIO. Checked twice: in the source (``ast``: no module under planner/ reads
``.fileio``, calls a FileIO method, or makes a FileIO) and by planning every Paimon kind with a FileIO that,
once the read step is done, refuses every call made from planner code or by an engine helper other than the
table view and the plan's pins."""

from __future__ import annotations

import ast
import inspect
import os
import time
from pathlib import Path

import pytest

from lakesweep.engine import fileio as fileio_module
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.purge import Quarantined
from lakesweep.planner.kinds import kinds_of
from tests.planner.conftest import expire
from tests.support.guarded_fileio import GuardedFileIO
from tests.support.table_builder import ADD, DELETE, E, TableBuilder

ROOT = Path(__file__).resolve().parents[2]

# Every method a FileIO offers: calling one of these names is touching the store.
FILEIO_METHODS = frozenset(name for name, _ in inspect.getmembers(FileIO, inspect.isfunction)
                           if not name.startswith("_"))
# What makes a FileIO: a planner is handed its table, never builds its own way to the store.
FILEIO_MAKERS = frozenset(name for name, value in vars(fileio_module).items()
                          if (inspect.isclass(value) and issubclass(value, FileIO)) or name == "fileio_for")


def store_touches(path: Path) -> list[str]:
    """Where the module at ``path`` touches a FileIO: reads ``.fileio``, calls a FileIO method on anything,
    or imports what makes one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "fileio":
            found.append(f"{node.lineno}: reads .fileio")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FILEIO_METHODS:
            found.append(f"{node.lineno}: calls .{node.func.attr}()")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("engine.fileio"):
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name in FILEIO_MAKERS]
    return found


def test_no_planner_module_touches_a_fileio():
    touches = {p.relative_to(ROOT).as_posix(): store_touches(p) for p in sorted((ROOT / "planner").rglob("*.py"))}
    assert {p: t for p, t in touches.items() if t} == {}


def test_the_source_check_sees_each_way_to_the_store(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from lakesweep.engine.fileio import join, fileio_for, ArrowFileIO\n"
                      "def plan(table):\n"
                      "    io = table.fileio\n"
                      "    return view.exists(p), io.list(d, recursive=True), x.read_bytes(p), join(a, b)\n")
    assert store_touches(module) == ["1: imports fileio_for", "1: imports ArrowFileIO", "3: reads .fileio",
                                     "4: calls .exists()", "4: calls .list()", "4: calls .read_bytes()"]
    assert {"list", "info", "exists", "read_bytes", "open_input", "delete", "write_atomic"} <= FILEIO_METHODS


# ---- behaviour: plan every kind with a store that refuses planner-made calls after the read step --------

# Who may still ask the store once the read step is done: the table view reading metadata (snapshots, lists,
# manifests, tags, hints) and the plan's own pins of what it relied on (engine/paimon/state.py).
VIEW = frozenset({"engine/paimon/table.py", "engine/paimon/state.py"})


OLD_NS = 10**15  # 2001: older than any threshold below


def _age(path: str) -> None:
    os.utime(path, ns=(OLD_NS, OLD_NS))


def paimon_table(root: str) -> None:
    """Every kind has work: snapshots to expire, tags to expire (judged by their files' times), idle
    consumers, decoupled changelogs, an orphan file, and a partition older than the retention."""
    b = TableBuilder(root, partition_keys=("dt",), partition_types=("STRING",),
                     options={"changelog.num-retained.max": "100", "partition.expiration-time": "1 d",
                              "partition.timestamp-formatter": "yyyyMMdd"})
    for s in range(8):
        b.commit([E(ADD, f"f{s}", ("20200101" if s < 4 else "20300101",))]
                 + ([E(DELETE, f"f{s - 1}", ("20200101",))] if 0 < s < 4 and s % 2 else []))
        if s in (1, 2):
            b.tag(f"t{s}", s + 1)
    expire(root, retain_min=5, retain_max=5)
    b.consumer("reader", 6)
    for name in ("tag/tag-t1", "tag/tag-t2", "consumer/consumer-reader"):
        _age(os.path.join(root, name))
    stray = os.path.join(root, "dt=20200101", "bucket-0", "stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"x")
    _age(stray)


FLAGS = {"expire": {"time_retained": 0, "retain_min": 2, "retain_max": 2}, "changelog": {"retain_min": 1, "retain_max": 1, "time_retained": "0 s"},
         "consumers": {"expiration_time": "1 d"}, "tags": {"older_than": "1 d", "system_zone": "UTC"},
         "orphans": {"older_than": "1 d"}, "partitions": {}, "purge": {"journal": "j.duckdb"}}


@pytest.fixture(scope="module")
def paimon_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("purity") / "t")
    paimon_table(root)
    return root


def test_every_paimon_kind_is_planned_here():
    assert set(FLAGS) == set(kinds_of("paimon"))


@pytest.mark.parametrize("kind", sorted(FLAGS))
def test_a_paimon_planner_asks_the_store_nothing_after_its_read_step(kind, paimon_root):
    now = int(time.time() * 1000)  # consumer, tag and orphan plans refuse a now ahead of the clock
    entry = kinds_of("paimon")[kind]
    io = GuardedFileIO(VIEW)
    table = PaimonTable(paimon_root, io)
    flags = FLAGS[kind] if kind != "purge" else {**FLAGS[kind], "records": [Quarantined(
        paimon_root, "p" * 32, "a1", 0, "x", f"{paimon_root}/_lakesweep_quarantine/{'p' * 32}/x", 1, 0, 0)]}
    options = entry.resolve_options(table.options, **flags)
    read = entry.read(table, now_ms=now, options=options) if entry.read is not None else None
    io.armed = True
    plan = entry.plan(table, now_ms=now, options=options, read=read)
    assert io.refused == []
    assert plan.actions, f"the {kind} plan has nothing to do: the table does not exercise it"
