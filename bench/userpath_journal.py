"""The journal part of bench_user_path.py: append rate through the recorder API, and a cached journal of
millions of file records for the audit commands.

The large journal starts from a real one: the journal a timed ``lakesweep apply`` wrote (one plan, one
apply). It is cloned inside DuckDB, in the schema ``journal.duckdb_store`` created, until it holds the
number of file records asked for: clone *k* is the same apply of the same plan on another table
(``/lake/<size>-table-k``), with its own plan id, apply id and sequence numbers.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import duckdb

KNOWN_TABLES = {"meta", "events", "plan_actions", "file_records"}
FILE_BATCH = 500  # records per record_files call: the Spark applier's result batch (spark_exec.DEFAULT_BATCH)


def schema_fingerprint() -> str:
    """A hash of the journal schema this lakesweep creates: a cached journal is rebuilt when it changes."""
    from lakesweep.journal import duckdb_store

    return hashlib.sha256(f"{duckdb_store.SCHEMA_VERSION}\0{duckdb_store._SCHEMA}".encode()).hexdigest()[:12]


def _entries(path: Path) -> list[tuple[int, str, object]]:
    """Every event and file record of a journal, in sequence order: (seq, "event"|"file", value)."""
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    con = duckdb.connect(str(path), read_only=True)
    try:
        event_seqs = [s for (s,) in con.execute("SELECT seq FROM events ORDER BY seq").fetchall()]
        file_seqs = [s for (s,) in con.execute("SELECT seq FROM file_records ORDER BY seq").fetchall()]
    finally:
        con.close()
    with DuckDBRecorder(path) as rec:  # both lists come in sequence order
        events, files = rec.events(), rec.file_records()
    if len(events) != len(event_seqs) or len(files) != len(file_seqs):
        raise SystemExit(f"{path}: the recorder returned {len(events)} events and {len(files)} file records, "
                         f"the tables hold {len(event_seqs)} and {len(file_seqs)}")
    out = [(s, "event", e) for s, e in zip(event_seqs, events)] + [(s, "file", f) for s, f in zip(file_seqs, files)]
    out.sort(key=lambda e: e[0])
    return out


def replay_append_rate(source_journal: Path, plan, target_journal: Path) -> tuple[int, float]:
    """Record again, through the recorder API, what a real apply journaled: the plan, its events and
    its file records in batches of ``FILE_BATCH``, in their original order, into a new journal held open
    throughout, as apply holds its journal (``Recorder.held``): a journal opened and closed for every
    batch costs more per batch the larger the plan it holds (42 of 58 ms a batch with a 1m plan).

    Returns (file records, seconds spent in ``record_files``).
    """
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.journal.events import PlanRecorded

    entries = _entries(source_journal)
    rows = 0
    spent = 0.0
    with DuckDBRecorder(target_journal) as rec, rec.held():
        batch: list = []

        def flush():
            nonlocal rows, spent, batch
            if batch:
                t0 = time.perf_counter()
                rec.record_files(batch)
                spent += time.perf_counter() - t0
                rows += len(batch)
                batch = []

        for _, what, value in entries:
            if what == "file":
                batch.append(value)
                if len(batch) >= FILE_BATCH:
                    flush()
                continue
            flush()
            if isinstance(value, PlanRecorded):
                rec.record_plan(plan, recorded_ms=value.recorded_ms)
            else:
                rec.append([value])
        flush()
    return rows, spent


def _one(con, sql: str, params=()):
    return con.execute(sql, list(params)).fetchone()


def build_large_journal(source_journal: Path, rows: int, out: Path, table_prefix: str, log) -> dict:
    """Clone the one apply in ``source_journal`` until ``out`` holds at least ``rows`` file records."""
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    for p in (tmp, Path(str(tmp) + ".wal")):
        if p.exists():
            p.unlink()
    shutil.copyfile(source_journal, tmp)
    con = duckdb.connect(str(tmp))
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if tables - KNOWN_TABLES:
            raise SystemExit(f"the journal schema has tables this benchmark does not know how to clone: "
                             f"{sorted(tables - KNOWN_TABLES)}; teach bench/userpath_journal.py about them")
        plan_ids = [r[0] for r in con.execute(
            "SELECT plan_id FROM events WHERE event_type = 'PlanRecorded'").fetchall()]
        apply_ids = [r[0] for r in con.execute(
            "SELECT DISTINCT apply_id FROM events WHERE apply_id IS NOT NULL").fetchall()]
        if len(plan_ids) != 1 or len(apply_ids) != 1:
            raise SystemExit(f"{source_journal}: expected one plan and one apply, found {plan_ids} / {apply_ids}")
        pid, aid = plan_ids[0], apply_ids[0]
        location = _one(con, "SELECT payload ->> '$.table_location' FROM events WHERE event_type = 'PlanRecorded'")[0]
        base = _one(con, "SELECT count(*) FROM file_records")[0]
        stride = _one(con, "SELECT greatest((SELECT max(seq) FROM events), (SELECT max(seq) FROM file_records))")[0] + 1
        copies = max(1, -(-rows // base))
        log(f"  cloning one apply of {base} file records {copies} times (DuckDB, in the recorder's schema) ...")
        t0 = time.perf_counter()
        # clone k: new ids made from the old ones and k (64 and 32 hex characters, like the real ones)
        con.execute("CREATE TEMP TABLE clones AS SELECT range AS k, "
                    "md5(? || range::VARCHAR) || md5(range::VARCHAR || ?) AS pid, md5(? || range::VARCHAR) AS aid, "
                    "? || lpad(range::VARCHAR, 5, '0') AS loc FROM range(1, ?)",
                    [pid, pid, aid, table_prefix, copies])
        con.execute("BEGIN")
        con.execute(
            "INSERT INTO events SELECT e.* REPLACE (e.seq + c.k * ? AS seq, c.pid AS plan_id, "
            "CASE WHEN e.apply_id IS NULL THEN NULL ELSE c.aid END AS apply_id, "
            "replace(replace(replace(e.payload::VARCHAR, ?, c.pid), ?, c.aid), ?, c.loc)::JSON AS payload) "
            "FROM events e, clones c", [stride, pid, aid, location])
        con.execute("INSERT INTO plan_actions SELECT a.* REPLACE (c.pid AS plan_id) FROM plan_actions a, clones c")
        con.execute("INSERT INTO file_records SELECT f.* REPLACE (f.seq + c.k * ? AS seq, c.pid AS plan_id, "
                    "c.aid AS apply_id) FROM file_records f, clones c", [stride])
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
        total = _one(con, "SELECT count(*) FROM file_records")[0]
        plans = _one(con, "SELECT count(*) FROM events WHERE event_type = 'PlanRecorded'")[0]
        log(f"  {total} file records, {plans} plans in {time.perf_counter() - t0:.0f} s")
    finally:
        con.close()
    os.replace(tmp, out)
    return {"file_records": total, "plans": plans, "base_records": base}


def journal_facts(path: Path) -> dict:
    """What the audit queries of the benchmark look for: a file name, a table, a snapshot bound."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        total = _one(con, "SELECT count(*) FROM file_records")[0]
        plans = _one(con, "SELECT count(*) FROM events WHERE event_type = 'PlanRecorded'")[0]
        name = _one(con, "SELECT min(path) FROM plan_actions WHERE kind = 'data-file'")[0]
        tables = sorted(r[0] for r in con.execute(
            "SELECT payload ->> '$.table_location' FROM events WHERE event_type = 'PlanRecorded'").fetchall())
        table = tables[len(tables) // 2]
        lo, hi = _one(con, "SELECT min(snapshot_id), max(snapshot_id) FROM plan_actions")
    finally:
        con.close()
    return {"file_records": total, "plans": plans, "file_name": name.rsplit("/", 1)[-1], "table": table,
            "snapshot_mid": (lo + hi) // 2 if lo is not None else 0}
