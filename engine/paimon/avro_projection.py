"""Reading chosen fields of Avro container files without building whole records.

``read_projected(data, fields)`` compiles the file's writer schema (once per distinct schema) into a reader
that decodes only the fields ``fields`` names and skips the bytes of all others; each record becomes a list of
the named fields' values, in the order of ``fields``, ``MISSING`` for a name the writer schema lacks.
Values are those fastavro gives, but timestamps (datetimes in fastavro) are epoch milliseconds. fastavro's
own schema resolution (a reader schema) matches schemas for every record, and decoded slower than whole
records.
"""

from __future__ import annotations

import io
from typing import Callable, Union

import fastavro

MISSING = object()  # the value of a wanted field that the file's writer schema does not have

# A wanted field: its name and how to read it: VALUE (the decoded value), TIMESTAMP (the decoded value, a
# timestamp logical type as epoch milliseconds), INT_CHECK (the decoded value, except that a plain int or
# long, which always converts with int(), is skipped and reads as 0), or a tuple of wanted fields of a
# nested record.
VALUE = "value"
TIMESTAMP = "timestamp"
INT_CHECK = "int-check"
Fields = tuple[tuple[str, Union[str, "Fields"]], ...]

# Epoch milliseconds for the timestamps fastavro turns into datetimes; outside datetime's range fastavro
# raises, and so does this reader.
_MS_RANGE = (-62135596800000, 253402300799999)
_TIMESTAMP_UNITS = {"timestamp-millis": 1, "local-timestamp-millis": 1,
                    "timestamp-micros": 1000, "local-timestamp-micros": 1000}

Read = Callable[[bytes, int], tuple]
Skip = Callable[[bytes, int], int]


