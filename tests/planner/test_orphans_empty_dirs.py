"""``plan orphans --empty-dirs``: the bucket and partition directories the plan's deletes leave empty are
planned after the files, deepest first, and apply removes each only if it is empty then."""

from __future__ import annotations

import os

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import OrphanKind
from lakesweep.engine.paimon.layout import Layout, check_action_kind
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import Action
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import OptionValue, resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from lakesweep.engine.paimon.orphans import list_orphan_candidates
from tests.applier.test_safety import Lake
from tests.planner.test_orphans import NOW, age, junk


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    age(lake.root)
    junk(lake.root, "dt=a/bucket-7/data-failed-1.parquet")  # a bucket directory holding only junk
    junk(lake.root, "dt=z/bucket-0/data-failed-2.parquet")  # a partition holding only junk
    junk(lake.root, "dt=z/bucket-1/data-failed-3.parquet")
    junk(lake.root, "dt=y/bucket-0/data-failed-4.parquet")  # a partition with a young file beside the junk
    junk(lake.root, "dt=y/bucket-1/data-young-0.parquet", days=0)
    junk(lake.root, "dt=x/bucket-0/data-failed-5.parquet")  # a partition with a directory not Paimon's
    os.makedirs(os.path.join(lake.root, "dt=x", "_temporary"))
    junk(lake.root, "dt=a/bucket-0/data-failed-6.parquet")  # junk beside live files
    return lake


def plan(lake, **flags):
    t = open_table(lake.root)
    return plan_orphans(t, list_orphan_candidates(t), now_ms=NOW, options=resolve_orphan_options({}, **flags))


def dirs_of(p):
    return [a.path for a in p.actions if a.kind is OrphanKind.EMPTY_DIR]


def test_without_the_flag_no_directory_is_planned(lake):
    p = plan(lake)
    assert dirs_of(p) == [] and p.stats["empty_dirs"] == 0 and p.options["empty-dirs"].value is False


def test_the_directories_left_empty_are_planned_after_the_files_deepest_first(lake):
    p = plan(lake, empty_dirs=True)
    assert dirs_of(p) == ["dt=a/bucket-7", "dt=x/bucket-0", "dt=y/bucket-0", "dt=z/bucket-0", "dt=z/bucket-1",
                          "dt=x", "dt=z"]
    assert p.stats["empty_dirs"] == 7 and p.options["empty-dirs"] == OptionValue(True, "flag")
    phases = [a.phase for a in p.actions]
    assert phases == sorted(phases) and p.phases[-1].name == "empty_dirs"
    assert all(a.verb.value == "delete-empty-dir" for a in p.actions if a.kind is OrphanKind.EMPTY_DIR)


def test_apply_removes_only_directories_that_are_empty_then(lake, tmp_path):
    p = plan(lake, empty_dirs=True)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(p, recorder, executor=DriverExecutor())
        outcomes = {r.path: r.outcome.value for r in recorder.file_records(plan_id=p.plan_id)
                    if r.kind == OrphanKind.EMPTY_DIR}
    assert report.state == "COMPLETED" and report.whole
    assert outcomes == {"dt=a/bucket-7": "DELETED", "dt=x/bucket-0": "DELETED", "dt=y/bucket-0": "DELETED",
                        "dt=z/bucket-0": "DELETED", "dt=z/bucket-1": "DELETED", "dt=z": "DELETED",
                        "dt=x": "KEPT_NOT_EMPTY"}  # dt=x/_temporary, which the listing does not show
    root = lake.root
    for gone in ("dt=a/bucket-7", "dt=z", "dt=y/bucket-0", "dt=x/bucket-0"):
        assert not os.path.exists(os.path.join(root, gone)), gone
    for kept in ("dt=a/bucket-0", "dt=y/bucket-1", "dt=x/_temporary", "snapshot", "manifest"):
        assert os.path.isdir(os.path.join(root, kept)), kept
    assert os.path.isdir(root) and lake.rows() == [0, 1]


def test_a_file_written_into_a_planned_directory_keeps_it(lake, tmp_path):
    p = plan(lake, empty_dirs=True)
    junk(lake.root, "dt=z/bucket-1/data-late-0.parquet", days=0)  # a writer, after the plan
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        apply_plan(p, recorder, executor=DriverExecutor())
        outcomes = {r.path: r.outcome.value for r in recorder.file_records(plan_id=p.plan_id)
                    if r.kind == OrphanKind.EMPTY_DIR}
    assert outcomes["dt=z/bucket-1"] == outcomes["dt=z"] == "KEPT_NOT_EMPTY"
    assert os.path.exists(os.path.join(lake.root, "dt=z/bucket-1/data-late-0.parquet"))


@pytest.mark.parametrize("path", ["", "snapshot", "manifest", "dt=a/bucket-0/x", "tmp", "dt=a/tmp", "dt=a/../dt=b",
                                  "/elsewhere/dt=a"])
def test_apply_refuses_an_empty_dir_action_anywhere_else(lake, path):
    t = open_table(lake.root)
    p = plan(lake, empty_dirs=True)
    a = Action(OrphanKind.EMPTY_DIR, path or ".", action_id=0)
    with pytest.raises(PlanRejected, match="only bucket and partition directories, never a data root"):
        check_action_kind(p, a, Layout(t))
