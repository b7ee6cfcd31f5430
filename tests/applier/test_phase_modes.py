"""The apply loop's modes beyond deletes, on a table pypaimon wrote: a commit phase (idempotent through its
commit identifier, found again after a crash), per-action re-checks that skip and journal an action, and
the dry run through the same loop.

The committer here is a stand-in that keeps its commits in a file beside the table: it tests the loop, not
a format (Paimon's partition drops commit for real in test_partitions_apply.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, dry_run_plan, resume
from lakesweep.engine.errors import LakesweepError, PlanRejected
from lakesweep.engine.plan import (Action, ActionCheck, PhaseMode, PhaseSpec, Verb, canonical_actions, commit_id,
                                   requirement)
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.test_safety import Lake, history, plan_for
from tests.support.table_builder import all_files


class _Crash(BaseException):
    """Stands for kill -9: nothing after it runs, not even the journal's failure record."""


class FileCommitter:
    """Commits as lines of a JSON file: {commit id: version}. ``crash_after_commit`` dies right after."""

    def __init__(self, path, *, crash_after_commit=False):
        self.path, self.crash_after_commit = path, crash_after_commit
        self.commits = 0

    def _read(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def check(self, table, actions):
        for a in actions:
            if a.kind != "test-commit":
                raise PlanRejected(f"action {a.action_id} is not a commit this committer makes")

    def find(self, table, cid):
        return self._read().get(cid)

    def commit(self, table, actions, cid):
        done = self._read()
        done[cid] = version = 100 + len(done)
        self.path.write_text(json.dumps(done))
        self.commits += 1
        if self.crash_after_commit:
            raise _Crash()
        return version


def with_commit(plan):
    """The expiry plan plus a commit phase after its phases, holding one commit action."""
    phases = plan.phases + (PhaseSpec("commit", PhaseMode.COMMIT),)
    commit = Action("test-commit", "snapshot", verb=Verb.COMMIT, phase=len(phases))
    actions = canonical_actions([dataclasses.replace(a, action_id=-1) for a in plan.actions] + [commit])
    return dataclasses.replace(plan, phases=phases, actions=actions)


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    history(lake)
    return lake


def events(recorder, plan, name):
    return [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == name]


def test_a_commit_phase_commits_once_under_the_plans_identifier(tmp_path, lake):
    plan = with_commit(plan_for(lake.root, retain_min=2))
    committer = FileCommitter(tmp_path / "commits.json")
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor(), committer=committer)
        assert report.state == "COMPLETED" and report.counts["COMMITTED"] == 1
        cid = commit_id(plan.plan_id, len(plan.phases))
        [committed] = events(recorder, plan, "Committed")
        assert (committed.commit_id, committed.version, committed.already, committed.phase) == (
            cid, 100, False, len(plan.phases))
        # Applying the plan again finds the commit: nothing is committed twice.
        again = apply_plan(plan, recorder, executor=DriverExecutor(), committer=committer)
        assert again.counts["ALREADY_COMMITTED"] == 1 and committer.commits == 1
        assert [e.already for e in events(recorder, plan, "Committed")] == [False, True]


def test_a_commit_made_before_a_crash_is_found_by_resume(tmp_path, lake):
    plan = with_commit(plan_for(lake.root, retain_min=2))
    crashing = FileCommitter(tmp_path / "commits.json", crash_after_commit=True)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(_Crash):
            apply_plan(plan, recorder, executor=DriverExecutor(), committer=crashing)
        assert crashing.commits == 1 and not events(recorder, plan, "Committed")
        steady = FileCommitter(tmp_path / "commits.json")
        [report] = resume(recorder, executor=DriverExecutor(), committer=steady)
        assert (report.state, report.resumed, report.counts["ALREADY_COMMITTED"]) == ("COMPLETED", True, 1)
        assert steady.commits == 0  # found, not made again
        [committed] = events(recorder, plan, "Committed")
        assert (committed.version, committed.already) == (100, True)


def test_a_commit_phase_in_a_plan_of_a_kind_that_commits_nothing_is_refused_untouched(tmp_path, lake):
    plan = with_commit(plan_for(lake.root, retain_min=2))
    before = all_files(lake.root)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(PlanRejected, match=r"'expire' plans commit nothing; the plan .* is refused"):
            apply_plan(plan, recorder, executor=DriverExecutor())
        assert len(events(recorder, plan, "ApplyRefused")) == 1 and not events(recorder, plan, "ApplyStarted")
    assert all_files(lake.root) == before


