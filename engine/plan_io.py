"""The CleanupPlan as a Parquet file: one row per action, the header in the key-value metadata.

Writing is deterministic: the same plan gives the same bytes (for one pyarrow version). Reading checks
the format version and that the plan id still matches the content, so an edited plan is refused. Version 3
is written; versions 1 and 2 are read, their untyped scope upcast and their header kept for their id.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import FileIO, fileio_for, normalize_location
from lakesweep.engine.plan import (ACTION_COLUMNS, FORMAT_VERSION, FORMATS, Action, CleanupPlan, OptionValue, PhaseSpec,
                                   Verb, action_columns, action_rows, built_actions, compute_plan_id, header_bytes,
                                   decode_requirement, decode_scope, format_module, kind_spec)
from lakesweep.engine.plan_codec import ARROW_TYPES, NotColumnar, action_arrays, rows_json
from lakesweep.engine.plan_columns import SCHEMA, ColumnActions, FileActions, column_values

HEADER_KEY = b"lakesweep.plan.header"
ID_KEY = b"lakesweep.plan.id"

READ_VERSIONS = (1, 2, FORMAT_VERSION)

# Versions 2 and 3: one column per ``Action`` field, in field order, typed as the field declares.
ACTION_FIELDS_INDEX = {name: i for i, name in enumerate(SCHEMA.names)}

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


ROW_GROUP = 1024 * 1024  # rows per row group: what ``pq.write_table`` writes by default
_BATCH = 65_536  # rows decoded or hashed at a time


# Parquet's column writers take a chunk's values ``ALIGN`` at a time and may cut a page after each such
# run: a row group written from chunks that begin at multiples of it is stored byte for byte as the same
# rows in one chunk (pyarrow's ``write_batch_size``, 1024).
ALIGN = 1024


def aligned_batches(batches: Iterable[pa.RecordBatch], align: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches``, in order, as batches that each begin at a multiple of ``align`` rows: whole
    runs of ``align`` rows are views of the batches given, and only the rows around a boundary that is not
    on one (fewer than ``align`` each time) are copied."""
    carry: list[pa.RecordBatch] = []  # rows that do not yet end on a multiple of ``align``
    carried = 0
    for batch in batches:
        if carried:
            take = min(align - carried, batch.num_rows)
            carry.append(batch.slice(0, take))
            carried += take
            batch = batch.slice(take)
            if carried < align:
                continue
            yield _one_batch(carry)
            carry, carried = [], 0
        whole = batch.num_rows - batch.num_rows % align
        if whole:
            yield batch.slice(0, whole)
        if whole < batch.num_rows:
            carry, carried = [batch.slice(whole)], batch.num_rows - whole
    if carry:
        yield _one_batch(carry)


def _one_batch(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]

def _columns(actions: Sequence[Action]) -> tuple[list[pa.Array], bytes | memoryview | None]:
    """The actions' columns and, where they are columnar, their rows as the id hashes them (else None)."""
    if isinstance(actions, ColumnActions):
        arrays = actions.arrays()
        return arrays, rows_json(arrays) if actions else None
    try:
        arrays = action_arrays(actions)
        return arrays, None if not actions else rows_json(arrays)
    except NotColumnar:
        cols = action_columns(actions)
        return [pa.array(cols[name], ARROW_TYPES[t]) for name, t, _ in ACTION_COLUMNS], None


def _writer_options() -> dict:
    return dict(compression="zstd", write_statistics=False, store_schema=True)


def plan_to_bytes(plan: CleanupPlan) -> bytes:
    sink = pa.BufferOutputStream()
    _write_plan_to(plan, sink)
    return sink.getvalue().to_pybytes()


def _write_plan_to(plan: CleanupPlan, sink) -> None:
    """Write the plan file's bytes to ``sink`` (a pyarrow output stream or a binary file), a row group at a
    time, and remember the id they hash to."""
    if plan.format_version != FORMAT_VERSION:
        raise PlanRejected(f"plan {plan.plan_id} is in format version {plan.format_version}; lakesweep writes "
                           f"only version {FORMAT_VERSION}: re-run 'lakesweep plan'")
    with PlanWriter(sink, plan.header()) as writer:
        for start in range(0, len(plan.actions), _BATCH):
            writer.write(plan.actions[start:start + _BATCH])
    plan.remember_id(writer.plan_id)


