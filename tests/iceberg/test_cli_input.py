"""Bad input to the Iceberg plan commands: refused with a reason the user can act on (exit 1), nothing written."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from tests.iceberg.conftest import CATALOG, write_history


@pytest.fixture
def out(tmp_path):
    return str(tmp_path / "p.parquet")


@pytest.mark.parametrize("args, message", [
    (["plan", "expire", "ns.t", "--catalog", "nosuch"], "Iceberg catalog 'nosuch' cannot be loaded"),
    (["plan", "expire", "ns.missing", "--catalog", CATALOG], "Iceberg table ns.missing cannot be loaded"),
    (["plan", "expire", "t", "--catalog", CATALOG], "must be named namespace.table"),
    (["plan", "expire", "ns.t", "--catalog", CATALOG, "--retain-last", "0"], "--retain-last must be at least 1"),
    (["plan", "expire", "ns.t", "--catalog", CATALOG, "--older-than", "soon"], "neither epoch milliseconds"),
    (["plan", "expire", "ns.t", "--catalog", CATALOG, "--older-than", "1 d", "--snapshot-retention-hours", "2"],
     "give one of them"),
    (["plan", "expire", "ns.t", "--catalog", CATALOG, "--retain-min", "3"], "--retain-min is an option of Paimon"),
    (["plan", "expire", "ns.t", "--catalog", CATALOG, "--max-commit-retries", "-1"], "at least 0"),
    (["plan", "orphans", "ns.t", "--catalog", CATALOG, "--inventory", "x.parquet"], "--inventory is an option of Paimon"),
    (["plan", "rewrite-manifests", "ns.t", "--catalog", CATALOG, "--min-manifests", "0"], "at least 1"),
    (["plan", "expire", "/tmp", "--retain-last", "2"], "--retain-last is an option of Iceberg tables"),
])
def test_bad_input_is_refused_and_no_plan_is_written(lake, out, args, message):
    write_history(lake, appends=2, churn=False)
    r = CliRunner().invoke(app, [*args, "--out", out])
    assert r.exit_code == 1, r.output
    assert message in " ".join(r.output.split()), r.output
    assert not os.path.exists(out)


def test_a_plan_inside_the_table_location_is_refused(lake, tmp_path):
    t = write_history(lake, appends=2, churn=False)
    inside = t.metadata.location.removeprefix("file://") + "/metadata/plan.parquet"
    r = CliRunner().invoke(app, ["plan", "expire", "ns.t", "--catalog", CATALOG, "--out", inside])
    assert r.exit_code == 1 and "inside the table" in r.output and not os.path.exists(inside)


def test_show_and_dry_run_of_an_iceberg_plan(lake, out, tmp_path):
    write_history(lake)
    runner = CliRunner()
    r = runner.invoke(app, ["plan", "expire", "ns.t", "--catalog", CATALOG, "--out", out, "--older-than", "0 s",
                            "--retain-last", "2"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["show", out, "-o", "json"])
    assert r.exit_code == 0
    import json

    doc = json.loads(r.stdout)
    assert doc["format"] == "iceberg" and len(doc["expired_snapshots"]) == 10 and doc["removed_refs"] == []
    r = runner.invoke(app, ["apply", out, "--dry-run", "--journal", str(tmp_path / "j.duckdb"), "-o", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["state"] == "DRY_RUN" and len(lake.table().metadata.snapshots) == 12


def test_verify_an_iceberg_table_finds_a_missing_data_file(lake):
    import json

    from lakesweep.engine.iceberg.table import canonical

    t = write_history(lake)
    runner = CliRunner()
    r = runner.invoke(app, ["verify", "ns.t", "--catalog", CATALOG, "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["whole"] and doc["files_checked"] > 30
    head = t.current_snapshot()
    victim = canonical(next(e.data_file.file_path for m in head.manifests(t.io) for e in m.fetch_manifest_entry(t.io)))
    os.remove(victim)
    r = runner.invoke(app, ["verify", "ns.t", "--catalog", CATALOG, "-o", "json"])
    assert r.exit_code == 1
    [problem] = json.loads(r.stdout)["problems"]
    assert problem["path"] == victim and problem["kind"] == "missing" and problem["needed_by"].startswith("snapshot ")


@pytest.mark.parametrize("command", [["plan", "expire", "ns.t", "--out", "OUT"], ["maintain", "--journal", "J"]])
def test_a_sql_catalog_whose_database_cannot_be_opened_is_refused(tmp_path, monkeypatch, command):
    # The catalog's SQLite "file" is a directory: SQLAlchemy cannot open it.
    for key, value in {"URI": f"sqlite:///{tmp_path}", "WAREHOUSE": f"file://{tmp_path}/wh", "TYPE": "sql"}.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__BROKEN__{key}", value)
    args = [str(tmp_path / "p.parquet") if a == "OUT" else str(tmp_path / "j.duckdb") if a == "J" else a
            for a in command]
    r = CliRunner().invoke(app, [*args, "--catalog", "broken"])
    assert r.exit_code == 1, r.output
    [line] = r.stderr.splitlines()
    assert line.startswith("error: Iceberg catalog 'broken' cannot be loaded: (sqlite3.OperationalError) unable to "
                           "open database file "), line
    assert line.endswith("Configure it as pyiceberg does (.pyiceberg.yaml, or PYICEBERG_CATALOG__BROKEN__URI and "
                         "friends)"), line
    assert not os.path.exists(tmp_path / "p.parquet")


@pytest.mark.parametrize("kind, message", [
    ("expire", r"error: --now 2099-01-01 00:00:00Z is after the current time \S+ \S+Z: apply would refuse the plan "
               r"until then\. Plan snapshot expiry as of the current time or an earlier one"),
    ("orphans", r"error: --now: the plan was made as of 2099-01-01 00:00:00Z, after the current time \S+ \S+Z: files "
                r"it found older than its --older-than may be younger, and a writer may not have committed them yet\. "
                r"Plan orphans as of the current time or an earlier one"),
])
def test_a_plan_as_of_a_future_now_is_refused_at_once(lake, out, kind, message):
    import re

    write_history(lake, appends=2, churn=False)
    r = CliRunner().invoke(app, ["plan", kind, "ns.t", "--catalog", CATALOG, "--now", "2099-01-01T00:00:00Z",
                                 "--out", out])
    assert r.exit_code == 1, r.output
    [line] = r.stderr.splitlines()
    assert re.fullmatch(message, line), line
    assert not os.path.exists(out)
