"""Executing one plan action against storage. No Spark here: Spark tasks and the driver both call this.

Every action is idempotent: a file already gone is ``ALREADY_ABSENT``; a hint or changelog file
already written is written again with the same content.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from lakesweep.engine.errors import DeleteUnconfirmed, PlanRejected, QuarantineUnsupported, StorageError
from lakesweep.engine.fileio import DeleteOutcome, FileIO, MoveOutcome
from lakesweep.engine.paths import target_of
from lakesweep.engine.plan import Action, Verb, kind_spec
from lakesweep.engine.quarantine import QuarantineSpec, VersionedDelete
from lakesweep.journal.events import FileOutcome as Outcome  # the journal's outcomes are the executor's


@dataclass(frozen=True, slots=True)
class ActionResult:
    action_id: int
    outcome: Outcome
    attempts: int
    error: str | None = None
    finished_ms: int = 0
    moved_to: str | None = None  # QUARANTINED: where the file went (``FileIO.quarantine``'s where)


def execute_action(fileio: FileIO, root: str, action: Action, external_roots: Sequence[str] = (),
                   checked: set[str] | None = None) -> Outcome:
    """Do one action. Raises ``StorageError`` on failure (callers retry), ``PlanRejected`` on a bad path.

    ``checked``: directories already found not to be symbolic links, shared by a batch of actions run
    together (a bulk task checks each directory once per batch, not once per file)."""
    target = target_of(fileio, root, action.path, external_roots, checked)
    verb = action.verb
    if verb is Verb.DELETE_FILE:
        result = fileio.delete(target)
        return Outcome.DELETED if result == DeleteOutcome.DELETED else Outcome.ALREADY_ABSENT
    if verb is Verb.PURGE_VERSION:
        versioned = VersionedDelete.parse(action.source or "")
        if versioned is None:
            raise PlanRejected(f"action {action.action_id} ({action.kind} {action.path!r}): its source "
                               f"{action.source!r} names no version to purge; the plan is refused")
        result = fileio.purge_version(target, versioned)
        return Outcome.DELETED if result == DeleteOutcome.DELETED else Outcome.ALREADY_ABSENT
    if verb is Verb.DELETE_EMPTY_DIR:
        if not fileio.exists(target):
            return Outcome.ALREADY_ABSENT
        return Outcome.DELETED if fileio.delete_empty_dir(target) else Outcome.KEPT_NOT_EMPTY
    if verb is Verb.WRITE_FILE:
        if action.source is None:  # a pointer: the value is the action's snapshot id
            fileio.write_atomic(target, str(action.snapshot_id).encode())
            return Outcome.WRITTEN
        source = target_of(fileio, root, action.source, external_roots, checked)
        try:
            data = fileio.read_bytes(source)
        except FileNotFoundError:
            if fileio.exists(target):
                return Outcome.WRITTEN  # done by an earlier, interrupted run
            raise StorageError(source, f"{action.source}, the file to copy to {action.path}, is gone and the copy "
                                       "does not exist")
        fileio.write_atomic(target, data)
        spec = kind_spec(action.kind)
        if spec is not None and spec.after_write is not None:  # e.g. Paimon's changelog LATEST hint
            spec.after_write(fileio, target, action)
        return Outcome.WRITTEN
    raise PlanRejected(f"action {action.action_id} ({action.kind} {action.path!r}): a {verb} action is not "
                       "carried out file by file; the plan is refused")


def quarantine_action(fileio: FileIO, root: str, action: Action, spec: QuarantineSpec,
                      external_roots: Sequence[str] = (),
                      checked: set[str] | None = None) -> tuple[Outcome, str | None]:
    """Put the file of a DELETE_FILE action aside (``FileIO.quarantine``) instead of deleting it: QUARANTINED
    and where it went, also when an earlier, interrupted attempt moved it; ALREADY_ABSENT when it is nowhere.
    ``FileExistsError`` when a file is already at its place in the quarantine (nothing moved)."""
    target = target_of(fileio, root, action.path, external_roots, checked)
    dest = spec.location(target, root, external_roots)
    try:
        outcome, where = fileio.quarantine(target, dest)
    except FileExistsError as e:
        raise FileExistsError(f"not quarantined: a file is already at {dest}, so {target} was not moved there; "
                              "both are kept") from e
    if outcome == MoveOutcome.ABSENT:
        return Outcome.ALREADY_ABSENT, None
    return Outcome.QUARANTINED, where


def execute_with_retry(
    fileio: FileIO,
    root: str,
    action: Action,
    *,
    external_roots: Sequence[str] = (),
    attempts: int = 4,
    base_delay_s: float = 0.05,
    sleep: Callable[[float], None] = time.sleep,
    clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    checked: set[str] | None = None,
    quarantine: QuarantineSpec | None = None,
    first_attempt: int = 1,
) -> ActionResult:
    """Execute with exponential backoff and jitter; a storage error on the last attempt is ``FAILED``.

    A file found absent after an attempt's delete went out unanswered (``DeleteUnconfirmed``) is ``DELETED``:
    that attempt saw it, so ``ALREADY_ABSENT`` would be a false record. With ``quarantine``, a DELETE_FILE
    action moves its file aside instead (``quarantine_action``); a file already at its place in the
    quarantine is never replaced: the action FAILS at once, naming both, and the file is kept.
    ``first_attempt`` > 1: the caller made the attempts before it, which failed with a storage error (a bulk
    task's first try); the backoff and the count go on from there."""
    last = None
    unconfirmed = False
    for attempt in range(first_attempt, attempts + 1):
        if attempt > 1 and attempt == first_attempt:
            sleep(base_delay_s * (2 ** (attempt - 2)) * (1 + random.random()))
        try:
            if quarantine is not None and action.verb is Verb.DELETE_FILE:
                outcome, where = quarantine_action(fileio, root, action, quarantine, external_roots, checked)
                return ActionResult(action.action_id, outcome, attempt, None, clock_ms(), where)
            outcome = execute_action(fileio, root, action, external_roots, checked)
            if unconfirmed and outcome is Outcome.ALREADY_ABSENT:
                outcome = Outcome.DELETED
            return ActionResult(action.action_id, outcome, attempt, None, clock_ms())
        except (PlanRejected, QuarantineUnsupported) as e:
            # A refused path is not a storage hiccup: no retry, and the phase fails with the reason.
            return ActionResult(action.action_id, Outcome.FAILED, attempt, f"refused: {e}", clock_ms())
        except (StorageError, OSError) as e:
            if isinstance(e, FileExistsError) and quarantine is not None and action.verb is Verb.DELETE_FILE:
                # quarantine_action's: trying again would find the same file there
                return ActionResult(action.action_id, Outcome.FAILED, attempt, str(e), clock_ms())
            unconfirmed = unconfirmed or isinstance(e, DeleteUnconfirmed)
            last = f"{type(e).__name__}: {e}"
            if attempt < attempts:
                sleep(base_delay_s * (2 ** (attempt - 1)) * (1 + random.random()))
    return ActionResult(action.action_id, Outcome.FAILED, attempts, last, clock_ms())
