"""The journal's recorder: its public contract, and the narrow storage interface behind it.

``Recorder`` holds the contract, written once: an append-only, sequence-numbered log of events (sequence
numbers shared with file records: one total order), the actions of every recorded plan, and per-file
records. Writes check what is written before storing rows; queries run ``journal.rules``. A storage
implements only the abstract, underscored methods; the twins are ``DuckDBRecorder`` and ``MemoryRecorder``,
and one contract test class runs against both. A recorder is the journal's only writer, so it caches what
it has checked: appending a batch costs in proportion to the batch (docs/design/journal-store.md).
"""

from __future__ import annotations

import abc
import contextlib
import json
import operator
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa

from lakesweep.engine.errors import JournalConflict, JournalError
from lakesweep.engine.plan import Action, CleanupPlan, Verb, compute_plan_id
from lakesweep.engine.plan_columns import ColumnActions, total_size

from lakesweep.journal import rules
from lakesweep.journal.events import OUTCOMES, ApplyStarted, Event, FileOutcome, FileRecord, PlanRecorded, decode
from lakesweep.journal.projection import RunState, RunStatus, check_file_record, project, step
from lakesweep.journal.rules import FileQuery

_FILE_COLUMNS = pa.schema([f for f in rules.FILES_SCHEMA if f.name != "seq"])
_OUTCOME_VALUES = frozenset(o.value for o in FileOutcome)
_VERBS = {v.value: v for v in Verb}
_PATH, _PHASE, _SIZE, _VERB = (operator.attrgetter(name) for name in ("path", "phase", "size", "verb"))


def _KIND(a: Action) -> str:
    return str.__str__(a.kind)


