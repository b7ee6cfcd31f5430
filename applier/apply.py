"""Applying a plan: check its requirements, then run its phases in order and journal every outcome.

One loop for every plan kind: the requirements (and the checks every plan gets: paths where their kind of
file lives, nothing still used) → ``ApplyStarted`` → each phase by its mode, re-checked against the live
table before it starts → ``ApplyCompleted``. A phase that still has failures after retries stops the apply
(``ApplyFailed``); ``resume`` finishes it later from the journal alone. A dry run is the same loop with a
probe that only looks, journaling nothing; without ``check_files`` (the CLI's default) it looks at no file
(no Spark) and counts what the plan and the metadata say. See docs/design/apply.md#the-apply-loop.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import AbstractSet, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from lakesweep.engine.errors import JournalConflict, JournalError, LakesweepError, PlanRejected, SparkUnavailable
from lakesweep.engine.fileio import FileIO, join
from lakesweep.engine.formats import Locations, TargetIndex, check_phases, check_requirements, format_of
from lakesweep.engine.plan import (Action, ActionCheck, CleanupPlan, PhaseMode, Verb, commit_id, header_bytes,
                                   pointer_writes)
from lakesweep.engine.plan_columns import IdSet, by_phase, of_verb, total_size, values, without
from lakesweep.engine.plan_io import plan_from_header
from lakesweep.engine.purge import PURGE, check_journaled
from lakesweep.engine.quarantine import QUARANTINE_DIR, QuarantineSpec
from lakesweep.engine.timeutil import format_time_ms
from lakesweep.journal.events import (ApplyCompleted, ApplyFailed, ApplyRefused, ApplyStarted, Committed, Event,
                                      FileOutcome, MetadataWritten, OutputOrphaned, OutputWritten, PhaseCompleted,
                                      Verified)
from lakesweep.journal.projection import PlanStatus, RunStatus, project
from lakesweep.journal.quarantined import quarantine_records
from lakesweep.journal.queries import completed_applies, plan_done_actions, plan_state, unfinished_apply
from lakesweep.journal.recorder import Recorder

from lakesweep.applier.actions import ActionResult, Outcome
from lakesweep.applier.commit import Committer, committer_for, run_commit
from lakesweep.applier.executors import BulkExecutor, DriverExecutor, SparkExecutor  # noqa: F401  (tests)
from lakesweep.applier.phases import NoProgress, PhaseRunner, Progress, Tally, crash_hook
from lakesweep.applier.quarantine import QuarantineChoice


@dataclass
class ApplyReport:
    """What an apply did; the CLI prints it and ``--output json`` emits it."""

    plan_id: str
    apply_id: str | None
    # COMPLETED, FAILED, DRY_RUN; resume without an id: REFUSED (a plan that was refused), NOT_STARTED (a plan
    # recorded whose apply never started: not started by resume, ``reason`` says how to start it);
    # ALREADY_APPLIED: an apply of the plan completed before and nothing was done (``applied`` says which)
    state: str
    dry_run: bool = False
    resumed: bool = False
    counts: dict = field(default_factory=lambda: {o.value: 0 for o in FileOutcome})
    bytes_reclaimed: int = 0  # of the deleted files whose size is known
    unknown_size: int = 0  # deleted files whose size is unknown (an Iceberg manifest list): not in bytes_reclaimed
    duration_ms: int = 0
    failed_phase: str | None = None
    reason: str | None = None
    phases: list = field(default_factory=list)
    hint: int | None = None
    verify: dict | None = None  # the check after the last phase (``VerifyReport.to_json``); None: not run
    commits: list = field(default_factory=list)  # {"phase", "version", "already", "label", "attempts"}
    strict: bool = False  # applied with --strict: any change to the table since planning refused it
    held_reason: str | None = None  # why the first action the live table held back was skipped or dropped
    nothing_safe: bool = False  # every action the live table held back: nothing was done
    files_checked: bool | None = None  # a dry run: whether each file was looked at (False: metadata only)
    applied: dict | None = None  # ALREADY_APPLIED: the completed apply found in the journal (``applied_before``)
    quarantine: dict | None = None  # apply --quarantine: ``QuarantineSpec.to_json`` and the "directory" files go to
    bytes_quarantined: int = 0  # of the files put aside whose size is known (not reclaimed until purged)

    @property
    def mode(self) -> str:
        """``quarantine`` when files to delete were put aside, else ``delete``."""
        return "delete" if self.quarantine is None else "quarantine"

    @property
    def whole(self) -> bool:
        """False when the check after the last phase found the table damaged."""
        return self.verify is None or self.verify["whole"]

    def to_json(self) -> dict:
        return {
            "plan_id": self.plan_id, "apply_id": self.apply_id, "state": self.state, "dry_run": self.dry_run,
            "resumed": self.resumed, "counts": self.counts,
            # null when every file deleted had an unknown size: 0 would say nothing was reclaimed
            "bytes_reclaimed": None if self.unknown_size and not self.bytes_reclaimed else self.bytes_reclaimed,
            "unknown_size_files": self.unknown_size,
            "duration_ms": self.duration_ms, "failed_phase": self.failed_phase, "reason": self.reason,
            "phases": self.phases, "earliest_hint": self.hint, "verify": self.verify, "commits": self.commits,
            "strict": self.strict, "held_reason": self.held_reason, "nothing_safe": self.nothing_safe,
            "files_checked": self.files_checked, "applied": self.applied,
            "mode": self.mode, "quarantine": self.quarantine, "bytes_quarantined": self.bytes_quarantined,
        }


VERIFY_PROBLEMS_JOURNALED = 100  # the first problems the Verified event keeps (it counts them all)


def check_live(plan: CleanupPlan, live, *, done: AbstractSet[str] = frozenset(), strict: bool = False) -> None:
    """The plan's requirements on the live table (``strict``: those that pin it as at planning too, and the
    format's own check that nothing was committed since); ``done`` as ``check_requirements`` takes it."""
    check_requirements(plan, live, done=done, strict=strict)
    if strict:
        format_of(plan).check_strict(plan, live)


