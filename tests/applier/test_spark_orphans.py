"""``plan orphans --spark``: the used set read on Spark (the manifests decoded on executors, the listing
left-anti-joined with what they name) gives the plan the local planner makes of the same listing, byte for
byte, on tables pypaimon, Paimon 0.9's Java core, pyiceberg and Iceberg Java wrote, and refuses what it
refuses with the same error."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time

import pytest

from lakesweep.applier import orphans_used, spark_tasks
from lakesweep.applier.iceberg_listing import list_iceberg_on_spark
from lakesweep.applier.listing import list_on_spark
from lakesweep.applier.orphans_used import PlanningSession, iceberg_used_reader, paimon_used_reader
from lakesweep.engine.errors import MetadataNotFound, PlanRejected
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import read_plan, write_plan
from lakesweep.planner.kinds import plan_kind
from tests.applier.test_orphans_apply import JUNK, lake  # noqa: F401  (the fixture)
from tests.iceberg.conftest import CATALOG, make_lake, write_history
from tests.iceberg.java_twins import reference_table, spark_written
from tests.iceberg.test_orphans import old
from tests.planner.conftest import expire
from tests.planner.test_orphans import age, junk
from tests.planner.test_orphans_property import pypaimon_history
from tests.support.processes import LAKESWEEP

pytestmark = pytest.mark.spark

NOW = int(time.time() * 1000)


@pytest.fixture(autouse=True)
def small_tasks(monkeypatch):
    """A task for each manifest, so that names met in several manifests meet across tasks."""
    monkeypatch.setattr(orphans_used, "TASK_BYTES", 1)
    monkeypatch.setattr(spark_tasks, "TASKS_PER_CORE", 10**9)


def plan_both(fmt: str, open_view, spark, tmp_path, **flags) -> tuple[bytes, bytes, object, int]:
    """The orphan plans of one Spark listing of the table, its used set read here and on Spark: (local bytes,
    spark bytes, the spark plan, how often the Spark reader ran)."""
    entry = plan_kind("orphans", fmt)
    kept: list = []
    listing = (list_on_spark if fmt == "paimon" else list_iceberg_on_spark)(
        open_view(), str(tmp_path / "listing.parquet"), spark=spark, master="local[2]", keep=kept)
    session = PlanningSession("local[2]", None)
    on_spark = paimon_used_reader if fmt == "paimon" else iceberg_used_reader
    ran = []

    def spark_reader(path):
        assert path == listing.path
        read = on_spark(session, kept[0])
        return lambda table: ran.append(path) or read(table)

    out = []
    for reader in (None, spark_reader):
        view = open_view()
        options = entry.resolve_options(view.options, spark="local[2]", lister=lambda t: (listing.path,
                                                                                          listing.source()),
                                        used_reader=reader, **flags)
        plan = entry.read_and_plan(view, now_ms=NOW, options=options)
        path = tmp_path / f"{len(out)}.plan"
        write_plan(plan, str(path))
        out.append(path.read_bytes())
    kept[0].unpersist()
    return out[0], out[1], plan, len(ran)


def refusals(fmt: str, open_view, spark, tmp_path) -> tuple[BaseException, BaseException]:
    """What planning raises with the used set read here and on Spark."""
    raised = []
    for reader in (None, True):
        with pytest.raises(Exception) as info:
            plan_both_once(fmt, open_view, spark, tmp_path / str(len(raised)), reader)
        raised.append(info.value)
    return raised[0], raised[1]


def plan_both_once(fmt, open_view, spark, tmp_path, spark_reader):
    os.makedirs(tmp_path)
    entry = plan_kind("orphans", fmt)
    kept: list = []
    listing = (list_on_spark if fmt == "paimon" else list_iceberg_on_spark)(
        open_view(), str(tmp_path / "listing.parquet"), spark=spark, master="local[2]", keep=kept)
    session = PlanningSession("local[2]", None)
    reader = None if spark_reader is None else (
        lambda path: (paimon_used_reader if fmt == "paimon" else iceberg_used_reader)(session, kept[0]))
    view = open_view()
    options = entry.resolve_options(view.options, spark="local[2]", lister=lambda t: (listing.path, listing.source()),
                                    used_reader=reader)
    return entry.read_and_plan(view, now_ms=NOW, options=options)


# -- Paimon ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [{}, {"empty_dirs": True}])
@pytest.mark.slow
def test_spark_plans_a_paimon_tables_planted_orphans_as_the_local_planner(lake, spark, tmp_path,  # noqa: F811
                                                                          flags):
    local, on_spark, plan, ran = plan_both("paimon", lambda: open_table(lake.root), spark, tmp_path, **flags)
    emptied = ["dt=a/bucket-7"] if flags else []  # the bucket directory holding only junk
    assert ran == 1 and sorted(a.path for a in plan.actions) == sorted(JUNK + emptied)
    assert plan.stats["kept_used"] > 0
    assert on_spark == local


@pytest.mark.slow
def test_spark_plans_a_pypaimon_history_with_tags_and_a_branch_as_the_local_planner(spark, tmp_path):
    root = pypaimon_history(str(tmp_path / "wh"), seed=3, steps=8)
    t = open_table(root)
    assert t.branch_names() and t.tags()
    rels = ["dt=a/bucket-0/data-failed-0.parquet", "manifest/manifest-dead-0", "branch/branch-b1/snapshot/junk",
            "index/index-dead-0"]
    for rel in rels:
        junk(root, rel)
    age(root)
    local, on_spark, plan, ran = plan_both("paimon", lambda: open_table(root), spark, tmp_path)
    assert ran == 1 and sorted(a.path for a in plan.actions) == sorted(rels)
    assert on_spark == local


@pytest.mark.slow
@pytest.mark.java
def test_spark_plans_an_expired_paimon_java_table_with_tags_and_a_branch_as_the_local_planner(
        paimon_java, spark, tmp_path):
    root = str(tmp_path / "t")
    paimon_java.generate(root, seed=1, kind="pk", steps=14, options={"changelog.num-retained.max": 3000})
    latest = open_table(root).earliest_latest()[1]
    paimon_java.create_tag(root, "keep", latest - 4)
    paimon_java.create_branch(root, "b1", tag="keep")
    expire(root, retain_min=1, retain_max=1, max_deletes=1000)
    t = open_table(root)
    assert t.branch_names() == ["b1"] and t.list_changelog_ids()
    junk(root, "dt=2024-01-01/bucket-0/data-failed-0.parquet")
    age(root)
    local, on_spark, plan, ran = plan_both("paimon", lambda: open_table(root), spark, tmp_path)
    assert ran == 1 and [a.path for a in plan.actions] == ["dt=2024-01-01/bucket-0/data-failed-0.parquet"]
    assert on_spark == local


def test_unreadable_paimon_manifests_refuse_the_plan_on_spark_naming_the_first_as_locally(lake, spark,  # noqa: F811
                                                                                           tmp_path):
    t = open_table(lake.root)
    names = sorted({t.data_manifests(t.snapshot(1))[0].file_name, t.data_manifests(t.snapshot(3))[-1].file_name})
    assert len(names) == 2
    for name in names:
        with open(os.path.join(lake.root, "manifest", name), "wb") as f:
            f.write(b"not avro")
    local, on_spark = refusals("paimon", lambda: open_table(lake.root), spark, tmp_path)
    assert type(on_spark) is type(local) is PlanRejected
    assert type(on_spark.__cause__) is type(local.__cause__) and on_spark.__cause__.path == local.__cause__.path
    assert str(on_spark) == str(local) and names[0] in str(local)


def test_a_missing_paimon_manifest_refuses_the_plan_on_spark_as_locally(lake, spark, tmp_path):  # noqa: F811
    t = open_table(lake.root)
    name = t.data_manifests(t.snapshot(2))[-1].file_name
    os.remove(os.path.join(lake.root, "manifest", name))
    local, on_spark = refusals("paimon", lambda: open_table(lake.root), spark, tmp_path)
    assert isinstance(local.__cause__, MetadataNotFound) and type(on_spark.__cause__) is MetadataNotFound
    assert str(on_spark) == str(local) and f"{name}: manifest not found" in str(local)


def test_a_used_set_that_misses_a_file_of_the_latest_snapshot_is_refused_on_spark(lake, spark, tmp_path,  # noqa: F811
                                                                                  monkeypatch):
    import lakesweep.engine.paimon.orphans as orphans_mod

    real = orphans_mod.used_metadata

    def lossy(table):
        names, manifests, latest = real(table)
        return names - {latest[0][1].base_manifest_list}, manifests, latest

    monkeypatch.setattr(orphans_mod, "used_metadata", lossy)
    with pytest.raises(PlanRejected, match=r"the used files read for orphan cleaning miss .*, which snapshot 3 of "
                                           r"branch 'main' references; nothing was planned"):
        plan_both_once("paimon", lambda: open_table(lake.root), spark, tmp_path / "p", True)


@pytest.mark.slow
def test_plan_orphans_spark_as_a_process_writes_the_plan_the_store_walk_writes(lake, tmp_path):  # noqa: F811
    """But for where the listing came from (``stats.listing``, the ``spark`` option): the same bytes."""
    outs = []
    for extra in ([], ["--spark", "--master", "local[2]"]):
        out = tmp_path / f"{len(outs)}.plan"
        subprocess.run([*LAKESWEEP, "plan", "orphans", lake.root, "--out", str(out), "--now", str(NOW), *extra],
                       check=True, capture_output=True)
        outs.append(out)
    store, on_spark = read_plan(str(outs[0])), read_plan(str(outs[1]))
    assert on_spark.stats["listing"]["from"] == "spark" and sorted(a.path for a in on_spark.actions) == sorted(JUNK)
    same = dataclasses.replace(on_spark, options=store.options, stats={**on_spark.stats, "listing": {"from": "store"}})
    write_plan(same, str(tmp_path / "same.plan"))
    assert (tmp_path / "same.plan").read_bytes() == outs[0].read_bytes()


# -- Iceberg --------------------------------------------------------------------------------------------


STRAYS = ["data/region=eu/orphan-0.parquet", "data/orphan-1.parquet", "metadata/orphan-m.avro", "stray/x.bin",
          "data/_SUCCESS"]


def planted(lake, ident: str) -> str:
    """Stray files in ``ident``'s location, and every file of it old; its location."""
    location = canonical(lake.table(ident).metadata.location)
    for rel in STRAYS:
        os.makedirs(os.path.dirname(os.path.join(location, rel)), exist_ok=True)
        with open(os.path.join(location, rel), "wb") as f:
            f.write(b"left behind")
    for d, _, names in os.walk(location):
        for n in names:
            old(os.path.join(d, n), 30)
    return location


