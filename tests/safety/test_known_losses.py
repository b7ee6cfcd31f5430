"""The field's known losses, one test per class and format (issue 31, "Deliver" item 6).

Each test rebuilds, on a table the engine itself wrote (pypaimon, pyiceberg), the situation in which another
maintenance tool deleted files a table still needed, runs lakesweep's real plan and apply
(``applier.apply.DriverExecutor``: no Spark), and checks what is on disk, what the engine reads back and what
the journal says. Where lakesweep refuses, the test checks the refusal names the cause and nothing was deleted.

Shared and nested locations (apache/iceberg#17213) are refused by the neighbourhood guard: the two nested
cases are here, and ``tests/iceberg/test_shared_locations.py`` and ``tests/applier/test_orphans_neighbours.py``
cover the rest of the class (a table created at another's location, a write path inside another table, a
neighbour that appears between plan and apply).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pyarrow as pa
import pytest
from pypaimon import CatalogFactory

import lakesweep.engine.fileio as fileio_mod
from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import CorruptMetadata, InvalidLocation, PlanRejected, SharedStorage
from lakesweep.engine.iceberg.table import canonical
from lakesweep.engine.paimon.orphans import ListedFile, list_orphan_candidates
from lakesweep.engine.paimon.reachability import reachable_paths
from lakesweep.engine.paimon.table import PaimonTable, open_table
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.orphans import resolve_orphan_options as resolve_iceberg_orphan_options
from lakesweep.planner.kinds import plan_kind
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.applier.test_safety import Lake
from tests.iceberg.conftest import SCHEMA as ICE_SCHEMA, files_on_disk, missing, rows_by_snapshot, write_history
from tests.iceberg.test_orphans import old, stray
from tests.planner.conftest import expire as paimon_expire
from tests.planner.test_orphans import NOW, age, junk
from tests.planner.test_orphans_property import every_reachable_path
from tests.support import pypaimon_tables as pt

# -- helpers --------------------------------------------------------------------------------------------


def all_files(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def paimon_rows(warehouse: str, name: str) -> list[tuple]:
    """The rows pypaimon reads from ``db.<name>`` at its latest snapshot, sorted."""
    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table(f"db.{name}")
    rb = table.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted(zip(*(data.column(c).to_pylist() for c in data.column_names)), key=repr)


def expected_rows(written: pt.WrittenTable) -> list[tuple]:
    return sorted((tuple(r[k] for k in ("id", "name", "amount", "dt")) for r in written.expected_rows), key=repr)


def plan_paimon(root: str, listing=None, **flags):
    """lakesweep's Paimon orphan plan: the store walk (``plan_kind``), or ``listing`` handed to the planner."""
    table = open_table(root)
    options = resolve_orphan_options({}, **flags)
    if listing is None:
        return plan_kind("orphans", "paimon").read_and_plan(table, now_ms=NOW, options=options)
    return plan_orphans(table, listing, now_ms=NOW, options=options)


def plan_iceberg(view, **flags):
    return plan_kind("orphans", "iceberg").read_and_plan(view, now_ms=int(time.time() * 1000),
                                                options=resolve_iceberg_orphan_options(view.options, **flags))


def apply(plan, tmp_path):
    """Apply ``plan`` with a DuckDB journal; the report and each planned path's journaled outcome."""
    with DuckDBRecorder(tmp_path / "journal.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
        outcomes = {r.path: r.outcome.value for r in recorder.file_records(plan_id=plan.plan_id)}
    return report, outcomes


def assert_paimon_whole(root: str) -> None:
    """Every file any snapshot, tag or changelog of any branch reaches is on disk."""
    reachable = every_reachable_path(open_table(root))
    assert reachable and {p for p in reachable if not os.path.exists(p)} == set()


def age_iceberg(table, days: float = 10) -> None:
    for path in files_on_disk(table):
        old(path, days)


@pytest.fixture
def lake(tmp_path):
    """pypaimon's ``db.t``: dt=a, dt=b, then an overwrite of dt=a; every file three days old."""
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)
    age(lake.root)
    return lake


@pytest.fixture
def listing_filter(monkeypatch):
    """``f(path) -> FileInfo | None``, applied to what every ``ArrowFileIO.list`` returns (the store as a
    flaky or incomplete lister would show it)."""
    real = fileio_mod.ArrowFileIO.list
    rule = {"f": None}

    def listed(self, path, *, recursive=False):
        out = real(self, path, recursive=recursive)
        f = rule["f"]
        return out if f is None else [x for x in (f(i) for i in out) if x is not None]

    monkeypatch.setattr(fileio_mod.ArrowFileIO, "list", listed)

    def install(f):
        rule["f"] = f

    return install


# -- sibling prefixes: apache/iceberg#17448 -------------------------------------------------------------