class PlanWriter:
    """Writes a plan file from batches of its canonical actions, in order, holding at most one row group:
    the same bytes ``plan_to_bytes`` writes for the whole plan (row groups of ``ROW_GROUP`` rows, the
    header and id in the key-value metadata). The id hashes the header first, so the header is given
    when the writer opens; ``close`` returns the plan id. ``sink`` is a path or a pyarrow output stream;
    the caller makes the file appear atomically (write elsewhere, then rename)."""

    def __init__(self, sink, header: Mapping):
        if header.get("format_version") != FORMAT_VERSION:
            raise PlanRejected(f"lakesweep writes only plan format version {FORMAT_VERSION}, not "
                               f"{header.get('format_version')!r}")
        self._header = header_bytes(header)
        self._hash = hashlib.sha256(self._header)
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0  # pending
        self._written = 0
        self._rows_hashed = 0
        self.plan_id: str | None = None
        placeholder = SCHEMA.with_metadata({HEADER_KEY: b"", ID_KEY: b""})
        self._writer = pq.ParquetWriter(sink, placeholder, **_writer_options())

    def write(self, actions: Sequence[Action]) -> None:
        """Append the next actions; they must be numbered on from the last ones written (from 0)."""
        if not actions:
            return
        arrays, rows = _columns(actions)
        ids = arrays[ACTION_FIELDS_INDEX["action_id"]]
        expected = np.arange(self._rows_hashed, self._rows_hashed + len(actions), dtype=np.int64)
        if ids.null_count or not np.array_equal(ids.to_numpy(), expected):
            raise ValueError("actions must be canonical (numbered 0..n-1 in order); use canonical_actions")
        self._hash.update(action_rows(actions) if rows is None else rows)
        self._rows_hashed += len(actions)
        self._pending.append(pa.RecordBatch.from_arrays(arrays, schema=SCHEMA))
        self._rows += len(actions)
        while self._rows >= ROW_GROUP:
            self._flush(ROW_GROUP)

    def _flush(self, rows: int) -> None:
        table = pa.Table.from_batches(self._pending, schema=SCHEMA)
        group = pa.Table.from_batches(aligned_batches(table.slice(0, rows).to_batches(), ALIGN), schema=SCHEMA)
        self._writer.write_table(group, row_group_size=ROW_GROUP)
        self._pending = table.slice(rows).to_batches() if rows < table.num_rows else []
        self._rows -= rows
        self._written += rows

    def close(self) -> str:
        if self.plan_id is not None:
            return self.plan_id
        if self._rows or not self._written:  # an empty plan is one empty row group, as write_table writes it
            self._flush(self._rows)
        self.plan_id = self._hash.hexdigest()[:32]
        meta = {HEADER_KEY: self._header, ID_KEY: self.plan_id.encode()}
        schema = SCHEMA.with_metadata(meta)
        self._writer.add_key_value_metadata({**meta, b"ARROW:schema": base64.b64encode(schema.serialize())})
        self._writer.close()
        return self.plan_id

    def __enter__(self) -> "PlanWriter":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._writer.close()


def write_plan(plan: CleanupPlan, location: str, fileio: FileIO | None = None) -> str:
    """Write the plan atomically; returns the plan id."""
    location = normalize_location(location)
    (fileio or fileio_for(location)).write_atomic_from(location, lambda stream: _write_plan_to(plan, stream))
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


_VERBS = {v.value: v for v in Verb}
_DISTINCT = {"path", "action_id"}  # a value per action: the other columns' values are shared among actions


def _actions(cols: dict, kinds: dict, source: str) -> tuple[Action, ...]:
    """Actions from stored columns. A kind the format defines must keep its own verb and phase: a plan
    whose id was recomputed after an edit cannot turn a data file into a written file."""
    labels = [kinds.get(k, k) for k in cols["kind"]]
    verbs = [_VERBS[v] for v in cols["verb"]]
    actions = tuple(built_actions(labels, cols["path"], cols["snapshot_id"], cols["partition"], cols["bucket"],
                                  cols["size"], cols["source"], cols["depth"], cols["action_id"], verbs, cols["phase"]))
    own = {label: (spec.verb, spec.phase) for label, spec in ((label, kind_spec(k)) for label, k in kinds.items())
           if spec is not None}
    shapes = set(zip(cols["kind"], verbs, cols["phase"]))  # a few (kind, verb, phase): checked once each
    wrong = {shape for shape in shapes if shape[0] in own and (own[shape[0]][0] is not shape[1]
                                                                or own[shape[0]][1] != shape[2])}
    if wrong:
        for a, shape in zip(actions, zip(cols["kind"], verbs, cols["phase"])):
            if shape in wrong:
                label, verb, phase = shape
                raise ValueError(f"action {a.action_id} is a {label} {verb} in phase {phase}; that kind is a "
                                 f"{own[label][0]} in phase {own[label][1]}")
    return actions


