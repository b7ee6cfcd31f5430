"""The plan codec as it was before it was made columnar: a straightforward reference that the fast paths of
``engine.plan`` and ``engine.plan_io`` must agree with, byte for byte (tests/engine/test_plan_codec.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lakesweep.engine.plan import Action, CleanupPlan, Verb, action_row, action_row_v1, action_values
from lakesweep.engine.plan_io import HEADER_KEY, ID_KEY, SCHEMA, SCHEMA_V1, format_kinds, plan_from_header

_COMPACT = json.JSONEncoder(separators=(",", ":"))


def canonical_actions(actions: Sequence[Action]) -> tuple[Action, ...]:
    by_key: dict[tuple[str, str], Action] = {}
    for a in actions:
        key = (str(a.kind), a.path)
        old = by_key.get(key)
        if old is None or _preference(a) < _preference(old):
            by_key[key] = a
    ordered = sorted(by_key.values(), key=Action.sort_key)
    return tuple(Action(a.kind, a.path, a.snapshot_id, a.partition, a.bucket, a.size, a.source, a.depth, i, a.verb,
                        a.phase) for i, a in enumerate(ordered))


def _preference(a: Action) -> tuple:
    key: list = []
    for v, empty in ((a.snapshot_id, 0), (a.partition, ""), (a.bucket, 0), (a.size, 0), (a.source, "")):
        key += [v is None, empty if v is None else v]
    return (*key, a.depth, a.phase, a.verb.value)


def compute_plan_id(header: Mapping, actions: Sequence[Action]) -> str:
    row: Callable[[Action], list] = action_row_v1 if header.get("format_version") == 1 else action_row
    h = hashlib.sha256()
    h.update(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    if actions:
        h.update(("\n" + "\n".join(_COMPACT.encode(row(a)) for a in actions)).encode())
    return h.hexdigest()[:32]


def summarize(actions: Sequence[Action], *, by_partition=frozenset()) -> dict:
    kinds: dict[str, dict[str, int]] = {}
    partitions: dict[str, dict[str, int]] = {}
    for a in actions:
        k = kinds.setdefault(str(a.kind), {"count": 0, "bytes": 0, "unknown_size": 0})
        k["count"] += 1
        if a.size is None:
            k["unknown_size"] += 1
        else:
            k["bytes"] += a.size
        if a.kind in by_partition:
            p = partitions.setdefault(a.partition or "", {"count": 0, "bytes": 0})
            p["count"] += 1
            p["bytes"] += a.size or 0
    return {
        "by_kind": dict(sorted(kinds.items())),
        "by_partition": dict(sorted(partitions.items())),
        "files": sum(1 for a in actions if a.verb is Verb.DELETE_FILE),
        "bytes": sum(a.size or 0 for a in actions if a.verb.deletes),
    }


def plan_to_bytes(plan: CleanupPlan) -> bytes:
    cols = {name: [v[i] for v in map(action_values, plan.actions)] for i, name in enumerate(SCHEMA.names)}
    header = plan.header()
    table = pa.Table.from_pydict(cols, schema=SCHEMA).replace_schema_metadata({
        HEADER_KEY: json.dumps(header, sort_keys=True, separators=(",", ":")).encode(),
        ID_KEY: compute_plan_id(header, plan.actions).encode(),
    })
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", write_statistics=False, store_schema=True)
    return sink.getvalue().to_pybytes()


def plan_from_bytes(data: bytes) -> CleanupPlan:
    """A plan file read row by row (no refusal messages: the reference only reads what it was given)."""
    table = pq.read_table(pa.BufferReader(data), use_threads=False)
    meta = table.schema.metadata
    header = json.loads(meta[HEADER_KEY])
    version = header["format_version"]
    schema = SCHEMA_V1 if version == 1 else SCHEMA
    assert table.schema.remove_metadata() == schema.remove_metadata()
    rows = table.to_pylist()
    kinds = format_kinds("paimon" if version == 1 else header["format"])
    actions = tuple(Action(kinds.get(r["kind"], r["kind"]), r["path"], r["snapshot_id"], r["partition"], r["bucket"],
                           r["size"], r["source"], r["depth"], r["action_id"],
                           None if version == 1 else Verb(r["verb"]), r["phase"]) for r in rows)
    assert meta[ID_KEY].decode() == compute_plan_id(header, actions)
    plan = plan_from_header(header, actions)
    return plan
