"""Where orphan cleaning may delete, as apply checks it: exactly the directories Paimon's orphan clean lists,
and only files directly in them."""

from __future__ import annotations

import dataclasses

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import ORPHAN_PHASES, ActionKind, OrphanKind
from lakesweep.engine.paimon.layout import Layout, check_action_kind, orphan_kind_of
from lakesweep.engine.paimon.scopes import OrphanScope
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import Action, CleanupPlan, kind_spec
from tests.support import pypaimon_tables as pt


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    written = pt.write_append_table(str(tmp_path_factory.mktemp("wh")))
    return Layout(open_table(written.path))


@pytest.mark.parametrize("path, kind", [
    ("snapshot/UNKNOWN-1", OrphanKind.STRAY_SNAPSHOT_FILE),
    ("snapshot/.snapshot-3.tmp", OrphanKind.STRAY_SNAPSHOT_FILE),
    ("branch/branch-b1/snapshot/junk", OrphanKind.STRAY_SNAPSHOT_FILE),
    ("changelog/junk", OrphanKind.STRAY_CHANGELOG_FILE),
    ("manifest/manifest-list-x-0", OrphanKind.ORPHAN_MANIFEST),
    ("index/index-x-0", OrphanKind.ORPHAN_INDEX_FILE),
    ("statistics/stat-x-0", OrphanKind.ORPHAN_STATISTICS),
    ("dt=2024-01-01/bucket-0/data-x-0.parquet", OrphanKind.ORPHAN_DATA_FILE),
    ("dt=2024-01-01/bucket-postpone/UNKNOWN", OrphanKind.ORPHAN_DATA_FILE),
])
def test_orphan_cleaning_may_delete_files_directly_in_paimon_directories(layout, path, kind):
    assert orphan_kind_of(layout, path) is kind


@pytest.mark.parametrize("path", [
    "snapshot/snapshot-1", "snapshot/snapshot-1x.tmp", "snapshot/EARLIEST", "snapshot/LATEST",
    "changelog/changelog-3", "branch/branch-main/snapshot/junk", "branch/branch-12/snapshot/junk",
    "schema/schema-0", "tag/tag-t1", "consumer/consumer-c1", "manifest/sub/x", "tmp/data-x-0.parquet",
    "_upload/x", "dt=2024-01-01/x", "dt=2024-01-01/tmp/x", "dt=2024-01-01/bucket-0/sub/x", "other=1/bucket-0/x",
    "dt=2024-01-01/bucket-x/f", "dt=2024-01-01/bucket-0/..", "manifest/../schema/schema-0", "/etc/passwd",
    "file:///tmp/x", "s3://b/k/bucket-0/x",
])
def test_orphan_cleaning_never_deletes_outside_them(layout, path):
    assert orphan_kind_of(layout, path) is None


def orphan_plan(*actions) -> CleanupPlan:
    return CleanupPlan(kind="orphans", table_location="/t", table_identity="schema:x", branch="main", now_ms=0,
                       options={}, scope=OrphanScope(older_than_ms=0), requirements=(), phases=ORPHAN_PHASES,
                       actions=tuple(dataclasses.replace(a, action_id=i) for i, a in enumerate(actions)))


def test_apply_refuses_an_orphan_action_outside_its_place(layout):
    a = Action(OrphanKind.ORPHAN_MANIFEST, "schema/schema-0")
    with pytest.raises(PlanRejected, match=r"action 0 \(orphan-manifest 'schema/schema-0'\) is refused: orphan "
                                           r"cleaning deletes orphan-manifest files only directly in manifest/"):
        check_action_kind(orphan_plan(a), orphan_plan(a).actions[0], layout)


def test_apply_refuses_a_kind_of_another_plan_kind(layout):
    manifest = kind_spec(ActionKind.MANIFEST)
    plan = orphan_plan(Action(ActionKind.MANIFEST, "manifest/manifest-x-0", verb=manifest.verb, phase=2))
    with pytest.raises(PlanRejected, match="manifest actions belong in 'expire' plans, not in 'orphans' plans"):
        check_action_kind(plan, plan.actions[0], layout)


def test_apply_accepts_what_orphan_cleaning_lists(layout):
    plan = orphan_plan(Action(OrphanKind.STRAY_SNAPSHOT_FILE, "snapshot/UNKNOWN"),
                       Action(OrphanKind.ORPHAN_DATA_FILE, "dt=2024-01-02/bucket-0/data-x-0.parquet"))
    for a in plan.actions:
        check_action_kind(plan, a, layout)