def _columns_pass(columns: pa.Table, kinds: Mapping[str, Any]) -> bool:
    """Whether a plan file's columns pass what ``_decode`` checks of the actions it builds, worked out over
    the columns: every path and kind label non-empty, every phase set, every verb one, and each kind the
    format defines with its own verb and phase. Then no action need be built to check it."""
    if pc.min(pc.utf8_length(columns.column("path"))).as_py() == 0 or \
            pc.min(pc.utf8_length(columns.column("kind"))).as_py() == 0 or \
            pc.any(pc.equal(columns.column("phase"), 0)).as_py():
        return False
    shapes = columns.select(["kind", "verb", "phase"]).group_by(["kind", "verb", "phase"]).aggregate([])
    for label, verb, phase in zip(*(shapes.column(name).to_pylist() for name in ("kind", "verb", "phase"))):
        if verb not in _VERBS:
            return False
        spec = kind_spec(kinds[label]) if label in kinds else None
        if spec is not None and (spec.verb is not _VERBS[verb] or spec.phase != phase):
            return False
    return True


def _plan_header(meta: Mapping, schema: pa.Schema, source: str) -> tuple[dict, int]:
    """The header of a plan file's key-value metadata and its format version, refused as today's reader
    refuses them: no header, a header that is not JSON, an unknown version, other columns."""
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
    if schema.remove_metadata() != (SCHEMA_V1 if version == 1 else SCHEMA).remove_metadata():
        raise PlanRejected(f"{source}: the plan's columns are not the ones lakesweep writes")
    return header, version


def _decode(columns: Mapping[str, pa.ChunkedArray | pa.Array], header: dict, version: int,
            source: str) -> tuple[Action, ...]:
    """The actions of a plan file's columns (all of them, or one batch), checked as ``_actions`` checks."""
    cols = {name: column_values(col, shared=name not in _DISTINCT) for name, col in columns.items()}
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
        return _actions(cols, kinds, source)
    except KeyError as e:
        raise PlanRejected(f"{source}: the plan is malformed ({e.args[0]!r} is not a verb); "
                           "re-run 'lakesweep plan'") from e
    except (TypeError, ValueError) as e:
        raise PlanRejected(f"{source}: the plan is malformed ({e}); re-run 'lakesweep plan'") from e


def _rows(batch: pa.RecordBatch, actions: tuple[Action, ...], version: int) -> bytes | memoryview:
    """What the id hashes for these rows: from the stored columns (formats 2 and 3 hash every column as
    stored), from the actions for format 1."""
    return action_rows(actions, v1=True) if version == 1 else rows_json(batch.columns)


def _check_id(stored_id: str, actual: str, source: str) -> None:
    if stored_id != actual:
        raise PlanRejected(
            f"{source}: the plan's content does not match its id {stored_id} (content hash {actual}): "
            "the file was modified after it was written; re-run 'lakesweep plan'"
        )


