"""Applying a plan: verify, re-check, then execute phase by phase and journal every outcome.

Phases run in the plan's order with a barrier between them: data and extra files, changelog files,
empty directories, metadata (manifests, lists, index files, statistics), changelog metadata, snapshot
files (ascending), the EARLIEST hint last. Bulk phases run as Spark tasks; the ordered ones on the
driver. A phase that still has failures after retries stops the apply (``ApplyFailed``); ``resume``
finishes it later from the journal alone.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from engine.errors import JournalConflict, JournalError, LakesweepError, PlanRejected, SparkUnavailable
from engine.fileio import FileIO
from engine.plan import Action, ActionKind, CleanupPlan, Phase
from engine.plan_io import plan_from_header
from engine.table import open_table
from journal.events import (
    ApplyCompleted,
    ApplyFailed,
    ApplyRefused,
    ApplyStarted,
    FileOutcome,
    FileRecord,
    HintWritten,
    PhaseCompleted,
)
from journal.projection import PlanStatus, RunStatus, incomplete_applies, latest_by_action, plan_state, project
from journal.recorder import Recorder

from applier.actions import ActionResult, Outcome, execute_with_retry, resolve_action_path
from engine.paths import external_roots
from applier.preconditions import check_not_stale, check_unreachable, verify_paths, verify_table

BULK_PHASES = (Phase.DATA_FILES, Phase.CHANGELOG_FILES, Phase.METADATA)


class Progress(Protocol):
    def phase_started(self, phase: Phase, files: int, size: int) -> None: ...
    def advance(self, files: int, size: int) -> None: ...
    def phase_finished(self, phase: Phase) -> None: ...


class _NoProgress:
    def phase_started(self, phase, files, size):
        pass

    def advance(self, files, size):
        pass

    def phase_finished(self, phase):
        pass


@dataclass
class ApplyReport:
    """What an apply did; the CLI prints it and ``--output json`` emits it."""

    plan_id: str
    apply_id: str | None
    state: str  # COMPLETED, FAILED, DRY_RUN, REFUSED (resume without an id: a plan that was refused)
    dry_run: bool = False
    resumed: bool = False
    counts: dict = field(default_factory=lambda: {o.value: 0 for o in FileOutcome})
    bytes_reclaimed: int = 0
    duration_ms: int = 0
    failed_phase: str | None = None
    reason: str | None = None
    phases: list = field(default_factory=list)
    hint: int | None = None

    def to_json(self) -> dict:
        return {
            "plan_id": self.plan_id, "apply_id": self.apply_id, "state": self.state, "dry_run": self.dry_run,
            "resumed": self.resumed, "counts": self.counts, "bytes_reclaimed": self.bytes_reclaimed,
            "duration_ms": self.duration_ms, "failed_phase": self.failed_phase, "reason": self.reason,
            "phases": self.phases, "earliest_hint": self.hint,
        }


def _crash_hook(stage: str, count: int) -> None:
    """Test hook: ``LAKESWEEP_TEST_CRASH=<stage>:<n>`` kills this process with SIGKILL (kill -9) at a
    known point, e.g. after receiving results but before journaling them."""
    spec = os.environ.get("LAKESWEEP_TEST_CRASH")
    if spec:
        want, _, n = spec.partition(":")
        if want == stage and count >= int(n):
            os.kill(os.getpid(), signal.SIGKILL)


# The master URLs Spark's own SparkSubmit accepts (local, local-cluster, standalone, YARN, Kubernetes).
_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]|"
                     r"spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*|yarn|k8s://\S+)$")


class _SparkSession:
    """The Spark session of one apply: the caller's, or one started here on first use and stopped at the end.

    A session that cannot start raises ``SparkUnavailable`` (exit 1) with the first line of Spark's error
    instead of a Java stack trace.
    """

    def __init__(self, spark, master: str, conf: dict[str, str] | None):
        self.spark, self.master, self.conf, self.owned = spark, master, conf, False

    def get(self):
        if self.spark is None:
            if not _MASTER.match(self.master):
                raise SparkUnavailable(
                    f"{self.master!r} is not a Spark master URL: use local[*], local[N], spark://host:7077, "
                    "yarn or k8s://https://host:port. Nothing was deleted and no apply was started."
                )
            from pyspark.sql import SparkSession

            from applier.spark_exec import spark_session

            self.owned = SparkSession.getActiveSession() is None  # never stop someone else's session
            try:
                self.spark = spark_session(self.master, self.conf)
            except LakesweepError:
                raise
            except Exception as e:  # py4j and pyspark raise many types here; all mean "no session"
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:400].rstrip(".")
                raise SparkUnavailable(
                    f"Spark could not start with master {self.master!r}: {first}. Check --master and --conf; "
                    "nothing was deleted and no apply was started."
                ) from e
        return self.spark

    def stop(self) -> None:
        if self.owned and self.spark is not None:
            self.spark.stop()
            self.spark = None


class _Run:
    def __init__(self, plan, recorder, apply_id, fileio, root, external, progress, clock, spark_factory):
        self.plan = plan
        self.recorder = recorder
        self.apply_id = apply_id
        self.fileio = fileio
        self.root = root
        self.external = external
        self.progress = progress
        self.clock = clock
        self.spark_factory = spark_factory
        self.plan_id = plan.plan_id  # a hash over every action: computed once, not per result row
        self.by_id = {a.action_id: a for a in plan.actions}
        self.received = 0
        self.journaled = 0

    def record(self, results: Sequence[ActionResult]) -> None:
        self.received += len(results)
        _crash_hook("before-journal", self.received)
        rows = []
        for r in results:
            a = self.by_id[r.action_id]
            rows.append(FileRecord(
                apply_id=self.apply_id, plan_id=self.plan_id, action_id=a.action_id, path=a.path, kind=a.kind,
                phase=int(a.phase), bytes=a.size, outcome=r.outcome, error=r.error,
                attempt=r.attempts, time_ms=r.finished_ms or self.clock(),
            ))
        self.recorder.record_files(rows)
        self.journaled += len(rows)
        self.progress.advance(len(results), sum(self.by_id[r.action_id].size or 0 for r in results))
        _crash_hook("after-journal", self.journaled)

    def run_phase(self, phase: Phase, actions: list[Action]) -> list[ActionResult]:
        results: list[ActionResult] = []

        def on_batch(batch):
            self.record(batch)
            results.extend(batch)

        if phase in BULK_PHASES and actions:
            from applier.spark_exec import run_on_spark

            run_on_spark(self.spark_factory(), self.fileio, self.root, self.external, actions, on_batch=on_batch)
        else:
            # Order matters here (deepest directories first, snapshots ascending, the hint last):
            # one action at a time on the driver, journaled as it completes.
            for a in actions:
                on_batch([execute_with_retry(self.fileio, self.root, a, external_roots=self.external,
                                             clock_ms=self.clock)])
        return results


def _phase_summary(phase: Phase, n_actions: int, results: Sequence[ActionResult], by_id) -> dict:
    """One row of the report: the phase, its action count, outcome counts and bytes deleted."""
    deleted = sum(by_id[r.action_id].size or 0 for r in results if r.outcome == Outcome.DELETED)
    return {"phase": phase.name.lower(), "actions": n_actions, **_counts(results), "bytes": deleted}


def _counts(results: Sequence[ActionResult]) -> dict:
    c = {o.value: 0 for o in FileOutcome}
    for r in results:
        c[r.outcome.value] += 1
    return c


def apply_plan(
    plan: CleanupPlan,
    recorder: Recorder,
    *,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    fileio: FileIO | None = None,
    spark=None,
    progress: Progress | None = None,
    clock: Callable[[], int] = lambda: int(time.time() * 1000),
    resume_apply_id: str | None = None,
    skip_done: bool = False,
) -> ApplyReport:
    """Apply ``plan`` and journal it. Raises ``PlanRejected``/``StalePlan`` (after journaling the refusal)
    when the plan is foreign, tampered, escapes the table, or is no longer safe."""
    progress = progress or _NoProgress()
    started = clock()
    table = open_table(plan.table_location, fileio, branch=plan.branch)
    recorder.record_plan(plan, recorded_ms=started)

    records = recorder.file_records(plan_id=plan.plan_id)  # every apply of this plan, in sequence order
    prior = project(recorder.events(plan_id=plan.plan_id), records)
    if resume_apply_id is None:
        running = [r.apply_id for r in prior.values() if r.state == RunStatus.RUNNING and not r.dry_run]
        if running:
            raise JournalConflict(
                f"plan {plan.plan_id} has an unfinished apply {running[0]} in this journal; "
                f"finish it with 'lakesweep resume {plan.plan_id}'"
            )
    done_snapshots = {
        r.action_id for r in records
        if r.kind == ActionKind.SNAPSHOT and r.outcome in (FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT)
    }
    done_snapshot_ids = {a.snapshot_id for a in plan.actions if a.action_id in done_snapshots}
    if resume_apply_id is not None:
        if resume_apply_id not in prior:
            raise LakesweepError(f"apply {resume_apply_id} of plan {plan.plan_id} is not in the journal")
        # A kill -9 during the snapshot phase can delete snapshot files before they are journaled: once
        # every earlier phase completed, the plan's own snapshots may be missing.
        earlier = {int(a.phase) for a in plan.actions if a.phase < Phase.SNAPSHOTS}
        if earlier <= set(prior[resume_apply_id].completed_phases):
            done_snapshot_ids |= {a.snapshot_id for a in plan.actions if a.kind == ActionKind.SNAPSHOT}

    def refuse(e: PlanRejected, apply_id: str | None) -> None:
        recorder.append([ApplyRefused(plan_id=plan.plan_id, reason=str(e), refused_ms=clock(), apply_id=apply_id)])

    try:
        verify_table(plan, table)
        verify_paths(plan, table)
        check_not_stale(plan, table, done_snapshot_deletes=done_snapshot_ids)
        check_unreachable(plan, table, plan.actions)
    except PlanRejected as e:
        refuse(e, resume_apply_id)
        raise

    # Actions whose latest record, in any apply of this plan, is not a failure.
    done_anywhere = frozenset(a for a, r in latest_by_action(records).items() if r.outcome != FileOutcome.FAILED)
    done = done_anywhere if (skip_done or resume_apply_id is not None) else frozenset()
    session = _SparkSession(spark, master, conf)
    if any(a.phase in BULK_PHASES and a.action_id not in done for a in plan.actions):
        # Started before ApplyStarted: a master that cannot be reached, a bad --conf or executors that
        # cannot run lakesweep leave no unfinished apply behind.
        session.get()
    try:
        report = _run_phases(plan, recorder, table, done, resume_apply_id, prior, started, master, progress, clock,
                             session, done_snapshot_ids)
    finally:
        session.stop()
    return report


def _run_phases(plan, recorder, table, done, resume_apply_id, prior, started, master, progress, clock, session,
                done_snapshot_ids) -> "ApplyReport":
    if resume_apply_id is None:
        apply_id = uuid.uuid4().hex[:16]
        recorder.append([ApplyStarted(apply_id=apply_id, plan_id=plan.plan_id, n_actions=len(plan.actions),
                                      bytes=sum(a.size or 0 for a in plan.actions), master=master,
                                      dry_run=False, started_ms=started)])
    else:
        apply_id = resume_apply_id

    run = _Run(plan, recorder, apply_id, table.fileio, table.location, external_roots(table.options), progress,
               clock, session.get)
    report = ApplyReport(plan.plan_id, apply_id, "COMPLETED", resumed=resume_apply_id is not None)
    completed = set(prior[apply_id].completed_phases) if resume_apply_id is not None else set()
    for phase in Phase:
        actions = [a for a in plan.actions if a.phase == phase and a.action_id not in done]
        if int(phase) in completed or not any(a.phase == phase for a in plan.actions):
            continue
        try:
            # The live table may have moved on since the last phase: re-check before touching anything,
            # on a view that reads snapshots, tags and schemas anew (manifests already read are reused).
            live = table.refreshed()
            check_not_stale(plan, live, done_snapshot_deletes=done_snapshot_ids)
            check_unreachable(plan, live, actions)
        except PlanRejected as e:
            recorder.append([ApplyFailed(apply_id=apply_id, plan_id=plan.plan_id, reason=f"refused: {e}",
                                         phase=int(phase), finished_ms=clock())])
            raise
        progress.phase_started(phase, len(actions), sum(a.size or 0 for a in actions))
        results = run.run_phase(phase, actions)
        progress.phase_finished(phase)
        done_snapshot_ids |= {run.by_id[r.action_id].snapshot_id for r in results
                              if run.by_id[r.action_id].kind == ActionKind.SNAPSHOT and r.outcome != Outcome.FAILED}
        summary = _phase_summary(phase, len(actions), results, run.by_id)
        report.phases.append(summary)
        failed = [r for r in results if r.outcome == Outcome.FAILED]
        if failed:
            first = run.by_id[failed[0].action_id]
            reason = f"{len(failed)} action(s) of phase {phase.name.lower()} failed; first: {first.path}: {failed[0].error}"
            recorder.append([ApplyFailed(apply_id=apply_id, plan_id=plan.plan_id, reason=reason, phase=int(phase),
                                         finished_ms=clock())])
            report.state, report.failed_phase, report.reason = "FAILED", phase.name.lower(), reason
            break
        recorder.append([PhaseCompleted(apply_id=apply_id, plan_id=plan.plan_id, phase=int(phase),
                                        deleted=summary["DELETED"], already_absent=summary["ALREADY_ABSENT"],
                                        failed=0, written=summary["WRITTEN"], kept=summary["KEPT_NOT_EMPTY"],
                                        bytes=summary["bytes"], finished_ms=clock())])
        if phase == Phase.HINT and plan.earliest_hint is not None:
            recorder.append([HintWritten(apply_id=apply_id, plan_id=plan.plan_id, value=plan.earliest_hint,
                                         written_ms=clock())])
            report.hint = plan.earliest_hint

    final = project(recorder.events(apply_id=apply_id), recorder.file_records(apply_id=apply_id))[apply_id]
    report.counts = {o.value: final.counts.get(o, 0) for o in FileOutcome}
    report.bytes_reclaimed = final.bytes_reclaimed
    report.duration_ms = clock() - started
    if report.state == "COMPLETED":
        recorder.append([ApplyCompleted(apply_id=apply_id, plan_id=plan.plan_id,
                                        deleted=report.counts["DELETED"], already_absent=report.counts["ALREADY_ABSENT"],
                                        failed=report.counts["FAILED"], written=report.counts["WRITTEN"],
                                        kept=report.counts["KEPT_NOT_EMPTY"], bytes_reclaimed=report.bytes_reclaimed,
                                        duration_ms=report.duration_ms, finished_ms=clock())])
    return report


def dry_run_plan(plan: CleanupPlan, *, fileio: FileIO | None = None, master: str = "local[*]",
                 conf: dict[str, str] | None = None, spark=None) -> ApplyReport:
    """Validate the plan against the live table exactly as apply does, and count what apply would do,
    deleting nothing and writing nothing (not even to the journal)."""
    from applier.spark_exec import run_on_spark

    started = int(time.time() * 1000)
    table = open_table(plan.table_location, fileio, branch=plan.branch)
    verify_table(plan, table)
    verify_paths(plan, table)
    check_not_stale(plan, table)
    check_unreachable(plan, table, plan.actions)
    report = ApplyReport(plan.plan_id, None, "DRY_RUN", dry_run=True)
    external = external_roots(table.options)
    bulk = [a for a in plan.actions if a.phase in BULK_PHASES]
    results: list[ActionResult] = []
    session = _SparkSession(spark, master, conf)
    try:
        if bulk:
            run_on_spark(session.get(), table.fileio, table.location, external, bulk, on_batch=results.extend,
                         dry_run=True)
    finally:
        session.stop()
    by_id = {a.action_id: a for a in plan.actions}
    for a in plan.actions:
        if a.phase in BULK_PHASES:
            continue
        if a.kind.deletes:
            exists = table.fileio.exists(resolve_action_path(table.location, a.path, external))
            results.append(ActionResult(a.action_id, Outcome.DELETED if exists else Outcome.ALREADY_ABSENT, 0))
        else:
            results.append(ActionResult(a.action_id, Outcome.WRITTEN, 0))
    for phase in Phase:
        rs = [r for r in results if by_id[r.action_id].phase == phase]
        if rs:
            report.phases.append(_phase_summary(phase, len(rs), rs, by_id))
    report.counts = _counts(results)
    report.bytes_reclaimed = sum(p["bytes"] for p in report.phases)
    report.duration_ms = int(time.time() * 1000) - started
    report.hint = plan.earliest_hint
    return report


def resume(recorder: Recorder, plan_id: str | None = None, **kwargs) -> list[ApplyReport]:
    """Finish every unfinished plan (or only ``plan_id``), rebuilding each plan from the journal.

    A crashed apply (started, never ended) continues under its own id. A failed apply (a phase kept
    failing) is followed by a new apply of the same plan that skips what earlier applies already did.
    Plans that were refused (stale) are not resumed: they need a new plan.
    """
    reports = []
    for pid in ([plan_id] if plan_id is not None else recorder.plan_ids()):
        status = plan_state(recorder, pid)
        if status not in (PlanStatus.APPLYING, PlanStatus.FAILED):
            if plan_id is not None and status != PlanStatus.APPLYING:
                raise LakesweepError(f"plan {pid} is {status.value.lower()}: there is nothing to resume")
            continue
        try:
            reports.append(_resume_one(recorder, pid, kwargs))
        except (JournalError, SparkUnavailable):
            raise  # nothing else can be resumed either
        except LakesweepError as e:
            if plan_id is not None:
                raise
            # Without an id, one refused plan does not keep the others from finishing: report it and go on.
            reports.append(ApplyReport(pid, None, "REFUSED", resumed=True, reason=str(e)))
    return reports


def _resume_one(recorder: Recorder, pid: str, kwargs) -> ApplyReport:
    plan = plan_from_header(recorder.plan_header(pid), recorder.plan_actions(pid), source=f"journal plan {pid}")
    if plan.plan_id != pid:
        raise LakesweepError(f"journal plan {pid} does not hash to its id; the journal is damaged")
    running = [r for r in incomplete_applies(recorder) if r.plan_id == pid and not r.dry_run]
    if running:
        return apply_plan(plan, recorder, resume_apply_id=running[0].apply_id, **kwargs)
    report = apply_plan(plan, recorder, skip_done=True, **kwargs)
    report.resumed = True
    return report
