"""The lakesweep command as a user runs it: exit codes, messages, JSON for scripts."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from tests.support import pypaimon_tables as pt

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def table(tmp_path):
    return pt.write_append_table(str(tmp_path / "wh"))


def test_inspect_json_describes_the_table(table):
    r = run("inspect", table.path, "--output", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [s["id"] for s in doc["snapshots"]] == table.snapshots
    assert doc["latest"] == table.latest
    assert {c["id"]: c["next_snapshot"] for c in doc["consumers"]} == table.consumers


def test_inspect_text_names_tags_and_reclaimable_files(table):
    r = run("inspect", table.path)
    assert r.exit_code == 0, r.output
    assert "t_early→2" in r.stdout and "held only by older snapshots" in r.stdout


def test_inspect_of_a_non_table_exits_1_naming_the_path(tmp_path):
    r = run("inspect", tmp_path)
    assert r.exit_code == 1
    assert f"{tmp_path}/schema: schema (is this a Paimon table?) not found" in r.stderr


def test_plan_expire_then_show(table, tmp_path):
    out = tmp_path / "plan.parquet"
    r = run("plan", "expire", table.path, "--out", out, "--retain-min", 1, "--time-retained", "0 s",
            "--now", "2100-01-01T00:00:00Z", "--output", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    # the consumer c1 (next snapshot 4) bounds the range
    assert doc["range"] == {"begin": 1, "end": table.consumers["c1"]}
    assert doc["stats"]["bound"] == "consumer"
    assert doc["options"]["snapshot.num-retained.min"] == {"source": "flag", "value": 1}
    assert doc["options"]["snapshot.expire.limit"] == {"source": "default", "value": 50}
    shown = run("show", out, "--files", "--output", "json")
    assert shown.exit_code == 0, shown.output
    sdoc = json.loads(shown.stdout)
    assert sdoc["plan_id"] == doc["plan_id"]
    assert [a["path"] for a in sdoc["actions"] if a["kind"] == "snapshot"] == [
        f"snapshot/snapshot-{i}" for i in range(1, table.consumers["c1"])
    ]
    text = run("show", out)
    assert f"expires snapshots [1, {table.consumers['c1']})" in text.stdout


def test_same_inputs_give_the_same_plan_file(table, tmp_path):
    args = ["plan", "expire", table.path, "--retain-min", 2, "--time-retained", "0 s", "--now", 4102444800000]
    assert run(*args, "--out", tmp_path / "a.parquet").exit_code == 0
    assert run(*args, "--out", tmp_path / "b.parquet").exit_code == 0
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_nothing_to_expire_is_said_plainly(table, tmp_path):
    r = run("plan", "expire", table.path, "--out", tmp_path / "p.parquet", "--retain-min", 100,
            "--retain-max", 100)
    assert r.exit_code == 0, r.output
    assert "Nothing to expire" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--retain-min", "0"], "retain-min is 0: at least 1 snapshot must be retained"),
        (["--time-retained", "5 fortnights"], "unknown time unit 'fortnights'"),
        (["--now", "yesterday"], "'yesterday' is neither epoch milliseconds nor an ISO-8601 time"),
        (["--option", "snapshot.bogus=1"], "--option snapshot.bogus is not an expire option"),
        (["--time-rule", "sometimes"], "time rule 'sometimes' is unknown"),
    ],
)
def test_bad_input_exits_1_with_a_clear_message(table, tmp_path, args, message):
    out = tmp_path / "p.parquet"
    r = run("plan", "expire", table.path, "--out", out, *args)
    assert r.exit_code == 1, r.output
    assert message in r.stderr
    assert not out.exists()


def test_corrupt_consumer_fails_closed_naming_the_file(table, tmp_path):
    path = os.path.join(table.path, "consumer", "consumer-c1")
    with open(path, "w") as f:
        f.write("{")
    r = run("plan", "expire", table.path, "--out", tmp_path / "p.parquet", "--retain-min", 1)
    assert r.exit_code == 1
    assert f"{path}: malformed consumer JSON" in r.stderr


def test_show_refuses_a_non_plan(tmp_path):
    bad = tmp_path / "x.parquet"
    bad.write_bytes(b"nope")
    r = run("show", bad)
    assert r.exit_code == 1 and "is not a lakesweep plan" in r.stderr


@pytest.mark.spark
def test_console_script_runs_the_demo_end_to_end(tmp_path):
    env = dict(os.environ)
    r = subprocess.run(
        [sys.executable, "-m", "lakesweep.cli", "demo", "--dir", str(tmp_path / "demo"), "--output", "json"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    # Spark's start-up notices (printed by its JVM whatever the log configuration) do not reach the user
    for notice in ("Using incubator modules", 'Setting default log level to "WARN"', "sc.setLogLevel",
                   "For SparkR, use setLogLevel"):
        assert notice not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["plan"]["range"] == {"begin": 1, "end": 6}
    kinds = doc["plan"]["stats"]["summary"]["by_kind"]
    assert kinds["data-file"]["count"] == 1 and kinds["snapshot"]["count"] == 5
    assert doc["plan"]["stats"]["protected_by_tags"] == 1
    assert doc["apply"]["state"] == "COMPLETED" and doc["apply"]["counts"]["DELETED"] == 14
    assert doc["after"] == {"earliest": 6, "latest": 8}
    assert [f["outcome"] for f in doc["deleted_files"]] == ["DELETED"]
    assert [p["state"] for p in doc["journal_plans"]] == ["APPLIED"]


def _plan_id(*args):
    r = run(*args, "--output", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["plan_id"]


def test_paimon_older_than_is_time_retained_back_from_now_as_paimons_procedure_reads_it(table, tmp_path):
    base = ["plan", "expire", table.path, "--retain-min", 1, "--now", "2100-01-01T00:00:00Z"]
    by_retained = _plan_id(*base, "--out", tmp_path / "a.parquet", "--time-retained", "2 h")
    assert _plan_id(*base, "--out", tmp_path / "b.parquet", "--older-than", "2 h") == by_retained
    assert _plan_id(*base, "--out", tmp_path / "c.parquet", "--older-than", "2099-12-31T22:00:00Z") == by_retained


@pytest.mark.parametrize("args, message", [
    (["--older-than", "1 d", "--time-retained", "1 h"], "--older-than and --time-retained say the same thing"),
    (["--older-than", "2100-01-02T00:00:00Z"], "--older-than 2100-01-02T00:00:00Z is after the plan's now"),
])
def test_paimon_older_than_refuses_what_cannot_be_meant(table, tmp_path, args, message):
    out = tmp_path / "p.parquet"
    r = run("plan", "expire", table.path, "--out", out, "--now", "2100-01-01T00:00:00Z", *args)
    assert r.exit_code == 1, r.output
    assert message in r.stderr
    assert not out.exists()