def plan_from_bytes(data: bytes, *, source: str = "<bytes>", as_columns: bool = False) -> CleanupPlan:
    """The plan a plan file's bytes hold, checked. With ``as_columns`` (a file of format 2 or later) its
    actions stay the file's columns (``ColumnActions``), built only where they are read: apply holds no
    ``Action`` per file. The columns are checked as a whole (``_columns_pass``); columns that fail are
    decoded a batch at a time, which refuses them as the actions read one by one are refused."""
    try:
        # Single-threaded: pyarrow's CPU pool together with the zstandard module (which fastavro loads)
        # aborts the interpreter at exit with pyarrow 19 ("terminate called without an active exception").
        table = pq.read_table(pa.BufferReader(data), use_threads=False)
    except (pa.ArrowInvalid, OSError) as e:
        raise PlanRejected(f"{source} is not a lakesweep plan (not a readable Parquet file: {e})") from e
    header, version = _plan_header(table.schema.metadata or {}, table.schema, source)
    if as_columns and version != 1 and table.num_rows:
        columns = table.replace_schema_metadata(None)
        kinds = format_kinds(header.get("format")) if header.get("format") in FORMATS else None
        if kinds is None or not _columns_pass(columns, kinds):
            for batch in columns.to_batches(max_chunksize=_BATCH):  # raises as read_plan raises
                _decode({name: batch.column(name) for name in columns.schema.names}, header, version, source)
        actions = ColumnActions(columns, kinds or {})
    else:
        actions = _decode({name: table.column(name) for name in table.schema.names}, header, version, source)
        if version != 1:
            actions = FileActions(actions, table.replace_schema_metadata(None))
    plan = plan_from_header(header, actions, source=source)
    actual = compute_plan_id(header, actions)  # versions 2 and 3: over the file's columns, as stored
    _check_id(table.schema.metadata[ID_KEY].decode(), actual, source)
    plan.remember_id(actual)
    return plan


def iter_action_batches(location: str, batch_size: int = _BATCH, fileio: FileIO | None = None,
                        ) -> Iterator[tuple[Action, ...]]:
    """A plan file's actions, ``batch_size`` at a time, each batch checked as ``read_plan`` checks them
    (kinds, verbs, phases, numbering); the header comes from the footer. The id is hashed as the batches
    pass and a mismatch raises ``PlanRejected`` after the last one: a consumer that must not act on an
    edited plan calls ``verify_plan_file`` first (one pass, holding one batch)."""
    location = normalize_location(location)
    with _open_plan_file(location, fileio) as opened:
        plan = plan_from_header(opened[1], (), source=location)  # the header alone: refused here if malformed
        yield from _checked_batches(*opened, location, batch_size, len(plan.phases))


def _checked_batches(parquet: pq.ParquetFile, header: dict, version: int, stored_id: str, location: str,
                     batch_size: int, phases: int) -> Iterator[tuple[Action, ...]]:
    h = hashlib.sha256(header_bytes(header))
    n = 0
    for batch in parquet.iter_batches(batch_size=batch_size, use_threads=False):
        actions = _decode({name: batch.column(name) for name in batch.schema.names}, header, version, location)
        for i, a in enumerate(actions, n):
            if a.action_id != i or not 1 <= a.phase <= phases:
                raise PlanRejected(f"{location}: the plan is malformed (action {a.action_id} at row {i}, "
                                   f"in phase {a.phase}); re-run 'lakesweep plan'")
        h.update(_rows(batch, actions, version))
        n += len(actions)
        yield actions
    _check_id(stored_id, h.hexdigest()[:32], location)


def verify_plan_file(location: str, fileio: FileIO | None = None, *, batch_size: int = _BATCH) -> tuple[dict, str]:
    """Read a plan file once, a batch at a time, and check it as ``read_plan`` does; its header and id."""
    with open_plan_stream(location, fileio, batch_size=batch_size) as stream:
        stream.verify()
        return stream.header, stream.stored_id


class StreamedActions:
    """A plan file's actions without holding them: ``len`` from the file's footer, each iteration a pass
    over the file a batch at a time, checked as ``iter_action_batches`` checks (an id mismatch raises
    ``PlanRejected`` at the end of the pass). ``batches()`` gives the batches themselves."""

    def __init__(self, stream: "PlanStream"):
        self._stream = stream

    def __len__(self) -> int:
        return self._stream.n_actions

    def __bool__(self) -> bool:
        return self._stream.n_actions > 0

    def __iter__(self) -> Iterator[Action]:
        for batch in self._stream.batches():
            yield from batch


