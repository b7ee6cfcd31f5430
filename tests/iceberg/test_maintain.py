"""``lakesweep maintain`` over a pyiceberg SQL catalog and a Paimon warehouse: scope filters, the canonical
order, detection's skip messages, thresholds under table properties, a failure that does not stop the run,
dry runs, a busy table, the journal of results, and --every stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor
from lakesweep.maintain import Maintenance, Thresholds, discover, parse_operations
from lakesweep.cli.main import app
from lakesweep.engine.errors import JournalConflict, PlanRejected
from lakesweep.journal.audit import list_maintenance, list_plans
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import MaintenanceResult, run_stream
from tests.applier.conftest import REPO
from tests.iceberg.conftest import CATALOG, rows_by_snapshot, write_history
from tests.support.processes import LAKESWEEP

pytest.importorskip("pyiceberg")


@pytest.fixture
def tables(lake):
    write_history(lake, "ns.orders")
    write_history(lake, "ns.items", appends=3, churn=False)
    lake.catalog.create_namespace("ops")
    write_history(lake, "ops.events", properties={"gc.enabled": "false"})
    return lake


def maintain(tmp_path, **kw) -> tuple[Maintenance, object]:
    th = kw.pop("thresholds", Thresholds(max_snapshots_to_keep=2, snapshot_retention_hours=0,
                                         min_manifests_to_rewrite=2))
    rec = DuckDBRecorder(tmp_path / "j.duckdb")
    run = Maintenance(rec, str(tmp_path / "plans"), catalog=kw.pop("catalog", CATALOG), thresholds=th,
                      executor=DriverExecutor(), **kw)
    return run, rec


def test_operations_run_in_canonical_order_whatever_the_order_given():
    assert parse_operations("rewrite_manifests,expire_snapshots,remove_orphans") == \
        ("expire", "orphans", "rewrite-manifests")
    assert parse_operations("all") == ("compact", "expire", "orphans", "rewrite-manifests", "partitions", "purge")
    with pytest.raises(PlanRejected, match="unknown operation 'vacuum'"):
        parse_operations("expire,vacuum")


def test_scope_filters_are_comma_separated_wildcards(tables):
    names = lambda **f: [r.name for r in discover(catalog=CATALOG, warehouse=None, **f)]  # noqa: E731
    assert names() == ["ns.items", "ns.orders", "ops.events"]
    assert names(namespace_filter="ns") == ["ns.items", "ns.orders"]
    assert names(table_filter="ord*, ev?nts") == ["ns.orders", "ops.events"]


def test_a_run_applies_in_order_records_each_result_and_goes_on_after_a_failure(tables, tmp_path):
    orders = tables.table("ns.orders")
    before = rows_by_snapshot(orders)
    head_rows = before[orders.current_snapshot().snapshot_id]
    run, rec = maintain(tmp_path, operations=parse_operations("all"))
    with rec:
        report = run.run()
        rows = list_maintenance(rec)
        plans = list_plans(rec)
    got = [(r["table"].split("/")[1], r["operation"], r["outcome"]) for r in rows]
    assert got == [
        ("ns.items", "compact", "skipped"), ("ns.items", "expire", "applied"), ("ns.items", "orphans", "skipped"),
        ("ns.items", "rewrite-manifests", "applied"),
        ("ns.orders", "compact", "applied"), ("ns.orders", "expire", "applied"), ("ns.orders", "orphans", "skipped"),
        ("ns.orders", "rewrite-manifests", "applied"),
        ("ops.events", "compact", "applied"), ("ops.events", "expire", "failed"), ("ops.events", "orphans", "failed"),
        ("ops.events", "rewrite-manifests", "applied"),
    ]
    assert report.failed == 2 and report.cycles == 1
    messages = {(r["table"].split("/")[1], r["operation"]): r["message"] for r in rows}
    assert messages[("ns.items", "compact")] == "no files eligible for compaction"  # 3 small files per region
    assert messages[("ns.orders", "compact")] == "compacted 14 files into 2 (across 2 bins)"  # us: too few after the overwrite
    assert messages[("ns.orders", "orphans")] == "no orphan files to remove"
    assert messages[("ns.orders", "rewrite-manifests")] == "rewrote 9 manifests into 1 (3 entries)"  # compacted first
    assert messages[("ns.orders", "expire")].startswith("expired 11 snapshot(s), deleted ")  # compaction added one
    assert "gc.enabled=false" in messages[("ops.events", "expire")]
    assert sum(p["state"] == "APPLIED" for p in plans) == 7
    with DuckDBRecorder(tmp_path / "j.duckdb", read_only=True) as rec:  # the run's results, in its own stream
        assert [e.to_payload() for e in rec.events(plan_id=run_stream(report.run_id))] == rows
        assert not [e for p in plans for e in rec.events(plan_id=p["plan_id"]) if isinstance(e, MaintenanceResult)]
    after = tables.table("ns.orders")
    kept = {s.snapshot_id for s in after.metadata.snapshots}
    assert {k: v for k, v in rows_by_snapshot(after).items() if k in before} == {k: before[k] for k in kept if k in before}
    assert rows_by_snapshot(after)[after.current_snapshot().snapshot_id] == head_rows  # compacted, rewritten: same rows
    assert len([m for m in after.current_snapshot().manifests(after.io) if m.content == 0]) == 1


def test_detection_skips_with_the_workers_messages(tables, tmp_path):
    run, rec = maintain(tmp_path, table_filter="items", operations=("compact", "expire", "rewrite-manifests"),
                        thresholds=Thresholds(max_snapshots_to_keep=5, snapshot_retention_hours=0,
                                              min_manifests_to_rewrite=5))
    with rec:
        run.run()
        rows = list_maintenance(rec)
    assert [(r["operation"], r["outcome"], r["message"]) for r in rows] == [
        ("compact", "skipped", "no files eligible for compaction"),  # 3 small files per region, below 5
        ("expire", "skipped", "no snapshot to expire (3 snapshot(s), retention kept them all)"),
        ("rewrite-manifests", "skipped", "only 3 data manifests, below threshold of 5")]
    assert all(r["plan_id"] is None for r in rows)


def test_a_run_id_the_journal_already_holds_is_refused_before_anything_runs(tables, tmp_path):
    run, rec = maintain(tmp_path, table_filter="items", operations=("rewrite-manifests",), run_id="nightly1")
    with rec:
        run.run()
        again = Maintenance(rec, str(tmp_path / "plans"), catalog=CATALOG, executor=DriverExecutor(), run_id="nightly1")
        with pytest.raises(JournalConflict, match="^maintain run nightly1 is already in the journal; give this run "
                                                  "another id$"):
            again.run()
        assert [(r["table"], r["outcome"]) for r in list_maintenance(rec)] == [("iceberg:lsice/ns.items", "applied")]


def test_a_tables_own_retention_property_wins_over_the_threshold(lake, tmp_path):
    write_history(lake, "ns.keep", properties={"history.expire.min-snapshots-to-keep": "6"})
    run, rec = maintain(tmp_path, operations=("expire",))
    with rec:
        run.run()
    assert len(lake.table("ns.keep").metadata.snapshots) == 6


def test_a_dry_run_writes_every_plan_and_applies_nothing(tables, tmp_path):
    n = {t: len(tables.table(t).metadata.snapshots) for t in ("ns.orders", "ns.items")}
    run, rec = maintain(tmp_path, namespace_filter="ns", operations=("expire", "rewrite-manifests"), dry_run=True)
    with rec:
        run.run()
        rows = list_maintenance(rec)
        assert list_plans(rec) == []
    assert [r["outcome"] for r in rows] == ["planned"] * 4
    assert all(os.path.isfile(r["plan_file"]) for r in rows)
    assert {t: len(tables.table(t).metadata.snapshots) for t in n} == n


@pytest.mark.spark
@pytest.mark.slow
def test_a_table_with_an_unfinished_apply_is_not_picked_up_again(tables, tmp_path):
    from lakesweep.planner.kinds import plan_kind

    from lakesweep.engine.iceberg.table import IcebergTable
    from lakesweep.engine.plan_io import write_plan

    view = IcebergTable(CATALOG, "ns.items")
    entry = plan_kind("expire", "iceberg")
    p = entry.read_and_plan(view, now_ms=int(time.time() * 1000), options=entry.resolve_options(view.options, older_than="0 s"))
    plan_file = str(tmp_path / "p.parquet")
    write_plan(p, plan_file)
    env = dict(os.environ, LAKESWEEP_TEST_CRASH="before-journal:1", PYTHONPATH=REPO)
    proc = subprocess.run([*LAKESWEEP, "apply", plan_file, "--journal", str(tmp_path / "j.duckdb"),
                           "--master", "local[1]"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run, rec = maintain(tmp_path, table_filter="items", operations=("expire", "orphans"))
    with rec:
        run.run()
        rows = list_maintenance(rec)
    assert [r["outcome"] for r in rows] == ["skipped", "skipped"]
    assert rows[0]["message"] == (f"still being worked on: an apply of plan {p.plan_id} is unfinished; finish it with "
                                  f"'lakesweep resume {p.plan_id}'")


@pytest.mark.spark
def test_the_command_reports_partial_success_and_the_journal_lists_it(tables, tmp_path):
    journal = str(tmp_path / "j.duckdb")
    r = CliRunner().invoke(app, ["maintain", "--catalog", CATALOG, "--journal", journal, "--operations",
                                 "expire_snapshots", "--snapshot-retention-hours", "0", "--max-snapshots-to-keep", "2",
                                 "--master", "local[1]", "-o", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["counts"] == {"applied": 2, "failed": 1} and doc["cycles"] == 1
    r = CliRunner().invoke(app, ["journal", "maintenance", "--journal", journal, "-o", "json"])
    assert r.exit_code == 0 and [x["outcome"] for x in json.loads(r.stdout)] == ["applied", "applied", "failed"]
    r = CliRunner().invoke(app, ["maintain", "--journal", journal])
    assert r.exit_code == 1 and "--catalog NAME (Iceberg) or --warehouse PATH (Paimon)" in r.output


@pytest.mark.slow
def test_every_repeats_until_sigterm_and_stops_cleanly(tables, tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO)
    journal = str(tmp_path / "j.duckdb")
    proc = subprocess.Popen([*LAKESWEEP, "maintain", "--catalog", CATALOG, "--journal", journal,
                             "--operations", "rewrite-manifests", "--min-manifests-to-rewrite", "2", "--every", "1 s"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.stderr.readline().startswith("cycle 3:"):
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    with DuckDBRecorder(journal) as rec:
        rows = list_maintenance(rec)
    by_cycle = {c: [(r["outcome"], r["message"]) for r in rows if r["cycle"] == c] for c in (1, 2)}
    assert [o for o, _ in by_cycle[1]] == ["applied"] * 3
    assert by_cycle[2] == [("skipped", "only 1 data manifests, below threshold of 2")] * 3  # cycle 1 rewrote them
    assert {r["cycle"] for r in rows} <= {1, 2, 3}


def test_a_paimon_warehouse_gets_expire_orphans_and_partitions(tmp_path):
    from tests.support import pypaimon_tables as pt

    w = pt.write_demo_table(str(tmp_path / "wh"))
    rec = DuckDBRecorder(tmp_path / "j.duckdb")
    run = Maintenance(rec, str(tmp_path / "plans"), warehouse=str(tmp_path / "wh"), executor=DriverExecutor())
    with rec:
        report = run.run()
        rows = list_maintenance(rec)
    assert [(r["operation"], r["outcome"]) for r in rows][-1] == ("partitions", "skipped")
    assert [r["operation"] for r in rows] == ["expire", "orphans", "partitions"]
    assert rows[-1]["message"] == "partition.expiration-time is not set"
    assert rows[0]["table"] == f"paimon:{w.path}" and report.failed == 0


def test_a_table_whose_plan_cannot_be_written_is_journaled_failed_and_the_run_goes_on(lake, tmp_path):
    for name in ("ns.a", "ns.b", "ns.c"):
        write_history(lake, name, appends=3, churn=False)
    run, rec = maintain(tmp_path, operations=("expire", "rewrite-manifests"))
    a, b, c = discover(catalog=CATALOG, warehouse=None)
    blocked = run.plan_file(b, "expire", cycle=1)
    os.makedirs(blocked)  # the plan of ns.b cannot be written there
    with rec:
        report = run.run()
        rows = list_maintenance(rec)
    assert [(r["table"], r["operation"], r["outcome"]) for r in rows] == [
        (a.label, "expire", "applied"), (a.label, "rewrite-manifests", "applied"),
        (b.label, "expire", "failed"), (b.label, "rewrite-manifests", "applied"),
        (c.label, "expire", "applied"), (c.label, "rewrite-manifests", "applied")]
    failed = rows[2]
    assert failed["message"].startswith(f"writing the plan failed: {blocked}: ")
    assert failed["plan_id"] is not None and failed["plan_file"] is None
    assert report.failed == 1
    assert len(lake.table("ns.b").metadata.snapshots) == 4  # not expired; its manifests were rewritten


def test_a_table_with_a_230_character_name_is_maintained(lake, tmp_path):
    long = "t" * 230
    write_history(lake, f"ns.{long}", appends=3, churn=False)
    write_history(lake, "ns.items", appends=3, churn=False)
    run, rec = maintain(tmp_path, operations=("expire",))
    with rec:
        report = run.run()
        rows = list_maintenance(rec)
    assert [(r["table"], r["outcome"]) for r in rows] == [(f"iceberg:{CATALOG}/ns.items", "applied"),
                                                          (f"iceberg:{CATALOG}/ns.{long}", "applied")]
    assert report.failed == 0
    assert len(os.path.basename(rows[1]["plan_file"])) < 255


def test_two_tables_whose_names_read_alike_get_their_own_plan_files(lake, tmp_path):
    from lakesweep.engine.plan_io import read_plan

    write_history(lake, "ns.t x", appends=3, churn=False)
    write_history(lake, "ns.t_x", appends=3, churn=False)
    run, rec = maintain(tmp_path, operations=("expire",), dry_run=True)
    with rec:
        run.run()
        rows = list_maintenance(rec)
    assert [r["table"] for r in rows] == [f"iceberg:{CATALOG}/ns.t x", f"iceberg:{CATALOG}/ns.t_x"]
    assert rows[0]["plan_file"] != rows[1]["plan_file"]
    for row in rows:
        plan = read_plan(row["plan_file"])
        assert plan.plan_id == row["plan_id"]
        assert plan.table_location == lake.table(row["table"].split("/", 1)[1]).metadata.location.removeprefix("file://")


def invoke_maintain(*args):
    return CliRunner().invoke(app, ["maintain", *map(str, args)])


def test_a_plans_dir_that_is_a_file_is_refused_before_anything_runs(tables, tmp_path):
    plans = tmp_path / "plans"
    plans.write_text("not a directory")
    journal = tmp_path / "j.duckdb"
    for given, blocker in ((plans, plans), (plans / "sub", plans)):
        r = invoke_maintain("--catalog", CATALOG, "--journal", journal, "--plans-dir", given, "--operations", "expire")
        assert r.exit_code == 1, r.output
        assert r.stderr == (f"error: cannot write plans under --plans-dir {given}: {blocker} is not a directory; give a "
                            "directory for the plans\n")
    assert not journal.exists()
    assert len(tables.table("ns.orders").metadata.snapshots) == 12


def test_a_warehouse_that_does_not_exist_is_refused(tmp_path):
    missing = tmp_path / "no-such-warehouse"
    r = invoke_maintain("--warehouse", missing, "--journal", tmp_path / "j.duckdb")
    assert r.exit_code == 1, r.output
    assert r.stderr == f"error: {missing}: no such warehouse directory\n"
    assert "operation(s) done" not in r.stdout


def test_min_input_files_below_two_is_refused_up_front(tables, tmp_path):
    r = invoke_maintain("--catalog", CATALOG, "--journal", tmp_path / "j.duckdb", "--min-input-files", "1")
    assert r.exit_code == 1, r.output
    assert r.stderr == "error: --min-input-files must be at least 2, got 1\n"
    assert not (tmp_path / "j.duckdb").exists()


def as_format_v3(lake, ident) -> None:
    """The table's current metadata says format version 3 (which pyiceberg reads but cannot write)."""
    location = lake.table(ident).metadata_location.removeprefix("file://")
    with open(location) as f:
        doc = json.load(f)
    doc.update({"format-version": 3, "next-row-id": 0})
    with open(location, "w") as f:
        json.dump(doc, f)


