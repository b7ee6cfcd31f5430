"""Reference Paimon tables written by pypaimon itself.

Every table here is created through pypaimon's filesystem catalog
(``CatalogFactory.create({"warehouse": ...})``, database ``db``) and written
with pypaimon's own batch writer, so lakesweep's tests and ``lakesweep demo``
work on real pypaimon output, never on hand-made lookalikes.

This module imports only pypaimon, pyarrow and the standard library (no
lakesweep ``engine`` code), so it can act as an independent oracle.

pypaimon 2.1.0 API used
-----------------------
* catalog:   ``CatalogFactory.create({"warehouse": wh})``,
             ``catalog.create_database("db", False)``,
             ``catalog.create_table("db.<name>", Schema.from_pyarrow_schema(
                 pa_schema, partition_keys=..., primary_keys=..., options=...), False)``,
             ``catalog.get_table("db.<name>")``
* write:     ``wb = table.new_batch_write_builder(); w = wb.new_write();
             c = wb.new_commit(); w.write_arrow(pa_table);
             c.commit(w.prepare_commit()); w.close(); c.close()``
* overwrite: ``table.new_batch_write_builder().overwrite({"dt": "..."})`` then as above
             (one snapshot with ``commitKind: OVERWRITE``)
* row kinds: table option ``rowkind.field = <string column>``, values
             ``+I``/``-U``/``+U``/``-D`` (stored in ``_VALUE_KIND`` 0/1/2/3)
* tag:       ``table.create_tag(name, snapshot_id=N)``  (writes ``tag/tag-<name>``,
             the plain snapshot JSON, written in place, no temp file)
* consumer:  ``table.consumer_manager().reset_consumer(id, Consumer(next_snapshot=N))``
             (``pypaimon.consumer.consumer.Consumer``; writes
             ``consumer/consumer-<id>`` = ``{"nextSnapshot": N}``, in place)

pypaimon 2.1.0 never expires snapshots on commit (its commit path has no expire
step and it never writes ``snapshot/EARLIEST``), so these writers do not put
``snapshot.num-retained.*`` options into the table: a table's options are what
lakesweep's planner reads, and they stay at Paimon's defaults unless a caller
passes ``options=``.
"""

from __future__ import annotations

import datetime
import json
import os
import random
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.consumer.consumer import Consumer

DATABASE = "db"

KIND_APPEND = "append"
KIND_PRIMARY_KEY = "primary-key"

#: Partition values of the append / demo tables.
DT_VALUES = ("2024-01-01", "2024-01-02", "2024-01-03")


@dataclass(frozen=True)
class WrittenTable:
    """What a writer put on disk, read back from the table's metadata dirs."""

    path: str
    kind: str
    snapshots: list[int]
    tags: dict[str, int]
    consumers: dict[str, int]
    partition_keys: list[str]
    primary_keys: list[str]
    #: The rows a reader must see at the latest snapshot (after overwrites,
    #: upserts and deletes), as python dicts; order is not significant.
    expected_rows: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)

    @property
    def latest(self) -> int:
        return max(self.snapshots)


# --------------------------------------------------------------------------- helpers


def _catalog(warehouse: str):
    catalog = CatalogFactory.create({"warehouse": os.fspath(warehouse)})
    catalog.create_database(DATABASE, True)
    return catalog


def _create_table(warehouse, name, pa_schema, *, partition_keys, primary_keys=None, options=None):
    catalog = _catalog(warehouse)
    schema = Schema.from_pyarrow_schema(
        pa_schema,
        partition_keys=list(partition_keys),
        primary_keys=list(primary_keys) if primary_keys else None,
        options={k: str(v) for k, v in (options or {}).items()},
    )
    identifier = f"{DATABASE}.{name}"
    catalog.create_table(identifier, schema, False)
    return catalog.get_table(identifier)


