"""``lakesweep restore``: bring back the files an ``apply --quarantine`` of a plan put aside, journaled per file.

A restore is an apply of the same plan in ``restore`` mode: ``ApplyStarted(mode="restore")``, one RESTORED (or
FAILED) record per file, then ``ApplyCompleted`` or ``ApplyFailed``; ``resume`` finishes a crashed one. What is
in quarantine is the journal's answer (``journal.queries.in_quarantine``). A file that exists again at its
original path is refused, never overwritten. See docs/design/quarantine.md#restore.
"""

from __future__ import annotations

import functools
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Sequence

from lakesweep.engine.errors import JournalConflict, LakesweepError, StorageError
from lakesweep.engine.fileio import FileIO, MoveOutcome
from lakesweep.engine.formats import format_of
from lakesweep.engine.paths import PathResolver
from lakesweep.engine.plan import CleanupPlan, PhaseMode
from lakesweep.engine.quarantine import QuarantineSpec, VersionedDelete
from lakesweep.journal.events import ApplyCompleted, ApplyFailed, ApplyStarted, FileOutcome, FileRecord
from lakesweep.journal.globs import glob_regex
from lakesweep.journal.queries import apply_modes, in_quarantine, unfinished_apply
from lakesweep.journal.recorder import Recorder

from lakesweep.applier.executors import BulkExecutor, SparkExecutor
from lakesweep.applier.phases import crash_hook

RESTORE_CHUNK = 500  # files per task: a rename each on local/HDFS, a request or two on S3
RESTORE_ATTEMPTS = 3


class NothingToRestore(LakesweepError):
    """The journal holds no file of the plan in quarantine (matching ``--files``): nothing was done."""


@dataclass
class RestoreReport:
    """What one restore did; ``commit_note`` says what the plan committed that restoring files does not undo."""

    plan_id: str
    apply_id: str
    state: str  # COMPLETED, FAILED
    resumed: bool = False
    restored: int = 0  # files restored by this restore (before a crash included)
    restored_bytes: int = 0
    refused: list = field(default_factory=list)  # [{"path", "where"}]: a file exists again at the original path
    failed: list = field(default_factory=list)  # [{"path", "error"}]: could not be moved back
    left: int = 0  # files of the plan still in quarantine afterwards
    commit_note: str | None = None
    duration_ms: int = 0

    @property
    def reason(self) -> str | None:
        if not self.refused and not self.failed:
            return None
        parts = []
        if self.refused:
            shown = ", ".join(r["path"] for r in self.refused[:10])
            more = f" and {len(self.refused) - 10} more" if len(self.refused) > 10 else ""
            parts.append(f"{len(self.refused)} file(s) refused because a file exists again at the original path "
                         f"({shown}{more}); their quarantined copies stay where they are")
        if self.failed:
            first = self.failed[0]
            parts.append(f"{len(self.failed)} file(s) could not be moved back; first: {first['path']}: "
                         f"{first['error']}")
        return "; ".join(parts) + f". Run 'lakesweep restore {self.plan_id}' again once that is resolved"

    def to_json(self) -> dict:
        return {"plan_id": self.plan_id, "apply_id": self.apply_id, "state": self.state, "resumed": self.resumed,
                "restored": self.restored, "restored_bytes": self.restored_bytes, "refused": self.refused,
                "failed": self.failed, "left_in_quarantine": self.left, "reason": self.reason,
                "commit_note": self.commit_note, "duration_ms": self.duration_ms}


def refused_message(path: str, where: str) -> str:
    return f"refused: {path} exists again; the quarantined copy stays at {where}"


def restore_files(fileio: FileIO, items: Sequence[tuple[int, str, str]]) -> list[tuple]:
    """Task side: move each ``(action_id, original, where)`` back; ``[(action_id, outcome, error, ms)]``.

    MOVED and ALREADY_MOVED (an earlier attempt moved it) are RESTORED; a file at the original path again is
    refused (``FileExistsError``, nothing changed); neither there nor in quarantine is FAILED (the file is lost,
    the journal must say so, not RESTORED)."""
    out = []
    for action_id, original, where in items:
        error = None
        for attempt in range(1, RESTORE_ATTEMPTS + 1):
            try:
                moved = fileio.restore(original, where)
                if moved is MoveOutcome.ABSENT:
                    error = f"{original} is not there and its quarantined copy {where} is gone"
                break
            except FileExistsError:
                error = refused_message(original, where)
                break
            except (StorageError, OSError) as e:
                error = f"{type(e).__name__}: {e}"
                if attempt < RESTORE_ATTEMPTS:
                    time.sleep(0.05 * 2 ** (attempt - 1))
        outcome = FileOutcome.FAILED if error is not None else FileOutcome.RESTORED
        out.append((action_id, outcome.value, error, int(time.time() * 1000)))
    return out


