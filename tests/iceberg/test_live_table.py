"""Maintenance while the table is being written: a writer process appends one row every 0.5 to 0.8 s through
pyiceberg's SQL catalog while ``lakesweep plan`` and ``lakesweep apply`` run as whole processes on local
Spark. Each operation must exit 0, keep every row the writer committed readable, pass ``verify``, and leave
a snapshot log in which every snapshot reads the rows it read before (or, for one committed since, its
parent's rows plus the writer's row, or exactly its parent's rows for a rewrite or compaction)."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from lakesweep.journal.audit import list_maintenance
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.conftest import REPO
from tests.iceberg.conftest import CATALOG, SCHEMA
from tests.support.streaming_writer import WriterProcess
from tests.support.processes import LAKESWEEP

pytest.importorskip("pyiceberg")

pytestmark = pytest.mark.spark

INITIAL = 30  # single-row appends before the writer starts
WRITER_START = 100_000  # the writer's first id


def cli(*args, timeout=600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", "lakesweep.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def start_writer(lake, tmp_path) -> WriterProcess:
    """A writer appending ``(id, 'us')`` rows to ``ns.t`` every 0.5 to 0.8 s through the test's catalog."""
    uri = os.environ[f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI"]
    warehouse = os.environ[f"PYICEBERG_CATALOG__{CATALOG.upper()}__WAREHOUSE"]
    return WriterProcess(["iceberg", CATALOG, uri, warehouse, "ns.t"], tmp_path, start=WRITER_START,
                         pause_s=(0.5, 0.8), repo=REPO)


@contextlib.contextmanager
def writing(lake, tmp_path):
    w = start_writer(lake, tmp_path)
    try:
        w.wait_for(1)
        yield w
    finally:
        if w.proc.poll() is None:
            w.stop()


def streaming_table(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(INITIAL):
        t.append(pa.table({"id": pa.array([i], pa.int64()), "region": ["us"]}))
    return lake.table()


def rows_of(table, snapshot_id) -> collections.Counter:
    data = table.scan(snapshot_id=snapshot_id).to_arrow()
    return collections.Counter(zip(*(data.column(c).to_pylist() for c in data.column_names)))


def check_history(table, before: dict, written: list[int]) -> None:
    """Every snapshot reads what it read before; one committed since reads its parent's rows plus one row the
    writer committed (an append) or exactly its parent's (a replace); the head reads every row ever written."""
    rows = {s.snapshot_id: rows_of(table, s.snapshot_id) for s in table.metadata.snapshots}
    for s in table.metadata.snapshots:
        if s.snapshot_id in before:
            assert rows[s.snapshot_id] == before[s.snapshot_id], f"snapshot {s.snapshot_id} reads other rows"
            continue
        parent = rows.get(s.parent_snapshot_id)
        if parent is None:
            continue
        if s.summary.operation.value == "append":
            added = rows[s.snapshot_id] - parent
            assert parent <= rows[s.snapshot_id] and len(added) == 1
            [(row_id, _)] = added
            assert row_id in written
        else:
            assert s.summary.operation.value == "replace" and rows[s.snapshot_id] == parent
    head = rows[table.current_snapshot().snapshot_id]
    assert head == collections.Counter({(i, "us"): 1 for i in [*range(INITIAL), *written]})


def plan_and_apply(lake, tmp_path, w: WriterProcess, kind: str, *flags) -> dict:
    """``lakesweep plan KIND`` and ``lakesweep apply`` with the writer committing before, between and during
    them; the apply's JSON report. Asserts that commits landed between plan and apply and during apply."""
    plan_file = str(tmp_path / f"{kind}.parquet")
    r = cli("plan", kind, "ns.t", "--catalog", CATALOG, "--out", plan_file, *flags)
    assert r.returncode == 0, r.stderr
    w.wait_for(len(w.written()) + 1)  # at least one commit between plan and apply
    before = {s.snapshot_id: rows_of(lake.table(), s.snapshot_id) for s in lake.table().metadata.snapshots}
    n = len(w.written())
    r = cli("apply", plan_file, "--journal", str(tmp_path / "j.duckdb"), "--master", "local[1]", "-o", "json")
    during = len(w.written()) - n
    w.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    assert during >= 1, "no commit landed while apply ran: the test proves nothing"
    table = lake.table()
    check_history(table, before, w.written())
    v = cli("verify", "ns.t", "--catalog", CATALOG)
    assert v.returncode == 0, v.stdout + v.stderr
    return json.loads(r.stdout)


@pytest.mark.slow  # compaction, the commit most likely to lose the race, stays in the default tier
def test_expire_applies_on_a_table_being_written(lake, tmp_path):
    streaming_table(lake)
    with writing(lake, tmp_path) as w:
        report = plan_and_apply(lake, tmp_path, w, "expire", "--retain-last", "5", "--older-than", "1 s")
    assert report["state"] == "COMPLETED" and report["counts"]["COMMITTED"] >= INITIAL - 5
    assert report["counts"]["DELETED"] > 0 and report["counts"]["FAILED"] == 0


@pytest.mark.slow
def test_rewrite_manifests_applies_on_a_table_being_written(lake, tmp_path):
    streaming_table(lake)
    with writing(lake, tmp_path) as w:
        report = plan_and_apply(lake, tmp_path, w, "rewrite-manifests", "--min-manifests", "2")
    assert report["state"] == "COMPLETED" and report["counts"]["COMMITTED"] >= INITIAL
    assert lake.table().snapshot_by_id(report["commits"][0]["version"]).summary.operation.value == "replace"


def test_compact_applies_on_a_table_being_written(lake, tmp_path):
    streaming_table(lake)
    with writing(lake, tmp_path) as w:
        report = plan_and_apply(lake, tmp_path, w, "compact", "--min-input-files", "2")
    assert report["state"] == "COMPLETED" and report["counts"]["COMMITTED"] >= INITIAL
    assert report["counts"]["DROPPED"] == 0  # appends touch no bin


@pytest.mark.slow
def test_orphans_applies_on_a_table_being_written(lake, tmp_path):
    t = streaming_table(lake)
    root = t.metadata.location.removeprefix("file://")
    strays = [os.path.join(root, "data", f"00000-dead-{i}.parquet") for i in range(3)]
    for path in strays:
        with open(path, "wb") as f:
            f.write(b"left behind by a failed job")
        os.utime(path, (time.time() - 10 * 86400,) * 2)
    with writing(lake, tmp_path) as w:
        report = plan_and_apply(lake, tmp_path, w, "orphans")
    assert report["state"] == "COMPLETED" and report["counts"]["DELETED"] == 3
    assert not any(os.path.exists(p) for p in strays)


@pytest.mark.slow
def test_maintain_every_makes_progress_on_a_table_being_written_in_every_cycle(lake, tmp_path):
    streaming_table(lake)
    journal = str(tmp_path / "j.duckdb")
    with writing(lake, tmp_path) as w:
        proc = subprocess.Popen(
            [*LAKESWEEP, "maintain", "--catalog", CATALOG, "--journal", journal, "--every", "1 s",
             "--snapshot-retention-hours", "0", "--max-snapshots-to-keep", "5", "--min-manifests-to-rewrite", "2",
             "--min-input-files", "2", "--master", "local[1]"],
            env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 400
        lines = []
        while time.time() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if line.startswith("cycle 3:") or (not line and proc.poll() is not None):
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, "".join(lines) + err
    with DuckDBRecorder(journal) as rec:
        rows = list_maintenance(rec)
    for cycle in (1, 2):
        results = {r["operation"]: (r["outcome"], r["message"]) for r in rows if r["cycle"] == cycle}
        assert not [o for o, _ in results.values() if o == "failed"], results
        assert {op for op, (o, _) in results.items() if o == "applied"} >= {"compact", "expire"}, results
    table = lake.table()
    head = rows_of(table, table.current_snapshot().snapshot_id)
    assert head == collections.Counter({(i, "us"): 1 for i in [*range(INITIAL), *w.written()]})
    v = cli("verify", "ns.t", "--catalog", CATALOG)
    assert v.returncode == 0, v.stdout + v.stderr
