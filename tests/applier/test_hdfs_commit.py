"""Commits on HDFS: a partition drop publishes its snapshot with create-if-absent on the NameNode, and a
snapshot id another writer took first is lost cleanly (nothing overwritten, the attempt's files removed,
the drop retried on the new latest snapshot), and current Paimon's Java core reads the result on HDFS."""

from __future__ import annotations

import json
import time
import uuid

import pytest

import engine.paimon.drop as drop_module
from applier.apply import DriverExecutor, apply_plan
from engine.fileio import fileio_for, join
from engine.paimon.table import open_table
from engine.paimon.verify import verify_table
from engine.paimon.writer import MetadataWriter
from engine.timeutil import system_zone
from journal.duckdb_store import DuckDBRecorder
from planner.paimon.options import resolve_partition_options
from planner.paimon.partitions import plan_partitions
from tests.support import pypaimon_tables as pt
from tests.support.hdfs import list_tree, upload_tree
from tests.support.paimon_current import CurrentPaimon

pytestmark = pytest.mark.java


@pytest.fixture
def hdfs_table(hdfs, tmp_path):
    """The demo table (eight snapshots, partitions dt=2024-01-01..03), copied onto HDFS."""
    w = pt.write_demo_table(str(tmp_path / "wh"))
    root = f"/commit-{uuid.uuid4().hex[:8]}/demo_t"
    upload_tree(hdfs, w.path, root)
    return f"{hdfs}{root}", root, w


def plan_drop(location):
    t = open_table(location)
    opts = resolve_partition_options(t.options, expiration_time="1 d", strategy="values-time", max_expires=1,
                                     system_zone=system_zone())
    return plan_partitions(t, now_ms=int(time.time() * 1000), options=opts)


def test_publishing_a_taken_snapshot_id_returns_false_and_leaves_the_snapshot_as_it_was(hdfs_table):
    location, _, _ = hdfs_table
    io = fileio_for(location)
    path = join(location, "snapshot", "snapshot-8")
    before = io.read_bytes(path)
    taken = dict(json.loads(before), commitUser="someone-else")
    writer = MetadataWriter(io, join(location, "manifest"), join(location, "snapshot"))
    assert writer.publish(taken) is False
    assert io.read_bytes(path) == before and io.read_bytes(join(location, "snapshot", "LATEST")) == b"8"


def test_a_drop_that_loses_the_snapshot_id_to_another_writer_retries_and_commits_the_next(hdfs_table, tmp_path,
                                                                                         monkeypatch, hdfs):
    location, root, written = hdfs_table
    io = fileio_for(location)
    plan = plan_drop(location)
    assert [p["partition"] for p in plan.scope["partitions"]] == ["dt=2024-01-01"]
    publish = drop_module.MetadataWriter.publish
    raced: list[bytes] = []

    def racing_publish(self, snapshot):
        if not raced:  # another writer creates snapshot-9 between the drop's scan and its publish
            other = dict(json.loads(io.read_bytes(join(location, "snapshot", "snapshot-8"))), id=9,
                         commitUser="other-writer")
            raced.append(json.dumps(other).encode())
            io.create_if_absent(join(location, "snapshot", "snapshot-9"), raced[0])
        return publish(self, snapshot)

    monkeypatch.setattr(drop_module.MetadataWriter, "publish", racing_publish)
    monkeypatch.setattr(drop_module.time, "sleep", lambda s: None)
    manifests_before = {n for n in list_tree(hdfs, root) if n.startswith("manifest/")}
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.commits[0]["version"] == 10
    assert io.read_bytes(join(location, "snapshot", "snapshot-9")) == raced[0]  # the winner's file, untouched
    table = open_table(location)
    assert table.snapshot(10).commit_kind == "OVERWRITE" and table.snapshot(10).commit_user != "other-writer"
    # the losing attempt's manifests and lists were removed: every new manifest file is one snapshot 10 uses
    s = table.snapshot(10)
    used = {s.base_manifest_list, s.delta_manifest_list} | {m.file_name for m in table.data_manifests(s)}
    new = {n.split("/", 1)[1] for n in list_tree(hdfs, root) if n.startswith("manifest/")} - {
        n.split("/", 1)[1] for n in manifests_before}
    assert new and new <= used | {s.index_manifest}
    assert verify_table(table).whole
    # current Paimon's Java core reads the committed table on HDFS: the dropped partition is gone
    assert CurrentPaimon().rows(location) == sorted((r["id"], r["dt"]) for r in written.expected_rows
                                                    if r["dt"] != "2024-01-01")
