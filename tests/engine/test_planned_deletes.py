"""``engine.formats.planned_deletes``: the file deletes among some actions, by location, the same mapping
through apply's index of every target as the dict it stands for, whatever the plan names twice."""

from hypothesis import given, settings
from hypothesis import strategies as st

from lakesweep.engine.formats import TargetIndex, _PlannedDeletes, planned_deletes
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.plan import Action, Verb
from tests.engine.test_plan_io import make

KINDS = [ActionKind.DATA_FILE, ActionKind.SNAPSHOT, ActionKind.EMPTY_DIR, ActionKind.WRITE_EARLIEST_HINT]
LOCATIONS = st.sampled_from([f"/wh/t/f{i}" for i in range(12)])


def reference(actions, targets):
    return {targets[a.action_id]: a for a in actions if a.verb is Verb.DELETE_FILE}


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.text("abc", min_size=1, max_size=4)), min_size=1, max_size=12,
                unique=True), st.data())
def test_the_view_through_the_targets_index_is_the_dict_of_locations(rows, data):
    plan = make([Action(kind, f"p/{name}", snapshot_id=1, depth=1 if kind is ActionKind.EMPTY_DIR else None)
                 for kind, name in rows])
    targets = data.draw(st.lists(LOCATIONS, min_size=len(plan.actions), max_size=len(plan.actions)))
    chosen = sorted(data.draw(st.lists(st.sampled_from(plan.actions), unique_by=lambda a: a.action_id)),
                    key=lambda a: a.action_id)  # apply's gates take actions in plan order
    found = planned_deletes(plan, chosen, targets, TargetIndex(targets))
    expected = reference(chosen, targets)
    assert dict(found) == expected
    assert len(found) == len(expected) and bool(found) == bool(expected)
    for location in [f"/wh/t/f{i}" for i in range(13)]:
        assert (location in found) == (location in expected)
        assert (location in found.keys()) == (location in expected)
    assert list(found) == list(expected) and isinstance(found, _PlannedDeletes)


def test_a_location_two_actions_name_is_looked_at_under_each():
    plan = make([Action(ActionKind.DATA_FILE, "p/a", snapshot_id=1), Action(ActionKind.SNAPSHOT, "p/b", snapshot_id=1)])
    data, snapshot = sorted(plan.actions, key=lambda a: a.kind != ActionKind.DATA_FILE)
    targets = ["/wh/t/x", "/wh/t/x"]
    index = TargetIndex(targets)
    assert index.get("/wh/t/x") == 1 and index.ids("/wh/t/x") == [0, 1]
    for chosen in ([data], [snapshot]):
        found = planned_deletes(plan, chosen, targets, index)
        assert "/wh/t/x" in found and found["/wh/t/x"] == chosen[0] and len(found) == 1


def test_without_the_index_it_is_the_dict():
    plan = make([Action(ActionKind.DATA_FILE, "p/a", snapshot_id=1)])
    found = planned_deletes(plan, plan.actions, ["/wh/t/a"])
    assert found == {"/wh/t/a": plan.actions[0]} and type(found) is dict


@settings(max_examples=300)
@given(st.lists(LOCATIONS, min_size=1, max_size=16), st.data())
def test_a_location_is_done_when_any_action_naming_it_is(targets, data):
    """Apply's requirements ask whether this apply carried a location out: any action naming it counts, as a
    set of the done actions' locations would say, not only the last action naming it."""
    from lakesweep.applier.apply import _DoneLocations

    done = set(data.draw(st.lists(st.integers(0, len(targets) - 1), unique=True)))
    index = TargetIndex(targets)
    view = _DoneLocations(index, done)
    for location in [f"/wh/t/f{i}" for i in range(13)]:
        naming = [i for i, t in enumerate(targets) if t == location and i in done]
        assert (location in view) == bool(naming)
        assert index.last_in(location, done) == (naming[-1] if naming else None)
