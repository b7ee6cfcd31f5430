"""The CleanupPlan: a reviewed list of actions plus the preconditions under which they are safe.

A plan is plain data. Its id is a hash of its canonical content, so a changed byte changes the id and
apply refuses it. Actions are sorted canonically (phase, kind, path) and numbered from 0; that number
is the action's stable id.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

FORMAT_VERSION = 1


class Phase(enum.IntEnum):
    """Apply runs phases in this order, with a barrier between them (Java's deletion order)."""

    DATA_FILES = 1
    CHANGELOG_FILES = 2
    EMPTY_DIRS = 3
    METADATA = 4
    CHANGELOG_METADATA = 5
    SNAPSHOTS = 6
    HINT = 7


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
    def deletes(self) -> bool:
        return _DELETES[self]


_DELETES = {k: k not in (ActionKind.WRITE_CHANGELOG, ActionKind.WRITE_EARLIEST_HINT) for k in ActionKind}
_WRITE_CHANGELOG, _WRITE_EARLIEST_HINT = ActionKind.WRITE_CHANGELOG, ActionKind.WRITE_EARLIEST_HINT

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

_KIND_ORDER = {k: i for i, k in enumerate(ActionKind)}


@dataclass(frozen=True, slots=True)
class Action:
    """One thing apply does. ``path`` is relative to the table root, or a full URI for external files.

    ``snapshot_id`` is the snapshot whose expiry causes the action (for the EARLIEST hint: the new
    value; for empty directories: none). ``depth`` orders empty-directory deletes, deepest first.
    """

    kind: ActionKind
    path: str
    snapshot_id: int | None = None
    partition: str | None = None
    bucket: int | None = None
    size: int | None = None
    source: str | None = None  # WRITE_CHANGELOG: the snapshot file copied
    depth: int = 0
    action_id: int = -1

    def __post_init__(self):
        if not self.path:
            raise ValueError("an action needs a path")
        if self.kind is _WRITE_CHANGELOG and not self.source:
            raise ValueError("write-changelog needs a source snapshot file")
        if self.kind is _WRITE_EARLIEST_HINT and self.snapshot_id is None:
            raise ValueError("the EARLIEST hint action needs the new value as snapshot_id")

    @property
    def phase(self) -> Phase:
        return self.kind.phase

    def sort_key(self):
        # Snapshots go in ascending id order; empty directories deepest first; the rest by path.
        kind = self.kind
        if kind is ActionKind.SNAPSHOT or kind is ActionKind.WRITE_CHANGELOG:
            return (*_KIND_RANK[kind], self.snapshot_id or 0, self.path)
        if kind is ActionKind.EMPTY_DIR:
            return (*_KIND_RANK[kind], -self.depth, self.path)
        return (*_KIND_RANK[kind], 0, self.path)


_KIND_RANK = {k: (k.phase, _KIND_ORDER[k]) for k in ActionKind}  # (phase, order within it), per kind


def canonical_actions(actions: Sequence[Action]) -> tuple[Action, ...]:
    """Sort, de-duplicate by (kind, path), and number the actions.

    A file planned by several snapshots keeps the earliest snapshot as its cause; any other tie is
    broken on the remaining fields, so the result never depends on the input order.
    """
    by_key: dict[tuple[str, str], Action] = {}
    for a in actions:
        key = (a.kind.value, a.path)
        old = by_key.get(key)
        if old is None or _preference(a) < _preference(old):
            by_key[key] = a
    ordered = sorted(by_key.values(), key=Action.sort_key)
    return tuple(Action(a.kind, a.path, a.snapshot_id, a.partition, a.bucket, a.size, a.source, a.depth, i)
                 for i, a in enumerate(ordered))


def _preference(a: Action) -> tuple:
    """A total order on everything but (kind, path): the earliest snapshot first, None after values."""
    key: list = []
    for v, empty in ((a.snapshot_id, 0), (a.partition, ""), (a.bucket, 0), (a.size, 0), (a.source, "")):
        key += [v is None, empty if v is None else v]
    return (*key, a.depth)


@dataclass(frozen=True, slots=True)
class OptionValue:
    value: Any
    source: str  # "flag", "table", "default"


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What apply re-checks against the live table before touching anything."""

    earliest: int | None
    latest: int | None
    schema_id: int
    tags: Mapping[str, int]  # tag name -> snapshot id
    consumers: Mapping[str, int]  # consumer id -> next snapshot
    branches: Mapping[str, int | None]  # branch name -> its latest snapshot id (None: no snapshot)
    # snapshot id -> digest of the snapshot file the plan read, for every planned snapshot and the end.
    # A rolled-back and recommitted id has other content, so apply can tell it from the one planned.
    # None in plans written before pins existed: apply refuses those.
    snapshots: Mapping[int, str] | None = None

    def to_json(self) -> dict:
        out = {
            "earliest": self.earliest,
            "latest": self.latest,
            "schema_id": self.schema_id,
            "tags": dict(sorted(self.tags.items())),
            "consumers": dict(sorted(self.consumers.items())),
            "branches": dict(sorted(self.branches.items())),
        }
        if self.snapshots is not None:
            out["snapshots"] = {str(k): v for k, v in sorted(self.snapshots.items())}
        return out

    @staticmethod
    def from_json(obj: Mapping) -> "Fingerprint":
        return Fingerprint(
            earliest=obj["earliest"],
            latest=obj["latest"],
            schema_id=obj["schema_id"],
            tags=dict(obj["tags"]),
            consumers=dict(obj["consumers"]),
            branches=dict(obj["branches"]),
            snapshots=None if obj.get("snapshots") is None else {int(k): str(v) for k, v in obj["snapshots"].items()},
        )


@dataclass(frozen=True, slots=True)
class CleanupPlan:
    """A deterministic plan: same table + options + now give the same plan (and the same bytes)."""

    kind: str  # "expire"
    table_location: str
    table_identity: str
    branch: str
    now_ms: int
    options: Mapping[str, OptionValue]
    begin: int | None  # the range [begin, end) of expired snapshots
    end: int | None
    earliest_hint: int | None  # the EARLIEST value apply writes last (None: not written)
    fingerprint: Fingerprint
    actions: tuple[Action, ...]
    stats: Mapping[str, Any] = field(default_factory=dict)  # protected counts, bound, warnings
    format_version: int = FORMAT_VERSION
    # The id, hashed on first read and kept: it covers every action, and apply, the journal and the CLI
    # read it many times. Not part of equality; a value passed in is discarded (the id always comes from
    # this plan's own content).
    _plan_id: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_plan_id", None)
        if self.begin is not None and self.end is not None and self.begin > self.end:
            raise ValueError(f"range [{self.begin}, {self.end}) is inverted")
        for i, a in enumerate(self.actions):
            if a.action_id != i:
                raise ValueError("actions must be canonical (numbered 0..n-1 in order); use canonical_actions")

    @property
    def is_empty(self) -> bool:
        return not self.actions

    @property
    def deletes_anything(self) -> bool:
        return any(a.kind.deletes for a in self.actions)

    def header(self) -> dict:
        """Everything but the actions, as JSON-ready data (without the plan id)."""
        return {
            "format_version": self.format_version,
            "plan_kind": self.kind,
            "table": {"location": self.table_location, "identity": self.table_identity, "branch": self.branch},
            "now_ms": self.now_ms,
            "options": {k: {"value": v.value, "source": v.source} for k, v in sorted(self.options.items())},
            "range": {"begin": self.begin, "end": self.end},
            "earliest_hint": self.earliest_hint,
            "fingerprint": self.fingerprint.to_json(),
            "stats": _jsonable(self.stats),
        }

    def remember_id(self, plan_id: str) -> None:
        """Keep an id just computed from this very header and these actions (a plan file's reader)."""
        object.__setattr__(self, "_plan_id", plan_id)

    @property
    def plan_id(self) -> str:
        """A hash of the header and every action (``compute_plan_id``), computed once per plan value."""
        if self._plan_id is None:
            object.__setattr__(self, "_plan_id", compute_plan_id(self.header(), self.actions))
        return self._plan_id


def _jsonable(obj):
    return json.loads(json.dumps(obj, sort_keys=True))


def action_row(a: Action) -> list:
    return [a.action_id, int(a.phase), a.kind.value, a.path, a.snapshot_id, a.partition, a.bucket, a.size, a.source, a.depth]


_COMPACT = json.JSONEncoder(separators=(",", ":"))  # json.dumps with these options builds an encoder per call
_string = json.encoder.encode_basestring_ascii  # what _COMPACT (ensure_ascii) writes for a str


def _int_or_null(v) -> str:
    if v is None:
        return "null"
    if type(v) is not int:  # a bool, a float: the encoder below writes it its own way
        raise TypeError(v)
    return int.__repr__(v)


def _str_or_null(v) -> str:
    return "null" if v is None else _string(v)


def action_json(a: Action) -> str:
    """``action_row(a)`` as compact JSON, the same text ``_COMPACT.encode`` writes, without its
    per-call encoder (a third of reading a 300,000-action plan)."""
    try:
        return (f"[{_int_or_null(a.action_id)},{int.__repr__(a.kind.phase.value)},{_string(a.kind.value)},"
                f"{_string(a.path)},{_int_or_null(a.snapshot_id)},{_str_or_null(a.partition)},"
                f"{_int_or_null(a.bucket)},{_int_or_null(a.size)},{_str_or_null(a.source)},{_int_or_null(a.depth)}]")
    except TypeError:  # a field of another type than the plan reader produces
        return _COMPACT.encode(action_row(a))


def compute_plan_id(header: Mapping, actions: Sequence[Action]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    if actions:
        h.update(("\n" + "\n".join(map(action_json, actions))).encode())
    return h.hexdigest()[:32]


def summarize(actions: Sequence[Action]) -> dict:
    """Counts and bytes per action kind and per partition."""
    by_kind: dict[str, dict[str, int]] = {}
    by_partition: dict[str, dict[str, int]] = {}
    for a in actions:
        k = by_kind.setdefault(a.kind.value, {"count": 0, "bytes": 0, "unknown_size": 0})
        k["count"] += 1
        if a.size is None:
            k["unknown_size"] += 1
        else:
            k["bytes"] += a.size
        if a.kind in (ActionKind.DATA_FILE, ActionKind.EXTRA_FILE, ActionKind.CHANGELOG_FILE):
            p = by_partition.setdefault(a.partition or "", {"count": 0, "bytes": 0})
            p["count"] += 1
            p["bytes"] += a.size or 0
    return {
        "by_kind": dict(sorted(by_kind.items())),
        "by_partition": dict(sorted(by_partition.items())),
        "files": sum(1 for a in actions if a.kind.deletes and a.kind != ActionKind.EMPTY_DIR),
        "bytes": sum(a.size or 0 for a in actions if a.kind.deletes),
    }
