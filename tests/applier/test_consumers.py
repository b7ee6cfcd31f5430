"""Consumer expiry (``ConsumerManager#expire``) planned, applied and compared with Paimon 0.9's own:
idle consumer files go, a consumer written between plan and apply stays, an edited plan cannot reach
other files."""

from __future__ import annotations

import dataclasses
import json
import datetime as dt
import os
import shutil
import time

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import ConsumerKind
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import Action, canonical_actions
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.engine.paimon.plan_reads import read_consumer_files
from lakesweep.planner.paimon.consumers import plan_consumers
from lakesweep.planner.paimon.options import resolve_consumer_options
from tests.support.table_builder import ADD, E, TableBuilder

DAY = 86_400_000
NOW = 1_700_000_000_000


def builder(tmp_path, consumers: dict[str, int]) -> TableBuilder:
    """A table with one snapshot and consumers, each last written ``days`` before NOW."""
    b = TableBuilder(str(tmp_path / "t"), partition_keys=("dt",), partition_types=("STRING",))
    b.commit([E(ADD, "a", ("x",))])
    for name, days in consumers.items():
        b.consumer(name, 1)
        set_mtime(os.path.join(b.root, "consumer", f"consumer-{name}"), NOW - days * DAY)
    return b


def set_mtime(path: str, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def plan(root, *, now=NOW, branch="main", **flags):
    t = open_table(root, branch=branch)
    return plan_consumers(t, now_ms=now, options=resolve_consumer_options(t.options, **flags),
                          read=read_consumer_files(t))


def test_consumers_not_written_within_the_window_are_planned(tmp_path):
    b = builder(tmp_path, {"idle": 10, "busy": 1, "edge": 3})
    p = plan(b.root, expiration_time="3 d")
    assert [(a.kind, a.path) for a in p.actions] == [(ConsumerKind.CONSUMER_FILE, "consumer/consumer-idle")]
    assert [c["consumer"] for c in p.scope.consumers] == ["idle"]
    assert p.stats["consumers_kept"] == 2  # written exactly at the cut-off is not before it


def test_the_table_option_is_the_default_and_a_missing_one_is_refused(tmp_path):
    b = builder(tmp_path, {"idle": 10})
    with pytest.raises(PlanRejected, match="no expiration time: pass --expiration-time"):
        plan(b.root)
    assert plan(b.root, overrides={"consumer.expiration-time": "5 d"}).actions


def test_apply_deletes_idle_consumers_and_keeps_one_written_since_planning(tmp_path):
    b = builder(tmp_path, {"a": 10, "b": 10})
    p = plan(b.root, expiration_time="3 d")
    assert len(p.actions) == 2
    set_mtime(os.path.join(b.root, "consumer", "consumer-b"), NOW + 1000)  # the reader moved on
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(p, recorder, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole
    assert (report.counts["DELETED"], report.counts["SKIPPED_REFERENCED"]) == (1, 1)
    assert sorted(os.listdir(os.path.join(b.root, "consumer"))) == ["consumer-b"]


def test_a_consumer_rewritten_with_its_old_time_is_kept(tmp_path):
    b = builder(tmp_path, {"a": 10})
    p = plan(b.root, expiration_time="3 d")
    path = os.path.join(b.root, "consumer", "consumer-a")
    b.consumer("a", 2)  # the reader moved on; a store that keeps the old time (a copy with times preserved)
    set_mtime(path, NOW - 10 * DAY)
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(p, recorder, executor=DriverExecutor())
    assert (report.state, report.counts["DELETED"], report.counts["SKIPPED_REFERENCED"]) == ("COMPLETED", 0, 1)
    assert os.path.exists(path)


def test_an_edited_plan_naming_a_consumer_it_did_not_plan_keeps_it(tmp_path):
    b = builder(tmp_path, {"idle": 10, "busy": 1})
    p = plan(b.root, expiration_time="3 d")
    forged = dataclasses.replace(p, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in p.actions]
        + [Action(ConsumerKind.CONSUMER_FILE, "consumer/consumer-busy")]))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        report = apply_plan(forged, recorder, executor=DriverExecutor())
    assert (report.counts["DELETED"], report.counts["SKIPPED_REFERENCED"]) == (1, 1)
    assert os.listdir(os.path.join(b.root, "consumer")) == ["consumer-busy"]


