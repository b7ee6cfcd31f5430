"""``lakesweep maintain``: every table of a catalog (Iceberg) or warehouse directory (Paimon) in scope, each
operation planned, written, applied and its result journaled, in the canonical order of SeaweedFS's
maintenance worker: compact, expire, orphans, rewrite-manifests (Paimon: expire, orphans, partitions), then
a purge of what this journal holds in quarantine for the table, when it holds any.

Detection reads metadata only and says which operations a table needs; thresholds are the worker's names
(``Thresholds``) and a table's own properties win. Each operation's result is a ``MaintenanceResult`` in the
journal; a failure is recorded and the run goes on; a table with an unfinished apply is skipped. Scope,
detection, thresholds and the progress log: docs/design/maintain.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lakesweep.engine.errors import JournalConflict, JournalError, LakesweepError, PlanRejected, StorageError
from lakesweep.engine.iceberg.scopes import CompactScope, RewriteManifestsScope
from lakesweep.engine.plan import CleanupPlan, Verb
from lakesweep.engine.plan_io import write_plan
from lakesweep.engine.purge import PURGE
from lakesweep.journal.events import MaintenanceOutcome, MaintenanceResult, run_stream
from lakesweep.journal.projection import PlanStatus
from lakesweep.journal.quarantined import quarantine_records
from lakesweep.journal.queries import plan_state
from lakesweep.journal.recorder import Recorder

from lakesweep.planner.kinds import describe_plan, kinds_of, plan_kind

from lakesweep.applier.executors import SparkExecutor
from lakesweep.applier.quarantine import QuarantineChoice

from lakesweep.maintain.report import RunReport, TableResult
from lakesweep.maintain.selection import ALL_OPERATIONS, CANONICAL, TableRef, Thresholds, detect, discover

_FILE_VERBS = frozenset({Verb.DELETE_FILE, Verb.DELETE_EMPTY_DIR, Verb.WRITE_FILE, Verb.MERGE})  # not commits


# ---- per operation: the plan's flags, and what to say --------------------------------------------------

def _flags(ref: TableRef, op: str, options, th: Thresholds) -> dict | None:
    """The plan flags of ``op`` with the thresholds as defaults under the table's own properties; None when
    the table cannot take the operation (the reason is ``_not_configured``)."""
    entry = kinds_of(ref.format).get(op)
    if entry is None or entry.maintain is None:
        return None
    return entry.maintain.flags(options, th)


def _not_configured(ref: TableRef, op: str) -> str:
    entry = kinds_of(ref.format).get(op)
    if entry is not None and entry.maintain is not None and entry.maintain.not_configured:
        return entry.maintain.not_configured
    return f"{op} does not apply to {ref.format} tables"


def _applied_message(plan: CleanupPlan, counts: dict) -> str:
    entry = kinds_of(plan.format).get(plan.kind)
    if entry is None or entry.maintain is None:
        return f"{plan.kind}: {counts}"
    return entry.maintain.applied(plan, counts)


def _skip_message(plan: CleanupPlan) -> str:
    if isinstance(plan.scope, (RewriteManifestsScope, CompactScope)) and plan.scope.skipped:
        return plan.scope.skipped  # the worker's messages
    entry = kinds_of(plan.format).get(plan.kind)
    if entry is not None and entry.maintain is not None and entry.maintain.nothing_message is not None:
        return entry.maintain.nothing_message
    return describe_plan(plan).scope


# ---- the run ----------------------------------------------------------------------------------------------

class _SharedSpark(SparkExecutor):
    """One Spark session for every apply of a run, started the first time a plan has a bulk or merge phase:
    an apply's ``stop`` keeps it for the next one; ``close`` ends it."""

    def stop(self) -> None:
        pass

    def close(self) -> None:
        super().stop()


def unfinished_applies(recorder: Recorder) -> dict[str, str]:
    """Table location -> the id of a plan of it whose apply is unfinished in this journal (read once a cycle:
    a run's own applies end before it goes on)."""
    busy: dict[str, str] = {}
    for pid in recorder.plan_ids():
        if plan_state(recorder, pid) == PlanStatus.APPLYING:
            busy.setdefault(recorder.plan_header(pid).get("table", {}).get("location"), pid)
    return busy


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)


