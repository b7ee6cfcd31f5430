"""The CleanupPlan as a Parquet file: one row per action, the header in the key-value metadata.

Writing is deterministic: the same plan gives the same bytes (for one pyarrow version). Reading checks
the format version and that the plan id still matches the content, so an edited plan is refused. Version 3
is written; versions 1 and 2 are read, their untyped scope upcast and their header kept for their id.
"""

from __future__ import annotations

import json
import os
import stat

import pyarrow as pa
import pyarrow.parquet as pq

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import FileIO, fileio_for, normalize_location
from lakesweep.engine.plan import (ACTION_COLUMNS, FORMAT_VERSION, FORMATS, Action, CleanupPlan, OptionValue, PhaseSpec,
                                   Verb, action_columns, compute_plan_id, decode_requirement, decode_scope,
                                   format_module, kind_spec)

HEADER_KEY = b"lakesweep.plan.header"
ID_KEY = b"lakesweep.plan.id"

ARROW_TYPES = {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "int8": pa.int8()}

READ_VERSIONS = (1, 2, FORMAT_VERSION)

# Versions 2 and 3: one column per ``Action`` field, in field order, typed as the field declares.
SCHEMA = pa.schema([pa.field(name, ARROW_TYPES[t], nullable=n) for name, t, n in ACTION_COLUMNS])

# Version 1 (read only): snapshot expiry's columns, before actions had a verb.
SCHEMA_V1 = pa.schema(
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
    if plan.format_version != FORMAT_VERSION:
        raise PlanRejected(f"plan {plan.plan_id} is in format version {plan.format_version}; lakesweep writes "
                           f"only version {FORMAT_VERSION}: re-run 'lakesweep plan'")
    cols = action_columns(plan.actions)
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


def format_kinds(fmt: str) -> dict:
    """The action kinds a table format defines, by stored label (labels it does not define stay text)."""
    return format_module(fmt, "kinds").KINDS


def format_plan_kinds(fmt: str) -> tuple[str, ...]:
    """The plan kinds whose actions a table format defines (what apply can check and carry out)."""
    return format_module(fmt, "kinds").PLAN_KINDS if fmt in FORMATS else ()


def plan_from_header(header: dict, actions: tuple[Action, ...], *, source: str = "<plan>") -> CleanupPlan:
    """Rebuild a plan from its header and actions (as stored in a plan file or the journal)."""
    try:
        version = header.get("format_version")
        if version == 1:
            return _plan_from_v1_header(header, actions)
        return CleanupPlan(
            **_header_basics(header),
            scope=decode_scope(header["scope"], fmt=header["format"], kind=header["plan_kind"],
                               tagged=version != 2),
            requirements=tuple(decode_requirement(r) for r in header["requirements"]),
            phases=tuple(PhaseSpec(p["name"], p["mode"]) for p in header["phases"]),
            actions=actions,
            stats=header.get("stats") or {},
            format=header["format"],
            format_version=version,
            # a version-2 header stored its scope untyped: its id is over that header as written
            stored_header=header if version == 2 else None,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise PlanRejected(f"{source}: the plan is malformed ({e}); re-run 'lakesweep plan'") from e


def _header_basics(header: dict) -> dict:
    """What every format version's header says the same way: kind, table, now, options."""
    t = header["table"]
    return dict(kind=header["plan_kind"], table_location=t["location"], table_identity=t["identity"],
                branch=t["branch"], now_ms=header["now_ms"],
                options={k: OptionValue(v["value"], v["source"]) for k, v in header["options"].items()})


def _plan_from_v1_header(header: dict, actions: tuple[Action, ...]) -> CleanupPlan:
    """A version-1 plan (snapshot expiry of a Paimon table), with its fingerprint turned into the same
    requirements the planner makes today. The plan keeps its header, so its id stays the file's."""
    from lakesweep.engine.paimon.kinds import EXPIRE_PHASES, ActionKind
    from lakesweep.engine.paimon.requirements import expire_requirements

    t, fp = header["table"], header["fingerprint"]
    begin, end, hint = header["range"]["begin"], header["range"]["end"], header["earliest_hint"]
    only = header["options"].get("consumer.changelog-only")
    pins = fp.get("snapshots")
    requirements = expire_requirements(
        identity=t["identity"], location=t["location"], branch=t["branch"], begin=begin, end=end, hint=hint,
        deletes=any(a.verb.deletes for a in actions), schema_id=fp["schema_id"], branches=tuple(fp["branches"]),
        tags=fp["tags"], consumers=fp["consumers"], consumer_changelog_only=bool(only and only["value"]),
        snapshots=[a.snapshot_id for a in actions if a.kind == ActionKind.SNAPSHOT],
        pins=None if pins is None else {int(k): v for k, v in pins.items()},
    )
    return CleanupPlan(
        **_header_basics(header),
        scope=decode_scope({"begin": begin, "end": end, "earliest_hint": hint}, fmt="paimon", kind="expire",
                           tagged=False),
        requirements=requirements,
        phases=EXPIRE_PHASES,
        actions=actions,
        stats={**(header.get("stats") or {}), "earliest": fp["earliest"], "latest": fp["latest"]},
        format="paimon",
        format_version=1,
        stored_header=header,
    )


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


_VERBS = {v.value: v for v in Verb}


def _actions(cols: dict, kinds: dict, source: str) -> tuple[Action, ...]:
    """Actions from stored columns. A kind the format defines must keep its own verb and phase: a plan
    whose id was recomputed after an edit cannot turn a data file into a written file."""
    labels = [kinds.get(k, k) for k in cols["kind"]]
    verbs = [_VERBS[v] for v in cols["verb"]]
    actions = tuple(map(Action, labels, cols["path"], cols["snapshot_id"], cols["partition"], cols["bucket"],
                        cols["size"], cols["source"], cols["depth"], cols["action_id"], verbs, cols["phase"]))
    own = {label: (spec.verb, spec.phase) for label, spec in ((label, kind_spec(k)) for label, k in kinds.items())
           if spec is not None}
    for a, label, verb, phase in zip(actions, cols["kind"], verbs, cols["phase"]):
        expected = own.get(label)
        if expected is not None and (expected[0] is not verb or expected[1] != phase):
            raise ValueError(f"action {a.action_id} is a {label} {verb} in phase {phase}; that kind is a "
                             f"{expected[0]} in phase {expected[1]}")
    return actions


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
    version = header.get("format_version") if isinstance(header, dict) else None
    if version not in READ_VERSIONS:
        raise PlanRejected(
            f"{source}: plan format version {version!r} is not supported by this lakesweep "
            f"(it reads versions 1, 2 and {FORMAT_VERSION}); re-run 'lakesweep plan'"
        )
    schema = SCHEMA_V1 if version == 1 else SCHEMA
    if table.schema.remove_metadata() != schema.remove_metadata():
        raise PlanRejected(f"{source}: the plan's columns are not the ones lakesweep writes")
    cols = {name: column_values(table.column(name)) for name in schema.names}
    try:
        if version == 1:
            kinds = format_kinds("paimon")
            try:
                verb_of = {label: kind_spec(k).verb.value for label, k in kinds.items()}
                cols["verb"] = [verb_of[k] for k in cols["kind"]]
            except KeyError as e:
                raise ValueError(f"{e.args[0]!r} is not an action kind") from e
        else:
            kinds = format_kinds(header.get("format"))
        actions = _actions(cols, kinds, source)
    except KeyError as e:
        raise PlanRejected(f"{source}: the plan is malformed ({e.args[0]!r} is not a verb); "
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
