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
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from engine.errors import JournalConflict, JournalError, LakesweepError, PlanRejected, SparkUnavailable
from engine.fileio import FileIO
from engine.plan import Action, ActionKind, CleanupPlan, Phase
from engine.plan_io import plan_from_header
from engine.paimon.table import open_table
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
from journal.projection import PlanStatus, RunStatus, project
from journal.queries import plan_done_actions, plan_state, unfinished_apply
from journal.recorder import Recorder
from journal.rules import FileQuery

from applier.actions import ActionResult, Outcome, execute_with_retry, resolve_action_path
from engine.paimon.paths import external_roots
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


class BulkExecutor(Protocol):
    """Runs the actions of the bulk phases (data, changelog and metadata files) and hands their results
    back, in batches, to ``on_batch`` on the driver. ``prepare`` may begin getting ready while the plan is
    checked (it must not fail); ``start`` is called before the apply is journaled as started, when bulk
    work remains, and raises if the executor cannot run; ``stop`` at the end, always."""

    def prepare(self) -> None: ...

    def start(self) -> None: ...

    def run(self, fileio: FileIO, root: str, external: Sequence[str], actions: Sequence[Action], *,
            on_batch: Callable[[list[ActionResult]], None], dry_run: bool = False) -> None: ...

    def stop(self) -> None: ...


