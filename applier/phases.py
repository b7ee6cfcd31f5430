"""Running one phase of a plan by its mode, and tallying what it did.

``bulk``: Spark tasks (or wherever the ``BulkExecutor`` runs them), in any order, results back in batches.
``ordered``: one action after another on the driver, in plan order. ``merge``: groups of actions, each group
one task that writes one file, journaled (``OutputWritten``) before its actions are journaled WRITTEN. A dry
run runs the same phases through a probe that only looks: a file to delete that exists would be DELETED, a
missing one ALREADY_ABSENT, a file to write WRITTEN. See docs/design/apply.md#phases.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Protocol, Sequence

import numpy as np

from lakesweep.engine.fileio import FileIO
from lakesweep.engine.plan import Action, Verb
from lakesweep.engine.plan_columns import ActionSizes, IdSet, action_sizes, fields_of
from lakesweep.engine.quarantine import QuarantineSpec
from lakesweep.journal.events import FileOutcome, OutputWritten, RequestsThrottled
from lakesweep.journal.recorder import Recorder

from lakesweep.applier.actions import ActionResult, Outcome, execute_with_retry
from lakesweep.applier.executors import BulkExecutor

_DRIVER_BATCH = 500  # driver-phase results journaled together: at most this many...
_DRIVER_BATCH_S = 1.0  # ...or this many seconds' worth
_BULK_JOURNAL_BATCH = 20000  # bulk results arrive in task batches; the journal takes them this many at a time
_DELETED, _FAILED, _QUARANTINED = Outcome.DELETED.value, Outcome.FAILED.value, Outcome.QUARANTINED.value
_SKIPPED, _DROPPED = Outcome.SKIPPED_REFERENCED.value, Outcome.DROPPED.value
_WRITTEN = Outcome.WRITTEN.value


class Progress(Protocol):
    def phase_started(self, phase: str, files: int, size: int) -> None: ...
    def advance(self, files: int, size: int) -> None: ...
    def phase_finished(self, phase: str) -> None: ...


class NoProgress:
    def phase_started(self, phase, files, size):
        pass

    def advance(self, files, size):
        pass

    def phase_finished(self, phase):
        pass


def crash_hook(stage: str, count: int) -> None:
    """Test hook: ``LAKESWEEP_TEST_CRASH=<stage>:<n>`` kills this process with SIGKILL (kill -9) at a
    known point, the first time ``count`` reaches ``n``: ``before-journal`` / ``after-journal`` (results
    received, before or after their journal batch), ``before-start`` (the plan recorded, its apply not
    started), ``phase-start`` / ``phase-end`` (phase ``n``: before it runs; carried out, its end not yet
    journaled) and ``after-commit`` (commit phase ``n`` committed to the table, not yet journaled)."""
    spec = os.environ.get("LAKESWEEP_TEST_CRASH")
    if spec:
        want, _, n = spec.partition(":")
        if want == stage and count >= int(n):
            os.kill(os.getpid(), signal.SIGKILL)


class Tally:
    """One phase's results as they arrive: outcome counts, bytes deleted (or quarantined), failures, actions
    done."""

    def __init__(self, outcomes=tuple(o.value for o in FileOutcome)):
        self.counts = dict.fromkeys(outcomes, 0)  # the outcomes the report shows; others are added as they come
        self.deleted_bytes = 0
        self.quarantined_bytes = 0  # of files put aside (known sizes): not reclaimed until purged
        self.unknown_size = 0  # files deleted whose size the plan does not know (not in deleted_bytes)
        self.failed = 0
        self.first_failure: tuple[int, str | None] | None = None  # (action id, error)
        self.first_held: tuple[int, str] | None = None  # the first action skipped or dropped: (action id, why)
        self.done = IdSet()  # action ids whose outcome is not FAILED

    def add(self, sizes: ActionSizes, rows: Sequence[tuple]) -> int:
        """Count result rows ``(action_id, outcome, attempts, error, ms, moved_to)`` of a plan whose actions'
        sizes and verbs ``sizes`` gives by action id (``action_sizes``); returns the planned size of their
        files (for progress)."""
        counts = self.counts
        outcomes = [r[1] for r in rows]
        tallied = collections.Counter(outcomes)
        for outcome, n in tallied.items():
            counts[outcome] = counts.get(outcome, 0) + n
        n = len(rows)
        ids = np.fromiter((r[0] for r in rows), np.int64, n)
        size, known = sizes.size[ids], sizes.known[ids]
        deleted = np.fromiter((o == _DELETED for o in outcomes), np.bool_, n)
        self.deleted_bytes += int(size[deleted].sum())
        self.unknown_size += int(np.count_nonzero(deleted & ~known & sizes.file_delete[ids]))
        if tallied.get(_QUARANTINED):
            self.quarantined_bytes += int(size[np.fromiter((o == _QUARANTINED for o in outcomes), np.bool_, n)].sum())
        failed = tallied.get(_FAILED, 0)
        if failed:
            self.failed += failed
            if self.first_failure is None:
                self.first_failure = next((r[0], r[3]) for r in rows if r[1] == _FAILED)
            ids = ids[np.fromiter((o != _FAILED for o in outcomes), np.bool_, n)]
        if self.first_held is None and (tallied.get(_SKIPPED) or tallied.get(_DROPPED)):
            self.first_held = next(((r[0], r[3]) for r in rows if r[3] and r[1] in (_SKIPPED, _DROPPED)), None)
        self.done.update(ids)
        return int(size.sum())

    def summary(self, phase: str, n_actions: int) -> dict:
        """One row of the report: the phase, its action count, outcome counts, bytes deleted (known sizes),
        how many files were deleted whose size is unknown, and (files quarantined) the bytes put aside."""
        row = {"phase": phase, "actions": n_actions, **self.counts, "bytes": self.deleted_bytes,
               "unknown_size": self.unknown_size}
        if Outcome.QUARANTINED.value in self.counts:
            row["quarantined_bytes"] = self.quarantined_bytes
        return row


class _JournalBehind:
    """Journal writes made one at a time, in order, on a thread of their own, while the caller goes on: the
    next ``submit`` (and the end of the block) first waits for the write under way and raises its error. A
    block that ends by an error still waits for that write, and the write's own error becomes a note on it."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lakesweep-journal")
        self._pending: Future | None = None

    def submit(self, fn: Callable, *args) -> None:
        self._wait()
        self._pending = self._pool.submit(fn, *args)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def __enter__(self) -> "_JournalBehind":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc is None:
                self._wait()
            else:
                try:
                    self._wait()
                except Exception as late:  # noqa: BLE001 - the block's own error is the one raised
                    exc.add_note(f"the journal write under way failed too: {type(late).__name__}: {late}")
        finally:
            self._pool.shutdown(wait=True)


