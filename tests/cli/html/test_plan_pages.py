"""``lakesweep show PLAN --html FILE`` on plans of real tables, each page rendered by headless chromium: it
loads with no console error and no request, and its SVG elements match the plan."""

import dataclasses
import html
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakesweep.cli.main import app
from lakesweep.engine.plan_io import read_plan
from tests.cli.html import plans
from tests.cli.html.conftest import Elements
from tests.support import browser


@pytest.fixture(scope="module")
def plan_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("plans")
    with pytest.MonkeyPatch.context() as mp:
        made = {f"paimon-{k}": v for k, v in plans.paimon_plans(root / "paimon").items()}
        made |= {f"iceberg-{k}": v for k, v in plans.iceberg_plans(root / "iceberg", mp).items()}
    return made


@pytest.fixture(scope="module")
def pages(plan_files, tmp_path_factory, screenshots):
    """Each plan's page, as written by 'show --html', and what chromium made of it."""
    out = tmp_path_factory.mktemp("pages")
    loaded = {}
    for name, plan in plan_files.items():
        page = out / f"{name}.html"
        r = CliRunner().invoke(app, ["show", str(plan), "--html", str(page)])
        assert r.exit_code == 0, r.output
        loaded[name] = browser.load(page, screenshot=screenshots / f"plan-{name}.png")
    return loaded


NAMES = ["paimon-expire", "paimon-orphans", "paimon-partitions", "paimon-consumers", "paimon-tags", "paimon-changelog",
         "iceberg-expire", "iceberg-compact", "iceberg-orphans", "iceberg-rewrite-manifests"]


@pytest.mark.parametrize("name", NAMES)
def test_the_plan_page_loads_with_no_error_and_no_request(pages, screenshots, name):
    loaded = pages[name]
    assert (loaded.errors, loaded.requests) == ([], [])
    assert Elements(loaded.dom).tags("script") == []
    shot = screenshots / f"plan-{name}.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and loaded.screenshot_bytes == shot.stat().st_size


def test_every_page_names_its_plan_and_what_it_does(pages, plan_files):
    from lakesweep.planner.kinds import describe_plan

    for name in NAMES:
        plan = read_plan(str(plan_files[name]))
        text = " ".join(pages[name].dom.split())
        assert f"lakesweep plan: {plan.format} {plan.kind}" in text and plan.plan_id in text, name
        assert html.escape(describe_plan(plan).scope, quote=False) in text, name


def test_a_paimon_expiry_draws_one_dot_per_snapshot_of_the_branch(pages, plan_files):
    plan = read_plan(str(plan_files["paimon-expire"]))
    dots = Elements(pages["paimon-expire"].dom).with_class("circle", "snapshot")
    ids = [int(d["data-snapshot"]) for d in dots]
    assert ids == list(range(plan.stats["earliest"], plan.stats["latest"] + 1))
    expired = {int(d["data-snapshot"]) for d in dots if "expired" in d["class"].split()}
    assert expired == {a.snapshot_id for a in plan.actions if str(a.kind) == "snapshot"} == set(range(1, 7))


def test_a_paimon_expiry_draws_its_tags_consumer_and_boundaries(pages):
    dom = pages["paimon-expire"].dom
    assert "tag t_early" in dom and "tag t_late" in dom and "consumer c1 (next 7)" in dom
    assert "retain-min 2" in dom and "consumer (first kept: 7)" in dom
    assert len(Elements(dom).with_class("line", "boundary")) == 2


def test_an_iceberg_expiry_draws_its_expired_snapshots_and_those_refs_hold(pages, plan_files):
    plan = read_plan(str(plan_files["iceberg-expire"]))
    dots = Elements(pages["iceberg-expire"].dom).with_class("circle", "snapshot")
    expired = [int(d["data-snapshot"]) for d in dots if "expired" in d["class"].split()]
    kept = [int(d["data-snapshot"]) for d in dots if "kept" in d["class"].split()]
    assert expired == sorted(plan.scope.expired) and len(expired) == plan.stats["expired_snapshots"] > 0
    assert kept == sorted(set(plan.scope.refs.values()))
    unlisted = plan.stats["retained_snapshots"] - len(kept)
    assert [int(r["data-count"]) for r in Elements(pages["iceberg-expire"].dom).with_class("rect", "unlisted")] == [
        unlisted]
    assert f"Also kept: {unlisted} snapshot(s) no ref points at (not listed in the plan)." in pages["iceberg-expire"].dom


