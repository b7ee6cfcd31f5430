"""Executing one plan action against storage. No Spark here: Spark tasks and the driver both call this.

Every action is idempotent: a file already gone is ``ALREADY_ABSENT``; a hint or changelog file
already written is written again with the same content.
"""

from __future__ import annotations

import posixpath
import random
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from engine.errors import PlanRejected, StorageError
from engine.fileio import DeleteOutcome, FileIO, join
from engine.plan import Action, ActionKind
from journal.events import FileOutcome as Outcome  # the journal's outcomes are the executor's


@dataclass(frozen=True, slots=True)
class ActionResult:
    action_id: int
    outcome: Outcome
    attempts: int
    error: str | None = None
    finished_ms: int = 0


def resolve_action_path(root: str, path: str, external_roots: Sequence[str] = ()) -> str:
    """The full location of an action's path; refuses anything outside the table root or its external roots.

    ``..`` segments are normalised away first, so ``dt=1/../../other/x`` cannot escape.
    """
    full = path if ("://" in path or path.startswith("/")) else join(root, path)
    scheme, sep, rest = full.partition("://")
    if sep:
        normal = scheme + "://" + posixpath.normpath(rest)
    else:
        normal = posixpath.normpath(full)
    allowed = [root.rstrip("/")] + [r.rstrip("/") for r in external_roots if r]
    if not any(normal == r or normal.startswith(r + "/") for r in allowed):
        raise PlanRejected(
            f"action path {path!r} resolves to {normal}, outside the table root {root} "
            f"and its external paths; the plan is refused"
        )
    if normal.rstrip("/") == root.rstrip("/"):
        raise PlanRejected(f"action path {path!r} is the table root itself; the plan is refused")
    return normal


def execute_action(fileio: FileIO, root: str, action: Action, external_roots: Sequence[str] = ()) -> Outcome:
    """Do one action. Raises ``StorageError`` on failure (callers retry), ``PlanRejected`` on a bad path."""
    target = resolve_action_path(root, action.path, external_roots)
    kind = action.kind
    if kind == ActionKind.EMPTY_DIR:
        if not fileio.exists(target):
            return Outcome.ALREADY_ABSENT
        return Outcome.DELETED if fileio.delete_empty_dir(target) else Outcome.KEPT_NOT_EMPTY
    if kind == ActionKind.WRITE_EARLIEST_HINT:
        fileio.write_atomic(target, str(action.snapshot_id).encode())
        return Outcome.WRITTEN
    if kind == ActionKind.WRITE_CHANGELOG:
        source = resolve_action_path(root, action.source or "", external_roots)
        try:
            data = fileio.read_bytes(source)
        except FileNotFoundError:
            if fileio.exists(target):
                return Outcome.WRITTEN  # done by an earlier, interrupted run
            raise StorageError(source, "the snapshot to copy into the changelog is gone and no changelog exists")
        fileio.write_atomic(target, data)
        fileio.write_atomic(join(posixpath.dirname(target), "LATEST"), str(action.snapshot_id).encode())
        return Outcome.WRITTEN
    result = fileio.delete(target)
    return Outcome.DELETED if result == DeleteOutcome.DELETED else Outcome.ALREADY_ABSENT


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
) -> ActionResult:
    """Execute with exponential backoff and jitter; a storage error on the last attempt is ``FAILED``."""
    last = None
    for attempt in range(1, attempts + 1):
        try:
            outcome = execute_action(fileio, root, action, external_roots)
            return ActionResult(action.action_id, outcome, attempt, None, clock_ms())
        except (StorageError, OSError) as e:
            last = f"{type(e).__name__}: {e}"
            if attempt < attempts:
                sleep(base_delay_s * (2 ** (attempt - 1)) * (1 + random.random()))
    return ActionResult(action.action_id, Outcome.FAILED, attempts, last, clock_ms())
