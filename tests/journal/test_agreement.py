"""Properties: projections equal a plain recount, and both recorders agree on every random journal."""

from __future__ import annotations

import dataclasses
from collections import Counter
from fnmatch import fnmatchcase

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lakesweep.engine.errors import JournalError

from lakesweep.journal.audit import list_files, list_plans
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import ApplyFailed, ApplyRefused, FileOutcome, PlanRecorded, allowed_outcomes
from lakesweep.journal.memory_store import MemoryRecorder
from lakesweep.journal.projection import project
from lakesweep.journal.queries import incomplete_applies, plan_done_actions
from lakesweep.journal.rules import FileQuery
from tests.journal.builders import ACTIONS, completed, make_plan, phase_done, record, started

_SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _outcome(action, choice: int) -> FileOutcome:
    options = sorted(allowed_outcomes(action.verb))
    return options[choice % len(options)]


applies_strategy = st.lists(
    st.tuples(
        st.booleans(),  # dry run
        st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3)), max_size=25),  # (action, outcome) attempts
        st.sampled_from(["crash", "completed", "failed"]),
    ),
    min_size=1, max_size=3,
)


def _journal(recorder, plan, applies, prefix="a") -> list:
    """Write the random applies; returns (apply_id, dry_run, records) as written, for the recount."""
    recorder.record_plan(plan, recorded_ms=1)
    written, t = [], 10
    for i, (dry_run, attempts, end) in enumerate(applies):
        aid = f"{prefix}{i}"
        recorder.append([started(plan, aid, started_ms=t, dry_run=dry_run)])
        tries: Counter = Counter()
        records = []
        for action_choice, outcome_choice in attempts:
            action = plan.actions[action_choice % len(plan.actions)]
            tries[action.action_id] += 1
            t += 1
            records.append(record(plan, action, apply_id=aid, outcome=_outcome(action, outcome_choice),
                                  attempt=tries[action.action_id], time_ms=t))
        for start in range(0, len(records), 8):  # the driver writes in batches
            recorder.record_files(records[start:start + 8])
        if end == "completed":
            recorder.append([completed(plan, aid, finished_ms=t + 1)])
        elif end == "failed":
            recorder.append([ApplyFailed(aid, plan.plan_id, "executor lost", None, t + 1)])
        written.append((aid, dry_run, records))
    return written


@_SETTINGS
@given(subset=st.lists(st.integers(0, len(ACTIONS) - 1), min_size=1, unique=True), applies=applies_strategy)
def test_projection_equals_a_recount_and_both_recorders_agree(subset, applies):
    plan = make_plan([ACTIONS[i] for i in sorted(subset)])
    with MemoryRecorder() as mem, DuckDBRecorder(":memory:") as db:
        written = _journal(mem, plan, applies)
        assert _journal(db, plan, applies) == written
        runs = project(mem.events(), mem.file_records())
        plan_latest = {}  # per action: the latest record, except that DELETED by any apply sticks
        plan_done = {}
        for aid, dry_run, records in written:
            latest = {r.action_id: r for r in records}
            if not dry_run:
                plan_done.update(latest)
                for r in records:
                    a = r.action_id
                    if plan_latest.get(a) is None or plan_latest[a].outcome != FileOutcome.DELETED:
                        plan_latest[a] = r
            recount = Counter(r.outcome for r in latest.values())
            run = runs[aid]
            assert run.counts == {o: recount[o] for o in FileOutcome}
            assert run.done == {a for a, r in latest.items() if r.outcome != FileOutcome.FAILED}
            assert run.failed == {a for a, r in latest.items() if r.outcome == FileOutcome.FAILED}
            assert run.bytes_reclaimed == sum(r.bytes or 0 for r in latest.values() if r.outcome == "DELETED")
            for recorder in (mem, db):  # the journal's own count of the apply agrees with the fold
                totals = recorder.apply_totals(aid)
                assert {o: n for o, (n, _) in totals.items()} == run.counts
                assert totals[FileOutcome.DELETED][1] == run.bytes_reclaimed
        plan_recount = Counter(r.outcome for r in plan_latest.values())
        [row] = list_plans(mem)
        assert (row["deleted"], row["already_absent"], row["failed"], row["written"], row["kept"]) == (
            plan_recount["DELETED"], plan_recount["ALREADY_ABSENT"], plan_recount["FAILED"],
            plan_recount["WRITTEN"], plan_recount["KEPT_NOT_EMPTY"])
        assert plan_done_actions(mem, plan.plan_id) == {a for a, r in plan_done.items() if r.outcome != "FAILED"}
        everything = {}  # dry runs included: done_actions leaves out only the applies it is told to
        for _, _, records in written:
            everything.update({r.action_id: r for r in records})
        for recorder in (mem, db):
            assert recorder.done_actions(plan.plan_id) == {a for a, r in everything.items() if r.outcome != "FAILED"}

        assert project(db.events(), db.file_records()) == runs
        assert list_plans(db) == list_plans(mem)
        assert list_files(db) == list_files(mem)
        assert incomplete_applies(db) == incomplete_applies(mem)
        assert plan_done_actions(db, plan.plan_id) == plan_done_actions(mem, plan.plan_id)


