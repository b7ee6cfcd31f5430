"""Restore end to end on pypaimon tables: a wrong orphans plan applied with quarantine while a writer has
written files it has not committed; the writer commits, pypaimon's reader fails; verify names the quarantine
and the restore command; ``restore`` brings the table back whole. A path re-created before restore is refused;
kill -9 during restore then resume loses and duplicates nothing; an expiry restored reads its snapshots again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.plan import Verb
from lakesweep.engine.quarantine import QUARANTINE_DIR, QuarantineSpec
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import FileOutcome
from lakesweep.journal.queries import in_quarantine
from tests.applier.conftest import REPO
from tests.applier.test_safety import SCHEMA, Lake, history, plan_for
from tests.planner.test_orphans import plan as plan_orphans_of
from tests.support.processes import LAKESWEEP
from tests.support.table_builder import all_files


def run(*args, code=0):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == code, r.output
    return r


def quarantine_apply(plan, journal):
    with DuckDBRecorder(str(journal)) as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=QuarantineSpec(plan.plan_id))
    deletes = sum(a.verb is Verb.DELETE_FILE for a in plan.actions)
    assert (report.state, report.counts["QUARANTINED"]) == ("COMPLETED", deletes)
    return report


def quarantined_files(root):
    return {f for f in all_files(root) if f.startswith(QUARANTINE_DIR + "/")}


@pytest.fixture
def broken(tmp_path):
    """A table whose last commit names data files an orphans plan (--older-than 1 s --force) put in quarantine
    before the writer committed them."""
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    builder = lake.table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"id": 10, "dt": "a"}, {"id": 11, "dt": "c"}], schema=SCHEMA))
    messages = write.prepare_commit()  # written, not committed: files nothing references yet
    time.sleep(1.2)
    plan = plan_orphans_of(lake.root, now=int(time.time() * 1000), older_than="1 s", force=True)
    assert len(plan.actions) == 2 and all(a.path.endswith(".parquet") for a in plan.actions)
    journal = tmp_path / "j.duckdb"
    quarantine_apply(plan, journal)
    commit.commit(messages)
    write.close()
    commit.close()
    return lake, plan, journal


def test_wrong_plan_quarantined_makes_the_table_unreadable_and_restore_brings_it_back_whole(broken):
    lake, plan, journal = broken
    with pytest.raises(FileNotFoundError):  # pypaimon's reader: data files of the latest snapshot are gone
        lake.rows()
    with DuckDBRecorder(str(journal), read_only=True) as recorder:
        went = {r.path: r.moved_to for r in in_quarantine(recorder, plan.plan_id).values()}
    out = " ".join(run("verify", lake.root, "--journal", journal, code=1).stdout.split())
    assert (f"In quarantine: 2 of the missing file(s), put aside by plan {plan.plan_id}; bring them back with: "
            f"lakesweep restore {plan.plan_id} --journal {journal}") in out
    doc = json.loads(run("verify", lake.root, "--journal", journal, "--output", "json", code=1).stdout)
    assert sorted((q["path"], q["plan_id"], q["where"]) for q in doc["in_quarantine"]) == sorted(
        (f"{lake.root}/{p}", plan.plan_id, w) for p, w in went.items())
    assert doc["restore_commands"] == [f"lakesweep restore {plan.plan_id} --journal {journal}"]
    rows = json.loads(run("journal", "plans", "--journal", journal, "--output", "json").stdout)
    size = sum(a.size for a in plan.actions)
    row = next(r for r in rows if r["plan_id"] == plan.plan_id)
    assert (row["quarantined"], row["quarantined_bytes"], row["restored"], row["restored_bytes"]) == (2, size, 0, 0)

    restored = json.loads(run("restore", plan.plan_id, "--journal", journal, "--master", "local[1]", "--output",
                              "json").stdout)
    assert (restored["state"], restored["restored"], restored["restored_bytes"], restored["left_in_quarantine"],
            restored["refused"], restored["commit_note"]) == ("COMPLETED", 2, size, 0, [], None)
    assert lake.rows() == [0, 1, 10, 11]
    whole = json.loads(run("verify", lake.root, "--journal", journal, "--output", "json").stdout)
    assert (whole["whole"], whole["in_quarantine"], whole["restore_commands"]) == (True, [], [])
    assert quarantined_files(lake.root) == set()
    rows = json.loads(run("journal", "plans", "--journal", journal, "--output", "json").stdout)
    row = next(r for r in rows if r["plan_id"] == plan.plan_id)
    assert (row["quarantined"], row["quarantined_bytes"], row["restored"], row["restored_bytes"]) == (0, 0, 2, size)
    err = run("restore", plan.plan_id, "--journal", journal, code=1).stderr
    assert f"plan {plan.plan_id} has no file in quarantine in this journal" in " ".join(err.split())


def test_a_path_a_writer_recreated_is_refused_and_only_that_file(broken):
    lake, plan, journal = broken
    again, other = sorted(a.path for a in plan.actions)
    with DuckDBRecorder(str(journal), read_only=True) as recorder:
        went = {r.path: r.moved_to for r in in_quarantine(recorder, plan.plan_id).values()}
    with open(os.path.join(lake.root, again), "wb") as f:
        f.write(b"a writer's new file")
    r = run("restore", plan.plan_id, "--journal", journal, "--master", "local[1]", "--output", "json", code=1)
    doc = json.loads(r.stdout)
    assert (doc["state"], doc["restored"], doc["refused"], doc["failed"], doc["left_in_quarantine"]) == (
        "FAILED", 1, [{"path": again, "where": went[again]}], [], 1)
    text = run("restore", plan.plan_id, "--journal", journal, "--master", "local[1]", code=1)
    assert f"refused: {again} exists again; the quarantined copy stays at {went[again]}" in text.stdout
    assert os.path.exists(os.path.join(lake.root, other)) and not os.path.exists(went[other])
    with open(os.path.join(lake.root, again), "rb") as f:
        assert f.read() == b"a writer's new file"
    assert os.path.exists(went[again])


@pytest.mark.parametrize("stage", ["before-journal:1", pytest.param("after-journal:1", marks=pytest.mark.slow)])
@pytest.mark.slow
def test_kill_during_restore_then_resume_loses_and_duplicates_nothing(broken, stage):
    lake, plan, journal = broken
    with DuckDBRecorder(str(journal), read_only=True) as recorder:
        went = {r.path: r.moved_to for r in in_quarantine(recorder, plan.plan_id).values()}
    env = dict(os.environ, LAKESWEEP_TEST_CRASH=stage, PYTHONPATH=REPO)
    proc = subprocess.run([*LAKESWEEP, "restore", plan.plan_id, "--journal", str(journal), "--master", "local[1]"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert all(os.path.exists(os.path.join(lake.root, p)) for p in went)  # moved back before the kill
    out = json.loads(run("resume", plan.plan_id, "--journal", journal, "--master", "local[1]", "--output",
                         "json").stdout)
    assert [(r["state"], r["resumed"], r["counts"]) for r in out] == [("COMPLETED", True, {"RESTORED": 2,
                                                                                         "FAILED": 0})]
    assert lake.rows() == [0, 1, 10, 11]
    assert quarantined_files(lake.root) == set()
    with DuckDBRecorder(str(journal), read_only=True) as recorder:
        restored = [r for r in recorder.file_records(plan_id=plan.plan_id) if r.outcome == FileOutcome.RESTORED]
        assert sorted((r.path, r.moved_to) for r in restored) == sorted(went.items())  # once each
        assert in_quarantine(recorder, plan.plan_id) == {}


def test_restored_expiry_reads_its_expired_snapshots_again(tmp_path):
    lake = Lake(tmp_path / "wh")
    history(lake)
    expected = {s: lake.rows(snapshot=s) for s in (1, 2, 3)}
    plan = plan_for(lake.root, retain_min=3, retain_max=3)
    journal = tmp_path / "j.duckdb"
    quarantine_apply(plan, journal)
    snapshot_files = {a.path for a in plan.actions if a.path.startswith("snapshot/snapshot-")}
    assert snapshot_files == {"snapshot/snapshot-1", "snapshot/snapshot-2", "snapshot/snapshot-3"}
    for s in (1, 2, 3):
        with pytest.raises(ValueError, match=f"^Snapshot id '{s}' doesn't exist.$"):
            lake.rows(snapshot=s)
    doc = json.loads(run("restore", plan.plan_id, "--journal", journal, "--master", "local[1]", "--output",
                         "json").stdout)
    deletes = sum(a.verb is Verb.DELETE_FILE for a in plan.actions)
    assert (doc["state"], doc["restored"], doc["commit_note"]) == ("COMPLETED", deletes, None)
    assert {s: lake.rows(snapshot=s) for s in (1, 2, 3)} == expected
    assert quarantined_files(lake.root) == set()
    # The plan's EARLIEST hint (a write, not a file put aside) stays: snapshots 1-3 read by id, below the hint.
    whole = json.loads(run("verify", lake.root, "--journal", journal, "--output", "json").stdout)
    assert (whole["whole"], whole["notes"]) == (True, [
        "3 snapshot file(s) of the snapshot directory lie below its EARLIEST hint (4), e.g. snapshot-1: not part of "
        "the table, their files were not checked"])
