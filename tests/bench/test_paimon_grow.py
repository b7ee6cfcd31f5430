"""A table grown by bench/paimon_grow.py is one Paimon's own expiry (0.9 and current) reads and expires
exactly as lakesweep plans it: the benchmark's 1m table is built this way.

Paimon 0.9's Java core writes a small append table; the grower continues its history with fastavro-written
snapshots, manifest lists and manifests whose entries point at hard links of Paimon's data files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import TIME_RULE_OWN, resolve_expire_options
from tests.support.paimon_current import CurrentPaimon
from tests.support.paimon_java import ensure_harness

pytestmark = [pytest.mark.java, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RETAIN = 10
OPTIONS = {"bucket": "-1", "file.format": "avro", "async-file-write": "false", "manifest.merge-min-count": "30",
           "snapshot.num-retained.min": "100000", "snapshot.num-retained.max": "200000"}
OPS = {"consumer": 0, "tag": 0, "untag": 0, "write": 70, "compact": 28, "overwrite": 2}


def _grow_module():
    spec = importlib.util.spec_from_file_location("paimon_grow", ROOT / "bench" / "paimon_grow.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _files(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names}


def _latest(table: Path) -> int:
    return int((table / "snapshot" / "LATEST").read_text())


def test_grown_table_is_expired_by_paimon_as_lakesweep_plans_it(tmp_path):
    table = tmp_path / "t"
    with ensure_harness() as h:
        h.generate(table, seed=7, kind="append", steps=30, options=OPTIONS, ops=OPS, partitions=8,
                   rows_per_write=40, bucket_dirs=False)
        written_by_paimon = _files(table)
        paimon_latest = _latest(table)
        grower = _grow_module().open_grower(table, seed=7, merge_min_count=30)
        grower.grow(4000, {"APPEND": 70, "COMPACT": 28, "OVERWRITE": 2})

        latest = _latest(table)
        assert latest == paimon_latest + grower.written["snapshots"] and grower.written["snapshots"] > 100
        assert len(_files(table)) >= 4000
        snapshot = json.loads((table / "snapshot" / f"snapshot-{latest}").read_text())
        assert snapshot["id"] == latest and snapshot["schemaId"] == 0

        t = open_table(str(table))
        options = resolve_expire_options(t.options, retain_min=RETAIN, retain_max=RETAIN, time_retained=0,
                                         max_deletes=1_000_000, time_rule=TIME_RULE_OWN)
        plan = plan_expire(t, now_ms=int(time.time() * 1000), options=options)
        planned = {os.path.relpath(a.path, table) if os.path.isabs(a.path) else a.path
                   for a in plan.actions if a.verb.value == "delete-file"}

        theirs, current = tmp_path / "paimon-0.9", tmp_path / "paimon-current"
        shutil.copytree(table, theirs)
        shutil.copytree(table, current)
        assert h.expire(theirs, retain_min=RETAIN, retain_max=RETAIN, time_retained_ms=0,
                        max_deletes=1_000_000)["expired"] == latest - RETAIN
    assert CurrentPaimon().expire(current, retain_min=RETAIN, retain_max=RETAIN, max_deletes=1_000_000,
                                  older_than_ms=int(time.time() * 1000))["expired"] == latest - RETAIN

    deleted = _files(table) - _files(theirs)
    assert planned == deleted
    assert _files(current) == _files(theirs)
    assert (current / "snapshot" / "EARLIEST").read_text() == (theirs / "snapshot" / "EARLIEST").read_text()
    grown_data = {p for p in deleted - written_by_paimon if os.path.basename(p).startswith("data-")}
    assert len(grown_data) > len(deleted) // 2  # most of what expiry deletes was written by the grower