class SparkExecutor:
    """Bulk phases as Spark tasks (``applier.spark_exec.run_on_spark``): what ``apply`` and ``resume`` use."""

    def __init__(self, spark=None, master: str = "local[*]", conf: dict[str, str] | None = None):
        self.session = _SparkSession(spark, master, conf)
        self._starting: threading.Thread | None = None
        self._error: BaseException | None = None

    def prepare(self) -> None:
        """Start the session on a thread while the driver checks the plan: the JVM boots in its own
        process, so the seconds it takes overlap the checks. An error is kept for ``start`` to raise."""
        if self._starting is not None or self.session.spark is not None:
            return
        from pyspark import SparkContext

        if SparkContext._active_spark_context is not None:
            return  # this process has a session already: get() decides, in the caller's thread, whose it is

        def boot() -> None:
            try:
                self.session.get()
            except BaseException as e:  # raised again by start(), in the caller's thread
                self._error = e

        self._starting = threading.Thread(target=boot, name="lakesweep-spark-start", daemon=True)
        self._starting.start()

    def _joined(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None

    def start(self) -> None:
        self._joined()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        self.session.get()

    def run(self, fileio, root, external, actions, *, on_batch, dry_run=False) -> None:
        from applier.spark_exec import run_on_spark

        run_on_spark(self.session.get(), fileio, root, external, actions, on_batch=on_batch, dry_run=dry_run)

    def stop(self) -> None:
        self._joined()
        self.session.stop()


class DriverExecutor:
    """Bulk phases in this process, one action after another, through the very code a Spark task runs
    (``applier.spark_exec.execute_rows``, rows encoded as they are for Spark). For tests and measurements:
    no Spark session, no parallelism."""

    def __init__(self, batch: int | None = None):
        self.batch = batch

    def prepare(self) -> None:
        pass

    def start(self) -> None:
        pass

    def run(self, fileio, root, external, actions, *, on_batch, dry_run=False) -> None:
        from applier.spark_exec import DEFAULT_BATCH, execute_rows, task_row

        for rows in execute_rows(map(task_row, actions), fileio, root, list(external), dry_run,
                                 self.batch or DEFAULT_BATCH):
            on_batch([ActionResult(i, Outcome(o), att, err, ms) for (i, o, att, err, ms) in rows])

    def stop(self) -> None:
        pass


def actions_by_phase(actions: Sequence[Action]) -> dict[Phase, list[Action]]:
    """The plan's actions grouped by phase, in plan order, in one pass (phases without actions are absent)."""
    groups: dict[Phase, list[Action]] = {}
    for a in actions:
        groups.setdefault(a.kind.phase, []).append(a)
    return groups


_DRIVER_BATCH = 500  # driver-phase results journaled together: at most this many...
_DRIVER_BATCH_S = 1.0  # ...or this many seconds' worth
_BULK_JOURNAL_BATCH = 5000  # bulk results arrive in task batches; the journal takes them this many at a time


class _Tally:
    """One phase's results as they arrive: outcome counts, bytes deleted, failures, snapshots done."""

    def __init__(self):
        self.counts = {o.value: 0 for o in FileOutcome}
        self.deleted_bytes = 0
        self.failed = 0
        self.first_failure: tuple[Action, str | None] | None = None
        self.snapshots_done: set[int] = set()

    def add(self, a: Action, r: ActionResult) -> None:
        self.counts[r.outcome.value] += 1
        if r.outcome == Outcome.DELETED:
            self.deleted_bytes += a.size or 0
        if r.outcome == Outcome.FAILED:
            self.failed += 1
            if self.first_failure is None:
                self.first_failure = (a, r.error)
        elif a.kind == ActionKind.SNAPSHOT:
            self.snapshots_done.add(a.snapshot_id)

    def summary(self, phase: Phase, n_actions: int) -> dict:
        """One row of the report: the phase, its action count, outcome counts and bytes deleted."""
        return {"phase": phase.name.lower(), "actions": n_actions, **self.counts, "bytes": self.deleted_bytes}


class _Run:
    def __init__(self, plan, plan_id, recorder, apply_id, fileio, root, external, progress, clock, executor):
        self.actions = plan.actions  # canonical: an action's id is its index
        self.plan_id = plan_id
        self.recorder = recorder
        self.apply_id = apply_id
        self.fileio = fileio
        self.root = root
        self.external = external
        self.progress = progress
        self.clock = clock
        self.executor = executor
        self.received = 0
        self.journaled = 0

    def record(self, results: Sequence[ActionResult], tally: _Tally) -> None:
        self.received += len(results)
        _crash_hook("before-journal", self.received)
        rows = []
        size = 0
        for r in results:
            a = self.actions[r.action_id]
            tally.add(a, r)
            size += a.size or 0
            rows.append(FileRecord(
                apply_id=self.apply_id, plan_id=self.plan_id, action_id=a.action_id, path=a.path, kind=a.kind,
                phase=int(a.kind.phase), bytes=a.size, outcome=r.outcome, error=r.error,
                attempt=r.attempts, time_ms=r.finished_ms or self.clock(),
            ))
        self.recorder.record_files(rows)
        self.journaled += len(rows)
        self.progress.advance(len(results), size)
        _crash_hook("after-journal", self.journaled)

    def run_phase(self, phase: Phase, actions: list[Action]) -> _Tally:
        tally = _Tally()
        if not actions:
            return tally
        if phase in BULK_PHASES:
            # One journal transaction per task batch costs more than the deletes of a fast file system;
            # results are gathered up to _BULK_JOURNAL_BATCH (or a second's worth) per transaction.
            gathered: list[ActionResult] = []
            since = time.monotonic()

            def on_batch(batch: list[ActionResult]) -> None:
                nonlocal since
                gathered.extend(batch)
                if len(gathered) >= _BULK_JOURNAL_BATCH or time.monotonic() - since >= _DRIVER_BATCH_S:
                    self.record(gathered, tally)
                    gathered.clear()
                    since = time.monotonic()

            self.executor.run(self.fileio, self.root, self.external, actions, on_batch=on_batch)
            if gathered:
                self.record(gathered, tally)
            return tally
        # Order matters here (deepest directories first, snapshots ascending, the hint last): one action at
        # a time on the driver, journaled in batches. An action done but not journaled when the process
        # dies is found done again by resume (ALREADY_ABSENT, or the same bytes written again).
        pending: list[ActionResult] = []
        flushed = time.monotonic()
        for a in actions:
            pending.append(execute_with_retry(self.fileio, self.root, a, external_roots=self.external,
                                              clock_ms=self.clock))
            if len(pending) >= _DRIVER_BATCH or time.monotonic() - flushed >= _DRIVER_BATCH_S:
                self.record(pending, tally)
                pending, flushed = [], time.monotonic()
        if pending:
            self.record(pending, tally)
        return tally


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
    executor: BulkExecutor | None = None,
) -> ApplyReport:
    """Apply ``plan`` and journal it. Raises ``PlanRejected``/``StalePlan`` (after journaling the refusal)
    when the plan is foreign, tampered, escapes the table, or is no longer safe.

    Bulk phases run on Spark (``spark``, or a session started with ``master`` and ``conf``) unless an
    ``executor`` is given. Everything per plan (its id, its phases, what earlier applies did) is worked out
    once; each result batch then costs in proportion to its size."""
    progress = progress or _NoProgress()
    started = clock()
    plan_id = plan.plan_id
    table = open_table(plan.table_location, fileio, branch=plan.branch)
    recorder.record_plan(plan, recorded_ms=started)

    prior = project(recorder.events(plan_id=plan_id))  # the lifecycle of every apply of this plan
    if resume_apply_id is None:
        running = [aid for aid, r in prior.items() if r.state == RunStatus.RUNNING and not r.dry_run]
        if running:
            raise JournalConflict(
                f"plan {plan_id} has an unfinished apply {running[0]} in this journal; "
                f"finish it with 'lakesweep resume {plan_id}'"
            )
    by_phase = actions_by_phase(plan.actions)
    # Snapshots any apply of this plan deleted (or found gone): they may be missing from the table now.
    done_snapshot_ids = {
        row["snapshot_id"] for row in recorder.file_rows(FileQuery(plan_id=plan_id, kind=ActionKind.SNAPSHOT.value))
        if row["outcome"] in (FileOutcome.DELETED.value, FileOutcome.ALREADY_ABSENT.value)
    }
    if resume_apply_id is not None:
        if resume_apply_id not in prior:
            raise LakesweepError(f"apply {resume_apply_id} of plan {plan_id} is not in the journal")
        # A kill -9 during the snapshot phase can delete snapshot files before they are journaled: once
        # every earlier phase completed, the plan's own snapshots may be missing.
        earlier = {int(p) for p in by_phase if p < Phase.SNAPSHOTS}
        if earlier <= set(prior[resume_apply_id].completed_phases):
            done_snapshot_ids |= {a.snapshot_id for a in by_phase.get(Phase.SNAPSHOTS, ())}

    def refuse(e: PlanRejected, apply_id: str | None) -> None:
        recorder.append([ApplyRefused(plan_id=plan_id, reason=str(e), refused_ms=clock(), apply_id=apply_id)])

    # Actions whose latest record, in any apply of this plan, is not a failure: the journal's answer.
    done = plan_done_actions(recorder, plan_id) if (skip_done or resume_apply_id is not None) else frozenset()
    bulk_left = any(a.action_id not in done for p in BULK_PHASES for a in by_phase.get(p, ()))
    executor = executor or SparkExecutor(spark, master, conf)
    try:
        if bulk_left:
            executor.prepare()  # Spark boots while the plan is checked; nothing runs on it before start()
        try:
            verify_table(plan, table)
            targets = verify_paths(plan, table)
            check_not_stale(plan, table, done_snapshot_deletes=done_snapshot_ids)
            check_unreachable(plan, table, plan.actions, targets)
        except PlanRejected as e:
            refuse(e, resume_apply_id)
            raise
        if bulk_left:
            # Started before ApplyStarted: a master that cannot be reached, a bad --conf or executors that
            # cannot run lakesweep leave no unfinished apply behind.
            executor.start()
        report = _run_phases(plan, plan_id, by_phase, recorder, table, done, resume_apply_id, prior, started,
                             master, progress, clock, executor, done_snapshot_ids, targets)
    finally:
        executor.stop()
    return report


