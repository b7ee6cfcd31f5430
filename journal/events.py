"""The journal's events: frozen, versioned values, stored as JSON payloads.

Each event type carries ``EVENT_TYPE`` (its stored name) and ``SCHEMA_VERSION``. A payload written by an
older release is upcast to the current version when it is read (``upcast``), so a journal stays readable
across releases. Changing an event's fields means: bump ``SCHEMA_VERSION`` and register an upcaster from
the previous version in ``_UPCASTERS``.

Per-file outcomes are not events: they are numerous, so they live in their own table as ``FileRecord``s.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from engine.errors import JournalError
from engine.paimon.kinds import ActionKind, Phase


class Event:
    """Base of every journal event. Subclasses are ``@dataclass(frozen=True, slots=True)``."""

    __slots__ = ()
    EVENT_TYPE: ClassVar[str]
    SCHEMA_VERSION: ClassVar[int]
    TIME_FIELD: ClassVar[str]  # the field stored in the events table's recorded_ms column

    @property
    def time_ms(self) -> int:
        return getattr(self, self.TIME_FIELD)

    @property
    def event_apply_id(self) -> str | None:
        """The apply this event belongs to (None for plan-level events)."""
        return getattr(self, "apply_id", None)

    def to_payload(self) -> dict[str, Any]:
        """The event as JSON-ready data (current schema version)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]):
        """Build the event from a payload of the *current* schema version (see ``decode`` for old ones)."""
        names = {f.name for f in dataclasses.fields(cls)}
        required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}
        unknown = sorted(set(payload) - names)
        missing = sorted(required - set(payload))
        if unknown or missing:
            raise JournalError(
                f"{cls.EVENT_TYPE} v{cls.SCHEMA_VERSION} payload does not fit: unknown fields {unknown}, "
                f"missing fields {missing}; was the journal written by a newer lakesweep?"
            )
        try:
            return cls(**payload)
        except (TypeError, ValueError) as e:
            raise JournalError(f"{cls.EVENT_TYPE} payload is invalid: {e}") from e


def _plain(value):
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return json.loads(json.dumps(dict(value), sort_keys=True))
    return value


def _require_id(name: str, value) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")


def _require_counts(obj, *names: str) -> None:
    for name in names:
        v = getattr(obj, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{type(obj).__name__}.{name} must be a non-negative int, got {v!r}")


@dataclass(frozen=True, slots=True)
class PlanRecorded(Event):
    EVENT_TYPE: ClassVar[str] = "PlanRecorded"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "recorded_ms"

    plan_id: str
    table_location: str
    table_identity: str
    plan_kind: str
    now_ms: int
    n_actions: int
    bytes: int
    header: dict
    recorded_ms: int

    def __post_init__(self):
        _require_id("plan_id", self.plan_id)
        _require_counts(self, "n_actions", "bytes")


@dataclass(frozen=True, slots=True)
class ApplyStarted(Event):
    """v1 had no ``master`` (the Spark master URL); it upcasts with ``master=None``."""

    EVENT_TYPE: ClassVar[str] = "ApplyStarted"
    SCHEMA_VERSION: ClassVar[int] = 2
    TIME_FIELD: ClassVar[str] = "started_ms"

    apply_id: str
    plan_id: str
    n_actions: int
    bytes: int
    master: str | None
    dry_run: bool
    started_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_counts(self, "n_actions", "bytes")


@dataclass(frozen=True, slots=True)
class PhaseCompleted(Event):
    EVENT_TYPE: ClassVar[str] = "PhaseCompleted"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "finished_ms"

    apply_id: str
    plan_id: str
    phase: int
    deleted: int
    already_absent: int
    failed: int
    written: int
    kept: int
    bytes: int
    finished_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        if self.phase not in set(Phase):
            raise ValueError(f"phase {self.phase!r} is not one of {[int(p) for p in Phase]}")
        _require_counts(self, "deleted", "already_absent", "failed", "written", "kept", "bytes")


@dataclass(frozen=True, slots=True)
class HintWritten(Event):
    EVENT_TYPE: ClassVar[str] = "HintWritten"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "written_ms"

    apply_id: str
    plan_id: str
    value: int
    written_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)


@dataclass(frozen=True, slots=True)
class ApplyCompleted(Event):
    EVENT_TYPE: ClassVar[str] = "ApplyCompleted"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "finished_ms"

    apply_id: str
    plan_id: str
    deleted: int
    already_absent: int
    failed: int
    written: int
    kept: int
    bytes_reclaimed: int
    duration_ms: int
    finished_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_counts(self, "deleted", "already_absent", "failed", "written", "kept", "bytes_reclaimed", "duration_ms")


