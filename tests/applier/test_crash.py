"""kill -9 of the applier at random points, then resume: same end state as an uninterrupted apply, and
every file the plan deleted has a journal record."""

import os
import random
import signal
import subprocess
import sys

import pytest

from lakesweep.applier.apply import resume
from lakesweep.applier.local import apply_locally
from lakesweep.engine.plan_io import write_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import FileOutcome
from tests.applier.conftest import REPO, copy_table
from tests.planner.conftest import make_plan
from tests.support.table_builder import ADD, DELETE, E, TableBuilder, all_files
from tests.support.processes import LAKESWEEP

STAGES = ("before-journal", "after-journal")


def build(root: str, seed: int) -> TableBuilder:
    rng = random.Random(seed)
    b = TableBuilder(root, partition_keys=("dt",), partition_types=("STRING",),
                     options={"snapshot.clean-empty-directories": "true"})
    live = []
    for s in range(8):
        adds = [E(ADD, f"d{s}-{i}", (rng.choice("xyz"),), bucket=rng.randint(0, 1), size=5) for i in range(rng.randint(2, 6))]
        dels = rng.sample(live, min(len(live), rng.randint(0, 4)))
        b.commit(adds + [E(DELETE, d.name, d.partition, d.bucket, size=5) for d in dels])
        live = [x for x in live if x not in dels] + adds
        if rng.random() < 0.2:
            b.tag(f"t{s}", s + 1)
    return b


def crash_then_resume(tmp_path, seed: int, stage: str, after: int, spark):
    b = build(str(tmp_path / "t"), seed)
    reference = copy_table(b.root, str(tmp_path / "ref"))
    apply_locally(make_plan(reference, retain_min=2))
    plan = make_plan(b.root, retain_min=2)
    plan_file = str(tmp_path / "plan.parquet")
    write_plan(plan, plan_file)
    journal = str(tmp_path / "j.duckdb")
    env = dict(os.environ, LAKESWEEP_TEST_CRASH=f"{stage}:{after}", PYTHONPATH=REPO)
    proc = subprocess.run(
        [*LAKESWEEP, "apply", plan_file, "--journal", journal, "--master", "local[1]", "-o", "json"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    n = len(plan.actions)
    if after <= n:
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    with DuckDBRecorder(journal) as rec:
        reports = resume(rec, spark=spark)
        assert [r.state for r in reports] in ([], ["COMPLETED"])
        records = rec.file_records(plan_id=plan.plan_id)
    assert all_files(b.root) == all_files(reference)
    ok = (FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT, FileOutcome.KEPT_NOT_EMPTY)
    recorded = {r.action_id for r in records if r.outcome in ok}
    assert recorded >= {a.action_id for a in plan.actions if a.verb.deletes}
    assert all(r.outcome != FileOutcome.KEPT_NOT_EMPTY for r in records if r.kind != "empty-dir")
    return proc, records


# Seeded trials on Spark, in the slow tier (the default tier kills at a phase boundary of every kind, on the
# driver, in test_crash_matrix.py).
@pytest.mark.parametrize("trial", range(2))
@pytest.mark.slow
def test_kill_9_then_resume_ends_like_an_uninterrupted_apply(tmp_path, spark, trial):
    rng = random.Random(trial)
    stage = STAGES[trial % 2]
    crash_then_resume(tmp_path, seed=trial, stage=stage, after=rng.randint(1, 30), spark=spark)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(2, 20))
def test_kill_9_then_resume_ends_like_an_uninterrupted_apply_more(tmp_path, spark, trial):
    test_kill_9_then_resume_ends_like_an_uninterrupted_apply(tmp_path, spark, trial)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(20, 80))
def test_kill_9_then_resume_many(tmp_path, spark, trial):
    rng = random.Random(trial)
    crash_then_resume(tmp_path, seed=trial, stage=rng.choice(STAGES), after=rng.randint(1, 40), spark=spark)


@pytest.mark.slow
def test_a_file_deleted_but_not_journaled_is_recorded_as_already_absent(tmp_path, spark):
    proc, records = crash_then_resume(tmp_path, seed=3, stage="before-journal", after=1, spark=spark)
    first = [r for r in records if r.action_id == 0]
    assert [r.outcome for r in first] == [FileOutcome.ALREADY_ABSENT]


