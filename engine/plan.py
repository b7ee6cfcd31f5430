"""The CleanupPlan: a reviewed list of actions plus the requirements under which they are safe.

A plan is plain data and names no table format's internals: kind, format, table, ``now``, options with their
sources, a kind-specific ``scope``, typed ``requirements`` (each checks itself against the live table at
apply time), the ``phases`` the kind declares, the actions and stats. Its id is a hash of its canonical
content, so a changed byte changes the id and apply refuses it. Actions are sorted canonically (phase, then
the kind's order) and numbered from 0, their stable id. An action has a closed ``verb`` (what apply does to
its path) and an open ``kind`` label (what it is); see docs/design/apply.md#the-plan.
"""

from __future__ import annotations

import abc
import collections.abc
import contextlib
import dataclasses
import enum
import gc
import hashlib
import importlib
import json
import types
import typing
from dataclasses import dataclass, field
from operator import attrgetter
from typing import AbstractSet, Any, Callable, ClassVar, Mapping, Sequence

FORMAT_VERSION = 3
FORMATS = ("paimon", "iceberg")  # table formats a plan may name; each is a package engine/<format>/


class Verb(enum.StrEnum):
    """What apply does to an action's path. Closed: the applier knows how to do each."""

    DELETE_FILE = "delete-file"
    DELETE_EMPTY_DIR = "delete-empty-dir"
    WRITE_FILE = "write-file"
    COMMIT = "commit"
    MERGE = "merge"  # read into a new file with others (Iceberg compaction: an input of a bin's output)
    # delete the version a versioned S3 delete hid (``source``: its ``engine.quarantine.VersionedDelete``)
    PURGE_VERSION = "purge-version"

    @property
    def deletes(self) -> bool:
        return self is Verb.DELETE_FILE or self is Verb.DELETE_EMPTY_DIR or self is Verb.PURGE_VERSION


class PhaseMode(enum.StrEnum):
    """How apply runs a phase: ``bulk`` deletes as Spark tasks in any order; ``ordered`` runs the actions
    one after another on the driver, in plan order; ``commit`` commits new table metadata on the driver,
    once, under a commit identifier derived from the plan id; ``merge`` writes new files, one task per
    group of actions (an Iceberg compaction bin) on Spark, and journals each file written, for a later
    commit phase to commit."""

    BULK = "bulk"
    ORDERED = "ordered"
    COMMIT = "commit"
    MERGE = "merge"


@dataclass(frozen=True, slots=True)
class PhaseSpec:
    """One phase a plan kind declares. Phases run in the plan's order with a barrier between them; an
    action's ``phase`` is its phase's position, counted from 1."""

    name: str
    mode: PhaseMode

    def __post_init__(self):
        object.__setattr__(self, "mode", PhaseMode(self.mode))
        if not self.name:
            raise ValueError("a phase needs a name")


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused while a plan's actions are built in bulk. Each of its full
    passes walks every object built so far, and a million actions bring on one pass after another: half
    the time of reading a plan file of a million actions went to them. Actions hold text, numbers and
    enums, never a cycle: nothing is left for the collector to find."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _col(arrow: str, default: Any = None, *, nullable: bool = True):
    """An action field and its column type: the plan file, the journal and the row encoder all read it."""
    return field(default=default, metadata={"column": arrow, "nullable": nullable})


