"""The columnar plan codec agrees with the straightforward one (tests/support/plan_reference.py) byte for
byte: the canonical order, the plan id, the file, and reading back; plans written and read in batches."""

import functools
import itertools

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesweep.engine import plan_io
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.iceberg.kinds import CompactKind, ExpireKind
from lakesweep.engine.paimon.kinds import ActionKind, OrphanKind
from lakesweep.engine.plan import Action, Verb, canonical_actions, compute_plan_id
from lakesweep.engine.plan_columns import ActionColumnsBuilder
from lakesweep.engine.plan_io import (ROW_GROUP, PlanWriter, aligned_batches, iter_action_batches, plan_from_bytes, plan_to_bytes,
                                      verify_plan_file, write_plan)
from lakesweep.engine.purge import PurgeKind
from tests.engine.test_plan_io import make
from tests.support import plan_reference as reference

PATHS = st.text(alphabet=st.sampled_from("ab/=-_.0\u00e9\u00ff\u0100\u4e2d\U0001f600\"\\\x01 "), min_size=1, max_size=8)
KINDS = st.sampled_from([*[k for k in ActionKind if k not in (ActionKind.WRITE_CHANGELOG,)], *OrphanKind,
                         *ExpireKind, *CompactKind, *PurgeKind, "plain-label", "other-label"])
ACTIONS = st.builds(
    lambda kind, **kw: Action(kind, verb=Verb.DELETE_FILE if isinstance(kind, str) and type(kind) is str else None,
                              phase=3 if type(kind) is str else 0, **kw),
    kind=KINDS, path=PATHS,
    snapshot_id=st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
    partition=st.one_of(st.none(), PATHS),
    bucket=st.one_of(st.none(), st.integers(-2, 3)),
    size=st.one_of(st.none(), st.integers(0, 2**40)),
    source=st.one_of(st.none(), PATHS),
    depth=st.integers(0, 3),
)


@settings(max_examples=300)
@given(st.lists(ACTIONS, max_size=40))
def test_canonical_order_and_id_are_the_reference_ones(acts):
    ordered = canonical_actions(acts)
    assert ordered == reference.canonical_actions(acts)
    header = {"format_version": 3, "x": 1}
    assert compute_plan_id(header, ordered) == reference.compute_plan_id(header, ordered)


COLUMN_ROWS = st.lists(st.tuples(
    st.sampled_from([*ExpireKind, *OrphanKind]), st.one_of(PATHS, st.sampled_from(["a", "b", "a/b"])),
    st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 9)),
    st.one_of(st.none(), PATHS)), max_size=40)


def gathered(rows, batch: int = 7):
    """The rows (kind, path, snapshot id, size, partition) gathered as an expiry gathers the files it finds
    (``ActionColumnsBuilder``, ``batch`` rows to an Arrow chunk), in canonical order."""
    builder = ActionColumnsBuilder(batch)
    for kind, path, sid, size, partition in rows:
        builder.add(kind, path, snapshot_id=sid, size=size, partition=partition)
    return builder.canonical()


@settings(max_examples=300)
@given(COLUMN_ROWS)
def test_actions_found_as_columns_are_the_reference_canonical_actions(rows):
    """Repeated (kind, path) pairs included: the earliest snapshot's action is kept, as ever."""
    acts = [Action(kind, path, snapshot_id=sid, size=size, partition=partition)
            for kind, path, sid, size, partition in rows]
    assert gathered(rows) == reference.canonical_actions(acts)


def test_a_lone_surrogate_path_is_ordered_and_hashed_as_before():
    acts = [Action("k", path, verb=Verb.DELETE_FILE, phase=1) for path in ("b\udc80", "b\ud7ff", "a", "b\U0001f600")]
    assert canonical_actions(acts) == reference.canonical_actions(acts)
    assert compute_plan_id({}, canonical_actions(acts)) == reference.compute_plan_id({}, canonical_actions(acts))


PLAN_ACTIONS = st.builds(
    Action, kind=st.sampled_from([k for k in ActionKind if k is not ActionKind.WRITE_CHANGELOG]), path=PATHS,
    snapshot_id=st.one_of(st.none(), st.integers(0, 2**40)), partition=st.one_of(st.none(), PATHS),
    bucket=st.one_of(st.none(), st.integers(-2, 100)), size=st.one_of(st.none(), st.integers(0, 2**40)),
    depth=st.integers(0, 5))


@settings(max_examples=100)
@given(st.lists(PLAN_ACTIONS, max_size=40), st.integers(1, 7))
def test_plan_bytes_and_reading_are_the_reference_ones(acts, batch):
    plan = make(acts)
    data = plan_to_bytes(plan)
    assert data == reference.plan_to_bytes(plan)
    assert plan_from_bytes(data) == reference.plan_from_bytes(data) == plan
    sink = pa.BufferOutputStream()
    with PlanWriter(sink, plan.header()) as writer:
        for start in range(0, len(plan.actions), batch):
            writer.write(plan.actions[start:start + batch])
    assert writer.plan_id == plan.plan_id and sink.getvalue().to_pybytes() == data


def _big_plan(n):
    return make([Action(ActionKind.DATA_FILE, f"dt={i % 7}/bucket-0/data-{i:08d}.parquet", snapshot_id=i % 5,
                        partition=f"dt={i % 7}", bucket=0, size=i) for i in range(n)])


