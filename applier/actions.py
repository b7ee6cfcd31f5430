"""Executing one plan action against storage. No Spark here: Spark tasks and the driver both call this.

Every action is idempotent: a file already gone is ``ALREADY_ABSENT``; a hint or changelog file
already written is written again with the same content.
"""

from __future__ import annotations

import os
import posixpath
import random
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from engine.errors import InvalidLocation, PlanRejected, StorageError
from engine.fileio import DeleteOutcome, FileIO, join, normalize_location
from engine.plan import Action, Verb
from journal.events import FileOutcome as Outcome  # the journal's outcomes are the executor's


@dataclass(frozen=True, slots=True)
class ActionResult:
    action_id: int
    outcome: Outcome
    attempts: int
    error: str | None = None
    finished_ms: int = 0


class PathResolver:
    """Resolves action paths against one table root and its external roots (``resolve_action_path``), with
    the roots worked out once: a plan of 300,000 actions resolves each path several times on the driver.

    A relative path must be plain (no ``.``, ``..`` or empty segments); an absolute path or URI goes
    through the one normalization (``engine.fileio.normalize_location``). Nothing is ever re-rooted: an
    absolute path outside every root is refused, not joined to the table root.
    """

    __slots__ = ("root", "allowed", "_under", "_longest_first")

    def __init__(self, root: str, external_roots: Sequence[str] = ()):
        self.root = root.rstrip("/")
        self.allowed = [self.root] + [r.rstrip("/") for r in external_roots if r]
        self._under = tuple(r + "/" for r in self.allowed)
        self._longest_first = sorted(self.allowed, key=len, reverse=True)

    def full(self, path: str) -> str:
        """The full location of ``path``; ``PlanRejected`` for anything outside every root."""
        if not (path.startswith("/") or path.startswith("file:") or "://" in path):
            segments = path.split("/")
            if "" in segments or "." in segments or ".." in segments:
                normal = posixpath.normpath(join(self.root, path))
                where = ("outside the table root" if not normal.startswith(self.root + "/")
                         else "inside the table root only through")
                raise PlanRejected(f"action path {path!r} resolves to {normal}, {where} {self.root} and '.', '..' "
                                   "or empty segments, which lakesweep never plans; the plan is refused")
            return self.root + "/" + path  # plain segments under the root: join() without its stripping
        try:
            full = normalize_location(path, relative_ok=False)
        except InvalidLocation as e:
            raise PlanRejected(f"action path {path!r} is refused: {e}") from e
        if full in self.allowed:
            raise PlanRejected(f"action path {path!r} is a root directory ({full}) itself; the plan is refused")
        if not full.startswith(self._under):
            raise PlanRejected(
                f"action path {path!r} resolves to {full}, outside the table root {self.root} "
                f"and its external paths; the plan is refused"
            )
        return full

    def containing_root(self, full: str) -> str:
        """The root that ``full`` lies under; the longest match wins, for an external root inside the table
        root."""
        for r in self._longest_first:
            if full.startswith(r + "/"):
                return r
        raise PlanRejected(f"{full} lies under no root of the table")


def resolve_action_path(root: str, path: str, external_roots: Sequence[str] = ()) -> str:
    """The full location of an action's path; refuses anything outside the table root or its external
    roots (``PathResolver.full``)."""
    return PathResolver(root, external_roots).full(path)


def containing_root(full: str, root: str, external_roots: Sequence[str] = ()) -> str:
    """The root (table root or external root) that ``full`` lies under; ``resolve_action_path`` made sure
    there is one. The longest match wins, for an external root inside the table root."""
    return PathResolver(root, external_roots).containing_root(full)


def refuse_symlinked_parents(full: str, base: str, checked: set[str] | None = None) -> None:
    """On local storage: refuse ``full`` when a directory between ``base`` and it is a symbolic link.

    A link inside the table can make a path that is lexically inside the root name a file outside it.
    ``checked`` caches directories already found to be plain (the driver's pass over a whole plan).
    """
    parent = posixpath.dirname(full)
    pending = []
    while parent.startswith(base + "/") and (checked is None or parent not in checked):
        pending.append(parent)
        parent = posixpath.dirname(parent)
    for d in reversed(pending):
        if os.path.islink(d):
            raise PlanRejected(
                f"{full} is refused: its parent directory {d} is a symbolic link, which can lead outside "
                f"the table root; lakesweep does not follow links when deleting"
            )
        if checked is not None:
            checked.add(d)


def target_of(fileio: FileIO, root: str, path: str, external_roots: Sequence[str] = (),
              checked: set[str] | None = None) -> str:
    """``resolve_action_path`` plus, on local storage, the symbolic-link check (``checked``: as in
    ``refuse_symlinked_parents``)."""
    resolver = PathResolver(root, external_roots)
    full = resolver.full(path)
    if fileio.scheme == "file" and (checked is None or full[:full.rfind("/")] not in checked):
        refuse_symlinked_parents(full, resolver.containing_root(full), checked)
    return full


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
        after = getattr(action.kind, "after_write", None)  # e.g. Paimon's changelog LATEST hint
        if after is not None:
            after(fileio, target, action)
        return Outcome.WRITTEN
    raise PlanRejected(f"action {action.action_id} ({action.kind} {action.path!r}): a {verb} action is not "
                       "carried out file by file; the plan is refused")


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
) -> ActionResult:
    """Execute with exponential backoff and jitter; a storage error on the last attempt is ``FAILED``."""
    last = None
    for attempt in range(1, attempts + 1):
        try:
            outcome = execute_action(fileio, root, action, external_roots, checked)
            return ActionResult(action.action_id, outcome, attempt, None, clock_ms())
        except PlanRejected as e:
            # A refused path is not a storage hiccup: no retry, and the phase fails with the reason.
            return ActionResult(action.action_id, Outcome.FAILED, attempt, f"refused: {e}", clock_ms())
        except (StorageError, OSError) as e:
            last = f"{type(e).__name__}: {e}"
            if attempt < attempts:
                sleep(base_delay_s * (2 ** (attempt - 1)) * (1 + random.random()))
    return ActionResult(action.action_id, Outcome.FAILED, attempts, last, clock_ms())