def _commit(table, rows: list[dict], pa_schema: pa.Schema, *, overwrite: Optional[dict] = None) -> None:
    builder = table.new_batch_write_builder()
    if overwrite is not None:
        builder = builder.overwrite(overwrite)
    write = builder.new_write()
    commit = builder.new_commit()
    try:
        write.write_arrow(pa.Table.from_pylist(rows, schema=pa_schema))
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def _snapshot_ids_on_disk(table_path: str) -> list[int]:
    snapshot_dir = os.path.join(table_path, "snapshot")
    ids = []
    for entry in os.listdir(snapshot_dir):
        if entry.startswith("snapshot-") and entry[len("snapshot-"):].isdigit():
            ids.append(int(entry[len("snapshot-"):]))
    return sorted(ids)


def _tags_on_disk(table_path: str) -> dict[str, int]:
    tag_dir = os.path.join(table_path, "tag")
    tags: dict[str, int] = {}
    if os.path.isdir(tag_dir):
        for entry in sorted(os.listdir(tag_dir)):
            if entry.startswith("tag-"):
                with open(os.path.join(tag_dir, entry), encoding="utf-8") as fh:
                    tags[entry[len("tag-"):]] = int(json.load(fh)["id"])
    return tags


def _describe(table, kind: str, partition_keys, primary_keys, expected_rows) -> WrittenTable:
    """Read what pypaimon wrote back from disk and cross-check with its managers."""
    path = str(table.table_path)
    snapshots = _snapshot_ids_on_disk(path)
    latest = table.snapshot_manager().get_latest_snapshot()
    if not snapshots or latest is None or latest.id != snapshots[-1]:
        raise AssertionError(f"snapshot dir {snapshots} disagrees with pypaimon's latest {latest and latest.id}")
    with open(os.path.join(path, "snapshot", "LATEST"), encoding="utf-8") as fh:
        hint = int(fh.read().strip())
    if hint != snapshots[-1]:
        raise AssertionError(f"LATEST hint {hint} != newest snapshot file {snapshots[-1]}")
    return WrittenTable(
        path=path,
        kind=kind,
        snapshots=snapshots,
        tags=_tags_on_disk(path),
        consumers=dict(sorted(table.consumer_manager().consumers().items())),
        partition_keys=list(partition_keys),
        primary_keys=list(primary_keys),
        expected_rows=expected_rows,
    )


# --------------------------------------------------------------------------- append table

APPEND_SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("name", pa.string()),
    ("amount", pa.float64()),
    ("dt", pa.string()),
])


def write_append_table(
    warehouse,
    *,
    name: str = "append_t",
    commits: int = 5,
    seed: int = 0,
    options: Optional[Mapping[str, str]] = None,
) -> WrittenTable:
    """Append-only table partitioned by ``dt``.

    Snapshots ``1..commits`` are APPEND commits of random small batches over 2-3
    of the ``DT_VALUES`` partitions; snapshot ``commits + 1`` is an OVERWRITE of
    ``dt=2024-01-01``.  Tags: ``t_early`` -> snapshot 2, ``t_late`` -> snapshot
    ``commits``.  Consumer ``c1`` with ``nextSnapshot = commits - 1``.
    """
    if commits < 3:
        raise ValueError("write_append_table needs commits >= 3 (two distinct tags and a consumer)")
    rng = random.Random(seed)
    table = _create_table(warehouse, name, APPEND_SCHEMA, partition_keys=["dt"], options=options)

    live: list[dict] = []
    next_id = 0
    for _ in range(commits):
        partitions = rng.sample(DT_VALUES, rng.choice((2, 3)))
        batch = []
        for dt in partitions:
            for _ in range(rng.randint(1, 4)):
                batch.append({"id": next_id, "name": f"n{rng.randrange(1000)}",
                              "amount": round(rng.uniform(0, 100), 2), "dt": dt})
                next_id += 1
        _commit(table, batch, APPEND_SCHEMA)
        live.extend(batch)

    overwritten = DT_VALUES[0]
    replacement = [{"id": next_id + i, "name": f"ow{i}", "amount": float(i), "dt": overwritten} for i in range(2)]
    _commit(table, replacement, APPEND_SCHEMA, overwrite={"dt": overwritten})
    live = [r for r in live if r["dt"] != overwritten] + replacement

    table.create_tag("t_early", snapshot_id=2)
    table.create_tag("t_late", snapshot_id=commits)
    table.consumer_manager().reset_consumer("c1", Consumer(next_snapshot=commits - 1))
    return _describe(table, KIND_APPEND, ["dt"], [], live)