def test_an_internal_error_on_one_table_is_journaled_as_its_result_and_the_run_goes_on(lake, tmp_path, monkeypatch):
    from lakesweep.engine.iceberg.commit import IcebergCommitter

    write_history(lake, "ns.a", appends=3, churn=False)
    write_history(lake, "ns.b", appends=3, churn=False)
    commit = IcebergCommitter.commit

    def fails_on_a(self, table, actions, commit_id, **kw):  # an error that is not lakesweep's, at ns.a's commit
        if table.identifier == "ns.a":
            raise NotImplementedError("not written")
        return commit(self, table, actions, commit_id, **kw)

    monkeypatch.setattr(IcebergCommitter, "commit", fails_on_a)
    run, rec = maintain(tmp_path, operations=("expire",))
    with rec:
        report = run.run()
        rows = list_maintenance(rec)
    assert [(r["table"], r["outcome"]) for r in rows] == [(f"iceberg:{CATALOG}/ns.a", "failed"),
                                                          (f"iceberg:{CATALOG}/ns.b", "applied")]
    assert rows[0]["message"] == "apply failed: internal error: NotImplementedError: not written"
    assert rows[0]["plan_file"] is not None and report.failed == 1


def test_default_retention_is_each_engines_own_the_same_as_plan():
    from lakesweep.maintain.run import _flags
    from lakesweep.maintain.selection import TableRef
    from lakesweep.planner.iceberg.expire import resolve_expire_options
    from lakesweep.planner.kinds import plan_kind

    iceberg, paimon = TableRef("iceberg", "ns", "t"), TableRef("paimon", "db", "t")
    expire = resolve_expire_options({}, **_flags(iceberg, "expire", {}, Thresholds()))
    assert expire == resolve_expire_options({}, max_commit_retries=5)  # maintain passes its retries
    assert (expire.retain_last, expire.max_snapshot_age_ms) == (1, 5 * 24 * 3_600_000)
    for ref in (iceberg, paimon):
        orphans = plan_kind("orphans", ref.format).resolve_options({}, **_flags(ref, "orphans", {}, Thresholds()))
        assert orphans == plan_kind("orphans", ref.format).resolve_options({})
    # the worker's names still set them when given
    given = resolve_expire_options({}, **_flags(iceberg, "expire", {}, Thresholds(max_snapshots_to_keep=5,
                                                                                   snapshot_retention_hours=168)))
    assert (given.retain_last, given.max_snapshot_age_ms) == (5, 168 * 3_600_000)
