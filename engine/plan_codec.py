"""A plan's actions as Arrow columns, and the rows its id hashes, built column by column.

``action_arrays`` turns actions into the plan file's columns, refusing (``NotColumnar``) a value whose JSON
would differ from its column's (a bool or a float in an int column, a string UTF-8 cannot hold, an int
out of range); ``rows_json`` gives, for a batch of columns, exactly the bytes ``compute_plan_id`` hashes
for those actions: for each row a newline and ``action_json``'s compact JSON (ASCII, ``ensure_ascii``).
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesweep.engine.plan import ACTION_COLUMNS, Action, action_columns

ARROW_TYPES = {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "int8": pa.int8()}
_ALLOWED = {"string": {str, type(None)}, "int64": {int, type(None)}, "int32": {int, type(None)},
            "int8": {int, type(None)}}
# What json's ASCII encoder writes unchanged between quotes: printable ASCII but the quote and the backslash.
_PLAIN = r"^[ !#-\[\]-~]*$"
_string = json.encoder.encode_basestring_ascii
_FEW = {i for i, (name, _, _) in enumerate(ACTION_COLUMNS) if name in ("kind", "verb")}


class NotColumnar(ValueError):
    """A value the columnar row encoder cannot write as ``action_json`` would: encode those rows one by one."""


def action_arrays(actions: Sequence[Action]) -> list[pa.Array]:
    """The actions' columns, in ``ACTION_COLUMNS`` order, typed as the plan file stores them."""
    return column_arrays(action_columns(actions))


def column_arrays(cols: Mapping[str, Sequence]) -> list[pa.Array]:
    """Action values column by column, as stored (``action_columns``: a kind as its label, a verb as its
    text), as the plan file's arrays in ``ACTION_COLUMNS`` order; ``NotColumnar`` where one would differ."""
    return [typed_array(cols[name], typ, name) for name, typ, _ in ACTION_COLUMNS]


def typed_array(values: Sequence, typ: str, name: str = "") -> pa.Array:
    """``values`` as one action column of type ``typ`` (an ``ARROW_TYPES`` key) as the plan file stores
    it; ``NotColumnar`` where a value is of another Python type or does not fit."""
    if not set(map(type, values)) <= _ALLOWED[typ]:
        raise NotColumnar(f"column {name} holds a value of another type than {typ}")
    try:
        return pa.array(values, ARROW_TYPES[typ])
    except (pa.ArrowException, ValueError, OverflowError) as e:
        raise NotColumnar(f"column {name}: {e}") from e


def _json_text(array: pa.Array, *, few: bool = False) -> pa.Array:
    """Each value's compact JSON, ``null`` for a null; ``few``: a column of a few distinct strings (a
    kind, a verb), encoded once each."""
    if few:
        encoded = array.dictionary_encode()
        return _json_text(encoded.dictionary).take(encoded.indices).fill_null("null")
    if pa.types.is_integer(array.type):
        return pc.cast(array, pa.string()).fill_null("null")
    if array.null_count == len(array) or pc.all(pc.match_substring_regex(array, _PLAIN)).as_py() is not False:
        return pc.binary_join_element_wise('"', array, '"', "").fill_null("null")
    return pa.array(["null" if v is None else _string(v) for v in array.to_pylist()], pa.string())


def _data(array: pa.StringArray) -> memoryview:
    """The concatenated bytes of a string array without nulls (its values' buffer, between its offsets)."""
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
    data = array.buffers()[2]
    if data is None:
        return memoryview(b"")
    return memoryview(data)[offsets[array.offset]:offsets[array.offset + len(array)]]


def rows_json(arrays: Sequence[pa.Array]) -> memoryview:
    """For each row of the columns, a newline and its row as compact JSON: the bytes the plan id hashes."""
    if not len(arrays[0]):
        return memoryview(b"")
    body = pc.binary_join_element_wise(*(_json_text(a, few=i in _FEW) for i, a in enumerate(arrays)), ",")
    return _data(pc.binary_join_element_wise("\n[", body, "]", ""))
