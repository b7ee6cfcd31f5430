"""The journal in a DuckDB file.

DuckDB lets one process open a database file for writing; a second one gets an IOException
"Could not set lock on file ... Conflicting lock is held in <exe> (PID n)" straight away (no waiting).
We turn that into a ``JournalConflict`` naming the file and the pid. Inside one process DuckDB would
share the database between connections, so a second recorder on the same file is refused here too.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from pathlib import Path
from typing import Any, Sequence

import duckdb
import pyarrow as pa

from engine.errors import JournalConflict, JournalError
from engine.plan import ACTION_COLUMNS, ACTION_FIELDS, action_values
from engine.plan_io import SCHEMA as PLAN_SCHEMA

from journal.events import FileOutcome, FileRecord, PlanRecorded, decode
from journal.globs import glob_literal
from journal.recorder import FILE_COLUMNS, FileQuery, Recorder, StoredEvent, stored_actions

SCHEMA_VERSION = 2  # 2: plan_actions has every action column (verb added)
MEMORY = ":memory:"
_SMALL_BATCH = 64  # rows; larger batches go through Arrow

# plan_actions: the plan id and one column per action field, typed as the plan file types them.
_SQL_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int32": "INTEGER", "int8": "TINYINT"}
_PLAN_ACTIONS = ("CREATE TABLE IF NOT EXISTS plan_actions (plan_id VARCHAR NOT NULL, " + ", ".join(
    f'"{name}" {_SQL_TYPES[t]}{"" if nullable else " NOT NULL"}' for name, t, nullable in ACTION_COLUMNS)
    + ", PRIMARY KEY (plan_id, action_id));")
_ACTION_SELECT = ", ".join(f'"{name}"' for name in ACTION_FIELDS)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq BIGINT PRIMARY KEY, event_type VARCHAR NOT NULL, schema_version INTEGER NOT NULL,
    plan_id VARCHAR NOT NULL, apply_id VARCHAR, payload JSON NOT NULL, recorded_ms BIGINT NOT NULL);
{plan_actions}
CREATE TABLE IF NOT EXISTS file_records (
    seq BIGINT PRIMARY KEY, apply_id VARCHAR NOT NULL, plan_id VARCHAR NOT NULL, action_id INTEGER NOT NULL,
    path VARCHAR NOT NULL, kind VARCHAR NOT NULL, phase INTEGER NOT NULL, bytes BIGINT, outcome VARCHAR NOT NULL,
    error VARCHAR, attempt INTEGER NOT NULL, time_ms BIGINT NOT NULL);
CREATE OR REPLACE VIEW file_audit AS
SELECT f.seq, f.plan_id, f.apply_id, p.table_location AS "table", p.table_identity, f.action_id, f.path, f.kind,
       f.phase, a.snapshot_id, f.outcome, f.error, f.attempt, f.bytes, f.time_ms
FROM file_records f
LEFT JOIN plan_actions a ON a.plan_id = f.plan_id AND a.action_id = f.action_id
LEFT JOIN (SELECT plan_id, payload ->> '$.table_location' AS table_location,
                  payload ->> '$.table_identity' AS table_identity
           FROM events WHERE event_type = 'PlanRecorded') p ON p.plan_id = f.plan_id;
""".replace("{plan_actions}", _PLAN_ACTIONS)

# Journals of schema 1 stored snapshot expiry's actions without their verb; each kind had one.
_V1_VERBS = """
ALTER TABLE plan_actions ADD COLUMN IF NOT EXISTS verb VARCHAR;
UPDATE plan_actions SET verb = CASE kind WHEN 'empty-dir' THEN 'delete-empty-dir'
    WHEN 'write-changelog' THEN 'write-file' WHEN 'write-earliest-hint' THEN 'write-file' ELSE 'delete-file' END
WHERE verb IS NULL;
"""

