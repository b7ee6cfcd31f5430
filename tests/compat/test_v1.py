"""Files written by lakesweep's first plan format (version 1) and journal, kept in ``tests/compat/v1/``:

* ``table/``: the demo table as pypaimon wrote it (8 commits, an overwrite, the tag ``release-1`` at 2), before
  any expiry, to be copied to ``/tmp/lakesweep-fixture-v1/warehouse/demo.db/orders`` (a plan names its table's
  location and the location is part of the plan id);
* ``plan-v1.parquet``: ``plan expire --retain-min 3 --time-retained '0 s'`` of that table, format version 1;
* ``journal-v1.duckdb``: that plan applied on local Spark; then, after three more commits, a second plan
  refused once (a tag was added inside its range), failed once (manifest lists could not be deleted) and
  finished by ``resume``.

Later lakesweep versions must still read, show and apply the plan and read the journal.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from lakesweep.engine.plan_io import read_plan

HERE = Path(__file__).parent / "v1"
FIXTURE_ROOT = Path("/tmp/lakesweep-fixture-v1")
TABLE = FIXTURE_ROOT / "warehouse" / "demo.db" / "orders"
PLAN_ID = "29b1e3ecfeac1e10d132e8f54952444e"
SECOND_PLAN_ID = "6905de7707fc8a14a4e9e12841f38c54"
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_version_1_plan_is_read():
    plan = read_plan(str(HERE / "plan-v1.parquet"))
    assert plan.plan_id == PLAN_ID
    assert plan.format_version == 1
    assert (plan.table_location, plan.branch) == (str(TABLE), "main")
    assert (plan.begin, plan.end, plan.earliest_hint) == (1, 6, 6)
    assert [a.kind.value for a in plan.actions] == (
        ["data-file"] + ["manifest-list"] * 8 + ["snapshot"] * 5 + ["write-earliest-hint"])
    assert plan.actions[0].path.startswith("dt=2024-01-01/bucket-0/data-")
    # The fingerprint became today's requirements, with the plan's own values.
    reqs = {r.TYPE: r for r in plan.requirements}
    assert list(reqs) == ["paimon.table-identity", "paimon.schema-id", "paimon.branches", "paimon.tags-below",
                          "paimon.consumers-outside", "paimon.snapshots-present"]
    assert reqs["paimon.tags-below"].tags == {"release-1": 2} and reqs["paimon.tags-below"].end == 6
    assert reqs["paimon.snapshots-present"].snapshots == (1, 2, 3, 4, 5)
    assert sorted(reqs["paimon.snapshots-present"].pins) == [1, 2, 3, 4, 5, 6]
    assert [(p.name, p.mode.value) for p in plan.phases][:2] == [("data_files", "bulk"), ("changelog_files", "bulk")]


def test_a_version_1_plan_is_shown():
    r = run("show", HERE / "plan-v1.parquet", "--files", "--output", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["plan_id"] == PLAN_ID
    assert doc["range"] == {"begin": 1, "end": 6}
    assert doc["stats"]["summary"]["files"] == 14
    assert doc["stats"]["summary"]["bytes"] == 12086
    assert len(doc["actions"]) == 15


@pytest.fixture
def v1_table():
    """The fixture table at the location its plan names, for one test at a time."""
    FIXTURE_ROOT.mkdir(exist_ok=True)
    with open(str(FIXTURE_ROOT) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if TABLE.parent.exists():
            shutil.rmtree(TABLE.parent)
        shutil.copytree(HERE / "table", TABLE, symlinks=True)
        try:
            yield TABLE
        finally:
            shutil.rmtree(FIXTURE_ROOT / "warehouse", ignore_errors=True)


@pytest.mark.spark
def test_a_version_1_plan_is_applied(v1_table, tmp_path):
    before = files_under(v1_table)
    plan = read_plan(str(HERE / "plan-v1.parquet"))
    journal = tmp_path / "journal.duckdb"
    r = run("apply", HERE / "plan-v1.parquet", "--journal", journal, "--master", "local[1]", "--output", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["counts"]["DELETED"] == 14 and doc["counts"]["FAILED"] == 0
    deleted = {a.path for a in plan.actions if a.verb.deletes}
    assert deleted <= before
    assert "snapshot/EARLIEST" not in before  # pypaimon writes no hint; apply writes the plan's
    assert files_under(v1_table) == (before - deleted) | {"snapshot/EARLIEST"}
    assert (v1_table / "snapshot" / "EARLIEST").read_text() == "6"
    files = run("journal", "files", "--journal", journal, "--plan", PLAN_ID, "--output", "json")
    assert files.exit_code == 0, files.output
    assert sorted(row["outcome"] for row in json.loads(files.stdout)) == ["DELETED"] * 14 + ["WRITTEN"]


@pytest.fixture
def v1_journal(tmp_path):
    copy = tmp_path / "journal-v1.duckdb"
    shutil.copy(HERE / "journal-v1.duckdb", copy)
    os.chmod(copy, 0o644)
    return copy


def test_a_version_1_journal_lists_its_plans(v1_journal):
    r = run("journal", "plans", "--journal", v1_journal, "--output", "json")
    assert r.exit_code == 0, r.output
    plans = {p["plan_id"]: p for p in json.loads(r.stdout)}
    assert set(plans) == {PLAN_ID, SECOND_PLAN_ID}
    first, second = plans[PLAN_ID], plans[SECOND_PLAN_ID]
    assert (first["state"], first["applies"], first["deleted"], first["written"]) == ("APPLIED", 1, 14, 1)
    assert (second["state"], second["applies"], second["deleted"], second["failed"]) == ("APPLIED", 2, 12, 0)
    assert first["table"] == second["table"] == str(TABLE)


def test_a_version_1_journal_answers_file_queries(v1_journal):
    r = run("journal", "files", "--journal", v1_journal, "--plan", SECOND_PLAN_ID, "--outcome", "FAILED",
            "--output", "json")
    assert r.exit_code == 0, r.output
    failed = json.loads(r.stdout)
    assert len(failed) == 8 and all(row["path"].startswith("manifest/manifest-list-") for row in failed)
    assert all("Permission denied" in row["error"] for row in failed)
    q = run("journal", "query", "--journal", v1_journal, "--output", "json",
            "SELECT plan_id, outcome, count(*) AS n FROM file_audit GROUP BY ALL ORDER BY ALL")
    assert q.exit_code == 0, q.output
    assert [(row["plan_id"], row["outcome"], row["n"]) for row in json.loads(q.stdout)] == [
        (PLAN_ID, "DELETED", 14), (PLAN_ID, "WRITTEN", 1),
        (SECOND_PLAN_ID, "DELETED", 12), (SECOND_PLAN_ID, "FAILED", 8), (SECOND_PLAN_ID, "WRITTEN", 1),
    ]


def test_a_version_1_journal_replays_every_apply(v1_journal):
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.journal.projection import RunStatus, project

    with DuckDBRecorder(str(v1_journal)) as recorder:
        first = project(recorder.events(plan_id=PLAN_ID))
        second = project(recorder.events(plan_id=SECOND_PLAN_ID))
        refusals = [e for e in recorder.events(plan_id=SECOND_PLAN_ID) if type(e).__name__ == "ApplyRefused"]
    assert [r.state for r in first.values()] == [RunStatus.COMPLETED]
    assert sorted(r.state.value for r in second.values()) == sorted([RunStatus.FAILED.value,
                                                                     RunStatus.COMPLETED.value])
    assert len(refusals) == 1 and "tag 'audit-1' was added at snapshot 7" in refusals[0].reason