def test_paimon_17448_a_sibling_table_whose_name_extends_this_ones_keeps_every_file(tmp_path):
    """apache/iceberg#17448: orphan cleaning of ``/ns/t`` matched its location as a string prefix and took
    ``/ns/t_2``'s files for its own orphans. Here ``db.t`` and ``db.t_2`` share a warehouse, all old."""
    wh = str(tmp_path / "wh")
    t = pt.write_append_table(wh, name="t")
    t2 = pt.write_append_table(wh, name="t_2", seed=1)
    assert t2.path == t.path + "_2"
    age(t.path, days=30)
    age(t2.path, days=30)
    junk(t.path, "dt=2024-01-01/bucket-0/data-dead-0.parquet")
    junk(t2.path, "dt=2024-01-01/bucket-0/data-dead-1.parquet")
    sibling = all_files(t2.path)

    plan = plan_paimon(t.path)
    assert [a.path for a in plan.actions] == ["dt=2024-01-01/bucket-0/data-dead-0.parquet"]
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {"dt=2024-01-01/bucket-0/data-dead-0.parquet": "DELETED"}
    assert all_files(t2.path) == sibling
    assert paimon_rows(wh, "t_2") == expected_rows(t2) and paimon_rows(wh, "t") == expected_rows(t)
    assert_paimon_whole(t.path)
    assert_paimon_whole(t2.path)


def test_paimon_17448_on_s3_a_prefix_listing_of_t_does_not_reach_t_2(tmp_path, s3_env):
    """apache/iceberg#17448 on an object store, where listing the key prefix ``.../t`` also returns
    ``.../t_2/...``: lakesweep lists ``t/`` and plans none of ``t_2``'s objects."""
    from tests.support.seaweed import list_tree, upload_tree

    wh = str(tmp_path / "wh")
    t = pt.write_append_table(wh, name="t")
    t2 = pt.write_append_table(wh, name="t_2", seed=1)
    junk(t.path, "dt=2024-01-01/bucket-0/data-dead-0.parquet")
    prefix = f"{s3_env['bucket']}/known-{os.path.basename(tmp_path)}/db.db"
    upload_tree(s3_env["fs"], t.path, f"{prefix}/t")
    upload_tree(s3_env["fs"], t2.path, f"{prefix}/t_2")
    sibling = list_tree(s3_env["fs"], f"{prefix}/t_2")
    time.sleep(1.5)  # object times are the upload's: old enough for --older-than 1 s

    table = open_table(f"s3://{prefix}/t")
    plan = plan_kind("orphans", "paimon").read_and_plan(table, now_ms=int(time.time() * 1000),
                                     options=resolve_orphan_options({}, older_than="1 s", force=True))
    assert [a.path for a in plan.actions] == ["dt=2024-01-01/bucket-0/data-dead-0.parquet"]
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {"dt=2024-01-01/bucket-0/data-dead-0.parquet": "DELETED"}
    assert list_tree(s3_env["fs"], f"{prefix}/t_2") == sibling
    assert list_tree(s3_env["fs"], f"{prefix}/t") == {os.path.relpath(p, t.path) for p in all_files(t.path)} - {
        "dt=2024-01-01/bucket-0/data-dead-0.parquet"}


def test_iceberg_17448_a_sibling_table_whose_location_extends_this_ones_keeps_every_file(ice, tmp_path):
    """apache/iceberg#17448: ``DeleteOrphanFiles`` on ``/ns/t`` compared locations as string prefixes and
    deleted ``/ns/t_2``'s files. Both tables here are pyiceberg's, in one namespace, all old; each is cleaned."""
    t = write_history(ice, "ns.t")
    t2 = write_history(ice, "ns.t_2")
    assert canonical(t2.metadata.location) == canonical(t.metadata.location) + "_2"
    age_iceberg(t, 30)
    age_iceberg(t2, 30)
    dead = stray(t, "data/region=us/00000-dead.parquet")
    dead2 = stray(t2, "data/region=us/00000-dead.parquet")
    before = {ident: rows_by_snapshot(ice.table(ident)) for ident in ("ns.t", "ns.t_2")}
    files_2 = files_on_disk(t2)

    plan = plan_iceberg(ice.view("ns.t"))
    assert [a.path for a in plan.actions] == ["data/region=us/00000-dead.parquet"]
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {"data/region=us/00000-dead.parquet": "DELETED"}
    assert not os.path.exists(dead) and files_on_disk(ice.table("ns.t_2")) == files_2

    plan_2 = plan_iceberg(ice.view("ns.t_2"))
    assert [a.path for a in plan_2.actions] == ["data/region=us/00000-dead.parquet"]
    apply(plan_2, tmp_path)
    assert not os.path.exists(dead2)
    for ident in ("ns.t", "ns.t_2"):
        assert rows_by_snapshot(ice.table(ident)) == before[ident] and missing(ice.table(ident)) == set()


# -- nested locations: apache/iceberg#17213 (the nested half; see the module docstring) -----------------