PLANS = (make_plan(), make_plan(ACTIONS[:4], table="/u", identity="schema:def"))
FILE_QUERIES = (FileQuery(), FileQuery(table="/u"), FileQuery(table="schema:abc", kind="data-file"),
                FileQuery(outcome="FAILED"), FileQuery(path_glob="dt=[!1]/*", limit=3), FileQuery(since_ms=8),
                FileQuery(apply_id="a1", outcome="DELETED"), FileQuery(table="/u", limit=2),
                FileQuery(plan_id=PLANS[1].plan_id, since_ms=15, limit=4), FileQuery(table="/nowhere"),
                FileQuery(apply_id="b0", limit=1), FileQuery(path_glob="*snapshot-?", outcome="DELETED"))


def _filtered(recorder, query: FileQuery) -> list[dict]:
    """``file_rows`` (but its ``seq``) worked out in Python: every record in order, with its plan's table and
    its action's snapshot id where the plan is recorded, kept when each filter given holds."""
    tables = {e.plan_id: (e.table_location, e.table_identity) for e in recorder.events() if isinstance(e, PlanRecorded)}
    snapshots = {p.plan_id: {a.action_id: a.snapshot_id for a in p.actions} for p in PLANS if p.plan_id in tables}
    rows = []
    for r in recorder.file_records():
        table, identity = tables.get(r.plan_id, (None, None))
        wanted = {"plan_id": r.plan_id, "apply_id": r.apply_id, "kind": str.__str__(r.kind),
                  "outcome": r.outcome.value}
        if any(getattr(query, k) not in (None, v) for k, v in wanted.items()):
            continue
        if query.table is not None and query.table not in (table, identity):
            continue
        if query.since_ms is not None and r.time_ms < query.since_ms:
            continue
        if query.path_glob is not None and not fnmatchcase(r.path, query.path_glob):
            continue
        rows.append({"plan_id": r.plan_id, "apply_id": r.apply_id, "table": table, "table_identity": identity,
                     "action_id": r.action_id, "path": r.path, "kind": str.__str__(r.kind), "phase": r.phase,
                     "snapshot_id": snapshots.get(r.plan_id, {}).get(r.action_id), "outcome": r.outcome.value,
                     "error": r.error, "attempt": r.attempt, "bytes": r.bytes, "time_ms": r.time_ms,
                     "moved_to": r.moved_to})
    return rows if query.limit is None else rows[:query.limit]


@_SETTINGS
@given(first=applies_strategy, second=applies_strategy)
def test_the_file_records_listed_are_those_a_plain_filter_keeps(first, second):
    """Two plans of two tables in one journal: every query lists the records a filter over all of them keeps,
    in order, with their plan's table and their action's snapshot id, and counts them whatever the limit."""
    with MemoryRecorder() as mem, DuckDBRecorder(":memory:") as db:
        for recorder in (mem, db):
            _journal(recorder, PLANS[0], first)
            _journal(recorder, PLANS[1], second, prefix="b")
        for query in FILE_QUERIES:
            expected = _filtered(mem, query)
            for recorder in (mem, db):
                rows = recorder.file_rows(query)
                assert [{k: v for k, v in row.items() if k != "seq"} for row in rows] == expected
                assert [row["seq"] for row in rows] == sorted({row["seq"] for row in rows})
                assert recorder.file_count(query) == len(_filtered(mem, dataclasses.replace(query, limit=None)))


