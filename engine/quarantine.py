"""Quarantine: where ``apply --quarantine`` puts a file instead of deleting it, for ``lakesweep restore``.

A file keeps its place relative to the root it lies under: ``<root>/_lakesweep_quarantine/<plan id>/<relative
path>``, the root being the table root or the external root of the file (a rename never crosses file
systems), or a quarantine root the user names, for the table root's files. On a versioned S3 bucket nothing
moves: the delete leaves a delete marker, and the journal keeps the versions (``VersionedDelete``).
Design: docs/design/quarantine.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from lakesweep.engine.fileio import join
from lakesweep.engine.paths import containing_root

QUARANTINE_DIR = "_lakesweep_quarantine"
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
VERSION_PREFIX = "s3-version:"


@dataclass(frozen=True, slots=True)
class QuarantineSpec:
    """How one apply quarantines: the plan's id (its own folder), how long files are kept before ``plan
    purge`` may delete them, and a quarantine root for the table root's files (``None``: inside the table,
    ``<table root>/_lakesweep_quarantine``)."""

    plan_id: str
    retention_ms: int = DEFAULT_RETENTION_MS
    root: str | None = None

    def __post_init__(self):
        if not isinstance(self.plan_id, str) or not self.plan_id or "/" in self.plan_id:
            raise ValueError(f"a quarantine needs a plan id without '/', got {self.plan_id!r}")
        if not isinstance(self.retention_ms, int) or isinstance(self.retention_ms, bool) or self.retention_ms < 0:
            raise ValueError(f"retention_ms must be a non-negative int, got {self.retention_ms!r}")

    def to_json(self) -> dict:
        return {"plan_id": self.plan_id, "retention_ms": self.retention_ms, "root": self.root}

    def location(self, full: str, table_root: str, external_roots: Sequence[str] = ()) -> str:
        """Where the file at ``full`` (a resolved action path) goes."""
        base = containing_root(full, table_root, external_roots)
        relative = full[len(base.rstrip("/")) + 1:]
        qroot = self.root if self.root is not None and base == table_root else join(base, QUARANTINE_DIR)
        return join(qroot, self.plan_id, relative)


def in_quarantine(relative_path: str) -> bool:
    """Whether a path relative to a root lies in its quarantine folder: never an orphan, never the table's."""
    return relative_path == QUARANTINE_DIR or relative_path.startswith(QUARANTINE_DIR + "/")


def quarantined(location: str, roots: Iterable[str]) -> bool:
    """Whether the full ``location`` lies in the quarantine folder of one of ``roots`` (a table's root and its
    external roots): never an orphan candidate, never another table, never the table's."""
    for root in roots:
        root = root.rstrip("/")
        if location.startswith(root + "/") and in_quarantine(location[len(root) + 1:]):
            return True
    return False


@dataclass(frozen=True, slots=True)
class VersionedDelete:
    """A delete on a versioned S3 bucket: the version it hid and the delete marker that hides it. Restoring
    removes the marker; purging removes the version (and the marker)."""

    version_id: str
    marker_id: str

    def __post_init__(self):
        for name in ("version_id", "marker_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or ":" in value:
                raise ValueError(f"{name} must be a non-empty S3 version id without ':', got {value!r}")

    def where(self) -> str:
        return f"{VERSION_PREFIX}{self.version_id}:{self.marker_id}"

    @classmethod
    def parse(cls, where: str) -> VersionedDelete | None:
        """The versions a journaled ``where`` names, ``None`` when it is a location (a moved file)."""
        if not where.startswith(VERSION_PREFIX):
            return None
        version, _, marker = where[len(VERSION_PREFIX):].partition(":")
        return cls(version, marker)
