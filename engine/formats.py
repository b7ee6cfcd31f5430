"""What lakesweep asks of a table format, and the one registry of formats.

A ``TableFormat`` opens a plan's table and answers apply's questions about it: is the plan for this table,
are its paths where their kinds of file live, is anything it deletes still used, how it commits, and is the
table whole afterwards. Each format lives in its own package (``engine/<format>/format.py``); adding one is
that package plus its name in ``engine.plan.FORMATS``. Apply's loop (``applier.apply``) is the same for every format.
"""

from __future__ import annotations

import bisect
from typing import AbstractSet, Any, Iterator, Mapping, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.plan import FORMATS, Action, CleanupPlan, PhaseMode, Verb, format_module
from lakesweep.engine.plan_columns import action_ids, verb_phases


class TableFormat(Protocol):
    """One table format's answers to apply. ``table`` is the format's own table view (``open``)."""

    name: str

    def open(self, plan: CleanupPlan, fileio: FileIO | None) -> Any:
        """The plan's table, read now (``fileio`` given: through it)."""

    def external_roots(self, table) -> list[str]:
        """Roots outside the table location where the table keeps files."""

    def verify_table(self, plan: CleanupPlan, table) -> None:
        """Refuse (``PlanRejected``) a plan of a kind this format does not apply, or for another table."""

    def check_neighbours(self, plan: CleanupPlan, table) -> None:
        """Refuse (``SharedStorage``) an orphans plan when another table stores files in this one's roots."""

    def verify_paths(self, plan: CleanupPlan, table) -> list[str]:
        """Each action's full location, by action id; refuse a path outside the table's roots or where its
        kind of file does not live."""

    def check_unreachable(self, plan: CleanupPlan, table, actions: Sequence[Action], targets: Sequence[str], *,
                          done: AbstractSet[str], strict: bool = False,
                          index: "TargetIndex | None" = None) -> dict[int, str]:
        """The actions to hold back, each with why, or a refusal (``StalePlan``) when a file the actions
        delete is still used by the live ``table``. ``index``: the targets' ``TargetIndex``."""

    def held_outcomes(self, plan: CleanupPlan) -> frozenset[str]:
        """Outcomes beyond the usual by which an apply of ``plan`` holds actions back on a live table."""

    def check_strict(self, plan: CleanupPlan, table) -> None:
        """``apply --strict``: refuse when the table changed since planning."""

    def committer(self, plan: CleanupPlan, strict: bool):
        """The committer of the plan's commit phases (``applier.commit.Committer``)."""

    def verify(self, plan: CleanupPlan, table, targets: Sequence[str], index: TargetIndex | None = None):
        """(the check's report, the locations checked) after the last phase; ``index``: the plan's
        ``TargetIndex``, through which the locations are looked up (``locations_of``)."""


def format_names() -> tuple[str, ...]:
    return FORMATS


def format_named(name: str) -> TableFormat:
    """The format ``name`` (``engine.<name>.format.FORMAT``; the names are ``engine.plan.FORMATS``, the one
    registry); ``PlanRejected`` for one lakesweep does not know."""
    if name not in FORMATS:
        raise PlanRejected(f"table format {name!r} is not one lakesweep applies")
    return format_module(name, "format").FORMAT


def format_of(plan: CleanupPlan) -> TableFormat:
    return format_named(plan.format)


# -- checks every plan gets, whatever its format


_CHUNK = 65_536  # held parts gathered into one Arrow array at a time


