"""Two applies of one Paimon partition-drop plan at once, each with its own journal: one commits, and the other
finds that commit (ALREADY_COMMITTED) instead of being refused as stale by the partitions the first one dropped,
as an apply run after the first does.

The race is run deterministically: the second apply's committer lets the first apply run to its end right after
one step of the second (its commit lookup, or the committer's own check before the phases), so the first commit
lands between that step and the requirement check that follows it."""

from __future__ import annotations

import time

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.paimon.commit import PaimonCommitter
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.test_partitions_apply import overwrite_snapshots_by, plan_drop, snapshot_ids
from tests.applier.test_safety import Lake


class OtherApplyMeanwhile:
    """The plan's own committer, except that the other apply runs once, to its end, right after ``step``
    (``find``: this apply's first commit lookup; ``check``: the committer's check of the actions)."""

    def __init__(self, plan, other, step: str):
        self.inner, self.other, self.step, self.ran = PaimonCommitter(plan), other, step, False

    def _after(self, step: str) -> None:
        if step == self.step and not self.ran:
            self.ran = True
            self.other()

    def check(self, table, actions) -> None:
        self.inner.check(table, actions)
        self._after("check")

    def find(self, table, commit_id: str):
        found = self.inner.find(table, commit_id)
        self._after("find")
        return found

    def commit(self, table, actions, commit_id: str):
        return self.inner.commit(table, actions, commit_id)


@pytest.mark.parametrize("step", ["find", "check"])
def test_the_second_of_two_simultaneous_applies_finds_the_first_ones_commit(tmp_path, step):
    lake = Lake(tmp_path / "wh")
    for dt in ("a", "b", "a", "c"):
        lake.commit(dt)
    time.sleep(0.01)
    plan = plan_drop(lake.root)
    latest = snapshot_ids(lake.root)[-1]
    n = len(plan.actions)
    first: dict = {}

    def first_apply():
        with DuckDBRecorder(tmp_path / "j1.duckdb") as rec:
            first["report"] = apply_plan(plan, rec, executor=DriverExecutor())

    with DuckDBRecorder(tmp_path / "j2.duckdb") as rec:
        second = apply_plan(plan, rec, executor=DriverExecutor(),
                            committer=OtherApplyMeanwhile(plan, first_apply, step))
        events = rec.events(plan_id=plan.plan_id)
    assert first["report"].state == "COMPLETED" and first["report"].counts["COMMITTED"] == n
    assert second.state == "COMPLETED" and second.whole, second.reason
    assert second.counts["ALREADY_COMMITTED"] == n and second.counts["COMMITTED"] == 0
    assert second.commits == [{"phase": "drop_partitions", "version": latest + 1, "already": True,
                               "label": "snapshot", "attempts": 0}]
    assert [(e.version, e.already) for e in events if e.EVENT_TYPE == "Committed"] == [(latest + 1, True)]
    assert not [e for e in events if e.EVENT_TYPE in ("ApplyRefused", "ApplyFailed")]
    assert overwrite_snapshots_by(lake.root, f"lakesweep-{plan.plan_id}") == [latest + 1]
    assert snapshot_ids(lake.root)[-1] == latest + 1
    assert lake.rows() == [1, 3]


def test_a_writers_commit_to_a_dropped_partition_still_refuses_the_plan(tmp_path):
    """The lookup done again finds no commit of the plan: the refusal stands."""
    from lakesweep.engine.errors import StalePlan

    lake = Lake(tmp_path / "wh")
    for dt in ("a", "b", "a", "c"):
        lake.commit(dt)
    time.sleep(0.01)
    plan = plan_drop(lake.root)
    lake.commit("a")
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        with pytest.raises(StalePlan, match="partition dt=a changed since planning"):
            apply_plan(plan, rec, executor=DriverExecutor())
        assert [e.EVENT_TYPE for e in rec.events(plan_id=plan.plan_id)] == ["PlanRecorded", "ApplyRefused"]
    assert overwrite_snapshots_by(lake.root, f"lakesweep-{plan.plan_id}") == []
