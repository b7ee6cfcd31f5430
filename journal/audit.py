"""Audit queries over the journal: "what deleted this file, when, and why".

Every function returns plain values (lists of dicts, tuples); the CLI renders them.
"""

from __future__ import annotations

import os
from typing import Any

import duckdb
import pyarrow as pa

from lakesweep.engine.errors import JournalError

from lakesweep.journal import duckdb_store
from lakesweep.journal.duckdb_store import DuckDBRecorder, connect_journal, copy_to_parquet, has_journal_tables
from lakesweep.journal.events import ApplyRefused, Event, FileOutcome, MaintenanceResult, PlanRecorded
from lakesweep.journal.projection import PlanStatus, RunStatus, plan_status, project
from lakesweep.journal.queries import in_quarantine, restore_applies
from lakesweep.journal.recorder import Recorder
from lakesweep.journal import rules
from lakesweep.journal.rules import FILE_AUDIT_SCHEMA, FileQuery

_READ_ONLY_CONFIG = {"enable_external_access": False}  # a query reads the journal, not the file system


def list_plans(recorder: Recorder) -> list[dict[str, Any]]:
    """One row per plan, in recording order; plans refused without being recorded come last.

    Counts use each action's latest record over the plan's applies (a resumed apply supersedes a failed
    attempt); dry runs are left out. ``bytes_reclaimed`` sums the bytes of DELETED files whose size is
    known; ``unknown_size_files`` counts the others (an Iceberg manifest list's size is not recorded).
    """
    by_plan: dict[str, list[Event]] = {pid: [] for pid in recorder.plan_ids()}
    for ev in recorder.events():
        if isinstance(ev, MaintenanceResult):
            continue  # what a maintain run did: ``list_maintenance``
        by_plan.setdefault(ev.plan_id, []).append(ev)
    runs = {plan_id: project(events) for plan_id, events in by_plan.items()}
    dry = [aid for plan_runs in runs.values() for aid, r in plan_runs.items() if r.dry_run]
    totals = recorder.all_outcome_totals(exclude_applies=dry)  # one query for every plan
    unknown = recorder.unknown_sized_deletions()
    zero = {o: (0, 0) for o in FileOutcome}
    rows = [_plan_row(plan_id, events, runs[plan_id], totals.get(plan_id, zero)) for plan_id, events in by_plan.items()]
    for row in rows:
        row["unknown_size_files"] = unknown.get(row["plan_id"], 0)
        if restore_applies(by_plan[row["plan_id"]]):
            # A restore's refusal (FAILED) leaves the file in quarantine: the journal's answer, not the latest record.
            still = in_quarantine(recorder, row["plan_id"]).values()
            row["quarantined"], row["quarantined_bytes"] = len(still), sum(r.bytes or 0 for r in still)
    return rows


def _plan_row(plan_id: str, events: list[Event], all_runs: dict, totals: dict) -> dict[str, Any]:
    recorded = next((e for e in events if isinstance(e, PlanRecorded)), None)
    runs = [r for r in all_runs.values() if not r.dry_run]
    state = plan_status(events)
    started = [r.started_ms for r in runs if r.started_ms is not None]
    if state == PlanStatus.APPLIED:
        finished = [min(r.finished_ms for r in runs if r.state == RunStatus.COMPLETED)]
    elif state in (PlanStatus.FAILED, PlanStatus.REFUSED):
        finished = [r.finished_ms for r in runs if r.finished_ms is not None]
        finished += [e.refused_ms for e in events if isinstance(e, ApplyRefused) and e.apply_id is None]
    else:
        finished = []
    return {
        "plan_id": plan_id,
        "table": recorded.table_location if recorded else None,
        "table_identity": recorded.table_identity if recorded else None,
        "kind": recorded.plan_kind if recorded else None,
        "state": state.value,
        "n_actions": recorded.n_actions if recorded else None,
        "planned_bytes": recorded.bytes if recorded else None,
        "applies": len([r for r in runs if r.n_actions is not None]),
        "deleted": totals[FileOutcome.DELETED][0],
        "already_absent": totals[FileOutcome.ALREADY_ABSENT][0],
        "failed": totals[FileOutcome.FAILED][0],
        "written": totals[FileOutcome.WRITTEN][0],
        "kept": totals[FileOutcome.KEPT_NOT_EMPTY][0],
        "bytes_reclaimed": totals[FileOutcome.DELETED][1],
        "quarantined": totals[FileOutcome.QUARANTINED][0],  # in quarantine now
        "quarantined_bytes": totals[FileOutcome.QUARANTINED][1],
        "restored": totals[FileOutcome.RESTORED][0],
        "restored_bytes": totals[FileOutcome.RESTORED][1],
        "recorded_ms": recorded.recorded_ms if recorded else None,
        "started_ms": min(started) if started else None,
        "finished_ms": max(finished) if finished else None,
        # what the check after the last phase found, in the latest apply that ran it (None: never checked)
        "whole": next((r.whole for r in reversed(runs) if r.whole is not None), None),
    }


