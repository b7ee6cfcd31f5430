"""The recorder interface of the journal, and its in-memory twin.

``Recorder`` holds the contract: an append-only, sequence-numbered log of events, the actions of every
recorded plan, and per-file records. The public methods check what is written (a plan id that arrives
with other content, a transition the projection refuses, a file record that does not match its plan)
and then call a handful of storage primitives (``_insert_plan``, ``_load_plan``, ``_append_rows``,
``_event_rows``, ...) that each implementation provides. One contract test class runs against every
implementation (tests/journal/test_recorder_contract.py).

Sequence numbers are shared by events and file records, so together they give one total order.

A recorder is the journal's only writer (the DuckDB file lock, one recorder per file in a process), so
it keeps what it has checked: the plans it recorded or verified, and the state of every apply whose
events it read or wrote. Appending a batch therefore costs in proportion to the batch, however long the
journal already is. The storage primitives bypass the checks and these caches (tests use them to write
raw rows).
"""

from __future__ import annotations

import abc
import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from engine.errors import JournalConflict, JournalError
from engine.plan import FORMATS, Action, CleanupPlan, compute_plan_id
from engine.plan_io import format_kinds

from journal.events import OUTCOMES, ApplyStarted, Event, FileOutcome, FileRecord, PlanRecorded, decode
from journal.globs import glob_regex
from journal.projection import RunState, RunStatus, check_file_record, project, step

