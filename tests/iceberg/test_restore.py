"""Restore end to end on pyiceberg tables: a wrong orphans plan applied with quarantine while a writer has
data files it has not committed; its commit makes pyiceberg's scan fail; ``restore`` brings every row back and
``verify`` passes. An expiry's commit is not undone by a restore, which says so and names the way back."""

from __future__ import annotations

import collections
import json
import time

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.applier.restore import commit_note
from lakesweep.cli.main import app
from lakesweep.engine.quarantine import QuarantineSpec
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.queries import in_quarantine
from lakesweep.planner.iceberg.orphans import resolve_orphan_options
from lakesweep.planner.kinds import plan_kind
from tests.iceberg.conftest import CATALOG, SCHEMA, SPEC, batch, missing, rows_by_snapshot, write_history
from tests.iceberg.test_expire import plan as plan_expire


def run(*args, code=0):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == code, r.output
    return r


def rows(table) -> collections.Counter:
    data = table.scan().to_arrow()
    return collections.Counter(zip(data.column("id").to_pylist(), data.column("region").to_pylist()))


def quarantine_apply(plan, journal):
    with DuckDBRecorder(str(journal)) as recorder:
        return apply_plan(plan, recorder, executor=DriverExecutor(), quarantine=QuarantineSpec(plan.plan_id))


def test_wrong_orphans_plan_quarantined_then_restored_reads_every_row(lake, tmp_path):
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    t.append(batch(0))
    t.append(batch(10))
    t = lake.table()
    pending = list(_dataframe_to_data_files(t.metadata, batch(100), t.io))  # written, not committed
    expected = rows(t) + collections.Counter(zip(batch(100).column("id").to_pylist(),
                                                 batch(100).column("region").to_pylist()))
    time.sleep(1.2)
    plan = plan_kind("orphans", "iceberg").read_and_plan(
        lake.view(), now_ms=int(time.time() * 1000), options=resolve_orphan_options({}, older_than="1 s", force=True))
    root = t.metadata.location.removeprefix("file://")
    assert sorted(a.path for a in plan.actions) == sorted(f.file_path.removeprefix(f"file://{root}/") for f in pending)
    journal = tmp_path / "j.duckdb"
    report = quarantine_apply(plan, journal)
    assert (report.state, report.counts["QUARANTINED"]) == ("COMPLETED", len(pending))
    with lake.table().transaction() as tx:  # the writer commits the files it wrote
        with tx.update_snapshot().fast_append() as append:
            for f in pending:
                append.append_data_file(f)
    with pytest.raises(FileNotFoundError):
        rows(lake.table())
    doc = json.loads(run("verify", "ns.t", "--catalog", CATALOG, "--journal", journal, "--output", "json",
                         code=1).stdout)
    with DuckDBRecorder(str(journal), read_only=True) as recorder:
        went = {r.path: r.moved_to for r in in_quarantine(recorder, plan.plan_id).values()}
    assert sorted((q["path"], q["plan_id"], q["where"]) for q in doc["in_quarantine"]) == sorted(
        (f"{root}/{p}", plan.plan_id, w) for p, w in went.items())
    assert doc["restore_commands"] == [f"lakesweep restore {plan.plan_id} --journal {journal}"]

    done = json.loads(run("restore", plan.plan_id, "--journal", journal, "--master", "local[1]", "--output",
                          "json").stdout)
    assert (done["state"], done["restored"], done["left_in_quarantine"], done["commit_note"]) == (
        "COMPLETED", len(pending), 0, None)
    assert rows(lake.table()) == expected and missing(lake.table()) == set()
    whole = json.loads(run("verify", "ns.t", "--catalog", CATALOG, "--journal", journal, "--output", "json").stdout)
    assert (whole["whole"], whole["in_quarantine"]) == (True, [])


def test_restored_expiry_says_its_commit_stays_and_names_the_rollback(lake, tmp_path):
    t = write_history(lake, appends=4, churn=False)
    current = t.current_snapshot().snapshot_id
    before = rows_by_snapshot(t)
    plan = plan_expire(lake.view(), older_than="0 s", retain_last=1)
    expired = list(plan.scope.expired)
    assert len(expired) == 3
    journal = tmp_path / "j.duckdb"
    assert quarantine_apply(plan, journal).state == "COMPLETED"
    done = json.loads(run("restore", plan.plan_id, "--journal", journal, "--master", "local[1]", "--output",
                          "json").stdout)
    assert done["state"] == "COMPLETED" and done["restored"] > 0
    ids = ", ".join(map(str, expired))
    assert done["commit_note"] == commit_note(plan) == (
        f"plan {plan.plan_id} (expire) committed new table metadata; restoring its files does not undo that commit. "
        f"The commit removed snapshot(s) {ids} from the metadata. Iceberg's way back: roll the table back to a "
        f"snapshot still in its metadata whose files are back, e.g. CALL <catalog>.system.rollback_to_snapshot("
        f"'ns.t', {current}) or CALL <catalog>.system.set_current_snapshot('ns.t', {current}) (pyiceberg: "
        f"table.manage_snapshots().rollback_to_snapshot({current}).commit()); an expired snapshot comes back only by "
        "registering the metadata file written before the expiry (its metadata log names it).")
    after = lake.table()
    assert sorted(s.snapshot_id for s in after.metadata.snapshots) == [current]
    assert rows_by_snapshot(after) == {current: before[current]} and missing(after) == set()
    text = run("restore", plan.plan_id, "--journal", journal, code=1)
    assert "has no file in quarantine" in " ".join(text.stderr.split())