@dataclass(frozen=True, slots=True)
class Action:
    """One thing apply does. ``path`` is relative to the table root, or a full URI for external files.

    ``snapshot_id`` is the snapshot whose expiry causes the action (for a written pointer such as
    Paimon's EARLIEST hint: the value written); ``depth`` orders empty-directory deletes, deepest first;
    ``source`` is the file a written file is copied from. ``verb`` and ``phase`` come from the kind when
    it carries them.
    """

    kind: str = _col("string", nullable=False)
    path: str = _col("string", nullable=False)
    snapshot_id: int | None = _col("int64")
    partition: str | None = _col("string")
    bucket: int | None = _col("int32")
    size: int | None = _col("int64")
    source: str | None = _col("string")
    depth: int = _col("int32", 0, nullable=False)
    action_id: int = _col("int64", -1, nullable=False)
    verb: Verb | None = _col("string", nullable=False)
    phase: int = _col("int32", 0, nullable=False)

    def __post_init__(self):
        if not self.path:
            raise ValueError("an action needs a path")
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError(f"an action needs a kind label, got {self.kind!r}")
        if self.verb is None or not self.phase or type(self.verb) is not Verb:
            self._complete()

    def _complete(self) -> None:
        """The verb and phase the kind's spec gives, where the caller gave none; a verb given as text."""
        spec = kind_spec(self.kind)
        if self.verb is None:
            if spec is None:
                raise ValueError(f"action kind {self.kind!r} needs a verb")
            object.__setattr__(self, "verb", spec.verb)
        elif type(self.verb) is not Verb:
            object.__setattr__(self, "verb", Verb(self.verb))
        if not self.phase:
            if spec is None:
                raise ValueError(f"action kind {self.kind!r} needs a phase")
            object.__setattr__(self, "phase", spec.phase)

    def sort_key(self):
        """(phase, the kind's own order): a spec may give an ``order(action)`` of (rank, int, path);
        actions of kinds without one come after those in their phase, by kind label, deepest first, then
        by path."""
        spec = kind_spec(self.kind)
        if spec is not None and spec.order is not None:
            return (self.phase, *spec.order(self))
        return (self.phase, _UNRANKED, str(self.kind), -self.depth, self.path)


def built_actions(kinds: list, paths: list, snapshot_ids: list, partitions: list, buckets: list, sizes: list,
                  sources: list, depths: list, action_ids, verbs: list, phases: list) -> list[Action]:
    """``list(map(Action, kinds, paths, ...))``: the actions of columns of field values, in ``Action``'s field
    order. Where the columns pass what ``Action.__post_init__`` checks (every path and phase set, every kind a
    non-empty text, every verb a ``Verb``), the checks are made once per column and each action's slots are
    filled directly, in some two thirds of the time of a frozen dataclass's ``__init__`` (a million actions:
    0.83 s instead of 1.24 to 1.58 s); otherwise every action is built as ``Action`` builds it, and raises as
    it raises."""
    columns = (kinds, paths, snapshot_ids, partitions, buckets, sizes, sources, depths, action_ids, verbs, phases)
    distinct_kinds = dict(zip(map(id, kinds), kinds)).values()
    checked = (all(paths) and all(phases) and set(map(type, verbs)) <= {Verb}
               and all(isinstance(k, str) and k for k in distinct_kinds))
    with collector_paused():
        return list(map(_filled if checked else Action, *columns))


_SLOTS = tuple(Action.__dict__[name].__set__ for name in Action.__slots__)


def _filled(kind, path, snapshot_id, partition, bucket, size, source, depth, action_id, verb, phase, *,
            _new=object.__new__, _kind=_SLOTS[0], _path=_SLOTS[1], _snapshot_id=_SLOTS[2], _partition=_SLOTS[3],
            _bucket=_SLOTS[4], _size=_SLOTS[5], _source=_SLOTS[6], _depth=_SLOTS[7], _action_id=_SLOTS[8],
            _verb=_SLOTS[9], _phase=_SLOTS[10]):
    """An ``Action`` of checked values, its slots set one by one (``built_actions``)."""
    a = _new(Action)
    _kind(a, kind)
    _path(a, path)
    _snapshot_id(a, snapshot_id)
    _partition(a, partition)
    _bucket(a, bucket)
    _size(a, size)
    _source(a, source)
    _depth(a, depth)
    _action_id(a, action_id)
    _verb(a, verb)
    _phase(a, phase)
    return a


assert Action.__slots__ == tuple(f.name for f in dataclasses.fields(Action))


@dataclass(frozen=True, slots=True)
class ActionKindSpec:
    """What one action kind of a table format is: its stored ``label``, the ``verb`` apply carries out, the
    ``phase`` it runs in (counted from 1), its ``order`` within the phase (``order(action)`` as (rank, int,
    path); None: by label and path), and its place check: ``place``, the label of the kind whose location
    rules its path must follow (None: its own), and ``by_name``, kept when any file of its bare name is
    used (Paimon's orphan candidates). ``after_write(fileio, target, action)`` runs after a written file."""

    label: str
    verb: Verb
    phase: int
    order: Callable[[Any], tuple] | None = None
    place: str | None = None
    by_name: bool = False
    after_write: Callable[..., None] | None = None

    def __post_init__(self):
        if isinstance(self.phase, int) and not isinstance(self.phase, bool):
            object.__setattr__(self, "phase", int(self.phase))  # a format's phase enum member, stored as int
        if not self.label or type(self.verb) is not Verb or type(self.phase) is not int or self.phase < 1:
            raise ValueError(f"action kind spec {self.label!r}: needs a label, a Verb and a phase from 1")


