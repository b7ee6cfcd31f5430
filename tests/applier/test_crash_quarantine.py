"""kill -9 of an apply --quarantine (``LAKESWEEP_TEST_CRASH``), then resume: nothing lost, nothing twice. Every
file the plan deletes ends in the quarantine exactly once, with its bytes, journaled QUARANTINED once, and
the table ends as an uninterrupted apply --quarantine of a copy of it ends.

The killed apply runs on the driver in a subprocess (``tests.support.driver_apply``), journaling each
result on its own, so ``before-journal:k`` lands after the k-th file was moved and before its record.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, resume
from lakesweep.engine.plan import Verb
from lakesweep.engine.plan_io import write_plan
from lakesweep.engine.quarantine import QUARANTINE_DIR, QuarantineSpec
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import ApplyStarted, FileOutcome
from tests.applier.conftest import REPO
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.table_builder import all_files


def _digests(root: str) -> dict[str, str]:
    out = {}
    for rel in all_files(root):
        with open(os.path.join(root, rel), "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def _shape(root: str, plan_id: str) -> dict[str, str]:
    """The files of the table with the plan's quarantine folder named alike in every copy."""
    qdir = f"{QUARANTINE_DIR}/{plan_id}/"
    return {(f"{QUARANTINE_DIR}/<plan>/{rel[len(qdir):]}" if rel.startswith(qdir) else rel): d
            for rel, d in _digests(root).items()}


def crash_then_resume(tmp_path, stage: str, after: int) -> None:
    root = pt.write_demo_table(str(tmp_path / "wh")).path
    twin = str(tmp_path / "twin")
    shutil.copytree(root, twin)
    plan, same = make_plan(root, retain_min=3), make_plan(twin, retain_min=3)
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    before = _digests(root)
    plan_file, journal = str(tmp_path / "plan.parquet"), str(tmp_path / "j.duckdb")
    write_plan(plan, plan_file)
    env = dict(os.environ, LAKESWEEP_TEST_CRASH=f"{stage}:{after}", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "tests.support.driver_apply", plan_file, journal, "quarantine"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]

    with DuckDBRecorder(journal) as rec:
        assert [r.state for r in resume(rec, executor=DriverExecutor())] == ["COMPLETED"]
        records = rec.file_records(plan_id=plan.plan_id)
        started = [e for e in rec.events(plan_id=plan.plan_id) if isinstance(e, ApplyStarted)]
    with DuckDBRecorder(str(tmp_path / "twin.duckdb")) as rec:
        apply_plan(same, rec, executor=DriverExecutor(), quarantine=QuarantineSpec(same.plan_id))

    qdir = os.path.join(root, QUARANTINE_DIR, plan.plan_id)
    moved = {rel: d for rel, d in _digests(qdir).items()}
    assert moved == {a.path: before[a.path] for a in files}  # each file once, its bytes, nothing else
    assert not any(os.path.exists(os.path.join(root, a.path)) for a in files)
    assert _shape(root, plan.plan_id) == _shape(twin, same.plan_id)
    quarantined = [r for r in records if r.outcome == FileOutcome.QUARANTINED]
    assert sorted(r.action_id for r in quarantined) == [a.action_id for a in files]  # once each
    assert all(r.moved_to == os.path.join(qdir, r.path) for r in quarantined)
    assert not [r for r in records if r.outcome in (FileOutcome.DELETED, FileOutcome.FAILED) and r.kind != "empty-dir"]
    assert [e.mode for e in started] == ["quarantine"]  # one apply, resumed under its own id


def test_kill_9_after_a_file_is_moved_and_before_its_record_then_resume(tmp_path):
    crash_then_resume(tmp_path, "before-journal", 5)


@pytest.mark.slow
@pytest.mark.parametrize("stage, after", [(s, k) for s in ("before-journal", "after-journal") for k in (1, 3, 8, 14)]
                         + [("phase-end", 1), ("phase-start", 2), ("phase-end", 2)])
def test_kill_9_anywhere_during_quarantine_then_resume_loses_and_repeats_nothing(tmp_path, stage, after):
    crash_then_resume(tmp_path, stage, after)
