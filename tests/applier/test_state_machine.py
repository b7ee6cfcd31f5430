"""Stateful test: random commit / tag / plan+apply / crash mid-apply / resume sequences on real Spark.

Invariant after every step: every file referenced by a retained snapshot or a tag exists. While a
crashed apply is pending, the snapshots below its end are being expired and are not "retained".
"""

import itertools
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import applier.apply as apply_mod
from applier.apply import apply_plan, resume
from engine.table import PaimonTable
from journal.recorder import MemoryRecorder
from planner.guard import reachable_paths
from tests.planner.conftest import make_plan
from tests.support.table_builder import ADD, DELETE, E, TableBuilder


class Crash(BaseException):
    """Stands in for kill -9 in-process: nothing after it runs, the journal keeps what it had."""


class ExpiryMachine(RuleBasedStateMachine):
    spark = None

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lakesweep-sm-")
        self.b = TableBuilder(os.path.join(self.dir, "t"), partition_keys=("dt",), partition_types=("STRING",),
                              options={"snapshot.clean-empty-directories": "true"})
        self.recorder = MemoryRecorder()
        self.live: list[E] = []
        self.names = itertools.count()
        self.pending_end = None
        self.b.commit([E(ADD, "seed", ("a",))])
        self.live.append(E(ADD, "seed", ("a",)))

    def teardown(self):
        self.recorder.close()
        shutil.rmtree(self.dir)

    @precondition(lambda self: self.pending_end is None)
    @rule(adds=st.integers(0, 3), dels=st.integers(0, 2), part=st.sampled_from("abc"))
    def commit(self, adds, dels, part):
        new = [E(ADD, f"f{next(self.names)}", (part,), size=7) for _ in range(adds)]
        gone = self.live[:dels]
        if not new and not gone:
            new = [E(ADD, f"f{next(self.names)}", (part,), size=7)]
        self.b.commit(new + [E(DELETE, g.name, g.partition, size=7) for g in gone])
        self.live = self.live[dels:] + new

    @precondition(lambda self: self.pending_end is None)
    @rule(pick=st.integers(0, 100))
    def tag(self, pick):
        ids = PaimonTable(self.b.root).list_snapshot_ids()
        self.b.tag(f"tag{next(self.names)}", ids[pick % len(ids)])

    @precondition(lambda self: self.pending_end is None)
    @rule(retain=st.integers(1, 4))
    def plan_and_apply(self, retain):
        plan = make_plan(self.b.root, retain_min=retain)
        assert apply_plan(plan, self.recorder, spark=self.spark).state == "COMPLETED"

    @precondition(lambda self: self.pending_end is None)
    @rule(retain=st.integers(1, 3), after=st.integers(1, 12))
    def crash_mid_apply(self, retain, after):
        plan = make_plan(self.b.root, retain_min=retain)
        if not plan.deletes_anything:
            return
        original = apply_mod._crash_hook

        def hook(stage, count):
            if stage == "before-journal" and count >= after:
                raise Crash()

        apply_mod._crash_hook = hook
        try:
            apply_plan(plan, self.recorder, spark=self.spark)
        except Crash:
            self.pending_end = plan.end
        finally:
            apply_mod._crash_hook = original

    @precondition(lambda self: self.pending_end is not None)
    @rule()
    def resume_after_crash(self):
        reports = resume(self.recorder, spark=self.spark)
        assert [r.state for r in reports] == ["COMPLETED"]
        self.pending_end = None

    @invariant()
    def retained_snapshots_and_tags_are_whole(self):
        t = PaimonTable(self.b.root)
        earliest, latest = t.earliest_latest()
        keep_from = self.pending_end if self.pending_end is not None else earliest
        needed = set()
        for sid in t.list_snapshot_ids():
            if sid >= keep_from:
                needed |= reachable_paths(t, t.snapshot(sid), with_changelog=True)
        for tag in t.tags():
            needed |= reachable_paths(t, tag.snapshot, with_changelog=False)
        missing = sorted(p for p in needed if not os.path.exists(p))
        assert not missing, missing[:5]


def run_machine(spark, examples: int, steps: int) -> None:
    ExpiryMachine.spark = spark
    runner = ExpiryMachine.TestCase
    runner.settings = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                               suppress_health_check=list(HealthCheck))
    runner().runTest()


def test_expiry_state_machine(spark):
    run_machine(spark, examples=25, steps=12)


@pytest.mark.slow
def test_expiry_state_machine_long(spark):
    run_machine(spark, examples=150, steps=25)
