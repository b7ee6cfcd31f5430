"""Typed plan scopes (format 3) and action-kind specs: registered frozen types, read back from a plan's header."""

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.iceberg import kinds as iceberg_kinds
from lakesweep.engine.iceberg.scopes import CompactScope
from lakesweep.engine.paimon import kinds as paimon_kinds
from lakesweep.engine.paimon.kinds import EXPIRE_PHASES, ActionKind, ChangelogKind, OrphanKind, TagKind
from lakesweep.engine.paimon.requirements import AssertTableIdentity
from lakesweep.engine.paimon.scopes import ExpireScope, PartitionScope
from lakesweep.engine.plan import Action, CleanupPlan, Verb, canonical_actions, compute_plan_id, decode_scope, kind_spec
from lakesweep.engine.plan_io import HEADER_KEY, ID_KEY, plan_from_bytes, plan_to_bytes

SAMPLE = [Action(ActionKind.SNAPSHOT, "snapshot/snapshot-1", snapshot_id=1),
          Action(ActionKind.WRITE_EARLIEST_HINT, "snapshot/EARLIEST", snapshot_id=4)]


def make(actions) -> CleanupPlan:
    return CleanupPlan(kind="expire", table_location="/wh/t", table_identity="schema:x", branch="main", now_ms=123,
                       options={}, scope=ExpireScope(begin=1, end=4, earliest_hint=4),
                       requirements=(AssertTableIdentity("schema:x", "/wh/t", "main"),), phases=EXPIRE_PHASES,
                       actions=canonical_actions(actions))


def test_a_plan_reads_its_range_from_its_typed_scope():
    plan = make(SAMPLE)
    assert (plan.begin, plan.end, plan.earliest_hint) == (1, 4, 4)


def test_a_plan_refuses_an_untyped_scope():
    with pytest.raises(TypeError, match=r"a paimon expire plan's scope must be its typed Scope "
                                        r"\(engine.paimon.scopes\), not dict; an untyped scope is decoded only "
                                        r"from an old plan header \(decode_scope\)"):
        dataclasses.replace(make(SAMPLE), scope={"begin": 1, "end": 4, "earliest_hint": 4})


def test_a_scope_is_read_by_attribute_not_by_key():
    scope = make(SAMPLE).scope
    with pytest.raises(TypeError, match="not subscriptable"):
        scope["begin"]
    assert scope.to_json() == {"type": "paimon.expire", "begin": 1, "end": 4, "earliest_hint": 4}


def test_the_header_tags_the_scope_with_its_type():
    assert make(SAMPLE).header()["scope"] == {"type": "paimon.expire", "begin": 1, "end": 4, "earliest_hint": 4}
    assert make(SAMPLE).header()["format_version"] == 3


def test_a_scope_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        make(SAMPLE).scope.begin = 2


def test_a_scope_round_trips_through_its_json_form():
    scope = PartitionScope(snapshot=3, strategy="values-time", cutoff="2024-01-02 00:00:00", time_zone="UTC",
                           partitions=[{"partition": "dt=2024-01-01", "row": "00"}])
    assert decode_scope(json.loads(json.dumps(scope.to_json())), fmt="paimon", kind="partitions") == scope


def test_a_sequence_field_holding_another_type_is_refused():
    with pytest.raises(ValueError, match=r"scope paimon.tags: snapshots_gone is \['2'\]"):
        decode_scope({"tags": [], "snapshots_gone": ["2"], "earliest": 1, "latest": 2}, fmt="paimon", kind="tags",
                     tagged=False)


@pytest.mark.parametrize("obj, message", [
    ({"type": "paimon.expire", "begin": 1, "end": 4}, "missing 1 required positional argument: 'earliest_hint'"),
    ({"type": "paimon.expire", "begin": 1, "end": 4, "earliest_hint": 4, "extra": 1}, "unexpected keyword"),
    ({"type": "paimon.expire", "begin": "1", "end": 4, "earliest_hint": 4}, "scope paimon.expire: begin is '1'"),
    ({"type": "paimon.orphans", "older_than_ms": 5}, "tagged 'paimon.orphans', not 'paimon.expire'"),
    ({"begin": 1, "end": 4, "earliest_hint": 4}, "tagged None, not 'paimon.expire'"),
])
def test_a_malformed_scope_is_refused(obj, message):
    with pytest.raises((TypeError, ValueError), match=message):
        decode_scope(obj, fmt="paimon", kind="expire")


