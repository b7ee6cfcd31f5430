"""Apply must be safe on its own, whatever the plan says: one test per class of attack, on tables pypaimon wrote.

Each test changes the table (or the plan) between planning and applying the way a user, a writer or a
forger could, and checks that apply refuses with the reason, deletes nothing, and journals the refusal.
"""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pypaimon import CatalogFactory, Schema
from pypaimon.common.identifier import Identifier

import lakesweep.applier.phases as phases_mod
import lakesweep.planner.paimon.expire as expire_mod
from lakesweep.applier.apply import apply_plan, dry_run_plan, resume
from lakesweep.engine.errors import PlanRejected, StalePlan, UnsupportedTable
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.paimon.requirements import AssertSnapshotsPresent
from lakesweep.engine.paimon.table import open_table
from lakesweep.journal.events import FileOutcome
from lakesweep.journal.queries import incomplete_applies
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import resolve_expire_options
from tests.support.table_builder import all_files

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
FAR_FUTURE = 10**15


class Lake:
    """A pypaimon table ``db.t`` under ``warehouse``, with helpers for the moves a writer makes."""

    def __init__(self, warehouse, *, options=None):
        self.catalog = CatalogFactory.create({"warehouse": str(warehouse)})
        self.catalog.create_database("db", True)
        self.catalog.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], options={k: str(v) for k, v in (options or {}).items()}), False)
        self.table = self.catalog.get_table("db.t")
        self.root = os.path.join(str(warehouse), "db.db", "t")
        self.next_id = 0

    def commit(self, dt="a", *, overwrite=False, branch=None):
        table = self.table if branch is None else self.catalog.get_table(Identifier("db", "t", branch=branch))
        builder = table.new_batch_write_builder()
        if overwrite:
            builder = builder.overwrite({"dt": dt})
        write, commit = builder.new_write(), builder.new_commit()
        try:
            write.write_arrow(pa.Table.from_pylist([{"id": self.next_id, "dt": dt}], schema=SCHEMA))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
        self.next_id += 1

    def rows(self, *, snapshot=None):
        table = self.table if snapshot is None else self.table.copy({"scan.snapshot-id": str(snapshot)})
        rb = table.new_read_builder()
        return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("id").to_pylist())

    def data_files(self):
        return {f for f in all_files(self.root) if f.endswith(".parquet")}


def plan_for(root, *, branch="main", **flags):
    t = open_table(root, branch=branch)
    flags.setdefault("time_retained", 0)
    return plan_expire(t, now_ms=FAR_FUTURE, options=resolve_expire_options(t.options, **flags))


def history(lake):
    """1 add a, 2 add b, 3 overwrite a (deletes snapshot 1's file), 4 add b, 5 add b, 6 add a."""
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)
    for dt in ("b", "b", "a"):
        lake.commit(dt)


def forge(plan: CleanupPlan, *extra: Action, drop=lambda a: False) -> CleanupPlan:
    """What a forger with the plan file can do: change the actions and recompute the id (an unkeyed hash)."""
    actions = canonical_actions([replace(a, action_id=-1) for a in plan.actions if not drop(a)] + list(extra))
    return replace(plan, actions=actions)


def refused_events(recorder, plan):
    return [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "ApplyRefused"]


def assert_refused_untouched(lake, plan, recorder, spark, match, before_rows):
    before = all_files(lake.root)
    with pytest.raises(PlanRejected, match=match):
        apply_plan(plan, recorder, spark=spark)
    assert all_files(lake.root) == before
    assert lake.rows() == before_rows
    assert len(refused_events(recorder, plan)) == 1
    assert not [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "ApplyStarted"]


# -- 1. rollback, then new commits, between plan and apply -------------------------------------------


