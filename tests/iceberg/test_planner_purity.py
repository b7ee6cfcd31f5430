"""Iceberg's planners ask lakesweep's FileIO nothing once their kind's read step is done: the listing and the
metadata files outside the log are read by the read step; metadata is read through pyiceberg's own IO."""

from __future__ import annotations

import os
import time

import pytest

from lakesweep.engine.iceberg.table import canonical
from lakesweep.planner.kinds import kinds_of
from tests.iceberg.conftest import write_history
from tests.support.guarded_fileio import GuardedFileIO

FLAGS = {"expire": {"older_than": "0 s"}, "orphans": {}, "rewrite-manifests": {}, "compact": {},
         "purge": {"journal": "j.duckdb"}}


def test_every_iceberg_kind_is_planned_here():
    assert set(FLAGS) == set(kinds_of("iceberg"))


@pytest.mark.parametrize("kind", sorted(FLAGS))
def test_an_iceberg_planner_asks_the_store_nothing_after_its_read_step(kind, lake, monkeypatch):
    t = write_history(lake)
    stray = os.path.join(canonical(t.metadata.location), "data", "left-behind.parquet")
    with open(stray, "wb") as f:
        f.write(b"x")
    os.utime(stray, (time.time() - 10 * 86400,) * 2)
    io = GuardedFileIO()
    monkeypatch.setattr("lakesweep.engine.iceberg.table.fileio_for", lambda *a, **kw: io)
    view = lake.view()
    entry = kinds_of("iceberg")[kind]
    options = entry.resolve_options(view.options, **FLAGS[kind])
    now = int(time.time() * 1000)
    read = entry.read(view, now_ms=now, options=options) if entry.read is not None else None
    io.armed = True
    plan = entry.plan(view, now_ms=now, options=options, read=read)
    assert io.refused == []
    if kind in ("expire", "orphans"):
        assert plan.actions, f"the {kind} plan has nothing to do: the table does not exercise it"