def commit_note(plan: CleanupPlan) -> str | None:
    """For a plan with a commit phase: that restoring files does not undo the commit, and the engine's own way
    back (the snapshot ids where the plan's scope gives them); None for a plan that commits nothing."""
    if not any(p.mode == PhaseMode.COMMIT for p in plan.phases):
        return None
    scope = plan.scope
    head = (f"plan {plan.plan_id} ({plan.kind}) committed new table metadata; restoring its files does not undo "
            "that commit.")
    if plan.format == "iceberg":
        table = getattr(scope, "identifier", None) or plan.table_location
        expired = list(getattr(scope, "expired", ()) or ())
        before = getattr(scope, "current_snapshot_id", None)
        gone = f" The commit removed snapshot(s) {', '.join(map(str, expired))} from the metadata." if expired else ""
        at = before if before is not None else "<snapshot id>"
        return (f"{head}{gone} Iceberg's way back: roll the table back to a snapshot still in its metadata whose "
                f"files are back, e.g. CALL <catalog>.system.rollback_to_snapshot('{table}', {at}) or "
                f"CALL <catalog>.system.set_current_snapshot('{table}', {at}) (pyiceberg: "
                f"table.manage_snapshots().rollback_to_snapshot({at}).commit()); an expired snapshot comes back only "
                "by registering the metadata file written before the expiry (its metadata log names it).")
    snapshot = getattr(scope, "snapshot", None)
    at = snapshot if snapshot is not None else "<snapshot id>"
    return (f"{head} Paimon's way back: roll the table back to a tag or to the snapshot before the commit, e.g. "
            f"CALL sys.rollback_to(`table` => '<database>.<table>', snapshot_id => {at}) "
            "(or tag => '<tag>'); the files it reads are back.")


def _matcher(files: str | None) -> Callable[[str], bool]:
    if files is None:
        return lambda _: True
    return re.compile(glob_regex(files)).fullmatch  # type: ignore[return-value]


def restore_plan(
    plan: CleanupPlan,
    recorder: Recorder,
    *,
    files: str | None = None,
    fileio: FileIO | None = None,
    executor: BulkExecutor | None = None,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    spark=None,
    clock: Callable[[], int] = lambda: int(time.time() * 1000),
    resume_apply_id: str | None = None,
    on_spark_ui: Callable[[str], None] | None = None,
) -> RestoreReport:
    """Move the plan's quarantined files (those whose path matches the shell glob ``files``) back, journaled as
    a restore apply of the plan. Idempotent: what was restored is not in quarantine any more. A file that exists
    again at its original path is refused and kept in quarantine (FAILED, the restore ends FAILED naming it).
    ``resume_apply_id``: finish that crashed restore (found by itself when the plan's unfinished apply is one).
    Raises ``NothingToRestore`` when nothing of the plan (that matches) is in quarantine (naming the engine's way
    back when the plan committed), ``JournalConflict`` when another apply of the plan is unfinished."""
    started = clock()
    plan_id = plan.plan_id
    if resume_apply_id is None:
        running = unfinished_apply(recorder, plan_id)
        if running is not None and is_restore(recorder, plan_id, running):
            resume_apply_id = running  # a restore that stopped before its end: this one finishes it
        elif running is not None:
            raise JournalConflict(f"plan {plan_id} has an unfinished apply {running} in this journal; finish it "
                                  f"with 'lakesweep resume {plan_id}' first")
    matches = _matcher(files)
    pending = {a: rec for a, rec in in_quarantine(recorder, plan_id).items() if matches(rec.path)}
    if not pending and resume_apply_id is None:
        which = f" whose path matches {files!r}" if files is not None else ""
        note = commit_note(plan)
        raise NothingToRestore(f"plan {plan_id} has no file in quarantine{which} in this journal (it was not applied "
                               "with --quarantine, or its files were restored or purged already); nothing was done"
                               + (f". {note}" if note else ""))
    fmt = format_of(plan)
    table = fmt.open(plan, fileio)
    io = table.fileio
    root = table.location
    external = fmt.external_roots(table)
    items = _checked_items(plan, recorder, pending, root, external)
    executor = executor or SparkExecutor(spark, master, conf, on_spark_ui)
    try:
        if items:
            executor.start()
        if resume_apply_id is None:
            apply_id = uuid.uuid4().hex[:16]
            recorder.append([ApplyStarted(apply_id=apply_id, plan_id=plan_id, n_actions=len(plan.actions),
                                          bytes=sum(plan.actions[a].size or 0 for a in pending), master=master,
                                          dry_run=False, started_ms=started, mode="restore")])
        else:
            apply_id = resume_apply_id
        report = RestoreReport(plan_id, apply_id, "COMPLETED", resumed=resume_apply_id is not None,
                               commit_note=commit_note(plan))
        received = 0

        def on_result(index: int, ok: bool, value) -> None:
            nonlocal received
            chunk = chunks[index]
            rows = value if ok else [(a, FileOutcome.FAILED.value, str(value), clock()) for a, _, _ in chunk]
            received += len(rows)
            crash_hook("before-journal", received)
            where = {a: w for a, _, w in chunk}
            records = []
            for action_id, outcome, error, ms in rows:
                a = plan.actions[action_id]
                outcome = FileOutcome(outcome)
                records.append(FileRecord(
                    apply_id=apply_id, plan_id=plan_id, action_id=action_id, path=a.path, kind=a.kind, phase=a.phase,
                    bytes=a.size, outcome=outcome, error=error, attempt=1, time_ms=ms,
                    moved_to=where[action_id] if outcome == FileOutcome.RESTORED else None))
            recorder.record_files(records)
            crash_hook("after-journal", received)

        ready = [(a, original, where) for a, original, where in items if original is not None]
        for a, _, error in (i for i in items if i[1] is None):
            on_refused_by_journal(recorder, plan, apply_id, a, error, clock())
        chunks = [ready[i:i + RESTORE_CHUNK] for i in range(0, len(ready), RESTORE_CHUNK)]
        if chunks:
            executor.map(functools.partial(restore_files, io), chunks, on_result=on_result)
        _finish(recorder, plan, report, clock, started)
        return report
    finally:
        executor.stop()


