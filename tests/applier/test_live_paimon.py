"""Paimon maintenance while the table is being written: a pypaimon writer process commits a row every 0.2 to
0.5 s (a partition drop's apply commits in about a second) while ``lakesweep plan`` and ``lakesweep apply`` run as whole processes on local Spark, for snapshot
expiry (which writes the decoupled changelog), changelog expiry, tag expiry, consumer expiry, partition
expiry and orphan removal, one after the other on the same table. Each apply exits 0 with commits landing
between plan and apply and during it, every row the writer committed stays readable, and ``verify`` finds
the table whole after each one."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time

import pytest

from tests.applier.conftest import REPO
from tests.support import pypaimon_tables as pt
from tests.support.streaming_writer import WriterProcess

pytest.importorskip("pypaimon")

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WRITER_START = 100_000
TODAY = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")  # a partition no expiry drops


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakesweep.cli", *args], env=dict(os.environ, PYTHONPATH=REPO),
                          capture_output=True, text=True, timeout=600)


def read_ids(warehouse) -> set[int]:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table("db.append_t")
    rb = table.new_read_builder()
    return set(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("id").to_pylist())


def test_every_paimon_operation_applies_on_a_table_being_written(tmp_path):
    warehouse = tmp_path / "wh"
    t = pt.write_append_table(warehouse, commits=12, options={"changelog.num-retained.max": "100"})
    initial = {r["id"] for r in t.expected_rows}
    os.utime(os.path.join(t.path, "consumer", "consumer-c1"), (time.time() - 86400,) * 2)
    stray = os.path.join(t.path, f"dt={TODAY}", "bucket-0", "data-left-behind.parquet")
    journal = str(tmp_path / "j.duckdb")
    w = WriterProcess(["paimon", str(warehouse), "db.append_t", TODAY], tmp_path, start=WRITER_START,
                      pause_s=(0.2, 0.5), repo=REPO)
    try:
        w.wait_for(1)
        os.makedirs(os.path.dirname(stray), exist_ok=True)
        with open(stray, "wb") as f:
            f.write(b"a failed writer's file")
        os.utime(stray, (time.time() - 10 * 86400,) * 2)
        done = {}
        for kind, flags in (("expire", ["--retain-max", "3", "--retain-min", "1", "--time-retained", "0 s"]),
                            ("changelog", ["--retain-max", "2", "--retain-min", "1", "--time-retained", "0 s"]),
                            ("tags", ["--tag", "t_early"]),
                            ("consumers", ["--expiration-time", "1 h"]),
                            ("partitions", ["--expiration-time", "30 d"]),
                            ("orphans", ["--older-than", "1 d"])):
            plan_file = str(tmp_path / f"{kind}.parquet")
            r = cli("plan", kind, t.path, "--out", plan_file, *flags)
            assert r.returncode == 0, r.stdout + r.stderr
            w.wait_for(len(w.written()) + 1)  # a commit between plan and apply
            n = len(w.written())
            r = cli("apply", plan_file, "--journal", journal, "--master", "local[1]", "-o", "json")
            assert r.returncode == 0, f"{kind}: " + r.stdout + r.stderr
            assert len(w.written()) > n, f"{kind}: no commit landed while apply ran: the test proves nothing"
            report = json.loads(r.stdout)
            done[kind] = {k: v for k, v in report["counts"].items() if v}
            v = cli("verify", t.path)
            assert v.returncode == 0, f"{kind}: " + v.stdout + v.stderr
            expected = set(w.written()) | (set() if kind in ("partitions", "orphans") else initial)
            assert read_ids(warehouse) >= expected, kind
    finally:
        if w.proc.poll() is None:
            w.stop()
    assert read_ids(warehouse) == set(w.written())  # every 2024 partition dropped, every writer row kept
    # each operation did what it was planned for on the live table
    assert done["expire"].get("DELETED", 0) > 0 and done["expire"].get("WRITTEN", 0) > 0  # changelog written
    assert done["changelog"].get("DELETED", 0) > 0
    assert done["tags"].get("DELETED", 0) > 0 and done["consumers"].get("DELETED", 0) == 1
    assert done["partitions"].get("COMMITTED", 0) > 0
    assert done["orphans"].get("DELETED", 0) == 1 and not os.path.exists(stray)
