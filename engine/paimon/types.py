"""Paimon logical types as they appear in schema JSON (``"INT NOT NULL"``, ``"DECIMAL(10, 2)"``, ...).

Only the atomic types matter to maintenance (they are what partitions are made of); complex types
(``ARRAY``, ``MAP``, ``ROW``, written as JSON objects) are kept as opaque descriptions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ALIASES = {
    "INTEGER": "INT",
    "BYTES": "VARBINARY",
    "STRING": "VARCHAR",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
}

_MAX_LEN = 2147483647

_ATOMIC = re.compile(
    r"^\s*(?P<name>[A-Z_]+(?:\s+PRECISION)?)\s*(?:\(\s*(?P<a>\d+)\s*(?:,\s*(?P<b>\d+)\s*)?\))?"
    r"(?P<ltz>\s+WITH\s+LOCAL\s+TIME\s+ZONE)?(?P<notnull>\s+NOT\s+NULL)?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class DataType:
    """``root`` is Paimon's ``DataTypeRoot`` name (``INTEGER`` is called ``INT`` here)."""

    root: str
    nullable: bool = True
    precision: int | None = None  # DECIMAL precision, TIME/TIMESTAMP precision
    scale: int | None = None  # DECIMAL scale
    length: int | None = None  # CHAR/VARCHAR/BINARY/VARBINARY length
    raw: str = ""

    @property
    def is_atomic(self) -> bool:
        return self.root not in ("ARRAY", "MAP", "MULTISET", "ROW", "VARIANT", "BLOB", "UNKNOWN")


def parse_type(spec) -> DataType:
    """Parse a field type from schema JSON. Unknown or complex types become opaque ``DataType`` values."""
    if isinstance(spec, dict):
        kind = str(spec.get("type", "UNKNOWN")).split()[0].upper()
        kind = kind.split("<")[0]
        return DataType(kind, raw=repr(spec))
    text = str(spec)
    m = _ATOMIC.match(text)
    if not m:
        head = text.strip().split("<")[0].split("(")[0].split()[0].upper() if text.strip() else "UNKNOWN"
        return DataType(head if head in ("ARRAY", "MAP", "MULTISET", "ROW") else "UNKNOWN", raw=text)
    name = re.sub(r"\s+", " ", m.group("name").upper())
    if name == "DOUBLE PRECISION":
        name = "DOUBLE"
    name = _ALIASES.get(name, name)
    nullable = m.group("notnull") is None
    a = int(m.group("a")) if m.group("a") is not None else None
    b = int(m.group("b")) if m.group("b") is not None else None
    if m.group("ltz"):
        if name != "TIMESTAMP":
            return DataType("UNKNOWN", raw=text)
        return DataType("TIMESTAMP_LTZ", nullable, precision=6 if a is None else a, raw=text)
    if name in ("TIMESTAMP_LTZ", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        return DataType("TIMESTAMP_LTZ", nullable, precision=6 if a is None else a, raw=text)
    if name == "VARCHAR":
        length = _MAX_LEN if (text.upper().strip().startswith("STRING") or a is None) else a
        return DataType("VARCHAR", nullable, length=length, raw=text)
    if name == "VARBINARY":
        length = _MAX_LEN if (text.upper().strip().startswith("BYTES") or a is None) else a
        return DataType("VARBINARY", nullable, length=length, raw=text)
    if name in ("CHAR", "BINARY"):
        return DataType(name, nullable, length=1 if a is None else a, raw=text)
    if name == "DECIMAL":
        return DataType("DECIMAL", nullable, precision=10 if a is None else a, scale=0 if b is None else b, raw=text)
    if name == "TIMESTAMP":
        return DataType("TIMESTAMP", nullable, precision=6 if a is None else a, raw=text)
    if name == "TIME":
        return DataType("TIME", nullable, precision=0 if a is None else a, raw=text)
    if name in ("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DATE"):
        return DataType(name, nullable, raw=text)
    return DataType("UNKNOWN", raw=text)