def test_second_process_on_the_same_journal_gets_a_clear_error(tmp_path):
    b = build(str(tmp_path / "t"), 1)
    plan_file = str(tmp_path / "plan.parquet")
    write_plan(make_plan(b.root, retain_min=2), plan_file)
    journal = str(tmp_path / "j.duckdb")
    holder = subprocess.Popen(  # a lakesweep process that writes the journal
        [sys.executable, "-c", "import sys, time\nfrom journal.duckdb_store import DuckDBRecorder\n"
                               "r = DuckDBRecorder(sys.argv[1]); print('ready', flush=True); time.sleep(60)", journal],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=REPO),
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = all_files(b.root)
        proc = subprocess.run([sys.executable, "-m", "lakesweep.cli", "apply", plan_file, "--journal", journal],
                              env=dict(os.environ, PYTHONPATH=REPO), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1
        assert f"is in use by another lakesweep process (pid {holder.pid})" in proc.stderr
        assert all_files(b.root) == before
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


@pytest.mark.spark
@pytest.mark.slow
def test_concurrent_applies_of_the_same_plan_with_separate_journals(tmp_path):
    b = build(str(tmp_path / "t"), 11)
    reference = copy_table(b.root, str(tmp_path / "ref"))
    apply_locally(make_plan(reference, retain_min=2))
    plan = make_plan(b.root, retain_min=2)
    plan_file = str(tmp_path / "plan.parquet")
    write_plan(plan, plan_file)
    env = dict(os.environ, PYTHONPATH=REPO)
    procs = [subprocess.Popen([*LAKESWEEP, "apply", plan_file, "--journal", str(tmp_path / f"j{i}.duckdb"),
                               "--master", "local[1]", "-o", "json"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode in (0, 1), err[-2000:]
    assert all_files(b.root) == all_files(reference)
    # Between them, every planned deletion is journaled as DELETED by exactly one of the two.
    deleted = {}
    for i in range(2):
        with DuckDBRecorder(str(tmp_path / f"j{i}.duckdb")) as rec:
            for r in rec.file_records(plan_id=plan.plan_id):
                if r.outcome == FileOutcome.DELETED:
                    deleted[r.action_id] = deleted.get(r.action_id, 0) + 1
    files = {a.action_id for a in plan.actions if a.verb.deletes and a.kind != "empty-dir"}
    assert {a for a in files if deleted.get(a) == 1} == files


@pytest.mark.slow
def test_an_apply_killed_before_it_started_is_reported_by_name_and_started_by_its_id(tmp_path, spark):
    import json

    from typer.testing import CliRunner

    from lakesweep.cli.main import app
    from lakesweep.engine.plan_io import read_plan
    from tests.support import pypaimon_tables as pt

    runner = CliRunner()
    w = pt.write_append_table(str(tmp_path / "wh"))
    plan_file = str(tmp_path / "plan.parquet")
    r = runner.invoke(app, ["plan", "expire", w.path, "--out", plan_file, "--retain-min", "1", "--time-retained", "0 s"])
    assert r.exit_code == 0, r.output
    plan = read_plan(plan_file)
    pid = plan.plan_id
    before = all_files(w.path)
    journal = str(tmp_path / "j.duckdb")
    env = dict(os.environ, LAKESWEEP_TEST_CRASH="before-start:1", PYTHONPATH=REPO)
    proc = subprocess.run([*LAKESWEEP, "apply", plan_file, "--journal", journal, "--master", "local[1]"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]  # the plan is recorded; the apply never started
    assert all_files(w.path) == before

    r = runner.invoke(app, ["resume", "--journal", journal])
    assert r.exit_code == 0, r.output
    assert r.stdout == (f"Not started: plan {pid} (expire of {w.path}) was recorded, but its apply never started; "
                        f"nothing was deleted. Start it with: lakesweep resume {pid}\n")
    r = runner.invoke(app, ["resume", "--journal", journal, "-o", "json"])
    assert r.exit_code == 0, r.output
    assert [(x["plan_id"], x["state"], x["apply_id"]) for x in json.loads(r.stdout)] == [(pid, "NOT_STARTED", None)]
    assert all_files(w.path) == before

    with DuckDBRecorder(journal) as rec:
        [report] = resume(rec, pid, spark=spark)
        assert report.state == "COMPLETED" and report.resumed
        assert report.counts["DELETED"] == sum(a.verb.deletes for a in plan.actions) > 0
        assert resume(rec) == []  # applied: nothing is left to start or finish