_ACTIONS_SCHEMA = pa.schema([("plan_id", pa.string())] + [(f.name, f.type) for f in PLAN_SCHEMA])
_FILES_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("apply_id", pa.string()), ("plan_id", pa.string()), ("action_id", pa.int32()),
    ("path", pa.string()), ("kind", pa.string()), ("phase", pa.int32()), ("bytes", pa.int64()),
    ("outcome", pa.string()), ("error", pa.string()), ("attempt", pa.int32()), ("time_ms", pa.int64()),
])
# The column types of the file_audit view, for exports that do not come from DuckDB.
FILE_AUDIT_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("plan_id", pa.string()), ("apply_id", pa.string()), ("table", pa.string()),
    ("table_identity", pa.string()), ("action_id", pa.int32()), ("path", pa.string()), ("kind", pa.string()),
    ("phase", pa.int32()), ("snapshot_id", pa.int64()), ("outcome", pa.string()), ("error", pa.string()),
    ("attempt", pa.int32()), ("bytes", pa.int64()), ("time_ms", pa.int64()),
])
assert tuple(FILE_AUDIT_SCHEMA.names) == FILE_COLUMNS

# DuckDB shares one database between the connections of a process, so its file lock cannot stop a
# second recorder here; this registry does. Weak, so a recorder dropped without close() frees its file.
_OPEN_IN_THIS_PROCESS: "weakref.WeakValueDictionary[str, DuckDBRecorder]" = weakref.WeakValueDictionary()


def default_journal_path() -> Path:
    """``$LAKESWEEP_JOURNAL``, else ``$XDG_DATA_HOME/lakesweep/journal.duckdb`` (XDG default ~/.local/share)."""
    explicit = os.environ.get("LAKESWEEP_JOURNAL")
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME")
    if not data_home or not os.path.isabs(data_home):  # the XDG spec says: ignore empty or relative values
        data_home = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data_home) / "lakesweep" / "journal.duckdb"


