"""The CleanupPlan as a Parquet file: one row per action, the header in the key-value metadata.

Writing is deterministic: the same plan gives the same bytes (for one pyarrow version). Reading checks
the format version and that the plan id still matches the content, so an edited plan is refused.
"""

from __future__ import annotations

import json
import os
import stat

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import PlanRejected
from engine.fileio import FileIO, fileio_for, normalize_location
from engine.plan import (
    FORMAT_VERSION,
    Action,
    ActionKind,
    CleanupPlan,
    Fingerprint,
    OptionValue,
    compute_plan_id,
)

HEADER_KEY = b"lakesweep.plan.header"
ID_KEY = b"lakesweep.plan.id"

SCHEMA = pa.schema(
    [
        pa.field("action_id", pa.int64(), nullable=False),
        pa.field("phase", pa.int8(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("snapshot_id", pa.int64()),
        pa.field("partition", pa.string()),
        pa.field("bucket", pa.int32()),
        pa.field("size", pa.int64()),
        pa.field("source", pa.string()),
        pa.field("depth", pa.int32(), nullable=False),
    ]
)


def plan_to_bytes(plan: CleanupPlan) -> bytes:
    cols = {name: [] for name in SCHEMA.names}
    for a in plan.actions:
        cols["action_id"].append(a.action_id)
        cols["phase"].append(int(a.phase))
        cols["kind"].append(a.kind.value)
        cols["path"].append(a.path)
        cols["snapshot_id"].append(a.snapshot_id)
        cols["partition"].append(a.partition)
        cols["bucket"].append(a.bucket)
        cols["size"].append(a.size)
        cols["source"].append(a.source)
        cols["depth"].append(a.depth)
    header = plan.header()
    table = pa.Table.from_pydict(cols, schema=SCHEMA).replace_schema_metadata(
        {
            HEADER_KEY: json.dumps(header, sort_keys=True, separators=(",", ":")).encode(),
            ID_KEY: plan.plan_id.encode(),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", write_statistics=False, store_schema=True)
    return sink.getvalue().to_pybytes()


def write_plan(plan: CleanupPlan, location: str, fileio: FileIO | None = None) -> str:
    """Write the plan atomically; returns the plan id."""
    location = normalize_location(location)
    (fileio or fileio_for(location)).write_atomic(location, plan_to_bytes(plan))
    return plan.plan_id


def plan_from_header(header: dict, actions: tuple[Action, ...], *, source: str = "<plan>") -> CleanupPlan:
    """Rebuild a plan from its header and actions (as stored in a plan file or the journal)."""
    try:
        t = header["table"]
        return CleanupPlan(
            kind=header["plan_kind"],
            table_location=t["location"],
            table_identity=t["identity"],
            branch=t["branch"],
            now_ms=header["now_ms"],
            options={k: OptionValue(v["value"], v["source"]) for k, v in header["options"].items()},
            begin=header["range"]["begin"],
            end=header["range"]["end"],
            earliest_hint=header["earliest_hint"],
            fingerprint=Fingerprint.from_json(header["fingerprint"]),
            actions=actions,
            stats=header.get("stats") or {},
            format_version=header["format_version"],
        )
    except (KeyError, TypeError, ValueError) as e:
        raise PlanRejected(f"{source}: the plan is malformed ({e}); re-run 'lakesweep plan'") from e


def column_values(col: pa.ChunkedArray) -> list:
    """A column's values as Python objects (``None`` for nulls), through NumPy: ``to_pylist`` builds an
    Arrow scalar per value and costs several times more on a plan of 300,000 actions."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col.to_numpy(zero_copy_only=False).tolist()
    if not pa.types.is_integer(col.type):
        return col.to_pylist()
    if not col.null_count:
        return col.to_numpy().tolist()
    values = col.fill_null(0).to_numpy().tolist()
    nulls = col.is_null().to_numpy(zero_copy_only=False).tolist()
    return [None if null else v for v, null in zip(values, nulls)]


_KINDS = {k.value: k for k in ActionKind}
_PHASES = {k: int(k.phase) for k in ActionKind}


def plan_from_bytes(data: bytes, *, source: str = "<bytes>") -> CleanupPlan:
    try:
        # Single-threaded: pyarrow's CPU pool together with the zstandard module (which fastavro loads)
        # aborts the interpreter at exit with pyarrow 19 ("terminate called without an active exception").
        table = pq.read_table(pa.BufferReader(data), use_threads=False)
    except (pa.ArrowInvalid, OSError) as e:
        raise PlanRejected(f"{source} is not a lakesweep plan (not a readable Parquet file: {e})") from e
    meta = table.schema.metadata or {}
    if HEADER_KEY not in meta or ID_KEY not in meta:
        raise PlanRejected(f"{source} is a Parquet file but not a lakesweep plan (no plan header)")
    try:
        header = json.loads(meta[HEADER_KEY])
    except json.JSONDecodeError as e:
        raise PlanRejected(f"{source}: the plan header is not valid JSON") from e
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        raise PlanRejected(
            f"{source}: plan format version {version!r} is not supported by this lakesweep "
            f"(it reads version {FORMAT_VERSION}); re-run 'lakesweep plan'"
        )
    if table.schema.remove_metadata() != SCHEMA.remove_metadata():
        raise PlanRejected(f"{source}: the plan's columns are not the ones lakesweep writes")
    cols = {name: column_values(table.column(name)) for name in SCHEMA.names}
    try:
        kinds = [_KINDS[k] for k in cols["kind"]]
        actions = tuple(map(Action, kinds, cols["path"], cols["snapshot_id"], cols["partition"], cols["bucket"],
                            cols["size"], cols["source"], cols["depth"], cols["action_id"]))
        for a, kind, phase in zip(actions, kinds, cols["phase"]):
            if _PHASES[kind] != phase:
                raise ValueError(f"action {a.action_id} has phase {phase}, its kind belongs to {_PHASES[kind]}")
    except KeyError as e:
        raise PlanRejected(f"{source}: the plan is malformed ({e.args[0]!r} is not an action kind); "
                           "re-run 'lakesweep plan'") from e
    except (TypeError, ValueError) as e:
        raise PlanRejected(f"{source}: the plan is malformed ({e}); re-run 'lakesweep plan'") from e
    plan = plan_from_header(header, actions, source=source)
    stored_id = meta[ID_KEY].decode()
    actual = compute_plan_id(header, actions)
    if stored_id != actual:
        raise PlanRejected(
            f"{source}: the plan's content does not match its id {stored_id} (content hash {actual}): "
            "the file was modified after it was written; re-run 'lakesweep plan'"
        )
    plan.remember_id(actual)
    return plan


def read_plan(location: str, fileio: FileIO | None = None) -> CleanupPlan:
    """Read and verify a plan file. A local path must be a regular file: a FIFO would block the read and
    a device (``/dev/zero``) would never end, so both are refused before anything is opened."""
    location = normalize_location(location)
    if fileio is None and "://" not in location:
        try:
            st = os.stat(location)
        except FileNotFoundError as e:
            raise PlanRejected(f"plan file {location} does not exist") from e
        except OSError as e:
            raise PlanRejected(f"plan file {location} cannot be read: {e.strerror or e}") from e
        if not stat.S_ISREG(st.st_mode):
            raise PlanRejected(f"plan file {location} is not a regular file")
    try:
        data = (fileio or fileio_for(location)).read_bytes(location)
    except FileNotFoundError as e:
        raise PlanRejected(f"plan file {location} does not exist") from e
    return plan_from_bytes(data, source=location)