@pytest.mark.slow
def test_spark_plans_a_pyiceberg_tables_planted_orphans_as_the_local_planner(spark, tmp_path, monkeypatch):
    lake = make_lake(tmp_path / "lake", monkeypatch)
    write_history(lake)
    planted(lake, "ns.t")
    local, on_spark, plan, ran = plan_both("iceberg", lambda: IcebergTable(CATALOG, "ns.t"), spark, tmp_path)
    assert ran == 1 and sorted(a.path for a in plan.actions) == sorted(STRAYS[:-1])
    assert plan.stats["used"] > 20 and plan.stats["kept"]["hidden"] == 1
    assert on_spark == local


@pytest.mark.parametrize("builder", ["with_statistics", "position_deletes", "equality_deletes"])
@pytest.mark.slow
def test_spark_plans_the_iceberg_reference_tables_orphans_as_the_local_planner(spark, tmp_path, monkeypatch,
                                                                               builder):
    """Statistics files, delete files, manifests with deleted entries."""
    lake = make_lake(tmp_path / "lake", monkeypatch)
    reference_table(lake, builder, "ns.x")
    planted(lake, "ns.x")
    local, on_spark, plan, ran = plan_both("iceberg", lambda: IcebergTable(CATALOG, "ns.x"), spark, tmp_path)
    assert ran == 1 and sorted(a.path for a in plan.actions) == sorted(STRAYS[:-1])
    assert on_spark == local


