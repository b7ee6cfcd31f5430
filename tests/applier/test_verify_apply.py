"""The check apply makes after its last phase: journaled, in the report, and catching a table left
damaged by a tag created, while the apply ran, on a snapshot it was expiring. Also ``lakesweep verify``
as a command: exit 0 on a whole table, 1 with the missing file and what needs it."""

from __future__ import annotations

import json
import os
import shutil

from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.applier.phases import NoProgress
from lakesweep.cli.main import app
from lakesweep.engine.paimon.reachability import reachable_paths
from lakesweep.engine.paimon.table import open_table
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.projection import project
from tests.applier.test_safety import Lake, history, plan_for


def verified_events(recorder, plan):
    return [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "Verified"]


def test_a_clean_apply_is_verified_whole_and_journaled(tmp_path):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=1, retain_max=2)
    deletes = sum(1 for a in plan.actions if a.verb.deletes)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
        assert report.whole and report.verify["only"] == deletes and report.verify["problems"] == []
        (ev,) = verified_events(recorder, plan)
        assert (ev.whole, ev.checked, ev.n_problems) == (True, deletes, 0)
        assert project(recorder.events(plan_id=plan.plan_id))[report.apply_id].whole is True
        assert report.to_json()["verify"]["whole"] is True


def test_no_verify_skips_the_check(tmp_path):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=1, retain_max=2)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor(), verify=False)
        assert report.state == "COMPLETED" and report.verify is None and report.whole
        assert verified_events(recorder, plan) == []


class TagDuringTheLastPhase(NoProgress):
    """A tag made, while the apply runs, from a snapshot the apply expires: its JSON was read before the
    apply deleted it (the tag file is put in place once the last phase has run)."""

    def __init__(self, saved_tag: str, tag_path: str, last_phase: str):
        self.saved_tag, self.tag_path, self.last_phase = saved_tag, tag_path, last_phase

    def phase_finished(self, phase):
        if phase == self.last_phase:
            shutil.copy(self.saved_tag, self.tag_path)


def test_a_table_left_damaged_is_reported_journaled_and_named(tmp_path):
    lake = Lake(tmp_path / "wh")
    history(lake)
    t = open_table(lake.root)
    lake.table.create_tag("late", snapshot_id=1)
    tag_path = os.path.join(lake.root, "tag", "tag-late")
    saved = str(tmp_path / "tag-late")
    shutil.move(tag_path, saved)
    needed = reachable_paths(t, t.snapshot(1), with_changelog=False)
    plan = plan_for(lake.root, retain_min=1, retain_max=2)
    deleted = {os.path.join(lake.root, a.path) for a in plan.actions if a.verb.deletes}
    assert needed & deleted  # the tag will need files the plan deletes
    progress = TagDuringTheLastPhase(saved, tag_path, plan.phases[-1].name)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor(), progress=progress)
        assert report.state == "COMPLETED" and not report.whole
        problems = report.verify["problems"]
        assert problems and {p["path"] for p in problems} <= needed & deleted
        assert {p["needed_by"] for p in problems} == {"tag 'late'"}
        (ev,) = verified_events(recorder, plan)
        assert ev.whole is False and ev.n_problems == len(problems) and ev.problems[0]["needed_by"] == "tag 'late'"


def test_the_verify_command_exits_0_on_a_whole_table_and_1_naming_a_deleted_live_file(tmp_path):
    lake = Lake(tmp_path / "wh")
    history(lake)
    runner = CliRunner()
    r = runner.invoke(app, ["verify", lake.root])
    assert r.exit_code == 0 and r.stdout.startswith("Whole:"), r.output
    t = open_table(lake.root)
    latest = t.snapshot(t.earliest_latest()[1])
    victim = sorted(p for p in reachable_paths(t, latest, with_changelog=False) if p.endswith(".parquet"))[0]
    os.remove(victim)
    r = runner.invoke(app, ["verify", lake.root, "--output", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["whole"] is False and [p["path"] for p in doc["problems"]] == [victim]
    assert doc["problems"][0]["kind"] == "missing" and doc["problems"][0]["needed_by"].startswith("snapshot ")
    r = runner.invoke(app, ["verify", lake.root])
    assert r.exit_code == 1 and "Not whole" in r.stdout and "1 problem(s)" in r.stdout and "missing" in r.stdout


def test_journal_plans_tells_whether_the_table_was_whole_after_the_apply(tmp_path):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=1, retain_max=2)
    from lakesweep.journal.audit import list_plans

    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        recorder.record_plan(plan, recorded_ms=1)
        assert [r["whole"] for r in list_plans(recorder)] == [None]
        apply_plan(plan, recorder, executor=DriverExecutor())
        assert [r["whole"] for r in list_plans(recorder)] == [True]