def list_files(
    recorder: Recorder,
    *,
    plan_id: str | None = None,
    apply_id: str | None = None,
    table: str | None = None,
    kind: str | None = None,
    outcome: str | None = None,
    since_ms: int | None = None,
    path_glob: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Every file record (each attempt) with its plan's table and its action's snapshot id, oldest first.

    ``table`` matches the table location or identity, ``since_ms`` keeps records at or after it, and
    ``path_glob`` is a shell glob over the path as planned (``*`` also crosses ``/``).
    """
    query = FileQuery(plan_id=plan_id, apply_id=apply_id, table=table, kind=kind, outcome=outcome,
                      since_ms=since_ms, path_glob=path_glob, limit=limit)
    return recorder.file_rows(query)


def count_files(recorder: Recorder, *, plan_id: str | None = None, apply_id: str | None = None,
                table: str | None = None, kind: str | None = None, outcome: str | None = None,
                since_ms: int | None = None, path_glob: str | None = None) -> int:
    """How many records ``list_files`` returns with these filters and no limit."""
    return recorder.file_count(FileQuery(plan_id=plan_id, apply_id=apply_id, table=table, kind=kind, outcome=outcome,
                                         since_ms=since_ms, path_glob=path_glob))


def list_events(recorder: Recorder, *, plan_id: str | None = None, apply_id: str | None = None) -> list[dict]:
    """The event timeline: one dict per event (its type and its current-version payload), in order."""
    return [{"event_type": e.EVENT_TYPE, "time_ms": e.time_ms, **e.to_payload()}
            for e in recorder.events(plan_id=plan_id, apply_id=apply_id)]


def run_query(db_path: str | os.PathLike, sql: str) -> tuple[list[str], list[tuple]]:
    """Run one read-only query (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE...) against a DuckDB journal.

    Anything else (DELETE, UPDATE, COPY, ATTACH, PRAGMA, SET, several statements...) is refused with
    ``JournalError`` before it runs; the database is also opened read-only, without file-system access,
    which is what makes it safe. The journal tables: events, plan_actions, file_records, meta, and the
    file_audit and maintenance_history views. While an apply writes the journal, the query waits for its
    batch to end (up to ``READ_WAIT_S``) and then sees every batch written so far.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise JournalError(f"cannot parse the query: {e}") from e
    if len(statements) != 1:
        raise JournalError(f"give exactly one query, got {len(statements)} statements")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise JournalError(f"only read-only queries (SELECT, WITH, DESCRIBE, SHOW) run against the journal, "
                           f"not {kind.name}")
    con = connect_journal(str(db_path), read_only=True, config=_READ_ONLY_CONFIG, wait_s=duckdb_store.READ_WAIT_S)
    try:
        # a journal no lakesweep with the view has opened for writing gets it as a temporary view (a
        # read-only database can hold one)
        if not con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'maintenance_history'").fetchone()[0]:
            con.execute("CREATE TEMP VIEW maintenance_history AS " + rules.MAINTENANCE_HISTORY)
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description]
        return columns, cursor.fetchall()
    except duckdb.Error as e:
        raise JournalError(f"query failed on journal {db_path}: {e}") from e
    finally:
        con.close()


def recorded_tables(db_path: str | os.PathLike) -> list[str]:
    """The table locations of every plan recorded in the journal at ``db_path``, read read-only."""
    con = connect_journal(str(db_path), read_only=True, config=_READ_ONLY_CONFIG, wait_s=duckdb_store.READ_WAIT_S)
    try:
        if not has_journal_tables(con):
            return []  # created, nothing recorded yet
        rows = con.execute("SELECT DISTINCT payload ->> '$.table_location' FROM events "
                           "WHERE event_type = 'PlanRecorded' ORDER BY 1").fetchall()
    except duckdb.Error as e:
        raise JournalError(f"cannot read journal {db_path}: {e}") from e
    finally:
        con.close()
    return [r[0] for r in rows if r[0]]


def export_files(recorder_or_path: Recorder | str | os.PathLike, out_path: str | os.PathLike) -> int:
    """Write every file record, joined as in ``list_files``, to a Parquet file; returns the row count."""
    if isinstance(recorder_or_path, DuckDBRecorder):
        return recorder_or_path.export_file_audit(out_path)
    if isinstance(recorder_or_path, Recorder):
        rows = recorder_or_path.file_rows(FileQuery())
        table = pa.Table.from_pylist(rows, schema=FILE_AUDIT_SCHEMA)
        con = duckdb.connect()
        try:
            con.register("file_audit", table)
            return copy_to_parquet(con, "SELECT * FROM file_audit ORDER BY seq", out_path)
        finally:
            con.close()
    path = str(recorder_or_path)
    if not os.path.exists(path):
        raise JournalError(f"no journal at {path}")
    con = connect_journal(path, read_only=True, wait_s=duckdb_store.READ_WAIT_S)
    try:
        if not has_journal_tables(con):  # created, nothing recorded yet: an empty export
            con.register("file_audit", pa.Table.from_pylist([], schema=FILE_AUDIT_SCHEMA))
        return copy_to_parquet(con, "SELECT * FROM file_audit ORDER BY seq", out_path)
    except duckdb.Error as e:
        raise JournalError(f"cannot export journal {path}: {e}") from e
    finally:
        con.close()


def list_maintenance(recorder: Recorder, *, run_id: str | None = None) -> list[dict[str, Any]]:
    """One row per operation of ``lakesweep maintain`` on one table, in the order they happened."""
    rows = []
    for ev in recorder.events():
        if isinstance(ev, MaintenanceResult) and (run_id is None or ev.run_id == run_id):
            rows.append(ev.to_payload())
    return rows
