"""What a plan remembers of the table so that apply can tell whether it is still safe."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Mapping

from lakesweep.engine.errors import MetadataNotFound, StalePlan
from lakesweep.engine.fileio import join, read_each
from lakesweep.engine.paimon.model import Snapshot
from lakesweep.engine.paimon.table import SCHEMA_PREFIX, SNAPSHOT_READS, PaimonTable


def table_identity(table: PaimonTable) -> str:
    """A stable identity of the table: a hash of its first schema file, written once at creation.

    Two tables at different locations differ (their creation times and ids differ); a table moved with
    its files keeps its identity.
    """
    ids = table.schema_ids()
    if not ids:
        raise MetadataNotFound(join(table.base, "schema"), "schema")
    path = join(table.location, "schema", f"{SCHEMA_PREFIX}{min(ids)}") if table.branch == "main" else join(
        table.base, "schema", f"{SCHEMA_PREFIX}{min(ids)}"
    )
    try:
        data = table.fileio.read_bytes(path)
    except FileNotFoundError as e:
        raise MetadataNotFound(path, "schema") from e
    return "schema:" + hashlib.sha256(data).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The facts of a table that decide what a plan may delete, as read at one moment."""

    earliest: int | None
    latest: int | None
    schema_id: int
    tags: Mapping[str, int]  # tag name -> snapshot id
    consumers: Mapping[str, int]  # consumer id -> next snapshot
    branches: Mapping[str, int | None]  # branch name -> its latest snapshot id (None: no snapshot)


def table_fingerprint(table: PaimonTable) -> Fingerprint:
    earliest, latest = table.earliest_latest()
    branches = {}
    for name in table.branch_names():
        branches[name] = table.branch_table(name).earliest_latest()[1]
    return Fingerprint(
        earliest=earliest,
        latest=latest,
        schema_id=table.schema.id,
        tags={t.name: t.snapshot.id for t in table.tags()},
        consumers={c.consumer_id: c.next_snapshot for c in table.consumers()},
        branches=branches,
    )


def snapshot_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def snapshot_pins(table: PaimonTable, snapshot_ids) -> dict[int, str]:
    """Digests of the given snapshot files, as the plan relies on them.

    Each file is read again and must still parse to the snapshot the planner used (the table view caches
    what it read): a file replaced while planning (a rollback and recommit) raises ``StalePlan``.
    """
    pins = {}
    ids = sorted(set(snapshot_ids))
    for i in range(0, len(ids), SNAPSHOT_READS):  # read ``SNAPSHOT_READS`` at a time, on threads where remote
        part = ids[i:i + SNAPSHOT_READS]
        for sid, data in zip(part, read_each(table.fileio, [table.snapshot_path(sid) for sid in part], bytes)):
            pins[sid] = _pin(table, sid, data)
    return pins


def _pin(table: PaimonTable, sid: int, data: bytes | None) -> str:
    path = table.snapshot_path(sid)
    if data is None:
        raise StalePlan(f"snapshot {sid} ({path}) disappeared while planning; re-run 'lakesweep plan'")
    try:
        fresh = Snapshot.from_json(json.loads(data.decode("utf-8")))
    except (KeyError, TypeError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise StalePlan(f"snapshot {sid} ({path}) was replaced while planning; re-run 'lakesweep plan'") from e
    if fresh != table.snapshot(sid):
        raise StalePlan(f"snapshot {sid} ({path}) was replaced while planning; re-run 'lakesweep plan'")
    return snapshot_digest(data)