def report_outcomes(plan: CleanupPlan, *, quarantine: bool = False) -> tuple[str, ...]:
    """The outcomes a report of ``plan`` counts: deletes, writes, kept directories and failures always (as
    reports always had them); skipped candidates when the plan re-checks actions; commits when it commits;
    what the format may hold back on a live table (``held_outcomes``); files put aside with ``quarantine``."""
    extra = {FileOutcome.QUARANTINED} if quarantine else set()
    if any(isinstance(r, ActionCheck) for r in plan.requirements):
        extra.add(FileOutcome.SKIPPED_REFERENCED)
    if any(p.mode == PhaseMode.COMMIT for p in plan.phases):
        extra |= {FileOutcome.COMMITTED, FileOutcome.ALREADY_COMMITTED}
    if any(p.mode == PhaseMode.MERGE for p in plan.phases):
        extra.add(FileOutcome.DROPPED)
    extra |= {FileOutcome(o) for o in format_of(plan).held_outcomes(plan)}
    base = {FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT, FileOutcome.WRITTEN, FileOutcome.KEPT_NOT_EMPTY,
            FileOutcome.FAILED}
    return tuple(o.value for o in FileOutcome if o in base or o in extra)


def actions_by_phase(actions: Sequence[Action]) -> dict[int, Sequence[Action]]:
    """The plan's actions grouped by phase, in plan order (phases without actions are absent); a plan held
    as columns gives each phase's as columns (``engine.plan_columns.by_phase``)."""
    return by_phase(actions)


