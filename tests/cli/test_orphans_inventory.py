"""``lakesweep plan orphans --inventory``: the listing read from a Parquet inventory (the plain form on a local
table, S3 Inventory's own columns on a real S3 store), recorded in the plan and shown to the reviewer; a bad
inventory refused with exit code 1 and nothing written; a stale inventory is safe to plan and apply from."""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import read_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.test_safety import SCHEMA, Lake
from tests.planner.test_orphans import NOW, age, junk
from tests.support.seaweed import list_tree, upload_tree
from tests.support.table_builder import all_files

JUNK = ["snapshot/UNKNOWN-1", "manifest/manifest-dead-0", "dt=a/bucket-0/data-failed-0.parquet",
        "dt=a/bucket-7/data-failed-1.parquet"]
KEPT = ["tmp/data-x-0.parquet", "_upload/part-0", "dt=a/tmp/y"]  # not in Paimon's directories
OLD_MS = NOW - 3 * 86_400_000


@pytest.fixture
def lake(tmp_path):
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)
    for rel in JUNK + KEPT:
        junk(lake.root, rel)
    age(lake.root)
    return lake


def cli(*args, code=0):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == code, r.output
    return r


def plain_inventory(root, out) -> str:
    """Every file below ``root`` as the plain form lists them: path, size, mtime_ms."""
    rows = []
    for d, _, files in os.walk(root):
        for name in files:
            st = os.stat(os.path.join(d, name))
            rows.append((os.path.join(d, name), st.st_size, st.st_mtime_ns // 1_000_000))
    paths, sizes, mtimes = zip(*sorted(rows))
    pq.write_table(pa.table({"path": list(paths), "size": pa.array(sizes, pa.int64()),
                             "mtime_ms": pa.array(mtimes, pa.int64())}), str(out))
    return str(out)


def planned_paths(out) -> list[str]:
    return sorted(a.path for a in read_plan(str(out)).actions)


def test_an_inventory_plans_what_listing_the_store_plans_and_the_plan_says_where_it_listed(lake, tmp_path):
    inv = plain_inventory(lake.root, tmp_path / "inventory.parquet")
    n = len(all_files(lake.root))
    cli("plan", "orphans", lake.root, "--out", tmp_path / "from-inventory.plan", "--inventory", inv)
    cli("plan", "orphans", lake.root, "--out", tmp_path / "from-store.plan")
    from_store = planned_paths(tmp_path / "from-store.plan")
    assert planned_paths(tmp_path / "from-inventory.plan") == from_store == sorted(JUNK)

    doc = json.loads(cli("show", tmp_path / "from-inventory.plan", "-o", "json").stdout)
    assert doc["options"]["inventory"] == {"value": [inv], "source": "flag"}
    assert doc["listing"] == {"from": "inventory", "inventory": [{"file": inv, "form": "plain"}], "rows": n,
                              "under_table": n, "outside_table": 0, "left_out": {}}
    text = " ".join(cli("show", tmp_path / "from-inventory.plan").stdout.split())
    assert (f"listed: from the inventory {inv} (plain), not the store: {n} rows, {n} under the table, 0 outside "
            "it, 0 naming no current file; files written after it was made are not candidates") in text
    store = json.loads(cli("show", tmp_path / "from-store.plan", "-o", "json").stdout)
    assert store["options"]["inventory"] == {"value": None, "source": "default"}
    assert store["listing"] == {"from": "store"}
    assert "listed: the store, before reading what the table uses" in cli("show", tmp_path / "from-store.plan").stdout


def test_a_file_the_inventory_gives_no_modification_time_is_kept(lake, tmp_path):
    rel = "dt=a/bucket-0/data-failed-0.parquet"
    # every file but the other junk (a complete listing holds what the table uses), this one without a time
    rest = sorted(set(all_files(lake.root)) - set(JUNK))
    paths = [os.path.join(lake.root, f) for f in rest] + [os.path.join(lake.root, rel)]
    mtimes = [os.stat(p).st_mtime_ns // 1_000_000 for p in paths[:-1]] + [None]
    pq.write_table(pa.table({"path": paths, "size": pa.array([os.path.getsize(p) for p in paths], pa.int64()),
                             "mtime_ms": pa.array(mtimes, pa.int64())}), str(tmp_path / "inv.parquet"))
    r = cli("plan", "orphans", lake.root, "--out", tmp_path / "p.plan", "--inventory", tmp_path / "inv.parquet",
            "-o", "json")
    assert planned_paths(tmp_path / "p.plan") == []
    assert json.loads(r.stdout)["stats"]["kept_unknown_time"] == 1


@pytest.mark.parametrize("columns, message", [
    ({"path": ["/x"], "size": ["4"], "mtime_ms": pa.array([OLD_MS], pa.int64())},
     "column 'size' is string, not an integer"),
    ({"bucket": ["b"], "key": ["k"], "size": pa.array([4], pa.int64())}, "has no column 'last_modified_date'"),
    ({"path": ["/x"], "size": pa.array([4], pa.int64()), "mtime_ms": pa.array([OLD_MS // 1000], pa.int64())},
     f"row 1 has mtime_ms {OLD_MS // 1000}, before 2000-01-01"),
    (None, "does not exist"),
], ids=["size as text", "no time column", "time in seconds", "no file"])
def test_a_bad_inventory_is_refused_with_exit_code_1_and_nothing_is_planned(lake, tmp_path, columns, message):
    inv = tmp_path / "inventory.parquet"
    if columns is not None:
        pq.write_table(pa.table(columns), str(inv))
    out = tmp_path / "p.plan"
    r = cli("plan", "orphans", lake.root, "--out", out, "--inventory", inv, code=1)
    assert f"error: inventory {inv}" in r.output and message in " ".join(r.output.split()), r.output
    assert not out.exists()


def test_a_stale_inventory_is_safe_to_plan_and_apply_from(lake, tmp_path):
    # A slow writer's file, written (and old) before the inventory, committed after it.
    builder = lake.table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"id": 99, "dt": "a"}], schema=SCHEMA))
    messages = write.prepare_commit()
    age(lake.root)
    inv = plain_inventory(lake.root, tmp_path / "inventory.parquet")
    commit.commit(messages)
    write.close()
    commit.close()
    os.remove(os.path.join(lake.root, JUNK[1]))  # deleted since the inventory was made
    os.remove(os.path.join(lake.root, JUNK[3]))
    os.rmdir(os.path.join(lake.root, "dt=a", "bucket-7"))
    junk(lake.root, "dt=b/bucket-0/data-late-0.parquet")  # written after the inventory: not listed
    before = all_files(lake.root)

    out = tmp_path / "p.plan"
    cli("plan", "orphans", lake.root, "--out", out, "--inventory", inv)
    assert planned_paths(out) == sorted(JUNK)  # the slow writer's file is used: the used set is read after
    plan = read_plan(str(out))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
        outcomes = {r.path: r.outcome.value for r in recorder.file_records(plan_id=plan.plan_id)}
    assert report.state == "COMPLETED"
    assert outcomes == {JUNK[0]: "DELETED", JUNK[1]: "ALREADY_ABSENT", JUNK[2]: "DELETED", JUNK[3]: "ALREADY_ABSENT"}
    assert all_files(lake.root) == before - {JUNK[0], JUNK[2]}
    assert 99 in lake.rows()


def test_an_s3_inventory_plans_and_applies_on_s3(lake, tmp_path, s3_env):
    fs, bucket = s3_env["fs"], s3_env["bucket"]
    prefix = f"wh-{uuid.uuid4().hex[:8]}/t"
    upload_tree(fs, lake.root, f"{bucket}/{prefix}")
    from pyarrow import fs as pafs

    objects = [i for i in fs.get_file_info(pafs.FileSelector(f"{bucket}/{prefix}", recursive=True))
               if i.type == pafs.FileType.File]
    keys = [i.path[len(bucket) + 1:] for i in objects]
    # S3 sets an object's time when it is uploaded: the inventory says when the junk was really written.
    old = {f"{prefix}/{rel}" for rel in JUNK + KEPT}
    mtimes = [OLD_MS if k in old else i.mtime_ns // 1_000_000 for k, i in zip(keys, objects)]
    rows = {
        "bucket": [bucket] * len(keys) + [bucket, "elsewhere", bucket],
        "key": keys + [f"{prefix}/dt=a/bucket-0/data-overwritten-0.parquet", f"{prefix}/dt=a/bucket-0/x",
                       "other-table/dt=a/bucket-0/x"],
        "size": pa.array([i.size for i in objects] + [1, 1, 1], pa.int64()),
        "last_modified_date": pa.array([dt.datetime.fromtimestamp(m / 1000, dt.timezone.utc)
                                        for m in mtimes + [OLD_MS] * 3], pa.timestamp("ms", tz="UTC")),
        "is_latest": [True] * len(keys) + [False, True, True],
        "is_delete_marker": [False] * (len(keys) + 3),
    }
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(rows), sink)
    with fs.open_output_stream(f"{bucket}/inventory/{prefix}/data.parquet") as f:
        f.write(sink.getvalue().to_pybytes())
    location, inv = f"s3://{bucket}/{prefix}", f"s3://{bucket}/inventory/{prefix}/data.parquet"

    out = tmp_path / "s3.plan"
    cli("plan", "orphans", location, "--out", out, "--inventory", inv)
    assert planned_paths(out) == sorted(JUNK)
    doc = json.loads(cli("show", out, "-o", "json").stdout)
    assert doc["listing"] == {"from": "inventory", "inventory": [{"file": inv, "form": "s3-inventory"}],
                              "rows": len(keys) + 3, "under_table": len(keys), "outside_table": 2,
                              "left_out": {"noncurrent-version": 1}}
    plan = read_plan(str(out))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(plan, recorder, executor=DriverExecutor())
    assert (report.state, report.counts["DELETED"]) == ("COMPLETED", len(JUNK))
    assert list_tree(fs, f"{bucket}/{prefix}") == all_files(lake.root) - set(JUNK)
    assert open_table(location).list_snapshot_ids() == [1, 2, 3]
