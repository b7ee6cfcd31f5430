"""A Paimon partition drop that loses its snapshot id to another writer, on whatever store a location names:
the scenario the S3 and HDFS commit tests share."""

from __future__ import annotations

import json
import time
from typing import Callable, Iterable

import lakesweep.engine.paimon.drop as drop_module
from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.fileio import fileio_for, join
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.engine.timeutil import system_zone
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import resolve_partition_options
from lakesweep.planner.paimon.partitions import plan_partitions


def plan_drop(location: str):
    """A plan dropping the oldest partition (one at most) of the table at ``location``."""
    t = open_table(location)
    opts = resolve_partition_options(t.options, expiration_time="1 d", strategy="values-time", max_expires=1,
                                     system_zone=system_zone())
    return plan_partitions(t, now_ms=int(time.time() * 1000), options=opts)


def apply_losing_snapshot_9(location: str, plan, journal, monkeypatch):
    """Apply ``plan`` (its table's latest snapshot is 8) while another writer creates ``snapshot-9`` between the
    drop's scan and its publish. Returns (the apply's report, the other writer's snapshot-9 bytes)."""
    io = fileio_for(location)
    publish = drop_module.MetadataWriter.publish
    raced: list[bytes] = []

    def racing_publish(self, snapshot):
        if not raced:
            other = dict(json.loads(io.read_bytes(join(location, "snapshot", "snapshot-8"))), id=9,
                         commitUser="other-writer")
            raced.append(json.dumps(other).encode())
            io.create_if_absent(join(location, "snapshot", "snapshot-9"), raced[0])
        return publish(self, snapshot)

    monkeypatch.setattr(drop_module.MetadataWriter, "publish", racing_publish)
    monkeypatch.setattr(drop_module.time, "sleep", lambda s: None)
    with DuckDBRecorder(journal) as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    return report, raced[0]


def assert_the_retry_left_only_its_own_manifests(location: str, manifest_names: Callable[[], Iterable[str]],
                                                 before: set[str]) -> None:
    """Snapshot 10 is the drop's, the other writer's snapshot-9 was not replaced, every manifest file that is new
    since ``before`` is one snapshot 10 uses (the losing attempt's were removed), and the table is whole."""
    table = open_table(location)
    s = table.snapshot(10)
    assert s.commit_kind == "OVERWRITE" and s.commit_user != "other-writer"
    used = {s.base_manifest_list, s.delta_manifest_list, s.index_manifest} | {
        m.file_name for m in table.data_manifests(s)}
    new = set(manifest_names()) - before
    assert new and new <= used
    assert verify_table(table).whole