@dataclass
class _Apply:
    """One apply (or dry run) of one plan: what the journal says was done, and where bulk work runs."""

    plan: CleanupPlan
    recorder: Recorder | None  # None: a dry run
    table: object
    executor: BulkExecutor
    progress: Progress
    clock: Callable[[], int]
    master: str
    resume_apply_id: str | None = None
    committer: Committer | None = None  # given to apply_plan; else the format's, when the plan commits
    skip: AbstractSet[int] = frozenset()  # actions not run again (done by an earlier apply)
    done: IdSet = field(default_factory=IdSet)  # actions done, or possibly done (for requirements)
    completed: frozenset = frozenset()  # phases the resumed apply completed
    verify: bool = True  # check the touched files against the live table after the last phase
    written: dict = field(default_factory=dict)  # merge phases: each group's output (``OutputWritten``), by group
    orphaned: list = field(default_factory=list)  # (group, path, reason) of outputs the last commit left out
    strict: bool = False  # refuse any change to the table since planning (else: go on where still safe)
    first_held: str | None = None  # why the first action the live table held back was skipped or dropped
    journaled_commits: frozenset = frozenset()  # commit phases with a Committed record in the journal
    check_files: bool = True  # a dry run: look whether each file is there (False: the metadata alone)
    quarantine: QuarantineSpec | None = None  # files to delete are put aside as it says (apply --quarantine)

    def refuse(self, e: PlanRejected) -> None:
        if self.recorder is not None:
            self.recorder.append([ApplyRefused(plan_id=self.plan.plan_id, reason=str(e), refused_ms=self.clock(),
                                               apply_id=self.resume_apply_id)])

    def run(self, by_phase: dict[int, list[Action]], started: int) -> ApplyReport:
        plan, table = self.plan, self.table
        fmt = format_of(plan)
        bulk_left = any(len(without(by_phase.get(p, ()), self.skip)) for p, spec in enumerate(plan.phases, 1)
                        if spec.mode in (PhaseMode.BULK, PhaseMode.MERGE))
        # A dry run that does not look at the files runs nothing on Spark.
        bulk_left = bulk_left and (self.recorder is not None or self.check_files)
        try:
            try:
                # The checks that read only the plan and the table's metadata (whose table, which paths, the
                # requirements, --strict) come before Spark is asked to start here: a foreign or stale plan is
                # refused in the time it takes to read the metadata, not after the JVM has booted. (The CLI
                # asks earlier, from the header, once its own checks pass: ``spark_getting_ready``.)
                fmt.verify_table(plan, table)
                check_phases(plan)
                self.committer = committer_for(plan, self.committer, strict=self.strict)
                targets = fmt.verify_paths(plan, table)
                if plan.kind == PURGE and self.recorder is not None:
                    # whatever the plan says: each file is in this journal's quarantine, its retention passed now
                    check_journaled(plan, targets, quarantine_records(self.recorder), now_ms=self.clock(),
                                    location=table.location, external_roots=fmt.external_roots(table), skip=self.skip)
                if self.committer is not None:
                    self.done |= self._committed_before(table, by_phase)
                index = TargetIndex(targets)
                live = self._unless_committed_meanwhile(
                    table, by_phase, lambda live: (self._check_live(live, index), live)[1])
                if bulk_left:
                    self.executor.prepare()  # Spark boots during the rest of the checks; nothing runs before start()
                checked = live
                self._unless_committed_meanwhile(live, by_phase,
                                                 lambda live: self._gates(live, targets, index, checked=checked))
            except PlanRejected as e:
                self.refuse(e)
                raise
            if self.quarantine is not None:
                check_quarantine(table.fileio, self.quarantine, table.location, fmt.external_roots(table))
            if bulk_left:
                # Started before ApplyStarted: a master that cannot be reached, a bad --conf or executors that
                # cannot run lakesweep leave no unfinished apply behind.
                self.executor.start()
            return self._phases(by_phase, targets, index, started)
        finally:
            self.executor.stop()

    def _phases(self, by_phase, targets, index, started) -> ApplyReport:
        plan, table, recorder, clock = self.plan, self.table, self.recorder, self.clock
        fmt = format_of(plan)
        plan_id = plan.plan_id
        dry_run = recorder is None
        if dry_run:
            apply_id = None
        elif self.resume_apply_id is None:
            crash_hook("before-start", 1)  # the plan is recorded, its apply not started (a kill during Spark's start)
            apply_id = uuid.uuid4().hex[:16]
            q = self.quarantine
            recorder.append([ApplyStarted(apply_id=apply_id, plan_id=plan_id, n_actions=len(plan.actions),
                                          bytes=total_size(plan.actions), master=self.master,
                                          dry_run=False, started_ms=started,
                                          mode="delete" if q is None else "quarantine",
                                          quarantine=None if q is None else q.to_json())])
        else:
            apply_id = self.resume_apply_id
        runner = PhaseRunner(actions=plan.actions, plan_id=plan_id, recorder=recorder, apply_id=apply_id,
                             fileio=table.fileio, root=table.location, external=fmt.external_roots(table),
                             targets=targets, progress=self.progress, clock=clock, executor=self.executor,
                             dry_run=dry_run, check_files=self.check_files, quarantine=self.quarantine)
        outcomes = report_outcomes(plan, quarantine=self.quarantine is not None)
        report = ApplyReport(plan_id, apply_id, "DRY_RUN" if dry_run else "COMPLETED", dry_run=dry_run,
                             resumed=self.resume_apply_id is not None, counts=dict.fromkeys(outcomes, 0),
                             strict=self.strict, files_checked=self.check_files if dry_run else None,
                             quarantine=None if self.quarantine is None else _shown(self.quarantine, table.location))
        for number, spec in enumerate(plan.phases, 1):
            in_phase = by_phase.get(number)
            if number in self.completed or not in_phase:
                continue
            if not dry_run:
                crash_hook("phase-start", number)  # the phases before it completed and journaled
            actions = without(in_phase, self.skip)
            live = table
            if not dry_run:
                try:
                    # The live table may have moved on since the last phase: re-check before touching anything,
                    # on a view that reads snapshots, tags and schemas anew (manifests already read are reused).
                    live, skipped = self._unless_committed_meanwhile(
                        table.refreshed(), by_phase, lambda live: (live, self._phase_gates(live, actions, targets, index)))
                except PlanRejected as e:
                    recorder.append([ApplyFailed(apply_id=apply_id, plan_id=plan_id, reason=f"refused: {e}",
                                                 phase=number, finished_ms=clock())])
                    raise
            else:
                skipped = dict.fromkeys(self._rechecked(live, actions, targets))
            tally = Tally(outcomes)
            committed: list = []
            self.progress.phase_started(spec.name, len(actions), total_size(actions))
            n_actions = len(actions)  # the phase's actions, those skipped on the live table included
            actions = self._skip(runner, actions, skipped, tally)
            if spec.mode == PhaseMode.COMMIT:
                committed = self._commit(runner, number, actions, tally, live)
            elif spec.mode == PhaseMode.MERGE:
                self._merge(runner, number, in_phase, actions, tally, live)
            elif actions:
                (runner.bulk if spec.mode == PhaseMode.BULK else runner.ordered)(actions, tally)
            self.progress.phase_finished(spec.name)
            self.done |= tally.done
            if tally.first_held is not None and self.first_held is None:
                held = plan.actions[tally.first_held[0]]
                self.first_held = f"{held.kind} {held.path}: {tally.first_held[1]}"
            summary = tally.summary(spec.name, n_actions)
            report.phases.append(summary)
            if dry_run:
                continue
            if tally.failed:
                first, error = plan.actions[tally.first_failure[0]], tally.first_failure[1]
                reason = f"{tally.failed} action(s) of phase {spec.name} failed; first: {first.path}: {error}"
                recorder.append([ApplyFailed(apply_id=apply_id, plan_id=plan_id, reason=reason, phase=number,
                                             finished_ms=clock())])
                report.state, report.failed_phase, report.reason = "FAILED", spec.name, reason
                break
            # The phase's end, what it wrote and what it committed, in one transaction: a crash leaves all
            # of them or none (then the phase runs again, idempotently).
            crash_hook("phase-end", number)  # its actions carried out and journaled, its end not yet
            now = clock()
            events = [PhaseCompleted(apply_id=apply_id, plan_id=plan_id, phase=number, counts=tally.counts,
                                     bytes=summary["bytes"], finished_ms=now)]
            for a in pointer_writes(in_phase):
                events.append(MetadataWritten(apply_id=apply_id, plan_id=plan_id, kind=str(a.kind), path=a.path,
                                              value=a.snapshot_id, written_ms=now))
                report.hint = a.snapshot_id
            events += [Committed(apply_id=apply_id, plan_id=plan_id, phase=number, commit_id=cid, version=version,
                                 already=already, committed_ms=now) for cid, version, already in committed]
            events += [OutputOrphaned(apply_id=apply_id, plan_id=plan_id, group=group, path=path, reason=reason,
                                      orphaned_ms=now) for group, path, reason in self.orphaned]
            self.orphaned = []
            label = getattr(self.committer, "version_label", "snapshot")  # what the committer's version numbers
            attempts = getattr(self.committer, "attempts", 1) or 1
            report.commits += [{"phase": spec.name, "version": version, "already": already, "label": label,
                                "attempts": 0 if already else attempts} for _, version, already in committed]
            recorder.append(events)

        if dry_run:
            report.counts = {o: sum(p.get(o, 0) for p in report.phases) for o in outcomes}
            report.bytes_reclaimed = sum(p["bytes"] for p in report.phases)
            report.bytes_quarantined = sum(p.get("quarantined_bytes", 0) for p in report.phases)
            report.unknown_size = sum(p["unknown_size"] for p in report.phases)
            report.duration_ms = clock() - started
            report.hint = plan.earliest_hint
            return report
        # What this apply did, by each action's latest record, counted by the journal (a resumed apply
        # includes what it did before the crash).
        totals = recorder.apply_totals(apply_id)
        report.counts = {o: totals[FileOutcome(o)][0] for o in outcomes}
        report.bytes_reclaimed = totals[FileOutcome.DELETED][1]
        report.bytes_quarantined = totals[FileOutcome.QUARANTINED][1]
        unsized = recorder.deleted_without_size(apply_id)
        report.unknown_size = int(runner.sizes.file_delete[np.fromiter(unsized, np.int64, len(unsized))].sum())
        report.duration_ms = clock() - started
        held = {FileOutcome.SKIPPED_REFERENCED.value, FileOutcome.DROPPED.value}
        report.held_reason = self.first_held
        report.nothing_safe = (report.state == "COMPLETED" and self.first_held is not None
                               and not any(n for o, n in report.counts.items() if o not in held))
        if report.state == "COMPLETED":
            # The check and the end in one transaction: a crash between them would leave a verified apply that
            # a resume verifies again.
            events = [self._verify(report, targets, index)] if self.verify else []
            events.append(ApplyCompleted(apply_id=apply_id, plan_id=plan_id, counts=report.counts,
                                         bytes_reclaimed=report.bytes_reclaimed, duration_ms=report.duration_ms,
                                         finished_ms=clock()))
            recorder.append(events)
        return report


    def _verify(self, report: ApplyReport, targets: Sequence[str], index: TargetIndex) -> Verified:
        """``lakesweep verify`` on the locations the plan deleted from, in the live table: none that a
        snapshot, tag, branch or changelog references may be gone, and the hints must agree. Returns the
        ``Verified`` event to journal; a table found damaged is reported, the apply stays completed."""
        result, touched = format_of(self.plan).verify(self.plan, self.table, targets, index)
        report.verify = result.to_json()
        del report.verify["unreferenced"], report.verify["unreferenced_bytes"]
        shown = [p.to_json() for p in result.problems[:VERIFY_PROBLEMS_JOURNALED]]
        return Verified(apply_id=report.apply_id, plan_id=self.plan.plan_id, whole=result.whole,
                        checked=len(touched), n_problems=len(result.problems), problems=shown, verified_ms=self.clock())

    def _committed_before(self, table, by_phase: dict[int, list[Action]]) -> set[int]:
        """The actions of commit phases whose commit the table already holds (an apply that crashed after
        committing, before journaling it): done, so requirements on what they changed hold for them."""
        done: set[int] = set()
        for number, spec in enumerate(self.plan.phases, 1):
            if spec.mode == PhaseMode.COMMIT and by_phase.get(number):
                if self.committer.find(table, commit_id(self.plan.plan_id, number)) is not None:
                    done |= {a.action_id for a in by_phase[number]}
        return done

    def _gates(self, live, targets, index, *, checked=None) -> None:
        """Before the apply starts: the plan's requirements, the committer's check of its commit actions, and
        nothing the plan deletes still used by the live table. The requirements are not checked again on
        ``checked``, the view they were just checked on (each phase checks them again on a fresh one)."""
        plan = self.plan
        if live is not checked:
            self._check_live(live, index)
        if self.committer is not None:
            self.committer.check(live, of_verb(plan.actions, Verb.COMMIT))
        skipped = self._rechecked(live, plan.actions, targets)
        format_of(plan).check_unreachable(plan, live, without(plan.actions, skipped), targets,
                                          done=Locations(index, self.done), strict=self.strict, index=index)

    def _phase_gates(self, live, actions: Sequence[Action], targets, index) -> dict[int, str | None]:
        """Before a phase: the requirements again, and the phase's actions to skip, each with why where known."""
        self._check_live(live, index)
        skipped: dict[int, str | None] = dict.fromkeys(self._rechecked(live, actions, targets))
        skipped.update(format_of(self.plan).check_unreachable(
            self.plan, live, without(actions, skipped.keys()), targets,
            done=Locations(index, self.done), strict=self.strict, index=index))
        return skipped

    def _unless_committed_meanwhile(self, live, by_phase: dict[int, list[Action]], gate: Callable):
        """``gate(live)``; when it refuses a plan that commits, the plan's commits are looked for again on a
        fresh read first. Another apply of the same plan (another journal, another process) may have made one
        since this apply looked (``_committed_before``): its actions are then done, as a resumed apply finds
        them (the commit phase journals ALREADY_COMMITTED), and ``gate`` is asked again on that read, so it
        refuses only what the plan's own commit does not explain."""
        try:
            return gate(live)
        except PlanRejected:
            if self.committer is None:
                raise
            fresh = live.refreshed()
            found = self._committed_before(fresh, by_phase) - self.done
            if not found:
                raise
            self.done |= found
            return gate(fresh)

    def _rechecked(self, live, actions: Sequence[Action], targets) -> set[int]:
        """The ids of the actions the plan's per-action checks (``ActionCheck``) skip on the live table.
        They are left out of the reachability gate: a skipped action is kept, so it being used again is
        not a reason to refuse the rest (an orphan candidate a writer has since committed)."""
        skipped: set[int] = set()
        for r in self.plan.requirements:
            if isinstance(r, ActionCheck) and actions:
                skipped |= set(r.skipped(live, actions, targets))
        return skipped

    def _check_live(self, live, index) -> None:
        check_live(self.plan, live, done=Locations(index, self.done), strict=self.strict)

    def _skip(self, runner: PhaseRunner, actions: list[Action], skipped: Mapping[int, str | None],
              tally: Tally) -> list[Action]:
        """Journal the ``skipped`` actions SKIPPED_REFERENCED, each with why where known; the others, to run."""
        if not skipped:
            return actions
        now = self.clock()
        runner.record([ActionResult(i, Outcome.SKIPPED_REFERENCED, 1, skipped[i], now) for i in sorted(skipped)],
                      tally)
        return without(actions, skipped.keys())

    def _commit(self, runner: PhaseRunner, number: int, actions: list[Action], tally: Tally, live) -> list:
        """A commit phase: its actions committed once, under the plan's commit identifier for the phase.
        An apply that resumes finds a commit it made before the crash (ALREADY_COMMITTED). After a merge
        phase, the committer is given the outputs written; an output whose actions it left out (DROPPED)
        is an orphan, journaled as such with the phase's end."""
        cid = commit_id(self.plan.plan_id, number)
        if not actions:
            # Every action journaled, the phase's end (with its Committed record) not: a kill between the two.
            # The commit is on the table; find it, so that the journal records it once.
            if self.recorder is None or number in self.journaled_commits:
                return []
            version = self.committer.find(live, cid)
            return [] if version is None else [(cid, version, True)]
        merges = any(p.mode == PhaseMode.MERGE for p in self.plan.phases)
        if merges and self.recorder is not None:
            self._restore_outputs(runner, live)
        results, version, already = run_commit(self.committer, live, actions, cid, dry_run=self.recorder is None,
                                               clock=self.clock, written=self.written if merges else None)
        if self.recorder is not None:
            crash_hook("after-commit", number)  # committed to the table, not yet journaled
        runner.record(results, tally)
        left_out = {r.action_id: r.error for r in results if r.outcome == Outcome.DROPPED}
        for group in sorted({self.plan.actions[i].bucket for i in left_out}):
            output = self.written.get(group)
            if output is not None and output["written"]:
                reason = next(left_out[i] for i in sorted(left_out) if self.plan.actions[i].bucket == group)
                self.orphaned.append((group, output["location"], reason or "left out of the commit"))
        return [] if version is None else [(cid, version, already)]

    def _restore_outputs(self, runner: PhaseRunner, live) -> None:
        """Before a commit: merge again the groups whose output is not in place (an apply that resumes after
        its merge phase completed, the output since removed), under the same names."""
        fmt = format_of(self.plan)
        for number, spec in enumerate(self.plan.phases, 1):
            if spec.mode != PhaseMode.MERGE:
                continue
            actions = [a for a in self.plan.actions if a.phase == number]
            lost = {g for g in {a.bucket for a in actions}
                    if self.written.get(g) is None or not fmt.output_in_place(live, self.written[g])}
            again = [a for a in actions if a.bucket in lost]
            if again:
                self._merge(runner, number, again, again,
                            Tally(report_outcomes(self.plan, quarantine=self.quarantine is not None)), live)

    def _merge(self, runner: PhaseRunner, number: int, in_phase: list[Action], actions: list[Action], tally: Tally,
               live) -> None:
        """A merge phase: one task per group (``Action.bucket``) whose output is not on record and in place.
        A group whose output an earlier apply journaled and that is still there, with its size, is not
        merged again (its actions not yet journaled are journaled WRITTEN); any other group is merged
        again, every action of it, writing the same file under the same name."""
        fmt = format_of(self.plan)
        pending = {a.action_id for a in actions}
        groups: dict[int, list[Action]] = {}
        for a in in_phase:
            groups.setdefault(a.bucket, []).append(a)
        to_run = []
        for group in sorted(groups):
            output = self.written.get(group)
            if output is not None and fmt.output_in_place(live, output):
                now = self.clock()
                runner.record([ActionResult(a.action_id, Outcome.WRITTEN, 1, None, now)
                               for a in groups[group] if a.action_id in pending], tally)
                continue
            if output is None and not any(a.action_id in pending for a in groups[group]):
                raise LakesweepError(f"the journal says group {group} of plan {self.plan.plan_id} was merged but "
                                     f"holds no output for it; the journal is damaged")
            to_run.append(group)
        if not to_run:
            return
        fn, tasks = fmt.merge_tasks(self.plan, live, to_run)
        self.written.update(runner.merge([(g, groups[g], t) for g, t in zip(to_run, tasks)], fn, tally, phase=number))


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
    committer: Committer | None = None,
    verify: bool = True,
    strict: bool = False,
    skip_if_applied: bool = False,
    on_spark_ui: Callable[[str], None] | None = None,
    budget=None,
    quarantine: QuarantineSpec | QuarantineChoice | None = None,
) -> ApplyReport:
    """Apply ``plan`` and journal it. Raises ``PlanRejected``/``StalePlan`` (after journaling the refusal)
    when the plan is foreign, tampered, escapes the table, or is no longer safe.

    Bulk phases run on Spark (``spark``, or a session started with ``master`` and ``conf``) unless an
    ``executor`` is given. Everything per plan (its id, its phases, what earlier applies did) is worked out
    once; each result batch then costs in proportion to its size. After the last phase, unless ``verify``
    is false, the locations the plan deleted from are checked against the live table (``ApplyReport.verify``).

    By default the plan is the upper bound of what happens on a table that has moved since planning: each
    phase does what is still safe on the live table and journals the rest as skipped or dropped, with why.
    ``strict`` refuses the plan instead when anything was committed to the table since planning.

    With ``skip_if_applied``, a plan that an earlier apply in this journal completed is not applied again:
    the report's state is ALREADY_APPLIED and ``applied`` describes that apply (nothing is opened, run or
    journaled). Without it the plan is applied again, which changes nothing that is already done.

    ``budget`` (an ``engine.s3_bulk.RequestBudget``) limits the requests of the bulk phases on an object store:
    their rate and concurrency, shared by the Spark tasks in flight, and the keys per DeleteObjects.

    With ``quarantine`` (a spec for this plan, or a ``QuarantineChoice`` the live table's options complete),
    every file the plan deletes is put aside instead, where the spec says, and journaled QUARANTINED with
    where it went; a store that cannot is refused before anything is done (``QuarantineUnsupported``). An
    apply resumed by ``resume_apply_id`` goes on in the mode its ``ApplyStarted`` journaled, whatever
    ``quarantine`` says."""
    started = clock()
    plan_id = plan.plan_id
    if skip_if_applied:
        before = applied_before(recorder, plan_id)
        if before is not None and unfinished_apply(recorder, plan_id) is None:  # else: resume it (below)
            return ApplyReport(plan_id, before["apply_id"], "ALREADY_APPLIED", counts=dict(before["counts"]),
                               bytes_reclaimed=before["bytes_reclaimed"], applied=before, reason=(
                                   f"plan {plan_id} was already applied: apply {before['apply_id']} completed at "
                                   f"{format_time_ms(before['finished_ms'])} ({before['outcome']}); nothing was "
                                   f"done. To run it again (it deletes nothing already deleted), add --again"))
    table = format_of(plan).open(plan, fileio)
    quarantine = _quarantine_spec(plan, table, quarantine)
    recorder.record_plan(plan, recorded_ms=started)
    # The plan file's columns are in the journal now (``FileActions.take_arrays``): Arrow's allocator keeps
    # what it freed (some 50 MiB at 1 M files) until told to give it back.
    pa.default_memory_pool().release_unused()

    events = recorder.events(plan_id=plan_id)
    prior = project(events)  # the lifecycle of every apply of this plan
    if resume_apply_id is None:
        running = [aid for aid, r in prior.items() if r.state == RunStatus.RUNNING and not r.dry_run]
        if running:
            raise JournalConflict(
                f"plan {plan_id} has an unfinished apply {running[0]} in this journal; "
                f"finish it with 'lakesweep resume {plan_id}'"
            )
    elif resume_apply_id not in prior:
        raise LakesweepError(f"apply {resume_apply_id} of plan {plan_id} is not in the journal")
    else:
        mode = next((ev.mode for ev in events if isinstance(ev, ApplyStarted) and ev.apply_id == resume_apply_id),
                    "delete")
        if mode == "restore":
            raise LakesweepError(f"apply {resume_apply_id} of plan {plan_id} is a restore, not an apply; "
                                 f"finish it with 'lakesweep restore {plan_id}'")
        quarantine = journaled_quarantine(events, resume_apply_id)
    if plan.kind == PURGE:
        quarantine = None  # never put aside, whatever an apply of it journaled (``_quarantine_spec``)
    by_phase = actions_by_phase(plan.actions)
    # Actions whose latest record, in any apply of this plan, is not a failure: the journal's answer. They
    # may be gone from the table; a resumed or repeated apply does not run them again.
    done = IdSet(plan_done_actions(recorder, plan_id), len(plan.actions))
    possibly_done = IdSet(done)
    completed: frozenset[int] = frozenset()
    if resume_apply_id is not None:
        completed = frozenset(prior[resume_apply_id].completed_phases)
        # A kill -9 can carry out actions of the phase that was running before they are journaled: the
        # first phase the apply did not complete may have done any of its actions.
        running_phase = next((p for p in range(1, len(plan.phases) + 1) if p in by_phase and p not in completed), None)
        if running_phase is not None:
            possibly_done.update(values(by_phase[running_phase], "action_id"))
    run = _Apply(plan, recorder, table, executor or SparkExecutor(spark, master, conf, on_spark_ui, budget=budget),
                 progress or NoProgress(), clock, master, resume_apply_id=resume_apply_id, committer=committer,
                 skip=done if (skip_done or resume_apply_id is not None) else frozenset(),
                 done=possibly_done, completed=completed, verify=verify, strict=strict,
                 written=journaled_outputs(events, {aid for aid, r in prior.items() if r.dry_run}),
                 journaled_commits=frozenset(ev.phase for ev in events if isinstance(ev, Committed)),
                 quarantine=quarantine)
    with recorder.held():  # one open journal for the whole apply, not one per write
        return run.run(by_phase, started)


