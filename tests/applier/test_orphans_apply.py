"""Orphan cleaning end to end on a pypaimon table with injected junk: plan and show through the command,
apply on the driver, the journal; and a writer that commits a candidate between plan and apply."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan, dry_run_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.paimon.requirements import CLOCK_SKEW_MS, AssertNowReached
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import read_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.orphans import plan_orphans
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.engine.paimon.orphans import list_orphan_candidates
from tests.applier.test_safety import SCHEMA, Lake
from tests.planner.test_orphans import NOW, age, junk
from tests.support.table_builder import all_files

JUNK = ["snapshot/UNKNOWN-1",  # a stray file of the snapshot directory
        "manifest/manifest-dead-0",  # a stray manifest
        "dt=a/bucket-0/data-failed-0.parquet",  # an old failed write
        "dt=a/bucket-7/data-failed-1.parquet"]  # a bucket directory holding only junk
KEPT = ["tmp/data-x-0.parquet", "_upload/part-0", "dt=a/tmp/y"]  # not Paimon's: never touched


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)
    for rel in JUNK + KEPT:
        junk(lake.root, rel)
    age(lake.root)
    return lake


def cli(*args):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


def test_plan_show_apply_journal(lake, tmp_path):
    out = tmp_path / "orphans.plan"
    cli("plan", "orphans", lake.root, "--out", out)
    doc = json.loads(cli("show", out, "--files", "--output", "json").stdout)
    assert doc["plan_kind"] == "orphans" and doc["nothing_to_do"] is False
    assert sorted(a["path"] for a in doc["actions"]) == sorted(JUNK)
    assert doc["options"]["older-than"] == {"value": "1 d", "source": "default"}
    assert "No orphan files" not in cli("show", out).stdout

    plan = read_plan(str(out))
    before = all_files(lake.root)
    dry = dry_run_plan(plan, executor=DriverExecutor())
    assert dry.counts["DELETED"] == len(JUNK) and all_files(lake.root) == before
    rows = lake.rows()
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
        assert (report.state, report.counts["DELETED"], report.counts["SKIPPED_REFERENCED"]) == ("COMPLETED", 4, 0)
        records = {r.path: (r.kind, r.outcome.value) for r in recorder.file_records(plan_id=plan.plan_id)}
        assert records == {
            "snapshot/UNKNOWN-1": ("stray-snapshot-file", "DELETED"),
            "manifest/manifest-dead-0": ("orphan-manifest", "DELETED"),
            "dt=a/bucket-0/data-failed-0.parquet": ("orphan-data-file", "DELETED"),
            "dt=a/bucket-7/data-failed-1.parquet": ("orphan-data-file", "DELETED"),
        }
        assert [e.EVENT_TYPE for e in recorder.events(plan_id=plan.plan_id)][-1] == "ApplyCompleted"
        again = apply_plan(plan, recorder, executor=DriverExecutor())
        assert (again.counts["DELETED"], again.counts["ALREADY_ABSENT"]) == (0, 4)
    assert all_files(lake.root) == before - set(JUNK)
    assert all(os.path.exists(os.path.join(lake.root, rel)) for rel in KEPT)
    assert os.path.isdir(os.path.join(lake.root, "dt=a", "bucket-7"))  # never a directory
    assert lake.rows() == rows and lake.rows(snapshot=1) == [0]


def test_a_candidate_committed_between_plan_and_apply_is_skipped_journaled_and_kept(lake, tmp_path):
    # A slow writer: its file is written (and old) before the plan, committed after it.
    builder = lake.table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"id": 99, "dt": "a"}], schema=SCHEMA))
    messages = write.prepare_commit()
    age(lake.root)
    t = open_table(lake.root)
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))
    pending = sorted(a.path for a in plan.actions if a.path not in JUNK)
    assert len(pending) == 1 and pending[0].startswith("dt=a/bucket-0/")
    commit.commit(messages)
    write.close()
    commit.close()

    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
        assert (report.state, report.counts["DELETED"], report.counts["SKIPPED_REFERENCED"]) == ("COMPLETED", 4, 1)
        [record] = [r for r in recorder.file_records(plan_id=plan.plan_id) if r.path == pending[0]]
        assert (record.outcome.value, record.error) == ("SKIPPED_REFERENCED", None)
    assert os.path.exists(os.path.join(lake.root, pending[0]))
    assert 99 in lake.rows()


@pytest.mark.parametrize("tail", [" ", "\t"])
def test_a_stray_file_named_as_a_live_one_with_whitespace_after_is_the_one_deleted(lake, tmp_path, tail):
    """``data-x.parquet `` is an orphan; ``data-x.parquet``, which the table reads, is another file."""
    live = sorted(p for p in all_files(lake.root) if p.startswith("dt=a/bucket-0/data-") and p not in JUNK)[-1]
    junk(lake.root, live + tail)
    t = open_table(lake.root)
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))
    assert sorted(a.path for a in plan.actions) == sorted([*JUNK, live + tail])
    rows = lake.rows()
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert (report.state, report.counts["DELETED"]) == ("COMPLETED", len(JUNK) + 1)
    assert os.path.isfile(os.path.join(lake.root, live)) and not os.path.exists(os.path.join(lake.root, live + tail))
    assert lake.rows() == rows


def test_an_apply_that_finds_no_snapshot_refuses_and_deletes_nothing(lake, tmp_path):
    t = open_table(lake.root)
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))
    snapshots = os.path.join(lake.root, "snapshot")
    os.rename(snapshots, snapshots + "-away")  # a listing of the snapshot directory that comes back empty
    before = all_files(lake.root)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(PlanRejected, match="orphan cleaning found no snapshot in .* or any of its branches"):
            apply_plan(plan, recorder, executor=DriverExecutor())
        assert [e.EVENT_TYPE for e in recorder.events(plan_id=plan.plan_id)] == ["PlanRecorded", "ApplyRefused"]
        assert all_files(lake.root) == before
        os.rename(snapshots + "-away", snapshots)
        assert apply_plan(plan, recorder, executor=DriverExecutor()).counts["DELETED"] == len(JUNK)


def test_a_plan_made_as_of_a_future_time_is_refused_before_it_deletes_a_writers_file(lake, tmp_path):
    # A writer's file, written a moment ago and not committed yet.
    builder = lake.table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"id": 99, "dt": "a"}], schema=SCHEMA))
    messages = write.prepare_commit()
    t = open_table(lake.root)
    ahead = NOW + 2 * 86_400_000  # '--now' two days ahead: the 1 d window ends tomorrow
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=ahead, options=resolve_orphan_options({}))
    [pending] = [a.path for a in plan.actions if a.path not in JUNK]
    before = all_files(lake.root)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(StalePlan, match=r"the plan was made as of .*, after the current time .*: files it "
                                            r"found older than its --older-than may be younger, and a writer may "
                                            r"not have committed them yet"):
            apply_plan(plan, recorder, executor=DriverExecutor())
    assert all_files(lake.root) == before
    commit.commit(messages)
    write.close()
    commit.close()
    assert os.path.exists(os.path.join(lake.root, pending)) and 99 in lake.rows()


def test_plan_orphans_refuses_a_future_now(lake, tmp_path):
    out = tmp_path / "p.plan"
    r = CliRunner().invoke(app, ["plan", "orphans", lake.root, "--out", str(out), "--now", "2999-01-01T00:00:00Z"])
    assert r.exit_code == 1 and "--now: the plan was made as of 2999-01-01 00:00:00Z, after the current " \
                                "time" in " ".join(r.output.split()), r.output
    assert not out.exists()


def test_a_plan_may_be_ahead_of_the_clock_by_a_minute_at_most():
    now = int(time.time() * 1000)
    assert AssertNowReached(now + CLOCK_SKEW_MS - 5_000).problems(None) == []
    assert AssertNowReached(now + CLOCK_SKEW_MS + 5_000).problems(None) != []
