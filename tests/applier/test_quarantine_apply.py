"""apply --quarantine on a table pypaimon wrote: every file the plan deletes is put aside, journaled once."""

from __future__ import annotations

import hashlib
import os

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, dry_run_plan, resume
from lakesweep.applier.quarantine import QuarantineChoice
from lakesweep.engine.errors import QuarantineUnsupported
from lakesweep.engine.fileio import ArrowFileIO, FileIO
from lakesweep.engine.plan import Verb
from lakesweep.engine.quarantine import QUARANTINE_DIR, QuarantineSpec
from lakesweep.journal.events import ApplyStarted, FileOutcome
from lakesweep.journal.queries import plan_done_actions
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.table_builder import all_files


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _digests(root: str) -> dict[str, str]:
    out = {}
    for rel in all_files(root):
        out[rel] = hashlib.sha256(_read(os.path.join(root, rel))).hexdigest()
    return out


@pytest.fixture
def demo(tmp_path):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    return w.path


def test_quarantined_expiry_moves_every_planned_file_under_the_plan_id_and_deletes_nothing(demo, recorder):
    plan = make_plan(demo, retain_min=3)
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    before = _digests(demo)
    assert len(files) > 5 and all(a.path in before for a in files)
    spec = QuarantineSpec(plan.plan_id)

    report = apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=spec)

    assert (report.state, report.mode) == ("COMPLETED", "quarantine")
    assert report.counts["QUARANTINED"] == len(files) and report.counts["DELETED"] == 0
    assert (report.bytes_reclaimed, report.bytes_quarantined) == (0, sum(a.size or 0 for a in files))
    after = _digests(demo)
    qdir = f"{QUARANTINE_DIR}/{plan.plan_id}/"
    moved = {rel[len(qdir):]: digest for rel, digest in after.items() if rel.startswith(qdir)}
    assert moved == {a.path: before[a.path] for a in files}  # every planned file, byte for byte, once
    kept = {rel: d for rel, d in after.items() if not rel.startswith(QUARANTINE_DIR + "/")}
    gone = set(before) - set(kept)
    assert gone == {a.path for a in files}  # nothing else left its place (the hint is written, not removed)
    records = [r for r in recorder.file_records(plan_id=plan.plan_id) if r.outcome == FileOutcome.QUARANTINED]
    assert sorted(r.action_id for r in records) == [a.action_id for a in files]
    assert {r.path: r.moved_to for r in records} == {a.path: os.path.join(demo, qdir + a.path) for a in files}
    started = [e for e in recorder.events(plan_id=plan.plan_id) if isinstance(e, ApplyStarted)]
    assert [(e.mode, e.quarantine) for e in started] == [("quarantine", spec.to_json())]
    assert plan_done_actions(recorder, plan.plan_id) == frozenset(a.action_id for a in plan.actions)
    totals = recorder.apply_totals(report.apply_id)
    assert totals[FileOutcome.QUARANTINED] == (len(files), report.bytes_quarantined)
    assert totals[FileOutcome.DELETED] == (0, 0)


def test_quarantine_applied_again_moves_nothing_and_says_where_each_file_is(demo, recorder):
    plan = make_plan(demo, retain_min=3)
    spec = QuarantineSpec(plan.plan_id)
    first = apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=spec)
    before = _digests(demo)
    again = apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=spec)
    assert again.state == "COMPLETED" and _digests(demo) == before
    n = sum(1 for a in plan.actions if a.verb is Verb.DELETE_FILE)
    assert (again.counts["QUARANTINED"], again.counts["ALREADY_ABSENT"], again.counts["DELETED"]) == (n, 0, 0)
    where = {r.apply_id: {r.action_id: r.moved_to for r in recorder.file_records(apply_id=r.apply_id)
                          if r.moved_to} for r in recorder.file_records(plan_id=plan.plan_id)}
    assert where[again.apply_id] == where[first.apply_id] and len(where[first.apply_id]) == n


def test_a_file_already_at_its_place_in_the_quarantine_fails_its_action_and_both_are_kept(demo, recorder):
    plan = make_plan(demo, retain_min=3)
    first = next(a for a in plan.actions if a.verb is Verb.DELETE_FILE and a.phase == 1)
    squatter = os.path.join(demo, QUARANTINE_DIR, plan.plan_id, first.path)
    os.makedirs(os.path.dirname(squatter))
    with open(squatter, "wb") as f:
        f.write(b"someone else's")
    original = _read(os.path.join(demo, first.path))

    report = apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=QuarantineSpec(plan.plan_id))

    assert report.state == "FAILED" and report.counts["FAILED"] == 1
    assert _read(squatter) == b"someone else's"
    assert _read(os.path.join(demo, first.path)) == original
    failed = [r for r in recorder.file_records(plan_id=plan.plan_id) if r.outcome == FileOutcome.FAILED]
    target = os.path.join(demo, first.path)
    assert [(r.path, r.attempt, r.error) for r in failed] == [(first.path, 1, (
        f"not quarantined: a file is already at {squatter}, so {target} was not moved there; both are kept"))]


