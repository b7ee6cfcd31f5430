"""The rules exist once: both storages run them on relations of the same layout, and neither overrides them."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from lakesweep.journal import rules
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import ApplyFailed, FileOutcome, PlanRecorded
from lakesweep.journal.memory_store import MemoryRecorder
from lakesweep.journal.recorder import Recorder
from tests.journal.builders import make_plan, record, started

PLAN = make_plan()
A = PLAN.actions


def test_the_twins_implement_the_storage_interface_and_nothing_of_the_contract():
    public = {name for name in vars(Recorder) if not name.startswith("_")}
    assert {"record_plan", "append", "record_files", "file_rows", "done_actions", "apply_totals", "outcome_totals",
            "all_outcome_totals"} <= public
    abstract = Recorder.__abstractmethods__
    assert abstract == {"close", "_check_open", "_insert_plan", "_load_plan", "_plan_ids", "_append_rows",
                        "_event_rows", "_insert_files", "_insert_file_table", "_file_records",
                        "_select"}
    for twin in (MemoryRecorder, DuckDBRecorder):
        assert {name for name in vars(twin) if name in public} == {"close"}, twin


def test_the_relations_have_the_layout_of_the_duckdb_tables(tmp_path):
    """MemoryRecorder hands the rules Arrow tables of ``rules.RELATIONS``; they must be the DuckDB tables
    column for column, or the same SQL would mean different things on the two storages."""
    path = tmp_path / "journal.duckdb"
    DuckDBRecorder(path).close()
    con = duckdb.connect(str(path), read_only=True)
    try:
        for name, schema in rules.RELATIONS.items():
            columns = con.execute(f"SELECT column_name, data_type FROM information_schema.columns "
                                  f"WHERE table_name = '{name}' ORDER BY ordinal_position").fetchall()
            con.register("_arrow", schema.empty_table())
            arrow = con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_name = '_arrow' ORDER BY ordinal_position").fetchall()
            con.unregister("_arrow")
            arrow = [(c, "JSON" if (name, c) == ("events", "payload") else t) for c, t in arrow]  # JSON text
            assert arrow == columns, name
        view = con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'file_audit' "
                           "ORDER BY ordinal_position").fetchall()
        assert tuple(c for (c,) in view) == rules.FILE_COLUMNS
    finally:
        con.close()


def test_arrow_table_of_no_rows_has_the_schema():
    assert rules.arrow_table(rules.FILES_SCHEMA, []) == rules.FILES_SCHEMA.empty_table()
    table = rules.arrow_table(rules.ACTIONS_SCHEMA, [rules.action_row("p", a) for a in A])
    assert table.schema == rules.ACTIONS_SCHEMA and table.num_rows == len(A)
    recorded = PlanRecorded("p", "/t", "x", "expire", 1, len(A), 0, {"format": "paimon"}, 1)
    assert rules.actions_of_table(recorded, table) == A


def test_a_plans_actions_table_is_built_by_columns_as_row_by_row():
    from dataclasses import replace

    from lakesweep.engine.plan import Action, Verb

    odd = [Action("data-file", "dt=\u00e9/f\"1\\.parquet", snapshot_id=None, partition=None, size=None,
                  verb=Verb.DELETE_FILE, phase=1, action_id=len(A)),
           Action("data-file", "x", snapshot_id=(1 << 62), bucket=-1, source="s", depth=3, verb=Verb.DELETE_FILE,
                  phase=2, action_id=len(A) + 1)]
    for actions in (A, (*A, *odd), ()):
        assert rules.actions_table("p", actions) == rules.arrow_table(
            rules.ACTIONS_SCHEMA, [rules.action_row("p", a) for a in actions])
    bool_size = (*A, replace(odd[1], size=True))  # not columnar: refused row by row too, as it always was
    with pytest.raises(pa.ArrowTypeError, match="Expected integer, got bool"):
        rules.actions_table("p", bool_size)


@pytest.fixture(params=["memory", "duckdb"])
def recorder(request):
    with (MemoryRecorder() if request.param == "memory" else DuckDBRecorder(":memory:")) as r:
        yield r


def _statements(recorder) -> list[tuple[str, list]]:
    recorder.record_plan(PLAN, recorded_ms=5)
    recorder.append([started(PLAN)])
    recorder.record_files([record(PLAN, A[0]), record(PLAN, A[1], outcome="FAILED")])
    asked = []
    select = recorder._select
    recorder._select = lambda sql, params: asked.append((sql, list(params))) or select(sql, params)
    recorder.done_actions(PLAN.plan_id, exclude_applies=["dry"])
    recorder.apply_totals("a1")
    recorder.outcome_totals(PLAN.plan_id)
    recorder.all_outcome_totals(exclude_applies=["dry"])
    recorder.file_rows(rules.FileQuery(table="/t", path_glob="dt=1/*", limit=3))
    return asked


def test_both_storages_are_asked_the_same_statements():
    """What makes the rules one: each query reaches either storage as the same SQL and parameters."""
    with MemoryRecorder() as mem, DuckDBRecorder(":memory:") as db:
        asked = _statements(mem)
        assert len(asked) == 5
        assert _statements(db) == asked


def test_a_query_sees_every_write_before_it(recorder):
    """The in-memory twin rebuilds a relation only when it was written to; a stale one would lie here."""
    recorder.record_plan(PLAN, recorded_ms=5)
    assert recorder.file_rows(rules.FileQuery()) == []
    recorder.append([started(PLAN)])
    recorder.record_files([record(PLAN, A[0], outcome="FAILED")])
    assert recorder.done_actions(PLAN.plan_id) == frozenset()
    recorder.record_files([record(PLAN, A[0], attempt=2, time_ms=110)])
    assert recorder.done_actions(PLAN.plan_id) == frozenset({0})
    recorder.append([ApplyFailed("a1", PLAN.plan_id, "boom", 1, 120), started(PLAN, "a2", started_ms=130)])
    recorder.record_files([record(PLAN, A[1], apply_id="a2", outcome="ALREADY_ABSENT", time_ms=140)])
    assert recorder.outcome_totals(PLAN.plan_id)[FileOutcome.ALREADY_ABSENT] == (1, 20)
    assert [r["apply_id"] for r in recorder.file_rows(rules.FileQuery())] == ["a1", "a1", "a2"]


def test_an_outcome_by_any_apply_in_sticky_outcomes_stays(recorder):
    recorder.record_plan(PLAN, recorded_ms=5)
    recorder.append([started(PLAN)])
    recorder.record_files([record(PLAN, A[0])])
    recorder.append([ApplyFailed("a1", PLAN.plan_id, "boom", 1, 120), started(PLAN, "a2", started_ms=130)])
    recorder.record_files([record(PLAN, A[0], apply_id="a2", outcome="ALREADY_ABSENT", time_ms=140)])
    assert rules.STICKY_OUTCOMES == (FileOutcome.DELETED,)
    totals = recorder.outcome_totals(PLAN.plan_id)
    assert (totals[FileOutcome.DELETED], totals[FileOutcome.ALREADY_ABSENT]) == ((1, 10), (0, 0))
    assert recorder.apply_totals("a2")[FileOutcome.ALREADY_ABSENT] == (1, 10)  # within one apply: the latest


def test_the_memory_twin_does_not_rebuild_relations_nobody_wrote():
    with MemoryRecorder() as r:
        r.record_plan(PLAN, recorded_ms=5)
        r.append([started(PLAN)])
        r.record_files([record(PLAN, A[0])])
        built = []
        relation = r._relation
        r._relation = lambda name: built.append(name) or relation(name)
        r.apply_totals("a1")
        r.apply_totals("a1")
        r.record_files([record(PLAN, A[1])])
        r.apply_totals("a1")
        assert built == ["events", "file_records", "plan_actions", "file_records"]
        assert isinstance(relation("events"), pa.Table)
