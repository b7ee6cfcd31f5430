"""Iceberg format version 3 (deletion vectors, row lineage): pyiceberg 0.12 reads such tables but writes the
metadata and manifests of versions 1 and 2 only. An operation that commits (expire, rewrite-manifests,
compact) is refused at plan time, in one line naming the version, and a plan for it (planned before an
upgrade, or forged) is refused by apply before anything is done, never at the commit. Orphan cleaning,
which commits nothing, works; ``maintain`` maintains the other tables and still runs orphans on a v3 one.

pyiceberg 0.12 cannot create a v3 table (``create_table(properties={"format-version": "3"})`` and
``upgrade_table_version(3)`` both fail), so the tests write a v2 table and then set the current metadata's
``format-version`` to 3 (``tests.iceberg.test_maintain.as_format_v3``)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected
from lakesweep.journal.audit import list_maintenance
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.compact import plan_compact, resolve_compact_options
from lakesweep.planner.iceberg.rewrite_manifests import plan_rewrite_manifests, resolve_rewrite_options
from tests.iceberg.conftest import CATALOG, files_on_disk, write_history
from tests.iceberg.test_expire import plan as plan_expire
from tests.iceberg.test_maintain import as_format_v3, maintain
from tests.iceberg.test_orphans import plan as plan_orphans
from tests.iceberg.test_orphans import stray


def v3_refusal(ident: str = "ns.t") -> str:
    return (f"Iceberg table {ident} is format version 3: lakesweep cannot commit to it yet (pyiceberg 0.12 writes "
            f"the metadata and manifests of format versions 1 and 2 only); orphans, which commits nothing, works")


PLANNERS = {
    "expire": lambda view: plan_expire(view, older_than="0 s"),
    "rewrite-manifests": lambda view: plan_rewrite_manifests(view, now_ms=0,
                                                             options=resolve_rewrite_options(view.options)),
    "compact": lambda view: plan_compact(view, now_ms=0, options=resolve_compact_options(view.options)),
}


@pytest.mark.parametrize("kind", sorted(PLANNERS))
def test_an_operation_that_commits_is_refused_at_plan_time_on_a_v3_table(lake, kind):
    write_history(lake)
    as_format_v3(lake, "ns.t")
    with pytest.raises(PlanRejected) as e:
        PLANNERS[kind](lake.view())
    assert str(e.value) == v3_refusal()


@pytest.mark.parametrize("kind", ["expire", "rewrite-manifests", "compact"])
def test_the_cli_refuses_planning_on_a_v3_table_in_one_line(lake, tmp_path, kind):
    write_history(lake)
    as_format_v3(lake, "ns.t")
    out = tmp_path / "p.parquet"
    r = CliRunner().invoke(app, ["plan", kind, "ns.t", "--catalog", CATALOG, "--out", str(out)])
    assert r.exit_code == 1, r.output
    assert r.stderr == f"error: {v3_refusal()}\n"
    assert not out.exists()


@pytest.mark.parametrize("kind", sorted(PLANNERS))
def test_a_plan_made_before_the_table_became_v3_is_refused_by_apply_before_anything(lake, tmp_path, kind):
    write_history(lake)
    p = PLANNERS[kind](lake.view())
    assert p.actions, "the plan commits something"
    as_format_v3(lake, "ns.t")
    before = lake.table()
    on_disk = files_on_disk(before)
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        with pytest.raises(PlanRejected) as e:
            apply_plan(p, rec, executor=DriverExecutor())
        events = [ev.EVENT_TYPE for ev in rec.events(plan_id=p.plan_id)]
    assert str(e.value) == v3_refusal() + "; nothing was done"
    assert events == ["PlanRecorded", "ApplyRefused"]
    after = lake.table()
    assert after.metadata_location == before.metadata_location and files_on_disk(after) == on_disk


def test_the_cli_apply_refuses_a_commit_plan_on_a_v3_table_with_exit_1(lake, tmp_path):
    from lakesweep.engine.plan_io import write_plan

    write_history(lake)
    plan_file = str(tmp_path / "p.parquet")
    write_plan(plan_expire(lake.view(), older_than="0 s"), plan_file)
    as_format_v3(lake, "ns.t")
    r = CliRunner().invoke(app, ["apply", plan_file, "--journal", str(tmp_path / "j.duckdb"), "--master", "local[1]"])
    assert r.exit_code == 1, r.output
    assert r.stderr == f"error: {v3_refusal()}; nothing was done\n"


def test_orphans_are_removed_from_a_v3_table(lake, tmp_path):
    t = write_history(lake)
    left = stray(t, "data/x.parquet", days=5)
    as_format_v3(lake, "ns.t")
    p = plan_orphans(lake.view())
    assert [a.path for a in p.actions] == ["data/x.parquet"]
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole and report.counts["DELETED"] == 1
    assert not os.path.exists(left)
    assert lake.table().metadata.format_version == 3


def test_maintain_maintains_the_v2_table_and_runs_only_orphans_on_the_v3_one(lake, tmp_path):
    write_history(lake, "ns.a")
    left = stray(write_history(lake, "ns.b"), "data/x.parquet", days=5)
    as_format_v3(lake, "ns.b")
    run, rec = maintain(tmp_path)
    with rec:
        report = run.run()
        rows = list_maintenance(rec)
    results = {(r["table"].rsplit("/", 1)[-1], r["operation"]): (r["outcome"], r["message"]) for r in rows}
    for op in ("compact", "expire", "rewrite-manifests"):
        assert results[("ns.b", op)] == ("skipped", v3_refusal("ns.b"))
    assert results[("ns.b", "orphans")][0] == "applied" and not os.path.exists(left)
    assert results[("ns.a", "expire")][0] == "applied"
    assert results[("ns.a", "rewrite-manifests")][0] == "applied"
    assert report.failed == 0
    assert lake.table("ns.b").metadata.format_version == 3 and lake.table("ns.a").metadata.format_version == 2
    # nothing is left applying: the next cycle plans every operation of the v3 table again
    run2, rec2 = maintain(tmp_path)
    with rec2:
        run2.run()
        again = {r["operation"]: (r["outcome"], r["message"]) for r in list_maintenance(rec2, run_id=run2.run_id)
                 if r["table"].endswith("/ns.b")}
    assert again == {"compact": ("skipped", v3_refusal("ns.b")), "expire": ("skipped", v3_refusal("ns.b")),
                     "orphans": ("skipped", "no orphan files to remove"),
                     "rewrite-manifests": ("skipped", v3_refusal("ns.b"))}


def test_resume_of_an_apply_left_applying_on_a_v3_table_ends_it_refused(lake, tmp_path):
    """An apply an older lakesweep left APPLYING (it died at the commit) is refused by resume before anything, and
    ends: the table is no longer 'still being worked on'."""
    from lakesweep.applier.apply import resume
    from lakesweep.journal.events import ApplyStarted
    from lakesweep.journal.projection import PlanStatus
    from lakesweep.journal.queries import plan_state

    write_history(lake)
    p = plan_expire(lake.view(), older_than="0 s")
    as_format_v3(lake, "ns.t")
    before = lake.table()
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        rec.record_plan(p, recorded_ms=1)
        rec.append([ApplyStarted(apply_id="a1", plan_id=p.plan_id, n_actions=len(p.actions), bytes=0,
                                 master="local[1]", dry_run=False, started_ms=2)])
        assert plan_state(rec, p.plan_id) == PlanStatus.APPLYING
        [report] = resume(rec, executor=DriverExecutor())
        assert (report.state, report.reason) == ("REFUSED", v3_refusal() + "; nothing was done")
        assert plan_state(rec, p.plan_id) == PlanStatus.REFUSED
    assert lake.table().metadata_location == before.metadata_location


def test_maintain_over_a_v3_table_a_table_whose_plan_cannot_be_written_and_healthy_ones_goes_on(lake, tmp_path):
    """Each table's failure or refusal is that table's result; the healthy tables are maintained all the same."""
    from lakesweep.maintain import discover

    for name in ("ns.a", "ns.blocked", "ns.c", "ns.v3"):
        write_history(lake, name, appends=3, churn=False)
    as_format_v3(lake, "ns.v3")
    run, rec = maintain(tmp_path, operations=("expire", "orphans", "rewrite-manifests"))
    blocked = next(t for t in discover(catalog=CATALOG, warehouse=None) if t.label.endswith("/ns.blocked"))
    os.makedirs(run.plan_file(blocked, "expire", cycle=1))  # its expiry plan cannot be written there
    with rec:
        report = run.run()
        rows = list_maintenance(rec)
    results = {(r["table"].rsplit("/", 1)[-1], r["operation"]): r for r in rows}
    assert results[("ns.blocked", "expire")]["outcome"] == "failed"
    assert results[("ns.blocked", "expire")]["message"].startswith("writing the plan failed: ")
    assert results[("ns.blocked", "rewrite-manifests")]["outcome"] == "applied"
    assert [results[("ns.v3", op)]["outcome"] for op in ("expire", "rewrite-manifests")] == ["skipped", "skipped"]
    assert results[("ns.v3", "expire")]["message"] == v3_refusal("ns.v3")
    assert results[("ns.v3", "orphans")]["outcome"] in ("applied", "skipped")
    for healthy in ("ns.a", "ns.c"):
        assert [results[(healthy, op)]["outcome"] for op in ("expire", "rewrite-manifests")] == ["applied", "applied"]
    assert report.failed == 1
