"""BinaryRow decoding (``_PARTITION`` bytes) and partition paths rendered exactly as Paimon's Java does.

Sources: ``BinaryRow``/``BinarySection`` (layout), ``InternalRowPartitionComputer`` (value to string),
``PartitionPathUtils#escapePathName`` (escaping), ``DateTimeUtils`` (non-legacy casts).
What Java renders non-reproducibly (BINARY under legacy names, TIMESTAMP_LTZ cast with the JVM's
default zone) is refused with ``UnsupportedTable``.
"""

from __future__ import annotations

import datetime as _dt
import math
import struct
from dataclasses import dataclass
from typing import Any, Sequence

from lakesweep.engine.errors import UnsupportedTable
from lakesweep.engine.paimon.types import DataType

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"


class BinaryRowError(ValueError):
    """The bytes are not a serialized BinaryRow of the expected arity."""


@dataclass(frozen=True, slots=True)
class TimestampValue:
    millis: int
    nano_of_milli: int = 0


@dataclass(frozen=True, slots=True)
class DecimalValue:
    unscaled: int
    scale: int


@dataclass(frozen=True, slots=True)
class FloatValue:
    value: float
    single: bool  # FLOAT (32 bit) rather than DOUBLE


def _null_bits_size(arity: int) -> int:
    return ((arity + 63 + 8) // 64) * 8


def decode_binary_row(data: bytes, types: Sequence[DataType]) -> tuple[Any, ...]:
    """Decode a serialized BinaryRow (4-byte big-endian arity, then the row) into internal values.

    The arity must equal ``len(types)``. Values: bool, int (also DATE epoch days, TIME millis of day),
    str, bytes, ``FloatValue``, ``TimestampValue``, ``DecimalValue``, or ``None`` for NULL.
    """
    if len(data) < 4:
        raise BinaryRowError(f"{len(data)} bytes is too short for a serialized BinaryRow")
    arity = struct.unpack(">i", data[:4])[0]
    if arity != len(types):
        raise BinaryRowError(f"arity {arity} does not match the {len(types)} partition fields")
    row = data[4:]
    nbs = _null_bits_size(arity)
    if len(row) < nbs + 8 * arity:
        raise BinaryRowError(f"row of {len(row)} bytes is shorter than its fixed part ({nbs + 8 * arity})")
    out = []
    for i, t in enumerate(types):
        bit = i + 8
        if row[bit >> 3] & (1 << (bit & 7)):
            out.append(None)
            continue
        off = nbs + 8 * i
        slot = row[off:off + 8]
        out.append(_decode_field(row, slot, t))
    return tuple(out)


def _var_part(row: bytes, slot: bytes) -> bytes:
    v = struct.unpack("<Q", slot)[0]
    if v & (1 << 63):
        n = (v >> 56) & 0x7F
        if n > 7:
            raise BinaryRowError(f"inline length {n} exceeds 7")
        return bytes(slot[:n])
    off = v >> 32
    n = v & 0xFFFFFFFF
    if off + n > len(row):
        raise BinaryRowError(f"variable part [{off}, {off + n}) is outside the row of {len(row)} bytes")
    return bytes(row[off:off + n])


def _decode_field(row: bytes, slot: bytes, t: DataType):
    r = t.root
    if r == "BOOLEAN":
        return slot[0] != 0
    if r == "TINYINT":
        return struct.unpack("<b", slot[:1])[0]
    if r == "SMALLINT":
        return struct.unpack("<h", slot[:2])[0]
    if r in ("INT", "DATE", "TIME"):
        return struct.unpack("<i", slot[:4])[0]
    if r == "BIGINT":
        return struct.unpack("<q", slot)[0]
    if r == "FLOAT":
        return FloatValue(struct.unpack("<f", slot[:4])[0], True)
    if r == "DOUBLE":
        return FloatValue(struct.unpack("<d", slot)[0], False)
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        if (t.precision or 0) <= 3:
            return TimestampValue(struct.unpack("<q", slot)[0], 0)
        v = struct.unpack("<Q", slot)[0]
        off, nano = v >> 32, v & 0xFFFFFFFF
        if off + 8 > len(row):
            raise BinaryRowError("timestamp millis outside the row")
        return TimestampValue(struct.unpack("<q", row[off:off + 8])[0], nano)
    if r == "DECIMAL":
        if (t.precision or 10) <= 18:
            return DecimalValue(struct.unpack("<q", slot)[0], t.scale or 0)
        raw = _var_part(row, slot)
        return DecimalValue(int.from_bytes(raw, "big", signed=True) if raw else 0, t.scale or 0)
    if r in ("CHAR", "VARCHAR"):
        raw = _var_part(row, slot)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BinaryRowError(f"string field is not valid UTF-8: {e}") from e
    if r in ("BINARY", "VARBINARY"):
        return _var_part(row, slot)
    raise BinaryRowError(f"type {t.raw or r} cannot be a partition field")


# ----------------------------------------------------------------------------------------------
# Java toString / cast-to-string


def java_float_str(v: FloatValue) -> str:
    """``Float.toString`` / ``Double.toString`` (shortest round-trip digits, as in JDK 19 and later)."""
    x = v.value
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    digits, exp = _shortest_digits(x, v.single)  # x = 0.d1d2... * 10^exp
    sign = "-" if x < 0 else ""
    ax = abs(x)
    if 1e-3 <= ax < 1e7:
        point = exp
        if point <= 0:
            s = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            s = digits + "0" * (point - len(digits)) + ".0"
        else:
            s = digits[:point] + "." + digits[point:]
        return sign + s
    mant = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mant}E{exp - 1}"


