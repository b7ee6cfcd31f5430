"""Plans of every kind in lakesweep's second plan format (version 2), kept in ``tests/compat/v2/``.

Written by ``tests/cli/html/plans.py`` (``paimon_plans`` and ``iceberg_plans``) under
``/tmp/lakesweep-fixture-v2`` with the lakesweep of the last version-2 release. Later lakesweep versions
must still read them with the ids they were written with, and show them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from lakesweep.engine.plan_io import read_plan

HERE = Path(__file__).parent / "v2"
PLAN_IDS = {
    "iceberg-compact": "e6cccb21ef1aedf8acab53cacd312614",
    "iceberg-expire": "8e2417c33f87924572509d766b193b50",
    "iceberg-orphans": "d91fa627032ae8b06fa01546ced64a89",
    "iceberg-rewrite-manifests": "aa8b421b7e724905e5fbd0ca8c14284c",
    "paimon-changelog": "74c67b5a165f1b13caa2d83292b95512",
    "paimon-consumers": "b6afc65d0f168d345cc579765abbe9ed",
    "paimon-expire": "79e2f8a10e4e2c604814d5474983980c",
    "paimon-orphans": "0c007c9167cd915bfb2cd88ba525c8d3",
    "paimon-partitions": "56201ed28a7b9ca76448d350a12e5927",
    "paimon-tags": "d7c6e592e363643bb5a47722b7588890",
}
ACTIONS = {"iceberg-compact": 44, "iceberg-expire": 10, "iceberg-orphans": 0, "iceberg-rewrite-manifests": 12,
           "paimon-changelog": 0, "paimon-consumers": 0, "paimon-expire": 17, "paimon-orphans": 6,
           "paimon-partitions": 6, "paimon-tags": 1}


@pytest.mark.parametrize("name", sorted(PLAN_IDS))
def test_a_version_2_plan_is_read_with_its_id(name):
    plan = read_plan(str(HERE / f"{name}.parquet"))
    assert plan.plan_id == PLAN_IDS[name]
    assert plan.format_version == 2
    assert (plan.format, plan.kind) == tuple(name.split("-", 1))
    assert len(plan.actions) == ACTIONS[name]


@pytest.mark.parametrize("name", sorted(PLAN_IDS))
def test_a_version_2_plan_is_shown(name):
    r = CliRunner().invoke(app, ["show", str(HERE / f"{name}.parquet"), "--files", "--output", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["plan_id"] == PLAN_IDS[name]
    assert len(doc["actions"]) == ACTIONS[name]


def test_a_version_2_scope_is_upcast_into_its_typed_scope():
    from lakesweep.engine.iceberg.scopes import ExpireScope as IcebergExpireScope
    from lakesweep.engine.paimon.scopes import ExpireScope, TagScope

    assert read_plan(str(HERE / "paimon-expire.parquet")).scope == ExpireScope(begin=1, end=7, earliest_hint=7)
    tags = read_plan(str(HERE / "paimon-tags.parquet")).scope
    assert tags == TagScope(tags=[{"files_freed": False, "reason": "named", "snapshot": 2, "tag": "t_early"}],
                            snapshots_gone=[], earliest=1, latest=10)
    expire = read_plan(str(HERE / "iceberg-expire.parquet")).scope
    assert type(expire) is IcebergExpireScope
    assert (expire.catalog, expire.identifier, len(expire.expired), expire.cutoff_ms) == (
        "lsreport", "ns.t", 5, 1893456000000)
    assert sorted(expire.refs) == ["audit", "main", "release-1"]


def test_a_version_2_plan_keeps_the_header_it_was_written_with():
    plan = read_plan(str(HERE / "paimon-orphans.parquet"))
    assert plan.header()["format_version"] == 2
    assert plan.header()["scope"] == {"older_than_ms": 1262304000000}
