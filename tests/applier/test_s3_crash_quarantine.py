"""kill -9 of an apply --quarantine on SeaweedFS (``LAKESWEEP_TEST_CRASH``), then resume, in a versioned bucket
and in one without versioning: every file is put aside once (one delete marker over its one version, or one
copy with its bytes) and journaled QUARANTINED once, with where it is; restoring the records brings it all back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, resume
from lakesweep.cli.main import app
from lakesweep.engine.fileio import MoveOutcome, fileio_for, resolve_s3_settings
from lakesweep.engine.plan import Verb
from lakesweep.engine.plan_io import read_plan
from lakesweep.engine.quarantine import QUARANTINE_DIR, VersionedDelete
from lakesweep.engine.s3_client import s3_client
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import FileOutcome
from tests.applier.conftest import REPO
from tests.support import pypaimon_tables as pt
from tests.support.seaweed import VERSIONED_BUCKET, ensure_bucket, list_tree, upload_tree

pytestmark = pytest.mark.s3


def _versions(bucket: str, key: str) -> tuple[list[str], list[str]]:
    page = s3_client(resolve_s3_settings({}), max_attempts=1).list_object_versions(Bucket=bucket, Prefix=key)
    return ([v["VersionId"] for v in page.get("Versions", ()) if v["Key"] == key],
            [m["VersionId"] for m in page.get("DeleteMarkers", ()) if m["Key"] == key])


def _crash_then_resume(tmp_path, s3_env, mode: str, stage: str, after: int) -> None:
    bucket = ensure_bucket(VERSIONED_BUCKET, "Enabled") if mode == "versioned" else s3_env["bucket"]
    w = pt.write_demo_table(str(tmp_path / "wh"))
    prefix = f"{bucket}/wh-{uuid.uuid4().hex[:8]}/{pt.DATABASE}.db/demo_t"
    upload_tree(s3_env["fs"], w.path, prefix)
    plan_file, journal = tmp_path / "plan.parquet", str(tmp_path / "j.duckdb")
    r = CliRunner().invoke(app, ["plan", "expire", f"s3://{prefix}", "--out", str(plan_file), "--retain-min", "3",
                                 "--time-retained", "0 s", "-o", "json"])
    assert r.exit_code == 0, r.output
    plan = read_plan(str(plan_file))
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    before = list_tree(s3_env["fs"], prefix)
    env = dict(os.environ, LAKESWEEP_TEST_CRASH=f"{stage}:{after}", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "tests.support.driver_apply", str(plan_file), journal, "quarantine"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]

    with DuckDBRecorder(journal) as rec:
        assert [r.state for r in resume(rec, executor=DriverExecutor())] == ["COMPLETED"]
        records = rec.file_records(plan_id=plan.plan_id)
    quarantined = [r for r in records if r.outcome == FileOutcome.QUARANTINED]
    assert sorted(r.action_id for r in quarantined) == [a.action_id for a in files]  # once each
    assert not [r for r in records if r.outcome in (FileOutcome.DELETED, FileOutcome.FAILED) and r.kind != "empty-dir"]
    after_apply = list_tree(s3_env["fs"], prefix)
    assert before - after_apply == {a.path for a in files}
    key = prefix.partition("/")[2]
    if mode == "versioned":
        for r in quarantined:  # one version under one marker: no delete went out twice
            versions, markers = _versions(bucket, f"{key}/{r.path}")
            assert r.moved_to == VersionedDelete(versions[0], markers[0]).where() and (len(versions),
                                                                                       len(markers)) == (1, 1)
        assert not [f for f in after_apply if f.startswith(QUARANTINE_DIR)]
    else:
        qdir = f"{QUARANTINE_DIR}/{plan.plan_id}/"
        assert {f[len(qdir):] for f in after_apply if f.startswith(qdir)} == {a.path for a in files}
        assert all(r.moved_to == f"s3://{prefix}/{qdir}{r.path}" for r in quarantined)

    io = fileio_for(f"s3://{prefix}")
    assert {io.restore(f"s3://{prefix}/{r.path}", r.moved_to) for r in quarantined} == {MoveOutcome.MOVED}
    assert list_tree(s3_env["fs"], prefix) == before | {"snapshot/EARLIEST"}


@pytest.mark.parametrize("mode", ["versioned", pytest.param("copy", marks=pytest.mark.slow)])
def test_kill_9_after_a_file_is_put_aside_on_s3_and_before_its_record_then_resume(tmp_path, s3_env, mode):
    _crash_then_resume(tmp_path, s3_env, mode, "before-journal", 5)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["versioned", "copy"])
@pytest.mark.parametrize("stage, after", [("before-journal", 1), ("after-journal", 3), ("before-journal", 11),
                                          ("phase-end", 1), ("phase-start", 2)])
def test_kill_9_anywhere_during_quarantine_on_s3_then_resume(tmp_path, s3_env, mode, stage, after):
    _crash_then_resume(tmp_path, s3_env, mode, stage, after)
