"""What only the DuckDB journal does: persist, lock against a second process, answer read-only SQL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

from engine.errors import JournalConflict, JournalError

from journal.audit import export_files, list_files, run_query
from journal.duckdb_store import DuckDBRecorder, default_journal_path
from journal.projection import RunStatus
from journal.queries import project_apply
from tests.journal.builders import completed, make_plan, phase_done, record, started

PLAN = make_plan()


@pytest.fixture
def journal(tmp_path):
    return str(tmp_path / "state" / "journal.duckdb")


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """One journal the read-only tests share (they prove they leave it alone)."""
    path = str(tmp_path_factory.mktemp("filled") / "journal.duckdb")
    _fill(path)
    return path


def _fill(path):
    with DuckDBRecorder(path) as r:
        r.record_plan(PLAN, recorded_ms=5)
        r.append([started(PLAN), phase_done(PLAN, 1)])
        r.record_files([record(PLAN, a) for a in PLAN.actions[:3]])
        return r.events(), r.file_records()


def test_the_journal_persists_across_reopen(journal):
    events, files = _fill(journal)
    with DuckDBRecorder(journal) as r:
        assert r.events() == events
        assert r.file_records() == files
        assert r.plan_actions(PLAN.plan_id) == PLAN.actions
        assert r.append([completed(PLAN)]) == [7]  # the sequence goes on where it stopped
        assert project_apply(r, "a1").state == RunStatus.COMPLETED


def test_a_reopened_journal_reads_an_apply_and_its_plan_once_then_appends_without_reading(journal):
    _fill(journal)
    with DuckDBRecorder(journal) as r:
        reads = []
        for name in ("_event_rows", "_load_plan"):
            method = getattr(r, name)
            setattr(r, name, lambda *args, _name=name, _method=method: reads.append((_name, args)) or _method(*args))
        for a in PLAN.actions[3:9]:
            r.record_files([record(PLAN, a)])
        r.append([phase_done(PLAN, 6), completed(PLAN)])
        assert reads == [("_event_rows", (None, "a1")), ("_load_plan", (PLAN.plan_id,))]
        assert project_apply(r, "a1").state == RunStatus.COMPLETED
        assert len(r.file_records(apply_id="a1")) == 9


def test_schema_tables_and_version(filled):
    journal = filled
    columns, rows = run_query(journal, "SELECT table_name, table_type FROM information_schema.tables ORDER BY 1")
    assert rows == [("events", "BASE TABLE"), ("file_audit", "VIEW"), ("file_records", "BASE TABLE"),
                    ("maintenance_history", "VIEW"), ("meta", "BASE TABLE"), ("plan_actions", "BASE TABLE")]
    assert run_query(journal, "SELECT key, value FROM meta")[1] == [("schema_version", "2")]
    columns, rows = run_query(journal, "DESCRIBE events")
    assert [(r[0], r[1]) for r in rows] == [
        ("seq", "BIGINT"), ("event_type", "VARCHAR"), ("schema_version", "INTEGER"), ("plan_id", "VARCHAR"),
        ("apply_id", "VARCHAR"), ("payload", "JSON"), ("recorded_ms", "BIGINT")]
    _, rows = run_query(journal, "SELECT event_type, payload->>'$.master' FROM events ORDER BY seq")
    assert rows == [("PlanRecorded", None), ("ApplyStarted", "local[2]"), ("PhaseCompleted", None)]


def test_a_journal_from_a_newer_lakesweep_is_refused(journal):
    _fill(journal)
    con = duckdb.connect(journal)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(JournalError, match=r"has schema version 99, newer than this lakesweep understands \(2\)"):
        DuckDBRecorder(journal)
    with pytest.raises(JournalError, match="newer than this lakesweep"):  # not "already open": it was released
        DuckDBRecorder(journal)


def test_a_second_process_holding_the_journal_is_a_conflict(journal):
    _fill(journal)
    child = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time\n"
                               "con = duckdb.connect(sys.argv[1])\nprint('ready', flush=True)\ntime.sleep(60)", journal],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(JournalConflict, match=rf"^journal {journal} is in use by another lakesweep process "
                                                  rf"\(pid {child.pid}\); wait for it to finish") as info:
            DuckDBRecorder(journal)
        assert isinstance(info.value.__cause__, duckdb.IOException)
        with pytest.raises(JournalConflict, match="in use by another lakesweep process"):
            run_query(journal, "SELECT count(*) FROM events")
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    with DuckDBRecorder(journal) as r:  # and free again once the other process is gone
        assert len(r.events()) == 3


def test_a_second_recorder_in_the_same_process_is_a_conflict(journal):
    with DuckDBRecorder(journal):
        with pytest.raises(JournalConflict, match=f"journal {journal} is already open in this process"):
            DuckDBRecorder(journal)
        with pytest.raises(JournalConflict, match="already open in this process"):
            run_query(journal, "SELECT 1")
    DuckDBRecorder(journal).close()


def test_a_recorder_dropped_without_close_frees_the_file(journal):
    DuckDBRecorder(journal)  # garbage at once
    with DuckDBRecorder(journal) as r:
        assert r.events() == []


def test_a_file_that_is_not_a_journal_is_an_error(tmp_path):
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_bytes(b"not a database" * 1000)
    with pytest.raises(JournalError, match=f"cannot open journal {bogus}"):
        DuckDBRecorder(bogus)


def test_run_query_answers_select_and_with(filled):
    journal = filled
    columns, rows = run_query(journal, "WITH f AS (SELECT * FROM file_audit) SELECT path, snapshot_id FROM f "
                                       "WHERE path GLOB 'dt=1/*' ORDER BY seq")
    assert columns == ["path", "snapshot_id"]
    assert rows == [("dt=1/bucket-0/data-1.parquet", 2), ("dt=1/bucket-0/changelog-1.parquet", 2)]


@pytest.mark.parametrize("sql, message", [
    ("DELETE FROM events", "not DELETE"),
    ("UPDATE events SET plan_id = 'x'", "not UPDATE"),
    ("DROP TABLE events", "not DROP"),
    ("PRAGMA version", "not PRAGMA"),
    ("COPY events TO '/tmp/x.csv'", "not COPY"),
    ("ATTACH '/tmp/other.duckdb'", "not ATTACH"),
    ("SELECT 1; DELETE FROM events", "give exactly one query, got 2 statements"),
    ("SELEC 1", "cannot parse the query"),
    ("SELECT * FROM read_text('/etc/hostname')", "query failed on journal .*file system operations are disabled"),
])
def test_run_query_refuses_anything_but_a_read(filled, sql, message):
    journal = filled
    with pytest.raises(JournalError, match=message):
        run_query(journal, sql)
    assert run_query(journal, "SELECT count(*) FROM events")[1] == [(3,)]
    assert run_query(journal, "SELECT count(*) FROM file_records")[1] == [(3,)]


def test_run_query_on_a_missing_journal(tmp_path):
    with pytest.raises(JournalError, match="cannot open journal .*nope.duckdb"):
        run_query(tmp_path / "nope.duckdb", "SELECT 1")
    assert not (tmp_path / "nope.duckdb").exists()


def test_export_from_a_path_matches_the_recorder(journal, tmp_path):
    _fill(journal)
    assert export_files(journal, tmp_path / "by-path.parquet") == 3
    with DuckDBRecorder(journal) as r:
        expected = list_files(r)
        assert export_files(r, tmp_path / "by-recorder.parquet") == 3
    by_path, by_recorder = pq.read_table(tmp_path / "by-path.parquet"), pq.read_table(tmp_path / "by-recorder.parquet")
    assert by_path.equals(by_recorder)
    assert by_path.to_pylist() == expected
    with pytest.raises(JournalError, match="no journal at"):
        export_files(str(tmp_path / "absent.duckdb"), tmp_path / "x.parquet")


def test_default_journal_path(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKESWEEP_JOURNAL", str(tmp_path / "j.duckdb"))
    assert default_journal_path() == tmp_path / "j.duckdb"
    monkeypatch.delenv("LAKESWEEP_JOURNAL")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_journal_path() == tmp_path / "data" / "lakesweep" / "journal.duckdb"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_journal_path() == tmp_path / "home" / ".local" / "share" / "lakesweep" / "journal.duckdb"


def test_a_schema_1_journal_gets_its_actions_verbs_and_stays_readable(tmp_path):
    """A journal written before actions had a verb (tests/compat has one from a real apply): opening it
    adds the verb column, fills it from each expiry kind, and the recorded plans still hash to their ids."""
    from tests.compat.test_v1 import HERE, PLAN_ID

    journal = tmp_path / "journal-v1.duckdb"
    shutil.copy(HERE / "journal-v1.duckdb", journal)
    os.chmod(journal, 0o644)
    before = run_query(str(journal), "SELECT value FROM meta WHERE key = 'schema_version'")[1]
    assert before == [("1",)]
    with DuckDBRecorder(str(journal)) as recorder:
        actions = recorder.plan_actions(PLAN_ID)  # verified against the plan id
        assert {(str(a.kind), a.verb.value) for a in actions} == {
            ("data-file", "delete-file"), ("manifest-list", "delete-file"), ("snapshot", "delete-file"),
            ("write-earliest-hint", "write-file")}
    _, rows = run_query(str(journal), "SELECT DISTINCT kind, verb FROM plan_actions ORDER BY kind")
    assert ("write-earliest-hint", "write-file") in rows and all(verb is not None for _, verb in rows)
    assert run_query(str(journal), "SELECT value FROM meta WHERE key = 'schema_version'")[1] == [("2",)]