# --------------------------------------------------------------------------- primary-key table

PK_SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("v", pa.string()),
    ("op", pa.string()),
    pa.field("dt", pa.string(), nullable=False),
])


def write_pk_table(
    warehouse,
    *,
    name: str = "pk_t",
    commits: int = 5,
    seed: int = 0,
    bucket: int = 2,
    options: Optional[Mapping[str, str]] = None,
) -> WrittenTable:
    """Primary-key table (``dt``, ``id``) partitioned by ``dt``, fixed ``bucket``.

    Row kinds come from the ``op`` column (table option ``rowkind.field=op``).
    Snapshot 1 inserts keys in two partitions; every later commit has at least
    one ``+U`` upsert of an existing key, one ``-D`` delete and one new ``+I``.
    Tag ``pk_tag`` -> snapshot ``min(2, commits)``.
    """
    if commits < 1:
        raise ValueError("commits must be >= 1")
    rng = random.Random(seed)
    table_options = {"bucket": str(bucket), "rowkind.field": "op"}
    table_options.update(options or {})
    table = _create_table(warehouse, name, PK_SCHEMA, partition_keys=["dt"],
                          primary_keys=["dt", "id"], options=table_options)

    state: dict[tuple[str, int], dict] = {}
    next_id = 0
    first = []
    for dt in DT_VALUES[:2]:
        for _ in range(6):
            first.append({"id": next_id, "v": f"v{next_id}", "op": "+I", "dt": dt})
            next_id += 1
    _commit(table, first, PK_SCHEMA)
    for r in first:
        state[(r["dt"], r["id"])] = r

    for n in range(2, commits + 1):
        keys = sorted(state)
        touched = rng.sample(keys, min(len(keys), rng.randint(2, 4)))
        batch = []
        for i, (dt, key) in enumerate(touched):
            if i == 0 or rng.random() < 0.5:
                batch.append({"id": key, "v": f"u{n}_{key}", "op": "+U", "dt": dt})
            else:
                batch.append({"id": key, "v": None, "op": "-D", "dt": dt})
        if len(touched) >= 2 and not any(r["op"] == "-D" for r in batch):
            batch[-1] = {"id": batch[-1]["id"], "v": None, "op": "-D", "dt": batch[-1]["dt"]}
        dt_new = rng.choice(DT_VALUES)
        batch.append({"id": next_id, "v": f"i{n}_{next_id}", "op": "+I", "dt": dt_new})
        next_id += 1
        _commit(table, batch, PK_SCHEMA)
        for r in batch:
            if r["op"] == "-D":
                state.pop((r["dt"], r["id"]), None)
            else:
                state[(r["dt"], r["id"])] = r

    table.create_tag("pk_tag", snapshot_id=min(2, commits))
    return _describe(table, KIND_PRIMARY_KEY, ["dt"], ["dt", "id"], list(state.values()))


# --------------------------------------------------------------------------- typed partitions

TYPED_SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("p_int", pa.int32()),     # INT
    ("p_date", pa.date32()),   # DATE
    ("p_big", pa.int64()),     # BIGINT
    ("p_bool", pa.bool_()),    # BOOLEAN
    ("p_str", pa.string()),    # STRING
])
TYPED_PARTITION_KEYS = ["p_int", "p_date", "p_big", "p_bool", "p_str"]

