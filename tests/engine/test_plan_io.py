"""The plan's Parquet form: round trip, byte-identical determinism, refusal of edited or foreign files."""

import gc
import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.plan import Action, CleanupPlan, OptionValue, action_json, action_row, canonical_actions
from lakesweep.engine.paimon.kinds import EXPIRE_PHASES, ActionKind
from lakesweep.engine.paimon.requirements import expire_requirements
from lakesweep.engine.paimon.scopes import ExpireScope
from lakesweep.engine.plan_io import (HEADER_KEY, ID_KEY, plan_from_bytes, plan_to_bytes, read_plan, read_plan_header,
                                      write_plan)

REQUIREMENTS = expire_requirements(
    identity="schema:x", location="/wh/t", branch="main", begin=1, end=4, hint=4, deletes=True, schema_id=0,
    branches=(), tags={"t": 2}, consumers={"c": 5}, consumer_changelog_only=False, snapshots=[1, 2],
    pins={1: "a" * 32, 2: "b" * 32, 4: "c" * 32})


def make(actions, **kw):
    args = dict(
        kind="expire", table_location="/wh/t", table_identity="schema:x", branch="main", now_ms=123,
        options={"snapshot.num-retained.min": OptionValue(3, "flag")},
        scope=ExpireScope(begin=1, end=4, earliest_hint=4),
        requirements=REQUIREMENTS, phases=EXPIRE_PHASES, actions=canonical_actions(actions),
        stats={"warnings": []},
    )
    args.update(kw)
    return CleanupPlan(**args)


SAMPLE = [
    Action(ActionKind.SNAPSHOT, "snapshot/snapshot-2", snapshot_id=2),
    Action(ActionKind.DATA_FILE, "dt=a/bucket-0/data-1.parquet", snapshot_id=3, partition="dt=a", bucket=0, size=10),
    Action(ActionKind.SNAPSHOT, "snapshot/snapshot-1", snapshot_id=1),
    Action(ActionKind.MANIFEST, "manifest/manifest-x-0", snapshot_id=1, size=99),
    Action(ActionKind.WRITE_EARLIEST_HINT, "snapshot/EARLIEST", snapshot_id=4),
    Action(ActionKind.EMPTY_DIR, "dt=a", depth=1),
    Action(ActionKind.EMPTY_DIR, "dt=a/bucket-0", depth=2),
]


def test_actions_are_in_phase_order_with_stable_ids():
    plan = make(SAMPLE)
    assert [a.kind for a in plan.actions] == [
        ActionKind.DATA_FILE, ActionKind.EMPTY_DIR, ActionKind.EMPTY_DIR, ActionKind.MANIFEST,
        ActionKind.SNAPSHOT, ActionKind.SNAPSHOT, ActionKind.WRITE_EARLIEST_HINT,
    ]
    assert [a.path for a in plan.actions if a.kind == ActionKind.EMPTY_DIR] == ["dt=a/bucket-0", "dt=a"]
    assert [a.snapshot_id for a in plan.actions if a.kind == ActionKind.SNAPSHOT] == [1, 2]
    assert [a.action_id for a in plan.actions] == list(range(7))


def test_roundtrip_and_same_bytes(tmp_path):
    plan = make(SAMPLE)
    assert plan_to_bytes(plan) == plan_to_bytes(make(list(reversed(SAMPLE))))
    path = tmp_path / "p.parquet"
    assert write_plan(plan, str(path)) == plan.plan_id
    assert read_plan(str(path)) == plan