def _run_phases(plan, plan_id, by_phase, recorder, table, done, resume_apply_id, prior, started, master, progress,
                clock, executor, done_snapshot_ids, targets) -> "ApplyReport":
    if resume_apply_id is None:
        apply_id = uuid.uuid4().hex[:16]
        recorder.append([ApplyStarted(apply_id=apply_id, plan_id=plan_id, n_actions=len(plan.actions),
                                      bytes=sum(a.size or 0 for a in plan.actions), master=master,
                                      dry_run=False, started_ms=started)])
    else:
        apply_id = resume_apply_id

    run = _Run(plan, plan_id, recorder, apply_id, table.fileio, table.location, external_roots(table.options),
               progress, clock, executor)
    report = ApplyReport(plan_id, apply_id, "COMPLETED", resumed=resume_apply_id is not None)
    completed = set(prior[apply_id].completed_phases) if resume_apply_id is not None else set()
    for phase in Phase:
        in_phase = by_phase.get(phase)
        if int(phase) in completed or not in_phase:
            continue
        actions = [a for a in in_phase if a.action_id not in done] if done else in_phase
        try:
            # The live table may have moved on since the last phase: re-check before touching anything,
            # on a view that reads snapshots, tags and schemas anew (manifests already read are reused).
            live = table.refreshed()
            check_not_stale(plan, live, done_snapshot_deletes=done_snapshot_ids)
            check_unreachable(plan, live, actions, targets)
        except PlanRejected as e:
            recorder.append([ApplyFailed(apply_id=apply_id, plan_id=plan_id, reason=f"refused: {e}",
                                         phase=int(phase), finished_ms=clock())])
            raise
        progress.phase_started(phase, len(actions), sum(a.size or 0 for a in actions))
        tally = run.run_phase(phase, actions)
        progress.phase_finished(phase)
        done_snapshot_ids |= tally.snapshots_done
        summary = tally.summary(phase, len(actions))
        report.phases.append(summary)
        if tally.failed:
            first, error = tally.first_failure
            reason = f"{tally.failed} action(s) of phase {phase.name.lower()} failed; first: {first.path}: {error}"
            recorder.append([ApplyFailed(apply_id=apply_id, plan_id=plan_id, reason=reason, phase=int(phase),
                                         finished_ms=clock())])
            report.state, report.failed_phase, report.reason = "FAILED", phase.name.lower(), reason
            break
        recorder.append([PhaseCompleted(apply_id=apply_id, plan_id=plan_id, phase=int(phase),
                                        deleted=summary["DELETED"], already_absent=summary["ALREADY_ABSENT"],
                                        failed=0, written=summary["WRITTEN"], kept=summary["KEPT_NOT_EMPTY"],
                                        bytes=summary["bytes"], finished_ms=clock())])
        if phase == Phase.HINT and plan.earliest_hint is not None:
            recorder.append([HintWritten(apply_id=apply_id, plan_id=plan_id, value=plan.earliest_hint,
                                         written_ms=clock())])
            report.hint = plan.earliest_hint

    # What this apply did, by each action's latest record, counted by the journal (a resumed apply
    # includes what it did before the crash).
    totals = recorder.apply_totals(apply_id)
    report.counts = {o.value: totals[o][0] for o in FileOutcome}
    report.bytes_reclaimed = totals[FileOutcome.DELETED][1]
    report.duration_ms = clock() - started
    if report.state == "COMPLETED":
        recorder.append([ApplyCompleted(apply_id=apply_id, plan_id=plan_id,
                                        deleted=report.counts["DELETED"], already_absent=report.counts["ALREADY_ABSENT"],
                                        failed=report.counts["FAILED"], written=report.counts["WRITTEN"],
                                        kept=report.counts["KEPT_NOT_EMPTY"], bytes_reclaimed=report.bytes_reclaimed,
                                        duration_ms=report.duration_ms, finished_ms=clock())])
    return report