def test_a_plan_kind_without_a_scope_type_is_refused():
    with pytest.raises(ValueError, match="paimon plans of kind 'compact' have no scope type"):
        decode_scope({}, fmt="paimon", kind="compact", tagged=False)


def test_a_plan_cannot_hold_another_kinds_scope():
    with pytest.raises(ValueError, match="a paimon expire plan cannot hold a iceberg.compact scope"):
        dataclasses.replace(make(SAMPLE), scope=CompactScope(
            catalog="c", identifier="ns.t", current_snapshot_id=1, snapshot_id=1, sequence_number=1, schema_id=0,
            refs={}, skipped=None, target_bytes=1, min_input_files=2, apply_deletes=True, data_files=0,
            small_files=0, bins=(), delete_manifests=()))


def _rewritten(plan, edit) -> bytes:
    """The plan's file with its header edited and the id recomputed (what a careful forger would write)."""
    table = pq.read_table(pa.BufferReader(plan_to_bytes(plan)))
    meta = dict(table.schema.metadata)
    header = json.loads(meta[HEADER_KEY])
    edit(header)
    meta[HEADER_KEY] = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    meta[ID_KEY] = compute_plan_id(header, plan.actions).encode()
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(meta), sink)
    return sink.getvalue().to_pybytes()


def test_a_version_3_plan_with_an_untagged_scope_is_refused():
    data = _rewritten(make(SAMPLE), lambda h: h["scope"].pop("type"))
    with pytest.raises(PlanRejected, match="the plan is malformed .*tagged None, not 'paimon.expire'"):
        plan_from_bytes(data)


def test_a_version_2_header_keeps_its_untyped_scope_and_its_id():
    def as_v2(h):
        h["format_version"] = 2
        h["scope"].pop("type")

    data = _rewritten(make(SAMPLE), as_v2)
    plan = plan_from_bytes(data)
    assert plan.format_version == 2 and plan.scope == ExpireScope(begin=1, end=4, earliest_hint=4)
    assert plan.header()["scope"] == {"begin": 1, "end": 4, "earliest_hint": 4}  # as written, for its id
    with pytest.raises(PlanRejected, match="is in format version 2; lakesweep writes only version 3"):
        plan_to_bytes(plan)


def test_every_action_kind_has_one_spec_and_a_plain_label_none():
    for module in (paimon_kinds, iceberg_kinds):
        assert set(module.SPECS) == set(module.KINDS)
        for label, kind in module.KINDS.items():
            assert kind_spec(kind) is module.SPECS[label] and kind_spec(kind).label == label
    assert kind_spec("data-file") is None


def test_specs_of_shared_labels_stay_per_format():
    assert kind_spec(ActionKind.DATA_FILE).phase == 1 and kind_spec(iceberg_kinds.ExpireKind.DATA_FILE).phase == 2
    assert kind_spec(OrphanKind.ORPHAN_DATA_FILE).by_name
    assert not kind_spec(iceberg_kinds.OrphanKind.ORPHAN_DATA_FILE).by_name


def test_specs_give_the_place_of_tag_and_changelog_files():
    assert kind_spec(TagKind.TAG_MANIFEST).place == "manifest"
    assert kind_spec(ChangelogKind.EMPTY_DIR).place == "empty-dir"
    assert kind_spec(ChangelogKind.CHANGELOG_META).place is None


def test_an_action_takes_its_verb_phase_and_order_from_its_spec():
    a = Action(ActionKind.EMPTY_DIR, "dt=a/bucket-0", depth=2)
    assert (a.verb, a.phase) == (Verb.DELETE_EMPTY_DIR, 3)
    assert a.sort_key() == (3, 3, -2, "dt=a/bucket-0")
    with pytest.raises(ValueError, match="action kind 'k' needs a verb"):
        Action("k", "p")