def _planned_values(planned: Sequence[Action], ids: Sequence[int]) -> tuple:
    """The path, kind label, phase and size columns (Arrow) and the verbs (a list) of the actions ``ids``
    names: taken from the plan's columns where it is held as columns, without an ``Action`` each."""
    if isinstance(planned, ColumnActions):
        taken_rows = planned.rows_at(ids, ("path", "kind", "phase", "size", "verb"))
        verbs = [_VERBS[v] for v in taken_rows.column("verb").to_pylist()]
        return (*(taken_rows.column(name).combine_chunks() for name in ("path", "kind", "phase", "size")), verbs)
    actions = list(map(planned.__getitem__, ids))
    return (pa.array(list(map(_PATH, actions)), pa.string()), pa.array(list(map(_KIND, actions)), pa.string()),
            pa.array(list(map(_PHASE, actions)), pa.int32()), pa.array(list(map(_SIZE, actions)), pa.int64()),
            list(map(_VERB, actions)))


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored: type, schema version, the key of its stream (``Event.stream_id``; the events
    table's ``plan_id`` column), JSON payload. ``seq`` is None until it is appended."""

    event_type: str
    schema_version: int
    stream_id: str
    apply_id: str | None
    payload: dict[str, Any]
    time_ms: int
    seq: int | None = None

    @staticmethod
    def of(event: Event) -> "StoredEvent":
        return StoredEvent(event.EVENT_TYPE, event.SCHEMA_VERSION, event.stream_id, event.event_apply_id,
                           event.to_payload(), event.time_ms)


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

    A storage subclasses it and provides the storage interface (the abstract methods) only: the public
    methods, their checks and their rules are the same for every storage.
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
            bytes=total_size(plan.actions, deleting=True), header=header, recorded_ms=recorded_ms,
        )
        stored = self._load_plan(plan_id)
        if stored is None:
            actions = plan.actions  # a tuple, a plan file's actions with its columns, or columns alone
            self._insert_plan(StoredEvent.of(event), actions)
            self._verified[plan_id] = (event, actions)
            return event
        diff = _plan_difference(stored[0], stored[1], event, plan.actions)
        if diff is not None:
            raise JournalConflict(
                f"plan {plan_id} is already in the journal with different content ({diff}); "
                f"the journal or the plan file was altered: re-run 'lakesweep plan'"
            )
        self._verified[plan_id] = (stored[0], tuple(stored[1]))  # equal to the plan, whose content hashes to plan_id
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
        self._verified[plan_id] = stored = (event, tuple(actions))  # a plain tuple: columns read are let go
        return stored

    def plan_ids(self) -> list[str]:
        """Ids of the recorded plans, in recording order."""
        self._check_open()
        return self._plan_ids()

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
        """Events in sequence order, upcast to the current schema versions; filters combine with AND.
        ``plan_id`` selects a stream by its key: a plan's id, or a maintain run's (``events.run_stream``)."""
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

    def record_outcomes(self, apply_id: str, plan_id: str, rows: Sequence[tuple]) -> list[int]:
        """``record_files`` for results as an apply's tasks give them back: ``rows`` of ``(action_id,
        outcome, attempt, error, time_ms, moved_to)``, each recorded with its action's path, kind, phase and
        size from the plan. The same checks and refusals as ``record_files`` (nothing written when one
        fails), the same rows stored, in one transaction; the rows go to the storage as columns."""
        self._check_open()
        if not rows:
            return []
        ids, outcomes, attempts, errors, times, moved = zip(*rows)
        planned = self._planned_for(apply_id, plan_id, ids, attempts)
        of = None if planned is None else _planned_values(planned, ids)
        if of is None or not self._outcomes_fit(apply_id, plan_id, of[4], outcomes, errors, moved):
            # Some row is refused: record_files finds which and says why, writing nothing.
            try:
                planned = self.plan_actions(plan_id)
            except JournalError:
                planned = ()
            known = {i: planned[i] for i in ids if isinstance(i, int) and 0 <= i < len(planned)}
            return self.record_files([
                FileRecord(apply_id, plan_id, i, known[i].path, known[i].kind, known[i].phase, known[i].size, o, e,
                           att, ms, m) if i in known else
                FileRecord(apply_id, plan_id, i, "", "", 1, None, o, e, att, ms, m)
                for i, o, att, e, ms, m in rows])
        n = len(ids)
        path, kind, phase, size, _ = of
        table = pa.Table.from_arrays([
            pa.array([apply_id] * n, pa.string()), pa.array([plan_id] * n, pa.string()), pa.array(ids, pa.int32()),
            path, kind, phase, size,
            pa.array(outcomes, pa.string()), pa.array(errors, pa.string()), pa.array(attempts, pa.int32()),
            pa.array(times, pa.int64()), pa.array(moved, pa.string())], schema=_FILE_COLUMNS)
        return self._insert_file_table(table)

    def _planned_for(self, apply_id, plan_id, ids, attempts) -> Sequence[Action] | None:
        """The plan's actions, when the apply is running that plan and every id of ``ids`` and attempt count
        fits it; None otherwise."""
        run = self._run_state(apply_id)
        if run is None or run.plan_id != plan_id or run.n_actions is None or run.state != RunStatus.RUNNING:
            return None
        planned = self.plan_actions(plan_id)
        if min(ids) < 0 or max(ids) >= min(run.n_actions, len(planned)) or min(attempts) < 1:
            return None
        return planned

    def _outcomes_fit(self, apply_id, plan_id, verbs, outcomes, errors, moved) -> bool:
        """Whether every row passes ``record_files``' checks, worked out over the batch's distinct values."""
        for verb, outcome in set(zip(verbs, outcomes)):
            if outcome not in OUTCOMES[verb]:
                return False
        # A record's own invariants (FileRecord's) depend on its outcome and on which of error and moved_to it has.
        for outcome, error, where in set(zip(outcomes, [e is None for e in errors], [m is None for m in moved])):
            if outcome not in _OUTCOME_VALUES:
                return False
            try:
                FileRecord(apply_id, plan_id, 0, "", "", 1, None, outcome, None if error else "", 1, 0,
                           None if where else "")
            except ValueError:
                return False
        return True

    def file_records(self, *, plan_id: str | None = None, apply_id: str | None = None) -> list[FileRecord]:
        """File records in sequence order (every attempt); filters combine with AND."""
        self._check_open()
        return self._file_records(plan_id, apply_id)

    def file_rows(self, query: FileQuery) -> list[dict[str, Any]]:
        """File records joined with their plan (table) and action (snapshot_id), as dicts keyed by
        ``rules.FILE_COLUMNS``, filtered by ``query``, in sequence order."""
        self._check_open()
        return rules.file_rows(self._select, query)

    def file_count(self, query: FileQuery) -> int:
        """How many file records ``file_rows`` would return without ``query``'s limit."""
        self._check_open()
        return rules.file_count(self._select, query)

    def done_actions(self, plan_id: str, *, exclude_applies: Iterable[str] = ()) -> frozenset[int]:
        """Ids of the plan's actions whose latest record, over every apply of the plan but
        ``exclude_applies``, is not FAILED: what a resumed apply skips. Worked out by the storage, in
        one query; actions without a record are not done."""
        self._check_open()
        return rules.done_actions(self._select, plan_id, exclude_applies=exclude_applies)

    def apply_totals(self, apply_id: str) -> dict[FileOutcome, tuple[int, int]]:
        """(count, bytes) per outcome over the apply's actions, by each action's latest record in that
        apply (``RunState.counts`` and, for DELETED, ``bytes_reclaimed``); every outcome present."""
        self._check_open()
        return rules.apply_totals(self._select, apply_id)

    def deleted_without_size(self, apply_id: str) -> frozenset[int]:
        """Ids of the actions the apply DELETED whose record has no size (not in ``apply_totals``' bytes)."""
        self._check_open()
        return rules.deleted_without_size(self._select, apply_id)

    def unknown_sized_deletions(self) -> dict[str, int]:
        """Per plan, how many files were DELETED without a recorded size (``rules.unknown_sized_deletions``)."""
        self._check_open()
        return rules.unknown_sized_deletions(self._select)

    def outcome_totals(self, plan_id: str, *, exclude_applies: Iterable[str] = ()) -> dict[FileOutcome, tuple[int, int]]:
        """(count, bytes) per outcome, one outcome per action of the plan, every outcome present (zero
        when none). An action any apply DELETED counts as DELETED (a later idempotent re-apply that found
        the file absent does not un-delete it); otherwise its latest record counts."""
        self._check_open()
        return rules.outcome_totals(self._select, plan_id, exclude_applies=exclude_applies)

    def all_outcome_totals(self, *, exclude_applies: Iterable[str] = ()) -> dict[str, dict[FileOutcome, tuple[int, int]]]:
        """``outcome_totals`` of every plan with file records (outside ``exclude_applies``), by plan id,
        in one query."""
        self._check_open()
        return rules.all_outcome_totals(self._select, exclude_applies=exclude_applies)

    def maintenance_history(self, *, since_ms: int | None = None, table: str | None = None) -> list[dict[str, Any]]:
        """One row per operation run (``rules.MAINTENANCE_HISTORY``: every apply, and every ``maintain``
        result that applied nothing), oldest first, keyed by ``rules.HISTORY_COLUMNS``."""
        self._check_open()
        return rules.history_rows(self._select, since_ms=since_ms, table=table)

    # -- lifecycle ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release the journal; idempotent."""

    def held(self) -> contextlib.AbstractContextManager:
        """A block of many writes (an apply's bulk phase): the storage may stay open between them instead of
        opening for each. Every write is still its own transaction, durable when it returns."""
        self._check_open()
        return self._held()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the storage interface (no checks; tests use the writes to put raw rows in) ------------------

    @abc.abstractmethod
    def _check_open(self) -> None:
        """Raise ``JournalError`` if the storage is closed."""

    @abc.abstractmethod
    def _insert_plan(self, row: StoredEvent, actions: tuple[Action, ...]) -> None:
        """Append the plan's event row and store its actions, in one transaction."""

    @abc.abstractmethod
    def _load_plan(self, plan_id: str) -> tuple[PlanRecorded, tuple[Action, ...]] | None:
        """The plan's first ``PlanRecorded`` event and its actions by action id; None if it has no event."""

    @abc.abstractmethod
    def _plan_ids(self) -> list[str]:
        """Plan ids of the ``PlanRecorded`` rows, in sequence order."""

    @abc.abstractmethod
    def _append_rows(self, rows: Sequence[StoredEvent]) -> list[int]:
        """Append event rows in one transaction; returns their new sequence numbers."""

    @abc.abstractmethod
    def _event_rows(self, plan_id: str | None, apply_id: str | None) -> list[StoredEvent]:
        """Event rows with these ids (None: any), in sequence order."""

    @abc.abstractmethod
    def _insert_files(self, records: Sequence[FileRecord]) -> list[int]:
        """Insert file records in one transaction; returns their new sequence numbers."""

    def _held(self) -> contextlib.AbstractContextManager:
        """``held``'s block; a storage that is always open has nothing to do."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def _insert_file_table(self, table: pa.Table) -> list[int]:
        """Insert file records given as columns (``rules.FILES_SCHEMA`` without ``seq``) in one transaction;
        returns their new sequence numbers."""

    @abc.abstractmethod
    def _file_records(self, plan_id: str | None, apply_id: str | None) -> list[FileRecord]:
        """File records with these ids (None: any), in sequence order."""

    @abc.abstractmethod
    def _select(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        """Run one read-only query of ``journal.rules`` over the relations ``rules.RELATIONS`` names
        (as they are now, every row written so far); its rows as tuples."""
