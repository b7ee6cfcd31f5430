"""``lakesweep maintain --log-file``: one JSON object per line for schedulers (run start, every table and
operation with its files, bytes and duration, run end, UTC ISO times), each line on disk as it happens; the
text summary with files, bytes and durations per operation; and the journal read while maintain runs."""

from __future__ import annotations

import datetime as dt
import io
import itertools
import json
import os
import re
import subprocess
import sys
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from lakesweep.maintain import parse_operations
from lakesweep.cli import render
from lakesweep.cli.main import app
from lakesweep.cli.humanize import elapsed
from lakesweep.cli.maintain_cmds import JsonLinesLog, render_summary
from lakesweep.engine.timeutil import iso_time_ms
from lakesweep.engine.errors import JournalError
from lakesweep.engine.plan_io import read_plan
from tests.applier.conftest import REPO
from tests.iceberg.conftest import CATALOG, write_history
from tests.iceberg.test_maintain import maintain
from tests.support.processes import LAKESWEEP

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def tables(lake):
    write_history(lake, "ns.orders")
    write_history(lake, "ns.items", appends=3, churn=False)
    write_history(lake, "ns.events", properties={"gc.enabled": "false"})
    return lake


@pytest.fixture
def printed(monkeypatch):
    """What the renderers print to stdout, as text (no terminal codes, wide lines)."""
    out = io.StringIO()
    monkeypatch.setattr(render, "out", Console(file=out, width=300, highlight=False, soft_wrap=True))
    return out.getvalue


def ticking(step_ms=250):
    """A clock that starts now (retention compares it with the snapshots' times) and moves ``step_ms`` on
    every reading."""
    start_ms, counter = int(time.time() * 1000), itertools.count()
    return lambda: start_ms + step_ms * next(counter)


def test_every_operation_is_logged_with_its_files_bytes_and_duration_between_run_start_and_end(tables, tmp_path):
    events = []
    run, rec = maintain(tmp_path, operations=parse_operations("expire,orphans"), clock=ticking(), log=events.append)
    with rec:
        report = run.run()
    assert [e["event"] for e in events] == (["run_started", "cycle_started"] + ["operation"] * 6 + ["run_finished"])
    assert all(e["run_id"] == report.run_id for e in events)
    times = [e["time_ms"] for e in events]
    assert times == sorted(times)
    ops = [e for e in events if e["event"] == "operation"]
    assert [(e["table"].split("/")[1], e["operation"], e["outcome"]) for e in ops] == [
        ("ns.events", "expire", "failed"), ("ns.events", "orphans", "failed"),  # gc.enabled=false
        ("ns.items", "expire", "applied"), ("ns.items", "orphans", "skipped"),
        ("ns.orders", "expire", "applied"), ("ns.orders", "orphans", "skipped")]
    for e, r in zip(ops, report.results):  # the log says what the report says
        assert (e["files"], e["bytes"], e["duration_ms"], e["message"]) == (r.files, r.bytes, r.duration_ms, r.message)
        assert e["duration_ms"] > 0 and e["duration_ms"] % 250 == 0
    applied = [e for e in ops if e["outcome"] == "applied"]
    assert all(e["files"] > 0 and e["apply_id"] and e["plan_file"] for e in applied)
    assert applied[1]["bytes"] > 0  # ns.orders lost data files (ns.items only a manifest list, of no known size)
    assert all((e["files"], e["bytes"]) == (0, 0) for e in ops if e["outcome"] != "applied")
    first, last = events[0], events[-1]
    assert first | {"time_ms": 0} == {"event": "run_started", "run_id": report.run_id, "time_ms": 0, "dry_run": False,
                                      "operations": ["expire", "orphans"], "catalog": CATALOG, "warehouse": None,
                                      "every_ms": None}
    assert last == {"event": "run_finished", "run_id": report.run_id, "time_ms": last["time_ms"], "cycles": 1,
                    "counts": {"failed": 2, "applied": 2, "skipped": 2}, "failed": 2,
                    "files": sum(e["files"] for e in applied), "bytes": sum(e["bytes"] for e in applied),
                    "duration_ms": last["time_ms"] - first["time_ms"], "error": None}


def test_a_dry_run_logs_what_each_plan_would_do(tables, tmp_path):
    events = []
    run, rec = maintain(tmp_path, table_filter="orders", operations=("expire",), dry_run=True, log=events.append)
    with rec:
        run.run()
    (op,) = [e for e in events if e["event"] == "operation"]
    plan = read_plan(op["plan_file"])
    assert op["outcome"] == "planned" and op["apply_id"] is None
    assert op["files"] == len(plan.actions) - sum(a.verb == "commit" for a in plan.actions) > 0
    assert op["bytes"] == sum(a.size or 0 for a in plan.actions if a.verb.deletes) > 0


def test_a_run_stopped_by_an_error_still_logs_its_end(tables, tmp_path):
    events = []
    run, rec = maintain(tmp_path, table_filter="items", operations=("expire",), log=events.append)

    def broken(batch):
        raise JournalError("journal j.duckdb: could not append 1 events: disk full")

    with rec:
        rec.append = broken
        with pytest.raises(JournalError):
            run.run()
    assert [e["event"] for e in events] == ["run_started", "cycle_started", "run_finished"]
    assert events[-1]["error"] == "journal j.duckdb: could not append 1 events: disk full"


