"""Text output that tells the truth at 80 columns: dry runs in the conditional, unknown sizes never summed
as zero, tables whose headers are never cut, whole paths, humanized durations and times, help screens
that print what they say, Spark's start-up notices kept out, and JSON errors."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from lakesweep.applier.apply import ApplyReport
from lakesweep.applier.spark_exec import _forward_stderr
from lakesweep.cli import render
from lakesweep.cli.humanize import duration, option_value, short_ids
from lakesweep.cli.main import app
from lakesweep.engine.timeutil import format_time_ms
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.journal.builders import ACTIONS, completed, make_plan, phase_done, record, started

runner = CliRunner()

# Every outcome an Iceberg apply can count: the widest report there is.
ICEBERG_COUNTS = {"DELETED": 6, "ALREADY_ABSENT": 1, "WRITTEN": 0, "KEPT_NOT_EMPTY": 0, "SKIPPED_REFERENCED": 2,
                  "COMMITTED": 6, "ALREADY_COMMITTED": 1, "DROPPED": 1, "FAILED": 0}
ICEBERG_PHASES = [
    {"phase": "expire_snapshots", "actions": 9, **dict.fromkeys(ICEBERG_COUNTS, 0), "COMMITTED": 6,
     "ALREADY_COMMITTED": 1, "DROPPED": 1, "SKIPPED_REFERENCED": 1, "bytes": 0, "unknown_size": 0},
    {"phase": "delete_files", "actions": 8, **dict.fromkeys(ICEBERG_COUNTS, 0), "DELETED": 6, "ALREADY_ABSENT": 1,
     "SKIPPED_REFERENCED": 1, "bytes": 1_258_291, "unknown_size": 4},
]


@pytest.fixture
def width(monkeypatch):
    """Render at a terminal width: returns a function that sets it and gives (stdout, stderr) readers."""
    def at(columns: int):
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(render, "out", Console(file=out, width=columns, highlight=False, soft_wrap=True))
        monkeypatch.setattr(render, "err", Console(file=err, width=columns, highlight=False, soft_wrap=True))
        return lambda: (out.getvalue(), err.getvalue())
    return at


def _iceberg_report(**changes) -> ApplyReport:
    return ApplyReport(plan_id="5f17e808b0a1", apply_id="a1", state="COMPLETED", counts=dict(ICEBERG_COUNTS),
                       bytes_reclaimed=1_258_291, unknown_size=4, duration_ms=2100,
                       phases=[dict(p) for p in ICEBERG_PHASES], **changes)


# -- dry runs and unknown sizes ----------------------------------------------------------------------


def test_a_dry_run_speaks_in_the_conditional(printed):
    counts = {"DELETED": 73, "ALREADY_ABSENT": 0, "COMMITTED": 15, "FAILED": 0}
    phases = [{"phase": "commit", "actions": 15, "COMMITTED": 15, "bytes": 0, "unknown_size": 0},
              {"phase": "files", "actions": 73, "DELETED": 73, "bytes": 2048, "unknown_size": 0}]
    render.render_report(ApplyReport(plan_id="p1", apply_id=None, state="DRY_RUN", dry_run=True, counts=counts,
                                     bytes_reclaimed=2048, duration_ms=300, phases=phases))
    out, _ = printed()
    assert out.splitlines()[0] == "Dry run (nothing was deleted): plan p1"
    assert "to delete" in out and "to commit" in out and "deleted" not in out.replace("nothing was deleted", "")
    assert out.splitlines()[-1] == ("  would delete 73, already absent 0, would commit 15, failed 0; would reclaim "
                                    "2.0 KiB in 0.3 s")


def test_unknown_sizes_are_counted_apart_never_summed_as_zero(printed):
    counts = {"DELETED": 15, "ALREADY_ABSENT": 0, "FAILED": 0}
    phase = {"phase": "files", "actions": 15, "DELETED": 15, "bytes": 0, "unknown_size": 15}
    report = ApplyReport(plan_id="p1", apply_id="a1", state="COMPLETED", counts=counts, bytes_reclaimed=0,
                         unknown_size=15, duration_ms=1000, phases=[phase])
    render.render_report(report)
    out, _ = printed()
    assert out.splitlines()[-1] == ("  deleted 15, already absent 0, failed 0; reclaimed an unknown number of bytes "
                                    "(15 files of unknown size) in 1.0 s")
    assert "│ unknown │" in out.replace("  ", " ")
    assert (report.to_json()["bytes_reclaimed"], report.to_json()["unknown_size_files"]) == (None, 15)
    some = dataclasses.replace(report, bytes_reclaimed=1_258_291)
    assert render.reclaimed_bytes(some.bytes_reclaimed, some.unknown_size) == "1.2 MiB (+15 files of unknown size)"
    assert (some.to_json()["bytes_reclaimed"], some.to_json()["unknown_size_files"]) == (1_258_291, 15)


# -- tables that fit -----------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [80, 100])
def test_the_widest_apply_report_cuts_no_header_at_80_and_100_columns(width, columns):
    read = width(columns)
    render.render_report(_iceberg_report())
    out, _ = read()
    assert "…" not in out
    assert all(len(line) <= columns for line in out.splitlines()[:-1])  # the summary line is prose, it may wrap
    for header in ("committed", "found", "skipped", "dropped", "absent", "deleted"):
        assert header in out


def test_the_summary_line_leaves_out_outcomes_that_did_not_happen(printed):
    counts = {"DELETED": 18, "ALREADY_ABSENT": 0, "SKIPPED_REFERENCED": 0, "COMMITTED": 3, "ALREADY_COMMITTED": 0,
              "FAILED": 0}
    render.render_report(ApplyReport(plan_id="p1", apply_id=None, state="DRY_RUN", dry_run=True, counts=counts,
                                     bytes_reclaimed=0, unknown_size=3, duration_ms=100, phases=[]))
    out, _ = printed()
    assert out.splitlines()[-1] == ("  would delete 18, already absent 0, would commit 3, failed 0; would reclaim an "
                                    "unknown number of bytes (3 files of unknown size) in 0.1 s")


def test_plan_options_wrap_at_the_terminal_indented_with_no_limit_in_words(width):
    read = width(80)
    plan = make_plan()
    from lakesweep.planner.paimon.options import OptionValue

    plan = dataclasses.replace(plan, options={"snapshot.num-retained.max": OptionValue(2**31 - 1, "default"),
                                              "partition.expiration-time": OptionValue(60_480_000_000, "table"),
                                              "max_ref_age_ms": OptionValue(2**63 - 1, "default"),
                                              "snapshot.clean-empty-directories": OptionValue(False, "default")})
    render.render_plan(plan)
    lines = read()[0].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  options: "))
    assert lines[start:start + 3] == [
        "  options: max_ref_age_ms=unlimited (default), partition.expiration-time=700 d",
        "    (table), snapshot.clean-empty-directories=false (default),",
        "    snapshot.num-retained.max=unlimited (default)"]


def test_a_report_too_wide_for_the_terminal_is_shown_one_block_per_phase(width):
    read = width(60)
    render.render_report(_iceberg_report())
    out, _ = read()
    assert out.splitlines()[1:9] == ["phase: expire_snapshots", "  actions:   9", "  deleted:   0", "  absent:    0",
                                     "  skipped:   1", "  committed: 6", "  found:     1", "  dropped:   1"]


def _journal(tmp_path, n_plans=1):
    path = str(tmp_path / "j.duckdb")
    with DuckDBRecorder(path) as rec:
        for i in range(n_plans):
            plan = make_plan(now_ms=1 + i)
            rec.record_plan(plan, recorded_ms=1_764_109_500_000)
            rec.append([started(plan)] if i == 0 else [started(plan, f"b{i}")])
            aid = "a1" if i == 0 else f"b{i}"
            rec.record_files([record(plan, a, apply_id=aid, time_ms=1_764_109_501_000) for a in plan.actions])
            rec.append([phase_done(plan, p, aid) for p in sorted({int(a.phase) for a in plan.actions})])
            rec.append([completed(plan, aid, finished_ms=1_764_109_502_000)])
    return path, make_plan()


@pytest.mark.parametrize("columns", [80, 100])
def test_journal_plans_has_short_ids_human_headers_bytes_and_times(tmp_path, width, columns):
    path, plan = _journal(tmp_path, n_plans=2)
    read = width(columns)
    r = runner.invoke(app, ["journal", "plans", "--journal", path])
    assert r.exit_code == 0, r.output
    out, _ = read()
    assert "…" not in out and "n_actions" not in out and "recorded_ms" not in out
    assert plan.plan_id not in out and plan.plan_id[:8] in out
    assert "│ 2025-11-25 22:25:02Z │" in out and "│     187 B │" in out  # a directory has no size to know
    assert out.splitlines()[-1] == "2 plan(s); 'lakesweep journal files --plan ID' lists a plan's files"
    doc = json.loads(runner.invoke(app, ["journal", "plans", "--journal", path, "-o", "json"]).stdout)
    assert plan.plan_id in [row["plan_id"] for row in doc] and doc[0]["unknown_size_files"] == 0


def test_journal_files_shows_50_then_says_how_many_more(tmp_path, width):
    path, _ = _journal(tmp_path, n_plans=6)  # 60 records
    read = width(80)
    assert runner.invoke(app, ["journal", "files", "--journal", path]).exit_code == 0
    out, _ = read()
    assert out.splitlines()[-1] == "50 file record(s); … 10 more: use --limit N or --all"
    assert "dt=1/bucket-0/data-1.parquet" in out
    read = width(80)
    runner.invoke(app, ["journal", "files", "--journal", path, "--all"])
    assert read()[0].splitlines()[-1] == "60 file record(s)"
    rows = json.loads(runner.invoke(app, ["journal", "files", "--journal", path, "-o", "json"]).stdout)
    assert len(rows) == 60  # JSON: every record unless --limit
    rows = json.loads(runner.invoke(app, ["journal", "files", "--journal", path, "-o", "json", "--limit", "3"]).stdout)
    assert len(rows) == 3


def test_journal_files_takes_the_short_plan_id_journal_plans_shows(tmp_path):
    path, plan = _journal(tmp_path, n_plans=2)
    rows = json.loads(runner.invoke(app, ["journal", "files", "--journal", path, "--plan", plan.plan_id[:8],
                                          "-o", "json"]).stdout)
    assert {r["plan_id"] for r in rows} == {plan.plan_id} and len(rows) == 10
    r = runner.invoke(app, ["journal", "files", "--journal", path, "--plan", "", "-o", "json"])
    assert r.exit_code == 1
    assert r.stderr == "error: --plan '' names 2 plans in the journal; give more of its id\n"
    r = runner.invoke(app, ["journal", "files", "--journal", path, "--plan", "zz"])
    assert r.exit_code == 0 and r.stdout == "0 file record(s)\n"


def test_show_files_prints_each_path_whole(tmp_path, width):
    long = "dt=2024-01-01/bucket-0/" + "data-" + "ce42ac07-7816-4fa5-8caa-117c05bc6fdb" * 3 + "-0.parquet"
    plan = make_plan(ACTIONS + (dataclasses.replace(ACTIONS[0], path=long),))
    read = width(80)
    render.render_plan(plan, files=True)
    out, _ = read()
    assert long in out and "…" not in out


# -- units and times -----------------------------------------------------------------------------------


def test_durations_and_options_are_humanized():
    assert [duration(ms) for ms in (60_480_000_000, 129_600_000, 5_400_000, 500, 0)] == [
        "700 d", "1 d 12 h", "1 h 30 min", "500 ms", "0 s"]
    assert option_value("partition.expiration-time", 60_480_000_000) == "700 d"
    assert option_value("history.expire.max-snapshot-age-ms", "432000000") == "432000000 (5 d)"
    assert option_value("older_than", "432000000 ms") == "5 d"
    assert option_value("snapshot.num-retained.min", 10) == "10"


def test_plan_descriptions_give_sizes_in_binary_units():
    from lakesweep.planner.kinds import describe_plan

    from lakesweep.engine.paimon.scopes import PartitionScope

    plan = dataclasses.replace(make_plan(), kind="partitions", scope=PartitionScope(
        snapshot=8, strategy="values-time", cutoff="2024-12-25 23:13:25", time_zone="Etc/UTC",
        partitions=[{"partition": "dt=2024-01-01", "files": 2, "bytes": 2280, "reason": "old"}]))
    d = describe_plan(plan)
    assert d.scope.endswith(": 2 live files, 2.2 KiB") and d.notes[0] == "dt=2024-01-01: 2 files, 2.2 KiB; old"


def test_one_time_spelling():
    assert format_time_ms(1_764_109_501_123) == "2025-11-25 22:25:01Z"
    assert render.fmt_time(1_764_109_501_123) == "2025-11-25 22:25:01Z"


def test_short_ids_are_unique_prefixes():
    assert short_ids(["abcdef0123", "abcdef0199", "ffff000011"]) == {
        "abcdef0123": "abcdef012", "abcdef0199": "abcdef019", "ffff000011": "ffff0000"}


# -- help screens ----------------------------------------------------------------------------------------


def test_help_prints_time_patterns_literally_with_real_metavars():
    r = runner.invoke(app, ["plan", "partitions", "--help"], terminal_width=80)
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert "'yyyy-M-d[ H:m:s]'" in text and "Ⓜ" not in text
    assert "<str>" not in r.stdout and "<bool>" not in r.stdout and "<int>" not in r.stdout
    assert "--expiration-time DURATION" in r.stdout and "--max-expires N" in r.stdout and "--out FILE" in r.stdout
    # a paragraph is reflowed, not broken where the docstring's lines end
    assert "is\n  after the partition's time. A value that cannot be read as a time is" in r.stdout


def test_the_top_level_help_shows_both_formats_and_inspect_takes_an_iceberg_table():
    r = runner.invoke(app, ["--help"], terminal_width=80)
    assert "Paimon" in r.stdout and "Iceberg" in r.stdout
    assert "    lakesweep plan expire ns.table --catalog C --out p.parquet\n" in r.stdout
    assert "…" not in r.stdout and "..." not in r.stdout.split("Commands:")[1]
    r = runner.invoke(app, ["inspect", "--help"], terminal_width=80)
    assert "--catalog NAME" in r.stdout


@pytest.mark.parametrize("group", [[], ["plan"], ["journal"]])
def test_no_command_list_cuts_a_description_at_80_columns(group):
    r = runner.invoke(app, [*group, "--help"], terminal_width=80)
    listed = r.stdout.split("Commands:")[1].strip().splitlines()
    assert listed and all(not line.endswith("...") and len(line) <= 80 for line in listed), listed


# -- Spark's start-up notices and JSON errors ------------------------------------------------------------


def test_spark_start_up_notices_are_kept_from_the_user_and_errors_pass():
    jvm = io.BytesIO(b"WARNING: Using incubator modules: jdk.incubator.vector\n"
                     b"Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n"
                     b'Setting default log level to "WARN".\n'
                     b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n"
                     b"spark: ERROR Executor: Exception in task 0.0\n")
    shown = []
    _forward_stderr(jvm, shown.append)
    assert shown == [b"spark: ERROR Executor: Exception in task 0.0\n"]
    assert jvm.closed  # the JVM has exited: its pipe is closed here, not left to the garbage collector


def test_with_output_json_an_error_is_a_json_object_on_stdout(tmp_path):
    missing = tmp_path / "p.parquet"
    r = runner.invoke(app, ["show", str(missing), "-o", "json"])
    assert r.exit_code == 1
    assert json.loads(r.stdout) == {"error": {"type": "PlanRejected", "exit_code": 1,
                                              "message": f"plan file {missing} does not exist"}}
    assert r.stderr == f"error: plan file {missing} does not exist\n"
    text = runner.invoke(app, ["show", str(missing)])
    assert text.stdout == ""


def test_inspect_takes_an_iceberg_table_by_catalog(tmp_path, monkeypatch, width):
    from tests.support import iceberg_tables as it

    for key, value in it.catalog_env(tmp_path, "local").items():
        monkeypatch.setenv(key, value)
    catalog = it.sql_catalog(tmp_path, "local")
    catalog.create_namespace("ns")
    it.many_appends(catalog, "ns.t", n=3)
    current = catalog.load_table("ns.t").metadata.current_snapshot_id
    doc = json.loads(runner.invoke(app, ["inspect", "ns.t", "--catalog", "local", "-o", "json"]).stdout)
    assert (doc["identifier"], doc["format_version"], doc["current_snapshot_id"]) == ("ns.t", 2, current)
    assert len(doc["snapshots"]) == 3 and doc["branches"] == [{"name": "main", "snapshot_id": current}]
    assert doc["current_live"]["files"] > 0 and doc["older_only"] == {"files": 0, "bytes": 0}  # appends only
    read = width(80)
    assert runner.invoke(app, ["inspect", "ns.t", "--catalog", "local"]).exit_code == 0
    out, _ = read()
    assert out.startswith("Iceberg table ns.t (catalog local, format version 2) at ")
    assert f"{current} (current)" in out and "…" not in out
    read = width(200)
    assert runner.invoke(app, ["inspect", "ns.t", "--catalog", "local", "--branch", "b"]).exit_code == 1
    assert read()[1] == ("error: --branch is an option of Paimon tables; an Iceberg table (--catalog) shows every "
                         "branch\n")
