"""Decoupled changelog expiry applied, and refused when the table moved between plan and apply: a tag
inside the range, a consumer reading inside it, a changelog written again, an edited plan."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from applier.apply import DriverExecutor, apply_plan
from cli.main import app
from engine.errors import PlanRejected, StalePlan
from engine.paimon.kinds import ChangelogKind
from engine.paimon.table import PaimonTable, open_table
from engine.plan import Action, canonical_actions
from journal.duckdb_store import DuckDBRecorder
from planner.changelog import plan_changelog
from planner.kinds import plan_kind
from tests.planner.conftest import FAR_FUTURE, expire
from tests.support.table_builder import ADD, E, TableBuilder

P = dict(partition_keys=("dt",), partition_types=("STRING",))


@pytest.fixture
def decoupled(tmp_path):
    b = TableBuilder(str(tmp_path / "t"), options={"changelog.num-retained.max": "100"}, **P)
    for i in range(8):
        b.commit([E(ADD, f"f{i}", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    return b


def plan(root):
    t = open_table(root)
    opts = plan_kind("changelog").resolve_options(t.options, retain_min=1, retain_max=1, time_retained="0 s")
    return plan_changelog(t, now_ms=FAR_FUTURE, options=opts)


def apply(p, tmp_path):
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        return apply_plan(p, recorder, executor=DriverExecutor())


def test_apply_expires_the_range_and_moves_the_hint(decoupled, tmp_path):
    p = plan(decoupled.root)
    assert (p.begin, p.end) == (1, 7)
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole and report.hint == 7
    t = PaimonTable(decoupled.root)
    assert t.list_changelog_ids() == [7] and t.read_hint("EARLIEST", t.changelog_dir) == 7


def test_a_tag_inside_the_range_between_plan_and_apply_refuses_the_plan(decoupled, tmp_path):
    p = plan(decoupled.root)
    src = Path(decoupled.root, "changelog", "changelog-4")
    Path(decoupled.root, "tag").mkdir(exist_ok=True)
    Path(decoupled.root, "tag", "tag-late").write_text(src.read_text())
    with pytest.raises(StalePlan, match="tag 'late' was added at snapshot 4"):
        apply(p, tmp_path)
    assert src.exists()


def test_a_consumer_reading_inside_the_range_refuses_the_plan(decoupled, tmp_path):
    p = plan(decoupled.root)
    decoupled.consumer("job", 2)
    with pytest.raises(StalePlan, match="consumer 'job' now reads from snapshot 2"):
        apply(p, tmp_path)


def test_a_changelog_written_again_refuses_the_plan(decoupled, tmp_path):
    p = plan(decoupled.root)
    path = Path(decoupled.root, "changelog", "changelog-2")
    path.write_text(path.read_text().replace('"commitUser": "test"', '"commitUser": "other"'))
    with pytest.raises(StalePlan, match="changelog 2 is not the changelog the plan read"):
        apply(p, tmp_path)


def test_an_edited_plan_cannot_delete_a_changelog_outside_its_range(decoupled, tmp_path):
    p = plan(decoupled.root)
    forged = dataclasses.replace(p, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in p.actions]
        + [Action(ChangelogKind.CHANGELOG_META, "changelog/changelog-7", snapshot_id=7)]))
    with pytest.raises(PlanRejected, match=r"changelog/changelog-<id> with its id in the plan's range \[1, 7\)"):
        apply(forged, tmp_path)
    assert os.path.exists(os.path.join(decoupled.root, "changelog", "changelog-7"))


def test_plan_changelog_command(decoupled, tmp_path):
    out = tmp_path / "cl.parquet"
    r = CliRunner().invoke(app, ["plan", "changelog", decoupled.root, "--out", str(out), "--retain-min", "1",
                                 "--retain-max", "1", "--time-retained", "0 s"])
    assert r.exit_code == 0, r.output
    assert "expires changelogs [1, 7) of branch 'main', then sets the changelog EARLIEST hint to 7" in r.output
