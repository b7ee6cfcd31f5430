"""Iceberg orphan cleaning and the other tables of the catalog (apache/iceberg#17213, #17448): a table sharing
the location, or writing into it, refuses the plan and its apply, naming the other table; a sibling whose
name only starts the same is no neighbour; apply's verify reports a file another table needed."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected, SharedStorage
from lakesweep.engine.iceberg.table import canonical
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.iceberg.conftest import CATALOG, SCHEMA, batch, files_on_disk, needed_files, write_history
from tests.iceberg.test_orphans import apply, old, plan, pq_write, stray


def absent(table) -> set[str]:
    """What the table's metadata needs that is not on disk, wherever it lies."""
    return {f for f in needed_files(table) if not os.path.exists(f)}


def _age_all(table) -> None:
    for f in files_on_disk(table):
        old(f)


def test_a_table_created_at_another_tables_location_refuses_its_orphan_plan_naming_it(lake, tmp_path):
    t = write_history(lake)
    location = canonical(t.metadata.location)
    u = lake.catalog.create_table("ns.u", schema=SCHEMA, location=location)
    u.append(batch(900))
    a = stray(t, "data/dead.parquet")
    _age_all(t)
    before = files_on_disk(lake.table())
    with pytest.raises(SharedStorage, match=f"Iceberg table ns.u stores files at {location} \\(location\\), which is "
                                            f"also {location}, the location of Iceberg table ns.t"):
        plan(lake.view())
    with pytest.raises(SharedStorage, match="Iceberg table ns.t stores files at"):
        plan(lake.view("ns.u"))
    out = str(tmp_path / "o.plan")
    r = CliRunner().invoke(app, ["plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", out])
    assert r.exit_code == 1 and "Iceberg table ns.u stores files at" in " ".join(r.output.split())
    assert not os.path.exists(out) and files_on_disk(lake.table()) == before and os.path.exists(a)
    assert absent(lake.table()) == set() and absent(lake.table("ns.u")) == set()


def test_a_table_whose_data_path_points_into_another_tables_location_refuses_the_plan(lake):
    t = write_history(lake)
    location = canonical(t.metadata.location)
    u = lake.catalog.create_table("ns.u", schema=SCHEMA, properties={"write.data.path": f"file://{location}/data/u"})
    u.append(batch(900))
    _age_all(t)
    with pytest.raises(SharedStorage, match=f"Iceberg table ns.u stores files at {location}/data/u "
                                            f"\\(write.data.path\\), which lies in {location}, the location of "
                                            f"Iceberg table ns.t"):
        plan(lake.view())
    assert absent(lake.table("ns.u")) == set()
    with pytest.raises(SharedStorage, match=f"Iceberg table ns.t stores files at {location} \\(location\\), which "
                                            f"contains {location}/data/u, the write.data.path of Iceberg table ns.u"):
        plan(lake.view("ns.u"))


def test_a_sibling_whose_name_starts_with_the_tables_name_is_not_its_neighbour(lake, tmp_path):
    t = write_history(lake)
    location = canonical(t.metadata.location)
    t2 = lake.catalog.create_table("ns.t_2", schema=SCHEMA, location=location + "_2",
                                   properties={"write.data.path": f"file://{location}_2/data"})
    t2.append(batch(900))
    t2.append(batch(910))
    _age_all(lake.table("ns.t_2"))
    a = stray(t, "data/dead.parquet")
    siblings = files_on_disk(lake.table("ns.t_2"))
    assert all(f.startswith(location + "_2/") for f in siblings)
    p = plan(lake.view())
    assert [x.path for x in p.actions] == ["data/dead.parquet"] and p.stats["neighbours"] == 1
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole and report.counts["DELETED"] == 1
    assert report.verify["notes"] == ["checked against 1 other table(s) of the catalog"]
    assert not os.path.exists(a) and files_on_disk(lake.table("ns.t_2")) == siblings
    assert absent(lake.table("ns.t_2")) == set() and absent(lake.table()) == set()


def test_a_plan_made_before_another_table_moved_in_is_refused_at_apply_and_nothing_is_deleted(lake, tmp_path):
    t = write_history(lake)
    location = canonical(t.metadata.location)
    a = stray(t, "data/dead.parquet")
    p = plan(lake.view())
    assert [x.path for x in p.actions] == ["data/dead.parquet"]
    u = lake.catalog.create_table("ns.u", schema=SCHEMA, location=location)
    u.append(batch(900))
    before = files_on_disk(lake.table())
    with pytest.raises(SharedStorage, match="Iceberg table ns.u stores files at .*Nothing was deleted"):
        apply(p, tmp_path)
    assert os.path.exists(a) and files_on_disk(lake.table()) == before
    assert absent(lake.table("ns.u")) == set()
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        refused = [e for e in rec.events(plan_id=p.plan_id) if type(e).__name__ == "ApplyRefused"]
    assert refused and "Iceberg table ns.u" in refused[0].reason


def test_apply_verify_reports_a_deleted_file_another_table_of_the_catalog_needs(lake, tmp_path):
    t = write_history(lake)
    shared = os.path.join(canonical(t.metadata.location), "data", "shared.parquet")
    pq_write(shared, pa.table({"id": pa.array([800, 801], pa.int64()), "region": ["us", "us"]}))
    old(shared)
    u = lake.catalog.create_table("ns.u", schema=SCHEMA)  # its own location: the roots do not meet
    u.add_files([shared])  # but it names a file in ns.t's data directory
    p = plan(lake.view())
    assert [x.path for x in p.actions] == ["data/shared.parquet"]
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and not report.whole
    [problem] = report.verify["problems"]
    assert problem["path"] == shared and problem["needed_by"].startswith("Iceberg table ns.u: snapshot ")
    assert absent(lake.table("ns.u")) == {shared} and absent(lake.table()) == set()


def test_a_table_of_another_catalog_under_the_table_location_refuses_the_plan(lake, tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    t = write_history(lake)
    other = SqlCatalog("other", uri=f"sqlite:///{tmp_path}/other.db", warehouse=f"file://{tmp_path}/owh")
    other.create_namespace("ns")
    other.create_table("ns.inner", schema=SCHEMA, location=canonical(t.metadata.location) + "/data/inner")
    with pytest.raises(PlanRejected, match="is the metadata of another Iceberg table under"):
        plan(lake.view())  # not in ns.t's catalog: the foreign-metadata guard finds it in the listing