@contextlib.contextmanager
def spark_getting_ready(header: CleanupPlan, recorder: Recorder, *, master: str = "local[*]",
                        conf: dict[str, str] | None = None, spark=None, fileio: FileIO | None = None,
                        strict: bool = False, skip_if_applied: bool = False,
                        on_spark_ui: Callable[[str], None] | None = None, budget=None):
    """A ``SparkExecutor`` for the apply of the plan whose header is ``header`` (``read_plan_header``), asked
    to start now so that the JVM boots while the plan's actions are read, journaled and checked (seconds at a
    million actions); give it to ``apply_plan``. Stopped on exit.

    Spark is asked to start only when the checks that read nothing but the header, the journal and the live
    table's metadata pass: the plan has a phase that runs on Spark, this journal holds no apply of it to
    resume or to leave as done (``skip_if_applied``), and it is of a kind applied here, for this table, its
    requirements hold (``strict``: also those that pin the table as at planning, and nothing committed since).
    A foreign or stale plan is refused before a JVM boots. Else (or when a check cannot read what it needs)
    None: ``apply_plan`` makes every check again, refuses what they refuse, and starts Spark itself when it
    needs it. Nothing runs on Spark before ``apply_plan`` has checked the whole plan (``start``)."""
    executor = None
    if any(p.mode in (PhaseMode.BULK, PhaseMode.MERGE) for p in header.phases) and \
            unfinished_apply(recorder, header.plan_id) is None and \
            not (skip_if_applied and completed_applies(recorder, header.plan_id)):
        fmt = format_of(header)
        try:
            table = fmt.open(header, fileio)
            fmt.verify_table(header, table)
            check_live(header, table, strict=strict)
        except Exception:  # noqa: BLE001  (apply_plan checks it again and says why)
            table = None
        if table is not None:
            executor = SparkExecutor(spark, master, conf, on_spark_ui, budget=budget)
            executor.prepare()
    try:
        yield executor
    finally:
        if executor is not None:
            executor.stop()


