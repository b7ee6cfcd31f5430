"""The journal's query rules, each written once, in SQL over the journal's relations.

Both recorders answer the same questions with the same statements: ``DuckDBRecorder`` runs them on its
tables, ``MemoryRecorder`` on Arrow tables built from its rows in a private in-memory DuckDB. A rule is a
function ``rule(select, ...)``; ``select(sql, params)`` runs one query against a storage and returns its
rows as tuples. The relations are ``events``, ``plan_actions`` and ``file_records`` (``RELATIONS``); an
action's outcome is its latest record's, except that a sticky one stays (``STICKY_OUTCOMES``), and it is
done unless that is one to retry (``RETRY_OUTCOMES``). The rules: docs/design/journal-store.md#the-rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa

from lakesweep.engine.errors import JournalError
from lakesweep.engine.plan import FORMATS, Action, Verb, action_values, kind_spec
from lakesweep.engine.plan_io import SCHEMA as PLAN_SCHEMA
from lakesweep.engine.plan_io import format_kinds
from lakesweep.engine.plan_columns import ColumnActions, FileActions

from lakesweep.journal.events import FileOutcome, FileRecord, PlanRecorded
from lakesweep.journal.globs import glob_literal, glob_regex

Select = Callable[[str, Sequence[Any]], list[tuple]]
Totals = dict[FileOutcome, tuple[int, int]]

STICKY_OUTCOMES = (FileOutcome.DELETED,)  # once any apply of the plan records one, the action keeps it
RETRY_OUTCOMES = (FileOutcome.FAILED,)  # an action whose latest record has one is not done

# -- relations -------------------------------------------------------------------------------------

EVENTS_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("event_type", pa.string()), ("schema_version", pa.int32()), ("plan_id", pa.string()),
    ("apply_id", pa.string()), ("payload", pa.string()), ("recorded_ms", pa.int64()),
])
# plan_actions: the plan id, then the plan file's action columns (engine.plan.ACTION_COLUMNS).
ACTIONS_SCHEMA = pa.schema([pa.field("plan_id", pa.string(), nullable=False)] + list(PLAN_SCHEMA))
_SQL_TYPES = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.int32(): "INTEGER", pa.int8(): "TINYINT"}
PLAN_ACTIONS_DDL = ("CREATE TABLE IF NOT EXISTS plan_actions (" + ", ".join(
    f'"{f.name}" {_SQL_TYPES[f.type]}{"" if f.nullable else " NOT NULL"}' for f in ACTIONS_SCHEMA)
    + ", PRIMARY KEY (plan_id, action_id));")
FILES_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("apply_id", pa.string()), ("plan_id", pa.string()), ("action_id", pa.int32()),
    ("path", pa.string()), ("kind", pa.string()), ("phase", pa.int32()), ("bytes", pa.int64()),
    ("outcome", pa.string()), ("error", pa.string()), ("attempt", pa.int32()), ("time_ms", pa.int64()),
    ("moved_to", pa.string()),
])
RELATIONS = {"events": EVENTS_SCHEMA, "plan_actions": ACTIONS_SCHEMA, "file_records": FILES_SCHEMA}

# The columns of ``file_rows`` and of the DuckDB journal's ``file_audit`` view, with their types.
FILE_AUDIT_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("plan_id", pa.string()), ("apply_id", pa.string()), ("table", pa.string()),
    ("table_identity", pa.string()), ("action_id", pa.int32()), ("path", pa.string()), ("kind", pa.string()),
    ("phase", pa.int32()), ("snapshot_id", pa.int64()), ("outcome", pa.string()), ("error", pa.string()),
    ("attempt", pa.int32()), ("bytes", pa.int64()), ("time_ms", pa.int64()), ("moved_to", pa.string()),
])
FILE_COLUMNS = tuple(FILE_AUDIT_SCHEMA.names)


def action_row(plan_id: str, a: Action) -> tuple:
    """One ``plan_actions`` row, in ``ACTIONS_SCHEMA`` order."""
    return (plan_id, *action_values(a))


def actions_table(plan_id: str, actions: Sequence[Action]) -> pa.Table:
    """``plan_actions`` rows of ``actions`` as an Arrow table, built column by column as the plan file's
    columns are (``engine.plan_codec.action_arrays``); row by row where a value does not fit its column's
    JSON (``NotColumnar``), as before."""
    from lakesweep.engine.plan_codec import NotColumnar, action_arrays
    from lakesweep.engine.plan_columns import ColumnActions, FileActions

    try:
        if isinstance(actions, ColumnActions):  # as held: joining their chunks would copy the whole plan
            arrays = actions.stored_columns().columns
        else:  # a plan file's own columns, where they were not taken already
            arrays = actions.take_arrays() if isinstance(actions, FileActions) else None
            if arrays is None:
                arrays = action_arrays(actions)
    except NotColumnar:
        return arrow_table(ACTIONS_SCHEMA, [action_row(plan_id, a) for a in actions])
    return pa.Table.from_arrays([pa.array([plan_id] * len(actions), pa.string()), *arrays], schema=ACTIONS_SCHEMA)


def actions_of_table(event: PlanRecorded, table: pa.Table) -> FileActions:
    """The actions of a plan's ``plan_actions`` rows read as Arrow (``ACTIONS_SCHEMA``; a kind the plan's format
    defines gets its type back, and a plan recorded before plans named a format is Paimon's), with the columns
    they were built from: the plan id is checked over those columns (``compute_plan_id``) instead of a JSON
    row made from each action."""
    columns = table.drop_columns(["plan_id"]).cast(PLAN_SCHEMA)
    kinds = format_kinds(event.header.get("format", "paimon"))
    return FileActions(tuple(ColumnActions(columns, kinds)), columns)


def known_kinds() -> tuple[str, ...]:
    """Every action kind label a table format defines, in definition order (a label two formats share,
    once)."""
    return tuple(dict.fromkeys(label for fmt in FORMATS for label in format_kinds(fmt)))


def file_row(seq: int, r: FileRecord) -> tuple:
    """One ``file_records`` row, in ``FILES_SCHEMA`` order."""
    return (seq, r.apply_id, r.plan_id, r.action_id, r.path, str.__str__(r.kind), r.phase, r.bytes, r.outcome.value,
            r.error, r.attempt, r.time_ms, r.moved_to)


def arrow_table(schema: pa.Schema, rows: Sequence[tuple]) -> pa.Table:
    """Rows (tuples in schema order) as an Arrow table of that schema."""
    if not rows:
        return schema.empty_table()
    return pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(zip(*rows), schema)], schema=schema)


# -- file rows -------------------------------------------------------------------------------------

_PLAN_TABLES = f"""SELECT plan_id, payload ->> '$.table_location' AS table_location,
       payload ->> '$.table_identity' AS table_identity