@dataclass(frozen=True, slots=True)
class ApplyFailed(Event):
    EVENT_TYPE: ClassVar[str] = "ApplyFailed"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "finished_ms"

    apply_id: str
    plan_id: str
    reason: str
    phase: int | None
    finished_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)


@dataclass(frozen=True, slots=True)
class ApplyRefused(Event):
    """Apply refused the plan (stale, tampered, path escape...). ``apply_id`` is None when no apply began."""

    EVENT_TYPE: ClassVar[str] = "ApplyRefused"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "refused_ms"

    plan_id: str
    reason: str
    refused_ms: int
    apply_id: str | None = None

    def __post_init__(self):
        _require_id("plan_id", self.plan_id)
        if self.apply_id is not None:
            _require_id("apply_id", self.apply_id)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.EVENT_TYPE: cls
    for cls in (PlanRecorded, ApplyStarted, PhaseCompleted, HintWritten, ApplyCompleted, ApplyFailed, ApplyRefused)
}

# (event_type, from_version) -> function turning a payload of that version into one of version + 1.
_UPCASTERS: dict[tuple[str, int], Callable[[dict], dict]] = {
    ("ApplyStarted", 1): lambda p: {**p, "master": None},
}


def upcast(event_type: str, version: int, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Turn a stored payload of ``version`` into the current version of ``event_type``, step by step."""
    cls = EVENT_TYPES.get(event_type)
    if cls is None:
        raise JournalError(f"unknown event type {event_type!r} in the journal; was it written by a newer lakesweep?")
    if version > cls.SCHEMA_VERSION:
        raise JournalError(
            f"{event_type} v{version} is newer than this lakesweep understands (v{cls.SCHEMA_VERSION}); upgrade lakesweep"
        )
    out = dict(payload)
    while version < cls.SCHEMA_VERSION:
        step = _UPCASTERS.get((event_type, version))
        if step is None:
            raise JournalError(f"no upcaster for {event_type} v{version}; this is a bug in lakesweep")
        out = step(out)
        version += 1
    return out


def decode(event_type: str, version: int, payload: Mapping[str, Any]) -> Event:
    """A stored (type, version, payload) as a current event."""
    current = upcast(event_type, version, payload)  # raises for an unknown type or version
    return EVENT_TYPES[event_type].from_payload(current)


class FileOutcome(enum.StrEnum):
    DELETED = "DELETED"
    ALREADY_ABSENT = "ALREADY_ABSENT"  # deleting an absent file is an outcome, not an error
    WRITTEN = "WRITTEN"
    KEPT_NOT_EMPTY = "KEPT_NOT_EMPTY"  # an "empty" directory that turned out to hold files is kept
    FAILED = "FAILED"


_OUTCOMES_FOR = {
    "write": {FileOutcome.WRITTEN, FileOutcome.FAILED},
    "dir": {FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT, FileOutcome.KEPT_NOT_EMPTY, FileOutcome.FAILED},
    "file": {FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT, FileOutcome.FAILED},
}


def _allowed(kind: ActionKind) -> frozenset[FileOutcome]:
    if not kind.deletes:
        return frozenset(_OUTCOMES_FOR["write"])
    return frozenset(_OUTCOMES_FOR["dir" if kind == ActionKind.EMPTY_DIR else "file"])


_ALLOWED = {kind: _allowed(kind) for kind in ActionKind}  # checked for every file record: built once


def allowed_outcomes(kind: ActionKind) -> frozenset[FileOutcome]:
    return _ALLOWED[ActionKind(kind)]


@dataclass(frozen=True, slots=True)
class FileRecord:
    """What one attempt at one action did. A later record for the same (apply_id, action_id) supersedes it."""

    apply_id: str
    plan_id: str
    action_id: int
    path: str
    kind: ActionKind
    phase: int
    bytes: int | None
    outcome: FileOutcome
    error: str | None
    attempt: int
    time_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        object.__setattr__(self, "kind", ActionKind(self.kind))
        object.__setattr__(self, "outcome", FileOutcome(self.outcome))
        if self.phase != int(self.kind.phase):
            raise ValueError(f"a {self.kind.value} action runs in phase {int(self.kind.phase)}, not {self.phase}")
        if self.outcome not in allowed_outcomes(self.kind):
            raise ValueError(f"outcome {self.outcome.value} does not fit a {self.kind.value} action")
        if (self.outcome == FileOutcome.FAILED) != (self.error is not None):
            raise ValueError("a FAILED record needs an error, and only a FAILED record has one")
        if self.action_id < 0 or self.attempt < 1:
            raise ValueError(f"action_id {self.action_id} must be >= 0 and attempt {self.attempt} >= 1")