class Targets(Sequence[str]):
    """Each action's full location, by action id, as ``verify_paths`` finds them, held compactly: a location
    under ``root`` as its part after ``root/``, joined to the root again when read; the parts as Arrow
    string arrays (a few bytes over the text each), not a Python string per location, or the plan's own
    path column where that is what they are (``share``). Equal to the list of locations."""

    __slots__ = ("prefix", "_chunks", "_starts", "_pending", "_under", "_holding", "_own", "_shared", "_read", "_next")

    def __init__(self, root: str):
        self.prefix = root + "/"
        self._chunks: list[pa.StringArray] = []  # the held parts, an array at a time
        self._starts: list[int] = []  # the id of each array's first part
        self._pending: list[str] = []  # the parts after the last array
        self._under = bytearray()  # 1: held relative to the root
        self._holding: dict[str, tuple[int, list[int]]] = {}  # marker -> (len when found, ids)
        self._own = True  # every location so far under the root, held as the action's own path
        self._shared = False
        self._read: tuple[int, list[str]] = (0, [])  # the strings of the array read in order: (its first id, them)
        self._next = -1  # the place in its array after the last id read

    def share(self, paths: pa.ChunkedArray) -> None:
        """Hold ``paths``, the actions' own path column (by action id), instead of a copy of it, where every
        location was under the root and held as its action's own path, and the column is equal to what is
        held (checked). No location is appended after."""
        if not self._own or len(paths) != len(self):
            return
        held = pa.chunked_array([*self._chunks, pa.array(self._pending, pa.string())], pa.string())
        if paths.type == pa.string() and paths.equals(held):
            self._chunks = [chunk for chunk in paths.chunks if len(chunk)]
            self._starts = np.cumsum([0, *map(len, self._chunks)])[:-1].tolist()
            self._pending, self._shared = [], True
            self._read, self._next = (0, []), -1

    def append(self, full: str, path: str | None = None) -> None:
        """The next action's full location; ``path``: the action's own path, held when it is the part of
        ``full`` after the root."""
        if self._shared:
            raise ValueError("no location is appended to targets that share a plan's path column")
        prefix = self.prefix
        if full.startswith(prefix):
            # the action's own path when it is the rest (compared in place: no copy of the rest is made)
            same = path is not None and len(full) == len(prefix) + len(path) and full.endswith(path)
            self._pending.append(path if same else full[len(prefix):])
            self._under.append(1)
            self._own = self._own and same
        else:
            self._pending.append(full)
            self._under.append(0)
            self._own = False
        if len(self._pending) == _CHUNK:
            self._starts.append(len(self._under) - _CHUNK)
            self._chunks.append(pa.array(self._pending, pa.string()))
            self._pending = []

    def held(self, i: int) -> str:
        """What is held for action ``i``: its part after the root, or its whole location. Read in order (a
        phase's actions, one after another), an array's strings are made once, all together."""
        start, strings = self._read
        if start <= i < start + len(strings):
            return strings[i - start]
        starts = self._starts
        if not starts or i >= starts[-1] + len(self._chunks[-1]):
            return self._pending[i - (starts[-1] + len(self._chunks[-1]) if starts else 0)]
        chunk = bisect.bisect_right(starts, i) - 1
        at = i - starts[chunk]
        if at == self._next:  # the one after the last read: reading in order
            self._read = (starts[chunk], self._chunks[chunk].to_pylist())
        self._next = at + 1
        return self._chunks[chunk][at].as_py()

    def held_chunks(self) -> Iterator[list[str]]:
        """What is held, by action id, an array at a time (each made into strings as it is reached)."""
        for chunk in self._chunks:
            yield chunk.to_pylist()
        if self._pending:
            yield self._pending

    def holding(self, marker: str) -> list[int]:
        """The ids, in order, whose held part contains ``marker`` (a location under the root holds the
        marker in its part after the root whenever the marker lies below the root): found once per marker
        and length, since every gate of an apply asks again."""
        found = self._holding.get(marker)
        if found is None or found[0] != len(self):
            ids: list[int] = []
            for start, chunk in zip(self._starts, self._chunks):  # substrings of UTF-8 bytes: of the text too
                hits = pc.match_substring(chunk, marker).to_numpy(zero_copy_only=False)
                ids += (np.flatnonzero(hits) + start).tolist()
            base = len(self) - len(self._pending)
            ids += [base + j for j, held in enumerate(self._pending) if marker in held]
            found = self._holding[marker] = (len(self), ids)
        return found[1]

    def entries(self) -> Iterator[tuple[int, str]]:
        """(1 when held relative to the root else 0, what is held), by action id."""
        return zip(self._under, (held for chunk in self.held_chunks() for held in chunk))

    def __len__(self) -> int:
        return len(self._under)

    def __getitem__(self, i):
        start, strings = self._read
        at = i - start if type(i) is int else -1
        if 0 <= at < len(strings):  # in the array read in order: no other check needed
            return self.prefix + strings[at] if self._under[i] else strings[at]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("target index out of range")
        held = self.held(i)
        return self.prefix + held if self._under[i] else held

    def __iter__(self) -> Iterator[str]:
        prefix = self.prefix
        return (prefix + held if under else held for under, held in self.entries())

    def __eq__(self, other) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Targets({len(self)} locations, under {self.prefix!r} or elsewhere)"