def test_rollback_and_recommit_between_plan_and_apply_is_refused(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)  # expires [1, 5): deletes snapshot 1's file, overwritten by 3
    assert (plan.begin, plan.end) == (1, 5)
    lake.table.rollback_to(2)
    for dt in ("b", "b", "b"):
        lake.commit(dt)  # snapshots 3, 4, 5 exist again, with other content; snapshot 1's file is live again
    rows = lake.rows()
    assert 0 in rows
    assert_refused_untouched(lake, plan, recorder, spark, "is not the snapshot the plan read", rows)


def test_reachability_is_checked_again_before_each_destructive_phase(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)

    class TagAfterDataFiles(phases_mod.NoProgress):
        def phase_finished(self, phase):
            if phase == "data_files":
                lake.table.create_tag("late", snapshot_id=4)  # now protects snapshot 4's manifests

    manifests_before = {f for f in all_files(lake.root) if f.startswith("manifest/")}
    with pytest.raises(StalePlan, match="tag 'late' was added at snapshot 4"):
        apply_plan(plan, recorder, spark=spark, progress=TagAfterDataFiles())
    assert {f for f in all_files(lake.root) if f.startswith("manifest/")} == manifests_before
    failed = [e for e in recorder.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "ApplyFailed"]
    assert len(failed) == 1 and failed[0].reason.startswith("refused: ")
    assert lake.rows(snapshot=4) == [1, 2, 3]


# -- 2. branch plans and main ---------------------------------------------------------------------------


def branched(tmp_path):
    """Main: 1 add a, 2 add a, 3 add b, tag 't2' on 2. Branch 'b' from that tag (its snapshot 2 shares main's
    manifest lists and files); the branch's copy of the tag is deleted, then the branch overwrites a and adds."""
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("a")
    lake.commit("b")
    lake.table.create_tag("t2", snapshot_id=2)
    lake.table.branch_manager().create_branch("b", "t2")
    lake.catalog.get_table(Identifier("db", "t", branch="b")).delete_tag("t2")
    lake.commit("a", overwrite=True, branch="b")
    lake.commit("b", branch="b")
    return lake


def test_a_branch_plan_never_deletes_what_main_still_reads(tmp_path):
    lake = branched(tmp_path)
    with pytest.raises(PlanRejected, match=r"still used by snapshot \d of main.*Paimon #6272"):
        plan_for(lake.root, branch="b", retain_min=1)


def test_apply_refuses_a_branch_plan_that_would_delete_mains_files(tmp_path, spark, recorder, monkeypatch):
    lake = branched(tmp_path)
    # The plan an unguarded planner makes (Paimon's own expiry of the branch does the same, #6272).
    monkeypatch.setattr(expire_mod, "assert_unreachable", lambda *a, **k: None)
    plan = plan_for(lake.root, branch="b", retain_min=1)
    monkeypatch.undo()
    assert any(a.kind == ActionKind.DATA_FILE for a in plan.actions)
    rows = lake.rows()
    assert_refused_untouched(lake, plan, recorder, spark, r"still used by (snapshot \d|tag 't2') of main", rows)
    assert lake.rows(snapshot=2) == [0, 1]


# -- 5. forged plans with a recomputed id ---------------------------------------------------------------


def test_a_forged_plan_cannot_delete_a_file_the_latest_snapshot_reads(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)
    live = open_table(lake.root)
    latest = live.snapshot(live.earliest_latest()[1])
    entry = next(e for e in live.live_entries(latest) if e.file.file_name)
    victim = live.paths.relative(live.paths.data_file(entry.partition, entry.bucket, entry.file))
    forged = forge(plan, Action(ActionKind.DATA_FILE, victim, snapshot_id=3))
    assert forged.plan_id != plan.plan_id
    assert_refused_untouched(lake, forged, recorder, spark, f"{victim} is still used by the latest snapshot 6",
                             lake.rows())


