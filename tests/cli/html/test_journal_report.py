"""``lakesweep journal report --html FILE``: a journal of plans of real tables, applied, failed, killed,
resumed, refused and maintained, as one page that headless chromium loads with no error and no request."""

import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from lakesweep.engine.plan_io import read_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.cli.html import journals, plans
from tests.cli.html.conftest import Elements
from tests.support import browser


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    root = tmp_path_factory.mktemp("journal")
    with pytest.MonkeyPatch.context() as mp:
        made = {f"paimon-{k}": v for k, v in plans.paimon_plans(root / "paimon").items()}
        made |= {f"iceberg-{k}": v for k, v in plans.iceberg_plans(root / "iceberg", mp).items()}
    path = root / "journal.duckdb"
    with DuckDBRecorder(path) as recorder:
        journals.write_journal(recorder, {k: read_plan(str(v)) for k, v in made.items()})
    return path


def report(journal, out, *args):
    r = CliRunner().invoke(app, ["journal", "report", "--journal", str(journal), "--html", str(out), *args])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture(scope="module")
def page(journal, tmp_path_factory, screenshots):
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert " ".join(report(journal, out).split()) == f"wrote the report of 12 operation run(s) to {out}"
    return browser.load(out, screenshot=screenshots / "journal-report.png")


def test_the_report_loads_with_no_error_and_no_request(page, screenshots):
    assert (page.errors, page.requests) == ([], [])
    assert Elements(page.dom).tags("script") == []
    assert (screenshots / "journal-report.png").read_bytes()[:4] == b"\x89PNG"


def test_outcomes_per_day_count_every_run(page):
    bars = Elements(page.dom).with_class("rect", "outcome-bar")
    per_day = {}
    for bar in bars:
        per_day.setdefault(bar["data-day"], {})[bar["data-status"]] = int(bar["data-count"])
    assert per_day == {"2026-01-01": {"COMPLETED": 1, "FAILED": 1}, "2026-01-02": {"COMPLETED": 2},
                       "2026-01-03": {"COMPLETED": 1, "FAILED": 1, "REFUSED": 1, "INCOMPLETE": 1, "PLANNED": 1,
                                      "SKIPPED": 3}}


def test_bytes_reclaimed_per_table_per_day(page, journal):
    with DuckDBRecorder(journal) as recorder:
        expire = next(h for h in recorder.maintenance_history() if h["apply_id"] == "ok1")
    bars = Elements(page.dom).with_class("rect", "reclaimed-bar")
    assert [(b["data-day"], b["data-table"], int(b["data-bytes"])) for b in bars] == [
        ("2026-01-01", expire["table_location"], expire["metrics"]["bytes_reclaimed"]),
        ("2026-01-02", expire["table_location"], 25_000)]


def test_crashes_and_resumes_are_named(page):
    runs = {r["data-apply"]: r["data-status"] for r in Elements(page.dom).with_class("rect", "run")}
    assert runs == {"ok1": "COMPLETED", "fail1": "FAILED", "again1": "COMPLETED", "crash1": "COMPLETED",
                    "killed1": "INCOMPLETE", "maint1": "COMPLETED"}
    text = " ".join(page.dom.split())
    assert "1 action(s) recorded twice: interrupted and resumed under the same apply id" in text
    assert "started, no end recorded: killed, or still running" in text
    assert "applies the plan again after apply fail1 (failed)" in text


def test_every_failure_is_shown_with_its_error_escaped(page):
    text = " ".join(page.dom.split())
    assert "1 action failed: s3://bucket/t/data-0.parquet: AccessDenied &lt;403&gt; &amp; no retry left" in text
    assert "catalog lsreport: &lt;connection refused&gt;" in text
    assert "the table changed since planning: snapshot 7 is no longer current" in text
    assert "1 failed file record(s)" in text


def test_maintain_is_a_matrix_of_tables_by_operations(page, journal):
    cells = Elements(page.dom).with_class("td", "maintain-cell")
    with DuckDBRecorder(journal) as recorder:
        paimon = "paimon:" + next(h for h in recorder.maintenance_history() if h["apply_id"] == "ok1")["table_location"]
    assert [(c["data-table"], c["data-operation"], c["data-status"]) for c in cells] == [
        (paimon, "expire", "COMPLETED"), (paimon, "orphans", "SKIPPED"), (paimon, "compact", "SKIPPED"),
        ("iceberg:lsreport/ns.t", "expire", "FAILED"), ("iceberg:lsreport/ns.t", "orphans", "PLANNED"),
        ("iceberg:lsreport/ns.t", "compact", "SKIPPED")]


def test_since_and_table_choose_the_runs(journal, tmp_path):
    out = tmp_path / "since.html"
    # the 8 runs of day 3, and the orphan cleaning that started on day 2 and was resumed to its end on day 3
    assert "report of 9 operation run(s)" in report(journal, out, "--since", "2026-01-03T00:00:00Z")
    assert "since 2026-01-03 00:00:00Z" in out.read_text()
    assert "report of 3 operation run(s)" in report(journal, out, "--table", "iceberg:lsreport/ns.t")


def test_an_empty_choice_says_so(journal, tmp_path):
    out = tmp_path / "empty.html"
    report(journal, out, "--since", "2030-01-01T00:00:00Z")
    assert "The journal holds no operation run for this choice." in out.read_text()


def test_a_missing_journal_is_refused_and_no_page_written(tmp_path):
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["journal", "report", "--journal", str(tmp_path / "none.duckdb"), "--html", str(out)])
    assert r.exit_code == 1 and not out.exists()