_KIND_SPECS: dict[type, Mapping[str, ActionKindSpec]] = {}


def register_action_kinds(specs: Mapping[str, ActionKindSpec], *kinds: type[enum.Enum]) -> None:
    """Register a format's spec table (by label) for its action-kind enums; every member needs a spec."""
    for cls in kinds:
        missing = [k.value for k in cls if k.value not in specs]
        if missing:
            raise ValueError(f"action kinds {missing} of {cls.__name__} have no spec")
        _KIND_SPECS[cls] = specs


def kind_spec(kind) -> ActionKindSpec | None:
    """The spec of a registered action kind; None for a plain label (a kind no format defines)."""
    table = _KIND_SPECS.get(type(kind))
    return None if table is None else table[str.__str__(kind)]


_VERB_TEXT = {v: str.__str__(v) for v in Verb}  # an enum's .value is a descriptor call; this is a dict lookup

_UNRANKED = 1 << 30  # the rank of kinds that define no order: after every kind that does

# An ``ActionOrder``'s middle key: what it sorts on after its rank and before the path.
_ORDER_BY: dict[str, Callable[[Action], Any]] = {
    "path": lambda a: 0,
    "snapshot_id": lambda a: a.snapshot_id or 0,  # ascending id, None first (as 0)
    "deepest": lambda a: -a.depth,
    "bucket": lambda a: a.bucket if a.bucket is not None else -1,
}


@dataclass(frozen=True, slots=True)
class ActionOrder:
    """A kind's ``order(action)`` as data: (``rank``, the ``by`` key, path). ``by`` is ``path`` (0),
    ``snapshot_id`` (ascending, None as 0), ``deepest`` (minus the depth) or ``bucket`` (None as -1).
    ``canonical_actions`` sorts kinds ordered this way column by column instead of calling it per action."""

    rank: int
    by: str = "path"

    def __post_init__(self):
        if self.by not in _ORDER_BY or type(self.rank) is not int or not 0 <= self.rank < _UNRANKED:
            raise ValueError(f"an action order needs a rank from 0 and one of {list(_ORDER_BY)}, got {self!r}")

    def __call__(self, a: Action) -> tuple:
        return (self.rank, _ORDER_BY[self.by](a), a.path)

# The action columns, in order, with their types: derived once from the dataclass.
ACTION_COLUMNS: tuple[tuple[str, str, bool], ...] = tuple(
    (f.name, f.metadata["column"], f.metadata["nullable"]) for f in dataclasses.fields(Action))
ACTION_FIELDS: tuple[str, ...] = tuple(name for name, _, _ in ACTION_COLUMNS)


def action_values(a: Action) -> tuple:
    """An action's column values, in ``ACTION_COLUMNS`` order, as stored (the verb as its text)."""
    return (str.__str__(a.kind), a.path, a.snapshot_id, a.partition, a.bucket, a.size, a.source, a.depth,
            a.action_id, _VERB_TEXT[a.verb], a.phase)


def action_columns(actions: Sequence[Action]) -> dict[str, list]:
    """The actions' values column by column (``action_values``, transposed), as the plan file and the
    journal store them."""
    cols = {name: list(map(attrgetter(name), actions)) for name in ACTION_FIELDS}
    cols["kind"] = list(map(str.__str__, cols["kind"]))
    cols["verb"] = list(map(_VERB_TEXT.__getitem__, cols["verb"]))
    return cols


assert len(action_values(Action("k", "p", verb=Verb.DELETE_FILE, phase=1))) == len(ACTION_FIELDS)


