"""A plan's actions held as the plan file's Arrow columns, each ``Action`` built only where one is read.

A planner that finds millions of files as columns (``ActionColumnsBuilder``) keeps them so: the
plan file is written, its id hashed and its summary counted from the columns, and iterating builds the
actions a batch at a time. ``ColumnActions`` is a sequence of ``Action`` equal to the tuple it stands for.
"""

from __future__ import annotations

import operator
from operator import attrgetter
from typing import AbstractSet, Iterator, Mapping, NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesweep.engine.plan import ACTION_COLUMNS, Action, Verb, built_actions
from lakesweep.engine.plan_codec import ARROW_TYPES, NotColumnar, column_arrays, typed_array

SCHEMA = pa.schema([pa.field(name, ARROW_TYPES[t], nullable=n) for name, t, n in ACTION_COLUMNS])
_FIELD = {name: i for i, name in enumerate(SCHEMA.names)}
_BATCH = 65_536  # actions built at a time when iterated
_SHARE_MIN = 1_024  # shorter columns are read plainly: sharing their values saves next to nothing
_SHARE_RATIO = 4  # shared only when each distinct value stands, on average, for at least this many rows
_VERBS = {v.value: v for v in Verb}
_DELETING = tuple(v.value for v in Verb if v.deletes)


def column_values(col: pa.ChunkedArray | pa.Array, *, shared: bool = False) -> list:
    """A column's values as Python objects (``None`` for nulls), through NumPy: ``to_pylist`` builds an
    Arrow scalar per value and costs several times more on a plan of 300,000 actions. ``shared``: a column
    of few distinct values (a plan's snapshot ids, sizes, partitions) gives one object per distinct value,
    referenced by every row that holds it, instead of one per row (a million actions hold some 100 MiB less)."""
    if shared and len(col) >= _SHARE_MIN:
        return _shared_values(col)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col.to_numpy(zero_copy_only=False).tolist()
    if not pa.types.is_integer(col.type):
        return col.to_pylist()
    if not col.null_count:
        return col.to_numpy().tolist()
    values = col.fill_null(0).to_numpy().tolist()
    nulls = col.is_null().to_numpy(zero_copy_only=False).tolist()
    return [None if null else v for v, null in zip(values, nulls)]