def test_paimon_17213_a_table_nested_inside_another_refuses_the_outer_tables_orphan_plan(tmp_path):
    """apache/iceberg#17213: a table whose location lies inside another's lost its files to the outer
    table's orphan cleaning. A pypaimon warehouse inside a partition directory of ``db.outer``: planning
    ``outer``'s orphans (everything old) is refused, naming the inner table, and both tables keep every file."""
    wh = str(tmp_path / "wh")
    outer = pt.write_append_table(wh, name="outer")
    inner_wh = os.path.join(outer.path, "dt=2024-01-02")
    inner = pt.write_append_table(inner_wh, name="inner", seed=3)
    age(outer.path, days=30)  # the inner table's files too
    junk(outer.path, "dt=2024-01-02/bucket-0/data-dead-0.parquet")
    before = all_files(outer.path)
    with pytest.raises(SharedStorage, match=r"the Paimon table at .*/outer/dt=2024-01-02/db.db/inner stores files at "
                                            r".* which lies in .*/outer, the location of Paimon table"):
        plan_paimon(outer.path)
    assert all_files(outer.path) == before
    assert paimon_rows(inner_wh, "inner") == expected_rows(inner) and paimon_rows(wh, "outer") == expected_rows(outer)


def test_iceberg_17213_a_table_nested_inside_another_refuses_the_outer_tables_orphan_plan(ice, tmp_path):
    """apache/iceberg#17213: cleaning a table whose location holds another table deleted the inner table's
    files. pyiceberg's SQL catalog accepts ``ns.inner`` at ``<ns.outer>/inner``; lakesweep refuses to plan
    ``ns.outer``'s orphans, naming the inner table, and ``ns.inner`` keeps every file."""
    outer = write_history(ice, "ns.outer")
    inner = ice.catalog.create_table("ns.inner", schema=ICE_SCHEMA,
                                     location=canonical(outer.metadata.location) + "/inner")
    inner.append(pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["us", "eu"]}))
    inner = ice.table("ns.inner")
    age_iceberg(outer, 30)
    before = files_on_disk(outer)
    with pytest.raises(SharedStorage, match=r"Iceberg table ns.inner stores files at .*/outer/inner \(location\), "
                                            r"which lies in .*/outer, the location of Iceberg table ns.outer"):
        plan_iceberg(ice.view("ns.outer"))
    assert files_on_disk(ice.table("ns.outer")) == before and missing(ice.table("ns.inner")) == set()
    assert sorted(ice.table("ns.inner").scan().to_arrow().column("id").to_pylist()) == [1, 2]


# -- concurrent expiry emptying the used set: apache/paimon#7710 ----------------------------------------


def test_paimon_7710_concurrent_expiry_never_empties_the_used_set(lake, tmp_path, monkeypatch):
    """apache/paimon#7710: an expiry ran while orphan cleaning read the snapshots it had listed; every one
    was gone when read, the used set came out empty, and every data file was deleted. Here a writer commits
    and an expiry keeps only that new snapshot right after lakesweep lists the snapshot directory: the plan
    is refused, nothing is deleted, and the next plan deletes only the junk."""
    junk(lake.root, "dt=a/bucket-0/data-dead-0.parquet")
    listing = list_orphan_candidates(open_table(lake.root))
    real = PaimonTable.list_snapshot_ids
    raced = []

    def list_then_expire(self):
        ids = real(self)
        if not raced:
            raced.append(ids)
            lake.commit("b")
            paimon_expire(lake.root, retain_min=1, retain_max=1)
        return ids

    with monkeypatch.context() as m:
        m.setattr(PaimonTable, "list_snapshot_ids", list_then_expire)
        with pytest.raises(PlanRejected, match="found no snapshot in .* so every file of the table would look "
                                               "unused"):
            plan_paimon(lake.root, listing)
    assert raced == [[1, 2, 3]] and open_table(lake.root).list_snapshot_ids() == [4]
    assert_paimon_whole(lake.root)

    age(lake.root)
    plan = plan_paimon(lake.root)
    assert [a.path for a in plan.actions] == ["dt=a/bucket-0/data-dead-0.parquet"]
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {"dt=a/bucket-0/data-dead-0.parquet": "DELETED"}
    assert_paimon_whole(lake.root)
    assert lake.rows() == [1, 2, 3]