def _shortest_digits(x: float, single: bool) -> tuple[str, int]:
    ax = abs(x)
    if single:
        target = struct.pack("<f", ax)
        for p in range(1, 10):
            s = f"{ax:.{p - 1}e}"
            if struct.pack("<f", float(s)) == target:
                break
    else:
        s = f"{ax:.17e}"
        for p in range(1, 18):
            cand = f"{ax:.{p - 1}e}"
            if float(cand) == ax:
                s = cand
                break
    mant, e = s.split("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    return digits, int(e) + 1


def _local_datetime(ts: TimestampValue) -> _dt.datetime:
    base = _dt.datetime(1970, 1, 1) + _dt.timedelta(milliseconds=ts.millis)
    return base.replace(microsecond=0), (ts.millis % 1000) * 1_000_000 + ts.nano_of_milli


def _java_local_datetime_str(ts: TimestampValue) -> str:
    """``LocalDateTime.toString()``: ``uuuu-MM-ddTHH:mm[:ss[.SSS|.SSSSSS|.SSSSSSSSS]]``."""
    try:
        d, nanos = _local_datetime(ts)
    except OverflowError as e:
        raise UnsupportedTable(f"timestamp {ts.millis} ms is outside the years 1-9999") from e
    s = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}"
    if d.second or nanos:
        s += f":{d.second:02d}"
        if nanos:
            if nanos % 1_000_000 == 0:
                s += f".{nanos // 1_000_000:03d}"
            elif nanos % 1000 == 0:
                s += f".{nanos // 1000:06d}"
            else:
                s += f".{nanos:09d}"
    return s


def _format_timestamp(ts: TimestampValue, precision: int) -> str:
    """``DateTimeUtils.formatTimestamp(ts, precision)`` (the non-legacy cast)."""
    try:
        d, nanos = _local_datetime(ts)
    except OverflowError as e:
        raise UnsupportedTable(f"timestamp {ts.millis} ms is outside the years 1-9999") from e
    fraction = f"{nanos:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    s = f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"
    return s + ("." + fraction if fraction else "")