def canonical_actions(actions: Sequence[Action], *, as_columns: bool = False) -> Sequence[Action]:
    """Sort, de-duplicate by (kind, path), and number the actions: a tuple, or with ``as_columns`` the plan
    file's columns (``engine.plan_columns.ColumnActions``) where every value fits them.

    A file planned by several snapshots keeps the earliest snapshot as its cause; any other tie is
    broken on the remaining fields, so the result never depends on the input order.
    """
    unique = list(actions)
    n = len(unique)
    order = _column_order(unique)
    if order is None:  # a (kind, path) planned twice, or keys Arrow cannot hold
        unique = _unique(unique)
        order = _column_order(unique) if len(unique) < n else None
    ordered = sorted(unique, key=Action.sort_key) if order is None else list(map(unique.__getitem__, order))
    cols = _fields(ordered)
    cols[_FIELD["action_id"]] = range(len(ordered))
    if as_columns:
        from lakesweep.engine.plan_columns import columns_of_fields

        columns = columns_of_fields(cols)
        if columns is not None:
            return columns
    return tuple(built_actions(*cols))


_FIELD = {name: i for i, name in enumerate(ACTION_FIELDS)}


def _fields(actions: list[Action]) -> list:
    """The actions' fields column by column, in ``ACTION_FIELDS`` order."""
    return [list(map(attrgetter(name), actions)) for name in ACTION_FIELDS]


def _unique(actions: list[Action]) -> list[Action]:
    """The actions with one per (kind, path), in first-seen order: the preferred one where they repeat."""
    by_key: dict[tuple[str, str], Action] = {}
    for a in actions:
        key = (str.__str__(a.kind), a.path)
        old = by_key.get(key)
        if old is None or _preference(a) < _preference(old):
            by_key[key] = a
    return list(by_key.values())


def _column_order(actions: list[Action]) -> list[int] | None:
    """The positions of ``actions`` in ``Action.sort_key`` order, sorted by Arrow over columns; None when
    two share a (kind, path), a kind's order is not an ``ActionOrder``, or a key does not fit a column.

    The keys are (phase, rank, the rank of an unordered kind's label) packed in one integer, the ``by``
    key and the path: the tuples ``sort_key`` gives, with the label replaced by its rank among the labels
    (Python's order); Arrow's sort is stable, as ``sorted``. Arrow compares strings by their UTF-8 bytes,
    which is the order of their code points, as Python's; a string UTF-8 cannot hold falls back."""
    return _order_of_columns(list(map(attrgetter("kind"), actions)),
                             lambda name: list(map(attrgetter(name), actions)))


def _order_of_columns(kinds: list, column: Callable[[str], list]) -> list[int] | None:
    """``_column_order`` of the actions whose kinds are ``kinds`` and whose other fields ``column(name)``
    gives (``phase``, ``path``, ``snapshot_id``, ``depth``, ``bucket``), each a list in the same order."""
    groups = list(zip(map(type, kinds), map(str.__str__, kinds)))
    group_of = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    order = _order_of_groups(list(group_of), lambda: list(map(group_of.__getitem__, groups)), column)
    return None if order is None else order.to_numpy().tolist()