def _shown(spec: QuarantineSpec, table_location: str) -> dict:
    """A quarantine as reports show it: the spec, and the directory of the table root's files."""
    base = spec.root if spec.root is not None else join(table_location, QUARANTINE_DIR)
    return {**spec.to_json(), "directory": join(base, spec.plan_id)}


def _quarantine_spec(plan: CleanupPlan, table, quarantine) -> QuarantineSpec | None:
    if plan.kind == PURGE:
        return None  # a purge deletes what a quarantine kept: put aside again, it would never go
    if isinstance(quarantine, QuarantineChoice):
        return quarantine.spec(plan.plan_id, table.location, table.options)
    if quarantine is not None and quarantine.plan_id != plan.plan_id:
        raise ValueError(f"the quarantine spec is for plan {quarantine.plan_id}, not {plan.plan_id}")
    return quarantine


def journaled_quarantine(events: Sequence[Event], apply_id: str | None = None) -> QuarantineSpec | None:
    """How the apply ``apply_id`` (None: the plan's latest apply that is not a dry run) put files aside, as its
    ``ApplyStarted`` journaled it; None when it deleted them (or there is no such apply)."""
    started = [ev for ev in events if isinstance(ev, ApplyStarted) and not ev.dry_run
               and (apply_id is None or ev.apply_id == apply_id) and ev.mode in ("delete", "quarantine")]
    if not started or started[-1].quarantine is None:
        return None
    q = started[-1].quarantine
    return QuarantineSpec(q["plan_id"], q["retention_ms"], q.get("root"))


