"""Commits on S3 (SeaweedFS on loopback): ``snapshot-N`` is created with PutObject and ``If-None-Match: *``,
after a probe outside the table found that the store honours the header. A snapshot id another writer took
first is lost cleanly; a store that ignores the header is refused, naming the alternatives."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import AtomicCreateUnsupported, PlanRejected
from lakesweep.engine.fileio import fileio_for, join
from lakesweep.engine.paimon.partition import decode_binary_row
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.writer import MetadataWriter
from lakesweep.engine.s3_conditional import forget_probes
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.support import pypaimon_tables as pt
from tests.support.commit_race import (apply_losing_snapshot_9, assert_the_retry_left_only_its_own_manifests,
                                       plan_drop)
from tests.support.s3_proxy import header_dropping_proxy
from tests.support.seaweed import list_tree, upload_tree


@pytest.fixture
def s3_table(s3_env, tmp_path):
    """The demo table (eight snapshots, partitions dt=2024-01-01..03) at s3://lake/wh-*/default.db/demo_t."""
    w = pt.write_demo_table(str(tmp_path / "wh"))
    warehouse = f"{s3_env['bucket']}/wh-{uuid.uuid4().hex[:8]}"
    prefix = f"{warehouse}/default.db/demo_t"
    upload_tree(s3_env["fs"], w.path, prefix)
    return f"s3://{prefix}", prefix, warehouse, w


def test_the_probe_writes_under_the_warehouse_root_and_leaves_nothing_behind(s3_table, s3_env):
    location, prefix, warehouse, _ = s3_table
    files = list_tree(s3_env["fs"], warehouse)
    forget_probes()
    how = fileio_for(location).check_create_if_absent(location)
    assert how.startswith(f"PutObject with If-None-Match: * on s3://lake at {s3_env['AWS_ENDPOINT_URL']}: a second "
                          f"PutObject of s3://{warehouse}/.lakesweep-conditional-put-probe-")
    assert how.endswith(" with If-None-Match: * was answered 412 PreconditionFailed")
    assert list_tree(s3_env["fs"], warehouse) == files  # the probe key is gone, nothing was written in the table


def test_publishing_a_taken_snapshot_id_returns_false_and_leaves_the_snapshot_as_it_was(s3_table):
    location, _, _, _ = s3_table
    io = fileio_for(location)
    path = join(location, "snapshot", "snapshot-8")
    before = io.read_bytes(path)
    writer = MetadataWriter(io, join(location, "manifest"), join(location, "snapshot"))
    assert writer.publish(dict(json.loads(before), commitUser="someone-else")) is False
    assert io.read_bytes(path) == before and io.read_bytes(join(location, "snapshot", "LATEST")) == b"8"


def test_a_create_retried_after_its_answer_was_lost_is_known_as_its_own_by_the_bytes(s3_table):
    location, _, _, _ = s3_table
    io = fileio_for(location)
    path = join(location, "snapshot", "snapshot-9")
    io.create_if_absent(path, b"ours")
    io.create_if_absent(path, b"ours")  # what a retry of the first PUT meets: 412 on the writer's own object
    with pytest.raises(FileExistsError):
        io.create_if_absent(path, b"theirs")
    assert io.read_bytes(path) == b"ours"


def test_of_eight_writers_racing_for_one_snapshot_id_exactly_one_wins(s3_table):
    location, _, _, _ = s3_table
    io = fileio_for(location)
    base = json.loads(io.read_bytes(join(location, "snapshot", "snapshot-8")))
    writer = MetadataWriter(io, join(location, "manifest"), join(location, "snapshot"))
    won: dict[str, bool] = {}
    start = threading.Barrier(8)

    def race(user):
        start.wait()
        won[user] = writer.publish(dict(base, id=9, commitUser=user))

    threads = [threading.Thread(target=race, args=(f"writer-{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [u for u, ok in won.items() if ok]
    assert len(won) == 8 and len(winners) == 1
    assert json.loads(io.read_bytes(join(location, "snapshot", "snapshot-9")))["commitUser"] == winners[0]


def test_a_drop_commits_on_s3_and_retries_after_losing_the_snapshot_id_to_another_writer(s3_table, s3_env,
                                                                                          tmp_path, monkeypatch):
    location, prefix, _, _ = s3_table
    io = fileio_for(location)
    plan = plan_drop(location)
    assert [p["partition"] for p in plan.scope.partitions] == ["dt=2024-01-01"]

    def manifests():
        return {n.split("/", 1)[1] for n in list_tree(s3_env["fs"], prefix) if n.startswith("manifest/")}

    before = manifests()
    report, theirs = apply_losing_snapshot_9(location, plan, tmp_path / "j.duckdb", monkeypatch)
    assert report.state == "COMPLETED" and report.commits[0]["version"] == 10
    assert io.read_bytes(join(location, "snapshot", "snapshot-9")) == theirs  # the winner's file, untouched
    assert io.read_bytes(join(location, "snapshot", "LATEST")) == b"10"
    table = open_table(location)
    assert table.snapshot(10).commit_user == f"lakesweep-{plan.plan_id}"
    types = table.schema.partition_types
    assert {tuple(decode_binary_row(e.partition, types)) for e in table.live_entries(table.snapshot(10))} == {
        ("2024-01-02",), ("2024-01-03",)}
    assert_the_retry_left_only_its_own_manifests(location, manifests, before)


def test_a_store_that_ignores_if_none_match_is_refused_naming_the_alternatives(s3_table, s3_env, tmp_path,
                                                                               monkeypatch):
    location, prefix, warehouse, _ = s3_table
    forget_probes()  # a proxy on a port an earlier one had must be probed again
    with header_dropping_proxy(s3_env["AWS_ENDPOINT_URL"],
                               (s3_env["AWS_ACCESS_KEY_ID"], s3_env["AWS_SECRET_ACCESS_KEY"])) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        plan = plan_drop(location)
        before = list_tree(s3_env["fs"], warehouse)
        with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
            with pytest.raises(PlanRejected) as refused:
                apply_plan(plan, recorder, executor=DriverExecutor())
        with pytest.raises(AtomicCreateUnsupported):  # and nothing creates a file there by other paths either
            fileio_for(location).create_if_absent(join(location, "snapshot", "snapshot-9"), b"{}")
    probe = f"s3://{warehouse}/.lakesweep-conditional-put-probe-"
    message = str(refused.value)
    assert message.startswith(f"the plan {plan.plan_id} is refused, nothing was done: {location}: s3://lake at "
                              f"{endpoint} cannot create a file only if it is absent, which a commit needs "
                              f"(a second PutObject of {probe}")
    assert message.endswith(
        " with If-None-Match: * succeeded and replaced the object: the header is ignored); lakesweep refuses to "
        "commit there and never checks first and writes after: commit on a store that honours conditional writes "
        "(PutObject with If-None-Match: *, as AWS S3 does), on HDFS or a local file system, or with Paimon's own "
        "commit under a catalog lock (a Hive or JDBC catalog with lock.enabled)")
    assert list_tree(s3_env["fs"], warehouse) == before
