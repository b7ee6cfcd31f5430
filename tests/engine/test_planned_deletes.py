"""``engine.formats.planned_deletes``: the file deletes among some actions, by location, the same mapping
through apply's index of every target as the dict it stands for, whatever the plan names twice."""

from hypothesis import given, settings
from hypothesis import strategies as st

from lakesweep.engine.formats import Locations, TargetIndex, Targets, _PlannedDeletes, planned_deletes
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.plan import Action, Verb
from tests.engine.test_plan_io import make

KINDS = [ActionKind.DATA_FILE, ActionKind.SNAPSHOT, ActionKind.EMPTY_DIR, ActionKind.WRITE_EARLIEST_HINT]
LOCATIONS = st.sampled_from([f"/wh/t/f{i}" for i in range(10)] + ["/wh/other/f10", "s3://b/wh/t/f11"])
PROBES = [f"/wh/t/f{i}" for i in range(13)] + ["/wh/other/f10", "s3://b/wh/t/f11", "f1", "/wh/t", "/wh/t/"]


def held(locations: list[str], as_targets: bool):
    """The locations as ``verify_paths`` returns them (``Targets`` under the root ``/wh/t``), or the list."""
    if not as_targets:
        return locations
    targets = Targets("/wh/t")
    for location in locations:
        targets.append(location, location.rsplit("/", 1)[-1])
    assert targets == locations and list(targets) == locations
    return targets


def reference(actions, targets):
    return {targets[a.action_id]: a for a in actions if a.verb is Verb.DELETE_FILE}


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.text("abc", min_size=1, max_size=4)), min_size=1, max_size=12,
                unique=True), st.data())
def test_the_view_through_the_targets_index_is_the_dict_of_locations(rows, data):
    plan = make([Action(kind, f"p/{name}", snapshot_id=1, depth=1 if kind is ActionKind.EMPTY_DIR else None)
                 for kind, name in rows])
    targets = held(data.draw(st.lists(LOCATIONS, min_size=len(plan.actions), max_size=len(plan.actions))),
                   data.draw(st.booleans()))
    chosen = sorted(data.draw(st.lists(st.sampled_from(plan.actions), unique_by=lambda a: a.action_id)),
                    key=lambda a: a.action_id)  # apply's gates take actions in plan order
    found = planned_deletes(plan, chosen, targets, TargetIndex(targets))
    expected = reference(chosen, targets)
    assert dict(found) == expected
    assert len(found) == len(expected) and bool(found) == bool(expected)
    for location in PROBES:
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
@given(st.lists(LOCATIONS, min_size=1, max_size=16), st.booleans(), st.data())
def test_a_location_is_done_when_any_action_naming_it_is(locations, as_targets, data):
    """Apply's requirements ask whether this apply carried a location out: any action naming it counts, as a
    set of the done actions' locations would say, not only the last action naming it."""
    targets = held(locations, as_targets)
    done = set(data.draw(st.lists(st.integers(0, len(targets) - 1), unique=True)))
    index = TargetIndex(targets)
    view = Locations(index, done)
    for location in PROBES:
        naming = [i for i, t in enumerate(targets) if t == location and i in done]
        assert (location in view) == bool(naming)
        assert index.last_in(location, done) == (naming[-1] if naming else None)


@settings(max_examples=300)
@given(st.lists(LOCATIONS, min_size=1, max_size=16), st.booleans(), st.data())
def test_the_locations_of_some_actions_through_the_index_are_the_set_of_their_targets(locations, as_targets, data):
    """``Locations``, apply's stand-in for the set of the locations some actions name (the deleted locations
    its verify checks): the same members, size and order as the set built from the targets."""
    from lakesweep.engine.formats import locations_of

    targets = held(locations, as_targets)
    ids = sorted(set(data.draw(st.lists(st.integers(0, len(targets) - 1)))))
    actions = [Action(ActionKind.DATA_FILE, f"p/{i}", snapshot_id=1, action_id=i) for i in ids]
    expected = {targets[i]: None for i in ids}
    index = TargetIndex(targets)
    view = locations_of(actions, targets, index)
    assert isinstance(view, Locations)
    assert len(view) == len(expected) and bool(view) == bool(expected) and list(view) == list(expected)
    assert view == set(expected)
    for location in PROBES:
        assert (location in view) == (location in expected)
    assert locations_of(actions, targets) == set(expected)  # without the index: the set itself


def test_targets_hold_a_location_under_the_root_as_the_actions_own_path():
    """``verify_paths``'s targets keep no second copy of a path under the table root: the action's own string
    is held, and the full location joined again when read; other locations are held whole."""
    path = "data/part=p1/f.parquet"
    targets = Targets("s3://b/wh/t")
    for full, own in [("s3://b/wh/t/" + path, path), ("s3://b/wh/ext/x.parquet", "s3://b/wh/ext/x.parquet"),
                      ("s3://b/wh/t/metadata/m.avro", "s3://b/wh/t/metadata/m.avro")]:
        targets.append(full, own)
    expected = ["s3://b/wh/t/" + path, "s3://b/wh/ext/x.parquet", "s3://b/wh/t/metadata/m.avro"]
    assert targets == expected and len(targets) == 3 and targets[-1] == expected[-1] and targets[1:] == expected[1:]
    assert list(targets.entries()) == [(1, path), (0, expected[1]), (1, "metadata/m.avro")]
    assert next(iter(targets.entries()))[1] is path
    index = TargetIndex(targets)
    assert [index.get(t) for t in expected] == [0, 1, 2]
    assert index.get(path) is None and index.get("s3://b/wh/t/") is None and index.get("s3://b/wh/t") is None


def test_the_ids_holding_a_marker_are_found_again_after_more_locations_come():
    targets = Targets("/wh/t")
    for full in ["/wh/t/snapshot/snapshot-1", "/wh/ext/snapshot/snapshot-2", "/wh/t/dt=a/f", "/wh/t/snapshot/EARLIEST"]:
        targets.append(full, full[len("/wh/t/"):] if full.startswith("/wh/t/") else full)
    assert targets.holding("/snapshot-") == [0, 1] and targets.holding("/snapshot-") is targets.holding("/snapshot-")
    assert targets.holding("dt=") == [2]
    targets.append("/wh/t/branch/branch-b/snapshot/snapshot-3", "branch/branch-b/snapshot/snapshot-3")
    assert targets.holding("/snapshot-") == [0, 1, 4]
    assert targets.holding("/wh/t") == [] and targets.holding("/wh/ext") == [1]  # what is held, not the root