FROM events WHERE event_type = '{PlanRecorded.EVENT_TYPE}'"""

_AUDIT_COLUMNS = """f.seq, f.plan_id, f.apply_id, p.table_location AS "table", p.table_identity, f.action_id, f.path,
       f.kind, f.phase, a.snapshot_id, f.outcome, f.error, f.attempt, f.bytes, f.time_ms, f.moved_to"""

# Every file record once (a plan is recorded once, each of its actions once), with its plan's table and
# its action's snapshot id.
FILE_AUDIT = f"""SELECT {_AUDIT_COLUMNS}
FROM file_records f
LEFT JOIN plan_actions a ON a.plan_id = f.plan_id AND a.action_id = f.action_id
LEFT JOIN ({_PLAN_TABLES}) p ON p.plan_id = f.plan_id"""


@dataclass(frozen=True, slots=True)
class FileQuery:
    """Filters of ``Recorder.file_rows``; all optional, combined with AND.

    ``table`` matches the table location or identity; ``path_glob`` has shell glob semantics (``fnmatch``:
    ``*`` also crosses ``/``, ``?``, ``[abc]``, ``[a-z]``, ``[!abc]``), case-sensitive. Rows come in
    sequence order; ``limit`` keeps the first ones.
    """

    plan_id: str | None = None
    apply_id: str | None = None
    table: str | None = None
    kind: str | None = None
    outcome: str | None = None
    since_ms: int | None = None
    path_glob: str | None = None
    limit: int | None = None

    def __post_init__(self):
        # Filters come from the command line: a bad one is a user error with a next step, not a crash.
        for name, known in (("kind", known_kinds()), ("outcome", tuple(o.value for o in FileOutcome))):
            value = getattr(self, name)
            if value is None:
                continue
            object.__setattr__(self, name, str(value))
            if str(value) not in known:
                raise JournalError(f"unknown {name} {str(value)!r}; use one of: {', '.join(known)}")
        if self.limit is not None and self.limit < 0:
            raise JournalError(f"limit must be >= 0, got {self.limit}")
        if self.path_glob is not None:
            try:
                glob_regex(self.path_glob)
            except ValueError as e:
                raise JournalError(str(e)) from e

    @property
    def path_regex(self) -> str | None:
        return None if self.path_glob is None else glob_regex(self.path_glob)


def file_rows(select: Select, query: FileQuery) -> list[dict[str, Any]]:
    """File records joined with their plan (table) and action (snapshot_id), as dicts keyed by
    ``FILE_COLUMNS``, filtered by ``query``, in sequence order."""
    where, params = _file_filter(query)
    limit = "" if query.limit is None else f" LIMIT {int(query.limit)}"
    # The records are chosen (and cut to the limit) before anything is joined to them, and only their own
    # actions are read: joined the other way round, a journal of ten million records hashed every action
    # it holds (1.3 s and 1.7 GB) to list the eleven records a path matched.
    return [dict(zip(FILE_COLUMNS, r)) for r in select(f"""
        WITH f AS MATERIALIZED (SELECT * FROM file_records{where} ORDER BY seq{limit}),
        a AS (SELECT plan_id, action_id, snapshot_id FROM plan_actions
              WHERE (plan_id, action_id) IN (SELECT plan_id, action_id FROM f))
        SELECT {_AUDIT_COLUMNS}
        FROM f LEFT JOIN a ON a.plan_id = f.plan_id AND a.action_id = f.action_id
        LEFT JOIN ({_PLAN_TABLES}) p ON p.plan_id = f.plan_id
        ORDER BY f.seq""", params)]


def file_count(select: Select, query: FileQuery) -> int:
    """How many file records ``query``'s filters select, its limit aside."""
    where, params = _file_filter(query)
    return int(select("SELECT count(*) FROM file_records" + where, params)[0][0])


