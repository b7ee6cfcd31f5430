"""What a plan remembers of the table so that apply can tell whether it is still safe."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Mapping

from lakesweep.engine.errors import MetadataNotFound, StalePlan
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.table import SCHEMA_PREFIX, PaimonTable


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


def snapshot_pins(table: PaimonTable, snapshot_ids) -> dict[int, str]:
    """Digests of the given snapshot files as the planner read them (``PaimonTable.read_digest``): the bytes
    the plan was made from. A file not those bytes any more when the plan is applied (a rollback and new
    commits, even while planning) makes apply refuse the plan (``AssertSnapshotsPresent``). A snapshot the
    view has not read is read now; one gone raises ``StalePlan``."""
    pins = {}
    for sid in sorted(set(snapshot_ids)):
        path = table.snapshot_path(sid)
        if table.read_digest(path) is None:
            try:
                table.snapshot(sid)
            except MetadataNotFound as e:
                raise StalePlan(f"snapshot {sid} ({path}) disappeared while planning; re-run 'lakesweep plan'") from e
        pins[sid] = table.read_digest(path)
    return pins
