"""The journal's events: frozen, versioned values, stored as JSON payloads.

Each event type carries ``EVENT_TYPE`` (its stored name) and ``SCHEMA_VERSION``. A payload written by an
older release is upcast to the current version when it is read (``upcast``), so a journal stays readable
across releases. Changing an event's fields means: bump ``SCHEMA_VERSION`` and register an upcaster from
the previous version in ``_UPCASTERS``; a type that becomes another is listed in ``_RENAMED``.

Per-file outcomes are not events: they are numerous, so they live in their own table as ``FileRecord``s.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from lakesweep.engine.errors import JournalError
from lakesweep.engine.plan import Verb


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

    @property
    def stream_id(self) -> str:
        """The key of the stream the event belongs to: its plan's id (a plan and its applies), or
        ``run_stream(run_id)`` for a maintain run. Stored in the events table's ``plan_id`` column."""
        return getattr(self, "plan_id")

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


def _require_count_map(obj, name: str) -> None:
    """``counts``: outcome name -> non-negative int, every name an outcome; stored sorted by outcome."""
    counts = getattr(obj, name)
    if not isinstance(counts, Mapping):
        raise ValueError(f"{type(obj).__name__}.{name} must map outcomes to counts, got {counts!r}")
    for k, v in counts.items():
        if k not in _OUTCOME_NAMES:
            raise ValueError(f"{type(obj).__name__}.{name} names {k!r}, which is not an outcome")
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{type(obj).__name__}.{name}[{k}] must be a non-negative int, got {v!r}")
    object.__setattr__(obj, name, {o: counts[o] for o in _OUTCOME_NAMES if o in counts})


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
    """``mode``: ``delete``, ``quarantine`` (files are put aside as ``quarantine``, an
    ``engine.quarantine.QuarantineSpec``'s JSON, says) or ``restore`` (a quarantine of the plan undone). v1 had no
    ``master`` (upcast to ``None``); v2 had no ``mode`` and ``quarantine`` (upcast to ``delete``, ``None``)."""

    EVENT_TYPE: ClassVar[str] = "ApplyStarted"
    SCHEMA_VERSION: ClassVar[int] = 3
    TIME_FIELD: ClassVar[str] = "started_ms"

    apply_id: str
    plan_id: str
    n_actions: int
    bytes: int
    master: str | None
    dry_run: bool
    started_ms: int
    mode: str = "delete"
    quarantine: Mapping | None = None

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_counts(self, "n_actions", "bytes")
        if self.mode not in APPLY_MODES:
            raise ValueError(f"ApplyStarted.mode must be one of {APPLY_MODES}, got {self.mode!r}")
        if (self.mode == "quarantine") != (self.quarantine is not None):
            raise ValueError("an ApplyStarted in quarantine mode, and only one, says how it quarantines")


APPLY_MODES = ("delete", "quarantine", "restore")


@dataclass(frozen=True, slots=True)
class PhaseCompleted(Event):
    """v1 counted five outcomes in fields of their own (deleted, already_absent, failed, written, kept); v2
    has ``counts``, by outcome name."""

    EVENT_TYPE: ClassVar[str] = "PhaseCompleted"
    SCHEMA_VERSION: ClassVar[int] = 2
    TIME_FIELD: ClassVar[str] = "finished_ms"

    apply_id: str
    plan_id: str
    phase: int  # the phase's position in the plan, from 1
    counts: Mapping[str, int]
    bytes: int
    finished_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        if not isinstance(self.phase, int) or isinstance(self.phase, bool) or self.phase < 1:
            raise ValueError(f"phase {self.phase!r} is not a phase number (1, 2, ...)")
        _require_count_map(self, "counts")
        _require_counts(self, "bytes")


@dataclass(frozen=True, slots=True)
class MetadataWritten(Event):
    """A value written to table metadata by a ``write-file`` action (Paimon's EARLIEST hint: the new
    earliest snapshot). ``path`` is the action's path; None when read from a v1 ``HintWritten``, which
    recorded only the value of the EARLIEST hint."""

    EVENT_TYPE: ClassVar[str] = "MetadataWritten"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "written_ms"

    apply_id: str
    plan_id: str
    kind: str
    path: str | None
    value: int
    written_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_id("kind", self.kind)


