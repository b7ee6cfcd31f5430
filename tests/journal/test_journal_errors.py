"""The journal fails with one clear JournalError naming the file: a write that fails mid-apply, a damaged
schema version, a path under a regular file, an export that cannot be written."""

from __future__ import annotations

import os

import duckdb
import pytest

from lakesweep.engine.errors import JournalError

from lakesweep.journal.audit import export_files
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.journal.builders import make_plan, record, started

PLAN = make_plan()


@pytest.fixture
def journal(tmp_path):
    return str(tmp_path / "state" / "journal.duckdb")


def test_a_write_that_fails_mid_apply_is_one_journal_error_and_the_journal_recovers(journal):
    with DuckDBRecorder(journal) as r:
        r.record_plan(PLAN, recorded_ms=5)
        r.append([started(PLAN)])
        # The writer closes the file after each batch, which folds DuckDB's write-ahead log into it; the
        # next commit opens a new log: with the file open, make that open fail.
        assert not os.path.exists(journal + ".wal")
        with r._session(), pytest.raises(JournalError) as e:
            os.mkdir(journal + ".wal")
            r.record_files([record(PLAN, a) for a in PLAN.actions[:3]])
        assert str(e.value) == (f"journal {journal}: could not record 3 file outcomes: TransactionContext Error: "
                                f"Failed to commit: Cannot open file \"{journal}.wal\": Is a directory")
        assert isinstance(e.value.__cause__, duckdb.Error)
        os.rmdir(journal + ".wal")
        assert r.file_records() == []  # nothing half-written
        r.record_files([record(PLAN, a) for a in PLAN.actions[:3]])
    with DuckDBRecorder(journal) as r:
        assert len(r.file_records()) == 3 and len(r.events()) == 2


def test_a_schema_version_that_is_not_a_number_names_the_file(journal):
    with DuckDBRecorder(journal):
        pass
    con = duckdb.connect(journal)
    con.execute("UPDATE meta SET value = '2x' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(JournalError) as e:
        DuckDBRecorder(journal)
    assert str(e.value) == (f"journal {journal} has schema version '2x', which is not a number: the file is not a "
                            "lakesweep journal, or it was damaged")
    DuckDBRecorder(":memory:").close()  # the failed open released nothing it should not have
    con = duckdb.connect(journal)  # and the file is not held by this process
    con.close()


def test_a_journal_path_under_a_regular_file_is_a_journal_error(tmp_path):
    blocker = tmp_path / "passwd"
    blocker.write_text("root:x:0:0")
    with pytest.raises(JournalError) as e:
        DuckDBRecorder(blocker / "deeper" / "j.duckdb")
    assert str(e.value) == f"cannot create the journal {blocker}/deeper/j.duckdb: {blocker} is a file, not a directory"
    assert blocker.read_text() == "root:x:0:0"


def test_an_export_that_cannot_be_written_is_a_journal_error(journal, tmp_path):
    with DuckDBRecorder(journal) as r:
        r.record_plan(PLAN, recorded_ms=5)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(JournalError) as e:
        export_files(journal, blocker / "audit.parquet")
    assert str(e.value) == f"cannot create the export {blocker}/audit.parquet: {blocker} is a file, not a directory"
    target = tmp_path / "a-directory.parquet"
    target.mkdir()
    with pytest.raises(JournalError, match=f"^cannot write the export {target}: "):
        export_files(journal, target)


def test_recorded_tables_lists_each_table_once(journal):
    from lakesweep.journal.audit import recorded_tables

    with DuckDBRecorder(journal) as r:
        r.record_plan(PLAN, recorded_ms=5)
        r.record_plan(make_plan(now_ms=2), recorded_ms=6)
        r.record_plan(make_plan(table="/other"), recorded_ms=7)
    assert recorded_tables(journal) == ["/other", "/t"]


def _journal_without_tables(path) -> None:
    """What a kill while the journal is created leaves: a DuckDB file, none of lakesweep's tables."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    duckdb.connect(path).close()


def test_a_journal_without_lakesweeps_tables_is_read_as_empty(journal, tmp_path):
    import pyarrow.parquet as pq

    from lakesweep.journal.audit import recorded_tables

    _journal_without_tables(journal)
    assert recorded_tables(journal) == []
    out = str(tmp_path / "audit.parquet")
    assert export_files(journal, out) == 0
    assert pq.read_table(out).num_rows == 0
    with DuckDBRecorder(journal) as r:  # the first writer creates the tables
        assert r.plan_ids() == [] and r.events() == []