def _checked_items(plan: CleanupPlan, recorder: Recorder, pending: dict[int, FileRecord], root: str,
                   external: Sequence[str]) -> list[tuple[int, str | None, str]]:
    """``(action_id, original location, where)`` per file to restore; the original ``None`` (and ``where`` the
    reason) when the journal's record does not fit the table: a path outside its roots, or a ``where`` that is
    not where the apply's quarantine puts that file. Such a record is refused, never followed."""
    specs = {ev.apply_id: QuarantineSpec(ev.quarantine["plan_id"], ev.quarantine["retention_ms"],
                                         ev.quarantine.get("root"))
             for ev in recorder.events(plan_id=plan.plan_id)
             if isinstance(ev, ApplyStarted) and ev.mode == "quarantine" and ev.quarantine is not None}
    resolver = PathResolver(root, external)
    out = []
    for action_id, rec in pending.items():
        try:
            original = resolver.full(rec.path)
        except LakesweepError as e:
            out.append((action_id, None, f"refused: {e}"))
            continue
        spec = specs.get(rec.apply_id)
        if VersionedDelete.parse(rec.moved_to) is None:
            expected = spec.location(original, root, external) if spec is not None else None
            if rec.moved_to != expected:
                out.append((action_id, None, f"refused: the journal says {original} was put at {rec.moved_to}, "
                                             f"not where apply {rec.apply_id}'s quarantine puts it ({expected})"))
                continue
        out.append((action_id, original, rec.moved_to))
    return out


def on_refused_by_journal(recorder: Recorder, plan: CleanupPlan, apply_id: str, action_id: int, error: str,
                          now: int) -> None:
    a = plan.actions[action_id]
    recorder.record_files([FileRecord(apply_id=apply_id, plan_id=plan.plan_id, action_id=action_id, path=a.path,
                                      kind=a.kind, phase=a.phase, bytes=a.size, outcome=FileOutcome.FAILED,
                                      error=error, attempt=1, time_ms=now)])


def _finish(recorder: Recorder, plan: CleanupPlan, report: RestoreReport, clock, started: int) -> None:
    """Count what this restore did (before a crash included) and journal its end."""
    latest: dict[int, FileRecord] = {}
    for rec in recorder.file_records(apply_id=report.apply_id):
        latest[rec.action_id] = rec
    for rec in latest.values():
        if rec.outcome == FileOutcome.RESTORED:
            report.restored += 1
            report.restored_bytes += rec.bytes or 0
        elif rec.error is not None and rec.error.startswith("refused: ") and " exists again;" in rec.error:
            report.refused.append({"path": rec.path, "where": rec.error.rsplit(" stays at ", 1)[-1]})
        else:
            report.failed.append({"path": rec.path, "error": rec.error})
    report.left = len(in_quarantine(recorder, plan.plan_id))
    report.duration_ms = clock() - started
    if report.refused or report.failed:
        report.state = "FAILED"
        recorder.append([ApplyFailed(apply_id=report.apply_id, plan_id=plan.plan_id, reason=report.reason,
                                     phase=None, finished_ms=clock())])
    else:
        recorder.append([ApplyCompleted(apply_id=report.apply_id, plan_id=plan.plan_id,
                                        counts={FileOutcome.RESTORED.value: report.restored}, bytes_reclaimed=0,
                                        duration_ms=report.duration_ms, finished_ms=clock())])


def is_restore(recorder: Recorder, plan_id: str, apply_id: str) -> bool:
    """Whether ``apply_id`` of the plan is a restore (its ``ApplyStarted`` says so)."""
    return apply_modes(recorder.events(plan_id=plan_id)).get(apply_id) == "restore"