@dataclass(frozen=True, slots=True)
class OutputWritten(Event):
    """A merge phase wrote a new file: output ``group`` (an Iceberg compaction bin's index) at ``path``, with
    what the commit that adds it needs (``record_count``, ``bytes``, and the column ``statistics`` as JSON:
    keys as text, bounds as hex). ``written`` false: every row of the group was deleted, no file exists.
    A resumed apply commits what these events say, without writing the file again."""

    EVENT_TYPE: ClassVar[str] = "OutputWritten"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "written_ms"

    apply_id: str
    plan_id: str
    phase: int
    group: int
    path: str
    written: bool
    record_count: int
    bytes: int
    statistics: Mapping[str, Any]
    written_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_id("path", self.path)
        _require_counts(self, "group", "record_count", "bytes")


@dataclass(frozen=True, slots=True)
class OutputOrphaned(Event):
    """A file an ``OutputWritten`` names was left out of the commit (``reason``: what changed): no metadata
    names it; orphan removal deletes it."""

    EVENT_TYPE: ClassVar[str] = "OutputOrphaned"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "orphaned_ms"

    apply_id: str
    plan_id: str
    group: int
    path: str
    reason: str
    orphaned_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_id("path", self.path)


@dataclass(frozen=True, slots=True)
class Committed(Event):
    """A commit phase committed new table metadata: ``version`` is the new snapshot (or metadata version)
    and ``commit_id`` the identifier derived from the plan id that lets a resumed apply find it."""

    EVENT_TYPE: ClassVar[str] = "Committed"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "committed_ms"

    apply_id: str
    plan_id: str
    phase: int
    commit_id: str
    version: int
    already: bool  # found committed by an earlier attempt, not committed now
    committed_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_id("commit_id", self.commit_id)


@dataclass(frozen=True, slots=True)
class Verified(Event):
    """After the last phase, the files the apply touched were checked against the live table: ``whole``
    when none that a snapshot, tag, branch or changelog still references is missing and the hints agree.
    ``problems`` holds the first of them (kind, path, detail, needed_by), ``n_problems`` counts them all."""

    EVENT_TYPE: ClassVar[str] = "Verified"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "verified_ms"

    apply_id: str
    plan_id: str
    whole: bool
    checked: int  # locations checked
    n_problems: int
    verified_ms: int
    problems: tuple = ()

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_counts(self, "checked", "n_problems", "verified_ms")
        object.__setattr__(self, "problems", tuple(dict(p) for p in self.problems))


@dataclass(frozen=True, slots=True)
class ApplyCompleted(Event):
    """v1 counted five outcomes in fields of their own; v2 has ``counts``, by outcome name."""

    EVENT_TYPE: ClassVar[str] = "ApplyCompleted"
    SCHEMA_VERSION: ClassVar[int] = 2
    TIME_FIELD: ClassVar[str] = "finished_ms"

    apply_id: str
    plan_id: str
    counts: Mapping[str, int]
    bytes_reclaimed: int
    duration_ms: int
    finished_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_count_map(self, "counts")
        _require_counts(self, "bytes_reclaimed", "duration_ms")


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


@dataclass(frozen=True, slots=True)
class RequestsThrottled(Event):
    """The store answered ``503 SlowDown`` ``slowdowns`` times to one task batch of phase ``phase``, and the
    task's pace fell to ``lowest_rate`` requests per second (halved per SlowDown, one more per success).
    Version 1; a later version adds fields with an upcaster from this one, so old journals stay readable."""

    EVENT_TYPE: ClassVar[str] = "RequestsThrottled"
    SCHEMA_VERSION: ClassVar[int] = 1
    TIME_FIELD: ClassVar[str] = "recorded_ms"

    apply_id: str
    plan_id: str
    phase: int
    slowdowns: int
    lowest_rate: float
    recorded_ms: int

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        _require_counts(self, "phase", "slowdowns", "recorded_ms")
        if not self.slowdowns or not self.lowest_rate > 0:
            raise ValueError(f"a throttling event needs slowdowns >= 1 and a rate > 0, got {self.slowdowns!r}, "
                             f"{self.lowest_rate!r}")


class MaintenanceOutcome(enum.StrEnum):
    """What ``lakesweep maintain`` did with one operation on one table."""

    APPLIED = "applied"  # planned and applied
    SKIPPED = "skipped"  # nothing to do (the message says why), or the table is busy
    PLANNED = "planned"  # a dry run: the plan is written, nothing applied
    FAILED = "failed"  # planning or applying failed (the message says how); the run went on


RUN_STREAM = "maintain:"  # the stream of a maintain run is keyed "maintain:<run id>"; no plan id starts so


def run_stream(run_id: str) -> str:
    """The stream key of maintain run ``run_id``."""
    return RUN_STREAM + run_id


