"""``plan purge`` and its apply on a table pypaimon wrote, with a journal holding a plan's quarantine (made as
``apply --quarantine`` makes it, through the journal's API and ``FileIO.quarantine``): after the retention
exactly the quarantined files go, and their emptied folders; before it nothing is planned; a restored file
is never purged; a tampered purge plan is refused at apply; the plan is deterministic."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import OrphanKind
from lakesweep.engine.paimon.orphans import list_orphan_candidates
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paths import resolve_action_path
from lakesweep.engine.plan import Action, canonical_actions
from lakesweep.engine.plan_io import read_plan, write_plan
from lakesweep.engine.purge import PurgeKind
from lakesweep.engine.quarantine import QUARANTINE_DIR, QuarantineSpec, VersionedDelete
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import ApplyCompleted, ApplyStarted, FileOutcome, FileRecord
from lakesweep.journal.quarantined import quarantine_records
from lakesweep.planner.kinds import plan_kind
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from lakesweep.planner.purge import resolve_purge_options
from tests.applier.test_safety import Lake
from tests.planner.test_orphans import NOW, age, junk

DAY = 86_400_000
T0 = NOW - 3 * DAY  # when the quarantine happened
JUNK = ["dt=a/bucket-0/data-failed-0.parquet", "dt=a/bucket-0/data-failed-1.parquet", "manifest/manifest-dead-0",
        "snapshot/UNKNOWN-1"]


def tree(root) -> dict[str, int]:
    return {os.path.relpath(os.path.join(d, f), root): os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(root) for f in fs}


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    for rel in JUNK:
        junk(lake.root, rel)
    age(lake.root)
    return lake


def quarantine(lake, journal, *, retention_ms=DAY, at=T0):
    """Plan orphans, then do what ``apply --quarantine`` does: journal the start in quarantine mode, move each
    file with ``FileIO.quarantine`` and journal it QUARANTINED where it went. The plan."""
    t = open_table(lake.root)
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))
    assert sorted(a.path for a in plan.actions) == sorted(JUNK)
    spec = QuarantineSpec(plan.plan_id, retention_ms=retention_ms)
    with DuckDBRecorder(str(journal)) as rec:
        rec.record_plan(plan, recorded_ms=at)
        rec.append([ApplyStarted(apply_id="q1", plan_id=plan.plan_id, n_actions=len(plan.actions), bytes=0,
                                 master="local", dry_run=False, started_ms=at, mode="quarantine",
                                 quarantine=spec.to_json())])
        for a in plan.actions:
            full = resolve_action_path(t.location, a.path)
            _, where = t.fileio.quarantine(full, spec.location(full, t.location))
            rec.record_files([FileRecord("q1", plan.plan_id, a.action_id, a.path, str(a.kind), a.phase, a.size,
                                         FileOutcome.QUARANTINED, None, 1, at, moved_to=where)])
        rec.append([ApplyCompleted(apply_id="q1", plan_id=plan.plan_id, counts={"QUARANTINED": len(plan.actions)},
                                   bytes_reclaimed=0, duration_ms=1, finished_ms=at)])
    return plan


def restore(lake, journal, plan, path, *, at=T0 + 1):
    """What ``lakesweep restore --files PATH`` does: move one file back and journal it RESTORED."""
    t = open_table(lake.root)
    a = next(a for a in plan.actions if a.path == path)
    with DuckDBRecorder(str(journal)) as rec:
        (q,) = [q for q in quarantine_records(rec) if q.path == path]
        t.fileio.restore(resolve_action_path(t.location, path), q.where)
        rec.append([ApplyStarted(apply_id="r1", plan_id=plan.plan_id, n_actions=len(plan.actions), bytes=0,
                                 master="local", dry_run=False, started_ms=at, mode="restore")])
        rec.record_files([FileRecord("r1", plan.plan_id, a.action_id, a.path, str(a.kind), a.phase, a.size,
                                     FileOutcome.RESTORED, None, 1, at, moved_to=q.where)])
        rec.append([ApplyCompleted(apply_id="r1", plan_id=plan.plan_id, counts={"RESTORED": 1}, bytes_reclaimed=0,
                                   duration_ms=1, finished_ms=at)])


def purge_plan(lake, journal, now_ms):
    with DuckDBRecorder(str(journal), read_only=True) as rec:
        records = quarantine_records(rec)
    entry = plan_kind("purge", "paimon")
    t = open_table(lake.root)
    return entry.read_and_plan(t, now_ms=now_ms, options=resolve_purge_options(t.options, journal=str(journal),
                                                                                records=records))


def apply(plan, journal, **kw):
    with DuckDBRecorder(str(journal)) as rec:
        return apply_plan(plan, rec, executor=DriverExecutor(), **kw)


def test_after_the_retention_exactly_the_quarantined_files_and_their_emptied_folders_go(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    q = quarantine(lake, journal)
    folder = f"{QUARANTINE_DIR}/{q.plan_id}"
    table_files = {k: v for k, v in tree(lake.root).items() if not k.startswith(QUARANTINE_DIR)}
    assert sorted(k for k in tree(lake.root) if k.startswith(QUARANTINE_DIR)) == sorted(
        f"{folder}/{rel}" for rel in JUNK)
    p = purge_plan(lake, journal, T0 + DAY)
    assert [(str(a.kind), a.path, a.source) for a in p.actions if a.kind is PurgeKind.QUARANTINED_FILE] == sorted(
        (str(PurgeKind.QUARANTINED_FILE), f"{folder}/{rel}", f"{lake.root}/{folder}/{rel}") for rel in JUNK)
    assert [a.path for a in p.actions if a.kind is PurgeKind.QUARANTINE_DIR] == [
        f"{folder}/dt=a/bucket-0", f"{folder}/dt=a", f"{folder}/manifest", f"{folder}/snapshot", folder]
    assert p.stats["due"] == 4 and p.stats["waiting"] == 0 and list(p.scope.quarantines) == [q.plan_id]
    report = apply(p, journal)
    assert report.state == "COMPLETED" and report.counts["DELETED"] == 9 and report.whole
    assert tree(lake.root) == table_files  # nothing else changed
    assert os.listdir(os.path.join(lake.root, QUARANTINE_DIR)) == []
    assert lake.rows() == [0, 1]
    with DuckDBRecorder(str(journal), read_only=True) as rec:
        assert all(r.purged for r in quarantine_records(rec))
    assert purge_plan(lake, journal, T0 + 2 * DAY).actions == ()  # purged files are not planned again


def test_before_the_retention_nothing_is_planned(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    quarantine(lake, journal)
    p = purge_plan(lake, journal, T0 + DAY - 1)
    assert p.actions == ()
    assert (p.stats["due"], p.stats["waiting"], p.stats["next_due_ms"]) == (0, 4, T0 + DAY)
    assert plan_kind("purge", "paimon").describe(p).nothing_to_do


def test_a_restored_file_is_never_purged(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    q = quarantine(lake, journal)
    restore(lake, journal, q, JUNK[0])
    p = purge_plan(lake, journal, T0 + DAY)
    assert sorted(a.path for a in p.actions if a.kind is PurgeKind.QUARANTINED_FILE) == sorted(
        f"{QUARANTINE_DIR}/{q.plan_id}/{rel}" for rel in JUNK[1:])
    assert p.stats["restored"] == 1
    assert apply(p, journal).state == "COMPLETED"
    assert os.path.exists(os.path.join(lake.root, JUNK[0]))
    assert not os.path.exists(os.path.join(lake.root, QUARANTINE_DIR, q.plan_id))


def test_a_quarantine_by_a_versioned_delete_is_purged_by_its_version(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    t = open_table(lake.root)
    plan = plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))
    a = plan.actions[0]
    where = VersionedDelete("v1", "m1").where()
    with DuckDBRecorder(str(journal)) as rec:
        rec.record_plan(plan, recorded_ms=T0)
        rec.append([ApplyStarted(apply_id="q1", plan_id=plan.plan_id, n_actions=len(plan.actions), bytes=0,
                                 master="local", dry_run=False, started_ms=T0, mode="quarantine",
                                 quarantine=QuarantineSpec(plan.plan_id, retention_ms=DAY).to_json())])
        rec.record_files([FileRecord("q1", plan.plan_id, a.action_id, a.path, str(a.kind), a.phase, a.size,
                                     FileOutcome.QUARANTINED, None, 1, T0, moved_to=where)])
    p = purge_plan(lake, journal, T0 + DAY)
    assert [(str(x.kind), x.path, x.source, str(x.verb)) for x in p.actions] == [
        ("purge-quarantined-version", a.path, "s3-version:v1:m1", "purge-version")]
    report = apply(p, journal)  # a local file system keeps no versions
    assert report.state == "FAILED" and report.counts["FAILED"] == 1
    assert os.path.exists(os.path.join(lake.root, a.path))


def _forged(p, *actions):
    return dataclasses.replace(p, actions=canonical_actions(list(actions)))


def test_a_tampered_purge_plan_is_refused_at_apply_and_nothing_is_deleted(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    q = quarantine(lake, journal)
    p = purge_plan(lake, journal, T0 + DAY)
    live = sorted(k for k in tree(lake.root) if k.endswith(".parquet") and not k.startswith(QUARANTINE_DIR))[0]
    table_file = _forged(p, Action(PurgeKind.QUARANTINED_FILE, live, source=f"{lake.root}/{live}"))
    with pytest.raises(PlanRejected, match=rf"action 0 \(purge-quarantined-file '{live}'\) is refused: it is not in "
                                           rf"a quarantine folder of the table \({QUARANTINE_DIR}/<plan id>/ under"):
        apply(table_file, journal)
    other_kind = _forged(p, Action(OrphanKind.ORPHAN_DATA_FILE, live))
    with pytest.raises(PlanRejected, match="a purge deletes only quarantined files, their versions and their "
                                           "emptied folders"):
        apply(other_kind, journal)
    assert os.path.exists(os.path.join(lake.root, live))
    stray = f"{QUARANTINE_DIR}/{q.plan_id}/dt=a/bucket-0/not-journaled.parquet"
    junk(lake.root, stray)
    before = tree(lake.root)
    unjournaled = _forged(p, Action(PurgeKind.QUARANTINED_FILE, stray, source=f"{lake.root}/{stray}"))
    with pytest.raises(PlanRejected, match="this journal does not hold the file in quarantine"):
        apply(unjournaled, journal)
    with pytest.raises(PlanRejected, match="with a retention up to .* which has not passed"):
        apply(p, journal, clock=lambda: T0 + DAY - 1)
    assert tree(lake.root) == before


def test_the_plan_is_byte_for_byte_deterministic(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    quarantine(lake, journal)
    for name in ("a.plan", "b.plan"):
        write_plan(purge_plan(lake, journal, T0 + DAY), str(tmp_path / name))
    assert (tmp_path / "a.plan").read_bytes() == (tmp_path / "b.plan").read_bytes()


def test_plan_purge_on_the_command_line(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    q = quarantine(lake, journal)
    out = tmp_path / "purge.plan"
    r = CliRunner().invoke(app, ["plan", "purge", lake.root, "--journal", str(journal), "--out", str(out),
                                 "--now", str(T0 + DAY), "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["plan_kind"] == "purge" and doc["quarantines"] == [q.plan_id]
    assert len(read_plan(str(out)).actions) == 9
    shown = CliRunner().invoke(app, ["show", str(out)])
    assert shown.exit_code == 0, shown.output
    assert f"deletes for good 4 quarantined file(s) of plan(s) {q.plan_id}" in " ".join(shown.stdout.split())


def test_a_purge_plan_is_never_itself_quarantined(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    quarantine(lake, journal)
    p = purge_plan(lake, journal, T0 + DAY)
    report = apply(p, journal, quarantine=QuarantineSpec(p.plan_id))
    assert (report.mode, report.counts["DELETED"], report.counts.get("QUARANTINED", 0)) == ("delete", 9, 0)
    assert os.listdir(os.path.join(lake.root, QUARANTINE_DIR)) == []


def test_apply_with_quarantine_then_purge_after_the_retention_on_the_command_line(lake, tmp_path, spark):
    journal, plan_file, purge_file = tmp_path / "j.duckdb", tmp_path / "orphans.plan", tmp_path / "purge.plan"

    def cli(*args):
        r = CliRunner().invoke(app, [str(a) for a in args])
        assert r.exit_code == 0, r.output
        return r

    cli("plan", "orphans", lake.root, "--out", plan_file)
    plan = read_plan(str(plan_file))
    table_files = {k: v for k, v in tree(lake.root).items() if k not in JUNK}
    before = int(time.time() * 1000)
    report = json.loads(cli("apply", plan_file, "--journal", journal, "--quarantine", "--retention", "1 s",
                            "-o", "json").stdout)
    assert (report["state"], report["mode"], report["counts"]["QUARANTINED"]) == ("COMPLETED", "quarantine", 4)
    folder = f"{QUARANTINE_DIR}/{plan.plan_id}"
    assert sorted(k for k in tree(lake.root) if k.startswith(QUARANTINE_DIR)) == sorted(f"{folder}/{r}" for r in JUNK)

    early = json.loads(cli("plan", "purge", lake.root, "--journal", journal, "--out", purge_file, "--now", before,
                           "-o", "json").stdout)
    assert (early["stats"]["due"], early["stats"]["waiting"], len(read_plan(str(purge_file)).actions)) == (0, 4, 0)
    time.sleep(1.2)  # the retention passes
    cli("plan", "purge", lake.root, "--journal", journal, "--out", purge_file)
    applied = json.loads(cli("apply", purge_file, "--journal", journal, "-o", "json").stdout)
    assert (applied["state"], applied["counts"]["DELETED"]) == ("COMPLETED", 9)
    assert tree(lake.root) == table_files and os.listdir(os.path.join(lake.root, QUARANTINE_DIR)) == []
    plans = json.loads(cli("journal", "plans", "--journal", journal, "-o", "json").stdout)
    assert [(p["kind"], p["state"]) for p in plans] == [("orphans", "APPLIED"), ("purge", "APPLIED")]


def maintain(journal, warehouse, plans, **kw):
    from lakesweep.journal.audit import list_maintenance
    from lakesweep.maintain import Maintenance

    with DuckDBRecorder(str(journal)) as rec:
        Maintenance(rec, str(plans), warehouse=str(warehouse), executor=DriverExecutor(), **kw).run()
        return [(r["operation"], r["outcome"], r["message"]) for r in list_maintenance(rec)]


def test_maintain_purges_a_tables_quarantine_once_its_retention_has_passed(lake, tmp_path):
    journal = tmp_path / "j.duckdb"
    q = quarantine(lake, journal, retention_ms=2 * DAY)
    rows = maintain(journal, tmp_path / "wh", tmp_path / "plans", operations=("expire", "purge"),
                    clock=lambda: T0 + DAY)  # before the retention has passed
    assert [r for r in rows if r[0] != "expire"] == [("purge", "skipped", "no quarantined file's retention has passed")]
    assert len(os.listdir(os.path.join(lake.root, QUARANTINE_DIR, q.plan_id))) == 3
    rows = maintain(journal, tmp_path / "wh", tmp_path / "plans", operations=("purge",))
    assert rows[-1][:2] == ("purge", "applied") and rows[-1][2].startswith("purged 9 quarantined file(s)")
    assert not os.path.exists(os.path.join(lake.root, QUARANTINE_DIR, q.plan_id))


def test_maintain_plans_no_purge_for_a_table_without_quarantine(lake, tmp_path):
    rows = maintain(tmp_path / "j.duckdb", tmp_path / "wh", tmp_path / "plans", operations=("expire", "purge"))
    assert [r[0] for r in rows] == ["expire"]