def test_a_branch_expires_its_own_consumers_only(tmp_path):
    b = builder(tmp_path, {"main-reader": 10})
    br = b.create_branch("b1", 1)
    br.consumer("branch-reader", 1)
    branch_consumer = os.path.join(br.meta_dir, "consumer", "consumer-branch-reader")
    set_mtime(branch_consumer, NOW - 10 * DAY)
    p = plan(b.root, branch="b1", expiration_time="3 d")
    assert [a.path for a in p.actions] == ["branch/branch-b1/consumer/consumer-branch-reader"]
    main_plan = plan(b.root, expiration_time="3 d")
    forged = dataclasses.replace(main_plan, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in main_plan.actions]
        + [Action(ConsumerKind.CONSUMER_FILE, "branch/branch-b1/consumer/consumer-branch-reader")]))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(PlanRejected, match="consumer expiry deletes only consumer/consumer-<id> files"):
            apply_plan(forged, recorder, executor=DriverExecutor())
        assert apply_plan(p, recorder, executor=DriverExecutor()).state == "COMPLETED"
    assert not os.path.exists(branch_consumer)
    assert os.listdir(os.path.join(b.root, "consumer")) == ["consumer-main-reader"]


def test_an_edited_plan_cannot_delete_anything_but_consumer_files(tmp_path):
    b = builder(tmp_path, {"a": 10})
    p = plan(b.root, expiration_time="3 d")
    forged = dataclasses.replace(p, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in p.actions]
        + [Action(ConsumerKind.CONSUMER_FILE, "snapshot/snapshot-1")]))
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        with pytest.raises(PlanRejected, match="consumer expiry deletes only consumer/consumer-<id> files"):
            apply_plan(forged, recorder, executor=DriverExecutor())
    assert os.path.exists(os.path.join(b.root, "snapshot", "snapshot-1"))


def test_plan_consumers_command_shows_dry_runs_applies_and_journals(tmp_path):
    b = builder(tmp_path, {"idle": 10, "busy": 0})
    for name, days in (("idle", 10), ("busy", 0)):
        set_mtime(os.path.join(b.root, "consumer", f"consumer-{name}"), int(time.time() * 1000) - days * DAY)
    out, journal = tmp_path / "c.parquet", str(tmp_path / "j.duckdb")
    runner = CliRunner()

    def run(*args):
        r = runner.invoke(app, [str(a) for a in args])
        assert r.exit_code == 0, r.output
        return r

    r = run("plan", "consumers", b.root, "--out", out, "--expiration-time", "7 d")
    assert "deletes 1 consumer file(s) of branch 'main'" in r.output and "consumer 'idle'" in r.output
    shown = json.loads(run("show", out, "--files", "-o", "json").stdout)
    assert [c["consumer"] for c in shown["consumers"]] == ["idle"]
    assert [a["path"] for a in shown["actions"]] == ["consumer/consumer-idle"]
    dry = json.loads(run("apply", out, "--dry-run", "-o", "json").stdout)
    assert (dry["state"], dry["counts"]["DELETED"]) == ("DRY_RUN", 1)
    assert len(os.listdir(os.path.join(b.root, "consumer"))) == 2
    done = json.loads(run("apply", out, "--journal", journal, "-o", "json").stdout)
    assert (done["state"], done["verify"]["whole"], done["counts"]["DELETED"]) == ("COMPLETED", True, 1)
    assert os.listdir(os.path.join(b.root, "consumer")) == ["consumer-busy"]
    [row] = json.loads(run("journal", "plans", "--journal", journal, "-o", "json").stdout)
    assert (row["kind"], row["state"], row["whole"], row["deleted"]) == ("consumers", "APPLIED", True, 1)
    assert json.loads(run("resume", "--journal", journal, "-o", "json").stdout) == []


@pytest.mark.java
@pytest.mark.parametrize("seed", range(4))
def test_agrees_with_paimons_consumer_expiry(paimon_java, tmp_path, seed):
    ours = str(tmp_path / "ours")
    g = paimon_java.generate(ours, seed=seed, kind="append", steps=20, ops={"consumer": 60})
    names = sorted(os.listdir(os.path.join(ours, "consumer")))
    assert len(names) >= 2, g["consumers"]
    now = int(time.time() * 1000)
    for i, name in enumerate(names):  # ages 0.5, 1.5, 2.5 ... days
        set_mtime(os.path.join(ours, "consumer", name), now - DAY // 2 - i * DAY)
    theirs = str(tmp_path / "theirs")
    shutil.copytree(ours, theirs)
    cutoff = now - DAY
    local = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=cutoff)  # the JVM's zone is UTC here too
    left = paimon_java.expire_consumers(theirs, expire_date_time=local.isoformat())
    p = plan(ours, now=now, expiration_time="1 d")
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        assert apply_plan(p, recorder, executor=DriverExecutor()).state == "COMPLETED"
    mine = sorted(n[len("consumer-"):] for n in os.listdir(os.path.join(ours, "consumer")))
    assert mine == left
    assert 0 < len(p.actions) < len(names)