def _shared_values(col: pa.ChunkedArray | pa.Array) -> list:
    """``column_values(col)``, each distinct value one object; the plain values when they are mostly distinct."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    encoded = pc.dictionary_encode(col)
    distinct = encoded.dictionary
    if len(distinct) > len(col) // _SHARE_RATIO:
        return column_values(col)
    values = column_values(distinct)
    indices = encoded.indices
    if indices.null_count:
        values.append(None)
        indices = indices.fill_null(len(distinct))
    return list(map(values.__getitem__, indices.to_numpy().tolist()))


class FileActions(tuple):
    """The actions of a plan file, with the columns they were decoded from until the journal takes them
    (``take_arrays``): the journal's copy of the plan is then the columns the plan's id was checked over,
    not arrays rebuilt action by action, and the actions hold no second copy of the plan while they are
    applied. A tuple in every other way (a slice or a copy is a plain one)."""

    def __new__(cls, actions: Sequence[Action], columns: pa.Table):
        if columns.schema != SCHEMA or columns.num_rows != len(actions):
            raise ValueError("a plan file's columns must have its schema and one row per action")
        self = super().__new__(cls, actions)
        self._columns = columns
        return self

    def __reduce__(self):
        return tuple, (tuple(self),)  # what a copy elsewhere needs is the actions

    def stored_columns(self) -> pa.Table | None:
        """The columns, left in place (None once taken): what the plan id hashes, as stored."""
        return self._columns

    def take_arrays(self) -> list[pa.Array] | None:
        """The columns, in ``SCHEMA`` order, each one array, handed over once: None when already taken."""
        columns, self._columns = self._columns, None
        return None if columns is None else [column.combine_chunks() for column in columns.columns]


class ColumnActions(Sequence):
    """Actions as columns of ``SCHEMA`` (the plan file's), in order; ``kinds`` maps each kind label of the
    columns to the kind the actions carry (a label it lacks stays text). Immutable."""

    __slots__ = ("_table", "_kinds", "_batches")

    def __init__(self, table: pa.Table, kinds: Mapping[str, str]):
        if table.schema != SCHEMA:
            raise ValueError("action columns must have the plan file's schema")
        self._table = table
        self._kinds = dict(kinds)
        self._batches: tuple[list[pa.RecordBatch], np.ndarray] | None = None  # and the first row of each

    def rows_at(self, positions: Sequence[int], names: Sequence[str] = tuple(SCHEMA.names)) -> pa.Table:
        """The ``names`` columns of the rows at ``positions``, in that order. Taken from each record batch the
        columns are held in: Arrow's ``take`` on columns of several chunks joins the chunks first, a copy of
        the whole plan for each call."""
        if self._batches is None:
            batches = self._table.to_batches()
            self._batches = (batches, np.cumsum([0, *(b.num_rows for b in batches)])[:-1])
        batches, starts = self._batches
        wanted = np.asarray(positions, np.int64)
        if len(wanted) and (wanted.min() < 0 or wanted.max() >= len(self)):
            raise IndexError("action index out of range")
        order = np.argsort(wanted, kind="stable")
        ordered = wanted[order]
        where = np.searchsorted(starts, ordered, "right") - 1
        cuts = np.flatnonzero(np.diff(where)) + 1
        pieces = [batches[int(where[lo])].select(list(names)).take(pa.array(ordered[lo:hi] - starts[where[lo]]))
                  for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(ordered)]) if hi > lo]
        if not pieces:
            return self._table.select(list(names)).slice(0, 0)
        taken_rows = pa.Table.from_batches(pieces).combine_chunks()
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        return taken_rows.take(pa.array(back))

    def __len__(self) -> int:
        return self._table.num_rows

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return tuple(self)[i]
            return ColumnActions(self._table.slice(start, max(0, stop - start)), self._kinds)
        n = len(self)
        if not -n <= i < n:
            raise IndexError("action index out of range")
        return self._build(self._table.slice(i % n, 1))[0]

    def __iter__(self) -> Iterator[Action]:
        for batch in self._table.to_batches(max_chunksize=_BATCH):
            yield from self._build(batch)

    def __eq__(self, other) -> bool:
        if isinstance(other, ColumnActions):  # the same values, and each label the same type of kind
            return self._table.equals(other._table) and ({k: type(v) for k, v in self._kinds.items()} ==
                                                         {k: type(v) for k, v in other._kinds.items()})
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ColumnActions({len(self)} actions)"

    def _build(self, batch: pa.RecordBatch | pa.Table) -> list[Action]:
        cols = [column_values(batch.column(name)) for name in SCHEMA.names]
        kinds, verbs = _FIELD["kind"], _FIELD["verb"]
        cols[kinds] = [self._kinds.get(label, label) for label in cols[kinds]]
        cols[verbs] = list(map(_VERBS.__getitem__, cols[verbs]))
        return built_actions(*cols)

    def column(self, name: str) -> list:
        """The values of one field, in order, as stored (a kind as its label, a verb as its text)."""
        return column_values(self._table.column(name))

    def where_verb(self, verb: str, name: str) -> tuple[np.ndarray, pa.Array]:
        """The positions of the actions whose verb is ``verb`` (its text) and their ``name`` column."""
        t = self._table
        mask = pc.equal(t.column("verb"), verb).combine_chunks()
        positions = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
        return positions, t.column(name).combine_chunks().filter(mask)

    def column_of_kind(self, name: str, label: str) -> list:
        """``column(name)`` of the actions whose kind label is ``label``."""
        t = self._table
        return column_values(t.column(name).filter(pc.equal(t.column("kind"), label)))

    def arrays(self) -> list[pa.Array]:
        """The columns, in ``SCHEMA`` order, each one array."""
        return [column.combine_chunks() for column in self._table.columns]

    def stored_columns(self) -> pa.Table:
        """The columns themselves: what the plan id hashes (``engine.plan.compute_plan_id``)."""
        return self._table

    def by_phase(self) -> dict[int, ColumnActions]:
        """The actions of each phase, in order, each phase's a slice of these columns where the phases
        come in order (a canonical plan's do), else a filtered copy."""
        phase = self._table.column("phase").to_numpy()
        if not len(phase):
            return {}
        if bool(np.all(phase[1:] >= phase[:-1])):
            bounds = [0, *(np.flatnonzero(np.diff(phase)) + 1).tolist(), len(phase)]
            return {int(phase[start]): self[start:stop] for start, stop in zip(bounds, bounds[1:])}
        column = self._table.column("phase")
        return {p: ColumnActions(self._table.filter(pc.equal(column, p)), self._kinds)
                for p in dict.fromkeys(phase.tolist())}

    def without(self, ids: AbstractSet[int]) -> ColumnActions:
        """The actions whose id is not in ``ids``, in order (these columns themselves when none is)."""
        if not ids:
            return self
        own = self._table.column("action_id").to_numpy()
        keep = ~(ids.mask(own) if isinstance(ids, IdSet) else np.isin(own, np.fromiter(ids, np.int64, len(ids))))
        if bool(keep.all()):
            return self
        return ColumnActions(self._table.filter(pa.array(keep)), self._kinds)

    def of_verb(self, verb: Verb) -> list[Action]:
        """The actions whose verb is ``verb``, built (a plan has few of any verb but the deletes)."""
        t = self._table
        return self._build(t.filter(pc.equal(t.column("verb"), verb.value)))

    def fields(self, *names: str) -> Iterator[tuple]:
        """The values of the ``names`` fields of each action, in order, a batch at a time, as the actions
        hold them (a kind as its kind, a verb as its ``Verb``), without building the actions."""
        for batch in self._table.to_batches(max_chunksize=_BATCH):
            cols = [column_values(batch.column(name)) for name in names]
            for i, name in enumerate(names):
                if name == "kind":
                    cols[i] = [self._kinds.get(label, label) for label in cols[i]]
                elif name == "verb":
                    cols[i] = list(map(_VERBS.__getitem__, cols[i]))
            yield from zip(*cols)

    def take(self, positions: Sequence[int]) -> list[Action]:
        """The actions at ``positions``, built together (one at a time costs a slice of every column each)."""
        return self._build(self.rows_at(positions)) if len(positions) else []

    def rows(self, *names: str) -> list[tuple]:
        """The values of the ``names`` fields of each action, in order, as stored (a kind as its label, a verb
        as its text), without building the actions."""
        return list(zip(*(column_values(self._table.column(name)) for name in names)))

    def kinds_used(self) -> dict[str, object]:
        """The kinds these actions use, by label."""
        return {label: self._kinds.get(label, label) for label in pc.unique(self._table.column("kind")).to_pylist()}

    def sizes(self) -> ActionSizes:
        t = self._table
        size = t.column("size")
        return ActionSizes(size.fill_null(0).to_numpy(), size.is_valid().to_numpy(zero_copy_only=False),
                           pc.equal(t.column("verb"), Verb.DELETE_FILE.value).to_numpy(zero_copy_only=False))

    def check_canonical(self, phases: int) -> None:
        """Raise ``ValueError`` as ``CleanupPlan`` does unless the actions are numbered 0..n-1 in order and
        each lies in one of ``phases`` phases."""
        ids = self._table.column("action_id").to_numpy()
        if not np.array_equal(ids, np.arange(len(ids), dtype=ids.dtype)):
            raise ValueError("actions must be canonical (numbered 0..n-1 in order); use canonical_actions")
        phase = self._table.column("phase").to_numpy()
        outside = np.flatnonzero((phase < 1) | (phase > phases))
        if len(outside):
            i = int(outside[0])
            raise ValueError(f"action {i} is in phase {int(phase[i])}; the plan declares {phases} phases")

    def _deleting(self) -> pa.ChunkedArray:
        return _deleting(self._table)

    def deletes_anything(self) -> bool:
        return bool(pc.any(self._deleting()).as_py())

    def deleting_kinds(self) -> set[str]:
        """The kind labels of the actions whose verb deletes."""
        return set(pc.unique(self._table.column("kind").filter(self._deleting())).to_pylist())

    def unknown_size_deletes(self) -> int:
        """How many file deletes have no size."""
        files = pc.equal(self._table.column("verb"), Verb.DELETE_FILE.value)
        return int(pc.sum(pc.and_(files, pc.is_null(self._table.column("size")))).as_py() or 0)

    def summary(self, by_partition) -> dict:
        """``engine.plan.summarize`` of these actions, counted over the columns."""
        t = self._table
        kinds: dict[str, dict[str, int]] = {}
        for label in pc.unique(t.column("kind")).to_pylist():
            of = t.filter(pc.equal(t.column("kind"), label)).column("size")
            kinds[label] = {"count": len(of), "bytes": _total(of), "unknown_size": of.null_count}
        partitions: dict[str, dict[str, int]] = {}
        chosen = [label for label in kinds if label in by_partition]
        if chosen:
            rows = t.filter(pc.is_in(t.column("kind"), value_set=pa.array(chosen, pa.string())))
            part = pc.fill_null(rows.column("partition"), "")
            grouped = pa.table({"partition": part, "size": rows.column("size")}).group_by("partition").aggregate(
                [("size", "sum"), ("partition", "count", pc.CountOptions(mode="all"))])
            for p, total, count in zip(*(grouped.column(c).to_pylist()
                                         for c in ("partition", "size_sum", "partition_count"))):
                partitions[p] = {"count": count, "bytes": total or 0}
        deleting = self._deleting()
        return {
            "by_kind": dict(sorted(kinds.items())),
            "by_partition": dict(sorted(partitions.items())),
            "files": int(pc.sum(pc.equal(t.column("verb"), Verb.DELETE_FILE.value)).as_py() or 0),
            "bytes": _total(t.column("size").filter(deleting)),
        }


def _deleting(table: pa.Table) -> pa.ChunkedArray:
    """Which rows of action columns delete."""
    # built here, not when the module is imported: pyarrow imports pandas (where installed, half a second)
    # the first time it converts Python values, which the journal's commands never need to
    return pc.is_in(table.column("verb"), value_set=pa.array(_DELETING, pa.string()))


def _total(sizes: pa.ChunkedArray) -> int:
    return int(pc.sum(sizes).as_py() or 0)



def columns_of_fields(fields: list) -> ColumnActions | None:
    """The actions whose field values ``fields`` holds column by column (``ACTION_COLUMNS`` order, each kind a
    ``str``, each verb a ``Verb``), as columns; None when a value does not fit its column as the plan file
    stores it, or two kinds share a label (the caller builds the actions themselves)."""
    by_label = _kinds_by_label(fields[_FIELD["kind"]])
    if by_label is None:
        return None
    cols = dict(zip(SCHEMA.names, fields))
    cols["kind"] = list(map(str.__str__, cols["kind"]))
    cols["verb"] = [verb.value for verb in cols["verb"]]
    try:
        arrays = column_arrays(cols)
    except NotColumnar:
        return None
    return ColumnActions(pa.Table.from_arrays(arrays, schema=SCHEMA), by_label)


def _kinds_by_label(kinds: Sequence) -> dict[str, str] | None:
    """Each label of ``kinds`` and the kind it stands for; None when kinds of two types share a label (equal
    as strings, so a dict of kinds would merge them): the columns could not tell them apart."""
    by_label: dict[str, str] = {}
    for kind in {(type(k), str.__str__(k)): k for k in kinds}.values():
        if by_label.setdefault(str.__str__(kind), kind) is not kind:
            return None
    return by_label


class IdSet(AbstractSet[int]):
    """A set of action ids as one byte per action id up to the largest (a million ids: 1 MiB, not the 60 MiB
    of a ``set`` of ints). Grows as ids are added. Set operations with other sets give plain sets, except
    union, which keeps this form."""

    __slots__ = ("_bits", "_n")

    def __init__(self, ids=(), size: int = 0):
        self._bits = np.zeros(size, np.bool_)
        self._n = 0
        self.update(ids)

    @classmethod
    def _from_iterable(cls, it):
        return set(it)

    def _fit(self, top: int) -> None:
        if top >= len(self._bits):
            bits = np.zeros(max(top + 1, 2 * len(self._bits)), np.bool_)
            bits[:len(self._bits)] = self._bits
            self._bits = bits

    def update(self, ids) -> None:
        """Add ``ids``: an ``IdSet``, a NumPy array of ids or any iterable of them (each at least 0)."""
        if isinstance(ids, IdSet):
            other = ids._bits
            self._fit(len(other) - 1)
            self._bits[:len(other)] |= other
        else:
            array = ids if isinstance(ids, np.ndarray) else np.fromiter(ids, np.int64)
            if not len(array):
                return
            if int(array.min()) < 0:
                raise ValueError("an action id is never negative")
            self._fit(int(array.max()))
            self._bits[array] = True
        self._n = int(np.count_nonzero(self._bits))

    def add(self, i: int) -> None:
        self.update((i,))

    def __ior__(self, other):
        self.update(other)
        return self

    def __or__(self, other):
        union = IdSet(self)
        union.update(other)
        return union

    __ror__ = __or__

    def __contains__(self, i) -> bool:
        try:
            i = operator.index(i)
        except TypeError:
            return False
        return 0 <= i < len(self._bits) and bool(self._bits[i])

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[int]:
        return iter(self.array().tolist())

    def array(self) -> np.ndarray:
        """The ids, ascending."""
        return np.flatnonzero(self._bits)

    def mask(self, ids: np.ndarray) -> np.ndarray:
        """Whether each of ``ids`` (a NumPy array of ids at least 0) is in this set."""
        inside = ids < len(self._bits)
        out = np.zeros(len(ids), np.bool_)
        out[inside] = self._bits[ids[inside]]
        return out

    def __repr__(self) -> str:
        return f"IdSet({len(self)} ids)"


class ActionSizes(NamedTuple):
    """Per action id, as NumPy arrays: its planned size (0 when unknown), whether the size is known, and
    whether it deletes a file: what apply tallies for each result without an ``Action`` at hand."""

    size: np.ndarray
    known: np.ndarray
    file_delete: np.ndarray


def action_sizes(actions: Sequence[Action]) -> ActionSizes:
    """``ActionSizes`` of canonical ``actions`` (an action's id is its index)."""
    if isinstance(actions, ColumnActions):
        return actions.sizes()
    n = len(actions)
    return ActionSizes(np.fromiter((a.size or 0 for a in actions), np.int64, n),
                       np.fromiter((a.size is not None for a in actions), np.bool_, n),
                       np.fromiter((a.verb is Verb.DELETE_FILE for a in actions), np.bool_, n))


def fields_of(actions: Sequence[Action], *names: str) -> Iterator[tuple]:
    """The values of the ``names`` fields of each action, in order (``ColumnActions.fields``)."""
    if isinstance(actions, ColumnActions):
        return actions.fields(*names)
    get = attrgetter(*names)
    return (get(a) for a in actions) if len(names) > 1 else ((get(a),) for a in actions)


def taken(actions: Sequence[Action], positions: Sequence[int]) -> list[Action]:
    """The actions at ``positions`` of ``actions``, in that order."""
    if isinstance(actions, ColumnActions):
        return actions.take(positions)
    return list(map(actions.__getitem__, positions))


def by_phase(actions: Sequence[Action]) -> dict[int, Sequence[Action]]:
    """The actions of each phase, in plan order, in one pass (phases without actions are absent)."""
    if isinstance(actions, ColumnActions):
        return actions.by_phase()
    groups: dict[int, list[Action]] = {}
    for a in actions:
        groups.setdefault(a.phase, []).append(a)
    return groups


def without(actions: Sequence[Action], ids: AbstractSet[int]) -> Sequence[Action]:
    """The actions whose id is not in ``ids``, in order (``actions`` themselves when there are none)."""
    if not ids:
        return actions
    if isinstance(actions, ColumnActions):
        return actions.without(ids)
    return [a for a in actions if a.action_id not in ids]


def of_verb(actions: Sequence[Action], verb: Verb) -> list[Action]:
    """The actions whose verb is ``verb``, in order."""
    if isinstance(actions, ColumnActions):
        return actions.of_verb(verb)
    return [a for a in actions if a.verb is verb]


def total_size(actions: Sequence[Action], *, deleting: bool = False) -> int:
    """The planned bytes of ``actions`` (of those whose verb deletes, with ``deleting``), unknown sizes as 0."""
    if isinstance(actions, ColumnActions):
        t = actions.stored_columns()
        sizes = t.column("size").filter(_deleting(t)) if deleting else t.column("size")
        return _total(sizes)
    return sum(a.size or 0 for a in actions if not deleting or a.verb.deletes)


def action_ids(actions: Sequence[Action], *, verb: Verb | None = None, deleting: bool = False) -> IdSet:
    """The ids of ``actions`` (of those whose verb is ``verb``, or deletes, with ``deleting``)."""
    if isinstance(actions, ColumnActions):
        t = actions.stored_columns()
        keep = np.ones(len(t), np.bool_)
        if verb is not None:
            keep &= pc.equal(t.column("verb"), verb.value).to_numpy(zero_copy_only=False)
        if deleting:
            keep &= _deleting(t).to_numpy(zero_copy_only=False)
        return IdSet(t.column("action_id").to_numpy()[keep])
    return IdSet(a.action_id for a in actions if (verb is None or a.verb is verb) and (not deleting or a.verb.deletes))


def verb_phases(actions: Sequence[Action]) -> set[tuple[Verb, int]]:
    """The distinct (verb, phase) pairs of ``actions``."""
    if isinstance(actions, ColumnActions):
        pairs = actions.stored_columns().select(["verb", "phase"]).group_by(["verb", "phase"]).aggregate([])
        return {(_VERBS[v], p) for v, p in zip(pairs.column("verb").to_pylist(), pairs.column("phase").to_pylist())}
    return {(a.verb, a.phase) for a in actions}


def deletes_anything(actions: Sequence[Action]) -> bool:
    """Whether any of ``actions`` deletes."""
    if isinstance(actions, ColumnActions):
        return actions.deletes_anything()
    return any(a.verb.deletes for a in actions)


def values_of_kind(actions: Sequence[Action], name: str, kind: str) -> list:
    """``values(actions, name)`` of the actions whose kind equals ``kind`` (as a string), in order."""
    if isinstance(actions, ColumnActions):
        return actions.column_of_kind(name, str.__str__(kind))
    return [getattr(a, name) for a in actions if a.kind == kind]


def values(actions: Sequence[Action], name: str) -> list:
    """One field of every action, in order, read from its column where the actions are columns (a kind as
    its label, a verb as its text: equal to the kind and the verb)."""
    if isinstance(actions, ColumnActions):
        return actions.column(name)
    return [getattr(a, name) for a in actions]


class ActionColumnsBuilder:
    """Actions added one at a time and held as Arrow columns, ``batch`` at a time: a planner that finds a
    million files holds no ``Action`` (nor a Python string) per file. ``canonical()`` is
    ``canonical_actions(actions, as_columns=True)`` of the actions added, in the order added."""

    # the fields ``add`` takes, in ``SCHEMA`` order, and the type each is checked against
    _FIELDS = (("path", "string"), ("snapshot_id", "int64"), ("partition", "string"), ("bucket", "int32"),
               ("size", "int64"), ("source", "string"), ("depth", "int32"))

    def __init__(self, batch: int = _BATCH):
        self._batch = batch
        self._groups: dict[tuple[type, str], int] = {}  # (type, label) of each kind seen -> its code
        self._kinds: list = []
        self._pending: list[list] = [[] for _ in range(len(self._FIELDS) + 1)]  # codes, then _FIELDS
        self._chunks: list[list] = [[] for _ in self._pending]  # Arrow arrays, or lists that do not fit
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Action]:
        """The actions added, in order, each built."""
        self._flush()
        return iter(self._actions())

    def add(self, kind, path: str, *, snapshot_id=None, partition=None, bucket=None, size=None, source=None,
            depth: int = 0) -> None:
        """Add ``Action(kind, path, ...)``; raises where building that action raises."""
        code = self._groups.get((type(kind), kind))
        if code is None or not path:
            Action(kind, path, snapshot_id=snapshot_id, partition=partition, bucket=bucket, size=size,
                   source=source, depth=depth)  # the checks the action makes, once per kind
            code = self._groups.setdefault((type(kind), str.__str__(kind)), len(self._kinds))
            if code == len(self._kinds):
                self._kinds.append(kind)
        p = self._pending
        p[0].append(code)
        p[1].append(path)
        p[2].append(snapshot_id)
        p[3].append(partition)
        p[4].append(bucket)
        p[5].append(size)
        p[6].append(source)
        p[7].append(depth)
        self._n += 1
        if len(p[0]) >= self._batch:
            self._flush()

    def _flush(self) -> None:
        for i, ((_, typ), values) in enumerate(zip((("kind", "int32"), *self._FIELDS), self._pending)):
            try:
                chunk = typed_array(values, typ)
            except NotColumnar:
                chunk = values  # kept as values: ``canonical`` builds the actions themselves
            self._chunks[i].append(chunk)
        self._pending = [[] for _ in self._pending]

    def _actions(self) -> list[Action]:
        """The actions added, built (where a value does not fit a column, or two share a (kind, path))."""
        cols = [[v for chunk in chunks for v in (chunk.to_pylist() if isinstance(chunk, pa.Array) else chunk)]
                for chunks in self._chunks]
        cols[0] = list(map(self._kinds.__getitem__, cols[0]))
        return [Action(k, path, snapshot_id=sid, partition=part, bucket=b, size=size, source=src, depth=d)
                for k, path, sid, part, b, size, src, d in zip(*cols)]

    def canonical(self) -> Sequence[Action]:
        """``canonical_actions(actions, as_columns=True)`` of the actions added (once: the columns are let go)."""
        from lakesweep.engine.plan import _order_of_groups, canonical_actions, kind_spec

        self._flush()
        chunks, self._chunks = self._chunks, [[] for _ in self._pending]
        by_label = _kinds_by_label(self._kinds)
        if not self._n or by_label is None or not all(isinstance(c, pa.Array) for cs in chunks for c in cs):
            self._chunks = chunks
            return canonical_actions(self._actions(), as_columns=True)
        columns = []
        while chunks:  # one column copied at a time
            columns.append(pa.concat_arrays(chunks.pop(0)))
        code, *fields = columns
        del columns
        col = dict(zip((name for name, _ in self._FIELDS), fields))
        del fields
        specs = [kind_spec(kind) for kind in self._kinds]
        phases = pa.array([spec.phase for spec in specs], pa.int32())
        col["phase"] = phases.take(code)
        order = _order_of_groups(list(self._groups), lambda: code, col.__getitem__)
        if order is None:  # a (kind, path) added twice: the actions decide which one stays
            self._chunks = [[code], *([col[name]] for name, _ in self._FIELDS)]
            return canonical_actions(self._actions(), as_columns=True)
        del col["phase"]
        code = code.take(order)
        labels = pa.array([str.__str__(kind) for kind in self._kinds], pa.string())
        verbs = pa.array([spec.verb.value for spec in specs], pa.string())
        arrays = {"kind": labels.take(code), "action_id": pa.array(np.arange(self._n, dtype=np.int64)),
                  "verb": verbs.take(code), "phase": phases.take(code)}
        for name in list(col):  # each column dropped once taken
            arrays[name] = col.pop(name).take(order)
        return ColumnActions(pa.Table.from_arrays([arrays[name] for name in SCHEMA.names], schema=SCHEMA), by_label)