def probe(fileio: FileIO, target: str, a: Action, *, look: bool = True,
          quarantine: tuple[QuarantineSpec, str, Sequence[str]] | None = None) -> ActionResult:
    """What executing ``a`` would do, found by looking only (``look`` false: by the plan alone, a delete
    counted DELETED whether or not the file is still there). ``quarantine``: (spec, root, external roots)
    of an apply that puts files aside: a file to delete would be QUARANTINED, to where the spec says."""
    if a.verb.deletes:
        outcome = Outcome.DELETED if not look or fileio.exists(target) else Outcome.ALREADY_ABSENT
        if quarantine is not None and a.verb is Verb.DELETE_FILE and outcome == Outcome.DELETED:
            spec, root, external = quarantine
            return ActionResult(a.action_id, Outcome.QUARANTINED, 0, moved_to=spec.location(target, root, external))
    else:
        outcome = Outcome.WRITTEN
    return ActionResult(a.action_id, outcome, 0)


class PhaseRunner:
    """Runs phases of one plan against one table, sending every result batch to the journal (``recorder``;
    None for a dry run, which journals nothing) and the progress display."""

    def __init__(self, *, actions: Sequence[Action], plan_id: str, recorder: Recorder | None, apply_id: str | None,
                 fileio: FileIO, root: str, external: Sequence[str], targets: Sequence[str], progress: Progress,
                 clock: Callable[[], int], executor: BulkExecutor, dry_run: bool = False, check_files: bool = True,
                 quarantine: QuarantineSpec | None = None):
        self.actions = actions  # canonical: an action's id is its index
        self.sizes = action_sizes(actions)
        self.plan_id, self.recorder, self.apply_id = plan_id, recorder, apply_id
        self.fileio, self.root, self.external, self.targets = fileio, root, external, targets
        self.progress, self.clock, self.executor, self.dry_run = progress, clock, executor, dry_run
        self.check_files = check_files  # a dry run: look at each file (else the plan alone answers)
        self.quarantine = quarantine  # files to delete are put aside as it says (apply --quarantine)
        self.received = 0
        self.journaled = 0
        self.throttled = 0  # 503 SlowDown answers the store gave the bulk phases

    def record(self, results: Sequence[ActionResult], tally: Tally) -> None:
        now = self.clock()
        self.record_rows([(r.action_id, r.outcome.value, r.attempts, r.error, r.finished_ms or now, r.moved_to)
                          for r in results], tally)

    def record_rows(self, rows: Sequence[tuple], tally: Tally) -> None:
        """``record`` of result rows as the executors give them: ``(action_id, outcome, attempts, error,
        finished_ms, moved_to)``, journaled in one transaction."""
        self.received += len(rows)
        if self.recorder is not None:
            crash_hook("before-journal", self.received)
        size = tally.add(self.sizes, rows)
        if self.recorder is not None:
            self.recorder.record_outcomes(self.apply_id, self.plan_id, rows)
            self.journaled += len(rows)
        self.progress.advance(len(rows), size)
        if self.recorder is not None:
            crash_hook("after-journal", self.journaled)

    def bulk(self, actions: list[Action], tally: Tally) -> None:
        if self.dry_run and not self.check_files:
            self.ordered(actions, tally)  # nothing to look at: no task to run
            return
        # One journal transaction per task batch costs more than the deletes of a fast file system;
        # results are gathered up to _BULK_JOURNAL_BATCH (or a second's worth) per transaction, and journaled
        # by a thread of their own while the executors' next results arrive.
        gathered: list[tuple] = []
        since = time.monotonic()
        behind = _JournalBehind()

        def on_batch(batch: list[tuple]) -> None:
            nonlocal gathered, since
            gathered.extend(batch)
            if len(gathered) >= _BULK_JOURNAL_BATCH or time.monotonic() - since >= _DRIVER_BATCH_S:
                behind.submit(self.record_rows, gathered, tally)
                gathered = []
                since = time.monotonic()

        def on_throttled(slowdowns: int, rate: float) -> None:
            self.throttled += slowdowns
            if self.recorder is not None:
                behind.submit(self.recorder.append, [RequestsThrottled(
                    apply_id=self.apply_id, plan_id=self.plan_id, phase=actions[0].phase, slowdowns=slowdowns,
                    lowest_rate=rate, recorded_ms=self.clock())])

        with self._held(), behind:
            self.executor.run(self.fileio, self.root, self.external, actions, on_batch=on_batch,
                              dry_run=self.dry_run, on_throttled=on_throttled, quarantine=self.quarantine)
            if gathered:
                behind.submit(self.record_rows, gathered, tally)

    def _held(self):
        return contextlib.nullcontext() if self.recorder is None else self.recorder.held()

    def ordered(self, actions: list[Action], tally: Tally) -> None:
        # One action at a time on the driver, journaled in batches. An action done but not journaled when
        # the process dies is found done again by resume (ALREADY_ABSENT, or the same bytes written again).
        if self.dry_run and not self.check_files and self.quarantine is None:
            self._by_plan(actions, tally)
            return
        pending: list[ActionResult] = []
        flushed = time.monotonic()
        with self._held():
            for a in actions:
                if self.dry_run:
                    where = None if self.quarantine is None else (self.quarantine, self.root, self.external)
                    pending.append(probe(self.fileio, self.targets[a.action_id], a, look=self.check_files,
                                         quarantine=where))
                else:
                    pending.append(execute_with_retry(self.fileio, self.root, a, external_roots=self.external,
                                                      clock_ms=self.clock, quarantine=self.quarantine))
                if len(pending) >= _DRIVER_BATCH or time.monotonic() - flushed >= _DRIVER_BATCH_S:
                    self.record(pending, tally)
                    pending, flushed = [], time.monotonic()
            if pending:
                self.record(pending, tally)


    def _by_plan(self, actions: Sequence[Action], tally: Tally) -> None:
        """A dry run that looks at no file: each action's outcome is its verb's (``probe`` without looking),
        read from the plan's fields without building the actions."""
        rows: list[tuple] = []
        now = self.clock()
        for action_id, verb in fields_of(actions, "action_id", "verb"):
            rows.append((action_id, _DELETED if verb.deletes else _WRITTEN, 0, None, now, None))
            if len(rows) >= _BULK_JOURNAL_BATCH:
                self.record_rows(rows, tally)
                rows = []
        if rows:
            self.record_rows(rows, tally)

    def merge(self, groups: Sequence[tuple[int, list[Action], object]], fn: Callable, tally: Tally, *,
              phase: int) -> dict[int, dict]:
        """Run ``fn(task)`` for each (group, actions, task) on the executor; journal each output written
        (``fn`` returns ``{"location", "written", "record_count", "bytes", "statistics"}``), then its
        group's actions WRITTEN, or FAILED with the error. Returns the outputs written, by group."""
        outputs: dict[int, dict] = {}
        if self.dry_run:
            for _, actions, _ in groups:
                self.record([ActionResult(a.action_id, Outcome.WRITTEN, 0) for a in actions], tally)
            return outputs

        def on_result(index: int, ok: bool, value) -> None:
            group, actions, _ = groups[index]
            now = self.clock()
            if not ok:
                self.record([ActionResult(a.action_id, Outcome.FAILED, 1, str(value), now) for a in actions], tally)
                return
            if self.recorder is not None:
                self.recorder.append([OutputWritten(
                    apply_id=self.apply_id, plan_id=self.plan_id, phase=phase, group=group, path=value["location"],
                    written=bool(value["written"]), record_count=int(value["record_count"]),
                    bytes=int(value["bytes"]), statistics=value["statistics"], written_ms=now)])
            outputs[group] = value
            self.record([ActionResult(a.action_id, Outcome.WRITTEN, 1, None, now) for a in actions], tally)

        self.executor.map(fn, [task for _, _, task in groups], on_result=on_result)
        return outputs