class PlanStream:
    """A plan file opened once, for reading in passes that hold one batch each (``open_plan_stream``).

    ``plan`` is the file's header as a ``CleanupPlan`` whose ``actions`` are ``StreamedActions``. The checks
    ``CleanupPlan`` makes of each action (numbering, phase) are made as each batch is read, and the plan's id
    is the stored one, checked at the end of every pass: call ``verify()`` (one pass) before showing or acting
    on anything. Every pass reads the file opened at the start. A version-1 plan (written before plans were
    streamed, and small) is read whole."""

    def __init__(self, location: str, fileio: FileIO | None, batch_size: int):
        self.location = normalize_location(location)
        self.batch_size = batch_size
        self._opened = _open_plan_file(self.location, fileio)
        self._parquet, self.header, self._version, self.stored_id = self._opened.__enter__()
        try:
            self.n_actions = self._parquet.metadata.num_rows
            self.plan = plan_from_header(self.header, (), source=self.location)
            self._phases = len(self.plan.phases)
            if self._version == 1:
                actions = tuple(a for b in self.batches() for a in b)
                self.plan = plan_from_header(self.header, actions, source=self.location)
            else:
                object.__setattr__(self.plan, "actions", StreamedActions(self))
        except BaseException:
            self.close()
            raise
        self.plan.remember_id(self.stored_id)

    def batches(self) -> Iterator[tuple[Action, ...]]:
        """One pass over the actions, ``batch_size`` at a time; ``PlanRejected`` after the last batch when the
        content does not match the stored id."""
        return _checked_batches(self._parquet, self.header, self._version, self.stored_id, self.location,
                                self.batch_size, self._phases)

    def verify(self) -> None:
        for _ in self.batches():
            pass

    def close(self) -> None:
        self._opened.__exit__(None, None, None)

    def __enter__(self) -> "PlanStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_plan_stream(location: str, fileio: FileIO | None = None, *, batch_size: int = _BATCH) -> PlanStream:
    """A plan file opened for reading in batches: its header is read and checked now (refused as
    ``read_plan`` refuses it), its actions pass by pass (``PlanStream``). Use it as a context manager."""
    return PlanStream(location, fileio, batch_size)


class _open_plan_file:
    """A plan file opened for batches: (ParquetFile, header, version, stored id); closed on exit."""

    def __init__(self, location: str, fileio: FileIO | None):
        self.location = normalize_location(location)
        self.fileio = fileio

    def __enter__(self):
        _check_regular(self.location, self.fileio)
        try:
            self.stream = (self.fileio or fileio_for(self.location)).open_input(self.location)
        except FileNotFoundError as e:
            raise PlanRejected(f"plan file {self.location} does not exist") from e
        try:
            try:
                parquet = pq.ParquetFile(self.stream)
            except (pa.ArrowInvalid, OSError) as e:
                raise PlanRejected(f"{self.location} is not a lakesweep plan (not a readable Parquet file: {e})") from e
            schema = parquet.schema_arrow
            header, version = _plan_header(schema.metadata or {}, schema, self.location)
        except BaseException:
            self.stream.close()  # __exit__ is not called when __enter__ raises
            raise
        return parquet, header, version, schema.metadata[ID_KEY].decode()

    def __exit__(self, *exc):
        self.stream.close()


def _check_regular(location: str, fileio: FileIO | None) -> None:
    """A local path must be a regular file: a FIFO would block the read and a device (``/dev/zero``) would
    never end, so both are refused before anything is opened."""
    if fileio is None and "://" not in location:
        try:
            st = os.stat(location)
        except FileNotFoundError as e:
            raise PlanRejected(f"plan file {location} does not exist") from e
        except OSError as e:
            raise PlanRejected(f"plan file {location} cannot be read: {e.strerror or e}") from e
        if not stat.S_ISREG(st.st_mode):
            raise PlanRejected(f"plan file {location} is not a regular file")


def read_plan_header(location: str, fileio: FileIO | None = None) -> CleanupPlan:
    """A plan file's header as a plan with no actions, from the file's footer alone (refused as ``read_plan``
    refuses a header). Its ``plan_id`` is the id the file states, not checked against its content: enough to
    decide what to get ready for the plan, never to act on it."""
    location = normalize_location(location)
    with _open_plan_file(location, fileio) as (_, header, _version, stored_id):
        plan = plan_from_header(header, (), source=location)
    plan.remember_id(stored_id)
    return plan


def read_plan(location: str, fileio: FileIO | None = None, *, as_columns: bool = False) -> CleanupPlan:
    """Read and verify a plan file. A local path must be a regular file: a FIFO would block the read and
    a device (``/dev/zero``) would never end, so both are refused before anything is opened.
    ``as_columns``: as ``plan_from_bytes`` says."""
    location = normalize_location(location)
    _check_regular(location, fileio)
    try:
        data = (fileio or fileio_for(location)).read_bytes(location)
    except FileNotFoundError as e:
        raise PlanRejected(f"plan file {location} does not exist") from e
    return plan_from_bytes(data, source=location, as_columns=as_columns)