def test_iceberg_7710_an_expiry_between_listing_and_planning_leaves_the_live_files(ice, tmp_path, monkeypatch):
    """apache/paimon#7710 for Iceberg: pyiceberg's own ``expire_snapshots`` commits between lakesweep's
    listing and its read of the metadata. The used set is the expired table's (never empty): the expired
    snapshots' own files are planned, every file the current snapshot reads stays."""
    from lakesweep.engine.iceberg.table import IcebergTable

    t = write_history(ice)
    age_iceberg(t)
    current = t.current_snapshot().snapshot_id
    rows = rows_by_snapshot(t)[current]
    real = IcebergTable.refreshed
    expired = []

    def expire_then_refresh(self):
        if not expired:
            live = ice.table()
            expired.extend(s.snapshot_id for s in live.metadata.snapshots if s.snapshot_id != current)
            live.maintenance.expire_snapshots().by_ids(expired).commit()
        return real(self)

    with monkeypatch.context() as m:
        m.setattr(IcebergTable, "refreshed", expire_then_refresh)
        plan = plan_iceberg(ice.view())
    after = ice.table()
    assert expired and [s.snapshot_id for s in after.metadata.snapshots] == [current]
    assert plan.stats["used"] > 0 and plan.actions
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and set(outcomes.values()) == {"DELETED"}
    assert missing(ice.table()) == set() and rows_by_snapshot(ice.table()) == {current: rows}


# -- a referenced file with an old modification time: delta-io/delta-rs#4290 ----------------------------


def test_paimon_4290_a_referenced_file_with_an_old_modification_time_is_kept(tmp_path):
    """delta-io/delta-rs#4290: vacuum deleted files the table still referenced because their modification
    times were old (copied or restored with their times). Every file here is a year old."""
    t = pt.write_append_table(str(tmp_path / "wh"), name="t")
    age(t.path, days=365)
    junk(t.path, "dt=2024-01-02/bucket-0/data-dead-0.parquet", days=365)
    plan = plan_paimon(t.path)
    assert [a.path for a in plan.actions] == ["dt=2024-01-02/bucket-0/data-dead-0.parquet"]
    assert plan.stats["kept_used"] > 0
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {"dt=2024-01-02/bucket-0/data-dead-0.parquet": "DELETED"}
    assert_paimon_whole(t.path)
    assert paimon_rows(str(tmp_path / "wh"), "t") == expected_rows(t)


def test_iceberg_4290_a_referenced_file_with_an_old_modification_time_is_kept(ice, tmp_path):
    """delta-io/delta-rs#4290 for Iceberg: every file pyiceberg wrote is a year old; only the junk goes."""
    t = write_history(ice)
    before = rows_by_snapshot(t)
    age_iceberg(t, 365)
    stray(t, "data/region=eu/00000-dead.parquet", days=365)
    plan = plan_iceberg(ice.view())
    assert [a.path for a in plan.actions] == ["data/region=eu/00000-dead.parquet"]
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {"data/region=eu/00000-dead.parquet": "DELETED"}
    assert missing(ice.table()) == set() and rows_by_snapshot(ice.table()) == before


# -- a transient empty listing: apache/paimon#7920 ------------------------------------------------------


def test_paimon_7920_a_transiently_empty_snapshot_listing_refuses_plan_and_apply(lake, tmp_path, listing_filter):
    """apache/paimon#7920: a listing that came back empty for a moment was taken for the truth. When the
    snapshot directory lists empty, the used set would be empty and every file would look unused: lakesweep
    refuses the plan, and an apply whose re-check meets the same empty listing refuses too."""
    junk(lake.root, "dt=a/bucket-0/data-dead-0.parquet")
    snapshot_dir = os.path.join(lake.root, "snapshot")
    before = all_files(lake.root)

    def empty_snapshot_dir(info):
        return None if os.path.dirname(info.path) == snapshot_dir else info

    listing_filter(empty_snapshot_dir)
    with pytest.raises(PlanRejected, match="found no snapshot in"):
        plan_paimon(lake.root)
    listing_filter(None)
    plan = plan_paimon(lake.root)
    assert [a.path for a in plan.actions] == ["dt=a/bucket-0/data-dead-0.parquet"]
    listing_filter(empty_snapshot_dir)
    with pytest.raises(PlanRejected, match="no snapshot"):
        apply(plan, tmp_path)
    listing_filter(None)
    assert all_files(lake.root) == before and lake.rows() == [1, 2]


def test_iceberg_7920_a_transiently_empty_listing_deletes_nothing(ice, tmp_path, listing_filter):
    """apache/paimon#7920 for Iceberg: the table location lists empty for a moment. Nothing listed is nothing
    planned; the metadata still names every file and the table reads the same."""
    t = write_history(ice)
    age_iceberg(t)
    stray(t, "data/region=eu/00000-dead.parquet")
    before, files = rows_by_snapshot(t), files_on_disk(t)
    listing_filter(lambda info: None)
    plan = plan_iceberg(ice.view())
    listing_filter(None)
    assert plan.actions == ()
    report, outcomes = apply(plan, tmp_path)
    assert outcomes == {} and files_on_disk(ice.table()) == files and rows_by_snapshot(ice.table()) == before


# -- ',', '=', '/' and '%' inside partition values: apache/paimon#9277 ----------------------------------

ODD_VALUES = ("a,b", "k=v", "x/y", "50%", "%2F")


