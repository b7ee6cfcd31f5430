"""``lakesweep demo --dir DIR`` never deletes what it did not create."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from lakesweep.cli.demo import DEMO_MARKER, DEMO_OUTPUTS, prepare_demo_dir
from lakesweep.cli.main import app
from lakesweep.engine.errors import ForeignDirectory

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def snapshot_tree(root) -> dict[str, bytes | None]:
    """Every file (with its bytes) and directory (None) under root."""
    out: dict[str, bytes | None] = {}
    for d, dirnames, filenames in os.walk(root):
        for n in dirnames:
            out[os.path.relpath(os.path.join(d, n), root)] = None
        for n in filenames:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), root)] = f.read()
    return out


def users_directory(root):
    """A directory of the user's: files of their own, some named like the demo's outputs."""
    (root / "warehouse" / "db").mkdir(parents=True)
    (root / "warehouse" / "db" / "table.parquet").write_bytes(b"PAR1 the user's data")
    (root / "journal.duckdb").write_bytes(b"the user's own journal")
    (root / "notes.txt").write_text("keep me\n")
    return root


def test_demo_refuses_a_non_empty_directory_it_did_not_make(tmp_path):
    d = users_directory(tmp_path / "mine")
    before = snapshot_tree(d)

    r = CliRunner().invoke(app, ["demo", "--dir", str(d)])

    assert r.exit_code == 1, r.output
    assert r.stderr == (
        f"error: {d}: not empty and not made by 'lakesweep demo' (it has no {DEMO_MARKER} file); nothing was "
        "removed. Pass --dir with a new or empty directory\n"
    )
    assert snapshot_tree(d) == before


def test_demo_refuses_a_file_as_its_directory(tmp_path):
    f = tmp_path / "plan.txt"
    f.write_text("not a directory\n")

    r = CliRunner().invoke(app, ["demo", "--dir", str(f)])

    assert r.exit_code == 1, r.output
    assert r.stderr == f"error: {f}: not a directory; pass --dir with a new or empty directory\n"
    assert f.read_text() == "not a directory\n"


def test_a_new_directory_is_created_and_marked(tmp_path):
    d = tmp_path / "a" / "demo"
    prepare_demo_dir(d)
    assert sorted(os.listdir(d)) == [DEMO_MARKER]


def test_an_empty_directory_is_marked(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    prepare_demo_dir(d)
    assert sorted(os.listdir(d)) == [DEMO_MARKER]


def test_a_previous_demo_directory_loses_only_the_demos_outputs(tmp_path):
    d = tmp_path / "demo"
    prepare_demo_dir(d)
    marker = (d / DEMO_MARKER).read_bytes()
    (d / "warehouse" / "demo.db" / "orders").mkdir(parents=True)
    (d / "warehouse" / "demo.db" / "orders" / "snapshot-1").write_text("{}")
    (d / "expire-plan.parquet").write_bytes(b"PAR1")
    (d / "journal.duckdb").write_bytes(b"journal")
    (d / "journal.duckdb.wal").write_bytes(b"wal")
    (d / "notes.txt").write_text("keep me\n")
    (d / "results").mkdir()
    (d / "results" / "run-1.json").write_text("{}")

    prepare_demo_dir(d)

    assert snapshot_tree(d) == {
        DEMO_MARKER: marker, "notes.txt": b"keep me\n", "results": None, "results/run-1.json": b"{}",
    }


@pytest.mark.parametrize("name", DEMO_OUTPUTS)
def test_a_demo_output_that_is_a_symlink_is_refused(tmp_path, name):
    elsewhere = users_directory(tmp_path / "elsewhere")
    d = tmp_path / "demo"
    prepare_demo_dir(d)
    (d / name).symlink_to(elsewhere / ("warehouse" if name == "warehouse" else "notes.txt"))
    before_elsewhere, before_demo = snapshot_tree(elsewhere), snapshot_tree(d)

    with pytest.raises(ForeignDirectory, match=rf"^{d}: {name} in it was not written by 'lakesweep demo'; "
                                               "nothing was removed$"):
        prepare_demo_dir(d)

    assert snapshot_tree(elsewhere) == before_elsewhere
    assert snapshot_tree(d) == before_demo


def test_a_directory_where_the_demo_writes_a_file_is_refused(tmp_path):
    d = tmp_path / "demo"
    prepare_demo_dir(d)
    (d / "expire-plan.parquet").mkdir()
    (d / "expire-plan.parquet" / "part-0.parquet").write_bytes(b"PAR1")
    before = snapshot_tree(d)

    with pytest.raises(ForeignDirectory, match="expire-plan.parquet in it was not written by 'lakesweep demo'"):
        prepare_demo_dir(d)

    assert snapshot_tree(d) == before


def _demo(directory):
    proc = subprocess.run(
        [sys.executable, "-m", "lakesweep.cli", "demo", "--dir", str(directory), "--output", "json"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=REPO), timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_runs_again_in_its_own_directory_and_keeps_other_files(tmp_path):
    d = tmp_path / "demo"
    first = _demo(d)
    (d / "notes.txt").write_text("keep me\n")

    second = _demo(d)

    assert (d / "notes.txt").read_text() == "keep me\n"
    assert sorted(os.listdir(d)) == sorted([DEMO_MARKER, "notes.txt", "warehouse", "expire-plan.parquet",
                                            "journal.duckdb", "journal.duckdb.lock", "journal.duckdb.readers",
                                            "iceberg", "iceberg-expire-plan.parquet", "iceberg-rewrite-plan.parquet"])
    for doc in (first, second):
        assert doc["after"] == {"earliest": 6, "latest": 8}
        assert doc["apply"]["state"] == "COMPLETED" and doc["apply"]["counts"]["DELETED"] == 14
        assert len(doc["journal_plans"]) == 1
    assert second["plan"]["range"] == first["plan"]["range"] == {"begin": 1, "end": 6}
    for doc in (first, second):  # the Iceberg chapter: 9 snapshots, 6 expired; 7 manifests rewritten into 1
        ice = doc["iceberg"]
        assert len(ice["expire"]["plan"]["scope"]["expired"]) == 6 and ice["expire"]["apply"]["state"] == "COMPLETED"
        assert ice["rewrite-manifests"]["apply"]["counts"]["COMMITTED"] == 7
        assert ice["after"] == {"snapshots": 4, "manifests": 1}