def _file_filter(query: FileQuery) -> tuple[str, list]:
    """The WHERE clause over ``file_records`` (with its leading space, or empty) and the parameters of
    ``query``'s filters. The joins of ``FILE_AUDIT`` keep every record once, so its filters are the
    records' own; ``table`` picks the plans recorded for that table."""
    clauses, params = [], []
    for column, value in (("plan_id", query.plan_id), ("apply_id", query.apply_id), ("kind", query.kind),
                          ("outcome", query.outcome)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if query.table is not None:
        clauses.append(f"plan_id IN (SELECT plan_id FROM ({_PLAN_TABLES}) WHERE table_location = ? "
                       f"OR table_identity = ?)")
        params += [query.table, query.table]
    if query.since_ms is not None:
        clauses.append("time_ms >= ?")
        params.append(query.since_ms)
    if query.path_glob is not None:
        literal = glob_literal(query.path_glob)
        if literal:  # a substring search skips most rows before the regex reads them
            clauses.append("contains(path, ?)")
            params.append(literal)
        clauses.append("regexp_full_match(path, ?)")
        params.append(query.path_regex)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


# -- outcomes of actions ---------------------------------------------------------------------------

def _outcome_list(outcomes: Iterable[FileOutcome]) -> str:
    return "(" + ", ".join(f"'{FileOutcome(o).value}'" for o in outcomes) + ")"


_LATEST = "seq DESC"
_STICKY_THEN_LATEST = f"(outcome IN {_outcome_list(STICKY_OUTCOMES)}) DESC, seq DESC"
_EXCLUDED = "NOT list_contains(?::VARCHAR[], apply_id)"


def _deciding_records(where: str, order: str, *, across_plans: bool = False) -> str:
    """Per action, the one record among the file records ``where`` selects that decides the
    action's outcome: the first by ``order``. Actions are told apart by id alone unless ``across_plans``
    (ranking by plan and action costs a fifth more, so a query within one plan or apply does without)."""
    by = "plan_id, action_id" if across_plans else "action_id"
    return f"""SELECT plan_id, action_id, outcome, bytes FROM (
                   SELECT plan_id, action_id, outcome, bytes,
                          row_number() OVER (PARTITION BY {by} ORDER BY {order}) AS rn
                   FROM file_records WHERE {where})
               WHERE rn = 1"""


def _totals(rows: Iterable[tuple]) -> Totals:
    totals = {o: (0, 0) for o in FileOutcome}
    totals.update({FileOutcome(o): (int(n), int(b)) for o, n, b in rows})
    return totals


def done_actions(select: Select, plan_id: str, *, exclude_applies: Iterable[str] = ()) -> frozenset[int]:
    """Ids of the plan's actions whose latest record, over every apply of the plan but
    ``exclude_applies``, is not in ``RETRY_OUTCOMES``; actions without a record are not done."""
    rows = select(f"SELECT action_id FROM ({_deciding_records(f'plan_id = ? AND {_EXCLUDED}', _LATEST)}) "
                  f"WHERE outcome NOT IN {_outcome_list(RETRY_OUTCOMES)}", [plan_id, sorted(exclude_applies)])
    return frozenset(r[0] for r in rows)


def apply_totals(select: Select, apply_id: str) -> Totals:
    """(count, bytes) per outcome over the apply's actions, by each action's latest record in that apply;
    every outcome present."""
    rows = select(f"SELECT outcome, count(*), coalesce(sum(bytes), 0) "
                  f"FROM ({_deciding_records('apply_id = ?', _LATEST)}) GROUP BY outcome", [apply_id])
    return _totals(rows)


def deleted_without_size(select: Select, apply_id: str) -> frozenset[int]:
    """Ids of the apply's actions DELETED (by each action's latest record in that apply) whose record has
    no size: ``apply_totals``' bytes leave them out."""
    rows = select(f"SELECT action_id FROM ({_deciding_records('apply_id = ?', _LATEST)}) "
                  f"WHERE outcome = '{FileOutcome.DELETED.value}' AND bytes IS NULL", [apply_id])
    return frozenset(int(r[0]) for r in rows)


def unknown_sized_deletions(select: Select) -> dict[str, int]:
    """Per plan, how many files some apply DELETED whose record has no size (directories aside): the
    bytes of ``outcome_totals`` leave them out. A DELETED record decides its action's outcome whatever
    came later (``STICKY_OUTCOMES``), so each such action counts once."""
    dirs = sorted({label for fmt in FORMATS for label, kind in format_kinds(fmt).items()
                   if kind_spec(kind).verb is Verb.DELETE_EMPTY_DIR})
    rows = select(f"SELECT plan_id, count(DISTINCT action_id) FROM file_records "
                  f"WHERE outcome = '{FileOutcome.DELETED.value}' AND bytes IS NULL "
                  f"AND NOT list_contains(?::VARCHAR[], kind) GROUP BY plan_id", [dirs])
    return {plan_id: int(n) for plan_id, n in rows}


def outcome_totals(select: Select, plan_id: str, *, exclude_applies: Iterable[str] = ()) -> Totals:
    """(count, bytes) per outcome, one outcome per action of the plan, every outcome present (zero when
    none). An outcome in ``STICKY_OUTCOMES`` by any apply but ``exclude_applies`` stays; otherwise the
    action's latest record counts."""
    deciding = _deciding_records(f"plan_id = ? AND {_EXCLUDED}", _STICKY_THEN_LATEST)
    return _totals(select(f"SELECT outcome, count(*), coalesce(sum(bytes), 0) FROM ({deciding}) GROUP BY outcome",
                          [plan_id, sorted(exclude_applies)]))


def all_outcome_totals(select: Select, *, exclude_applies: Iterable[str] = ()) -> dict[str, Totals]:
    """``outcome_totals`` of every plan with file records outside ``exclude_applies``, by plan id."""
    # Most plans record each action once: their totals are a plain GROUP BY. The plans where some
    # action has several records (a resumed or repeated apply) are found exactly with one bitmap of
    # action ids per 65,536, and only those go through the per-action ranking of outcome_totals. Each
    # part reads file_records itself: one set of the records kept, shared by the three, is materialized
    # whole (twice the time over ten million records).
    deciding = _deciding_records(f"plan_id IN (SELECT plan_id FROM repeated) AND {_EXCLUDED}", _STICKY_THEN_LATEST,
                                 across_plans=True)
    excluded = sorted(exclude_applies)
    rows = select(
        f"""WITH repeated AS (SELECT DISTINCT plan_id FROM (
                SELECT plan_id, count(*) AS n, bit_count(bitstring_agg(action_id % 65536, 0, 65535)) AS ids
                FROM file_records WHERE {_EXCLUDED} GROUP BY plan_id, action_id // 65536) WHERE n <> ids)
            SELECT plan_id, outcome, count(*), coalesce(sum(bytes), 0) FROM file_records
            WHERE {_EXCLUDED} AND plan_id NOT IN (SELECT plan_id FROM repeated) GROUP BY plan_id, outcome
            UNION ALL
            SELECT plan_id, outcome, count(*), coalesce(sum(bytes), 0) FROM ({deciding}) GROUP BY plan_id, outcome""",
        [excluded, excluded, excluded])
    by_plan: dict[str, list[tuple]] = {}
    for pid, outcome, n, b in rows:
        by_plan.setdefault(pid, []).append((outcome, n, b))
    return {pid: _totals(r) for pid, r in by_plan.items()}


# -- maintenance history ---------------------------------------------------------------------------

# One row per operation run, as a dashboard reads it (the shape of Databricks' predictive-optimization
# operations history): every apply (by its ApplyStarted, or its ApplyRefused when it never started), and
# every ``maintain`` result that applied nothing (skipped, planned by a dry run, failed before applying).
# A maintain result that applied a plan is joined to that apply's row (``maintain_run_id``, ``message``).
# ``metrics`` maps names to numbers; ``plan_id`` and ``apply_id`` drill down to ``file_audit``.
#
# status: COMPLETED, FAILED, REFUSED, INCOMPLETE (started, no end: running, or killed and not yet resumed;
# a resume goes on under the same apply id), or a maintain outcome in capitals (SKIPPED, PLANNED, FAILED).
HISTORY_COLUMNS = ("run_id", "source", "operation", "table", "table_location", "table_identity", "status",
                   "start_ms", "end_ms", "metrics", "message", "plan_id", "apply_id", "maintain_run_id",
                   "previous_apply_id")

MAINTENANCE_HISTORY = """WITH
plans AS (SELECT plan_id, payload ->> '$.table_location' AS table_location,
                 payload ->> '$.table_identity' AS table_identity, payload ->> '$.plan_kind' AS kind,
                 coalesce(payload ->> '$.header.format', 'paimon') AS fmt
          FROM events WHERE event_type = 'PlanRecorded'),
starts AS (SELECT apply_id, plan_id, seq, CAST(payload ->> '$.started_ms' AS BIGINT) AS start_ms,
                  CAST(payload ->> '$.n_actions' AS BIGINT) AS n_actions,
                  CAST(payload ->> '$.bytes' AS BIGINT) AS planned_bytes
           FROM events WHERE event_type = 'ApplyStarted'),
ends AS (SELECT apply_id, event_type, reason, bytes_reclaimed, end_ms FROM (
             SELECT apply_id, event_type, payload ->> '$.reason' AS reason,
                    CAST(payload ->> '$.bytes_reclaimed' AS BIGINT) AS bytes_reclaimed,
                    CAST(coalesce(payload ->> '$.finished_ms', payload ->> '$.refused_ms') AS BIGINT) AS end_ms,
                    row_number() OVER (PARTITION BY apply_id ORDER BY seq) AS rn
             FROM events WHERE event_type IN ('ApplyCompleted', 'ApplyFailed', 'ApplyRefused')
                           AND apply_id IS NOT NULL) WHERE rn = 1),
files AS (SELECT apply_id, sum(n) AS records, count(*) AS actions_recorded,
                 count(*) FILTER (WHERE outcome = 'DELETED') AS deleted,
                 coalesce(sum(bytes) FILTER (WHERE outcome = 'DELETED'), 0) AS deleted_bytes,
                 count(*) FILTER (WHERE outcome = 'FAILED') AS failed
          FROM (SELECT apply_id, action_id, arg_max(outcome, seq) AS outcome, arg_max(bytes, seq) AS bytes,
                       count(*) AS n
                FROM file_records GROUP BY apply_id, action_id)
          GROUP BY apply_id),
maint AS (SELECT payload ->> '$.run_id' AS run_id, payload ->> '$.applied_by' AS applied_by,
                 payload ->> '$.table' AS tbl, payload ->> '$.operation' AS operation,
                 payload ->> '$.outcome' AS outcome, payload ->> '$.message' AS message,
                 payload ->> '$.plan_id' AS plan_id, seq,
                 CAST(payload ->> '$.recorded_ms' AS BIGINT) AS at_ms, CAST(payload ->> '$.cycle' AS BIGINT) AS cycle
          FROM events WHERE event_type = 'MaintenanceResult'),
applies AS (
    SELECT s.apply_id AS run_id, 'apply' AS source, coalesce(m.operation, p.kind) AS operation,
           coalesce(m.tbl, p.table_location) AS "table", p.table_location, p.table_identity,
           CASE e.event_type WHEN 'ApplyCompleted' THEN 'COMPLETED' WHEN 'ApplyFailed' THEN 'FAILED'
                WHEN 'ApplyRefused' THEN 'REFUSED' ELSE 'INCOMPLETE' END AS status,
           s.start_ms, e.end_ms,
           MAP {'actions': s.n_actions, 'planned_bytes': s.planned_bytes,
                'bytes_reclaimed': coalesce(e.bytes_reclaimed, f.deleted_bytes, 0),
                'files_deleted': coalesce(f.deleted, 0), 'files_failed': coalesce(f.failed, 0),
                'file_records': coalesce(f.records, 0),
                'actions_recorded_twice': coalesce(f.records - f.actions_recorded, 0),
                'duration_ms': e.end_ms - s.start_ms} AS metrics,
           coalesce(e.reason, m.message) AS message, s.plan_id, s.apply_id, m.run_id AS maintain_run_id,
           lag(s.apply_id) OVER (PARTITION BY s.plan_id ORDER BY s.seq) AS previous_apply_id, s.seq
    FROM starts s
    LEFT JOIN ends e ON e.apply_id = s.apply_id
    LEFT JOIN files f ON f.apply_id = s.apply_id
    LEFT JOIN plans p ON p.plan_id = s.plan_id
    LEFT JOIN (SELECT * FROM maint WHERE applied_by IS NOT NULL
               QUALIFY row_number() OVER (PARTITION BY applied_by ORDER BY seq) = 1) m ON m.applied_by = s.apply_id),
refusals AS (
    SELECT 'refused:' || CAST(r.seq AS VARCHAR) AS run_id, 'apply' AS source, p.kind AS operation,
           p.table_location AS "table", p.table_location, p.table_identity, 'REFUSED' AS status,
           CAST(r.payload ->> '$.refused_ms' AS BIGINT) AS start_ms, CAST(r.payload ->> '$.refused_ms' AS BIGINT) AS end_ms,
           CAST(MAP {} AS MAP(VARCHAR, BIGINT)) AS metrics, r.payload ->> '$.reason' AS message, r.plan_id,
           NULL AS apply_id, NULL AS maintain_run_id, NULL AS previous_apply_id, r.seq
    FROM events r LEFT JOIN plans p ON p.plan_id = r.plan_id
    WHERE r.event_type = 'ApplyRefused' AND r.apply_id IS NULL),
maintained AS (
    SELECT 'maintain:' || m.run_id || ':' || CAST(m.seq AS VARCHAR) AS run_id, 'maintain' AS source, m.operation,
           m.tbl AS "table", p.table_location, p.table_identity, upper(m.outcome) AS status, m.at_ms AS start_ms,
           m.at_ms AS end_ms, MAP {'cycle': m.cycle} AS metrics, m.message,
           CASE WHEN p.plan_id IS NULL THEN NULL ELSE m.plan_id END AS plan_id, NULL AS apply_id,
           m.run_id AS maintain_run_id, NULL AS previous_apply_id, m.seq
    FROM maint m LEFT JOIN plans p ON p.plan_id = m.plan_id
    WHERE m.applied_by IS NULL)
SELECT run_id, source, operation, "table", table_location, table_identity, status, start_ms, end_ms, metrics,
       message, plan_id, apply_id, maintain_run_id, previous_apply_id
FROM (SELECT * FROM applies UNION ALL BY NAME SELECT * FROM refusals UNION ALL BY NAME SELECT * FROM maintained)
ORDER BY start_ms, seq"""


def history_rows(select: Select, *, since_ms: int | None = None, table: str | None = None) -> list[dict[str, Any]]:
    """``maintenance_history`` rows as dicts keyed by ``HISTORY_COLUMNS``, oldest first: those that started at
    or after ``since_ms`` (or ended then: an apply still running counts by its start), of ``table`` (its
    name as maintain gives it, its location or its identity)."""
    clauses, params = [], []
    if since_ms is not None:
        clauses.append("(start_ms >= ? OR end_ms >= ?)")
        params += [since_ms, since_ms]
    if table is not None:
        clauses.append('("table" = ? OR table_location = ? OR table_identity = ?)')
        params += [table, table, table]
    sql = f"SELECT * FROM ({MAINTENANCE_HISTORY}) AS maintenance_history"
    sql += " WHERE " + " AND ".join(clauses) if clauses else ""
    return [dict(zip(HISTORY_COLUMNS, r)) for r in select(sql, params)]