def data_dirs(root: str) -> list[str]:
    """The directories holding the table's data files, relative to ``root``, sorted."""
    return sorted({os.path.relpath(d, root) for d, _, fs in os.walk(root)
                   if any(f.endswith(".parquet") for f in fs) and "/snapshot" not in d})


def test_paimon_9277_odd_characters_in_partition_values_plan_and_apply_the_right_files(tmp_path):
    """apache/paimon#9277: a ',' '=' '/' or '%' inside a partition value was taken for a separator or an
    escape, and maintenance worked on the wrong files. pypaimon writes one partition per odd value and
    overwrites ``a,b``; expiry deletes exactly the overwritten file (not an absent look-alike), orphan
    cleaning exactly the junk in each odd partition's bucket, and every row reads back."""
    wh = str(tmp_path / "wh")
    table = pt._create_table(wh, "odd", pt.APPEND_SCHEMA, partition_keys=["dt"])
    rows = [{"id": i, "name": v, "amount": float(i), "dt": v} for i, v in enumerate(ODD_VALUES)]
    pt._commit(table, rows, pt.APPEND_SCHEMA)
    pt._commit(table, [{"id": 99, "name": "new", "amount": 9.0, "dt": "a,b"}], pt.APPEND_SCHEMA,
               overwrite={"dt": "a,b"})
    root = str(table.table_path)
    live = [r for r in rows if r["dt"] != "a,b"] + [{"id": 99, "name": "new", "amount": 9.0, "dt": "a,b"}]
    expected = sorted((tuple(r[k] for k in ("id", "name", "amount", "dt")) for r in live), key=repr)
    dirs = data_dirs(root)
    assert len(dirs) == len(ODD_VALUES)
    overwritten = {p for p in all_files(root) if p.endswith(".parquet") and "/snapshot" not in p}

    expire_plan = plan_kind("expire", "paimon").plan(open_table(root), now_ms=10**15, options=plan_kind("expire", "paimon").resolve_options(
        open_table(root).options, retain_min=1, retain_max=1, time_retained=0))
    report, outcomes = apply(expire_plan, tmp_path)
    gone = {p for p in overwritten if not os.path.exists(p)}
    assert report.state == "COMPLETED" and len(gone) == 1
    assert [o for p, o in outcomes.items() if p.endswith(".parquet")] == ["DELETED"]
    assert paimon_rows(wh, "odd") == expected

    age(root)
    dead = [os.path.join(d, "data-dead-0.parquet") for d in dirs]
    for rel in dead:
        junk(root, rel)
    plan = plan_paimon(root)
    assert sorted(a.path for a in plan.actions) == sorted(dead)
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {rel: "DELETED" for rel in dead}
    assert paimon_rows(wh, "odd") == expected
    assert_paimon_whole(root)


def test_iceberg_9277_odd_characters_in_partition_values_plan_and_apply_the_right_files(ice, tmp_path):
    """apache/paimon#9277 for Iceberg: pyiceberg writes one identity partition per odd value (',', '=', '/',
    '%'); orphan cleaning deletes exactly the junk beside each partition's data and every row reads back."""
    from tests.iceberg.conftest import SPEC

    t = ice.catalog.create_table("ns.odd", schema=ICE_SCHEMA, partition_spec=SPEC)
    t.append(pa.table({"id": pa.array(range(len(ODD_VALUES)), pa.int64()), "region": list(ODD_VALUES)}))
    t.overwrite(pa.table({"id": pa.array([99], pa.int64()), "region": ["a,b"]}), overwrite_filter="region = 'a,b'")
    t = ice.table("ns.odd")
    before = rows_by_snapshot(t)
    age_iceberg(t)
    root = canonical(t.metadata.location)
    dirs = data_dirs(root)
    assert len(dirs) == len(ODD_VALUES)
    dead = [os.path.join(d, "00000-dead.parquet") for d in dirs]
    for rel in dead:
        stray(t, rel)
    plan = plan_iceberg(ice.view("ns.odd"))
    assert sorted(a.path for a in plan.actions) == sorted(dead)
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {rel: "DELETED" for rel in dead}
    assert missing(ice.table("ns.odd")) == set() and rows_by_snapshot(ice.table("ns.odd")) == before


# -- doubled or relative paths in metadata: seaweedfs#10414 ---------------------------------------------


def test_paimon_10414_a_relative_path_in_a_manifest_refuses_orphan_cleaning(lake, tmp_path):
    """seaweedfs#10414: metadata naming files by doubled or relative paths, resolved differently by the
    cleaner than by the reader, made live files look unreferenced. A Paimon manifest entry naming
    ``../../snapshot/snapshot-2`` instead of a file name refuses the plan, naming the manifest."""
    from tests.engine.test_corrupt_metadata import _rewrite_avro

    t = open_table(lake.root)
    name = t.manifest_list(t.snapshot(2).delta_manifest_list)[0].file_name
    path = os.path.join(lake.root, "manifest", name)

    def edit(records):
        records[0]["_FILE"]["_FILE_NAME"] = "../../snapshot/snapshot-2"

    _rewrite_avro(path, edit)
    age(lake.root)
    junk(lake.root, "dt=a/bucket-0/data-dead-0.parquet")
    before = all_files(lake.root)
    with pytest.raises(PlanRejected, match=f"orphan cleaning cannot tell which files .* uses: {path}: malformed "
                                           "manifest entry: '_FILE_NAME' is not a plain file name"):
        plan_paimon(lake.root)
    assert all_files(lake.root) == before


