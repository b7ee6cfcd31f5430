"""Orphan cleaning racing the table between plan and apply: a writer committing a file named like a candidate,
a tag, branch or rollback taking planned files back in, and Paimon's own expiry running between listing,
planning and applying, and during the apply itself. Apply must delete no file anything still references."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.paimon.orphans import list_orphan_candidates
from lakesweep.engine.paimon.table import open_table
from lakesweep.journal.memory_store import MemoryRecorder
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.applier.test_safety import SCHEMA, Lake
from tests.planner.test_orphans import NOW, age, junk
from tests.planner.test_orphans_property import every_reachable_path

JUNK = ["snapshot/UNKNOWN-1", "manifest/manifest-dead-0", "dt=a/bucket-7/data-failed-1.parquet"]


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)
    for rel in JUNK:
        junk(lake.root, rel)
    age(lake.root)
    return lake


def plan_now(root):
    t = open_table(root)
    return plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}))


def apply(plan, executor=None):
    """Apply ``plan``; the report and each planned path's outcome."""
    with MemoryRecorder() as recorder:
        report = apply_plan(plan, recorder, executor=executor or DriverExecutor())
        outcomes = {r.path: r.outcome.value for r in recorder.file_records(plan_id=plan.plan_id)}
    return report, outcomes


def test_a_writer_committing_a_file_named_like_a_candidate_elsewhere_keeps_the_candidate(lake):
    builder = lake.table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"id": 99, "dt": "a"}], schema=SCHEMA))
    messages = write.prepare_commit()  # written now: too young to be a candidate itself
    [written] = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(lake.root, "dt=a", "bucket-0")) for f in fs
                 if os.path.getmtime(os.path.join(d, f)) > NOW / 1000 - 3600]
    copy = os.path.join("dt=b", "bucket-0", os.path.basename(written))  # an old copy under the same name
    shutil.copy(written, os.path.join(lake.root, copy))
    age(lake.root, copy)
    plan = plan_now(lake.root)
    assert sorted(a.path for a in plan.actions) == sorted(JUNK + [copy])
    commit.commit(messages)
    write.close()
    commit.close()

    report, outcomes = apply(plan)
    # Paimon keeps a candidate when anything anywhere uses its name (L-6); so does apply's re-check.
    assert outcomes == {**{rel: "DELETED" for rel in JUNK}, copy: "SKIPPED_REFERENCED"}
    assert os.path.exists(os.path.join(lake.root, copy)) and 99 in lake.rows()


def restore_as_tag(lake, saved: bytes) -> None:
    os.makedirs(os.path.join(lake.root, "tag"), exist_ok=True)
    with open(os.path.join(lake.root, "tag", "tag-restored"), "wb") as f:
        f.write(saved)


def restore_as_branch(lake, saved: bytes) -> None:
    """Paimon's create_branch from a tag whose snapshot is gone: the tag becomes the branch's snapshot, with
    the table's schemas (pypaimon copies the snapshot file, which is gone, so this is done by hand)."""
    base = os.path.join(lake.root, "branch", "branch-restored")
    shutil.copytree(os.path.join(lake.root, "schema"), os.path.join(base, "schema"))
    os.makedirs(os.path.join(base, "snapshot"))
    for name, data in (("snapshot-1", saved), ("EARLIEST", b"1"), ("LATEST", b"1")):
        with open(os.path.join(base, "snapshot", name), "wb") as f:
            f.write(data)


def restore_by_rollback(lake, saved: bytes) -> None:
    restore_as_tag(lake, saved)
    lake.table.rollback_to("restored")  # snapshot-1 is written again from the tag; 2 and 3 go
    lake.table.delete_tag("restored")


@pytest.mark.parametrize("restore", [restore_as_tag, restore_as_branch, restore_by_rollback],
                         ids=["tag", "branch", "rollback"])