def dry_run_plan(plan: CleanupPlan, *, fileio: FileIO | None = None, master: str = "local[*]",
                 conf: dict[str, str] | None = None, spark=None, executor: BulkExecutor | None = None) -> ApplyReport:
    """Validate the plan against the live table exactly as apply does, and count what apply would do,
    deleting nothing and writing nothing (not even to the journal)."""
    started = int(time.time() * 1000)
    table = open_table(plan.table_location, fileio, branch=plan.branch)
    verify_table(plan, table)
    targets = verify_paths(plan, table)
    check_not_stale(plan, table)
    check_unreachable(plan, table, plan.actions, targets)
    report = ApplyReport(plan.plan_id, None, "DRY_RUN", dry_run=True)
    external = external_roots(table.options)
    by_phase = actions_by_phase(plan.actions)
    tallies = {phase: _Tally() for phase in by_phase}

    def tally(batch: Sequence[ActionResult]) -> None:
        for r in batch:
            a = plan.actions[r.action_id]
            tallies[a.kind.phase].add(a, r)

    bulk = [a for p in BULK_PHASES for a in by_phase.get(p, ())]  # one job for every bulk phase
    executor = executor or SparkExecutor(spark, master, conf)
    try:
        if bulk:
            executor.start()
            executor.run(table.fileio, table.location, external, bulk, on_batch=tally, dry_run=True)
    finally:
        executor.stop()
    for phase, actions in by_phase.items():
        if phase in BULK_PHASES:
            continue
        for a in actions:
            if a.kind.deletes:
                exists = table.fileio.exists(targets[a.action_id])
                tally([ActionResult(a.action_id, Outcome.DELETED if exists else Outcome.ALREADY_ABSENT, 0)])
            else:
                tally([ActionResult(a.action_id, Outcome.WRITTEN, 0)])
    for phase in Phase:
        if phase in tallies:
            report.phases.append(tallies[phase].summary(phase, len(by_phase[phase])))
    report.counts = {o.value: sum(p[o.value] for p in report.phases) for o in FileOutcome}
    report.bytes_reclaimed = sum(p["bytes"] for p in report.phases)
    report.duration_ms = int(time.time() * 1000) - started
    report.hint = plan.earliest_hint
    return report


def resume(recorder: Recorder, plan_id: str | None = None, **kwargs) -> list[ApplyReport]:
    """Finish every unfinished plan (or only ``plan_id``), rebuilding each plan from the journal.

    A crashed apply (started, never ended) continues under its own id. A failed apply (a phase kept
    failing) is followed by a new apply of the same plan that skips what earlier applies already did.
    Plans that were refused (stale) are not resumed: they need a new plan. What is left is worked out by
    the journal (``Recorder.done_actions``), not by reading back every record.
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
    running = unfinished_apply(recorder, pid)
    if running is not None:
        return apply_plan(plan, recorder, resume_apply_id=running, **kwargs)
    report = apply_plan(plan, recorder, skip_done=True, **kwargs)
    report.resumed = True
    return report
