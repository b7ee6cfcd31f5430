"""kill -9 of an apply of the newer plan kinds (tags, changelog, consumers) after its first journaled batch,
then resume: the same files as an uninterrupted apply of the same plan on a copy, and the plan applied."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan, resume
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import write_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.engine.paimon.plan_reads import read_consumer_files
from lakesweep.planner.paimon.changelog import plan_changelog, read_changelog
from lakesweep.planner.paimon.consumers import plan_consumers
from lakesweep.planner.kinds import plan_kind
from lakesweep.planner.paimon.options import resolve_consumer_options, resolve_tag_options
from lakesweep.planner.paimon.tags import plan_tags, read_tags
from tests.applier.conftest import REPO, copy_table
from tests.planner.conftest import FAR_FUTURE, expire
from tests.support.table_builder import ADD, DELETE, E, TableBuilder, all_files

P = dict(partition_keys=("dt",), partition_types=("STRING",))


def tags_table(root):
    b = TableBuilder(root, **P)
    live = []
    for s in range(10):
        add = E(ADD, f"f{s}", ("xy"[s % 2],))
        gone = live[:1] if s % 3 == 2 else []
        b.commit([add] + [E(DELETE, g.name, g.partition) for g in gone])
        live = [x for x in live if x not in gone] + [add]
        if s % 2 == 0:
            b.tag(f"t{s}", s + 1)
    expire(b.root, retain_min=2, retain_max=2)
    return b


def tags_plan(root):
    t = open_table(root)
    opts = resolve_tag_options(t.options, names=["t0", "t2", "t4"])
    return plan_tags(t, now_ms=int(time.time() * 1000), options=opts, read=read_tags(t, options=opts))


def changelog_table(root):
    b = TableBuilder(root, options={"changelog.num-retained.max": "100"}, **P)
    for s in range(10):
        b.commit([E(ADD, f"f{s}", ("x",))] + ([E(DELETE, f"f{s - 1}", ("x",), file_source=0)] if s % 2 else []))
    expire(b.root, retain_min=1, retain_max=1)
    return b


def changelog_plan(root):
    t = open_table(root)
    opts = plan_kind("changelog", "paimon").resolve_options(t.options, retain_min=1, retain_max=1, time_retained="0 s")
    return plan_changelog(t, now_ms=FAR_FUTURE, options=opts, read=read_changelog(t, now_ms=FAR_FUTURE, options=opts))


def consumers_table(root):
    b = TableBuilder(root, **P)
    b.commit([E(ADD, "a", ("x",))])
    for i in range(4):
        b.consumer(f"c{i}", 1)
        p = os.path.join(root, "consumer", f"consumer-c{i}")
        os.utime(p, ns=(10**15, 10**15))
    return b


def consumers_plan(root):
    t = open_table(root)
    now = int(time.time() * 1000)  # a consumer plan must not be ahead of the clock
    return plan_consumers(t, now_ms=now, options=resolve_consumer_options(t.options, expiration_time="1 d"),
                          read=read_consumer_files(t))


CASES = {"tags": (tags_table, tags_plan), "changelog": (changelog_table, changelog_plan),
         "consumers": (consumers_table, consumers_plan)}


@pytest.mark.parametrize("kind", sorted(CASES))
@pytest.mark.spark
@pytest.mark.slow
def test_a_killed_apply_resumes_to_the_same_table(tmp_path, kind):
    build, make = CASES[kind]
    b = build(str(tmp_path / "t"))
    reference = copy_table(b.root, str(tmp_path / "ref"))
    plan = make(b.root)
    same = make(reference)  # the same plan for the copy (its location differs, so its id does)
    assert len(plan.actions) > 2 and [a.path for a in plan.actions] == [a.path for a in same.actions]
    with DuckDBRecorder(tmp_path / "ref.duckdb") as rec:
        assert apply_plan(same, rec, executor=DriverExecutor()).state == "COMPLETED"
    plan_file = str(tmp_path / "plan.parquet")
    write_plan(plan, plan_file)
    journal = str(tmp_path / "j.duckdb")
    env = dict(os.environ, LAKESWEEP_TEST_CRASH="after-journal:1", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "lakesweep.cli", "apply", plan_file, "--journal", journal,
                           "--master", "local[1]", "-o", "json"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    with DuckDBRecorder(journal) as rec:
        [report] = resume(rec, executor=DriverExecutor())
        assert (report.state, report.resumed, report.whole) == ("COMPLETED", True, True)
    assert all_files(b.root) == all_files(reference)