FILE_COLUMNS = ("seq", "plan_id", "apply_id", "table", "table_identity", "action_id", "path", "kind", "phase",
                "snapshot_id", "outcome", "error", "attempt", "bytes", "time_ms")


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: type, schema version, JSON payload. ``seq`` is None until it is appended."""

    event_type: str
    schema_version: int
    plan_id: str
    apply_id: str | None
    payload: dict[str, Any]
    time_ms: int
    seq: int | None = None

    @staticmethod
    def of(event: Event) -> "StoredEvent":
        return StoredEvent(event.EVENT_TYPE, event.SCHEMA_VERSION, event.plan_id, event.event_apply_id,
                           event.to_payload(), event.time_ms)


@dataclass(frozen=True, slots=True)
class FileQuery:
    """Filters of ``Recorder.file_rows``; all optional, combined with AND.

    ``table`` matches the table location or identity; ``path_glob`` has shell glob semantics (``fnmatch``:
    ``*`` also crosses ``/``, ``?``, ``[abc]``, ``[a-z]``, ``[!abc]``), case-sensitive. Rows come in
    sequence order; ``limit`` keeps the first ones.
    """

    plan_id: str | None = None
    apply_id: str | None = None
    table: str | None = None
    kind: str | None = None
    outcome: str | None = None
    since_ms: int | None = None
    path_glob: str | None = None
    limit: int | None = None

    def __post_init__(self):
        # Filters come from the command line: a bad one is a user error with a next step, not a crash.
        for name, known in (("kind", known_kinds()), ("outcome", tuple(o.value for o in FileOutcome))):
            value = getattr(self, name)
            if value is None:
                continue
            object.__setattr__(self, name, str(value))
            if str(value) not in known:
                raise JournalError(f"unknown {name} {str(value)!r}; use one of: {', '.join(known)}")
        if self.limit is not None and self.limit < 0:
            raise JournalError(f"limit must be >= 0, got {self.limit}")
        if self.path_glob is not None:
            try:
                glob_regex(self.path_glob)
            except ValueError as e:
                raise JournalError(str(e)) from e

    @property
    def path_regex(self) -> str | None:
        return None if self.path_glob is None else glob_regex(self.path_glob)


def known_kinds() -> tuple[str, ...]:
    """Every action kind label a table format defines, in definition order."""
    return tuple(label for fmt in FORMATS for label in format_kinds(fmt))


def stored_actions(event: PlanRecorded, rows: Sequence[Sequence]) -> tuple[Action, ...]:
    """Actions from stored rows (``ACTION_FIELDS`` order); a kind the plan's format defines gets its type
    back (a plan recorded before plans named a format is Paimon's)."""
    kinds = format_kinds(event.header.get("format", "paimon"))
    return tuple(Action(kinds.get(r[0], r[0]), *r[1:]) for r in rows)


def _plan_difference(old: PlanRecorded, old_actions: Sequence[Action], new: PlanRecorded,
                     new_actions: Sequence[Action]) -> str | None:
    keys = sorted(k for k in set(old.header) | set(new.header) if old.header.get(k) != new.header.get(k))
    if keys:
        return f"header fields {keys} differ"
    if len(old_actions) != len(new_actions):
        return f"{len(old_actions)} actions recorded, {len(new_actions)} in the plan"
    for a, b in zip(old_actions, new_actions):
        if a != b:
            return f"action {b.action_id} differs: recorded {a.kind} {a.path!r}, plan {b.kind} {b.path!r}"
    return None


class Recorder(abc.ABC):
    """An append-only journal. Only the driver process writes, in batches; every write is one transaction.

    Readers get events upcast to the current schema version, in sequence order. A recorder is a context
    manager; using it after ``close()`` raises ``JournalError``.
    """

    def __init__(self):
        # Recorded plans never change: once a plan's stored copy is known to hash to its id, it is kept.
        self._verified: dict[str, tuple[PlanRecorded, tuple[Action, ...]]] = {}
        # The lifecycle (events only) of every apply this recorder read or wrote, kept current by append.
        self._runs: dict[str, RunState] = {}

    # -- plans -------------------------------------------------------------------------------------

    def record_plan(self, plan: CleanupPlan, *, recorded_ms: int) -> PlanRecorded:
        """Store the ``PlanRecorded`` event and every action of ``plan``, in one transaction.

        Idempotent: recording the same plan again changes nothing and returns the first event. Raises
        ``JournalConflict`` if the journal holds the same plan id with different content.
        """
        self._check_open()
        plan_id = plan.plan_id
        known = self._verified.get(plan_id)
        if known is not None:  # stored content that hashes to this id: the same plan
            return known[0]
        header = json.loads(json.dumps(plan.header(), sort_keys=True))
        event = PlanRecorded(
            plan_id=plan_id, table_location=plan.table_location, table_identity=plan.table_identity,
            plan_kind=plan.kind, now_ms=plan.now_ms, n_actions=len(plan.actions),
            bytes=sum(a.size or 0 for a in plan.actions if a.verb.deletes), header=header, recorded_ms=recorded_ms,
        )
        stored = self._load_plan(plan_id)
        if stored is None:
            self._insert_plan(StoredEvent.of(event), tuple(plan.actions))
            self._verified[plan_id] = (event, tuple(plan.actions))
            return event
        diff = _plan_difference(stored[0], stored[1], event, plan.actions)
        if diff is not None:
            raise JournalConflict(
                f"plan {plan_id} is already in the journal with different content ({diff}); "
                f"the journal or the plan file was altered: re-run 'lakesweep plan'"
            )
        self._verified[plan_id] = stored  # equal to the plan, whose content hashes to plan_id
        return stored[0]

    def plan_actions(self, plan_id: str) -> tuple[Action, ...]:
        """Exactly the plan's actions, ordered by action id (checked against the plan id's hash)."""
        return self._verified_plan(plan_id)[1]

    def plan_header(self, plan_id: str) -> dict:
        """The plan's header (``CleanupPlan.header()``), as recorded."""
        return self._verified_plan(plan_id)[0].header

    def _verified_plan(self, plan_id: str) -> tuple[PlanRecorded, tuple[Action, ...]]:
        self._check_open()
        known = self._verified.get(plan_id)
        if known is not None:
            return known
        stored = self._load_plan(plan_id)
        if stored is None:
            raise JournalError(f"plan {plan_id} is not in the journal; apply the plan file to record it")
        event, actions = stored
        if compute_plan_id(event.header, actions) != plan_id:
            raise JournalError(f"plan {plan_id}: the journal's copy no longer matches its id; "
                               f"the journal was altered, apply from the plan file instead")
        self._verified[plan_id] = stored
        return stored

    @abc.abstractmethod
    def plan_ids(self) -> list[str]:
        """Ids of the recorded plans, in recording order."""

    # -- events ------------------------------------------------------------------------------------

    def append(self, events: Sequence[Event]) -> list[int]:
        """Append ``events`` atomically; returns their sequence numbers (increasing).

        Refuses (``JournalError``, nothing written) a ``PlanRecorded`` (use ``record_plan``), an
        ``ApplyStarted`` for a plan that is not recorded or with another action count, and any event the
        projection refuses given the apply's earlier events.
        """
        self._check_open()
        events = list(events)
        for ev in events:
            if not isinstance(ev, Event):
                raise TypeError(f"not a journal event: {ev!r}")
            if isinstance(ev, PlanRecorded):
                raise JournalError(f"plan {ev.plan_id}: PlanRecorded is written by record_plan, with its actions")
            if isinstance(ev, ApplyStarted):
                self._check_started(ev)
        after: dict[str, RunState] = {}  # each apply's state once the batch is in (the fold ``project`` does)
        for ev in events:
            aid = ev.event_apply_id
            if aid is not None:
                after[aid] = step(after[aid] if aid in after else self._run_state(aid), ev)
        seqs = self._append_rows([StoredEvent.of(ev) for ev in events]) if events else []
        self._runs.update(after)  # only once the batch is written
        return seqs

    def _run_state(self, apply_id: str) -> RunState | None:
        """The apply's lifecycle from its events (None: it has none), read from the journal once and
        then kept current by ``append``."""
        run = self._runs.get(apply_id)
        if run is None:
            run = project(self.events(apply_id=apply_id)).get(apply_id)
            if run is not None:
                self._runs[apply_id] = run
        return run

    def _check_started(self, ev: ApplyStarted) -> None:
        recorded = [e for e in self.events(plan_id=ev.plan_id) if isinstance(e, PlanRecorded)]
        if not recorded:
            raise JournalError(f"apply {ev.apply_id}: plan {ev.plan_id} is not recorded; record_plan comes first")
        if recorded[0].n_actions != ev.n_actions:
            raise JournalError(f"apply {ev.apply_id}: ApplyStarted counts {ev.n_actions} actions, "
                               f"plan {ev.plan_id} has {recorded[0].n_actions}")

    def events(self, *, plan_id: str | None = None, apply_id: str | None = None) -> list[Event]:
        """Events in sequence order, upcast to the current schema versions; filters combine with AND."""
        self._check_open()
        return [decode(r.event_type, r.schema_version, r.payload) for r in self._event_rows(plan_id, apply_id)]

    # -- file records ------------------------------------------------------------------------------

    def record_files(self, records: Sequence[FileRecord]) -> list[int]:
        """Insert ``records`` in one transaction; returns their sequence numbers.

        All rows are kept; for projections a later record for the same (apply_id, action_id) supersedes
        the earlier one. Refuses (``JournalError``, nothing written) a record whose apply is not RUNNING,
        or whose action id, kind or path does not match the plan's action.
        """
        self._check_open()
        records = list(records)
        for rec in records:
            run = self._run_state(rec.apply_id)  # kept by the recorder: no read per batch
            check_file_record(run, rec)
            if run.state != RunStatus.RUNNING:
                raise JournalError(f"apply {rec.apply_id}: file record for action {rec.action_id} does not fit: "
                                   f"the apply is already {run.state.value}")
            actions = self.plan_actions(rec.plan_id)  # verified once, then kept
            action = actions[rec.action_id] if rec.action_id < len(actions) else None
            if action is None or action.action_id != rec.action_id or action.kind != rec.kind or action.path != rec.path:
                raise JournalError(f"apply {rec.apply_id}: file record for action {rec.action_id} names "
                                   f"{rec.kind} {rec.path!r}, which is not that action of plan {rec.plan_id}")
            if rec.outcome not in OUTCOMES[action.verb]:
                raise JournalError(f"apply {rec.apply_id}: outcome {rec.outcome.value} does not fit action "
                                   f"{rec.action_id} ({rec.kind} {rec.path!r}), a {action.verb.value} action")
        return self._insert_files(records) if records else []

    @abc.abstractmethod
    def file_records(self, *, plan_id: str | None = None, apply_id: str | None = None) -> list[FileRecord]:
        """File records in sequence order (every attempt); filters combine with AND."""

    @abc.abstractmethod
    def file_rows(self, query: FileQuery) -> list[dict[str, Any]]:
        """File records joined with their plan (table) and action (snapshot_id), as dicts keyed by
        ``FILE_COLUMNS``, filtered by ``query``, in sequence order."""

    @abc.abstractmethod
    def done_actions(self, plan_id: str, *, exclude_applies: Iterable[str] = ()) -> frozenset[int]:
        """Ids of the plan's actions whose latest record, over every apply of the plan but
        ``exclude_applies``, is not FAILED: what a resumed apply skips. Worked out by the storage, in
        one query; actions without a record are not done."""

    @abc.abstractmethod
    def apply_totals(self, apply_id: str) -> dict[FileOutcome, tuple[int, int]]:
        """(count, bytes) per outcome over the apply's actions, by each action's latest record in that
        apply (``RunState.counts`` and, for DELETED, ``bytes_reclaimed``); every outcome present."""

    @abc.abstractmethod
    def outcome_totals(self, plan_id: str, *, exclude_applies: Iterable[str] = ()) -> dict[FileOutcome, tuple[int, int]]:
        """(count, bytes) per outcome, one outcome per action of the plan, every outcome present (zero
        when none). An action any apply DELETED counts as DELETED (a later idempotent re-apply that found
        the file absent does not un-delete it); otherwise its latest record counts."""

    def all_outcome_totals(self, *, exclude_applies: Iterable[str] = ()) -> dict[str, dict[FileOutcome, tuple[int, int]]]:
        """``outcome_totals`` of every plan with file records, by plan id; storages answer it in one query."""
        excluded = frozenset(exclude_applies)
        return {pid: self.outcome_totals(pid, exclude_applies=excluded)
                for pid in dict.fromkeys(r.plan_id for r in self.file_records()
                                         if r.apply_id not in excluded)}

    # -- lifecycle ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release the journal; idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- storage primitives (no checks; tests use them to write raw rows) --------------------------

    @abc.abstractmethod
    def _check_open(self) -> None: ...

    @abc.abstractmethod
    def _insert_plan(self, row: StoredEvent, actions: tuple[Action, ...]) -> None: ...

    @abc.abstractmethod
    def _load_plan(self, plan_id: str) -> tuple[PlanRecorded, tuple[Action, ...]] | None: ...

    @abc.abstractmethod
    def _append_rows(self, rows: Sequence[StoredEvent]) -> list[int]: ...

    @abc.abstractmethod
    def _event_rows(self, plan_id: str | None, apply_id: str | None) -> list[StoredEvent]: ...

    @abc.abstractmethod
    def _insert_files(self, records: Sequence[FileRecord]) -> list[int]: ...


def _zero_totals() -> dict[FileOutcome, tuple[int, int]]:
    return {o: (0, 0) for o in FileOutcome}


class MemoryRecorder(Recorder):
    """The in-memory twin, for tests. Payloads go through JSON, as they would in a database."""

    def __init__(self):
        super().__init__()
        self._seq = 0
        self._rows: list[StoredEvent] = []
        self._plans: dict[str, tuple[Action, ...]] = {}
        self._files: list[tuple[int, FileRecord]] = []
        self._closed = False

    def _next(self, n: int) -> list[int]:
        seqs = list(range(self._seq + 1, self._seq + n + 1))
        self._seq += n
        return seqs

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError("the in-memory journal is closed")

    def close(self) -> None:
        self._closed = True

    def plan_ids(self) -> list[str]:
        self._check_open()
        return list(self._plans)

    def _insert_plan(self, row, actions):
        self._append_rows([row])
        self._plans[row.plan_id] = tuple(actions)

    def _load_plan(self, plan_id):
        if plan_id not in self._plans:
            return None
        row = next(r for r in self._rows if r.plan_id == plan_id and r.event_type == PlanRecorded.EVENT_TYPE)
        return decode(row.event_type, row.schema_version, row.payload), self._plans[plan_id]

    def _append_rows(self, rows):
        self._check_open()
        stored = [StoredEvent(r.event_type, r.schema_version, r.plan_id, r.apply_id, json.loads(json.dumps(r.payload)),
                              r.time_ms) for r in rows]
        seqs = self._next(len(stored))
        self._rows.extend(dataclasses.replace(r, seq=s) for r, s in zip(stored, seqs))
        return seqs

    def _event_rows(self, plan_id, apply_id):
        return [r for r in self._rows if (plan_id is None or r.plan_id == plan_id)
                and (apply_id is None or r.apply_id == apply_id)]

    def _insert_files(self, records):
        seqs = self._next(len(records))
        self._files.extend(zip(seqs, records))
        return seqs

    def file_records(self, *, plan_id=None, apply_id=None):
        self._check_open()
        return [r for _, r in self._files if (plan_id is None or r.plan_id == plan_id)
                and (apply_id is None or r.apply_id == apply_id)]

    def file_rows(self, query: FileQuery):
        self._check_open()
        regex = re.compile(query.path_regex) if query.path_glob is not None else None
        plans = {pid: self._load_plan(pid)[0] for pid in self._plans}
        out = []
        for seq, r in self._files:
            plan = plans.get(r.plan_id)
            actions = self._plans.get(r.plan_id, ())
            action = actions[r.action_id] if r.action_id < len(actions) else None
            if not ((query.plan_id is None or r.plan_id == query.plan_id)
                    and (query.apply_id is None or r.apply_id == query.apply_id)
                    and (query.table is None or (plan is not None and query.table in (plan.table_location, plan.table_identity)))
                    and (query.kind is None or r.kind == query.kind)
                    and (query.outcome is None or r.outcome.value == query.outcome)
                    and (query.since_ms is None or r.time_ms >= query.since_ms)
                    and (regex is None or regex.fullmatch(r.path))):
                continue
            if query.limit is not None and len(out) >= query.limit:
                break
            out.append(dict(zip(FILE_COLUMNS, (
                seq, r.plan_id, r.apply_id, plan.table_location if plan else None, plan.table_identity if plan else None,
                r.action_id, r.path, str.__str__(r.kind), r.phase, action.snapshot_id if action else None, r.outcome.value,
                r.error, r.attempt, r.bytes, r.time_ms))))
        return out

    def done_actions(self, plan_id, *, exclude_applies=()):
        self._check_open()
        excluded = set(exclude_applies)
        latest = {r.action_id: r.outcome for _, r in self._files if r.plan_id == plan_id and r.apply_id not in excluded}
        return frozenset(a for a, o in latest.items() if o != FileOutcome.FAILED)

    def apply_totals(self, apply_id):
        self._check_open()
        latest = {r.action_id: r for _, r in self._files if r.apply_id == apply_id}
        totals = _zero_totals()
        for r in latest.values():
            n, b = totals[r.outcome]
            totals[r.outcome] = (n + 1, b + (r.bytes or 0))
        return totals

    def outcome_totals(self, plan_id, *, exclude_applies=()):
        self._check_open()
        excluded = set(exclude_applies)
        latest: dict[int, FileRecord] = {}
        for _, r in self._files:
            if r.plan_id == plan_id and r.apply_id not in excluded:
                if latest.get(r.action_id) is None or latest[r.action_id].outcome != FileOutcome.DELETED:
                    latest[r.action_id] = r
        totals = _zero_totals()
        for r in latest.values():
            n, b = totals[r.outcome]
            totals[r.outcome] = (n + 1, b + (r.bytes or 0))
        return totals