def check_quarantine(fileio: FileIO, spec: QuarantineSpec, root: str, external: Sequence[str]) -> None:
    """Refuse (``QuarantineUnsupported``) before anything is done when the table's store cannot put a file
    aside: a move of a file that does not exist (under each root, to where the spec puts it) must answer
    ABSENT, which creates nothing. On S3 the FileIO's ``check_quarantine`` asks the bucket's mode (and in copy
    mode whether copies can refuse to replace); a FileIO with its own ``quarantine`` and no moves decides for
    itself."""
    if fileio.scheme == "s3" and hasattr(fileio, "check_quarantine"):
        for base in dict.fromkeys((root, *external)):
            fileio.check_quarantine(base)
        return
    if type(fileio).quarantine is not FileIO.quarantine and type(fileio).move_no_replace is FileIO.move_no_replace:
        return
    name = f".lakesweep-quarantine-probe-{uuid.uuid4().hex}"
    for base in (root, *external):
        absent = join(base, name)
        fileio.move_no_replace(absent, spec.location(absent, root, external))


def applied_before(recorder: Recorder, plan_id: str) -> dict | None:
    """The latest completed apply of ``plan_id`` in the journal (dry runs do not count), as
    ``{"apply_id", "started_ms", "finished_ms", "counts", "bytes_reclaimed", "whole", "outcome"}``: what it
    did by each action's latest record, whether the check after its last phase found the table whole
    (None: not checked), and both in words; None when no apply of the plan completed."""
    runs = completed_applies(recorder, plan_id)
    if not runs:
        return None
    run = runs[-1]
    totals = recorder.apply_totals(run.apply_id)
    counts = {o.value: totals[o][0] for o in FileOutcome if totals[o][0]}
    done = ", ".join(f"{o.lower().replace('_', ' ')} {n}" for o, n in counts.items()) or "no files"
    check = {True: "verified whole", False: "verify found problems", None: "not verified"}[run.whole]
    return {"apply_id": run.apply_id, "started_ms": run.started_ms, "finished_ms": run.finished_ms,
            "counts": counts, "bytes_reclaimed": totals[FileOutcome.DELETED][1],
            "bytes_quarantined": totals[FileOutcome.QUARANTINED][1], "whole": run.whole,
            "outcome": f"completed: {done}; {check}"}