@pytest.mark.slow
def test_missing_iceberg_manifests_refuse_the_plan_on_spark_naming_the_first_as_locally(spark, tmp_path,
                                                                                        monkeypatch):
    lake = make_lake(tmp_path / "lake", monkeypatch)
    t = write_history(lake)
    first, last = (t.metadata.snapshots[i].manifests(t.io)[0].manifest_path.removeprefix("file://") for i in (2, -1))
    assert first != last
    os.remove(last)
    os.remove(first)
    local, on_spark = refusals("iceberg", lambda: IcebergTable(CATALOG, "ns.t"), spark, tmp_path)
    assert type(local) is type(on_spark) is MetadataNotFound
    assert on_spark.path == local.path and str(on_spark) == str(local) == f"{first}: manifest not found"


@pytest.mark.slow
@pytest.mark.java
def test_spark_plans_an_iceberg_java_tables_orphans_as_the_local_planner(spark, ice, tmp_path, monkeypatch):
    lake = make_lake(tmp_path / "lake", monkeypatch)
    spark_written(ice, lake)
    planted(lake, "ns.s")
    local, on_spark, plan, ran = plan_both("iceberg", lambda: IcebergTable(CATALOG, "ns.s"), spark, tmp_path)
    assert ran == 1 and sorted(a.path for a in plan.actions) == sorted(STRAYS[:-1])
    assert on_spark == local