def _order_of_groups(group_of: list[tuple[type, str]], codes: Callable[[], Sequence[int]],
                     column: Callable[[str], Sequence]):
    """``_order_of_columns`` of actions whose kinds are given as (type, label) pairs, each action's the
    position ``codes()`` gives in ``group_of``, as an Arrow array; ``codes()`` and ``column(name)`` may be
    Arrow arrays."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def arrow(values, typ):
        return values.cast(typ) if isinstance(values, pa.Array) else pa.array(values, typ)

    orders = []
    for typ, label in group_of:
        table = _KIND_SPECS.get(typ)
        spec = None if table is None else table[label]
        if spec is not None and spec.order is not None and type(spec.order) is not ActionOrder:
            return None
        orders.append(None if spec is None or spec.order is None else spec.order)
    labels = sorted({label for _, label in group_of})
    if len(labels) >= 1 << 11:
        return None
    unranked = sorted({label for (_, label), order in zip(group_of, orders) if order is None})
    packed = [(_UNRANKED if o is None else o.rank) << 11 | (0 if o is not None else unranked.index(label))
              for (_, label), o in zip(group_of, orders)]
    by_names = list(_ORDER_BY)
    try:
        group = arrow(codes(), pa.int32())
        ints = lambda name: arrow(column(name), pa.int64())  # noqa: E731
        phase = ints("phase")
        bounds = pc.min_max(phase).as_py()
        if phase.null_count or not 0 <= (bounds["min"] or 0) <= (bounds["max"] or 0) < 1 << 20:
            return None
        path = arrow(column("path"), pa.string())
        label = pa.array([labels.index(label) for _, label in group_of], pa.int64()).take(group)
        if pc.count_distinct(path).as_py() < len(path) and pc.count_distinct(  # paths alone first: no copy
                pc.binary_join_element_wise(pc.cast(label, pa.string()), path, "/")).as_py() < len(path):
            return None  # duplicates: the caller keeps one of each first
        by = pa.array([by_names.index("deepest" if o is None else o.by) for o in orders], pa.int8()).take(group)
        middle = pc.choose(by, pa.array(np.zeros(len(path), dtype=np.int64)), ints("snapshot_id").fill_null(0),
                           pc.negate_checked(ints("depth")), ints("bucket").fill_null(-1))
        first = pc.add(pc.shift_left(phase, 42), pa.array(packed, pa.int64()).take(group))
        if middle.null_count:
            return None  # a key Python cannot compare either: its sort raises as it always did
        keys = pa.table({"first": first, "middle": middle, "path": path})
        indices = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in keys.column_names])
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    return indices


def _preference(a: Action) -> tuple:
    """A total order on everything but (kind, path): the earliest snapshot first, None after values."""
    key: list = []
    for v, empty in ((a.snapshot_id, 0), (a.partition, ""), (a.bucket, 0), (a.size, 0), (a.source, "")):
        key += [v is None, empty if v is None else v]
    return (*key, a.depth, a.phase, a.verb.value)


@dataclass(frozen=True, slots=True)
class OptionValue:
    value: Any
    source: str  # "flag", "table", "default"


class Requirement(abc.ABC):
    """A fact the plan relies on, checked against the live table before apply touches anything and again
    before each phase (pyiceberg's update requirements).

    ``problems(view, done=...)`` says, in one line each, what was expected and what was found; no line
    means the requirement holds. ``done`` are the full locations of actions this plan has already carried
    out (a resumed apply), which may legitimately be gone. A requirement whose failure is not a stale plan
    but a wrong one (another table) raises ``PlanRejected`` itself. Subclasses are frozen dataclasses
    registered with ``requirement``; ``TYPE`` tags them in the plan header.

    ``STRICT_ONLY`` requirements pin the table as it was at planning (no commit since); apply checks them
    only with ``--strict``. By default apply goes ahead on a table that has moved, as long as each thing it
    does is still safe on the live table, which the apply gates check on their own.
    """

    TYPE: ClassVar[str]
    STRICT_ONLY: ClassVar[bool] = False

    @abc.abstractmethod
    def problems(self, view, *, done: AbstractSet[str] = frozenset()) -> list[str]: ...

    def check(self, view, *, done: AbstractSet[str] = frozenset()) -> None:
        """Raise ``StalePlan`` naming what changed."""
        found = self.problems(view, done=done)
        if found:
            from lakesweep.engine.errors import StalePlan

            raise StalePlan("; ".join(found))

    def to_json(self) -> dict:
        return {"type": self.TYPE, **{f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}}

    @classmethod
    def from_json(cls, obj: Mapping) -> "Requirement":
        """The requirement a plan header stores; a value of another type than the field declares is a
        ``ValueError`` (a plan edited by hand is refused as malformed, not checked with odd values)."""
        req = cls(**{k: v for k, v in obj.items() if k != "type"})
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(req):
            value = getattr(req, f.name)
            if not _fits(value, hints[f.name]):
                raise ValueError(f"requirement {cls.TYPE}: {f.name} is {value!r}, not a {hints[f.name]}")
        return req


class ActionCheck(Requirement):
    """A requirement that is re-checked per action before each phase: ``skipped(view, actions, targets)``
    returns the ids of the actions that must not run any more (journaled as skipped, never executed),
    e.g. an orphan candidate that has become referenced. ``problems`` may still refuse the whole plan."""

    @abc.abstractmethod
    def skipped(self, view, actions: Sequence[Action], targets: Sequence[str]) -> AbstractSet[int]: ...


def _fits(value, hint) -> bool:
    """``value`` is of the type ``hint`` names: str, int (not bool), bool, None, ``Any``, unions of these,
    ``tuple[X, ...]``, ``Sequence[X]`` (a list or a tuple) and ``Mapping[K, V]``."""
    if hint is Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is int:
        return type(value) is int
    if origin is tuple:
        return isinstance(value, tuple) and all(_fits(v, args[0]) for v in value)
    if origin in (Sequence, collections.abc.Sequence):
        return isinstance(value, (list, tuple)) and all(_fits(v, args[0]) for v in value)
    if origin in (Mapping, collections.abc.Mapping, dict):
        return isinstance(value, Mapping) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    return isinstance(value, hint)


def _registrar(registry: dict, what: str):
    """A class decorator that registers a type in ``registry`` under its ``TYPE`` tag, once."""

    def register(cls):
        if cls.TYPE in registry and registry[cls.TYPE] is not cls:
            raise ValueError(f"{what} type {cls.TYPE!r} is registered twice")
        registry[cls.TYPE] = cls
        return cls

    register.__doc__ = f"Class decorator: register a {what} type under its ``TYPE`` tag."
    return register


_REQUIREMENTS: dict[str, type[Requirement]] = {}
requirement = _registrar(_REQUIREMENTS, "requirement")  # tags ``<format>.<name>``


def format_module(fmt: str, part: str):
    """``engine.<fmt>.<part>`` (``kinds``, ``requirements``) of a table format lakesweep knows; a
    ``ValueError`` for any other format, so a plan can never make lakesweep import a module it names."""
    if fmt not in FORMATS:
        raise ValueError(f"table format {fmt!r} is not one of {list(FORMATS)}")
    return importlib.import_module(f"lakesweep.engine.{fmt}.{part}")


def decode_requirement(obj: Mapping) -> Requirement:
    """A requirement from its JSON form; the format named by the tag's prefix is loaded on first use."""
    tag = obj.get("type") if isinstance(obj, Mapping) else None
    if not isinstance(tag, str):
        raise ValueError(f"a requirement needs a type tag, got {obj!r}")
    fmt = tag.partition(".")[0]
    if tag not in _REQUIREMENTS and fmt in FORMATS:
        format_module(fmt, "requirements")
    cls = _REQUIREMENTS.get(tag)
    if cls is None:
        raise ValueError(f"unknown requirement type {tag!r}")
    return cls.from_json(obj)


class Scope:
    """A plan kind's own range data (expiry's begin and end, the bins of a compaction...), as a frozen
    dataclass per (format, plan kind) registered with ``scope_type``; ``TYPE`` (``<format>.<plan kind>``)
    tags it in the plan header. Readers use its attributes; ``to_json`` is its header form. Sequence fields
    hold what the planner gave or the header stored (lists), so a plan read back equals the plan written.
    """

    __slots__ = ()
    TYPE: ClassVar[str]

    def _names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self))

    def to_json(self) -> dict:
        return {"type": self.TYPE, **{name: _jsonable(getattr(self, name)) for name in self._names()}}

    @classmethod
    def from_json(cls, obj: Mapping) -> "Scope":
        """The scope a plan header stores (without its tag: an old plan's dict); a value of another type
        than the field declares is a ``ValueError``, as for requirements."""
        scope = cls(**{k: v for k, v in obj.items() if k != "type"})
        hints = typing.get_type_hints(cls)
        for name in scope._names():
            value = getattr(scope, name)
            if not _fits(value, hints[name]):
                raise ValueError(f"scope {cls.TYPE}: {name} is {value!r}, not a {hints[name]}")
        return scope


