"""A Paimon table's ``_lakesweep_quarantine`` is never part of the table: orphan cleaning (the store walk, an
inventory, the Spark listing's directories) plans nothing there and finds no other table there, and
``verify`` does not list it as the table's, on tables pypaimon wrote, under the table root and under an
external root (``data-file.external-paths``)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from typer.testing import CliRunner

from lakesweep.applier.listing import task_directories
from lakesweep.cli.main import app
from lakesweep.engine.listing import read_inventory
from lakesweep.engine.paimon.neighbours import nested_neighbours
from lakesweep.engine.paimon.orphans import ListedDirs, ListedFile, list_orphan_candidates
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.engine.plan_io import read_plan
from lakesweep.engine.quarantine import QUARANTINE_DIR
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.applier.test_safety import Lake
from tests.cli.test_orphans_inventory import plain_inventory
from tests.planner.test_orphans import NOW, age, junk

PLAN = "0123456789abcdef0123456789abcdef"
JUNK = ["snapshot/UNKNOWN-1", "manifest/manifest-dead-0", "dt=a/bucket-0/data-failed-0.parquet"]


def files_under(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def quarantine(root, into=None) -> list[str]:
    """Copy every file under ``root`` to ``<into>/_lakesweep_quarantine/<plan>/`` (as ``apply --quarantine``
    leaves a whole plan's files: schema, snapshots, manifests, data), plus another table's marks (an Iceberg
    ``*.metadata.json``), 30 days old; the copies' full paths."""
    into = into or root
    q = os.path.join(into, QUARANTINE_DIR, PLAN)
    for rel in files_under(root):
        if not rel.startswith(QUARANTINE_DIR + "/"):
            os.makedirs(os.path.dirname(os.path.join(q, rel)), exist_ok=True)
            shutil.copyfile(os.path.join(root, rel), os.path.join(q, rel))
    junk(q, "metadata/00001-abc.metadata.json", days=30)
    age(q, days=30)
    return [os.path.join(q, rel) for rel in files_under(q)]


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


def plan(root, listing=None):
    t = open_table(root)
    return plan_orphans(t, list_orphan_candidates(t) if listing is None else listing, now_ms=NOW,
                        options=resolve_orphan_options({}))


def every_file(*roots) -> list[ListedFile]:
    out = []
    for root in roots:
        for rel in files_under(root):
            st = os.stat(os.path.join(root, rel))
            out.append(ListedFile(os.path.join(root, rel), st.st_size, st.st_mtime_ns // 1_000_000))
    return out


def paths(p) -> list[str]:
    return sorted(a.path for a in p.actions)


def test_orphan_cleaning_plans_nothing_in_the_quarantine_and_finds_no_table_there(lake):
    before = paths(plan(lake.root))
    assert before == sorted(JUNK)
    copies = quarantine(lake.root)
    assert any("/schema/schema-0" in c for c in copies) and any("/snapshot/snapshot-1" in c for c in copies)
    t = open_table(lake.root)
    assert not [f.path for f in list_orphan_candidates(t) if QUARANTINE_DIR in f.path]
    assert paths(plan(lake.root)) == before
    every = every_file(lake.root)
    assert paths(plan(lake.root, every)) == before  # a listing of every file (what an inventory holds)
    assert plan(lake.root, every).stats["ignored_paths"] == plan(lake.root, every_file(lake.root)).stats[
        "ignored_paths"]
    assert nested_neighbours(t) == []  # the quarantined schema and metadata files are no other table
    dirs = ListedDirs(t)
    assert not [d for d in task_directories(t, dirs) if QUARANTINE_DIR in d]
    assert all(dirs.quarantined(c) for c in copies) and not dirs.quarantined(os.path.join(lake.root, JUNK[0]))


def test_an_inventory_leaves_the_quarantine_out_and_says_so(lake, tmp_path):
    copies = quarantine(lake.root)
    inv = plain_inventory(lake.root, tmp_path / "inventory.parquet")
    read = read_inventory([inv], roots=[lake.root])
    assert not [f.path for f in read.files if QUARANTINE_DIR in f.path]
    assert read.left_out == {"quarantine": len(copies)}
    out = tmp_path / "p.plan"
    r = CliRunner().invoke(app, ["plan", "orphans", lake.root, "--out", str(out), "--inventory", inv, "-o", "json"])
    assert r.exit_code == 0, r.output
    assert paths(read_plan(str(out))) == sorted(JUNK)
    assert json.loads(r.stdout)["stats"]["listing"]["left_out"] == {"quarantine": len(copies)}
    shown = " ".join(CliRunner().invoke(app, ["show", str(out)]).stdout.split())
    assert f"0 naming no current file, {len(copies)} in a quarantine folder;" in shown


def test_verify_lists_nothing_in_the_quarantine_as_the_tables(lake):
    quarantine(lake.root)
    r = verify_table(open_table(lake.root), unreferenced=True)
    assert r.whole
    assert sorted(os.path.relpath(f.path, lake.root) for f in r.unreferenced) == sorted(JUNK)


def test_an_external_roots_quarantine_is_left_alone(tmp_path):
    ext = tmp_path / "external"
    lake = Lake(tmp_path / "wh", options={"data-file.external-paths": f"file://{ext}",
                                          "data-file.external-paths.strategy": "round-robin"})
    lake.commit("a")
    lake.commit("b")
    lake.commit("a", overwrite=True)
    junk(str(ext), "dt=a/bucket-0/data-failed-ext.parquet")
    age(lake.root)
    age(str(ext))
    before = paths(plan(lake.root))
    assert before == [f"{ext}/dt=a/bucket-0/data-failed-ext.parquet"]
    copies = quarantine(str(ext))
    assert any(c.endswith(".parquet") and "/dt=a/bucket-0/" in c for c in copies)
    t = open_table(lake.root)
    assert not [f.path for f in list_orphan_candidates(t) if QUARANTINE_DIR in f.path]
    assert paths(plan(lake.root)) == before
    assert paths(plan(lake.root, every_file(lake.root, str(ext)))) == before
    assert nested_neighbours(t) == []
    r = verify_table(t, unreferenced=True)
    assert r.whole and [f.path for f in r.unreferenced] == [f"{ext}/dt=a/bucket-0/data-failed-ext.parquet"]
