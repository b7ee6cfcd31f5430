"""What a plan remembers of the table so that apply can tell whether it is still safe."""

from __future__ import annotations

import hashlib

from engine.errors import MetadataNotFound
from engine.fileio import join
from engine.plan import Fingerprint
from engine.table import SCHEMA_PREFIX, PaimonTable


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
