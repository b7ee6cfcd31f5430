"""A plan read for apply keeps the file's columns (``read_plan(as_columns=True)``): the same plan, refused
exactly as the plan read action by action is refused, and the compact sets apply builds over it."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.formats import Locations, TargetIndex, Targets
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.plan import compute_plan_id
from lakesweep.engine.plan_columns import ColumnActions, IdSet, action_ids, action_sizes, by_phase, total_size, without
from lakesweep.engine.plan_io import HEADER_KEY, ID_KEY, plan_from_bytes, plan_to_bytes

from tests.engine.test_plan_io import SAMPLE, actions, make


@given(st.lists(actions, max_size=30))
def test_a_plan_read_as_columns_equals_the_plan_read_action_by_action(acts):
    data = plan_to_bytes(make(acts))
    whole, columns = plan_from_bytes(data), plan_from_bytes(data, as_columns=True)
    assert columns == whole and columns.plan_id == whole.plan_id
    assert isinstance(columns.actions, ColumnActions) or not acts
    assert list(columns.actions) == list(whole.actions)
    assert {p: list(a) for p, a in by_phase(columns.actions).items()} == \
        {p: list(a) for p, a in by_phase(whole.actions).items()}
    assert total_size(columns.actions) == total_size(whole.actions)
    assert total_size(columns.actions, deleting=True) == total_size(whole.actions, deleting=True)
    assert action_ids(columns.actions, deleting=True) == action_ids(whole.actions, deleting=True)
    skip = {i for i in range(len(acts)) if i % 3 == 0}
    assert list(without(columns.actions, IdSet(skip))) == list(without(whole.actions, skip))
    for got, want in zip(action_sizes(columns.actions), action_sizes(whole.actions)):
        assert got.tolist() == want.tolist()


def forged(column: str, at: int, value) -> bytes:
    """The SAMPLE plan's file with one value changed and its id computed again over the changed columns."""
    table = pq.read_table(pa.BufferReader(plan_to_bytes(make(SAMPLE))))
    meta = table.schema.metadata
    values = table.column(column).to_pylist()
    values[at] = value
    i = table.schema.get_field_index(column)
    edited = table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))
    columns = edited.replace_schema_metadata(None)

    plan_id = compute_plan_id(json.loads(meta[HEADER_KEY]), ColumnActions(columns, {}))
    sink = pa.BufferOutputStream()
    pq.write_table(columns.replace_schema_metadata({HEADER_KEY: meta[HEADER_KEY], ID_KEY: plan_id}), sink)
    return sink.getvalue().to_pybytes()


DATA_FILE = next(i for i, a in enumerate(make(SAMPLE).actions) if a.kind is ActionKind.DATA_FILE)


@pytest.mark.parametrize("column, value, message", [
    ("verb", "write-file", "is a data-file write-file in phase 1; that kind is a delete-file in phase 1"),
    ("phase", 3, "is a data-file delete-file in phase 3; that kind is a delete-file in phase 1"),
    ("phase", 0, "the plan is malformed"),
    ("verb", "explode", "'explode' is not a verb"),
    ("path", "", "an action needs a path"),
    ("kind", "", "an action needs a kind label"),
])
def test_a_forged_plan_read_as_columns_is_refused_with_the_same_message(column, value, message):
    """A plan whose id was computed again after an edit is refused by its actions' own checks, whether they are
    built as it is read or kept as columns: the columns are checked as a whole, and built where they fail."""
    data = forged(column, DATA_FILE, value)
    with pytest.raises(PlanRejected) as whole:
        plan_from_bytes(data, source="p.parquet")
    with pytest.raises(PlanRejected) as columns:
        plan_from_bytes(data, source="p.parquet", as_columns=True)
    assert message in str(whole.value)
    assert str(columns.value) == str(whole.value)


