"""Commits on HDFS: a partition drop publishes its snapshot with create-if-absent on the NameNode, and a
snapshot id another writer took first is lost cleanly (nothing overwritten, the attempt's files removed,
the drop retried on the new latest snapshot), and current Paimon's Java core reads the result on HDFS."""

from __future__ import annotations

import json
import uuid

import pytest

from lakesweep.engine.fileio import fileio_for, join
from lakesweep.engine.paimon.writer import MetadataWriter
from tests.support import pypaimon_tables as pt
from tests.support.commit_race import (apply_losing_snapshot_9, assert_the_retry_left_only_its_own_manifests,
                                       plan_drop)
from tests.support.hdfs import list_tree, upload_tree
from tests.support.paimon_current import CurrentPaimon

pytestmark = [pytest.mark.java, pytest.mark.slow]


@pytest.fixture
def hdfs_table(hdfs, tmp_path):
    """The demo table (eight snapshots, partitions dt=2024-01-01..03), copied onto HDFS."""
    w = pt.write_demo_table(str(tmp_path / "wh"))
    root = f"/commit-{uuid.uuid4().hex[:8]}/demo_t"
    upload_tree(hdfs, w.path, root)
    return f"{hdfs}{root}", root, w


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
    assert [p["partition"] for p in plan.scope.partitions] == ["dt=2024-01-01"]

    def manifests():
        return {n.split("/", 1)[1] for n in list_tree(hdfs, root) if n.startswith("manifest/")}

    before = manifests()
    report, theirs = apply_losing_snapshot_9(location, plan, tmp_path / "j.duckdb", monkeypatch)
    assert report.state == "COMPLETED" and report.commits[0]["version"] == 10
    assert io.read_bytes(join(location, "snapshot", "snapshot-9")) == theirs  # the winner's file, untouched
    assert_the_retry_left_only_its_own_manifests(location, manifests, before)
    # current Paimon's Java core reads the committed table on HDFS: the dropped partition is gone
    assert CurrentPaimon().rows(location) == sorted((r["id"], r["dt"]) for r in written.expected_rows
                                                    if r["dt"] != "2024-01-01")