def _partition_bytes(plan) -> list[tuple[str, int]]:
    sizes: dict[str, int] = {}
    for path, part, size in {(a.path, a.partition, a.size or 0) for a in plan.actions if a.partition is not None}:
        sizes[part] = sizes.get(part, 0) + size
    return sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))


@pytest.mark.parametrize("name", ["paimon-orphans", "paimon-partitions", "iceberg-compact"])
def test_one_bar_per_partition_largest_first(pages, plan_files, name):
    bars = Elements(pages[name].dom).with_class("rect", "partition-bar")
    expected = _partition_bytes(read_plan(str(plan_files[name])))
    assert [(b["data-name"], int(b["data-value"])) for b in bars] == expected and len(expected) >= 2


def test_a_partition_drop_marks_dropped_and_unparseable_partitions(pages):
    elements = Elements(pages["paimon-partitions"].dom)
    assert [d["data-partition"] for d in elements.with_class("circle", "partition", "dropped")] == [
        "dt=2024-01-01", "dt=2024-01-02"]
    assert [d["data-partition"] for d in elements.with_class("rect", "partition", "unparseable")] == ["dt=someday"]
    assert "kept (1)" in pages["paimon-partitions"].dom


def test_an_orphan_plan_bins_listed_files_against_older_than(pages, plan_files):
    bins = Elements(pages["paimon-orphans"].dom).with_class("rect", "age-bin")
    assert [(b["data-bin"], int(b["data-count"])) for b in bins] == [
        ("older than --older-than: candidates", 6), ("modified since: kept", 0), ("no modification time: kept", 0),
        ("used by the table: kept", read_plan(str(plan_files["paimon-orphans"])).stats["kept_used"])]


def test_a_compaction_draws_each_bin_before_and_after(pages, plan_files):
    plan = read_plan(str(plan_files["iceberg-compact"]))
    elements = Elements(pages["iceberg-compact"].dom)
    bins = plan.scope.bins
    assert len(elements.with_class("rect", "compact-input")) == sum(len(b["inputs"]) for b in bins)
    assert [int(r["data-bin"]) for r in elements.with_class("rect", "compact-output")] == [b["index"] for b in bins]


def test_text_from_the_plan_is_escaped_so_it_cannot_load_anything(plan_files, tmp_path, screenshots):
    from lakesweep.cli.html.plan_page import plan_html

    plan = read_plan(str(plan_files["paimon-orphans"]))
    hostile = '<img src="http://127.0.0.1:9/x.png"><script>console.error("boom")</script>'
    forged = dataclasses.replace(plan, table_location=f"/t/{hostile}",
                                 stats={**plan.stats, "warnings": [hostile]})
    page = tmp_path / "hostile.html"
    page.write_text(plan_html(forged), encoding="utf-8")
    loaded = browser.load(page, screenshot=screenshots / "plan-hostile.png")
    assert (loaded.errors, loaded.requests) == ([], [])
    assert Elements(loaded.dom).tags("img") == [] and Elements(loaded.dom).tags("script") == []
    assert "warning: &lt;img src=" in page.read_text()


def test_the_browser_check_sees_a_console_error_and_a_request(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                    '<script>console.error("boom")</script></body></html>')
    loaded = browser.load(page, screenshot=tmp_path / "bad.png")
    assert "console: boom" in loaded.errors
    assert loaded.requests == ["http://127.0.0.1:9/x.png"]


def test_a_missing_chromium_is_an_error_naming_the_fix(monkeypatch):
    monkeypatch.setattr(browser, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(browser.BrowserMissing) as e:
        browser.chromium()
    assert str(e.value) == ("chromium is not installed, and the HTML report tests render every report in it: run "
                            "'apt-get install -y chromium' (as root), or './quickstart test', which installs it")


def test_show_refuses_an_html_path_that_is_a_directory(plan_files, tmp_path):
    r = CliRunner().invoke(app, ["show", str(plan_files["paimon-expire"]), "--html", str(tmp_path)])
    assert r.exit_code == 1
    assert f"--html {tmp_path} exists and is not a regular file; give the path of a file to write" in " ".join(
        r.output.split())
    assert not Path(tmp_path / "index.html").exists()