def test_a_plan_written_to_local_disk_goes_to_its_file_as_it_is_made_with_the_same_bytes(tmp_path, monkeypatch):
    import lakesweep.engine.plan_io as plan_io

    many = [Action(ActionKind.DATA_FILE, f"dt=a/bucket-0/data-{i:06d}.parquet", snapshot_id=1 + i % 3, size=i)
            for i in range(3000)]
    plan = make(many)
    expected = plan_to_bytes(plan)
    monkeypatch.setattr(plan_io, "ROW_GROUP", 1024)  # three row groups, each written as it fills
    monkeypatch.setattr(plan_io, "_BATCH", 512)
    expected_groups = plan_to_bytes(plan)
    assert pq.ParquetFile(pa.BufferReader(expected_groups)).metadata.num_row_groups == 3
    monkeypatch.setattr(plan_io.pa, "BufferOutputStream", None)  # nothing gathered in memory on the way
    path = tmp_path / "p.parquet"
    assert write_plan(plan, str(path)) == plan.plan_id
    assert path.read_bytes() == expected_groups and expected_groups != expected
    assert [p.name for p in tmp_path.iterdir()] == ["p.parquet"]
    assert read_plan(str(path)) == plan

def test_an_empty_plan_is_valid():
    plan = make([], scope=ExpireScope(begin=None, end=None, earliest_hint=None))
    again = plan_from_bytes(plan_to_bytes(plan))
    assert again == plan and again.is_empty and not again.deletes_anything


def test_edited_action_is_refused(tmp_path):
    plan = make(SAMPLE)
    table = pq.read_table(pa.BufferReader(plan_to_bytes(plan)))
    paths = table.column("path").to_pylist()
    paths[0] = "dt=a/bucket-0/someone-elses-file.parquet"
    edited = table.set_column(table.schema.get_field_index("path"), table.schema.field("path"), pa.array(paths))
    sink = pa.BufferOutputStream()
    pq.write_table(edited, sink)
    with pytest.raises(PlanRejected, match=f"does not match its id {plan.plan_id}"):
        plan_from_bytes(sink.getvalue().to_pybytes(), source="p.parquet")


def test_edited_header_is_refused():
    plan = make(SAMPLE)
    table = pq.read_table(pa.BufferReader(plan_to_bytes(plan)))
    meta = dict(table.schema.metadata)
    header = json.loads(meta[HEADER_KEY])
    header["table"]["location"] = "/wh/other"
    meta[HEADER_KEY] = json.dumps(header).encode()
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(meta), sink)
    with pytest.raises(PlanRejected, match="the file was modified after it was written"):
        plan_from_bytes(sink.getvalue().to_pybytes())


def test_future_format_version_is_refused():
    plan = make(SAMPLE)
    table = pq.read_table(pa.BufferReader(plan_to_bytes(plan)))
    meta = dict(table.schema.metadata)
    header = json.loads(meta[HEADER_KEY])
    header["format_version"] = 99
    meta[HEADER_KEY] = json.dumps(header).encode()
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(meta), sink)
    with pytest.raises(PlanRejected, match="plan format version 99 is not supported"):
        plan_from_bytes(sink.getvalue().to_pybytes())


def test_other_files_are_refused(tmp_path):
    with pytest.raises(PlanRejected, match="not a readable Parquet file"):
        plan_from_bytes(b"hello")
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"a": [1]}), sink)
    with pytest.raises(PlanRejected, match="not a lakesweep plan"):
        plan_from_bytes(sink.getvalue().to_pybytes())
    with pytest.raises(PlanRejected, match="does not exist"):
        read_plan(str(tmp_path / "missing.parquet"))
    assert ID_KEY



def test_a_plan_header_is_read_from_the_footer_with_the_id_the_file_states(tmp_path):
    plan = make(SAMPLE)
    path = tmp_path / "p.parquet"
    write_plan(plan, str(path))
    header = read_plan_header(str(path))
    assert header.actions == () and header.header() == plan.header() and header.plan_id == plan.plan_id
    # an edited action: the header still states the old id, which read_plan refuses to act on
    table = pq.read_table(str(path))
    paths = table.column("path").to_pylist()
    paths[0] = "dt=a/bucket-0/someone-elses-file.parquet"
    edited = tmp_path / "edited.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("path"), table.schema.field("path"), pa.array(paths)),
                   str(edited))
    assert read_plan_header(str(edited)).plan_id == plan.plan_id
    with pytest.raises(PlanRejected, match=f"does not match its id {plan.plan_id}"):
        read_plan(str(edited))