_SCOPES: dict[str, type[Scope]] = {}
scope_type = _registrar(_SCOPES, "scope")  # tags ``<format>.<plan kind>``


def decode_scope(obj: Mapping, *, fmt: str, kind: str, tagged: bool = True) -> Scope:
    """The scope of a ``fmt`` plan of kind ``kind`` from its JSON form. A tagged form (format 3) must
    carry the plan's own tag; an untagged one (formats 1 and 2 stored a plain dict) is upcast."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"a plan scope is an object, got {obj!r}")
    tag = f"{fmt}.{kind}"
    if (tagged or "type" in obj) and obj.get("type") != tag:
        raise ValueError(f"the scope of a {fmt} {kind} plan is tagged {obj.get('type')!r}, not {tag!r}")
    if tag not in _SCOPES:
        format_module(fmt, "scopes")
    cls = _SCOPES.get(tag)
    if cls is None:
        raise ValueError(f"{fmt} plans of kind {kind!r} have no scope type")
    return cls.from_json(obj)


@dataclass(frozen=True, slots=True)
class CleanupPlan:
    """A deterministic plan: same table + options + now give the same plan (and the same bytes)."""

    kind: str  # "expire"
    table_location: str
    table_identity: str
    branch: str
    now_ms: int
    options: Mapping[str, OptionValue]
    scope: Scope  # the kind's own range data (engine.<format>.scopes)
    requirements: tuple[Requirement, ...]
    phases: tuple[PhaseSpec, ...]
    actions: Sequence[Action]  # a tuple, or the plan file's columns (``engine.plan_columns.ColumnActions``)
    stats: Mapping[str, Any] = field(default_factory=dict)  # protected counts, bound, warnings
    format: str = "paimon"
    format_version: int = FORMAT_VERSION
    # A plan read from an older format keeps that file's header: its id was computed over it, and the
    # journal records it as written.
    stored_header: Mapping[str, Any] | None = field(default=None, repr=False)
    # The id, hashed on first read and kept: it covers every action, and apply, the journal and the CLI
    # read it many times. Not part of equality; a value passed in is discarded (the id always comes from
    # this plan's own content).
    _plan_id: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_plan_id", None)
        if self.format not in FORMATS:
            raise ValueError(f"table format {self.format!r} is not one of {list(FORMATS)}")
        if not isinstance(self.scope, Scope):
            raise TypeError(f"a {self.format} {self.kind} plan's scope must be its typed Scope "
                            f"(engine.{self.format}.scopes), not {type(self.scope).__name__}; an untyped "
                            f"scope is decoded only from an old plan header (decode_scope)")
        if self.scope.TYPE != f"{self.format}.{self.kind}":
            raise ValueError(f"a {self.format} {self.kind} plan cannot hold a {self.scope.TYPE} scope")
        checked = getattr(self.actions, "check_canonical", None)  # actions kept as columns check themselves
        if checked is not None:
            checked(len(self.phases))
            return
        for i, a in enumerate(self.actions):
            if a.action_id != i:
                raise ValueError("actions must be canonical (numbered 0..n-1 in order); use canonical_actions")
            if not 1 <= a.phase <= len(self.phases):
                raise ValueError(f"action {i} is in phase {a.phase}; the plan declares {len(self.phases)} phases")

    # An expiry's range (Paimon's snapshot and changelog expiry); None for a plan kind without one.
    @property
    def begin(self) -> int | None:
        return getattr(self.scope, "begin", None)

    @property
    def end(self) -> int | None:
        return getattr(self.scope, "end", None)

    @property
    def earliest_hint(self) -> int | None:
        return getattr(self.scope, "earliest_hint", None)

    @property
    def is_empty(self) -> bool:
        return not self.actions

    @property
    def deletes_anything(self) -> bool:
        columnar = getattr(self.actions, "deletes_anything", None)
        return columnar() if columnar is not None else any(a.verb.deletes for a in self.actions)

    def phase_name(self, phase: int) -> str:
        return self.phases[phase - 1].name

    def header(self) -> dict:
        """Everything but the actions, as JSON-ready data (without the plan id)."""
        if self.stored_header is not None:
            return _jsonable(self.stored_header)
        return {
            "format_version": self.format_version,
            "format": self.format,
            "plan_kind": self.kind,
            "table": {"location": self.table_location, "identity": self.table_identity, "branch": self.branch},
            "now_ms": self.now_ms,
            "options": {k: {"value": v.value, "source": v.source} for k, v in sorted(self.options.items())},
            "scope": self.scope.to_json(),
            "requirements": [r.to_json() for r in self.requirements],
            "phases": [{"name": p.name, "mode": p.mode.value} for p in self.phases],
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
    """The action as hashed into the plan id (formats 2 and 3): every column, in ``ACTION_COLUMNS`` order."""
    return list(action_values(a))


def action_row_v1(a: Action) -> list:
    """The action as format 1 hashed it (no verb; the phase second)."""
    return [a.action_id, a.phase, str(a.kind), a.path, a.snapshot_id, a.partition, a.bucket, a.size, a.source, a.depth]


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


_VERB_JSON = {v: _string(v) for v in Verb}


def action_json(a: Action) -> str:
    """``action_row(a)`` as compact JSON, the same text ``_COMPACT.encode`` writes, without its
    per-call encoder (a third of reading a 300,000-action plan)."""
    try:
        return (f"[{_string(a.kind)},{_string(a.path)},{_int_or_null(a.snapshot_id)},"
                f"{_str_or_null(a.partition)},{_int_or_null(a.bucket)},{_int_or_null(a.size)},"
                f"{_str_or_null(a.source)},{_int_or_null(a.depth)},{_int_or_null(a.action_id)},"
                f"{_VERB_JSON[a.verb]},{_int_or_null(a.phase)}]")
    except TypeError:  # a field of another type than the plan reader produces
        return _COMPACT.encode(action_row(a))


def action_json_v1(a: Action) -> str:
    return _COMPACT.encode(action_row_v1(a))


_ID_BATCH = 65_536  # actions encoded at a time: the rows' text of a batch is held at once


def header_bytes(header: Mapping) -> bytes:
    """A plan header as its id hashes it: compact JSON, keys sorted."""
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def compute_plan_id(header: Mapping, actions: Sequence[Action]) -> str:
    """sha256 over the canonical header JSON and one JSON row per action, in the header's format."""
    h = hashlib.sha256()
    h.update(header_bytes(header))
    v1 = header.get("format_version") == 1
    stored = None if v1 else getattr(actions, "stored_columns", None)
    columns = stored() if stored is not None else None
    if columns is not None:  # actions read from columns (a plan file's, the journal's): the same rows, from them
        from lakesweep.engine.plan_codec import rows_json

        for batch in columns.to_batches(max_chunksize=_ID_BATCH):
            h.update(rows_json(batch.columns))
        return h.hexdigest()[:32]
    for start in range(0, len(actions), _ID_BATCH):
        h.update(action_rows(actions[start:start + _ID_BATCH], v1=v1))
    return h.hexdigest()[:32]