#: Rows of the typed table, one partition each.
TYPED_ROWS = [
    {"id": 1, "p_int": 7, "p_date": datetime.date(2024, 1, 1), "p_big": 1234567890123,
     "p_bool": True, "p_str": "a b/c:d=e%"},
    {"id": 2, "p_int": -3, "p_date": datetime.date(1969, 12, 31), "p_big": -1,
     "p_bool": False, "p_str": "plain"},
    # every partition value NULL (pypaimon accepts it: __DEFAULT_PARTITION__)
    {"id": 3, "p_int": None, "p_date": None, "p_big": None, "p_bool": None, "p_str": None},
    # empty string is rendered as the default partition name too
    {"id": 4, "p_int": 0, "p_date": datetime.date(2024, 1, 1), "p_big": 0,
     "p_bool": True, "p_str": ""},
    # the remaining characters of Java's PartitionPathUtils escape set, plus non-ASCII
    {"id": 5, "p_int": 1, "p_date": datetime.date(2024, 1, 1), "p_big": 0,
     "p_bool": True, "p_str": "\u00fc#?*[]{}^'\"\\x"},
]


def write_typed_partition_table(
    warehouse,
    *,
    name: str = "typed_t",
    options: Optional[Mapping[str, str]] = None,
) -> WrittenTable:
    """Append table partitioned by INT, DATE, BIGINT, BOOLEAN and STRING keys.

    One APPEND commit (snapshot 1) holding ``TYPED_ROWS``, including a row whose
    partition values are all NULL.
    """
    table = _create_table(warehouse, name, TYPED_SCHEMA, partition_keys=TYPED_PARTITION_KEYS,
                          options=options)
    _commit(table, TYPED_ROWS, TYPED_SCHEMA)
    return _describe(table, KIND_APPEND, TYPED_PARTITION_KEYS, [], [dict(r) for r in TYPED_ROWS])


# --------------------------------------------------------------------------- demo table

DEMO_TAG = "demo_tag"
DEMO_TAG_SNAPSHOT = 2
DEMO_OVERWRITE_SNAPSHOT = 5

# (dt values, overwrite?) per commit; snapshot id = position + 1.
_DEMO_PLAN = (
    (DT_VALUES, False),                    # 1
    (DT_VALUES[:2], False),                # 2  <- demo_tag
    ((DT_VALUES[0], DT_VALUES[2]), False),  # 3  adds a dt=2024-01-01 file after the tag
    ((DT_VALUES[1],), False),              # 4
    ((DT_VALUES[0],), True),               # 5  OVERWRITE dt=2024-01-01
    (DT_VALUES[1:], False),                # 6
    ((DT_VALUES[0],), False),              # 7
    ((DT_VALUES[2],), False),              # 8
)


def write_demo_table(warehouse, *, name: str = "demo_t") -> WrittenTable:
    """The table ``lakesweep demo`` shows.

    Eight small commits over three ``dt`` partitions; snapshot 5 overwrites
    ``dt=2024-01-01`` and tag ``demo_tag`` sits on snapshot 2.  Expiring with
    retain-min 3 (keep 6..8) removes snapshots 1..5: the ``dt=2024-01-01`` file
    added by snapshot 3 and dropped by the overwrite is deletable, while the
    ``dt=2024-01-01`` files of snapshots 1 and 2 are only kept alive by the tag.
    """
    rng = random.Random(8)
    table = _create_table(warehouse, name, APPEND_SCHEMA, partition_keys=["dt"])
    live: list[dict] = []
    next_id = 0
    for partitions, overwrite in _DEMO_PLAN:
        batch = []
        for dt in partitions:
            for _ in range(2):
                batch.append({"id": next_id, "name": f"n{next_id}",
                              "amount": round(rng.uniform(0, 100), 2), "dt": dt})
                next_id += 1
        if overwrite:
            (dt,) = partitions
            _commit(table, batch, APPEND_SCHEMA, overwrite={"dt": dt})
            live = [r for r in live if r["dt"] != dt]
        else:
            _commit(table, batch, APPEND_SCHEMA)
        live.extend(batch)
    table.create_tag(DEMO_TAG, snapshot_id=DEMO_TAG_SNAPSHOT)
    return _describe(table, KIND_APPEND, ["dt"], [], live)