@pytest.mark.parametrize("spelling", ["doubled", "relative"])
def test_iceberg_10414_a_doubled_or_relative_data_path_refuses_orphan_cleaning(ice, tmp_path, monkeypatch, spelling):
    """seaweedfs#10414: a data file the metadata names as ``.../t//data/x.parquet`` (or relatively) did not
    match its listed path, so it was deleted as an orphan. pyiceberg's ``add_files`` records the path as
    given; lakesweep refuses to plan rather than guess which file it means, and deletes nothing."""
    import pyarrow.parquet as pq

    t = write_history(ice)
    root = canonical(t.metadata.location)
    real = os.path.join(root, "data", "added.parquet")
    pq.write_table(pa.table({"id": pa.array([7], pa.int64()), "region": ["us"]}), real)
    if spelling == "doubled":
        named = f"file://{root}//data/added.parquet"
    else:
        monkeypatch.chdir(root)
        named = "data/added.parquet"
    t.add_files([named])
    assert named in {e.data_file.file_path for m in ice.table().current_snapshot().manifests(t.io)
                     for e in m.fetch_manifest_entry(t.io)}
    age_iceberg(t)
    old(real)
    before = files_on_disk(t)
    reason = "'.', '..' and empty path segments are not allowed" if spelling == "doubled" else \
        "not an absolute location"
    with pytest.raises(InvalidLocation) as e:
        plan_iceberg(ice.view())
    assert str(e.value) == f"{named!r}: {reason}"
    assert files_on_disk(ice.table()) == before


# -- unknown modification times --------------------------------------------------------------------------


def test_paimon_a_file_of_unknown_modification_time_is_kept(lake, tmp_path):
    """A listing that gives no modification time (some stores and inventories) must not read as "old": the
    file could have been written a second ago. Of two junk files, the one without a time stays."""
    junk(lake.root, "dt=a/bucket-0/data-dead-0.parquet")
    junk(lake.root, "dt=b/bucket-0/data-timeless-0.parquet")
    listing = [ListedFile(f.path, f.size, None) if "timeless" in f.path else f
               for f in list_orphan_candidates(open_table(lake.root))]
    plan = plan_paimon(lake.root, listing)
    assert [a.path for a in plan.actions] == ["dt=a/bucket-0/data-dead-0.parquet"]
    assert plan.stats["kept_unknown_time"] == 1
    report, outcomes = apply(plan, tmp_path)
    assert outcomes == {"dt=a/bucket-0/data-dead-0.parquet": "DELETED"}
    assert os.path.exists(os.path.join(lake.root, "dt=b/bucket-0/data-timeless-0.parquet"))
    assert_paimon_whole(lake.root)
    assert lake.rows() == [1, 2]


def test_iceberg_a_file_of_unknown_modification_time_is_kept(ice, tmp_path, listing_filter):
    """Unknown modification times for Iceberg: the store lists one junk file without a time; it stays."""
    t = write_history(ice)
    age_iceberg(t)
    stray(t, "data/region=us/00000-dead.parquet")
    timeless = stray(t, "data/region=eu/00000-timeless.parquet")
    listing_filter(lambda info: dataclasses.replace(info, mtime_ms=None) if "timeless" in info.path else info)
    plan = plan_iceberg(ice.view())
    listing_filter(None)
    assert [a.path for a in plan.actions] == ["data/region=us/00000-dead.parquet"]
    assert plan.stats["kept"]["unknown_age"] == 1
    report, outcomes = apply(plan, tmp_path)
    assert outcomes == {"data/region=us/00000-dead.parquet": "DELETED"} and os.path.exists(timeless)
    assert missing(ice.table()) == set()


# -- statistics and partition-statistics files -----------------------------------------------------------


