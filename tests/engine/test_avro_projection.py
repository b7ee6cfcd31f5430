"""The field-by-field Avro reader against fastavro's own decoding, on random schemas and records.

The reader's source is written per schema (``avro_projection._Compiler.record``); these schemas mix every
type it writes in line with those it leaves to the readers it calls (unions of three, maps, enums, fixed,
timestamps), nested. A record cut short anywhere must fail, never read as a shorter value."""

from __future__ import annotations

import io
import random

import fastavro
import fastavro.utils
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.paimon.avro_projection import INT_CHECK, MISSING, TIMESTAMP, VALUE, _Compiler

_names = iter(range(10**9))


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


READABLE = st.sampled_from(["null", "int", "long", "bytes", "string"])
SKIPPED_ONLY = st.sampled_from(["boolean", "float", "double"])


def _fixed():
    return st.builds(lambda: {"type": "fixed", "name": _name("f"), "size": 3})


def _enum():
    return st.builds(lambda: {"type": "enum", "name": _name("e"), "symbols": ["A", "B", "C"]})


def _timestamp():
    return st.sampled_from([{"type": "long", "logicalType": "timestamp-millis"},
                            {"type": "long", "logicalType": "timestamp-micros"}])


def _types(depth: int):
    leaf = st.one_of(READABLE, SKIPPED_ONLY, _fixed(), _enum(), _timestamp())
    if depth == 0:
        return leaf
    inner = _types(depth - 1)
    return st.one_of(
        leaf,
        inner.filter(lambda t: t != "null" and not isinstance(t, list)).map(lambda t: ["null", t]),
        st.just(["null", "int", "string"]),
        inner.map(lambda t: {"type": "array", "items": t}),
        inner.map(lambda t: {"type": "map", "values": t}),
        _records(depth - 1),
    )


def _records(depth: int):
    return st.lists(_types(depth), min_size=1, max_size=5).map(
        lambda ts: {"type": "record", "name": _name("r"),
                    "fields": [{"name": f"x{i}", "type": t} for i, t in enumerate(ts)]})


def _readable(t, stamps: bool = True) -> bool:
    """Whether the reader reads (not only skips) a value of ``t``: what the planners ask for (a timestamp,
    not in an array)."""
    if isinstance(t, str):
        return t in ("null", "int", "long", "bytes", "string")
    if isinstance(t, list):
        return all(_readable(b, stamps) for b in t)
    if t.get("logicalType"):
        return stamps and t["logicalType"].startswith("timestamp")
    if t["type"] == "array":
        return _readable(t["items"], stamps=False)
    return t["type"] == "fixed"


def _wanted(schema, draw_bool) -> tuple:
    """Fields to read of ``schema``: some of its readable fields, nested records' too, and a name it lacks."""
    out = []
    for f in schema["fields"]:
        t = f["type"]
        if isinstance(t, dict) and t["type"] == "record":
            if draw_bool():
                out.append((f["name"], _wanted(t, draw_bool)))
        elif t in ("int", "long") and draw_bool():
            out.append((f["name"], INT_CHECK))
        elif _readable(t) and draw_bool():
            out.append((f["name"], TIMESTAMP if _stamp_unit(t) else VALUE))
    out.append(("absent", VALUE))
    return tuple(out)


def _stamp_unit(t) -> int | None:
    """The unit of a timestamp field (itself or the non-null branch of its union) in milliseconds."""
    for b in t if isinstance(t, list) else [t]:
        if isinstance(b, dict) and b.get("logicalType", "").startswith("timestamp"):
            return 1000 if b["logicalType"].endswith("micros") else 1
    return None


def _plain(t):
    """``t`` without logical types: what the expected values are decoded with."""
    if isinstance(t, list):
        return [_plain(b) for b in t]
    if isinstance(t, dict):
        if t.get("logicalType"):
            return t["type"]
        t = dict(t)
        if t["type"] == "record":
            t["fields"] = [{**f, "type": _plain(f["type"])} for f in t["fields"]]
        elif t["type"] == "array":
            t["items"] = _plain(t["items"])
        elif t["type"] == "map":
            t["values"] = _plain(t["values"])
    return t


def _expected(schema, wanted, record) -> list:
    types = {f["name"]: f["type"] for f in schema["fields"]}
    out = []
    for name, how in wanted:
        if name not in record:
            out.append(MISSING)
        elif isinstance(how, tuple):
            out.append(_expected(types[name], how, record[name]))
        elif how == INT_CHECK:
            out.append(0)
        elif how == TIMESTAMP and record[name] is not None:
            unit = _stamp_unit(types[name])
            if not -62135596800000 * unit <= record[name] <= 253402300799999 * unit + unit - 1:
                raise OverflowError
            out.append(record[name] // unit)
        else:
            out.append(record[name])
    return out


@given(_records(2), st.data(), st.integers(0, 2**32 - 1))
def test_projected_fields_are_fastavros_values_and_a_cut_record_fails(schema, data, seed):
    random.seed(seed)  # fastavro's record generator draws from the module's generator
    parsed = fastavro.parse_schema(schema)
    wanted = _wanted(schema, lambda: data.draw(st.booleans()))
    read = _Compiler().record(schema, wanted)
    for record in fastavro.utils.generate_many(parsed, 3):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        encoded = buf.getvalue()
        plain = fastavro.schemaless_reader(io.BytesIO(encoded), fastavro.parse_schema(_plain(schema)), None)
        try:
            expected = _expected(schema, wanted, plain)
        except OverflowError:
            with pytest.raises(OverflowError):
                read(encoded, 0)
            continue
        assert read(encoded, 0) == (expected, len(encoded))
        for cut in range(len(encoded)):
            with pytest.raises((IndexError, ValueError)):
                read(encoded[:cut], 0)


def test_a_union_branch_outside_the_union_fails():
    schema = {"type": "record", "name": "u", "fields": [{"name": "a", "type": ["null", "long"]},
                                                         {"name": "b", "type": ["null", "long"]}]}
    read = _Compiler().record(schema, (("b", VALUE),))
    assert read(bytes([2, 4, 2, 6]), 0) == ([3], 4)
    with pytest.raises(ValueError, match="union branch 2 of 2"):
        read(bytes([4, 4, 2, 6]), 0)
    with pytest.raises(ValueError, match="union branch -1 of 2"):
        read(bytes([0, 1]), 0)