@pytest.mark.parametrize("tail", [" ", "\t", "\n"])
def test_a_forged_path_that_ends_in_whitespace_deletes_only_the_file_it_spells(tmp_path, spark, recorder, tail):
    """``victim `` names another file than the live ``victim``, however a location is normalized."""
    lake = Lake(tmp_path / "wh")
    history(lake)
    rows = lake.rows()
    plan = plan_for(lake.root, retain_min=2)
    live = open_table(lake.root)
    latest = live.snapshot(live.earliest_latest()[1])
    entry = next(e for e in live.live_entries(latest) if e.file.file_name)
    victim = live.paths.relative(live.paths.data_file(entry.partition, entry.bucket, entry.file))
    forged = forge(plan, Action(ActionKind.DATA_FILE, victim + tail, snapshot_id=3))
    assert apply_plan(forged, recorder, spark=spark).state == "COMPLETED"
    [record] = [r for r in recorder.file_records(plan_id=forged.plan_id) if r.path == victim + tail]
    assert record.outcome == FileOutcome.ALREADY_ABSENT
    assert os.path.isfile(os.path.join(lake.root, victim))
    assert lake.rows() == rows


def test_a_forged_plan_cannot_write_the_hint_over_the_schema(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)
    forged = forge(plan, Action(ActionKind.WRITE_EARLIEST_HINT, "schema/schema-0", snapshot_id=5),
                   drop=lambda a: a.kind == ActionKind.WRITE_EARLIEST_HINT)
    schema = Path(lake.root, "schema", "schema-0")
    before = schema.read_bytes()
    assert_refused_untouched(lake, forged, recorder, spark, "may only write snapshot/EARLIEST", lake.rows())
    assert schema.read_bytes() == before


def test_a_forged_plan_cannot_delete_the_latest_snapshot(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)
    forged = forge(plan, Action(ActionKind.SNAPSHOT, "snapshot/snapshot-6", snapshot_id=6))
    assert_refused_untouched(lake, forged, recorder, spark, r"id in the plan's range \[1, 5\)", lake.rows())


# -- 6. symbolic links ----------------------------------------------------------------------------------


