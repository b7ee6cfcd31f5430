"""A Paimon table on a real HDFS (Hadoop's MiniDFSCluster), maintained through the CLI as a whole process:
inspect, expire, orphan clean and a partition drop (a commit on HDFS), each planned and applied on Spark,
then verified, with the files on HDFS checked after each step and the table read back by current Paimon's
Java core on HDFS and by pypaimon from a copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from lakesweep.applier.local import apply_locally
from tests.applier.conftest import copy_table
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.hdfs import list_tree, upload_tree
from tests.support.paimon_current import CurrentPaimon
from tests.support.table_builder import all_files

pytestmark = [pytest.mark.java, pytest.mark.spark, pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def lakesweep(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakesweep.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), timeout=600)


def ok(*args) -> dict | str:
    r = lakesweep(*args)
    assert r.returncode == 0, f"{args}\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout) if "json" in args else r.stdout


def download_tree(url: str, hdfs_root: str, local_root: str) -> None:
    from hdfs_native import Client

    client = Client(url)
    for rel in list_tree(url, hdfs_root):
        path = os.path.join(local_root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with client.read(f"{hdfs_root}/{rel}") as f, open(path, "wb") as out:
            out.write(f.read())


def planned(plan_path, table: str) -> set[str]:
    """The files a plan deletes, relative to the table root."""
    from lakesweep.engine.plan import Verb
    from lakesweep.engine.plan_io import read_plan

    return {a.path[len(table) + 1:] if a.path.startswith(table + "/") else a.path
            for a in read_plan(str(plan_path)).actions if a.verb is Verb.DELETE_FILE}


def read_rows(warehouse: str, name: str) -> list[tuple]:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": warehouse}).get_table(f"{pt.DATABASE}.{name}")
    rb = table.new_read_builder()
    arrow = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted((r["id"], r["dt"]) for r in arrow.to_pylist())


def test_a_paimon_table_on_hdfs_is_expired_cleaned_dropped_and_verified_through_the_cli(hdfs, tmp_path):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    reference = copy_table(w.path, str(tmp_path / "ref"))
    apply_locally(make_plan(reference, retain_min=3))  # what expiring the local twin leaves

    base = f"/lake-{uuid.uuid4().hex[:8]}"
    root = f"{base}/{pt.DATABASE}.db/demo_t"
    upload_tree(hdfs, w.path, root)
    table = f"{hdfs}{root}"
    journal = tmp_path / "journal.duckdb"

    seen = ok("inspect", table, "-o", "json")
    assert seen["location"] == table and [s["id"] for s in seen["snapshots"]] == list(range(1, 9))

    # expire: exactly the local twin's deletions, snapshots 1..5 and one data file
    doc = ok("plan", "expire", table, "--out", tmp_path / "expire.plan", "--retain-min", "3",
             "--time-retained", "0 s", "-o", "json")
    assert doc["range"] == {"begin": 1, "end": 6}
    applied = ok("apply", tmp_path / "expire.plan", "--journal", journal, "--master", "local[1]", "-o", "json")
    assert applied["state"] == "COMPLETED" and applied["counts"]["DELETED"] == 14
    after = list_tree(hdfs, root)
    assert after == all_files(reference)
    assert all_files(w.path) - after == planned(tmp_path / "expire.plan", table)

    # orphans: two old files nothing references, and nothing else
    from hdfs_native import Client, WriteOptions

    client = Client(hdfs)
    orphans = [f"{root}/dt=2024-01-02/bucket-0/data-orphan-1.parquet", f"{root}/manifest/manifest-orphan-1"]
    three_days_ago = int((time.time() - 3 * 86400) * 1000)
    for p in orphans:
        with client.create(p, WriteOptions()) as f:
            f.write(b"junk")
        client.set_times(p, three_days_ago, three_days_ago)
    before = list_tree(hdfs, root)
    doc = ok("plan", "orphans", table, "--out", tmp_path / "orphans.plan", "-o", "json")
    applied = ok("apply", tmp_path / "orphans.plan", "--journal", journal, "--master", "local[1]", "-o", "json")
    assert applied["state"] == "COMPLETED" and applied["counts"]["DELETED"] == 2
    assert planned(tmp_path / "orphans.plan", table) == {p[len(root) + 1:] for p in orphans}
    assert list_tree(hdfs, root) == before - {p[len(root) + 1:] for p in orphans}

    # partitions: one OVERWRITE snapshot committed on HDFS, no file deleted
    before = list_tree(hdfs, root)
    doc = ok("plan", "partitions", table, "--out", tmp_path / "drop.plan", "--expiration-time", "1 d",
             "--max-expires", "1", "--time-zone", "UTC", "-o", "json")
    shown = ok("show", tmp_path / "drop.plan", "-o", "json")
    dropped = [p["partition"] for p in shown["partitions"]]
    assert dropped == ["dt=2024-01-01"]
    out = ok("apply", tmp_path / "drop.plan", "--journal", journal, "--master", "local[1]")
    assert "committed: snapshot 9 (phase drop_partitions)" in out
    after = list_tree(hdfs, root)
    assert before <= after and "snapshot/snapshot-9" in after - before
    assert client.read(f"{root}/snapshot/LATEST").read() == b"9"

    report = ok("verify", table, "-o", "json")
    assert (report["table"], report["whole"], report["problems"], report["unreferenced"]) == (table, True, [], []), \
        report

    # the table reads: Paimon's Java core reads it on HDFS (through Hadoop's FileIO), and pypaimon reads a copy
    expected = sorted((r["id"], r["dt"]) for r in w.expected_rows if r["dt"] != "2024-01-01")
    assert CurrentPaimon().rows(table) == expected
    download_tree(hdfs, base, str(tmp_path / "back"))
    assert read_rows(str(tmp_path / "back"), "demo_t") == expected