def test_paimon_a_statistics_file_the_snapshot_names_is_kept(lake, tmp_path):
    """Statistics files live outside the data tree and are named only by a snapshot field, so a cleaner
    that reads only manifests deletes them. pypaimon writes no statistics: the latest snapshot's
    ``statistics`` field is set by hand to a file in ``statistics/``, beside an unreferenced one."""
    stats_dir = os.path.join(lake.root, "statistics")
    os.makedirs(stats_dir)
    for name in ("stats-used-0", "stats-dead-0"):
        with open(os.path.join(stats_dir, name), "w") as f:
            f.write('{"snapshotId": 3, "schemaId": 0, "mergedRecordCount": 2, "colStats": {}}')
    snapshot = os.path.join(lake.root, "snapshot", "snapshot-3")
    with open(snapshot) as f:
        doc = json.load(f)
    doc["statistics"] = "stats-used-0"
    with open(snapshot, "w") as f:
        json.dump(doc, f)
    age(lake.root)
    plan = plan_paimon(lake.root)
    assert [a.path for a in plan.actions] == ["statistics/stats-dead-0"]
    report, outcomes = apply(plan, tmp_path)
    assert outcomes == {"statistics/stats-dead-0": "DELETED"}
    assert os.path.exists(os.path.join(stats_dir, "stats-used-0"))
    assert_paimon_whole(lake.root)
    assert lake.rows() == [1, 2]


def test_iceberg_statistics_and_partition_statistics_files_are_kept(ice, tmp_path):
    """Iceberg names puffin statistics and partition-statistics files only in the table metadata, not in
    any manifest; cleaners that read manifests alone deleted them. pyiceberg commits both here (written by
    ``tests.support.iceberg_files``); orphan cleaning deletes the unreferenced copies only."""
    import shutil

    from tests.support.iceberg_tables import with_statistics

    with_statistics(ice.catalog, "ns.stats")
    t = ice.table("ns.stats")
    stats = [canonical(f.statistics_path) for f in t.metadata.statistics]
    partition_stats = [canonical(f.statistics_path) for f in t.metadata.partition_statistics]
    assert len(stats) == 2 and len(partition_stats) == 1
    dead = []
    for src in (stats[0], partition_stats[0]):
        copy = os.path.join(os.path.dirname(src), "dead-" + os.path.basename(src))
        shutil.copy(src, copy)
        dead.append(os.path.relpath(copy, canonical(t.metadata.location)))
    age_iceberg(t)
    before = rows_by_snapshot(t)
    plan = plan_iceberg(ice.view("ns.stats"))
    assert sorted(a.path for a in plan.actions) == sorted(dead)
    report, outcomes = apply(plan, tmp_path)
    assert outcomes == {rel: "DELETED" for rel in dead}
    assert all(os.path.exists(p) for p in stats + partition_stats)
    assert missing(ice.table("ns.stats")) == set() and rows_by_snapshot(ice.table("ns.stats")) == before


# -- a listing that misses a file the metadata references: it is incomplete -----------------------------


def test_paimon_a_listing_that_misses_a_referenced_file_aborts_the_plan(lake, tmp_path):
    """A listing that misses files the table references is incomplete (a truncated page, a lagging
    inventory, another spelling of the paths): whatever else it shows cannot be trusted to be all there is.
    lakesweep aborts then, naming the file."""
    junk(lake.root, "dt=a/bucket-0/data-dead-0.parquet")
    t = open_table(lake.root)
    [live] = [p for p in reachable_paths(t, t.snapshot(3), with_changelog=False) if "/dt=b/" in p]
    listing = [f for f in list_orphan_candidates(t) if f.path != live]
    before = all_files(lake.root)
    with pytest.raises(PlanRejected) as e:
        plan_paimon(lake.root, listing)
    assert str(e.value).startswith(f"the listing is incomplete: it misses {live}, which snapshot 3 of branch 'main' "
                                   "references and which was last modified ")
    assert str(e.value).endswith("Files the listing misses cannot be told from files it shows, so nothing was "
                                 "planned. Re-run 'lakesweep plan orphans'; with an inventory, use one made after "
                                 "the cut-off")
    assert all_files(lake.root) == before and lake.rows() == [1, 2]


def test_iceberg_a_listing_that_misses_a_referenced_file_aborts_the_plan(ice, tmp_path, listing_filter):
    """The incomplete listing for Iceberg: the store listing leaves out one data file the current snapshot
    reads. lakesweep aborts, naming it, and deletes nothing."""
    t = write_history(ice)
    age_iceberg(t)
    stray(t, "data/region=us/00000-dead.parquet")
    current = {canonical(e.data_file.file_path) for m in t.current_snapshot().manifests(t.io)
               for e in m.fetch_manifest_entry(t.io)}
    hidden = sorted(current)[0]
    before = files_on_disk(t)
    listing_filter(lambda info: None if canonical(info.path) == hidden else info)
    with pytest.raises(PlanRejected, match=f"^the listing is incomplete: it misses {hidden}, which the current "
                                           f"snapshot {t.current_snapshot().snapshot_id} \\(data-file\\) references "
                                           "and which was last modified .*, before the cut-off .*: a listing made "
                                           "since should show it"):
        plan_iceberg(ice.view())
    listing_filter(None)
    assert files_on_disk(ice.table()) == before and missing(ice.table()) == set()


# -- s3, s3a and s3n in one table -----------------------------------------------------------------------