def test_planned_files_a_restored_snapshot_takes_back_are_kept(lake, restore):
    snapshot_1 = os.path.join(lake.root, "snapshot", "snapshot-1")
    with open(snapshot_1, "rb") as f:
        saved = f.read()
    t = open_table(lake.root)
    lists = {t.snapshot(1).base_manifest_list, t.snapshot(1).delta_manifest_list}
    os.remove(snapshot_1)  # nothing references snapshot 1's manifest lists any more: real orphans
    plan = plan_now(lake.root)
    taken_back = sorted(f"manifest/{name}" for name in lists)
    assert sorted(a.path for a in plan.actions) == sorted(JUNK + taken_back)
    restore(lake, saved)  # after planning, snapshot 1 comes back from a backup

    report, outcomes = apply(plan)
    assert report.state == "COMPLETED"
    assert outcomes == {**{rel: "DELETED" for rel in JUNK}, **{rel: "SKIPPED_REFERENCED" for rel in taken_back}}
    reachable = every_reachable_path(open_table(lake.root))
    assert {os.path.join(lake.root, rel) for rel in taken_back} <= reachable
    assert all(os.path.exists(p) for p in reachable)


class ExpiringExecutor(DriverExecutor):
    """Runs Paimon's expiry once, after apply's last re-check and before the bulk phase deletes."""

    def __init__(self, expire):
        super().__init__()
        self.expire = expire

    def run(self, *args, **kwargs):
        if self.expire is not None:
            self.expire()
            self.expire = None
        return super().run(*args, **kwargs)


@pytest.mark.java
@pytest.mark.parametrize("kind, seed", [("pk", 7), ("append", 9)])
def test_paimon_expiry_racing_orphan_cleaning_loses_nothing_referenced(paimon_java, tmp_path, kind, seed):
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=seed, kind=kind, steps=14)
    shutil.rmtree(os.path.join(root, "consumer"), ignore_errors=True)  # so that nothing bounds the expiries
    for rel in ("snapshot/UNKNOWN-1", "manifest/manifest-dead-0", "dt=2024-01-01/bucket-0/data-failed-0.parquet"):
        junk(root, rel)
    age(root)
    files = {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}

    def expire(retain):
        return lambda: paimon_java.expire(root, retain_min=retain, retain_max=retain, max_deletes=1000)

    listing = list_orphan_candidates(open_table(root))
    expire(6)()  # 1. between the listing and the read of the used set
    by_first = {p for p in files if not os.path.exists(p)}
    table = open_table(root)
    plan = plan_orphans(table, listing, now_ms=NOW, options=resolve_orphan_options({}))
    planned = {table.paths.absolute(a.path): a.path for a in plan.actions}
    expire(4)()  # 2. between plan and apply
    by_second = {p for p in files if not os.path.exists(p)} - by_first
    before_third = {p for p in files if os.path.exists(p)}
    report, outcomes = apply(plan, ExpiringExecutor(expire(2)))  # 3. after apply's last re-check
    by_third = before_third - {p for p in files if os.path.exists(p)} - set(planned)

    # What happened: the first expiry's files the listing held are planned (nothing uses them) and found
    # gone; the junk is deleted; what the second and third expiries removed was used when planned, so it
    # was never planned; apply deleted nothing else.
    assert by_first and set(planned) & by_first
    assert {planned[p] for p in set(planned) & by_first} == {p for p, o in outcomes.items() if o == "ALREADY_ABSENT"}
    assert {p for p, o in outcomes.items() if o == "DELETED"} == {planned[p] for p in set(planned) - by_first}
    assert not set(planned) & (by_second | by_third) and by_second and by_third
    assert report.state == "COMPLETED" and report.counts["SKIPPED_REFERENCED"] == 0
    assert {p for p in files if not os.path.exists(p)} == by_first | by_second | by_third | set(planned)
    reachable = every_reachable_path(open_table(root))
    assert reachable and all(os.path.exists(p) for p in reachable)
    assert paimon_java.read_rows(root)  # and Paimon reads what is left