class RecordersAgree(RuleBasedStateMachine):
    """Random operations, legal or not, against both recorders: same results, same refusals, and the same
    answer to every query (both run the rules of journal/rules.py, each over its own storage)."""

    def __init__(self):
        super().__init__()
        self.mem, self.db = MemoryRecorder(), DuckDBRecorder(":memory:")
        self.applies: list[tuple[str, int]] = []  # (apply id, plan index)
        self.t = 0

    def teardown(self):
        self.mem.close()
        self.db.close()

    def both(self, op):
        results = []
        for recorder in (self.mem, self.db):
            try:
                results.append(("ok", op(recorder)))
            except JournalError as e:
                results.append((type(e).__name__, str(e)))
        assert results[0] == results[1]
        return results[0]

    def tick(self) -> int:
        self.t += 1
        return self.t

    @rule(p=st.sampled_from([0, 1]))
    def record_plan(self, p):
        t = self.tick()
        self.both(lambda r: r.record_plan(PLANS[p], recorded_ms=t))

    @rule(p=st.sampled_from([0, 1]), dry_run=st.booleans())
    def start(self, p, dry_run):
        aid, t = f"a{len(self.applies)}", self.tick()
        if self.both(lambda r: r.append([started(PLANS[p], aid, started_ms=t, dry_run=dry_run)]))[0] == "ok":
            self.applies.append((aid, p))

    @precondition(lambda self: self.applies)
    @rule(a=st.integers(0, 10), actions=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 3)), max_size=5))
    def record_files(self, a, actions):
        aid, p = self.applies[a % len(self.applies)]
        plan = PLANS[p]
        picked = [plan.actions[i % len(plan.actions)] for i, _ in actions]
        recs = [record(plan, act, apply_id=aid, outcome=_outcome(act, o), time_ms=self.tick())
                for act, (_, o) in zip(picked, actions)]
        self.both(lambda r: r.record_files(recs))

    @precondition(lambda self: self.applies)
    @rule(a=st.integers(0, 10), phase=st.integers(1, 7), end=st.sampled_from(["phase", "done", "fail", "refuse"]))
    def lifecycle(self, a, phase, end):
        aid, p = self.applies[a % len(self.applies)]
        plan, t = PLANS[p], self.tick()
        event = {"phase": phase_done(plan, phase, aid, finished_ms=t), "done": completed(plan, aid, finished_ms=t),
                 "fail": ApplyFailed(aid, plan.plan_id, "boom", phase, t),
                 "refuse": ApplyRefused(plan.plan_id, "stale", t, apply_id=aid)}[end]
        self.both(lambda r: r.append([event]))

    @invariant()
    def same_journal(self):
        assert self.db.events() == self.mem.events()
        assert self.db.file_records() == self.mem.file_records()
        self.both(lambda r: project(r.events(), r.file_records()))
        self.both(list_plans)

    @invariant()
    def same_answers_as_the_fold(self):
        """What resume skips and what an apply reports come from the journal's queries; both recorders give
        them, and they equal the fold over every record."""
        runs = project(self.mem.events(), self.mem.file_records())
        for plan in PLANS:
            self.both(lambda r: plan_done_actions(r, plan.plan_id))
            latest = {}
            for rec in self.mem.file_records(plan_id=plan.plan_id):
                latest[rec.action_id] = rec
            expected = frozenset(a for a, rec in latest.items() if rec.outcome != FileOutcome.FAILED)
            assert self.both(lambda r: r.done_actions(plan.plan_id)) == ("ok", expected)
        for aid, _ in self.applies:
            totals = self.both(lambda r: r.apply_totals(aid))[1]
            if aid in runs:
                assert {o: n for o, (n, _) in totals.items()} == runs[aid].counts
                assert totals[FileOutcome.DELETED][1] == runs[aid].bytes_reclaimed

    @rule(query=st.sampled_from(FILE_QUERIES), exclude=st.sampled_from(["none", "first", "every other"]))
    def ask(self, query, exclude):
        """Any query, at any point: both answer alike (the invariants ask the ones resume and apply use), and
        the file records they list are those a plain filter over every record keeps."""
        rows = self.both(lambda r: r.file_rows(query))[1]
        assert [{k: v for k, v in row.items() if k != "seq"} for row in rows] == _filtered(self.mem, query)
        assert [row["seq"] for row in rows] == sorted({row["seq"] for row in rows})
        assert self.both(lambda r: r.file_count(query)) == ("ok", len(_filtered(self.mem, dataclasses.replace(
            query, limit=None))))
        applies = [aid for aid, _ in self.applies]
        excluded = {"none": [], "first": applies[:1], "every other": applies[1::2]}[exclude]
        every = self.both(lambda r: r.all_outcome_totals(exclude_applies=excluded))[1]
        for plan in PLANS:
            totals = self.both(lambda r: r.outcome_totals(plan.plan_id, exclude_applies=excluded))[1]
            # the shortcut for plans without repeated records counts as the ranking; no records: zeros
            assert every.get(plan.plan_id, {o: (0, 0) for o in FileOutcome}) == totals
            self.both(lambda r: r.done_actions(plan.plan_id, exclude_applies=excluded))
        self.both(lambda r: r.plan_ids())


RecordersAgree.TestCase.settings = settings(max_examples=12, stateful_step_count=10, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
TestRecordersAgree = RecordersAgree.TestCase
