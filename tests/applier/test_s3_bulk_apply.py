"""Applying a plan on S3 with bulk deletes, behind the fault-injecting proxy: the journal is the store's truth
even when another process deletes files during the apply and the store throttles; show's request estimate."""

import collections
import uuid

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import apply_plan
from lakesweep.applier.executors import DriverExecutor, SparkExecutor
from lakesweep.applier.spark_exec import tasks_for
from lakesweep.cli.main import app
from lakesweep.engine.plan import PhaseMode, Verb
from lakesweep.engine.plan_io import read_plan
from lakesweep.engine.s3_bulk import RequestBudget
from lakesweep.journal.events import FileOutcome, RequestsThrottled
from tests.support import pypaimon_tables as pt
from tests.support.s3_proxy import faulty_s3
from tests.support.seaweed import upload_tree

pytestmark = pytest.mark.s3


@pytest.fixture
def proxied(s3_env, monkeypatch):
    """The proxy, with the AWS environment (so plan, apply and the FileIO it ships) pointing at it."""
    with faulty_s3(s3_env) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        yield proxy


def _plan_on_s3(tmp_path, s3_env):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    prefix = f"{s3_env['bucket']}/wh-{uuid.uuid4().hex[:8]}/orders"
    upload_tree(s3_env["fs"], w.path, prefix)
    out = tmp_path / "plan.parquet"
    r = CliRunner().invoke(app, ["plan", "expire", f"s3://{prefix}", "--out", str(out), "--retain-min", "3",
                                 "--time-retained", "0 s", "-o", "json"])
    assert r.exit_code == 0, r.output
    return out, read_plan(str(out))


def _exists(s3_env, path: str) -> bool:
    from pyarrow import fs

    return s3_env["fs"].get_file_info(path[len("s3://"):]).type != fs.FileType.NotFound


def _apply_with_races(tmp_path, s3_env, proxied, recorder, executor):
    out, plan = _plan_on_s3(tmp_path, s3_env)
    bulk = [a for a in plan.actions if a.verb is Verb.DELETE_FILE and plan.phases[a.phase - 1].mode == PhaseMode.BULK]
    target = {a.action_id: f"{plan.table_location}/{a.path}" for a in plan.actions}
    assert len(bulk) >= 6
    before, during = bulk[:2], bulk[2:4]
    for a in before:  # gone before apply looks: ALREADY_ABSENT
        s3_env["fs"].delete_file(target[a.action_id][len("s3://"):])
    raced = []

    def other_process(keys):  # listed by lakesweep, then removed by someone else before its DeleteObjects
        for a in during:
            key = target[a.action_id][len(f"s3://{s3_env['bucket']}/"):]
            if key in keys and a not in raced:
                s3_env["fs"].delete_file(target[a.action_id][len("s3://"):])
                raced.append(a)

    proxied.before_delete_objects = other_process
    proxied.slow_down(2, kinds={"DELETE"})  # DeleteObjects: sent by the bulk phases alone
    report = apply_plan(plan, recorder, executor=executor)

    assert report.state == "COMPLETED" and sorted(a.action_id for a in raced) == sorted(a.action_id for a in during)
    deletes = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    records = {r.action_id: r.outcome for r in recorder.file_records(apply_id=report.apply_id)
               if plan.actions[r.action_id].verb is Verb.DELETE_FILE}
    assert records == {a.action_id: FileOutcome.ALREADY_ABSENT if a in before else FileOutcome.DELETED
                       for a in deletes}
    assert [a.path for a in deletes if _exists(s3_env, target[a.action_id])] == []
    assert proxied.sent["DELETE_ONE"] == len(deletes) - len(bulk)  # only the ordered phases delete one by one
    assert sum(map(len, proxied.delete_requests)) == len(bulk) - len(before)
    throttled = [ev for ev in recorder.events(apply_id=report.apply_id) if isinstance(ev, RequestsThrottled)]
    return throttled, plan


@pytest.mark.slow
def test_bulk_apply_journals_what_the_store_holds_and_the_throttling(tmp_path, s3_env, proxied, recorder):
    throttled, plan = _apply_with_races(tmp_path, s3_env, proxied, recorder,
                                        DriverExecutor(budget=RequestBudget(max_requests_per_second=400.0)))
    # Two SlowDowns halve 400 requests/s twice; one event per throttled task batch.
    assert [(ev.phase, ev.slowdowns, ev.lowest_rate) for ev in throttled] == [(throttled[0].phase, 2, 100.0)]
    assert plan.phases[throttled[0].phase - 1].mode == PhaseMode.BULK


@pytest.mark.slow
def test_bulk_apply_on_spark_tasks(tmp_path, s3_env, proxied, recorder, spark):
    budget = RequestBudget(max_requests_per_second=400.0, max_concurrency=4)
    throttled, plan = _apply_with_races(tmp_path, s3_env, proxied, recorder, SparkExecutor(spark, budget=budget))
    # Each bulk phase of this plan is small enough for one task, which has the whole budget to itself; with
    # more actions, the tasks in flight (at most 2) would share it.
    sizes = collections.Counter(a.phase for a in plan.actions if plan.phases[a.phase - 1].mode == PhaseMode.BULK)
    assert {tasks_for(n, spark.sparkContext.defaultParallelism, budget) for n in sizes.values()} == {(1, 1)}
    assert tasks_for(5000, 2, budget) == (4, 2) and budget.share(2).max_requests_per_second == 200.0
    assert [(ev.slowdowns, ev.lowest_rate) for ev in throttled] == [(2, 100.0)]


def test_show_prints_the_requests_an_apply_sends_and_their_time_at_the_budget(tmp_path, s3_env, proxied):
    out, plan = _plan_on_s3(tmp_path, s3_env)
    r = CliRunner().invoke(app, ["show", str(out), "--max-requests-per-second", "4", "--delete-batch-size", "3"])
    assert r.exit_code == 0, r.output
    bulk = [a for a in plan.actions if a.verb is Verb.DELETE_FILE and plan.phases[a.phase - 1].mode == PhaseMode.BULK]
    ordered = [a for a in plan.actions if a.verb is Verb.DELETE_FILE and a not in bulk]
    from lakesweep.engine.s3_bulk import estimate_requests

    writes = [a for a in plan.actions if a.verb is Verb.WRITE_FILE]
    gets = sum(a.source is not None for a in writes)
    est = estimate_requests([f"{plan.table_location}/{a.path}" for a in bulk], batch=3)
    total = est["LIST"] + est["DELETE"] + 2 * len(ordered) + gets + len(writes)
    assert est["DELETE"] == -(-len(bulk) // 3) and est["LIST"] >= est["DELETE"]
    assert (f"Requests to the store: {est['LIST']} LIST, {est['DELETE'] + len(ordered)} DELETE, "
            f"{len(ordered)} HEAD, {gets} GET, {len(writes)} PUT; {total} in all, {total / 4:.1f} s at 4 "
            "requests/s") in " ".join(r.stdout.split())