def test_each_line_is_on_disk_as_soon_as_it_is_written(tmp_path):
    path = tmp_path / "maintain.jsonl"
    with JsonLinesLog(path) as log:
        log.write({"event": "run_started", "run_id": "r1", "time_ms": 1_764_115_200_123, "dry_run": False})
        assert path.read_text() == ('{"time": "2025-11-26T00:00:00.123Z", "event": "run_started", "run_id": "r1", '
                                    '"dry_run": false}\n')
        log.write({"event": "run_finished", "run_id": "r1", "time_ms": 1_764_115_201_000, "error": None})
        assert len(path.read_text().splitlines()) == 2
    with JsonLinesLog(path) as log:  # appended, as a scheduler's log is
        log.write({"event": "run_started", "run_id": "r2", "time_ms": 0})
    assert [json.loads(line)["run_id"] for line in path.read_text().splitlines()] == ["r1", "r1", "r2"]


def test_times_are_utc_iso_and_durations_read_as_people_read_them():
    assert iso_time_ms(0) == "1970-01-01T00:00:00.000Z"
    assert dt.datetime.fromisoformat(iso_time_ms(1_764_115_200_123)) == dt.datetime(2025, 11, 26, 0, 0, 0, 123000,
                                                                                tzinfo=dt.timezone.utc)
    assert [elapsed(ms) for ms in (0, 850, 12_400, 185_000, 7_260_000)] == [
        "0 ms", "850 ms", "12.4 s", "3 min 05 s", "2 h 01 min"]


def test_the_summary_shows_files_bytes_and_duration_per_operation(tables, tmp_path, printed):
    run, rec = maintain(tmp_path, table_filter="items", operations=("expire", "orphans"), clock=ticking(step_ms=1500))
    with rec:
        report = run.run()
    render_summary(report)
    out = printed()
    expire, orphans = report.results
    lines = [line for line in out.splitlines() if "ns.items" in line]
    assert [re.split(r"\s*│\s*", line.strip("│ ")) [:6] for line in lines] == [
        [expire.table, "expire", "applied", str(expire.files), _human(expire.bytes), elapsed(expire.duration_ms)],
        [orphans.table, "orphans", "skipped", "0", "0 B", elapsed(orphans.duration_ms)]]
    assert expire.files > 0 and expire.duration_ms >= 3000
    assert out.splitlines()[-1] == (f"2 of 2 operation(s) done; {expire.files} file(s), {_human(expire.bytes)}, "
                                    f"{elapsed(expire.duration_ms + orphans.duration_ms)} in operations")


def _human(n):
    from lakesweep.cli.render import human_bytes

    return human_bytes(n)


def test_the_command_writes_the_log_file(tables, tmp_path):
    log = tmp_path / "logs" / "maintain.jsonl"
    log.parent.mkdir()
    r = CliRunner().invoke(app, ["maintain", "--catalog", CATALOG, "--journal", str(tmp_path / "j.duckdb"),
                                 "--operations", "rewrite-manifests", "--min-manifests-to-rewrite", "2",
                                 "--table-filter", "orders,items", "--master", "local[1]", "--log-file", str(log),
                                 "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in lines] == ["run_started", "cycle_started", "operation", "operation", "run_finished"]
    assert all(ISO.match(e["time"]) and "time_ms" not in e for e in lines)
    assert [(e["table"], e["outcome"], e["files"], e["bytes"], e["duration_ms"]) for e in lines[2:4]] == [
        (x["table"], x["outcome"], x["files"], x["bytes"], x["duration_ms"]) for x in doc["results"]]
    assert [e["outcome"] for e in lines[2:4]] == ["applied", "applied"]
    assert lines[-1]["counts"] == doc["counts"] == {"applied": 2}


def test_a_log_file_that_cannot_be_opened_is_refused_before_anything_runs(tables, tmp_path):
    journal = tmp_path / "j.duckdb"
    r = CliRunner().invoke(app, ["maintain", "--catalog", CATALOG, "--journal", str(journal),
                                 "--log-file", str(tmp_path)])
    assert r.exit_code == 1
    assert f"{tmp_path}: cannot open the --log-file: Is a directory" in r.output
    assert not journal.exists()


def test_the_journal_is_read_by_another_process_while_maintain_writes_it(tables, tmp_path):
    journal = tmp_path / "j.duckdb"
    seen = []

    def read_now(event):  # another process reads the journal while this run holds it
        if event["event"] != "operation":
            return
        done = subprocess.run([*LAKESWEEP, "journal", "maintenance", "--journal", str(journal),
                               "-o", "json"], env=dict(os.environ, PYTHONPATH=REPO), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        seen.append([(r["operation"], r["outcome"]) for r in json.loads(done.stdout)])

    run, rec = maintain(tmp_path, table_filter="items", operations=("expire", "orphans"), log=read_now)
    with rec:
        run.run()
    assert seen == [[("expire", "applied")], [("expire", "applied"), ("orphans", "skipped")]]