def journaled_outputs(events, dry_runs: AbstractSet[str]) -> dict[int, dict]:
    """The outputs merge phases of earlier applies wrote, by group (the latest record of each), without
    those a commit left out."""
    out: dict[int, dict] = {}
    for ev in events:
        if ev.event_apply_id in dry_runs:
            continue
        if isinstance(ev, OutputWritten):
            out[ev.group] = {"location": ev.path, "written": ev.written, "record_count": ev.record_count,
                             "bytes": ev.bytes, "statistics": dict(ev.statistics)}
        elif isinstance(ev, OutputOrphaned) and ev.group in out and out[ev.group]["location"] == ev.path:
            del out[ev.group]
    return out


def dry_run_plan(plan: CleanupPlan, *, fileio: FileIO | None = None, master: str = "local[*]",
                 conf: dict[str, str] | None = None, spark=None, executor: BulkExecutor | None = None,
                 committer: Committer | None = None, strict: bool = False, check_files: bool = True,
                 on_spark_ui: Callable[[str], None] | None = None,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000),
                 quarantine: QuarantineSpec | QuarantineChoice | None = None) -> ApplyReport:
    """Validate the plan against the live table exactly as apply does, and count what apply would do,
    deleting nothing and writing nothing (not even to the journal).

    With ``check_files`` every file the plan deletes is looked for (on Spark for bulk phases), so files
    already gone are counted ALREADY_ABSENT. Without it only metadata is read and no Spark session is
    started: every delete the live table allows is counted DELETED ("would delete"), present or not
    (``ApplyReport.files_checked`` says which was done). With ``quarantine`` a file to delete is counted
    QUARANTINED ("would put aside"), the store checked to be able to."""
    started = clock()
    table = format_of(plan).open(plan, fileio)
    quarantine = _quarantine_spec(plan, table, quarantine)
    run = _Apply(plan, None, table, executor or SparkExecutor(spark, master, conf, on_spark_ui), NoProgress(), clock,
                 master, committer=committer, strict=strict, check_files=check_files, quarantine=quarantine)
    return run.run(actions_by_phase(plan.actions), started)