def _long(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    n, shift = b & 0x7F, 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7


def _length(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:  # the common case, a length below 64, inline
        n, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        n, pos = _long(buf, pos)
    if n < 0 or pos + n > len(buf):
        raise ValueError(f"a length of {n} at byte {pos} runs outside the block of {len(buf)} bytes")
    return n, pos


def _skip_long(buf: bytes, pos: int) -> int:
    while buf[pos] >= 0x80:
        pos += 1
    return pos + 1


def _skip_bytes(buf: bytes, pos: int) -> int:
    n, pos = _length(buf, pos)
    return pos + n


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _length(buf, pos)
    return buf[pos:pos + n], pos + n


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    n, pos = _length(buf, pos)
    return buf[pos:pos + n].decode("utf-8"), pos + n


def _skip_null(buf: bytes, pos: int) -> int:
    return pos


def _read_null(buf: bytes, pos: int) -> tuple[None, int]:
    return None, pos


def _fixed(size: int, read: bool):
    def skip(buf, pos):
        if pos + size > len(buf):
            raise ValueError(f"a fixed of {size} bytes at byte {pos} runs outside the block")
        return pos + size
    return (lambda buf, pos: (buf[pos:pos + size], skip(buf, pos))) if read else skip


def _branch(buf: bytes, pos: int, n: int) -> tuple[int, int]:
    i, pos = _long(buf, pos)
    if not 0 <= i < n:
        raise ValueError(f"union branch {i} of {n}")
    return i, pos


def _count(buf: bytes, pos: int) -> tuple[int, int]:
    """The item count of an array or map block; a negative count is followed by the block's byte size."""
    b = buf[pos]
    if b < 0x80 and not b & 1:  # a count below 64, inline
        return b >> 1, pos + 1
    n, pos = _long(buf, pos)
    if n < 0:
        n = -n
        _, pos = _long(buf, pos)
    return n, pos


class _Compiler:
    """Readers and skippers for the types of one writer schema, named types resolved by their full name."""

    def __init__(self):
        self.named: dict[str, dict] = {}

    def _resolve(self, t):
        if isinstance(t, str):
            if t in _PRIMITIVES:
                return t
            if t not in self.named:
                raise ValueError(f"unknown Avro type {t!r}")
            return self.named[t]
        if isinstance(t, dict) and t.get("type") in ("record", "error", "enum", "fixed"):
            self.named.setdefault(t["name"], t)
        return t

    def skip(self, t) -> Skip:
        t = self._resolve(t)
        if isinstance(t, list):
            branches = [self.skip(b) for b in t]
            n = len(branches)
            if n == 2 and t[0] == "null":  # the nullable field, Paimon's usual union
                value = branches[1]

                def skip_nullable(buf, pos):
                    b = buf[pos]
                    if b == 0:
                        return pos + 1
                    if b == 2:
                        return value(buf, pos + 1)
                    i, pos = _branch(buf, pos, n)
                    return branches[i](buf, pos)
                return skip_nullable

            def skip_union(buf, pos):
                i, pos = _branch(buf, pos, n)
                return branches[i](buf, pos)
            return skip_union
        if isinstance(t, str):
            return _PRIMITIVE_SKIPS[t]
        kind = t["type"]
        if kind in ("record", "error"):
            fields = [self.skip(f["type"]) for f in t["fields"]]

            def skip_record(buf, pos):
                for f in fields:
                    pos = f(buf, pos)
                return pos
            return skip_record
        if kind in ("array", "map"):
            item = self.skip(t["items"] if kind == "array" else t["values"])
            key = _skip_bytes if kind == "map" else None

            def skip_items(buf, pos):
                while True:
                    n, pos = _count(buf, pos)
                    if n == 0:
                        return pos
                    for _ in range(n):
                        if key is not None:
                            pos = key(buf, pos)
                        pos = item(buf, pos)
            return skip_items
        if kind == "enum":
            return _skip_long
        if kind == "fixed":
            return _fixed(t["size"], read=False)
        return self.skip(kind)  # {"type": "long", "logicalType": ...} and the like

    def read(self, t, timestamp: bool = False) -> Read:
        t = self._resolve(t)
        if isinstance(t, list):
            branches = [self.read(b, timestamp) for b in t]
            n = len(branches)
            if n == 2 and t[0] == "null":  # the nullable field, Paimon's usual union
                value = branches[1]

                def read_nullable(buf, pos):
                    b = buf[pos]
                    if b == 0:
                        return None, pos + 1
                    if b == 2:
                        return value(buf, pos + 1)
                    i, pos = _branch(buf, pos, n)
                    return branches[i](buf, pos)
                return read_nullable

            def read_union(buf, pos):
                i, pos = _branch(buf, pos, n)
                return branches[i](buf, pos)
            return read_union
        if isinstance(t, str):
            if t not in _PRIMITIVE_READS:
                raise ValueError(f"reading Avro type {t!r} is not supported")
            return _PRIMITIVE_READS[t]
        kind = t["type"]
        logical = t.get("logicalType")
        if logical is not None:
            if not timestamp or logical not in _TIMESTAMP_UNITS or kind != "long":
                raise ValueError(f"reading Avro logical type {logical!r} is not supported")
            return _timestamp(_TIMESTAMP_UNITS[logical])
        if kind == "array":
            item = self.read(t["items"])

            def read_array(buf, pos):
                out = []
                while True:
                    n, pos = _count(buf, pos)
                    if n == 0:
                        return out, pos
                    for _ in range(n):
                        v, pos = item(buf, pos)
                        out.append(v)
            return read_array
        if kind == "fixed":
            return _fixed(t["size"], read=True)
        if kind in _PRIMITIVE_READS:
            return _PRIMITIVE_READS[kind]
        raise ValueError(f"reading Avro type {kind!r} is not supported")

    def record(self, schema, fields: Fields) -> Read:
        """A reader of the ``fields`` of a record: a list of their values, ``MISSING`` where absent.

        The reader is one function whose source is written for this schema: each field read or skipped in
        line, a nested record's fields too, where calling a reader per field costs more than the field's
        bytes take to decode. A union of more than null and one type, an array read, a fixed read and a
        timestamp call the readers above."""
        src = _Source()
        lines = ["def read_record(buf, pos):", "    end = len(buf)"]
        value = self._record_lines(src, lines, schema, fields, 1)
        lines.append(f"    return {value}, pos")
        namespace = dict(src.consts)
        exec(compile("\n".join(lines) + "\n", "<avro projection>", "exec"), namespace)
        return namespace["read_record"]

    def _record_lines(self, src: "_Source", lines: list[str], schema, fields: Fields, depth: int) -> str:
        """Lines reading the ``fields`` of a record of ``schema``; the expression of the list of their values."""
        schema = self._resolve(schema)
        if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
            raise ValueError(f"expected a record, not {schema!r}")
        index = {name: i for i, (name, _) in enumerate(fields)}
        how = dict(fields)
        values = [src.const(MISSING)] * len(fields)
        for f in schema["fields"]:
            name, ftype = f["name"], f["type"]
            if name not in how:
                self._skip_lines(src, lines, ftype, depth)
            elif how[name] == INT_CHECK and self._resolve(ftype) in ("int", "long"):
                values[index[name]] = "0"
                self._skip_lines(src, lines, ftype, depth)
            elif isinstance(how[name], tuple):
                var = src.var()
                nested = self._record_lines(src, lines, ftype, how[name], depth)
                lines.append("    " * depth + f"{var} = {nested}")
                values[index[name]] = var
            else:
                var = src.var()
                self._read_lines(src, lines, ftype, depth, var, timestamp=how[name] == TIMESTAMP)
                values[index[name]] = var
        return "[" + ", ".join(values) + "]"

    def _skip_lines(self, src: "_Source", lines: list[str], t, depth: int) -> None:
        """Lines that move ``pos`` past a value of ``t`` (none for null)."""
        t = self._resolve(t)
        ind = "    " * depth
        if isinstance(t, list):
            if len(t) == 2 and t[0] == "null":  # the nullable field, Paimon's usual union
                lines += [f"{ind}b = buf[pos]", f"{ind}if b == 0:", f"{ind}    pos += 1", f"{ind}elif b == 2:",
                          f"{ind}    pos += 1"]
                self._skip_lines(src, lines, t[1], depth + 1)  # a second null adds no line: pos moved
                lines += [f"{ind}else:", f"{ind}    pos = {src.const(self.skip(t))}(buf, pos)"]
            else:
                lines.append(f"{ind}pos = {src.const(self.skip(t))}(buf, pos)")
            return
        kind = t if isinstance(t, str) else t["type"]
        if kind == "null":
            return
        if kind in ("int", "long", "enum"):
            lines += [f"{ind}while buf[pos] >= 0x80:", f"{ind}    pos += 1", f"{ind}pos += 1"]
        elif kind in ("bytes", "string"):
            lines += [f"{ind}b = buf[pos]", f"{ind}if b < 0x80 and not b & 1:  # a length below 64, inline",
                      f"{ind}    pos += 1 + (b >> 1)", f"{ind}    if pos > end:", f"{ind}        _overrun(pos, end)",
                      f"{ind}else:", f"{ind}    n, pos = _length(buf, pos)", f"{ind}    pos += n"]
        elif kind in ("boolean", "float", "double", "fixed"):
            size = {"boolean": 1, "float": 4, "double": 8}.get(kind) or int(t["size"])
            lines += [f"{ind}pos += {size}", f"{ind}if pos > end:", f"{ind}    _overrun(pos, end)"]
        elif kind in ("record", "error"):
            for f in t["fields"]:
                self._skip_lines(src, lines, f["type"], depth)
        elif kind in ("array", "map"):
            lines += [f"{ind}while True:", f"{ind}    n, pos = _count(buf, pos)", f"{ind}    if n == 0:",
                      f"{ind}        break", f"{ind}    for _ in range(n):"]
            if kind == "map":
                self._skip_lines(src, lines, "string", depth + 2)
            before = len(lines)
            self._skip_lines(src, lines, t["items"] if kind == "array" else t["values"], depth + 2)
            if len(lines) == before:
                lines.append(f"{ind}        pass")
        elif isinstance(t, dict):
            self._skip_lines(src, lines, kind, depth)  # {"type": "long", "logicalType": ...} and the like
        else:
            raise ValueError(f"unknown Avro type {t!r}")

    def _read_lines(self, src: "_Source", lines: list[str], t, depth: int, var: str, timestamp: bool) -> None:
        """Lines that read a value of ``t`` into ``var``."""
        reader = self.read(t, timestamp)  # refuses what cannot be read, and reads what is not written in line
        t = self._resolve(t)
        ind = "    " * depth
        if isinstance(t, list) and len(t) == 2 and t[0] == "null":
            lines += [f"{ind}b = buf[pos]", f"{ind}if b == 0:", f"{ind}    {var} = None", f"{ind}    pos += 1",
                      f"{ind}elif b == 2:", f"{ind}    pos += 1"]
            self._read_lines(src, lines, t[1], depth + 1, var, timestamp)
            lines += [f"{ind}else:", f"{ind}    {var}, pos = {src.const(reader)}(buf, pos)"]
        elif t in ("int", "long"):
            lines += [f"{ind}b = buf[pos]", f"{ind}if b < 0x80:", f"{ind}    {var} = (b >> 1) ^ -(b & 1)",
                      f"{ind}    pos += 1", f"{ind}else:", f"{ind}    {var}, pos = _long(buf, pos)"]
        elif t in ("bytes", "string"):
            value = "buf[pos:pos + n].decode('utf-8')" if t == "string" else "buf[pos:pos + n]"
            lines += [f"{ind}b = buf[pos]", f"{ind}if b < 0x80 and not b & 1:  # a length below 64, inline",
                      f"{ind}    n = b >> 1", f"{ind}    pos += 1", f"{ind}    if pos + n > end:",
                      f"{ind}        _overrun(pos + n, end)", f"{ind}else:", f"{ind}    n, pos = _length(buf, pos)",
                      f"{ind}{var} = {value}", f"{ind}pos += n"]
        elif t == "null":
            lines.append(f"{ind}{var} = None")
        else:
            lines.append(f"{ind}{var}, pos = {src.const(reader)}(buf, pos)")


class _Source:
    """The names one generated reader uses: helpers, and constants (readers, ``MISSING``) by a name of their
    own, so that nothing taken from a schema is ever written into the source."""

    def __init__(self):
        self.consts: dict[str, object] = {"_long": _long, "_length": _length, "_count": _count,
                                          "_overrun": _overrun}
        self._names: dict[int, str] = {}
        self._vars = 0

    def const(self, value) -> str:
        name = self._names.get(id(value))
        if name is None:
            name = self._names[id(value)] = f"k{len(self._names)}"
            self.consts[name] = value
        return name

    def var(self) -> str:
        self._vars += 1
        return f"v{self._vars}"


def _overrun(pos: int, end: int):
    raise ValueError(f"a value ending at byte {pos} runs outside the block of {end} bytes")


def _timestamp(unit: int) -> Read:
    low, high = _MS_RANGE[0] * unit, _MS_RANGE[1] * unit + unit - 1

    def read_timestamp(buf, pos):
        v, pos = _long(buf, pos)
        if not low <= v <= high:
            raise OverflowError(f"timestamp {v} is out of range")
        return v // unit, pos
    return read_timestamp


_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PRIMITIVE_SKIPS: dict[str, Skip] = {
    "null": _skip_null, "boolean": _fixed(1, read=False), "int": _skip_long, "long": _skip_long,
    "float": _fixed(4, read=False), "double": _fixed(8, read=False), "bytes": _skip_bytes, "string": _skip_bytes,
}
_PRIMITIVE_READS: dict[str, Read] = {
    "null": _read_null, "int": _long, "long": _long, "bytes": _read_bytes, "string": _read_string,
}

_COMPILED: dict[tuple[str, Fields], Read] = {}
_COMPILED_MAX = 256


def read_projected(data: bytes, fields: Fields) -> list[list]:
    """The ``fields`` of every record of the Avro container file ``data``; raises on anything that does not
    decode (the caller names the file)."""
    reader = fastavro.block_reader(io.BytesIO(data))
    key = (reader.metadata["avro.schema"], fields)
    read = _COMPILED.get(key)
    if read is None:
        read = _Compiler().record(reader.writer_schema, fields)
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[key] = read
    out = []
    append = out.append
    for block in reader:
        buf = block.bytes_.getvalue()
        pos = 0
        for _ in range(block.num_records):
            value, pos = read(buf, pos)
            append(value)
        if pos > len(buf):
            raise ValueError(f"the records of a block run past its {len(buf)} bytes")
    return out