def action_rows(actions: Sequence[Action], *, v1: bool = False) -> bytes:
    """For each action a newline and its row as compact JSON (``action_json``; ``action_json_v1`` for
    format 1): what the plan id hashes. A plan file's columns give the same bytes column by column
    (``engine.plan_codec.rows_json``); from Python objects, one row at a time is as fast."""
    row: Callable[[Action], str] = action_json_v1 if v1 else action_json
    return "".join(["\n" + row(a) for a in actions]).encode()


def summarize(actions: Sequence[Action], *, by_partition: AbstractSet[str] = frozenset()) -> dict:
    """Counts and bytes per action kind, and per partition for the kinds in ``by_partition``."""
    columnar = getattr(actions, "summary", None)  # actions kept as columns count themselves
    if columnar is not None:
        return columnar(by_partition)
    kinds: dict[str, dict[str, int]] = {}
    partitions: dict[str, dict[str, int]] = {}
    for a in actions:
        k = kinds.setdefault(str(a.kind), {"count": 0, "bytes": 0, "unknown_size": 0})
        k["count"] += 1
        if a.size is None:
            k["unknown_size"] += 1
        else:
            k["bytes"] += a.size
        if a.kind in by_partition:
            p = partitions.setdefault(a.partition or "", {"count": 0, "bytes": 0})
            p["count"] += 1
            p["bytes"] += a.size or 0
    return {
        "by_kind": dict(sorted(kinds.items())),
        "by_partition": dict(sorted(partitions.items())),
        "files": sum(1 for a in actions if a.verb is Verb.DELETE_FILE),
        "bytes": sum(a.size or 0 for a in actions if a.verb.deletes),
    }


def commit_id(plan_id: str, phase: int) -> str:
    """The identifier a commit phase commits under: the same for every attempt of the same plan."""
    return f"lakesweep-{plan_id}-{phase}"


def pointer_writes(actions: Sequence[Action]) -> list[Action]:
    """Written values rather than copied files (Paimon's EARLIEST hint): the journal records each value."""
    of_verb = getattr(actions, "of_verb", None)  # actions held as columns build only the writes
    if of_verb is not None:
        actions = of_verb(Verb.WRITE_FILE)
    return [a for a in actions if a.verb is Verb.WRITE_FILE and a.source is None and a.snapshot_id is not None]
