"""Typed requirements: stored in the plan header with a type tag, read back equal, unknown tags refused."""

import json

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.plan import decode_requirement
from lakesweep.engine.paimon.requirements import (AssertBranches, AssertConsumersOutside, AssertSchemaId,
                                                  AssertSnapshotsPresent, AssertTableIdentity, AssertTagsBelow,
                                                  expire_requirements)
from lakesweep.engine.plan_io import plan_from_bytes, plan_from_header, plan_to_bytes

from tests.engine.test_plan_io import SAMPLE, make

EVERY = (
    AssertTableIdentity("schema:x", "/wh/t", "main"),
    AssertSchemaId(3),
    AssertBranches(("b", "a")),
    AssertTagsBelow(9, {"t2": 4, "t1": 2}),
    AssertConsumersOutside(1, 9, {"job": 5}),
    AssertSnapshotsPresent(9, (3, 1, 2), {9: "d" * 32, 1: "a" * 32}, 9),
    AssertSnapshotsPresent(9, (1,), None, None),
)


@pytest.mark.parametrize("req", EVERY, ids=lambda r: r.TYPE)
def test_a_requirement_is_stored_with_its_type_and_read_back_equal(req):
    stored = json.loads(json.dumps(req.to_json()))
    assert stored["type"] == req.TYPE and stored["type"].startswith("paimon.")
    assert decode_requirement(stored) == req


def test_requirements_are_normalized_so_equal_facts_store_equal():
    assert AssertBranches(("b", "a")).to_json() == AssertBranches(["a", "b"]).to_json()
    assert list(AssertSnapshotsPresent(9, (3, 1), None, 9).to_json()["snapshots"]) == [1, 3]


def test_a_plan_keeps_its_requirements_through_the_file():
    plan = make(SAMPLE)
    back = plan_from_bytes(plan_to_bytes(plan))
    assert back.requirements == plan.requirements and back.plan_id == plan.plan_id


def test_a_plan_that_deletes_nothing_requires_only_its_table():
    reqs = expire_requirements(identity="schema:x", location="/t", branch="main", begin=1, end=1, hint=1,
                               deletes=False, schema_id=0, branches=(), tags={}, consumers={},
                               consumer_changelog_only=False, snapshots=[], pins={})
    assert reqs == (AssertTableIdentity("schema:x", "/t", "main"),)


def test_consumers_do_not_bound_a_changelog_only_plan():
    kw = dict(identity="schema:x", location="/t", branch="main", begin=1, end=4, hint=4, deletes=True,
              schema_id=0, branches=(), tags={}, consumers={"c": 2}, snapshots=[1, 2, 3], pins={})
    types = [r.TYPE for r in expire_requirements(consumer_changelog_only=True, **kw)]
    assert "paimon.consumers-outside" not in types
    assert "paimon.consumers-outside" in [r.TYPE for r in expire_requirements(consumer_changelog_only=False, **kw)]


@pytest.mark.parametrize("stored, message", [
    ({"type": "paimon.no-such-check"}, "unknown requirement type 'paimon.no-such-check'"),
    ({"type": "iceberg.assert-ref"}, "unknown requirement type 'iceberg.assert-ref'"),
    ({"schema_id": 1}, "a requirement needs a type tag"),
    ({"type": "paimon.schema-id", "schema_id": 1, "extra": 2}, "unexpected keyword argument 'extra'"),
])
def test_a_plan_with_an_unreadable_requirement_is_refused(stored, message):
    plan = make(SAMPLE)
    header = plan.header()
    header["requirements"] = [stored]
    with pytest.raises(PlanRejected, match="the plan is malformed .*" + message.replace("(", r"\(")):
        plan_from_header(header, plan.actions, source="p.parquet")


@pytest.mark.parametrize("stored, message", [
    ({"type": "paimon.schema-id", "schema_id": "3"}, "requirement paimon.schema-id: schema_id is '3'"),
    ({"type": "paimon.schema-id", "schema_id": True}, "schema_id is True"),
    ({"type": "paimon.tags-below", "end": None, "tags": {}}, "end is None"),
    ({"type": "paimon.branches", "branches": [1]}, r"branches is \(1,\)"),
    ({"type": "paimon.table-identity", "identity": 7, "location": "/t", "branch": "main"}, "identity is 7"),
])
def test_a_requirement_with_values_of_another_type_is_refused(stored, message):
    with pytest.raises(ValueError, match=message):
        decode_requirement(stored)
