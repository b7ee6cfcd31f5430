"""Actions kept as the plan file's columns (``engine.plan_columns.ColumnActions``) are the actions they stand
for: the same values and kinds, the same plan file and id, summary, figures and journal rows; a value the
columns cannot hold keeps the actions as objects."""

import dataclasses
import pickle

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesweep.cli.render import ActionFigures
from lakesweep.engine.iceberg.kinds import EXPIRE_PHASES, ExpireKind
from lakesweep.engine.paimon.kinds import EXPIRE_PHASES as PAIMON_PHASES
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.plan import Action, PhaseSpec, Verb, built_actions, canonical_actions, kind_spec, summarize
from lakesweep.engine.plan_columns import SCHEMA, ActionColumnsBuilder, ColumnActions, FileActions, values
from lakesweep.engine.plan_io import plan_from_bytes, plan_to_bytes
from lakesweep.journal.rules import actions_table
from tests.engine.test_plan_codec import ACTIONS, PATHS, gathered
from tests.engine.test_plan_io import make
from tests.support import plan_reference as reference

ROWS = st.lists(st.tuples(st.sampled_from(list(ExpireKind)), PATHS,
                          st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
                          st.one_of(st.none(), st.integers(0, 2**40)), st.one_of(st.none(), PATHS)),
                unique_by=lambda row: (row[0], row[1]), min_size=1, max_size=40)
BY_PARTITION = frozenset({ExpireKind.DATA_FILE, ExpireKind.POSITION_DELETE_FILE})


def plan_of(actions, phases=EXPIRE_PHASES):
    return dataclasses.replace(make([], phases=phases), actions=actions)


def found(rows):
    """The rows gathered as columns, and the reference's canonical actions of the same rows."""
    acts = [Action(kind, path, snapshot_id=sid, size=size, partition=partition)
            for kind, path, sid, size, partition in rows]
    return gathered(rows), reference.canonical_actions(acts)


@settings(max_examples=200)
@given(ROWS)
def test_columns_are_the_canonical_actions_with_their_kinds(rows):
    columns, expected = found(rows)
    assert isinstance(columns, ColumnActions)
    assert list(columns) == list(expected)
    assert [(type(a.kind), type(a.verb)) for a in columns] == [(type(a.kind), type(a.verb)) for a in expected]
    assert columns[-1] == expected[-1] and columns[0] == expected[0]
    assert columns[1:3] == expected[1:3] and columns[::2] == expected[::2]


@settings(max_examples=200)
@given(ROWS)
def test_a_plan_of_columns_writes_counts_and_journals_as_the_plan_of_actions(rows):
    columns, expected = found(rows)
    plan = plan_of(columns)
    objects = plan_of(expected)
    data = plan_to_bytes(plan)
    assert data == plan_to_bytes(objects) == reference.plan_to_bytes(objects)
    assert plan.plan_id == objects.plan_id
    assert plan.deletes_anything == objects.deletes_anything
    assert summarize(columns, by_partition=BY_PARTITION) == reference.summarize(expected, by_partition=BY_PARTITION)
    figures, reference_figures = ActionFigures(), ActionFigures()
    figures.add(columns)
    reference_figures.add(expected)
    assert (figures.deleting_kinds, figures.unknown_size) == (reference_figures.deleting_kinds,
                                                               reference_figures.unknown_size)
    assert actions_table("p", columns).equals(actions_table("p", expected))


PAIMON_ROWS = st.lists(st.tuples(st.sampled_from([ActionKind.DATA_FILE, ActionKind.MANIFEST, ActionKind.SNAPSHOT]),
                                 PATHS, st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
                                 st.one_of(st.none(), st.integers(0, 2**40)), st.one_of(st.none(), PATHS)),
                       unique_by=lambda row: (row[0], row[1]), min_size=1, max_size=40)


def read_back(rows):
    """The plan of ``rows`` (Paimon's kinds) as read from its plan file, and the actions written."""
    written = make([Action(kind, path, snapshot_id=sid, size=size, partition=partition)
                    for kind, path, sid, size, partition in rows])
    return plan_from_bytes(plan_to_bytes(written)), written.actions