@pytest.mark.parametrize("used,listed", [
    (["s3a://lake/t/data/a.parquet", "s3n://lake/t/data/b.parquet"],
     ["s3://lake/t/data/a.parquet", "s3a://lake/t/data/b.parquet", "s3://lake/t/data/c.parquet",
      "s3://lake/t/metadata/00003-abc.metadata.json"]),
    (["s3://elsewhere/t/data/a.parquet"], ["s3://lake/t/data/a.parquet", "s3://lake/t/data/c.parquet"])])
def test_the_join_on_spark_spells_locations_and_refuses_another_bucket_as_the_planner_does(spark, used, listed):
    """s3a and s3n are s3 (Iceberg's equal_schemes); a used path in another bucket refuses the plan
    (prefix_mismatch_mode=ERROR): with what the join returns, the planner plans or refuses as with the whole set."""
    from lakesweep.applier.listing import files_batch
    from lakesweep.applier.orphans_used import listing_frame, unused_of_listing
    from lakesweep.engine.fileio import FileInfo
    from lakesweep.planner.iceberg.orphans import plan_iceberg_orphans, resolve_orphan_options
    from tests.iceberg.test_orphan_prefixes import NOW as STUB_NOW, OLD, StubView

    view = StubView(used)
    locations = sorted({*view.used, *view.metadata_files()})
    items = spark.sparkContext.parallelize([files_batch(listed, [1] * len(listed), [OLD] * len(listed))], 1)
    found = unused_of_listing(spark.createDataFrame([(u,) for u in locations], "name string"),
                              listing_frame(spark, items))
    outcomes = []
    for reader in (None, lambda table: (*found, len(locations))):
        try:
            p = plan_iceberg_orphans(view, [FileInfo(p, 1, OLD) for p in listed], now_ms=STUB_NOW,
                                     options=resolve_orphan_options({}), used_reader=reader)
            outcomes.append((p.plan_id, [a.path for a in p.actions], p.stats["used"]))
        except PlanRejected as e:
            outcomes.append(str(e))
    assert outcomes[1] == outcomes[0]
    assert outcomes[0] == ((outcomes[0][0], ["data/c.parquet"], 3) if len(used) == 2 else
                           "s3://lake/t/data/a.parquet is not used as listed, but the metadata names "
                           "s3://elsewhere/t/data/a.parquet: the same path with another scheme or bucket. "
                           "Nothing is planned; check which prefix is right")
