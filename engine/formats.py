"""What lakesweep asks of a table format, and the one registry of formats.

A ``TableFormat`` opens a plan's table and answers apply's questions about it: is the plan for this table,
are its paths where their kinds of file live, is anything it deletes still used, how it commits, and is the
table whole afterwards. Each format lives in its own package (``engine/<format>/format.py``); adding one is
that package plus its name in ``engine.plan.FORMATS``. Apply's loop (``applier.apply``) is the same for every format.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Iterator, Mapping, Protocol, Sequence

from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.plan import FORMATS, Action, CleanupPlan, PhaseMode, Verb, format_module


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


class Targets(Sequence[str]):
    """Each action's full location, by action id, as ``verify_paths`` finds them, without a second copy of
    every path: a location under ``root`` is held as its part after ``root/`` (the action's own path string
    where the action spells it so) and joined to the root again when read. Equal to the list of locations."""

    __slots__ = ("prefix", "_held", "_under", "_holding")

    def __init__(self, root: str):
        self.prefix = root + "/"
        self._held: list[str] = []
        self._under = bytearray()  # 1: held relative to the root
        self._holding: dict[str, tuple[int, list[int]]] = {}  # marker -> (len when found, ids)

    def append(self, full: str, path: str | None = None) -> None:
        """The next action's full location; ``path``: the action's own path, held when it is the part of
        ``full`` after the root."""
        prefix = self.prefix
        if full.startswith(prefix):
            # the action's own path when it is the rest (compared in place: no copy of the rest is made)
            same = path is not None and len(full) == len(prefix) + len(path) and full.endswith(path)
            self._held.append(path if same else full[len(prefix):])
            self._under.append(1)
        else:
            self._held.append(full)
            self._under.append(0)

    def holding(self, marker: str) -> list[int]:
        """The ids, in order, whose held part contains ``marker`` (a location under the root holds the
        marker in its part after the root whenever the marker lies below the root): found once per marker
        and length, since every gate of an apply asks again."""
        found = self._holding.get(marker)
        if found is None or found[0] != len(self._held):
            ids = [i for i, held in enumerate(self._held) if marker in held]
            found = self._holding[marker] = (len(self._held), ids)
        return found[1]

    def entries(self) -> Iterator[tuple[int, str]]:
        """(1 when held relative to the root else 0, what is held), by action id."""
        return zip(self._under, self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        held = self._held[i]
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

    ``Targets`` are indexed as they are held: a location under their root by its part after the root (in a
    dict of its own, so it can never be taken for a full location elsewhere), the rest whole."""

    __slots__ = ("targets", "_prefix", "_under", "_other", "_shared")

    def __init__(self, targets: Sequence[str]):
        self.targets = targets
        if isinstance(targets, Targets):
            self._prefix: str | None = targets.prefix
            self._under = {held: i for i, (under, held) in enumerate(targets.entries()) if under}
            self._other = {held: i for i, (under, held) in enumerate(targets.entries()) if not under}
        else:
            self._prefix, self._under = None, {}
            self._other = {t: i for i, t in enumerate(targets)}
        distinct = len(self._under) + len(self._other)
        self._shared: dict[str, list[int]] | None = None if distinct != len(targets) else {}

    def get(self, location: str) -> int | None:
        """The last action naming ``location``; None when none does."""
        prefix = self._prefix
        if prefix is not None and isinstance(location, str) and location.startswith(prefix):
            return self._under.get(location[len(prefix):])
        return self._other.get(location)

    @property
    def shared(self) -> dict[str, list[int]]:
        """Every action of each location more than one action names, in order (found on first use)."""
        if self._shared is None:
            targets = self.targets
            entries = targets.entries() if isinstance(targets, Targets) else ((0, t) for t in targets)
            shared: dict[str, list[int]] = {}
            for i, (under, held) in enumerate(entries):
                if (self._under if under else self._other)[held] != i:
                    shared.setdefault(targets[i], []).append(i)
            for t, ids in shared.items():
                ids.append(self.get(t))
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


def locations_of(actions: Sequence[Action], targets: Sequence[str], index: TargetIndex | None = None,
                 ) -> AbstractSet[str]:
    """The full locations of ``actions`` (``targets``, by action id): through ``index`` where it is the index of
    ``targets`` (a set of ids), else a set of the locations themselves."""
    if index is not None and index.targets is targets:
        return Locations(index, {a.action_id for a in actions})
    return {targets[a.action_id] for a in actions}


class _PlannedDeletes(Mapping):
    """``planned_deletes`` through a ``TargetIndex``: a set of action ids, not a dict of locations."""

    __slots__ = ("_actions", "_locations")

    def __init__(self, plan_actions: Sequence[Action], actions: Sequence[Action], index: TargetIndex):
        self._actions = plan_actions
        self._locations = Locations(index, {a.action_id for a in actions if a.verb is Verb.DELETE_FILE})

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
    refused = {shape for shape in {(a.verb, a.phase) for a in plan.actions} if wrong(*shape)}
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