@settings(max_examples=200)
@given(PAIMON_ROWS)
def test_a_plan_read_from_its_file_journals_the_columns_its_id_was_checked_over(rows):
    read, written = read_back(rows)
    assert isinstance(read.actions, FileActions) and read.actions == written
    assert actions_table("p", read.actions).equals(actions_table("p", written))
    assert read.actions.take_arrays() is None  # handed over: the actions keep no copy
    assert actions_table("p", read.actions).equals(actions_table("p", written))  # rebuilt from the actions
    copy = pickle.loads(pickle.dumps(read.actions))  # what goes elsewhere is the actions, not the columns
    assert type(copy) is tuple and copy == read.actions


def test_file_actions_refuse_columns_of_another_length():
    read, written = read_back([(ActionKind.DATA_FILE, "data/a.parquet", 1, 10, None)])
    with pytest.raises(ValueError, match="one row per action"):
        FileActions(written * 2, pa.table(read.actions.take_arrays(), schema=SCHEMA))


def test_columns_not_numbered_from_zero_are_refused():
    columns, _ = found([(ExpireKind.DATA_FILE, "a", 1, 1, None), (ExpireKind.DATA_FILE, "b", 1, 1, None)])
    with pytest.raises(ValueError, match=r"^actions must be canonical \(numbered 0..n-1 in order\); use "
                                         r"canonical_actions$"):
        plan_of(columns[1:])
    with pytest.raises(IndexError):
        columns[2]


def test_a_partition_the_columns_cannot_hold_keeps_the_actions_as_objects():
    rows = [(ExpireKind.DATA_FILE, "a", 1, 1, "p=\udc80"), (ExpireKind.DATA_FILE, "b", 1, 1, "p=1")]
    columns, expected = found(rows)
    assert type(columns) is tuple
    assert columns == expected


@settings(max_examples=200)
@given(st.lists(ACTIONS, max_size=40))
def test_canonical_actions_as_columns_are_the_canonical_actions(acts):
    """Kinds of every format and plain labels, repeated paths included: the same actions either way, and where
    they are columns, the same plan file."""
    columns, expected = canonical_actions(acts, as_columns=True), canonical_actions(acts)
    assert columns == expected
    assert [type(a.kind) for a in columns] == [type(a.kind) for a in expected]
    assert values(columns, "path") == values(expected, "path")
    if isinstance(columns, ColumnActions):
        phases = tuple(PhaseSpec(f"phase {i}", "bulk") for i in range(1, 8))
        assert plan_to_bytes(plan_of(columns, phases)) == plan_to_bytes(plan_of(expected, phases))


def test_columns_of_one_label_but_another_kind_type_differ():
    rows = [(ExpireKind.DATA_FILE, "a", 1, 1, None)]
    columns, _ = found(rows)
    assert columns == found(rows)[0]
    other = ColumnActions(pa.Table.from_arrays(columns.arrays(), schema=SCHEMA), {"data-file": "data-file"})
    assert other != columns and list(other) == list(columns)


PAIMON_ACTIONS = st.builds(
    Action, kind=st.sampled_from(list(ActionKind)), path=PATHS,
    snapshot_id=st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
    partition=st.one_of(st.none(), PATHS),
    bucket=st.one_of(st.none(), st.integers(-2, 3), st.just(2**40)),  # 2**40: more than the column holds
    size=st.one_of(st.none(), st.integers(0, 2**40)),
    source=st.one_of(st.none(), PATHS),
    depth=st.integers(0, 3),
)


@settings(max_examples=300)
@given(st.lists(PAIMON_ACTIONS, max_size=40), st.integers(1, 9))
def test_actions_gathered_as_columns_are_their_canonical_actions(acts, batch):
    builder = ActionColumnsBuilder(batch)
    for a in acts:
        builder.add(a.kind, a.path, snapshot_id=a.snapshot_id, partition=a.partition, bucket=a.bucket, size=a.size,
                    source=a.source, depth=a.depth)
    assert list(builder) == acts
    got, want = builder.canonical(), canonical_actions(acts, as_columns=True)
    assert type(got) is type(want) and got == want and tuple(got) == tuple(want)
    if isinstance(want, ColumnActions):  # else a value the plan file cannot hold: no plan is written
        assert plan_to_bytes(plan_of(got, PAIMON_PHASES)) == plan_to_bytes(plan_of(want, PAIMON_PHASES))


