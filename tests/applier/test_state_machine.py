"""Stateful test: random commit / tag / plan+apply / crash mid-apply / resume sequences on real Spark, with
the moves that happen between plan and apply: rollback (and recommitting the same ids), tag deletion,
branch creation and commits on the branch, forged plans whose id was recomputed, and plans whose header
was edited (requirements cut to the table identity) to delete a file a retained snapshot reads.

Invariant after every step: every file referenced by a retained snapshot or tag of main, or by any
snapshot or tag of a branch, exists. While a crashed apply is pending, the snapshots below its end are
being expired and are not "retained".
"""

import itertools
import os
import shutil
import tempfile
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import lakesweep.applier.phases as phases_mod
from lakesweep.applier.apply import apply_plan, resume
from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.plan import Action, canonical_actions
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.paimon.requirements import AssertTableIdentity
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.journal.memory_store import MemoryRecorder
from lakesweep.planner.paimon.guard import reachable_paths
from tests.planner.conftest import make_plan
from tests.support.table_builder import ADD, DELETE, E, TableBuilder, all_files


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
        self.live_at: dict[int, list[E]] = {}
        self.saved = None  # a plan made now and applied after later moves (rollback, branch, tag delete...)
        self.branches: dict[str, TableBuilder] = {}
        self.b.commit([E(ADD, "seed", ("a",))])
        self.live.append(E(ADD, "seed", ("a",)))
        self.live_at[1] = list(self.live)

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
        sid = self.b.commit(new + [E(DELETE, g.name, g.partition, size=7) for g in gone])
        self.live = self.live[dels:] + new
        self.live_at[sid] = list(self.live)

    @precondition(lambda self: self.pending_end is None)
    @rule(pick=st.integers(0, 100))
    def rollback(self, pick):
        """Roll back to an older snapshot; the next commits reuse the removed ids with other content."""
        ids = PaimonTable(self.b.root).list_snapshot_ids()
        if len(ids) < 2:
            return
        to = ids[:-1][pick % (len(ids) - 1)]
        self.b.rollback(to)
        self.live = list(self.live_at[to])

    @precondition(lambda self: self.pending_end is None)
    @rule(pick=st.integers(0, 100), recommits=st.integers(1, 4))
    def rollback_and_recommit(self, pick, recommits):
        """Roll back, then commit the same ids again with other content: what the old ids deleted is live again."""
        self.rollback(pick)
        for i in range(recommits):
            self.commit(adds=1, dels=0, part="abc"[i % 3])

    @precondition(lambda self: self.pending_end is None)
    @rule(pick=st.integers(0, 100))
    def delete_tag(self, pick):
        names = PaimonTable(self.b.root).tag_names()
        if names:
            self.b.delete_tag(names[pick % len(names)])

    @precondition(lambda self: self.pending_end is None and len(self.branches) < 2)
    @rule(pick=st.integers(0, 100))
    def create_branch(self, pick):
        ids = PaimonTable(self.b.root).list_snapshot_ids()
        self.branches[f"b{len(self.branches)}"] = self.b.create_branch(f"b{len(self.branches)}", ids[pick % len(ids)])

    @precondition(lambda self: self.pending_end is None and self.branches)
    @rule(pick=st.integers(0, 100), dels=st.integers(0, 2))
    def commit_on_branch(self, pick, dels):
        """Branch commits share main's directories; deleting files main still reads is what makes them risky."""
        branch = self.branches[sorted(self.branches)[pick % len(self.branches)]]
        view = PaimonTable(self.b.root, branch=branch.branch)
        live = view.live_entries(view.snapshot(max(branch.snapshots)))
        gone = [E(DELETE, e.file.file_name, tuple(v for _, v in view.paths.partition_spec(e.partition)),
                  e.bucket, size=e.file.file_size) for e in live[:dels]]
        branch.commit([E(ADD, f"f{next(self.names)}", ("c",), size=7)] + gone)

    @precondition(lambda self: self.pending_end is None and self.saved is None)
    @rule(retain=st.integers(1, 3))
    def plan_for_later(self, retain):
        self.saved = self._plan(retain)

    @precondition(lambda self: self.pending_end is None and self.saved is not None)
    @rule()
    def apply_saved_plan(self):
        """Whatever happened since planning, apply either completes safely (the invariant) or refuses
        before deleting anything."""
        plan, self.saved = self.saved, None
        before = all_files(self.b.root)
        try:
            report = apply_plan(plan, self.recorder, spark=self.spark)
        except PlanRejected:
            assert all_files(self.b.root) == before
            return
        assert report.state == "COMPLETED"

    @precondition(lambda self: self.pending_end is None)
    @rule(pick=st.integers(0, 100))
    def forged_plan(self, pick):
        """A plan edited to delete a file the latest snapshot reads, with its id recomputed: apply refuses it."""
        plan = self._plan(1)
        if plan is None:
            return
        t = PaimonTable(self.b.root)
        entries = t.live_entries(t.snapshot(t.earliest_latest()[1]))
        if not entries:
            return
        e = entries[pick % len(entries)]
        victim = t.paths.relative(t.paths.data_file(e.partition, e.bucket, e.file))
        forged = replace(plan, actions=canonical_actions(
            [replace(a, action_id=-1) for a in plan.actions] + [Action(ActionKind.DATA_FILE, victim, snapshot_id=1)]))
        with pytest.raises(PlanRejected):
            apply_plan(forged, self.recorder, spark=self.spark)

    @precondition(lambda self: self.pending_end is None)
    @rule(retain=st.integers(1, 3), pick=st.integers(0, 1000), part=st.sampled_from("abc"))
    def edited_header(self, retain, pick, part):
        """A plan whose header was edited (its requirements cut to the table identity) and one action added: a
        data file that only snapshots between the plan's end and the latest read (one is written and
        deleted again after planning). Apply's own gate refuses it and deletes nothing."""
        plan = self._plan(retain)
        if plan is None or plan.end is None:
            return
        x = E(ADD, f"f{next(self.names)}", (part,), size=7)
        sid = self.b.commit([x])
        self.live_at[sid] = self.live + [x]
        sid = self.b.commit([E(DELETE, x.name, x.partition, size=7)])
        self.live_at[sid] = list(self.live)
        t = PaimonTable(self.b.root)

        def reads(snapshots):
            return {t.paths.relative(t.paths.data_file(e.partition, e.bucket, e.file))
                    for s in snapshots for e in t.live_entries(s)}

        between = [t.snapshot(i) for i in t.list_snapshot_ids() if plan.end < i < sid]
        held = reads([t.snapshot(plan.end), t.snapshot(sid)] + [g.snapshot for g in t.tags()])
        inside = sorted(reads(between) - held)
        assert inside  # x at least
        victim = inside[pick % len(inside)]
        forged = replace(plan, requirements=tuple(r for r in plan.requirements if isinstance(r, AssertTableIdentity)),
                         actions=canonical_actions([replace(a, action_id=-1) for a in plan.actions]
                                                   + [Action(ActionKind.DATA_FILE, victim, snapshot_id=1)]))
        before = all_files(self.b.root)
        with pytest.raises(PlanRejected):
            apply_plan(forged, self.recorder, spark=self.spark)
        assert all_files(self.b.root) == before

    @precondition(lambda self: self.pending_end is None)
    @rule(pick=st.integers(0, 100))
    def tag(self, pick):
        ids = PaimonTable(self.b.root).list_snapshot_ids()
        self.b.tag(f"tag{next(self.names)}", ids[pick % len(ids)])

    @precondition(lambda self: self.pending_end is None)
    @rule(retain=st.integers(1, 4))
    def plan_and_apply(self, retain):
        plan = self._plan(retain)
        if plan is not None:
            assert apply_plan(plan, self.recorder, spark=self.spark).state == "COMPLETED"

    def _plan(self, retain):
        """A plan, or None when a branch still uses files the plan would delete (the guard refuses it)."""
        try:
            return make_plan(self.b.root, retain_min=retain)
        except PlanRejected as e:
            assert self.branches and "of branch 'b" in str(e), str(e)
            return None

    @precondition(lambda self: self.pending_end is None)
    @rule(retain=st.integers(1, 3), after=st.integers(1, 12))
    def crash_mid_apply(self, retain, after):
        plan = self._plan(retain)
        if plan is None or not plan.deletes_anything:
            return
        original = phases_mod.crash_hook

        def hook(stage, count):
            if stage == "before-journal" and count >= after:
                raise Crash()

        phases_mod.crash_hook = hook
        try:
            apply_plan(plan, self.recorder, spark=self.spark)
        except Crash:
            self.pending_end, self.pending_plan_id = plan.end, plan.plan_id
        finally:
            phases_mod.crash_hook = original

    @precondition(lambda self: self.pending_end is not None)
    @rule()
    def resume_after_crash(self):
        reports = resume(self.recorder, spark=self.spark)
        assert [r.state for r in reports if r.plan_id == self.pending_plan_id] == ["COMPLETED"]
        assert all(r.state in ("COMPLETED", "REFUSED") for r in reports)
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
        for name in self.branches:
            b = PaimonTable(self.b.root, branch=name)
            for sid in b.list_snapshot_ids():
                needed |= reachable_paths(b, b.snapshot(sid), with_changelog=True)
            for tag in b.tags():
                needed |= reachable_paths(b, tag.snapshot, with_changelog=False)
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