@dataclass(frozen=True, slots=True)
class MaintenanceResult(Event):
    """One operation of a ``lakesweep maintain`` run on one table, in the run's own stream
    (``run_stream(run_id)``). ``plan_id`` is the operation's plan, None when there is none (skipped before
    planning, or planning failed); the result belongs to no apply, so it never changes a plan's state.

    v1 was kept in its plan's stream: its ``plan_id`` was the plan's, or ``maintain:<run id>`` when there
    was none, which upcasts to None. A v1 row stays where it was written; its event reads as v2."""

    EVENT_TYPE: ClassVar[str] = "MaintenanceResult"
    SCHEMA_VERSION: ClassVar[int] = 2
    TIME_FIELD: ClassVar[str] = "recorded_ms"

    run_id: str
    cycle: int
    table: str  # "iceberg:<catalog>/<namespace>.<table>" or "paimon:<location>"
    operation: str
    outcome: MaintenanceOutcome
    message: str
    recorded_ms: int
    plan_id: str | None = None
    plan_file: str | None = None
    applied_by: str | None = None  # the apply id, when the plan was applied

    def __post_init__(self):
        _require_id("run_id", self.run_id)
        if self.plan_id is not None:
            _require_id("plan_id", self.plan_id)
            if self.plan_id.startswith(RUN_STREAM):
                raise ValueError(f"plan_id {self.plan_id!r} names a run's stream, not a plan; a result without a "
                                 "plan has plan_id None")
        if type(self.outcome) is not MaintenanceOutcome:
            object.__setattr__(self, "outcome", MaintenanceOutcome(self.outcome))

    @property
    def stream_id(self) -> str:
        return run_stream(self.run_id)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.EVENT_TYPE: cls
    for cls in (PlanRecorded, ApplyStarted, PhaseCompleted, MetadataWritten, OutputWritten, OutputOrphaned, Committed,
                Verified, ApplyCompleted, ApplyFailed, ApplyRefused, MaintenanceResult, RequestsThrottled)
}


def _v1_counts(p: dict) -> dict:
    """Five counter fields of a v1 event -> the v2 ``counts`` map."""
    out = {k: v for k, v in p.items() if k not in _V1_COUNTERS}
    out["counts"] = {outcome: p[field] for field, outcome in _V1_COUNTERS.items() if field in p}
    return out


def _v1_plan_id(plan_id: str) -> str | None:
    """A v1 ``MaintenanceResult``'s plan id: ``maintain:<run id>`` stood for "no plan"."""
    return None if plan_id.startswith(RUN_STREAM) else plan_id


_V1_COUNTERS = {"deleted": "DELETED", "already_absent": "ALREADY_ABSENT", "failed": "FAILED", "written": "WRITTEN",
                "kept": "KEPT_NOT_EMPTY"}

# (event_type, from_version) -> function turning a payload of that version into one of version + 1.
_UPCASTERS: dict[tuple[str, int], Callable[[dict], dict]] = {
    ("ApplyStarted", 1): lambda p: {**p, "master": None},
    ("ApplyStarted", 2): lambda p: {**p, "mode": "delete", "quarantine": None},
    ("PhaseCompleted", 1): _v1_counts,
    ("ApplyCompleted", 1): _v1_counts,
    ("MaintenanceResult", 1): lambda p: {**p, "plan_id": _v1_plan_id(p["plan_id"])},
}

# Event types of earlier releases that now are another type: name -> (its last version, the new type, the
# function turning a payload of that version into version 1 of the new type).
_RENAMED: dict[str, tuple[int, str, Callable[[dict], dict]]] = {
    "HintWritten": (1, "MetadataWritten", lambda p: {**p, "kind": "write-earliest-hint", "path": None}),
}