def plan_file_name(ref: TableRef, op: str) -> str:
    """The file name of a plan of ``op`` on ``ref``: the table's name made safe and cut short (a file name
    has at most 255 bytes), and a hash of its exact label, so that no two tables share one (``ns.t x``
    and ``ns.t_x`` are both ``ns.t_x`` once made safe)."""
    digest = hashlib.sha256(ref.label.encode()).hexdigest()[:12]
    return f"{_safe(ref.format + '-' + ref.name)[:120]}-{digest}-{op}.parquet"


def check_plans_dir(plans_dir: str) -> None:
    """Refuse a plans directory that is, or lies under, something other than a directory."""
    path = Path(os.path.abspath(plans_dir))
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            raise PlanRejected(f"cannot write plans under --plans-dir {plans_dir}: {p} is not a directory; give a "
                               "directory for the plans")


@dataclass
class Maintenance:
    """One ``lakesweep maintain`` invocation: its scope, operations, thresholds and where things go."""

    recorder: Recorder
    plans_dir: str
    catalog: str | None = None
    warehouse: str | None = None
    namespace_filter: str | None = None
    table_filter: str | None = None
    operations: tuple[str, ...] = ALL_OPERATIONS
    thresholds: Thresholds = field(default_factory=Thresholds)
    dry_run: bool = False
    master: str = "local[*]"
    conf: dict | None = None
    executor: object | None = None  # tests: a DriverExecutor
    # Whether applies quarantine instead of deleting; by default each table's lakesweep.quarantine decides.
    quarantine: QuarantineChoice = field(default_factory=QuarantineChoice)
    on_spark_ui: Callable[[str], None] | None = None  # given the Spark UI's URL when the session has one
    clock: Callable[[], int] = lambda: int(time.time() * 1000)
    say: Callable[[str], None] = lambda text: None
    # Each event as a plain dict: "event", "run_id", "time_ms" (epoch ms, the clock's), and its fields.
    log: Callable[[dict], None] = lambda event: None
    # The key of the run's stream in the journal (``run_stream``). Random, not derived from the run's
    # inputs as a plan id is: two runs of the same scope are two occurrences, each with its own results.
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def run(self, *, every_ms: int | None = None, stop: threading.Event | None = None) -> RunReport:
        """One cycle, or (``every_ms``) one every interval until ``stop`` is set. A plans directory that
        cannot be one (``PlanRejected``) and a run id the journal already holds (``JournalConflict``) are
        refused before anything runs.

        ``log`` gets ``run_started`` first and ``run_finished`` last, also when the run stops on an error
        (its ``error`` says which; it is None otherwise)."""
        check_plans_dir(self.plans_dir)
        if self.recorder.events(plan_id=run_stream(self.run_id)):
            raise JournalConflict(f"maintain run {self.run_id} is already in the journal; give this run another id")
        stop = stop or threading.Event()
        report = RunReport(self.run_id)
        started = self.clock()
        self._log("run_started", time_ms=started, dry_run=self.dry_run, operations=list(self.operations),
                  catalog=self.catalog, warehouse=self.warehouse, every_ms=every_ms)
        spark = None if self.executor is not None else _SharedSpark(None, self.master, self.conf, self.on_spark_ui)
        error = None
        try:
            while True:
                report.cycles += 1
                self._cycle(report, report.cycles, self.executor or spark, stop)
                if every_ms is None or stop.wait(every_ms / 1000):
                    break
        except BaseException as e:
            error = _reason(e) if isinstance(e, Exception) else type(e).__name__
            raise
        finally:
            try:
                if spark is not None:
                    spark.close()
            finally:
                now = self.clock()
                self._log("run_finished", time_ms=now, cycles=report.cycles, counts=report.counts(),
                          failed=report.failed, files=sum(r.files for r in report.results),
                          bytes=sum(r.bytes for r in report.results), duration_ms=now - started, error=error)
        return report

    def _log(self, event: str, *, time_ms: int | None = None, **fields) -> None:
        self.log({"event": event, "run_id": self.run_id, "time_ms": self.clock() if time_ms is None else time_ms,
                  **fields})

    def _cycle(self, report: RunReport, cycle: int, executor, stop: threading.Event) -> None:
        tables = discover(catalog=self.catalog, warehouse=self.warehouse, namespace_filter=self.namespace_filter,
                          table_filter=self.table_filter)
        self.say(f"cycle {cycle}: {len(tables)} table(s) in scope")
        self._log("cycle_started", cycle=cycle, tables=len(tables))
        busy = unfinished_applies(self.recorder)
        # the tables whose quarantine the journal holds: only they get a purge
        held = {q.table_location for q in quarantine_records(self.recorder) if q.in_quarantine} \
            if PURGE in self.operations else set()
        for ref in tables:
            if stop.is_set():
                break
            self._table(report, cycle, ref, executor, busy, held)

    def _record(self, report, cycle, ref, op, outcome, message, plan=None, plan_file=None, apply_id=None, *,
                started_ms=None, files=0, size=0):
        now = self.clock()
        self.recorder.append([MaintenanceResult(
            run_id=self.run_id, cycle=cycle, table=ref.label, operation=op, outcome=outcome, message=message,
            plan_id=plan.plan_id if plan is not None else None, recorded_ms=now, plan_file=plan_file,
            applied_by=apply_id)])
        result = TableResult(ref.label, op, str(outcome), message, plan.plan_id if plan else None, files=files,
                             bytes=size, duration_ms=0 if started_ms is None else now - started_ms)
        report.results.append(result)
        self.say(f"  {ref.label} {op}: {outcome}: {message}")
        self._log("operation", time_ms=now, cycle=cycle, table=ref.label, operation=op, outcome=str(outcome),
                  message=message, plan_id=result.plan_id, plan_file=plan_file, apply_id=apply_id, files=files,
                  bytes=size, duration_ms=result.duration_ms)

    def _table(self, report: RunReport, cycle: int, ref: TableRef, executor, busy: dict[str, str],
               held: set[str] = frozenset()) -> None:
        ops = [op for op in self.operations if op in CANONICAL[ref.format] and op != PURGE]
        if not ops and PURGE not in self.operations:
            return
        try:
            view = self._open(ref)
        except JournalError:
            raise
        except Exception as e:  # noqa: BLE001 - one table's failure is its result; the run goes on
            for op in ops:
                self._record(report, cycle, ref, op, MaintenanceOutcome.FAILED,
                             f"the table cannot be read: {_reason(e)}")
            return
        if PURGE in self.operations and view.location in held:
            ops.append(PURGE)  # last, as in the canonical order
        if not ops:
            return
        unfinished = busy.get(view.location)
        if unfinished is not None:
            for op in ops:
                self._record(report, cycle, ref, op, MaintenanceOutcome.SKIPPED,
                             f"still being worked on: an apply of plan {unfinished} is unfinished; finish it with "
                             f"'lakesweep resume {unfinished}'")
            return
        now = self.clock()
        try:
            skipped = detect(view, ref, ops, self.thresholds, now)
        except JournalError:
            raise
        except Exception as e:  # noqa: BLE001 - planning each operation finds (and journals) what is wrong
            skipped = {}
            self.say(f"  {ref.label}: detection failed ({_reason(e)}); planning each operation")
        for op in ops:
            if op in skipped:
                self._record(report, cycle, ref, op, MaintenanceOutcome.SKIPPED, skipped[op])
                continue
            self._operation(report, cycle, ref, op, executor)

    def _open(self, ref: TableRef):
        if ref.format == "iceberg":
            from lakesweep.engine.iceberg.table import IcebergTable

            return IcebergTable(ref.catalog, ref.name)
        from lakesweep.engine.paimon.table import open_table

        return open_table(ref.location)

    def plan_file(self, ref: TableRef, op: str, cycle: int) -> str:
        """Where the plan of ``op`` on ``ref`` in ``cycle`` of this run is written."""
        return os.path.join(self.plans_dir, self.run_id, f"cycle-{cycle}", plan_file_name(ref, op))

    def _operation(self, report, cycle, ref: TableRef, op: str, executor) -> None:
        """Plan, write and apply one operation on one table. Whatever fails (planning, writing the plan, the
        apply, or a bug) is journaled as this operation's result, and the run goes on; only a journal that
        cannot record it stops the run."""
        step = _Step(started_ms=self.clock())
        try:
            self._plan_write_apply(report, cycle, ref, op, executor, step)
        except JournalError:
            raise
        except LakesweepError as e:
            said = "apply refused" if step.name == "apply" else f"{step.name} failed"
            self._record(report, cycle, ref, op, MaintenanceOutcome.FAILED, f"{said}: {e}", step.plan, step.plan_file,
                         started_ms=step.started_ms)
        except Exception as e:  # noqa: BLE001 - one table's failure is its result; the run goes on
            self._record(report, cycle, ref, op, MaintenanceOutcome.FAILED,
                         f"{step.name} failed: internal error: {_reason(e)}", step.plan, step.plan_file,
                         started_ms=step.started_ms)

    def _plan_write_apply(self, report, cycle, ref: TableRef, op: str, executor, step: "_Step") -> None:
        from lakesweep.applier.apply import apply_plan

        view = self._open(ref)  # each operation reads the table as the previous one left it
        started = step.started_ms
        flags = _flags(ref, op, view.options, self.thresholds)
        if flags is None:
            self._record(report, cycle, ref, op, MaintenanceOutcome.SKIPPED, _not_configured(ref, op),
                         started_ms=started)
            return
        if op == PURGE:  # what this run's journal holds in quarantine, read now
            flags = {**flags, "journal": getattr(self.recorder, "path", "the maintain journal"),
                     "records": quarantine_records(self.recorder)}
        entry = plan_kind(op, ref.format)
        now = self.clock()
        plan = step.plan = entry.read_and_plan(view, now_ms=now, options=entry.resolve_options(view.options, **flags))
        if describe_plan(plan).nothing_to_do and not plan.actions:
            self._record(report, cycle, ref, op, MaintenanceOutcome.SKIPPED, _skip_message(plan), plan,
                         started_ms=started)
            return
        step.name = "writing the plan"
        plan_file = self.plan_file(ref, op, cycle)
        directory = os.path.dirname(plan_file)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise StorageError(directory, f"cannot create the plans directory: {e.strerror or e}") from e
        write_plan(plan, plan_file)
        step.plan_file = plan_file
        if self.dry_run:
            self._record(report, cycle, ref, op, MaintenanceOutcome.PLANNED,
                         f"dry run, not applied; the plan {describe_plan(plan).scope}", plan, plan_file, started_ms=started,
                         files=sum(1 for a in plan.actions if a.verb in _FILE_VERBS),
                         size=sum(a.size or 0 for a in plan.actions if a.verb.deletes))
            return
        step.name = "apply"
        result = apply_plan(plan, self.recorder, master=self.master, conf=self.conf, executor=executor,
                            quarantine=self.quarantine)
        done = {"files": sum(result.counts.get(o, 0) for o in ("DELETED", "QUARANTINED", "WRITTEN")),
                "size": result.bytes_reclaimed}
        if result.state != "COMPLETED" or not result.whole:
            why = result.reason or "the table was not whole afterwards"
            self._record(report, cycle, ref, op, MaintenanceOutcome.FAILED, f"apply {result.state.lower()}: {why}",
                         plan, plan_file, result.apply_id, started_ms=started, **done)
            return
        message = _applied_message(plan, result.counts)
        if result.quarantine is not None:
            message += (f"; quarantined {result.counts.get('QUARANTINED', 0)} file(s) in "
                        f"{result.quarantine['directory']} ('lakesweep restore {plan.plan_id}' brings them back)")
        self._record(report, cycle, ref, op, MaintenanceOutcome.APPLIED, message,
                     plan, plan_file, result.apply_id, started_ms=started, **done)


@dataclass
class _Step:
    """How far one operation got: what failed is told by the step, with the plan and file it had."""

    name: str = "planning"
    plan: CleanupPlan | None = None
    plan_file: str | None = None
    started_ms: int = 0


def _reason(e: Exception) -> str:
    """A failure for the journal: lakesweep's own errors as they are, anything else with its type."""
    return str(e) if isinstance(e, LakesweepError) else f"{type(e).__name__}: {e}"
