"""Paimon orphan cleaning and the tables around it: another table of the warehouse whose external path points
into the table, another Paimon table's ``schema/`` or an Iceberg table's metadata under the table's roots
refuse the plan, and its apply, naming the other table; nothing is deleted."""

from __future__ import annotations

import os

import pytest
from pypaimon import CatalogFactory, Schema
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import SharedStorage
from lakesweep.engine.neighbours import Neighbour, refuse_shared_storage, within
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.test_orphans_apply import JUNK, lake  # noqa: F401 - the fixture
from tests.applier.test_safety import SCHEMA
from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.kinds import plan_kind
from lakesweep.planner.paimon.options import resolve_orphan_options
from tests.planner.test_orphans import NOW
from tests.support.table_builder import all_files


def _paimon_table(warehouse, name="u", options=None) -> str:
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("db", True)
    catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], options={k: str(v) for k, v in (options or {}).items()}), False)
    return os.path.join(str(warehouse), "db.db", name)


def plan(root):
    """An orphans plan as ``lakesweep plan orphans`` makes it: the neighbours read, the store listed."""
    t = open_table(root)
    return plan_kind("orphans", "paimon").read_and_plan(t, now_ms=NOW, options=resolve_orphan_options(t.options))


def _warehouse(lake) -> str:
    return os.path.dirname(os.path.dirname(lake.root))


def test_segments_not_prefixes_decide_what_lies_in_a_root():
    assert within("/ns/t/data/f", "/ns/t") and within("/ns/t", "/ns/t/") and within("s3://b/t/x", "s3://b/t")
    assert not within("/ns/t_2", "/ns/t") and not within("/ns/t_2/data", "/ns/t") and not within("/ns/t", "/ns/t_2")
    refuse_shared_storage("t", [("location", "/ns/t")], [Neighbour("t_2", (("location", "/ns/t_2"),))],
                          outcome="Nothing was planned")
    with pytest.raises(SharedStorage, match="u stores files at /ns/t/x \\(write.data.path\\), which lies in /ns/t"):
        refuse_shared_storage("t", [("location", "/ns/t")], [Neighbour("u", (("write.data.path", "/ns/t/x"),))],
                              outcome="Nothing was planned")


def test_a_warehouse_table_whose_external_path_points_into_the_table_refuses_the_plan(lake, tmp_path):
    ext = os.path.join(lake.root, "ext")
    _paimon_table(_warehouse(lake), options={"data-file.external-paths": f"file://{ext}"})
    before = all_files(lake.root)
    with pytest.raises(SharedStorage, match=f"Paimon table db.u stores files at {ext} "
                                            f"\\(data-file.external-paths\\), which lies in {lake.root}, the "
                                            f"location of Paimon table {lake.root}"):
        plan(lake.root)
    out = tmp_path / "o.plan"
    r = CliRunner().invoke(app, ["plan", "orphans", lake.root, "--out", str(out)])
    assert r.exit_code == 1 and "Paimon table db.u stores files at" in " ".join(r.output.split())
    assert not out.exists() and all_files(lake.root) == before


def test_another_paimon_tables_schema_under_the_table_refuses_the_plan(lake):
    nested = _paimon_table(os.path.join(lake.root, "nested"))
    before = all_files(lake.root)
    with pytest.raises(SharedStorage, match=f"the Paimon table at {nested} stores files at {nested} \\(location\\), "
                                            f"which lies in {lake.root}"):
        plan(lake.root)
    assert all_files(lake.root) == before


def test_an_iceberg_tables_metadata_under_the_table_refuses_the_plan(lake, tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    from tests.iceberg.conftest import SCHEMA as ICEBERG_SCHEMA

    catalog = SqlCatalog("nb", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/iwh")
    catalog.create_namespace("ns")
    catalog.create_table("ns.i", schema=ICEBERG_SCHEMA, location=os.path.join(lake.root, "dt=a", "ice"))
    with pytest.raises(SharedStorage, match=f"the Iceberg table whose metadata is {lake.root}/dt=a/ice/metadata/"
                                            f"[^ ]+\\.metadata\\.json stores files at"):
        plan(lake.root)


def test_a_plan_made_before_a_neighbour_appeared_is_refused_at_apply_and_nothing_is_deleted(lake, tmp_path):
    p = plan(lake.root)
    assert sorted(a.path for a in p.actions) == sorted(JUNK)
    _paimon_table(_warehouse(lake), options={"data-file.external-paths": f"file://{lake.root}"})
    before = all_files(lake.root)
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        with pytest.raises(SharedStorage, match=f"Paimon table db.u stores files at {lake.root} "
                                                f"\\(data-file.external-paths\\), which is also {lake.root}.*"
                                                "Nothing was deleted"):
            apply_plan(p, rec, executor=DriverExecutor())
    assert all_files(lake.root) == before