def test_an_action_gathered_as_columns_is_checked_as_the_action_is():
    builder = ActionColumnsBuilder()
    with pytest.raises(ValueError, match="an action needs a path"):
        builder.add(ActionKind.DATA_FILE, "")
    with pytest.raises(ValueError, match="needs a verb"):
        builder.add("no-such-kind", "a")


@settings(max_examples=200)
@given(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), max_size=40), st.integers(1, 3000),
       st.sampled_from([pa.int64(), pa.string()]))
def test_shared_column_values_are_the_values_each_distinct_one_a_single_object(distinct, n, typ):
    """A column of few distinct values (a plan's snapshot ids, sizes, partitions) read with ``shared``: the same
    values as read plainly, in order, nulls as None, and equal values one object once the column is long."""
    from lakesweep.engine.plan_columns import _SHARE_MIN, _SHARE_RATIO, column_values

    pool = [v if v is None or typ == pa.int64() else f"part={v}" for v in distinct] or [None]
    rows = [pool[i % len(pool)] for i in range(n)]
    col = pa.chunked_array([pa.array(rows[:n // 2], typ), pa.array(rows[n // 2:], typ)], typ)
    got = column_values(col, shared=True)
    assert got == column_values(col) == rows
    if n >= _SHARE_MIN and len(set(rows)) <= n // _SHARE_RATIO:
        first = {}
        assert all(first.setdefault(v, v) is v for v in got)


def test_a_column_of_mostly_distinct_values_is_read_plainly_with_shared():
    from lakesweep.engine.plan_columns import column_values

    rows = [f"data/f{i}.parquet" for i in range(5000)]
    assert column_values(pa.array(rows), shared=True) == rows


FIELD_VALUES = st.tuples(
    st.one_of(st.sampled_from(list(ExpireKind)), st.sampled_from(list(ActionKind)), st.sampled_from(["", "k"]),
              st.none()),
    st.one_of(PATHS, st.just(""), st.none()), st.one_of(st.none(), st.integers()), st.one_of(st.none(), PATHS),
    st.one_of(st.none(), st.integers()), st.one_of(st.none(), st.integers()), st.one_of(st.none(), PATHS),
    st.integers(0, 9), st.integers(0, 99),
    st.one_of(st.sampled_from(list(Verb)), st.sampled_from([v.value for v in Verb]), st.none()),
    st.integers(0, 4))


def built_as_action_builds(rows) -> list | str:
    try:
        return [Action(*row) for row in rows]
    except ValueError as e:
        return str(e)


@settings(max_examples=300)
@given(st.lists(FIELD_VALUES, max_size=12))
def test_actions_built_from_columns_are_the_actions_and_refused_as_they_are(rows):
    expected = built_as_action_builds(rows)
    columns = [list(column) for column in zip(*rows)] or [[] for _ in range(11)]
    if isinstance(expected, str):
        with pytest.raises(ValueError) as refused:
            built_actions(*columns)
        assert str(refused.value) == expected
        return
    built = built_actions(*columns)
    assert built == expected
    assert [(type(a.kind), type(a.verb), a.phase) for a in built] == [(type(a.kind), type(a.verb), a.phase)
                                                                      for a in expected]
    assert [hash(a) for a in built] == [hash(a) for a in expected]


def test_actions_built_from_checked_columns_fill_their_slots_without_the_dataclass_init(monkeypatch):
    calls = []
    real = Action.__post_init__
    monkeypatch.setattr(Action, "__post_init__", lambda self: (calls.append(self.path), real(self))[1])
    checked = [[ExpireKind.DATA_FILE] * 2, ["a", "b"], [1, 2], [None] * 2, [None] * 2, [3, 4], [None] * 2, [0, 0],
               [0, 1], [Verb.DELETE_FILE] * 2, [1, 1]]
    assert built_actions(*checked) == [Action(ExpireKind.DATA_FILE, p, s, None, None, z, None, 0, i, Verb.DELETE_FILE, 1)
                                       for i, (p, s, z) in enumerate([("a", 1, 3), ("b", 2, 4)])]
    assert calls == ["a", "b"]  # the two actions compared against, built by the dataclass
    calls.clear()
    unchecked = [column[:] for column in checked]
    unchecked[10] = [1, 0]  # a phase left for the kind to give
    assert [a.phase for a in built_actions(*unchecked)] == [1, kind_spec(ExpireKind.DATA_FILE).phase]
    assert calls == ["a", "b"]