def _format_date(days: int) -> str:
    try:
        d = _dt.date(1970, 1, 1) + _dt.timedelta(days=days)
    except OverflowError as e:
        raise UnsupportedTable(f"date {days} (epoch days) is outside the years 1-9999") from e
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def _format_time(millis: int, precision: int) -> str:
    """``DateTimeUtils.formatTimestampMillis(int, precision)``, including its early stop on zeros."""
    while millis < 0:
        millis += 86_400_000
    h, rest = divmod(millis, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    out = f"{h:02d}:{m:02d}:{s:02d}"
    if precision > 0:
        out += "."
        while precision > 0:
            out += chr(ord("0") + ms // 100)
            ms = (ms % 100) * 10
            if ms == 0:
                break
            precision -= 1
    return out


def _plain_decimal(v: DecimalValue) -> str:
    """``BigDecimal.toPlainString`` (exact; no decimal context, which would round past 28 digits)."""
    sign = "-" if v.unscaled < 0 else ""
    digits = str(abs(v.unscaled))
    if v.scale <= 0:
        return sign + digits + "0" * (-v.scale) if v.unscaled else "0"
    digits = digits.rjust(v.scale + 1, "0")
    return f"{sign}{digits[:-v.scale]}.{digits[-v.scale:]}"


def partition_value_str(value, t: DataType, *, legacy: bool, field: str) -> str | None:
    """The string Java puts in the path for one partition value (before default-name and escaping)."""
    if value is None:
        return None
    r = t.root
    if r in ("CHAR", "VARCHAR"):
        return value
    if r == "BOOLEAN":
        return "true" if value else "false"
    if r in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return str(value)
    if r == "DECIMAL":
        return _plain_decimal(value)
    if r in ("FLOAT", "DOUBLE"):
        return java_float_str(value)
    if legacy:
        if r in ("DATE", "TIME"):
            return str(value)  # the internal int: epoch days / millis of day
        if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            return _java_local_datetime_str(value)
        if r in ("BINARY", "VARBINARY"):
            raise UnsupportedTable(
                f"partition field '{field}' is {t.raw or r}: with partition.legacy-name=true Java renders "
                "binary values as an identity hash ('[B@...') that cannot be reproduced; lakesweep refuses "
                "such tables"
            )
    else:
        if r == "DATE":
            return _format_date(value)
        if r == "TIME":
            return _format_time(value, t.precision or 0)
        if r == "TIMESTAMP":
            return _format_timestamp(value, t.precision if t.precision is not None else 6)
        if r == "TIMESTAMP_LTZ":
            raise UnsupportedTable(
                f"partition field '{field}' is TIMESTAMP WITH LOCAL TIME ZONE: with "
                "partition.legacy-name=false Java renders it in the writer JVM's default time zone, "
                "which lakesweep cannot know; it refuses such tables"
            )
        if r in ("BINARY", "VARBINARY"):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UnsupportedTable(f"partition field '{field}' holds bytes that are not UTF-8") from e
    raise UnsupportedTable(f"partition field '{field}' has type {t.raw or r}, which lakesweep cannot render")


# Character.isWhitespace: Unicode space separators except the no-break ones, plus the ASCII controls.
_JAVA_WS_EXTRA = {"\t", "\n", "\u000b", "\f", "\r", "\u001c", "\u001d", "\u001e", "\u001f"}
_JAVA_WS_SPACES = {
    " ", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2008",
    "\u2009", "\u200a", "\u2028", "\u2029", "\u205f", "\u3000",
}


def _java_blank(s: str | None) -> bool:
    return s is None or all(c in _JAVA_WS_EXTRA or c in _JAVA_WS_SPACES for c in s)


_ESCAPE = set(chr(c) for c in range(0x00, 0x20)) | set('"#%\'*/:=?\\\x7f{}[]^')


def escape_path_name(s: str) -> str:
    """``PartitionPathUtils.escapePathName``: ASCII specials become ``%XX`` (upper-case hex)."""
    if not s:
        raise UnsupportedTable("a partition key or value is empty and cannot be used in a path")
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in s)


def partition_spec(
    values: Sequence[Any],
    keys: Sequence[str],
    types: Sequence[DataType],
    *,
    legacy: bool = True,
    default_name: str = DEFAULT_PARTITION_NAME,
) -> list[tuple[str, str]]:
    """The ordered ``(key, value)`` pairs Java builds for a partition (``generatePartValues``)."""
    spec = []
    for v, k, t in zip(values, keys, types, strict=True):
        s = partition_value_str(v, t, legacy=legacy, field=k)
        spec.append((k, default_name if _java_blank(s) else s))
    return spec


def partition_path(spec: Sequence[tuple[str, str]]) -> str:
    """``k1=v1/k2=v2/`` with escaping; ``""`` for an unpartitioned table."""
    return "".join(f"{escape_path_name(k)}={escape_path_name(v)}/" for k, v in spec)


def hierarchical_partition_paths(spec: Sequence[tuple[str, str]]) -> list[str]:
    """``k1=v1/``, ``k1=v1/k2=v2/``, ... (``PartitionPathUtils.generateHierarchicalPartitionPaths``)."""
    return [partition_path(spec[: i + 1]) for i in range(len(spec))]