def test_a_plan_header_is_refused_as_read_plan_refuses_it(tmp_path):
    not_parquet = tmp_path / "hello.parquet"
    not_parquet.write_bytes(b"hello")
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), str(other))
    for path, message in ((not_parquet, "not a readable Parquet file"), (other, "not a lakesweep plan"),
                          (tmp_path / "missing.parquet", "does not exist"), (tmp_path, "is not a regular file")):
        with pytest.raises(PlanRejected, match=message):
            read_plan_header(str(path))
        with pytest.raises(PlanRejected, match=message):
            read_plan(str(path))


kinds = st.sampled_from([k for k in ActionKind if k not in (ActionKind.WRITE_CHANGELOG, ActionKind.WRITE_EARLIEST_HINT)])
actions = st.builds(
    Action,
    kind=kinds,
    path=st.text(alphabet="abc/=-_.0123", min_size=1, max_size=12),
    snapshot_id=st.one_of(st.none(), st.integers(0, 2**40)),
    partition=st.one_of(st.none(), st.text(max_size=8)),
    bucket=st.one_of(st.none(), st.integers(-2, 100)),
    size=st.one_of(st.none(), st.integers(0, 2**40)),
    depth=st.integers(0, 5),
)


@given(st.lists(actions, max_size=30), st.integers(0, 2**50))
def test_property_roundtrip_and_determinism(acts, now):
    plan = make(acts, now_ms=now)
    data = plan_to_bytes(plan)
    assert plan_to_bytes(make(list(reversed(acts)), now_ms=now)) == data
    assert plan_from_bytes(data) == plan


def _json_plan_id(header, acts) -> str:
    """The plan id as the format defines it: the header's sorted compact JSON, then for every action a
    newline and its row as compact JSON, hashed with SHA-256 and cut to 32 hex digits."""
    h = hashlib.sha256(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    for a in acts:
        h.update(b"\n" + json.dumps(action_row(a), separators=(",", ":")).encode())
    return h.hexdigest()[:32]


any_text = st.text(max_size=12)  # quotes, backslashes, control characters, non-ASCII and surrogates


@given(st.lists(st.builds(
    Action,
    kind=kinds,
    path=any_text.filter(bool),
    snapshot_id=st.one_of(st.none(), st.integers(-2**70, 2**70)),
    partition=st.one_of(st.none(), any_text),
    bucket=st.one_of(st.none(), st.integers(-2, 100), st.booleans()),
    size=st.one_of(st.none(), st.integers(0, 2**70), st.floats(allow_nan=False, allow_infinity=False)),
    source=st.one_of(st.none(), any_text.filter(bool)),
    depth=st.integers(0, 5),
), max_size=20))
def test_plan_id_is_the_json_of_every_action_row(acts):
    acts = [a for a in acts if a.kind != ActionKind.WRITE_CHANGELOG or a.source]
    plan = make(acts)
    assert plan.plan_id == _json_plan_id(plan.header(), plan.actions)
    for a in plan.actions:
        assert action_json(a) == json.dumps(action_row(a), separators=(",", ":"))


def test_plan_id_of_a_known_plan_is_unchanged():
    # Fixed: a plan file written by any earlier lakesweep of this format (3) must keep verifying. Version-1
    # and version-2 plan ids are checked on checked-in files by tests/compat.
    assert make(SAMPLE).plan_id == _json_plan_id(make(SAMPLE).header(), make(SAMPLE).actions)
    assert make(SAMPLE).plan_id == "53c380eba3b18932ce3150355fb9602e"


def test_reading_a_plan_leaves_the_garbage_collector_as_it_found_it(monkeypatch):
    data = plan_to_bytes(make(SAMPLE))
    seen, real_disable = [], gc.disable
    monkeypatch.setattr(gc, "disable", lambda: (seen.append("paused"), real_disable()))
    assert gc.isenabled()
    plan_from_bytes(data)
    assert gc.isenabled() and seen == ["paused"]  # paused while the actions were built, then running again
    gc.disable()
    try:
        plan_from_bytes(data)
        assert not gc.isenabled()  # a caller's pause is not ended by it
    finally:
        gc.enable()
