"""Paimon's action kinds for snapshot expiry: each kind's verb, phase and order within its phase.

Expiry deletes in Java's order with a barrier between phases (``ExpireSnapshotsImpl#expireUntil``):
data and extra files, changelog files, empty directories, metadata (manifests, lists, index files,
statistics), changelog metadata (decoupled lifecycle), snapshot files in ascending id, and the
EARLIEST hint last.
"""

from __future__ import annotations

import enum
import posixpath

from engine.fileio import join
from engine.plan import Action, PhaseMode, PhaseSpec, Verb


PLAN_KINDS = ("expire",)  # the plan kinds whose actions are defined here


class Phase(enum.IntEnum):
    """Expiry's phases, by their position in ``EXPIRE_PHASES`` (counted from 1, as stored)."""

    DATA_FILES = 1
    CHANGELOG_FILES = 2
    EMPTY_DIRS = 3
    METADATA = 4
    CHANGELOG_METADATA = 5
    SNAPSHOTS = 6
    HINT = 7


_MODES = {
    Phase.DATA_FILES: PhaseMode.BULK,
    Phase.CHANGELOG_FILES: PhaseMode.BULK,
    Phase.EMPTY_DIRS: PhaseMode.ORDERED,  # deepest first
    Phase.METADATA: PhaseMode.BULK,
    Phase.CHANGELOG_METADATA: PhaseMode.ORDERED,
    Phase.SNAPSHOTS: PhaseMode.ORDERED,  # ascending: a crash leaves a contiguous range
    Phase.HINT: PhaseMode.ORDERED,
}
EXPIRE_PHASES: tuple[PhaseSpec, ...] = tuple(PhaseSpec(p.name.lower(), _MODES[p]) for p in Phase)


class ActionKind(enum.StrEnum):
    DATA_FILE = "data-file"
    EXTRA_FILE = "extra-file"
    CHANGELOG_FILE = "changelog-file"
    EMPTY_DIR = "empty-dir"
    MANIFEST = "manifest"
    MANIFEST_LIST = "manifest-list"
    INDEX_FILE = "index-file"
    INDEX_MANIFEST = "index-manifest"
    STATISTICS = "statistics"
    WRITE_CHANGELOG = "write-changelog"  # copy snapshot-N to changelog/changelog-N (decoupled lifecycle)
    SNAPSHOT = "snapshot"
    WRITE_EARLIEST_HINT = "write-earliest-hint"

    @property
    def phase(self) -> Phase:
        return _PHASE[self]

    @property
    def verb(self) -> Verb:
        return _VERB[self]

    @property
    def deletes(self) -> bool:
        return _VERB[self].deletes

    def after_write(self, fileio, target: str, a: Action) -> None:
        """A changelog copy moves the changelog directory's LATEST hint to its id, as Paimon's expiry
        does when it keeps a snapshot's changelog (decoupled lifecycle)."""
        if self is ActionKind.WRITE_CHANGELOG:
            fileio.write_atomic(join(posixpath.dirname(target), "LATEST"), str(a.snapshot_id).encode())

    def order_key(self, a: Action) -> tuple:
        """Snapshots (and their changelog copies) in ascending id; empty directories deepest first; the
        rest by path."""
        if self is ActionKind.SNAPSHOT or self is ActionKind.WRITE_CHANGELOG:
            return (_RANK[self], a.snapshot_id or 0, a.path)
        if self is ActionKind.EMPTY_DIR:
            return (_RANK[self], -a.depth, a.path)
        return (_RANK[self], 0, a.path)


_VERB = {k: Verb.WRITE_FILE if k in (ActionKind.WRITE_CHANGELOG, ActionKind.WRITE_EARLIEST_HINT)
         else Verb.DELETE_EMPTY_DIR if k is ActionKind.EMPTY_DIR else Verb.DELETE_FILE for k in ActionKind}
_PHASE = {
    ActionKind.DATA_FILE: Phase.DATA_FILES,
    ActionKind.EXTRA_FILE: Phase.DATA_FILES,
    ActionKind.CHANGELOG_FILE: Phase.CHANGELOG_FILES,
    ActionKind.EMPTY_DIR: Phase.EMPTY_DIRS,
    ActionKind.MANIFEST: Phase.METADATA,
    ActionKind.MANIFEST_LIST: Phase.METADATA,
    ActionKind.INDEX_FILE: Phase.METADATA,
    ActionKind.INDEX_MANIFEST: Phase.METADATA,
    ActionKind.STATISTICS: Phase.METADATA,
    ActionKind.WRITE_CHANGELOG: Phase.CHANGELOG_METADATA,
    ActionKind.SNAPSHOT: Phase.SNAPSHOTS,
    ActionKind.WRITE_EARLIEST_HINT: Phase.HINT,
}
_RANK = {k: i for i, k in enumerate(ActionKind)}
KINDS = {k.value: k for k in ActionKind}  # a stored label -> its kind
# A label -> (verb, phase), looked up by the label's text: hashing an enum member calls Enum.__hash__ in
# Python, once per action of a 300,000-action plan.
SHAPES = {k.value: (_VERB[k], int(_PHASE[k])) for k in ActionKind}
PARTITIONED_KINDS = frozenset({ActionKind.DATA_FILE, ActionKind.EXTRA_FILE, ActionKind.CHANGELOG_FILE})