def test_resume_after_a_failed_quarantine_goes_on_putting_files_aside(demo, recorder):
    plan = make_plan(demo, retain_min=3)
    first = next(a for a in plan.actions if a.verb is Verb.DELETE_FILE and a.phase == 1)
    squatter = os.path.join(demo, QUARANTINE_DIR, plan.plan_id, first.path)
    os.makedirs(os.path.dirname(squatter))
    open(squatter, "wb").close()
    apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=QuarantineSpec(plan.plan_id))
    os.unlink(squatter)

    [report] = resume(recorder, plan.plan_id, executor=DriverExecutor())

    assert (report.state, report.mode) == ("COMPLETED", "quarantine")
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    assert all(os.path.exists(os.path.join(demo, QUARANTINE_DIR, plan.plan_id, a.path)) for a in files)
    assert [e.mode for e in recorder.events(plan_id=plan.plan_id) if isinstance(e, ApplyStarted)] == [
        "quarantine", "quarantine"]


def test_dry_run_with_quarantine_counts_files_it_would_put_aside_and_moves_nothing(demo):
    plan = make_plan(demo, retain_min=3)
    before = _digests(demo)
    report = dry_run_plan(plan, executor=DriverExecutor(), quarantine=QuarantineSpec(plan.plan_id))
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    dirs = [a for a in plan.actions if a.verb is Verb.DELETE_EMPTY_DIR]
    assert (report.mode, report.counts["QUARANTINED"], report.counts["DELETED"]) == ("quarantine", len(files),
                                                                                     len(dirs))
    assert report.bytes_quarantined == sum(a.size or 0 for a in files)
    assert _digests(demo) == before


def test_a_store_that_cannot_move_files_is_refused_before_the_apply_starts(demo, recorder):
    class NoMoves(ArrowFileIO):
        def move_no_replace(self, src, dst):
            return FileIO.move_no_replace(self, src, dst)

    plan = make_plan(demo, retain_min=3)
    before = _digests(demo)
    with pytest.raises(QuarantineUnsupported, match="cannot quarantine files"):
        apply_plan(plan, recorder, executor=DriverExecutor(), fileio=NoMoves("file"),
                   quarantine=QuarantineSpec(plan.plan_id))
    assert _digests(demo) == before
    assert not any(isinstance(e, ApplyStarted) for e in recorder.events(plan_id=plan.plan_id))


@pytest.mark.parametrize("choice, quarantined", [(None, True), (QuarantineChoice(False, many_tables=True), False)])
def test_maintain_quarantines_a_table_whose_option_says_so_unless_told_not_to(tmp_path, choice, quarantined):
    from lakesweep.journal.audit import list_maintenance
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.maintain import Maintenance

    w = pt.write_append_table(str(tmp_path / "wh"), options={
        "lakesweep.quarantine": "true", "lakesweep.quarantine.retention": "2 d", "snapshot.num-retained.min": "1",
        "snapshot.num-retained.max": "1", "snapshot.time-retained": "0 s"})
    extra = {} if choice is None else {"quarantine": choice}
    with DuckDBRecorder(str(tmp_path / "j.duckdb")) as rec:
        report = Maintenance(rec, str(tmp_path / "plans"), warehouse=str(tmp_path / "wh"), operations=("expire",),
                             executor=DriverExecutor(), **extra).run()
        [row] = list_maintenance(rec)
        started = [e for e in rec.events(plan_id=row["plan_id"]) if isinstance(e, ApplyStarted)]
        moved = sum(1 for r in rec.file_records(plan_id=row["plan_id"]) if r.outcome == FileOutcome.QUARANTINED)
    assert report.failed == 0 and row["outcome"] == "applied"
    directory = os.path.join(w.path, QUARANTINE_DIR, row["plan_id"])
    if quarantined:
        assert [(e.mode, e.quarantine["retention_ms"]) for e in started] == [("quarantine", 2 * 86_400_000)]
        assert moved > 0 and row["message"].endswith(f"; quarantined {moved} file(s) in {directory} "
                                       f"('lakesweep restore {row['plan_id']}' brings them back)"), row["message"]
        assert os.path.isdir(directory)
    else:
        assert [e.mode for e in started] == ["delete"] and moved == 0 and not os.path.exists(directory)


@pytest.mark.java
def test_quarantine_on_hdfs_renames_every_planned_file_into_the_plan_folder(hdfs, tmp_path, recorder):
    import uuid

    from tests.support.hdfs import list_tree, upload_tree

    w = pt.write_demo_table(str(tmp_path / "wh"))
    root = f"/quarantine-{uuid.uuid4().hex[:8]}/demo_t"
    upload_tree(hdfs, w.path, root)
    location = f"{hdfs}{root}"
    plan = make_plan(location, retain_min=3)
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    before = set(list_tree(hdfs, root))
    report = apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=QuarantineSpec(plan.plan_id))
    assert (report.state, report.counts["QUARANTINED"]) == ("COMPLETED", len(files))
    after = set(list_tree(hdfs, root))
    qdir = f"{QUARANTINE_DIR}/{plan.plan_id}/"
    assert {p[len(qdir):] for p in after if p.startswith(qdir)} == {a.path for a in files}
    assert before - after == {a.path for a in files}
    moved = {r.path: r.moved_to for r in recorder.file_records(plan_id=plan.plan_id)
             if r.outcome == FileOutcome.QUARANTINED}
    assert moved == {a.path: f"{location}/{qdir}{a.path}" for a in files}