@given(st.lists(st.integers(0, 5000), max_size=50), st.lists(st.integers(0, 5000), max_size=50))
def test_an_id_set_is_a_set(a, b):
    ids = IdSet(a)
    assert ids == set(a) and len(ids) == len(set(a)) and list(ids) == sorted(set(a))
    assert all(i in ids for i in a) and -1 not in ids and "1" not in ids and 10**9 not in ids
    assert ids | set(b) == set(a) | set(b) and isinstance(ids | IdSet(b), IdSet)
    assert ids - set(b) == set(a) - set(b) and set(b) - ids == set(b) - set(a)
    ids |= IdSet(b)
    assert ids == set(a) | set(b)
    with pytest.raises(ValueError, match="never negative"):
        IdSet([-1])


def test_targets_share_the_plans_path_column_when_they_hold_the_actions_own_paths():
    paths = [f"dt=a/bucket-0/data-{i}.parquet" for i in range(70_000)]
    column = pa.chunked_array([pa.array(paths[:40_000]), pa.array(paths[40_000:])])
    targets = Targets("/t")
    for p in paths:
        targets.append("/t/" + p, p)
    targets.share(column)
    # the column's own buffers, not a copy
    assert [a.buffers()[2].address for a in targets._chunks] == [a.buffers()[2].address for a in column.chunks]
    assert targets[0] == "/t/" + paths[0] and targets[69_999] == "/t/" + paths[-1] and targets[-1] == targets[69_999]
    assert targets.holding("data-6999") == [6999] + list(range(69_990, 70_000))
    index = TargetIndex(targets)
    assert index.get("/t/" + paths[45_000]) == 45_000 and index.get(paths[45_000]) is None
    with pytest.raises(ValueError, match="share a plan's path column"):
        targets.append("/t/x", "x")


def test_targets_keep_their_copy_when_the_column_differs():
    targets = Targets("/t")
    for p in ["a", "b"]:
        targets.append("/t/" + p, p)
    targets.share(pa.chunked_array([pa.array(["a", "c"])]))
    assert list(targets) == ["/t/a", "/t/b"]
    other = Targets("/t")
    other.append("/elsewhere/a", "/elsewhere/a")
    other.share(pa.chunked_array([pa.array(["/elsewhere/a"])]))
    assert list(other) == ["/elsewhere/a"] and other._pending  # held whole: not the actions' paths


def test_a_target_index_finds_every_action_of_a_location_named_twice():
    targets = Targets("/t")
    for full in ["/t/a", "/x/b", "/t/a", "/t/c", "/x/b"]:
        targets.append(full, full[3:] if full.startswith("/t/") else full)
    index = TargetIndex(targets)
    assert index.get("/t/a") == 2 and index.get("/x/b") == 4 and index.get("/t/c") == 3
    assert index.shared == {"/t/a": [0, 2], "/x/b": [1, 4]}
    assert index.ids("/t/a") == [0, 2] and index.ids("/t/c") == (3,) and index.ids("/t/zz") == ()
    assert index.last_in("/t/a", {0}) == 0 and index.last_in("/t/a", {1}) is None
    assert len(Locations(index, IdSet([0, 1, 2, 3, 4]))) == 3


@given(st.lists(actions, min_size=1, max_size=40), st.integers(1, 7), st.data())
def test_rows_are_taken_across_the_columns_chunks_in_the_order_asked(acts, chunk, data):
    """``rows_at`` takes from each record batch the columns are held in (Arrow's own ``take`` joins a plan's
    chunks first), and gives the rows in the order asked, repeats included."""
    plan = plan_from_bytes(plan_to_bytes(make(acts)), as_columns=True)
    table = plan.actions.stored_columns()
    chunked = ColumnActions(pa.Table.from_batches(table.to_batches(max_chunksize=chunk)), {})
    positions = data.draw(st.lists(st.integers(0, len(table) - 1), max_size=20))
    names = ("path", "kind", "size")
    assert chunked.rows_at(positions, names).equals(table.combine_chunks().select(list(names)).take(
        pa.array(positions, pa.int64())))
    assert [a.path for a in chunked.take(positions)] == [plan.actions[i].path for i in positions]
    with pytest.raises(IndexError):
        chunked.rows_at([len(table)])