def connect_journal(path: str, *, read_only: bool, config: dict | None = None) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB journal file, turning "another process holds it" into ``JournalConflict``.

    A path that exists but is not a regular file (a directory, a FIFO, a device) is refused before DuckDB
    opens it: opening a FIFO would block forever."""
    if path != MEMORY and os.path.lexists(path) and not os.path.isfile(path):
        raise JournalError(f"journal {path} is not a regular file")
    try:
        return duckdb.connect(path, read_only=read_only, config=config or {})
    except duckdb.IOException as e:
        if "Could not set lock" in str(e):
            m = re.search(r"PID (\d+)", str(e))
            raise JournalConflict(
                f"journal {path} is in use by another lakesweep process (pid {m.group(1) if m else '?'}); "
                f"wait for it to finish, or point --journal / $LAKESWEEP_JOURNAL at another file"
            ) from e
        raise JournalError(f"cannot open journal {path}: {e}") from e
    except duckdb.ConnectionException as e:
        raise JournalConflict(f"journal {path} is already open in this process; close that recorder first") from e
    except duckdb.Error as e:
        raise JournalError(f"cannot open journal {path}: {e}") from e


class DuckDBRecorder(Recorder):
    """The journal in a DuckDB file (``":memory:"`` for a throw-away one). Creates the parent directory."""

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self.path = str(path)
        self._key = None
        if self.path != MEMORY:
            _make_parent(self.path, "journal")
            key = os.path.realpath(self.path)
            other = _OPEN_IN_THIS_PROCESS.get(key)
            if other is not None and other._con is not None:
                raise JournalConflict(f"journal {self.path} is already open in this process; close that recorder first")
            self._key = key
        self._con = connect_journal(self.path, read_only=False)
        if self._key is not None:
            _OPEN_IN_THIS_PROCESS[self._key] = self
        try:
            self._init_schema()
            self._seq = self._con.execute(
                "SELECT greatest((SELECT coalesce(max(seq), 0) FROM events), "
                "(SELECT coalesce(max(seq), 0) FROM file_records))").fetchone()[0]
        except BaseException:
            self.close()
            raise

    def _init_schema(self) -> None:
        has_meta = self._con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'meta'").fetchone()[0]
        row = None
        if has_meta:
            row = self._con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is not None and not re.fullmatch(r"[0-9]+", str(row[0])):
                raise JournalError(f"journal {self.path} has schema version {row[0]!r}, which is not a number: "
                                   "the file is not a lakesweep journal, or it was damaged")
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise JournalError(f"journal {self.path} has schema version {row[0]}, newer than this lakesweep "
                                   f"understands ({SCHEMA_VERSION}); upgrade lakesweep")
        with self._transaction("create the journal tables"):
            self._con.execute(_SCHEMA)
            if has_meta and row is not None and int(row[0]) < 2:
                self._con.execute(_V1_VERBS)
                self._con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
            self._con.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
                              [str(SCHEMA_VERSION)])

    def _transaction(self, what: str):
        return _Transaction(self, what)

    def _check_open(self) -> None:
        if self._con is None:
            raise JournalError(f"journal {self.path} is closed")

    def close(self) -> None:
        con, self._con = getattr(self, "_con", None), None
        if con is not None:
            con.close()
        if self._key is not None:
            if _OPEN_IN_THIS_PROCESS.get(self._key) is self:
                del _OPEN_IN_THIS_PROCESS[self._key]
            self._key = None

    def _next(self, n: int) -> list[int]:
        # The recorder is the only writer (file lock + the in-process registry), so a counter is enough.
        return list(range(self._seq + 1, self._seq + n + 1))

    # -- plans -------------------------------------------------------------------------------------

    def plan_ids(self) -> list[str]:
        self._check_open()
        return [r[0] for r in self._con.execute(
            "SELECT plan_id FROM events WHERE event_type = 'PlanRecorded' ORDER BY seq").fetchall()]

    def _insert_plan(self, row, actions):
        plan_id = row.plan_id
        rows = [(plan_id, *action_values(a)) for a in actions]
        with self._transaction(f"record plan {row.plan_id}"):
            seqs = self._insert_events([row])
            self._insert_rows("plan_actions", _ACTIONS_SCHEMA, rows)
        self._seq = seqs[-1]

    def _load_plan(self, plan_id):
        self._check_open()
        row = self._con.execute(
            "SELECT event_type, schema_version, payload FROM events WHERE plan_id = ? AND event_type = 'PlanRecorded' "
            "ORDER BY seq LIMIT 1", [plan_id]).fetchone()
        if row is None:
            return None
        event = decode(row[0], row[1], json.loads(row[2]))
        assert isinstance(event, PlanRecorded)
        rows = self._con.execute(f"SELECT {_ACTION_SELECT} FROM plan_actions WHERE plan_id = ? ORDER BY action_id",
                                 [plan_id]).fetchall()
        return event, stored_actions(event, rows)

    # -- events ------------------------------------------------------------------------------------

    def _insert_events(self, rows: Sequence[StoredEvent]) -> list[int]:
        seqs = self._next(len(rows))
        self._con.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            [[s, r.event_type, r.schema_version, r.plan_id, r.apply_id, json.dumps(r.payload, sort_keys=True),
              r.time_ms] for s, r in zip(seqs, rows)])
        return seqs

    def _append_rows(self, rows):
        self._check_open()
        with self._transaction(f"append {len(rows)} events"):
            seqs = self._insert_events(rows)
        self._seq = seqs[-1]
        return seqs

    def _event_rows(self, plan_id, apply_id):
        where, params = _where(plan_id=plan_id, apply_id=apply_id)
        rows = self._con.execute(
            "SELECT event_type, schema_version, plan_id, apply_id, payload, recorded_ms, seq FROM events"
            f"{where} ORDER BY seq", params).fetchall()
        return [StoredEvent(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows]

    # -- file records ------------------------------------------------------------------------------

    def _insert_files(self, records):
        seqs = self._next(len(records))
        rows = [(s, r.apply_id, r.plan_id, r.action_id, r.path, str.__str__(r.kind), r.phase, r.bytes, r.outcome.value,
                 r.error, r.attempt, r.time_ms) for s, r in zip(seqs, records)]
        with self._transaction(f"record {len(records)} file outcomes"):
            self._insert_rows("file_records", _FILES_SCHEMA, rows)
        self._seq = seqs[-1]
        return seqs

    def _insert_rows(self, table_name: str, schema: pa.Schema, rows: list[tuple]) -> None:
        """Rows in ``schema``'s column order, named (a journal created by an older release may order its
        columns otherwise)."""
        if not rows:
            return
        columns = ", ".join(f'"{name}"' for name in schema.names)
        if len(rows) <= _SMALL_BATCH:  # one multi-row VALUES statement: cheapest for the driver's small batches
            values = ", ".join(["(" + ", ".join("?" * len(schema)) + ")"] * len(rows))
            self._con.execute(f"INSERT INTO {table_name} ({columns}) VALUES {values}", [v for r in rows for v in r])
            return
        table = pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(zip(*rows), schema)], schema=schema)
        self._con.register("_lakesweep_batch", table)
        try:
            self._con.execute(f"INSERT INTO {table_name} ({columns}) SELECT {columns} FROM _lakesweep_batch")
        finally:
            self._con.unregister("_lakesweep_batch")

    def file_records(self, *, plan_id=None, apply_id=None):
        self._check_open()
        where, params = _where(plan_id=plan_id, apply_id=apply_id)
        rows = self._con.execute(
            "SELECT apply_id, plan_id, action_id, path, kind, phase, bytes, outcome, error, attempt, time_ms "
            f"FROM file_records{where} ORDER BY seq", params).fetchall()
        return [FileRecord(*r) for r in rows]

    def file_rows(self, query: FileQuery) -> list[dict[str, Any]]:
        self._check_open()
        clauses, params = [], []
        for column, value in (("plan_id", query.plan_id), ("apply_id", query.apply_id), ("kind", query.kind),
                              ("outcome", query.outcome)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if query.table is not None:
            clauses.append('("table" = ? OR table_identity = ?)')
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
        sql = "SELECT * FROM file_audit" + (" WHERE " + " AND ".join(clauses) if clauses else "") + " ORDER BY seq"
        if query.limit is not None:
            sql += f" LIMIT {int(query.limit)}"
        cursor = self._con.execute(sql, params)
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, r)) for r in cursor.fetchall()]

    def done_actions(self, plan_id, *, exclude_applies=()):
        self._check_open()
        rows = self._con.execute(
            """SELECT action_id FROM (
                   SELECT action_id, outcome, row_number() OVER (PARTITION BY action_id ORDER BY seq DESC) AS rn
                   FROM file_records WHERE plan_id = ? AND NOT list_contains(?::VARCHAR[], apply_id))
               WHERE rn = 1 AND outcome <> 'FAILED'""", [plan_id, sorted(exclude_applies)]).fetchall()
        return frozenset(r[0] for r in rows)

    def apply_totals(self, apply_id):
        self._check_open()
        rows = self._con.execute(
            """SELECT outcome, count(*), coalesce(sum(bytes), 0) FROM (
                   SELECT outcome, bytes, row_number() OVER (PARTITION BY action_id ORDER BY seq DESC) AS rn
                   FROM file_records WHERE apply_id = ?)
               WHERE rn = 1 GROUP BY outcome""", [apply_id]).fetchall()
        totals = {o: (0, 0) for o in FileOutcome}
        totals.update({FileOutcome(o): (int(n), int(b)) for o, n, b in rows})
        return totals

    def outcome_totals(self, plan_id, *, exclude_applies=()):
        self._check_open()
        rows = self._con.execute(
            """SELECT outcome, count(*), coalesce(sum(bytes), 0) FROM (
                   SELECT outcome, bytes, row_number() OVER (PARTITION BY action_id
                                            ORDER BY (outcome = 'DELETED') DESC, seq DESC) AS rn
                   FROM file_records WHERE plan_id = ? AND NOT list_contains(?::VARCHAR[], apply_id))
               WHERE rn = 1 GROUP BY outcome""", [plan_id, sorted(exclude_applies)]).fetchall()
        totals = {o: (0, 0) for o in FileOutcome}
        totals.update({FileOutcome(o): (int(n), int(b)) for o, n, b in rows})
        return totals

    def all_outcome_totals(self, *, exclude_applies=()):
        self._check_open()
        # Most plans record each action once: their totals are a plain GROUP BY. The plans where some
        # action has several records (a resumed or repeated apply) are found exactly with one bitmap of
        # action ids per 65,536, and only those go through the per-action ranking of outcome_totals.
        rows = self._con.execute(
            """WITH kept AS (SELECT plan_id, action_id, outcome, bytes, seq FROM file_records
                             WHERE NOT list_contains(?::VARCHAR[], apply_id)),
               repeated AS (SELECT DISTINCT plan_id FROM (
                   SELECT plan_id, count(*) AS n, bit_count(bitstring_agg(action_id % 65536, 0, 65535)) AS ids
                   FROM kept GROUP BY plan_id, action_id // 65536) WHERE n <> ids)
               SELECT plan_id, outcome, count(*), coalesce(sum(bytes), 0) FROM kept
               WHERE plan_id NOT IN (SELECT plan_id FROM repeated) GROUP BY plan_id, outcome
               UNION ALL
               SELECT plan_id, outcome, count(*), coalesce(sum(bytes), 0) FROM (
                   SELECT plan_id, outcome, bytes, row_number() OVER (PARTITION BY plan_id, action_id
                                            ORDER BY (outcome = 'DELETED') DESC, seq DESC) AS rn
                   FROM kept WHERE plan_id IN (SELECT plan_id FROM repeated))
               WHERE rn = 1 GROUP BY plan_id, outcome""", [sorted(exclude_applies)]).fetchall()
        out: dict[str, dict[FileOutcome, tuple[int, int]]] = {}
        for plan_id, outcome, n, b in rows:
            totals = out.setdefault(plan_id, {o: (0, 0) for o in FileOutcome})
            totals[FileOutcome(outcome)] = (int(n), int(b))
        return out

    def export_file_audit(self, out_path: str | os.PathLike) -> int:
        """Write the ``file_audit`` view (every file record, joined) as Parquet; returns the row count."""
        self._check_open()
        return copy_to_parquet(self._con, "SELECT * FROM file_audit ORDER BY seq", out_path)


def _make_parent(path: str | os.PathLike, what: str) -> None:
    """Create the directory ``path`` goes in; ``JournalError`` naming what is in the way otherwise."""
    parent = Path(path).parent
    in_the_way = next((p for p in (parent, *parent.parents) if p.exists() and not p.is_dir()), None)
    if in_the_way is not None:
        raise JournalError(f"cannot create the {what} {path}: {in_the_way} is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise JournalError(f"cannot create the directory of the {what} {path}: {e.strerror or e}") from e


def copy_to_parquet(con: duckdb.DuckDBPyConnection, select: str, out_path: str | os.PathLike) -> int:
    """Write a query's rows to a Parquet file; returns the row count. Failures raise ``JournalError``."""
    out = Path(out_path)
    if os.path.lexists(out) and not out.is_file():
        raise JournalError(f"cannot write the export {out}: it exists and is not a regular file")
    _make_parent(out, "export")
    literal = str(out).replace("'", "''")
    try:
        return con.execute(f"COPY ({select}) TO '{literal}' (FORMAT PARQUET)").fetchone()[0]  # COPY returns its count
    except duckdb.Error as e:
        raise JournalError(f"cannot write the export {out}: {e}") from e


def _where(**filters) -> tuple[str, list]:
    given = [(k, v) for k, v in filters.items() if v is not None]
    if not given:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k, _ in given), [v for _, v in given]


class _Transaction:
    """One DuckDB transaction: commit on success, roll back and raise ``JournalError`` on a database error."""

    def __init__(self, recorder: DuckDBRecorder, what: str):
        self.recorder, self.what = recorder, what

    def __enter__(self):
        self.recorder._check_open()
        try:
            self.recorder._con.begin()
        except duckdb.Error as e:
            raise self._error(e) from e
        return self

    def __exit__(self, exc_type, exc, tb):
        con = self.recorder._con
        if exc_type is None:
            try:
                con.commit()
                return False
            except duckdb.Error as e:
                self._rollback(con)
                raise self._error(e) from e
        self._rollback(con)
        if isinstance(exc, duckdb.Error):
            raise self._error(exc) from exc
        return False

    def _error(self, e: duckdb.Error) -> JournalError:
        return JournalError(f"journal {self.recorder.path}: could not {self.what}: {e}")

    @staticmethod
    def _rollback(con) -> None:
        # After an I/O failure DuckDB may have invalidated the database, and the rollback fails too. The
        # first error is the one to report; nothing was committed either way.
        try:
            con.rollback()
        except duckdb.Error:
            pass