def test_iceberg_s3_s3a_and_s3n_spellings_in_one_table_keep_their_files(tmp_path, monkeypatch, s3_env):
    """Hadoop-era writers name files ``s3a://`` or ``s3n://`` in the same table whose other files are
    ``s3://``; a cleaner comparing spellings finds none of those files used and deletes them. A pyiceberg
    table on S3 (SeaweedFS) with one file added under each spelling: lakesweep deletes only the junk, and
    pyiceberg still reads every row."""
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs
    from pyiceberg.catalog.sql import SqlCatalog

    from tests.iceberg.conftest import CATALOG, SPEC, batch

    fs = s3_env["fs"]
    key = f"{s3_env['bucket']}/mixed-{os.path.basename(tmp_path)}"
    props = {"uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"s3://{key}/wh", "type": "sql",
             "s3.endpoint": s3_env["AWS_ENDPOINT_URL"], "s3.access-key-id": s3_env["AWS_ACCESS_KEY_ID"],
             "s3.secret-access-key": s3_env["AWS_SECRET_ACCESS_KEY"], "s3.region": s3_env["AWS_REGION"]}
    for k, v in props.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__" + "__".join(
            p.replace("-", "_").upper() for p in k.split(".")), v)
    catalog = SqlCatalog(CATALOG, **props)
    catalog.create_namespace("ns")
    t = catalog.create_table("ns.t", schema=ICE_SCHEMA, partition_spec=SPEC)
    t.append(batch(0))
    location = canonical(t.metadata.location)
    added = []
    for scheme, start in (("s3a", 100), ("s3n", 200)):
        rel = f"data/region=us/added-{scheme}.parquet"
        with fs.open_output_stream(f"{location[len('s3://'):]}/{rel}") as out:
            pq.write_table(batch(start, 3).filter(pa.compute.equal(batch(start, 3)["region"], "us")), out)
        added.append((f"{scheme}://{location[len('s3://'):]}/{rel}", rel))
    t.add_files([spelled for spelled, _ in added])
    t = catalog.load_table("ns.t")
    named = {e.data_file.file_path for m in t.current_snapshot().manifests(t.io) for e in m.fetch_manifest_entry(t.io)}
    assert {spelled for spelled, _ in added} <= named
    with fs.open_output_stream(f"{location[len('s3://'):]}/data/region=us/00000-dead.parquet") as out:
        out.write(b"left behind")
    before = rows_by_snapshot(t)
    time.sleep(1.5)  # object times are the upload's: old enough for --older-than 1 s

    from tests.iceberg.conftest import Lake as IcebergLake

    plan = plan_iceberg(IcebergLake(str(tmp_path), catalog).view(), older_than="1 s", force=True)
    assert [a.path for a in plan.actions] == ["data/region=us/00000-dead.parquet"]
    report, outcomes = apply(plan, tmp_path)
    assert report.state == "COMPLETED" and outcomes == {"data/region=us/00000-dead.parquet": "DELETED"}
    left = {i.path for i in fs.get_file_info(pafs.FileSelector(location[len("s3://"):], recursive=True))}
    assert {f"{location[len('s3://'):]}/{rel}" for _, rel in added} <= left
    assert rows_by_snapshot(catalog.load_table("ns.t")) == before


def test_paimon_10414_a_doubled_external_path_in_a_manifest_refuses_orphan_cleaning(lake, tmp_path):
    """seaweedfs#10414 with a doubled path: a manifest entry of the latest snapshot gives its data file's
    location as ``file://<table>//dt=b/bucket-0/<name>``. lakesweep does not collapse it into another
    spelling of the file: orphan cleaning stops on the corrupt metadata, naming the location, and deletes
    nothing."""
    from tests.engine.test_corrupt_metadata import _rewrite_avro

    t = open_table(lake.root)
    [entry] = [e for e in t.live_entries(t.snapshot(3)) if t.paths.data_file(e.partition, e.bucket, e.file)
               .startswith(os.path.join(lake.root, "dt=b"))]
    [manifest] = [m.file_name for m in t.data_manifests(t.snapshot(3))
                  if entry.file.file_name in t.manifest_names(m.file_name)]
    doubled = f"file://{lake.root}//dt=b/bucket-0/{entry.file.file_name}"

    def edit(records):
        for r in records:
            if r["_FILE"]["_FILE_NAME"] == entry.file.file_name:
                r["_FILE"]["_EXTERNAL_PATH"] = doubled

    _rewrite_avro(os.path.join(lake.root, "manifest", manifest), edit)
    age(lake.root)
    junk(lake.root, "dt=a/bucket-0/data-dead-0.parquet")
    before = all_files(lake.root)
    with pytest.raises(CorruptMetadata) as e:
        plan_paimon(lake.root)
    assert str(e.value) == (f"{doubled}: external path does not name a file lakesweep can address: {doubled!r}: "
                            "'.', '..' and empty path segments are not allowed")
    assert all_files(lake.root) == before