class TargetIndex:
    """The action ids of each full location of a plan (its targets, by action id), built once per apply: a
    location's last action (``get``), and on demand every action of the few locations more than one action
    names (an Iceberg expiry's commit and delete of the same manifest list; an edited plan).

    No dict of a million strings: each location is held as the hash of what ``Targets`` hold for it (its
    part after the root, marked as such, or the location whole), in a sorted NumPy array beside the ids in
    that order, 16 bytes an action. A lookup finds the ids of equal hashes and compares what is held for
    them, so a collision can never match another location."""

    __slots__ = ("targets", "_prefix", "_hashes", "_ids", "_shared")

    def __init__(self, targets: Sequence[str]):
        self.targets = targets
        n = len(targets)
        hashes = np.empty(n, np.int64)
        if isinstance(targets, Targets):
            self._prefix: str | None = targets.prefix
            under, at = targets._under, 0
            for chunk in targets.held_chunks():
                hashes[at:at + len(chunk)] = [hash((u, held)) for u, held in zip(under[at:at + len(chunk)], chunk)]
                at += len(chunk)
        else:
            self._prefix = None
            hashes[:] = [hash((0, t)) for t in targets]
        self._ids = np.argsort(hashes, kind="stable")  # equal hashes: ids ascending
        self._hashes = hashes[self._ids]
        if n < 2**31:
            self._ids = self._ids.astype(np.int32)
        same = np.flatnonzero(self._hashes[1:] == self._hashes[:-1])
        repeated = any(self._key(int(self._ids[k])) == self._key(int(self._ids[k + 1])) for k in same.tolist())
        self._shared: dict[str, list[int]] | None = None if repeated else {}

    def _key(self, i: int) -> tuple[int, str]:
        targets = self.targets
        if isinstance(targets, Targets):
            return targets._under[i], targets.held(i)
        return 0, targets[i]

    def _candidates(self, key: tuple[int, str]) -> list[int]:
        """The ids whose held key equals ``key``, ascending."""
        h = hash(key)
        lo = int(np.searchsorted(self._hashes, h, "left"))
        if lo == len(self._hashes) or self._hashes[lo] != h:
            return []
        hi = int(np.searchsorted(self._hashes, h, "right"))
        return [i for i in self._ids[lo:hi].tolist() if self._key(i) == key]

    def _lookup(self, location) -> tuple[int, str] | None:
        if not isinstance(location, str):
            return None
        prefix = self._prefix
        if prefix is not None and location.startswith(prefix):
            return 1, location[len(prefix):]
        return 0, location

    def get(self, location: str) -> int | None:
        """The last action naming ``location``; None when none does."""
        key = self._lookup(location)
        found = [] if key is None else self._candidates(key)
        return found[-1] if found else None

    @property
    def shared(self) -> dict[str, list[int]]:
        """Every action of each location more than one action names, in order (found on first use)."""
        if self._shared is None:
            shared: dict[str, list[int]] = {}
            same = np.flatnonzero(self._hashes[1:] == self._hashes[:-1])
            for k in dict.fromkeys(same.tolist()):
                i = int(self._ids[k])
                ids = self._candidates(self._key(i))
                if len(ids) > 1:
                    shared[self.targets[ids[-1]]] = ids
            self._shared = shared
        return self._shared

    def ids(self, location: str) -> Sequence[int]:
        """Every action naming ``location``, in order."""
        i = self.get(location)
        if i is None:
            return ()
        return self.shared.get(location) or (i,)

    def last_in(self, location: str, ids: AbstractSet[int]) -> int | None:
        """The last action naming ``location`` whose id is in ``ids``; None when none is."""
        i = self.get(location)
        if i is None or i in ids:  # no action names it, or the last that does is one of them
            return i
        found = [j for j in self.ids(location) if j in ids]
        return found[-1] if found else None


