"""The in-memory twin of the journal, for tests.

Rows live in Python lists. The rules queries (``journal.rules``) run in a private in-memory DuckDB over
Arrow tables built from those rows, so both twins answer them with the very same SQL; a table is
rebuilt only when rows were written since the last query.
"""

from __future__ import annotations

import dataclasses
import json

import duckdb
import pyarrow as pa

from lakesweep.engine.errors import JournalError
from lakesweep.engine.plan import Action

from lakesweep.journal import rules
from lakesweep.journal.events import FileRecord, PlanRecorded, decode
from lakesweep.journal.recorder import Recorder, StoredEvent


class MemoryRecorder(Recorder):
    """The in-memory twin, for tests. Payloads go through JSON, as they would in a database."""

    def __init__(self):
        super().__init__()
        self._seq = 0
        self._rows: list[StoredEvent] = []
        self._plans: dict[str, tuple[Action, ...]] = {}
        self._files: list[tuple[int, FileRecord]] = []
        self._closed = False
        self._db: duckdb.DuckDBPyConnection | None = None  # opened by the first query
        self._stale = set(rules.RELATIONS)  # relations written since they were last handed to DuckDB

    def _next(self, n: int) -> list[int]:
        seqs = list(range(self._seq + 1, self._seq + n + 1))
        self._seq += n
        return seqs

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError("the in-memory journal is closed")

    def close(self) -> None:
        self._closed = True
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def _plan_ids(self):
        return list(self._plans)

    def _insert_plan(self, row, actions):
        self._append_rows([row])
        self._plans[row.stream_id] = tuple(actions)
        self._stale.add("plan_actions")

    def _load_plan(self, plan_id):
        if plan_id not in self._plans:
            return None
        row = next(r for r in self._rows if r.stream_id == plan_id and r.event_type == PlanRecorded.EVENT_TYPE)
        return decode(row.event_type, row.schema_version, row.payload), self._plans[plan_id]

    def _append_rows(self, rows):
        self._check_open()
        stored = [StoredEvent(r.event_type, r.schema_version, r.stream_id, r.apply_id,
                              json.loads(json.dumps(r.payload)), r.time_ms) for r in rows]
        seqs = self._next(len(stored))
        self._rows.extend(dataclasses.replace(r, seq=s) for r, s in zip(stored, seqs))
        self._stale.add("events")
        return seqs

    def _event_rows(self, plan_id, apply_id):
        return [r for r in self._rows if (plan_id is None or r.stream_id == plan_id)
                and (apply_id is None or r.apply_id == apply_id)]

    def _insert_files(self, records):
        seqs = self._next(len(records))
        self._files.extend(zip(seqs, records))
        self._stale.add("file_records")
        return seqs

    def _insert_file_table(self, table):
        return self._insert_files([FileRecord(**row) for row in table.to_pylist()])

    def _file_records(self, plan_id, apply_id):
        return [r for _, r in self._files if (plan_id is None or r.plan_id == plan_id)
                and (apply_id is None or r.apply_id == apply_id)]

    def _select(self, sql, params):
        if self._db is None:
            self._db = duckdb.connect(":memory:")
        for name in sorted(self._stale):
            self._db.register(name, self._relation(name))
        self._stale.clear()
        return self._db.execute(sql, list(params)).fetchall()

    def _relation(self, name: str) -> pa.Table:
        if name == "events":
            rows = [(r.seq, r.event_type, r.schema_version, r.stream_id, r.apply_id,
                     json.dumps(r.payload, sort_keys=True), r.time_ms) for r in self._rows]
        elif name == "plan_actions":
            rows = [rules.action_row(pid, a) for pid, actions in self._plans.items() for a in actions]
        else:
            rows = [rules.file_row(seq, r) for seq, r in self._files]
        return rules.arrow_table(rules.RELATIONS[name], rows)