def upcast(event_type: str, version: int, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Turn a stored payload of ``version`` into the current version of ``event_type``, step by step."""
    renamed = _RENAMED.get(event_type)
    if renamed is not None:
        last, new_type, step = renamed
        if version > last:
            raise JournalError(f"{event_type} v{version} is newer than this lakesweep understands (v{last}); "
                               "upgrade lakesweep")
        if version < last:
            raise JournalError(f"no upcaster for {event_type} v{version}; this is a bug in lakesweep")
        event_type, version, payload = new_type, 1, step(dict(payload))
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


def current_type(event_type: str) -> str:
    """The event type a stored type is read as (a renamed type: its new name)."""
    renamed = _RENAMED.get(event_type)
    return renamed[1] if renamed is not None else event_type


def decode(event_type: str, version: int, payload: Mapping[str, Any]) -> Event:
    """A stored (type, version, payload) as a current event."""
    current = upcast(event_type, version, payload)  # raises for an unknown type or version
    return EVENT_TYPES[current_type(event_type)].from_payload(current)


class FileOutcome(enum.StrEnum):
    """What one action did: one enum for every verb (``OUTCOMES`` says which fit which verb)."""

    DELETED = "DELETED"
    ALREADY_ABSENT = "ALREADY_ABSENT"  # deleting an absent file is an outcome, not an error
    WRITTEN = "WRITTEN"
    KEPT_NOT_EMPTY = "KEPT_NOT_EMPTY"  # an "empty" directory that turned out to hold files is kept
    QUARANTINED = "QUARANTINED"  # put aside instead of deleted (apply --quarantine): the record says where
    RESTORED = "RESTORED"  # brought back from quarantine to its path (lakesweep restore)
    SKIPPED_REFERENCED = "SKIPPED_REFERENCED"  # a candidate re-checked at apply time is referenced again: kept
    COMMITTED = "COMMITTED"
    ALREADY_COMMITTED = "ALREADY_COMMITTED"  # the commit identifier was found committed (a resumed apply)
    DROPPED = "DROPPED"  # left out of its commit: what it relied on changed (a compaction bin's inputs)
    FAILED = "FAILED"


_OUTCOME_NAMES = tuple(o.value for o in FileOutcome)

OUTCOMES: Mapping[Verb, frozenset[FileOutcome]] = {
    Verb.DELETE_FILE: frozenset({FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT, FileOutcome.SKIPPED_REFERENCED,
                                 FileOutcome.QUARANTINED, FileOutcome.RESTORED, FileOutcome.FAILED}),
    Verb.PURGE_VERSION: frozenset({FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT, FileOutcome.FAILED}),
    Verb.DELETE_EMPTY_DIR: frozenset({FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT, FileOutcome.KEPT_NOT_EMPTY,
                                      FileOutcome.FAILED}),
    Verb.WRITE_FILE: frozenset({FileOutcome.WRITTEN, FileOutcome.FAILED}),
    Verb.COMMIT: frozenset({FileOutcome.COMMITTED, FileOutcome.ALREADY_COMMITTED, FileOutcome.DROPPED,
                            FileOutcome.SKIPPED_REFERENCED, FileOutcome.FAILED}),
    Verb.MERGE: frozenset({FileOutcome.WRITTEN, FileOutcome.FAILED}),
}


# Outcomes whose record carries text: a failure's error; why an action was skipped or left out of its commit.
_WITH_REASON = frozenset({FileOutcome.FAILED, FileOutcome.SKIPPED_REFERENCED, FileOutcome.DROPPED})
_MOVED = frozenset({FileOutcome.QUARANTINED, FileOutcome.RESTORED})


def allowed_outcomes(verb: Verb | str) -> frozenset[FileOutcome]:
    return OUTCOMES[Verb(verb)]


@dataclass(frozen=True, slots=True)
class FileRecord:
    """What one attempt at one action did. A later record for the same (apply_id, action_id) supersedes it.

    ``kind`` is the action's label as planned; the journal checks the outcome against the action's verb
    when the record is written (``Recorder.record_files``), where the plan's action is at hand. ``moved_to``:
    where a ``QUARANTINED`` file went, or where a ``RESTORED`` one came from (``FileIO.quarantine``'s where)."""

    apply_id: str
    plan_id: str
    action_id: int
    path: str
    kind: str
    phase: int
    bytes: int | None
    outcome: FileOutcome
    error: str | None
    attempt: int
    time_ms: int
    moved_to: str | None = None

    def __post_init__(self):
        _require_id("apply_id", self.apply_id)
        _require_id("plan_id", self.plan_id)
        if type(self.outcome) is not FileOutcome:
            object.__setattr__(self, "outcome", FileOutcome(self.outcome))
        if (self.outcome in _MOVED) != (self.moved_to is not None):
            raise ValueError("a QUARANTINED or RESTORED record, and only one, says where the file went or came from")
        if self.outcome is FileOutcome.FAILED and self.error is None:
            raise ValueError("a FAILED record needs an error")
        if self.error is not None and self.outcome not in _WITH_REASON:
            raise ValueError("only a FAILED record has an error, and a SKIPPED_REFERENCED or DROPPED one a reason")
        if self.action_id < 0 or self.attempt < 1 or self.phase < 1:
            raise ValueError(f"action_id {self.action_id} must be >= 0, attempt {self.attempt} >= 1 and phase "
                             f"{self.phase} >= 1")
