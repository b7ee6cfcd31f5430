"""Where an action's file is: plan paths resolved against a table's root and its external roots, nothing
re-rooted, and on local storage no symbolic link followed. Every format's path checks and every executor use
these."""

from __future__ import annotations

import os
import posixpath
from typing import Sequence

from lakesweep.engine.errors import InvalidLocation, PlanRejected
from lakesweep.engine.fileio import FileIO, join, normalize_location


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
            wrapped = "/" + path + "/"  # an empty, '.' or '..' segment, found without splitting a million paths
            if "//" in wrapped or "/./" in wrapped or "/../" in wrapped:
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
