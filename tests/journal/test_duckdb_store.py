"""What only the DuckDB journal does: persist, lock against a second writer, stay readable while one
writes, answer read-only SQL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import dataclasses

import duckdb
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesweep.engine.errors import JournalConflict, JournalError
from lakesweep.engine.plan import canonical_actions, compute_plan_id

from lakesweep.journal.audit import export_files, list_files, run_query
from lakesweep.journal import duckdb_store
from lakesweep.journal.duckdb_store import DuckDBRecorder, default_journal_path
from lakesweep.journal.projection import RunStatus
from lakesweep.journal.queries import project_apply
from tests.applier.conftest import REPO
from tests.engine.test_plan_codec import PLAN_ACTIONS
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
    assert run_query(journal, "SELECT key, value FROM meta")[1] == [("schema_version", "3")]
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
    with pytest.raises(JournalError, match=r"has schema version 99, newer than this lakesweep understands \(3\)"):
        DuckDBRecorder(journal)
    with pytest.raises(JournalError, match="newer than this lakesweep"):  # not "already open": it was released
        DuckDBRecorder(journal)
    with pytest.raises(JournalError, match=r"has schema version 99, newer than this lakesweep understands \(3\)"):
        DuckDBRecorder(journal, read_only=True)


HOLD_WRITER = """
import sys, time
from lakesweep.journal.duckdb_store import DuckDBRecorder
r = DuckDBRecorder(sys.argv[1])
print('ready', flush=True)
time.sleep(60)
"""
HOLD_FILE = """
import duckdb, sys, time
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == 'read-only')
print('ready', flush=True)
time.sleep(float(sys.argv[3]))
con.close()
print('closed', flush=True)
time.sleep(60)
"""


@pytest.fixture
def child():
    """Start one Python child process that prints 'ready' once it holds what it holds; killed afterwards."""
    started = []

    def start(code, *args):
        proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=REPO))
        started.append(proc)
        assert proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_second_writer_is_refused_at_once_naming_the_first(journal, child):
    _fill(journal)
    holder = child(HOLD_WRITER, journal)
    with open(f"{journal}.lock") as f:
        assert f.read() == f"{holder.pid}\n"
    t0 = time.monotonic()
    with pytest.raises(JournalConflict, match=rf"^journal {journal} is in use by another lakesweep process "
                                              rf"\(pid {holder.pid}\); wait for it to finish, or point --journal "
                                              rf"/ \$LAKESWEEP_JOURNAL at another file$") as info:
        DuckDBRecorder(journal)
    assert time.monotonic() - t0 < 1  # no waiting: the writer holds the lock for its whole life
    assert isinstance(info.value.__cause__, BlockingIOError)
    holder.kill()
    holder.wait()
    with DuckDBRecorder(journal) as r:  # the kernel dropped the lock of the killed writer
        assert len(r.events()) == 3
        with open(f"{journal}.lock") as f:
            assert f.read() == f"{os.getpid()}\n"
    with open(f"{journal}.lock") as f:
        assert f.read() == ""  # closed: the lock file names no writer


def test_the_journal_is_read_while_a_writer_has_it_open(journal, child):
    events, files = _fill(journal)
    child(HOLD_WRITER, journal)
    assert run_query(journal, "SELECT count(*) FROM file_records")[1] == [(3,)]
    with DuckDBRecorder(journal, read_only=True) as r:
        assert (r.events(), r.file_records()) == (events, files)
        assert r.plan_actions(PLAN.plan_id) == PLAN.actions


def test_a_reader_cannot_write(journal):
    _fill(journal)
    with DuckDBRecorder(journal, read_only=True) as r:
        with pytest.raises(JournalError, match=rf"^journal {journal} is open read-only: cannot append 1 events$"):
            r.append([completed(PLAN)])
        with pytest.raises(JournalError, match="is open read-only: cannot record 1 file outcomes"):
            r.record_files([record(PLAN, PLAN.actions[3])])
    with DuckDBRecorder(journal) as r:
        assert len(r.events()) == 3 and len(r.file_records()) == 3


def test_a_reader_of_a_journal_without_tables_sees_an_empty_journal(journal):
    os.makedirs(os.path.dirname(journal))
    duckdb.connect(journal).close()  # a kill while the first recorder created the tables
    with DuckDBRecorder(journal, read_only=True) as r:
        assert (r.events(), r.file_records(), r.plan_ids()) == ([], [], [])


def test_a_writer_waits_for_a_reader_to_let_go_of_the_file(journal, child):
    _fill(journal)
    reader = child(HOLD_FILE, journal, "read-only", 0.5)
    with DuckDBRecorder(journal) as r:  # its first read waits for the reader
        assert reader.stdout.readline().strip() == "closed"
        assert r.append([completed(PLAN)]) == [7]


def test_a_process_that_keeps_the_file_is_a_conflict_after_the_wait(journal, child, monkeypatch):
    _fill(journal)
    holder = child(HOLD_FILE, journal, "read-write", 60)
    with pytest.raises(JournalConflict, match=rf"^journal {journal} is in use by another lakesweep process "
                                              rf"\(pid {holder.pid}\), which did not let it go within 0.2 s; "
                                              rf"try again once it has finished$") as info:
        DuckDBRecorder(journal, wait_s=0.2)
    assert isinstance(info.value.__cause__, duckdb.IOException)
    with pytest.raises(JournalConflict, match=rf"pid {holder.pid}\), which did not let it go within 0.2 s"):
        DuckDBRecorder(journal, read_only=True, wait_s=0.2)
    monkeypatch.setattr(duckdb_store, "READ_WAIT_S", 0.2)
    with pytest.raises(JournalConflict, match="in use by another lakesweep process .*within 0.2 s"):
        run_query(journal, "SELECT count(*) FROM events")
    with pytest.raises(JournalConflict, match="in use by another lakesweep process .*within 0.2 s"):
        export_files(journal, os.path.join(os.path.dirname(journal), "x.parquet"))


def test_a_second_writer_in_the_same_process_is_a_conflict_and_a_reader_is_not(journal):
    with DuckDBRecorder(journal) as w:
        with pytest.raises(JournalConflict, match=f"journal {journal} is already open in this process"):
            DuckDBRecorder(journal)
        w.record_plan(PLAN, recorded_ms=5)
        assert run_query(journal, "SELECT count(*) FROM plan_actions")[1] == [(len(PLAN.actions),)]
        with DuckDBRecorder(journal, read_only=True) as r:
            assert r.plan_ids() == [PLAN.plan_id]
        w.append([started(PLAN)])
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
    assert run_query(str(journal), "SELECT value FROM meta WHERE key = 'schema_version'")[1] == [("3",)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(PLAN_ACTIONS, max_size=30, unique_by=lambda a: (a.kind, a.path)))
def test_a_plan_read_back_from_the_journal_is_the_plan_and_is_checked_over_its_columns(tmp_path_factory, acts):
    plan = dataclasses.replace(PLAN, actions=canonical_actions(acts))
    path = str(tmp_path_factory.mktemp("j") / "journal.duckdb")
    with DuckDBRecorder(path) as r:
        r.record_plan(plan, recorded_ms=1)
    with DuckDBRecorder(path) as r:
        stored = r._load_plan(plan.plan_id)[1]
        assert stored.stored_columns() is not None  # what the id is checked over
        read = r.plan_actions(plan.plan_id)
    assert read == plan.actions and type(read) is tuple
    assert [(type(a.kind), type(a.verb)) for a in read] == [(type(a.kind), type(a.verb)) for a in plan.actions]
    assert compute_plan_id(plan.header(), stored) == compute_plan_id(plan.header(), tuple(plan.actions))


def test_an_action_altered_in_the_journal_is_refused_by_the_check_over_its_columns(journal):
    _fill(journal)
    con = duckdb.connect(journal)
    con.execute("UPDATE plan_actions SET path = 'dt=1/bucket-0/other.parquet' WHERE action_id = 0")
    con.close()
    with DuckDBRecorder(journal) as r:
        with pytest.raises(JournalError, match=rf"plan {PLAN.plan_id}: the journal's copy no longer matches its id"):
            r.plan_actions(PLAN.plan_id)


def test_a_plan_rebuilt_from_the_journal_keeps_its_id_without_hashing_its_actions_again(journal, monkeypatch):
    from lakesweep.applier.apply import journal_plan
    from lakesweep.engine import plan as plan_module

    _fill(journal)
    with DuckDBRecorder(journal) as r:
        r.plan_actions(PLAN.plan_id)  # checked against the id here, once
        monkeypatch.setattr(plan_module, "compute_plan_id", lambda *a: pytest.fail("hashed again"))
        again = journal_plan(r, PLAN.plan_id)
    assert again.plan_id == PLAN.plan_id and again.actions == PLAN.actions and again.header() == PLAN.header()