def test_a_commit_action_outside_a_commit_phase_is_refused(tmp_path, lake):
    plan = plan_for(lake.root, retain_min=2)
    stray = Action("test-commit", "snapshot", verb=Verb.COMMIT, phase=1)
    forged = dataclasses.replace(plan, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in plan.actions] + [stray]))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(PlanRejected, match="is a commit action in the bulk phase 'data_files'"):
            apply_plan(forged, recorder, executor=DriverExecutor(), committer=FileCommitter(tmp_path / "c.json"))


@requirement
@dataclass(frozen=True, slots=True)
class SkipPaths(ActionCheck):
    """A stand-in per-action check: the actions whose path is listed have become referenced."""

    TYPE = "paimon.test-skip-paths"
    paths: tuple[str, ...]

    def problems(self, view, *, done=frozenset()):
        return []

    def skipped(self, view, actions, targets):
        return {a.action_id for a in actions if a.path in self.paths}


def test_an_action_a_per_action_check_skips_is_journaled_and_kept(tmp_path, lake):
    plan = plan_for(lake.root, retain_min=2)
    data = sorted(a.path for a in plan.actions if a.kind == "data-file")
    kept = data[0]
    checked = dataclasses.replace(plan, requirements=plan.requirements + (SkipPaths((kept,)),))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(checked, recorder, executor=DriverExecutor())
        assert report.state == "COMPLETED" and report.counts["SKIPPED_REFERENCED"] == 1
        [record] = [r for r in recorder.file_records(plan_id=checked.plan_id) if r.path == kept]
        assert (record.outcome.value, record.error) == ("SKIPPED_REFERENCED", None)
    assert os.path.exists(os.path.join(lake.root, kept))
    assert not any(os.path.exists(os.path.join(lake.root, p)) for p in data[1:])


def test_the_dry_run_is_the_same_loop_and_changes_nothing(tmp_path, lake):
    plan = with_commit(plan_for(lake.root, retain_min=2))
    committer = FileCommitter(tmp_path / "commits.json")
    before = all_files(lake.root)
    report = dry_run_plan(plan, executor=DriverExecutor(), committer=committer)
    assert report.state == "DRY_RUN" and report.counts["COMMITTED"] == 1 and committer.commits == 0
    assert [p["phase"] for p in report.phases][-1] == "commit"
    assert report.counts["DELETED"] == sum(1 for a in plan.actions if a.verb.deletes)
    assert all_files(lake.root) == before and not (tmp_path / "commits.json").exists()


def test_a_failing_commit_fails_the_apply_and_resume_commits(tmp_path, lake):
    plan = with_commit(plan_for(lake.root, retain_min=2))

    class Conflicted(FileCommitter):
        def commit(self, table, actions, cid):
            raise LakesweepError("the table moved on: snapshot 7 was committed concurrently")

    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor(), committer=Conflicted(tmp_path / "c.json"))
        assert (report.state, report.failed_phase) == ("FAILED", "commit")
        assert "LakesweepError: the table moved on" in report.reason
        [report] = resume(recorder, executor=DriverExecutor(), committer=FileCommitter(tmp_path / "c.json"))
        assert report.state == "COMPLETED" and report.counts["COMMITTED"] == 1


def test_a_journal_write_that_fails_in_a_bulk_phase_fails_the_apply_and_resume_finishes_it(tmp_path, lake,
                                                                                         monkeypatch):
    """Bulk results are journaled on a thread of their own while the next ones arrive: a write that fails
    there still fails the apply with its own error, what was journaled before it stays, and resume finds
    the files deleted meanwhile already gone."""
    from lakesweep.applier import phases
    from lakesweep.engine.errors import JournalError

    monkeypatch.setattr(phases, "_BULK_JOURNAL_BATCH", 1)
    plan = plan_for(lake.root, retain_min=2)
    deletes = [a for a in plan.actions if a.verb.deletes]
    assert len(deletes) >= 4
    writes = []
    real = DuckDBRecorder.record_outcomes

    def second_fails(self, apply_id, plan_id, rows):
        writes.append(len(rows))
        if len(writes) == 2:
            raise JournalError("journal: the disk is full")
        return real(self, apply_id, plan_id, rows)

    monkeypatch.setattr(DuckDBRecorder, "record_outcomes", second_fails)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(JournalError, match="^journal: the disk is full$"):
            apply_plan(plan, recorder, executor=DriverExecutor(batch=1))
        assert len(recorder.file_records()) == 1 and len(writes) == 2
        monkeypatch.setattr(DuckDBRecorder, "record_outcomes", real)
        [report] = resume(recorder, executor=DriverExecutor())
        assert report.state == "COMPLETED"
        outcomes = {r.action_id: r.outcome.value for r in recorder.file_records()}
    assert {a.action_id for a in deletes} <= set(outcomes)
    assert not any(os.path.exists(os.path.join(lake.root, a.path)) for a in deletes)
