"""A wrong orphans plan on a pypaimon table that a writer is writing: its uncommitted files are put in
quarantine, the writer commits, pypaimon's reader fails; verify names the quarantine and the restore command,
``restore`` brings the table back whole and ``journal plans`` counts what went and came back."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.test_restore import quarantine_apply
from tests.applier.test_safety import SCHEMA, Lake
from tests.planner.test_orphans import plan as plan_orphans_of


def run(*args, code=0):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == code, r.output
    return r


@pytest.fixture
def broken(tmp_path):
    """A table whose last commit names data files an orphans plan quarantined before the commit."""
    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    lake.commit("b")
    builder = lake.table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"id": 10, "dt": "a"}, {"id": 11, "dt": "c"}], schema=SCHEMA))
    messages = write.prepare_commit()  # written, not committed: files nothing references yet
    time.sleep(1.2)
    plan = plan_orphans_of(lake.root, now=int(time.time() * 1000), older_than="1 s", force=True)
    uncommitted = sorted(a.path for a in plan.actions)
    assert len(uncommitted) == 2 and all(p.endswith(".parquet") for p in uncommitted)
    journal = tmp_path / "j.duckdb"
    with DuckDBRecorder(str(journal)) as recorder:
        went = quarantine_apply(plan, recorder, lake.root)
    commit.commit(messages)
    write.close()
    commit.close()
    yield lake, plan, journal, went


def test_wrong_plan_quarantined_then_restored_reads_every_row_again(broken):
    lake, plan, journal, went = broken
    with pytest.raises(Exception):  # pypaimon's reader: a data file of the latest snapshot is not there
        lake.rows()
    out = run("verify", lake.root, "--journal", journal, code=1).stdout
    assert f"In quarantine: 2 of the missing file(s), put aside by plan {plan.plan_id}; bring them back with: " \
           f"lakesweep restore {plan.plan_id} --journal {journal}" in " ".join(out.split())
    doc = json.loads(run("verify", lake.root, "--journal", journal, "--output", "json", code=1).stdout)
    assert sorted((q["path"], q["plan_id"], q["where"]) for q in doc["in_quarantine"]) == sorted(
        (f"{lake.root}/{p}", plan.plan_id, w) for p, w in went.items())
    assert doc["restore_commands"] == [f"lakesweep restore {plan.plan_id} --journal {journal}"]

    restored = json.loads(run("restore", plan.plan_id, "--journal", journal, "--master", "local[1]", "--output",
                              "json").stdout)
    assert (restored["state"], restored["restored"], restored["left_in_quarantine"]) == ("COMPLETED", 2, 0)
    assert lake.rows() == [0, 1, 10, 11]
    whole = json.loads(run("verify", lake.root, "--journal", journal, "--output", "json").stdout)
    assert (whole["whole"], whole["in_quarantine"], whole["restore_commands"]) == (True, [], [])
    rows = json.loads(run("journal", "plans", "--journal", journal, "--output", "json").stdout)
    row = next(r for r in rows if r["plan_id"] == plan.plan_id)
    size = sum(a.size for a in plan.actions)
    assert (row["quarantined"], row["quarantined_bytes"], row["restored"], row["restored_bytes"]) == (0, 0, 2, size)


def test_journal_plans_counts_files_in_quarantine(broken):
    lake, plan, journal, _ = broken
    rows = json.loads(run("journal", "plans", "--journal", journal, "--output", "json").stdout)
    row = next(r for r in rows if r["plan_id"] == plan.plan_id)
    size = sum(a.size for a in plan.actions)
    assert (row["quarantined"], row["quarantined_bytes"], row["restored"], row["restored_bytes"]) == (2, size, 0, 0)
    text = " ".join(run("journal", "plans", "--journal", journal).stdout.split())
    assert "2 file(s) in quarantine" in text and f"'lakesweep restore {plan.plan_id}' brings them back" in text
