"""Orphan cleaning on tables Paimon's Java core wrote and expired."""

from __future__ import annotations

import json
import os

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.table import open_table
from tests.planner.conftest import expire
from tests.planner.test_orphans import age, junk, plan

pytestmark = pytest.mark.java


def test_a_retained_changelog_whose_index_manifest_expiry_removed_does_not_block_orphan_cleaning(
        paimon_java, tmp_path):
    root = str(tmp_path / "t")
    info = paimon_java.generate(root, seed=1, kind="pk", steps=14, options={"changelog.num-retained.max": 3000})
    assert info["options"]["deletion-vectors.enabled"] == "true"
    expire(root, retain_min=1, retain_max=1, max_deletes=1000)  # decoupled: changelog-N files are kept
    t = open_table(root)
    gone = [c for c in t.list_changelog_ids() if t.changelog(c).index_manifest
            and not os.path.exists(os.path.join(root, "manifest", t.changelog(c).index_manifest))]
    assert gone  # expiry keeps the index manifests of the end snapshot and the tags only, as Paimon's does
    junk(root, "dt=2024-01-01/bucket-0/data-failed-0.parquet")
    age(root)
    assert [a.path for a in plan(root).actions] == ["dt=2024-01-01/bucket-0/data-failed-0.parquet"]

    # A tag's index manifest is another matter: tags keep their index files, so a missing one is refused.
    with open(os.path.join(root, "snapshot", f"snapshot-{t.earliest_latest()[1]}")) as f:
        tag = json.load(f)
    tag["indexManifest"] = t.changelog(gone[0]).index_manifest
    os.makedirs(os.path.join(root, "tag"), exist_ok=True)
    with open(os.path.join(root, "tag", "tag-t"), "w") as f:
        json.dump(tag, f)
    with pytest.raises(PlanRejected, match=f"{tag['indexManifest']}: index manifest not found"):
        plan(root)
