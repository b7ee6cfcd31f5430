"""A pointer only moves forward: a plan that writes a hint (EARLIEST, the changelog hints) is checked against
the live hint before it is written, whatever its requirements say, and ``verify`` calls a hint that names
a missing snapshot a problem. Tables pypaimon wrote (pypaimon never writes ``snapshot/EARLIEST``)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, dry_run_plan
from lakesweep.engine.errors import StalePlan
from lakesweep.engine.fileio import fileio_for
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.paimon.verify import HINT, verify_table
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import Action, kind_spec
from tests.applier.test_safety import Lake, forge, plan_for, refused_events


def earliest_hint(lake):
    path = Path(lake.root, "snapshot", "EARLIEST")
    return path.read_text().strip() if path.exists() else None


def twelve(tmp_path) -> Lake:
    lake = Lake(tmp_path / "wh")
    for i in range(12):
        lake.commit("ab"[i % 2])
    assert earliest_hint(lake) is None
    return lake


def test_a_stale_hint_only_plan_cannot_move_earliest_backwards(tmp_path, recorder):
    lake = twelve(tmp_path)
    hint_only = plan_for(lake.root, retain_min=100)  # nothing expires; Java writes the missing hint
    assert [(a.kind, a.snapshot_id) for a in hint_only.actions] == [(ActionKind.WRITE_EARLIEST_HINT, 1)]
    expiry = plan_for(lake.root, retain_min=2)
    assert (expiry.begin, expiry.end) == (1, 11)
    assert apply_plan(expiry, recorder, executor=DriverExecutor()).state == "COMPLETED"
    assert earliest_hint(lake) == "11"

    with pytest.raises(StalePlan, match=r"the plan writes snapshot/EARLIEST = 1, but the live hint is 11: a hint "
                                        r"only moves forward.*re-run 'lakesweep plan expire'"):
        apply_plan(hint_only, recorder, executor=DriverExecutor())
    assert earliest_hint(lake) == "11"
    assert len(refused_events(recorder, hint_only)) == 1
    assert recorder.file_records(plan_id=hint_only.plan_id) == []
    assert not [e for e in recorder.events(plan_id=hint_only.plan_id) if e.EVENT_TYPE == "MetadataWritten"]
    with pytest.raises(StalePlan, match="only moves forward"):
        dry_run_plan(hint_only, executor=DriverExecutor())
    report = verify_table(open_table(lake.root))
    assert report.whole, report.problems


def test_a_hint_only_plan_cannot_name_a_snapshot_expired_without_a_hint(tmp_path, recorder):
    lake = twelve(tmp_path)
    hint_only = plan_for(lake.root, retain_min=100)
    for sid in range(1, 4):  # an expiry that stopped before writing its hint
        os.remove(os.path.join(lake.root, "snapshot", f"snapshot-{sid}"))
    with pytest.raises(StalePlan, match=r"the plan writes snapshot/EARLIEST = 1, which names snapshot 1; it does "
                                        r"not exist"):
        apply_plan(hint_only, recorder, executor=DriverExecutor())
    assert earliest_hint(lake) is None


def test_a_forged_hint_cannot_skip_snapshots_the_plan_does_not_delete(tmp_path, recorder):
    lake = twelve(tmp_path)
    plan = plan_for(lake.root, retain_min=10)
    assert (plan.begin, plan.end) == (1, 3)
    # The header's hint and the action moved on to 8: snapshots 3 to 7 would fall below the hint, out of
    # the table, with nothing deleting them.
    forged = forge(plan, Action(ActionKind.WRITE_EARLIEST_HINT, "snapshot/EARLIEST", snapshot_id=8),
                   drop=lambda a: a.kind == ActionKind.WRITE_EARLIEST_HINT)
    forged = replace(forged, scope=replace(forged.scope, earliest_hint=8))
    before = {f: os.path.getsize(os.path.join(lake.root, "snapshot", f))
              for f in os.listdir(os.path.join(lake.root, "snapshot"))}
    with pytest.raises(StalePlan, match=r"the plan moves snapshot/EARLIEST to 8 past snapshot 3, which it does "
                                        r"not delete"):
        apply_plan(forged, recorder, executor=DriverExecutor())
    assert earliest_hint(lake) is None
    assert {f: os.path.getsize(os.path.join(lake.root, "snapshot", f))
            for f in os.listdir(os.path.join(lake.root, "snapshot"))} == before


def test_an_honest_expiry_writes_its_hint_and_a_second_apply_finds_it_written(tmp_path, recorder):
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    lake = twelve(tmp_path)
    plan = plan_for(lake.root, retain_min=2)
    assert apply_plan(plan, recorder, executor=DriverExecutor()).state == "COMPLETED"
    with DuckDBRecorder(str(tmp_path / "other.duckdb")) as other:
        again = apply_plan(plan, other, executor=DriverExecutor())
    assert again.state == "COMPLETED" and earliest_hint(lake) == "11"


def test_a_changelog_copy_never_moves_the_changelog_latest_hint_back(tmp_path):
    changelog = tmp_path / "changelog"
    fileio = fileio_for(str(changelog))
    changelog.mkdir()
    (changelog / "LATEST").write_text("12")
    copy = Action(ActionKind.WRITE_CHANGELOG, "changelog/changelog-5", snapshot_id=5, source="snapshot/snapshot-5")
    kind_spec(ActionKind.WRITE_CHANGELOG).after_write(fileio, str(changelog / "changelog-5"), copy)
    assert (changelog / "LATEST").read_text() == "12"
    kind_spec(ActionKind.WRITE_CHANGELOG).after_write(fileio, str(changelog / "changelog-13"),
                                                      Action(ActionKind.WRITE_CHANGELOG, "changelog/changelog-13",
                                                             snapshot_id=13, source="snapshot/snapshot-13"))
    assert (changelog / "LATEST").read_text() == "13"


def test_verify_calls_an_earliest_hint_naming_a_missing_snapshot_a_problem(tmp_path):
    lake = twelve(tmp_path)
    for sid in range(1, 11):
        os.remove(os.path.join(lake.root, "snapshot", f"snapshot-{sid}"))
    hint = os.path.join(lake.root, "snapshot", "EARLIEST")
    with open(hint, "w") as f:
        f.write("1")
    report = verify_table(open_table(lake.root))
    assert not report.whole
    [p] = report.problems
    assert (p.kind, p.path) == (HINT, hint)
    assert p.detail.startswith("EARLIEST says snapshot 1, which does not exist (the earliest is 11, the newest 12): "
                            "resume the expiry")