def resume(recorder: Recorder, plan_id: str | None = None, **kwargs) -> list[ApplyReport]:
    """Finish every unfinished plan (or only ``plan_id``), rebuilding each plan from the journal.

    A crashed apply (started, never ended) continues under its own id. A failed apply (a phase kept
    failing) is followed by a new apply of the same plan that skips what earlier applies already did.
    Plans that were refused (stale) are not resumed: they need a new plan. What is left is worked out by
    the journal (``Recorder.done_actions``), not by reading back every record.

    A plan recorded whose apply never started (killed before ``ApplyStarted``, or Spark could not start)
    deleted nothing. Named by ``plan_id`` it is applied now; without an id it is not started (nobody asked
    for it since) but reported as ``NOT_STARTED``, with the command that starts it.
    """
    reports = []
    for pid in ([plan_id] if plan_id is not None else recorder.plan_ids()):
        restore = _resume_restore(recorder, pid, kwargs)
        if restore is not None:
            reports.append(restore)
            continue
        status = plan_state(recorder, pid)
        if status == PlanStatus.RECORDED and plan_id is None:
            reports.append(_not_started(recorder, pid))
            continue
        if status not in (PlanStatus.APPLYING, PlanStatus.FAILED, PlanStatus.RECORDED):
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


def _not_started(recorder: Recorder, pid: str) -> ApplyReport:
    header = recorder.plan_header(pid)
    return ApplyReport(pid, None, "NOT_STARTED", reason=(
        f"plan {pid} ({header['plan_kind']} of {header['table']['location']}) was recorded, but its apply never "
        f"started; nothing was deleted. Start it with: lakesweep resume {pid}"))


def _resume_restore(recorder: Recorder, pid: str, kwargs) -> ApplyReport | None:
    """Finish the plan's crashed restore (``applier.restore``), if its unfinished apply is one; else None."""
    from lakesweep.applier.restore import is_restore, restore_plan

    running = unfinished_apply(recorder, pid)
    if running is None or not is_restore(recorder, pid, running):
        return None
    plan = journal_plan(recorder, pid)
    wanted = ("fileio", "executor", "master", "conf", "spark", "clock", "on_spark_ui")
    done = restore_plan(plan, recorder, resume_apply_id=running, **{k: v for k, v in kwargs.items() if k in wanted})
    counts = {FileOutcome.RESTORED.value: done.restored, FileOutcome.FAILED.value: len(done.refused) + len(done.failed)}
    phase = {"phase": "restore", "actions": sum(counts.values()), **counts, "bytes": 0, "unknown_size": 0}
    return ApplyReport(pid, running, done.state, resumed=True, counts=counts, duration_ms=done.duration_ms,
                       reason=done.reason, phases=[phase])


def journal_plan(recorder: Recorder, pid: str) -> CleanupPlan:
    """The plan ``pid`` as the journal recorded it. Its actions were checked to hash to ``pid`` with the
    recorded header (``Recorder.plan_actions``), so the plan's id is ``pid`` when the plan gives that header
    back byte for byte; it is not hashed again."""
    header = recorder.plan_header(pid)
    plan = plan_from_header(header, recorder.plan_actions(pid), source=f"journal plan {pid}")
    if header_bytes(plan.header()) != header_bytes(header):
        raise LakesweepError(f"journal plan {pid} does not hash to its id; the journal is damaged")
    plan.remember_id(pid)
    return plan


def _resume_one(recorder: Recorder, pid: str, kwargs) -> ApplyReport:
    plan = journal_plan(recorder, pid)
    running = unfinished_apply(recorder, pid)
    if running is not None:
        return apply_plan(plan, recorder, resume_apply_id=running, **kwargs)
    # A failed apply is followed by one in the same mode: files an apply --quarantine left are put aside too.
    quarantine = journaled_quarantine(recorder.events(plan_id=pid))
    report = apply_plan(plan, recorder, skip_done=True, **{"quarantine": quarantine, **kwargs})
    report.resumed = True
    return report