class Locations(AbstractSet[str]):
    """The distinct full locations of the actions ``ids`` names, looked up through a ``TargetIndex``: a set of
    action ids stands for a set of a million locations. A location is in when any action naming it is."""

    __slots__ = ("_index", "_ids")

    def __init__(self, index: TargetIndex, ids: AbstractSet[int]):
        self._index, self._ids = index, ids

    def last(self, location) -> int | None:
        """The last of the actions naming ``location``; None when none does."""
        return self._index.last_in(location, self._ids)

    def __contains__(self, location) -> bool:
        return self.last(location) is not None

    def __iter__(self) -> Iterator[str]:
        targets = self._index.targets
        return iter(dict.fromkeys(targets[i] for i in sorted(self._ids)))

    def __len__(self) -> int:
        # one per id, less the extra ids of each location several actions name (a few: counted through them)
        n = len(self._ids)
        for ids in self._index.shared.values():
            n -= max(0, sum(1 for i in ids if i in self._ids) - 1)
        return n

    def __bool__(self) -> bool:
        return bool(self._ids)


def locations_of(actions: Sequence[Action], targets: Sequence[str], index: TargetIndex | None = None, *,
                 deleting: bool = False) -> AbstractSet[str]:
    """The full locations of ``actions`` (of those whose verb deletes, with ``deleting``; ``targets``, by action
    id): through ``index`` where it is the index of ``targets`` (a set of ids), else a set of the locations."""
    ids = action_ids(actions, deleting=deleting)
    if index is not None and index.targets is targets:
        return Locations(index, ids)
    return {targets[i] for i in ids}


class _PlannedDeletes(Mapping):
    """``planned_deletes`` through a ``TargetIndex``: a set of action ids, not a dict of locations."""

    __slots__ = ("_actions", "_locations")

    def __init__(self, plan_actions: Sequence[Action], actions: Sequence[Action], index: TargetIndex):
        self._actions = plan_actions
        self._locations = Locations(index, action_ids(actions, verb=Verb.DELETE_FILE))

    def __contains__(self, location) -> bool:
        return location in self._locations

    def __getitem__(self, location: str) -> Action:
        i = self._locations.last(location)  # the dict keeps the last
        if i is None:
            raise KeyError(location)
        return self._actions[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._locations)

    def __len__(self) -> int:
        return len(self._locations)

    def __bool__(self) -> bool:
        return bool(self._locations)


def planned_deletes(plan: CleanupPlan, actions: Sequence[Action], targets: Sequence[str],
                    index: TargetIndex | None = None) -> Mapping[str, Action]:
    """The actions among ``actions`` (in plan order) that delete a file, by full location (``targets``, by
    action id), the later one where two name the same location.

    With ``index`` (the plan's ``TargetIndex``, built once per apply) the locations are looked up through it:
    a gate on a plan of a million files builds a set of ids instead of a dict of a million locations.
    Without it the mapping is built as a dict."""
    if index is not None and index.targets is targets and len(targets) == len(plan.actions):
        return _PlannedDeletes(plan.actions, actions, index)
    return {targets[a.action_id]: a for a in actions if a.verb is Verb.DELETE_FILE}


def check_phases(plan: CleanupPlan) -> None:
    """Commit actions run in commit phases and merge actions in merge phases, and those phases hold nothing
    else."""
    def wrong(verb: Verb, phase: int) -> bool:
        mode = plan.phases[phase - 1].mode
        return (verb is Verb.COMMIT) != (mode == PhaseMode.COMMIT) or (verb is Verb.MERGE) != (mode == PhaseMode.MERGE)

    # A plan has a few (verb, phase) pairs, checked once each; the first action of a wrong one is named.
    refused = {shape for shape in verb_phases(plan.actions) if wrong(*shape)}
    for a in plan.actions if refused else ():
        if (a.verb, a.phase) in refused:
            raise PlanRejected(f"action {a.action_id} ({a.kind} {a.path!r}) is a {a.verb} action in the "
                               f"{plan.phases[a.phase - 1].mode} phase '{plan.phase_name(a.phase)}'; the plan is refused")


def check_requirements(plan: CleanupPlan, table, *, done: AbstractSet[str] = frozenset(),
                       strict: bool = False) -> None:
    """Every requirement of the plan against the live ``table``; raise one ``StalePlan`` naming all that
    changed. ``done`` are full locations this plan already carried out (a resumed apply). Requirements
    that pin the table as at planning (``STRICT_ONLY``) count only when ``strict``."""
    problems: list[str] = []
    for r in plan.requirements:
        if r.STRICT_ONLY and not strict:
            continue
        problems += r.problems(table, done=done)
    if problems:
        raise StalePlan(
            f"the plan {plan.plan_id} is stale: " + "; ".join(problems) + f". Re-run 'lakesweep plan {plan.kind}'."
        )