@pytest.mark.slow
def test_a_plan_of_two_row_groups_is_written_in_batches_as_whole(tmp_path):
    plan = _big_plan(ROW_GROUP + 5000)
    data = plan_to_bytes(plan)
    assert data == reference.plan_to_bytes(plan)
    path = tmp_path / "p.plan"
    with PlanWriter(str(path), plan.header()) as writer:
        for start in range(0, len(plan.actions), 100_000):
            writer.write(plan.actions[start:start + 100_000])
    assert path.read_bytes() == data and writer.plan_id == plan.plan_id
    assert verify_plan_file(str(path)) == (plan.header(), plan.plan_id)
    assert sum(len(b) for b in iter_action_batches(str(path), 300_000)) == len(plan.actions)


@settings(max_examples=200)
@given(st.lists(st.integers(0, 40), max_size=12), st.sampled_from([4, 8, 16]))
def test_aligned_batches_are_the_rows_on_aligned_boundaries(sizes, align):
    rows = pa.array(range(sum(sizes)), pa.int64())
    batches, start = [], 0
    for n in sizes:
        batches.append(pa.record_batch([rows.slice(start, n)], names=["x"]))
        start += n
    out = list(aligned_batches(batches, align))
    assert [v for b in out for v in b.column(0).to_pylist()] == rows.to_pylist()
    assert all(b.num_rows % align == 0 for b in out[:-1]) and all(b.num_rows for b in out)


_ROWS = 10_000


@functools.lru_cache(maxsize=1)
def _wide_plan():
    return _big_plan(_ROWS)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=30))
@pytest.mark.slow
def test_row_groups_written_from_batches_of_any_size_are_the_whole_groups_bytes(sizes):
    """Row groups of 4,096 rows and pages of 2 KiB (made small), written from batches of any size, are the bytes
    ``pq.write_table`` writes for the whole plan in groups of that size: batch boundaries that are not on a
    multiple of ``ALIGN`` rows would cut the pages elsewhere."""
    assert plan_io.ALIGN == 1024

    plan = _wide_plan()
    whole, options = pq.write_table, plan_io._writer_options
    saved = plan_io.ROW_GROUP
    try:  # small pages too, so that each column chunk is cut into several
        plan_io.ROW_GROUP = 4096
        plan_io._writer_options = lambda: {**options(), "data_page_size": 2048}
        pq.write_table = functools.partial(whole, row_group_size=4096, data_page_size=2048)
        expected = reference.plan_to_bytes(plan)
        sink, start, batches = pa.BufferOutputStream(), 0, itertools.cycle(sizes)
        with PlanWriter(sink, plan.header()) as writer:
            while start < _ROWS:
                n = next(batches)
                writer.write(plan.actions[start:start + n])
                start += n
    finally:
        plan_io.ROW_GROUP, pq.write_table, plan_io._writer_options = saved, whole, options
    assert pq.ParquetFile(pa.BufferReader(expected)).num_row_groups == 3
    assert sink.getvalue().to_pybytes() == expected


def test_batches_read_back_the_actions_and_verify_the_id(tmp_path):
    plan = _big_plan(1000)
    path = str(tmp_path / "p.plan")
    write_plan(plan, path)
    batches = list(iter_action_batches(path, 300))
    assert [len(b) for b in batches] == [300, 300, 300, 100]
    assert tuple(a for b in batches for a in b) == plan.actions
    assert verify_plan_file(path, batch_size=64) == (plan.header(), plan.plan_id)


def test_an_edited_plan_is_refused_after_its_last_batch(tmp_path):
    plan, other = _big_plan(10), make([Action(ActionKind.DATA_FILE, "dt=x/bucket-0/other.parquet")])
    data = plan_to_bytes(plan)
    table = pq.read_table(pa.BufferReader(data))
    edited = table.set_column(1, table.schema.field("path"), pa.array(["dt=0/elsewhere.parquet"] * 10))
    path = tmp_path / "p.plan"
    pq.write_table(edited, str(path))
    with pytest.raises(PlanRejected, match=f"does not match its id {plan.plan_id}"):
        verify_plan_file(str(path))
    seen = []
    with pytest.raises(PlanRejected, match="the file was modified after it was written"):
        for batch in iter_action_batches(str(path), 4):
            seen.append(len(batch))
    assert seen == [4, 4, 2] and other.plan_id != plan.plan_id


def test_a_writer_refuses_actions_out_of_sequence():
    plan = _big_plan(3)
    with pytest.raises(ValueError, match="actions must be canonical"):
        PlanWriter(pa.BufferOutputStream(), plan.header()).write(plan.actions[1:])


def test_kinds_with_an_action_order_are_sorted_by_columns():
    from lakesweep.engine.plan import _column_order

    acts = [Action(ExpireKind.DATA_FILE, p) for p in ("z", "\u00e9", "a", "\U0001f600", "\uffff")]
    acts += [Action(ExpireKind.EXPIRE_SNAPSHOT, "m", snapshot_id=2), Action(ExpireKind.EXPIRE_SNAPSHOT, "l", snapshot_id=1)]
    order = _column_order(acts)
    assert [acts[i].path for i in order] == ["l", "m", "a", "z", "\u00e9", "\uffff", "\U0001f600"]