def test_a_directory_link_inside_the_table_cannot_lead_a_delete_outside(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh")
    history(lake)
    outside = tmp_path / "elsewhere" / "bucket-0"
    outside.mkdir(parents=True)
    (outside / "precious.parquet").write_text("not the table's")
    os.symlink(tmp_path / "elsewhere", os.path.join(lake.root, "dt=link"))
    plan = plan_for(lake.root, retain_min=2)
    forged = forge(plan, Action(ActionKind.DATA_FILE, "dt=link/bucket-0/precious.parquet", snapshot_id=3))
    assert_refused_untouched(lake, forged, recorder, spark, "is a symbolic link", lake.rows())
    assert (outside / "precious.parquet").read_text() == "not the table's"


# -- 7. external roots and external paths ---------------------------------------------------------------


def test_the_file_system_root_as_an_external_root_is_refused(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh", options={"data-file.external-paths": "file:///"})
    history(lake)  # strategy 'none' (the default): files are written under the table root
    with pytest.raises(UnsupportedTable, match="'file:///', the file system root"):
        plan_for(lake.root, retain_min=2)


def test_external_data_files_in_uri_form_are_deleted_where_they_are(tmp_path, spark, recorder):
    ext = tmp_path / "external"
    lake = Lake(tmp_path / "wh", options={"data-file.external-paths": f"file://{ext}",
                                          "data-file.external-paths.strategy": "round-robin"})
    history(lake)
    meta = open_table(lake.root)
    written = [e.file.external_path for s in (1, 2) for e in meta.live_entries(meta.snapshot(s))]
    assert written and all(p.startswith("file:/") for p in written)  # what pypaimon records
    before = {os.path.relpath(os.path.join(d, f), ext) for d, _, fs in os.walk(ext) for f in fs}
    plan = plan_for(lake.root, retain_min=2)
    report = apply_plan(plan, recorder, spark=spark)
    assert report.state == "COMPLETED"
    data = [r for r in recorder.file_records(plan_id=plan.plan_id) if r.kind == ActionKind.DATA_FILE]
    assert data and all(r.outcome == FileOutcome.DELETED for r in data)
    after = {os.path.relpath(os.path.join(d, f), ext) for d, _, fs in os.walk(ext) for f in fs}
    assert len(before - after) == len(data)
    assert lake.rows() == [1, 2, 3, 4, 5]  # the latest snapshot reads every row it read before


# -- 9. errors around the apply -------------------------------------------------------------------------


def test_a_spark_session_that_cannot_start_leaves_no_unfinished_apply(tmp_path, spark, recorder):
    from lakesweep.engine.plan_io import write_plan
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)
    write_plan(plan, str(tmp_path / "p.parquet"))
    journal = str(tmp_path / "j.duckdb")
    before = all_files(lake.root)
    lakesweep = os.path.join(os.path.dirname(sys.executable), "lakesweep")
    done = subprocess.run([lakesweep, "apply", str(tmp_path / "p.parquet"), "--journal", journal,
                           "--master", "bogus[*]"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "'bogus[*]' is not a Spark master URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert all_files(lake.root) == before
    with DuckDBRecorder(journal) as j:
        assert incomplete_applies(j) == []
        assert apply_plan(plan, j, spark=spark).state == "COMPLETED"  # the corrected apply is accepted


def test_a_completed_plan_applied_again_with_another_journal_is_recognized(tmp_path, spark, recorder):
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)
    assert apply_plan(plan, recorder, spark=spark).state == "COMPLETED"
    after = all_files(lake.root)
    with DuckDBRecorder(str(tmp_path / "other.duckdb")) as other:
        again = apply_plan(plan, other, spark=spark)
    assert again.state == "COMPLETED" and again.counts["DELETED"] == 0
    assert again.counts["ALREADY_ABSENT"] == sum(1 for a in plan.actions if a.verb.deletes)
    assert all_files(lake.root) == after


def test_dry_run_refuses_what_apply_refuses(tmp_path, spark):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)
    lake.table.rollback_to(2)
    lake.commit("b")
    lake.commit("b")
    lake.commit("b")
    with pytest.raises(StalePlan, match="is not the snapshot the plan read"):
        dry_run_plan(plan, spark=spark)


def test_resume_without_an_id_goes_past_a_refused_plan(tmp_path, spark, recorder):
    class Crash(BaseException):
        pass

    lakes = [Lake(tmp_path / f"wh{i}") for i in range(2)]
    plans = []
    for lake in lakes:
        history(lake)
        plans.append(plan_for(lake.root, retain_min=2))
    original = phases_mod.crash_hook

    def crash(stage, count):
        if stage == "before-journal" and count >= 1:
            raise Crash()

    phases_mod.crash_hook = crash
    try:
        for plan in plans:
            with pytest.raises(Crash):
                apply_plan(plan, recorder, spark=spark)
    finally:
        phases_mod.crash_hook = original
    lakes[0].table.create_tag("late", snapshot_id=3)  # makes the first plan stale
    reports = {r.plan_id: r for r in resume(recorder, spark=spark)}
    assert reports[plans[0].plan_id].state == "REFUSED"
    assert "tag 'late' was added at snapshot 3" in reports[plans[0].plan_id].reason
    assert reports[plans[1].plan_id].state == "COMPLETED"


def test_a_plan_without_snapshot_pins_is_refused(tmp_path, spark, recorder):
    lake = Lake(tmp_path / "wh")
    history(lake)
    plan = plan_for(lake.root, retain_min=2)
    # A version-1 plan written before pins existed has the same requirements with no pins.
    old = replace(plan, requirements=tuple(replace(r, pins=None) if isinstance(r, AssertSnapshotsPresent) else r
                                           for r in plan.requirements))
    assert_refused_untouched(lake, old, recorder, spark, "does not pin the content of its snapshots", lake.rows())

