"""Values as people read them in text output: durations, option values, short ids, and tables that fit
the terminal. JSON output keeps the machine values; nothing here is used for it."""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from lakesweep.engine.units import human_bytes

# Units of a humanized duration, largest first (Paimon's own duration syntax).
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1))

# Options whose value is a duration: Paimon's (a bare number is milliseconds there) and lakesweep's own.
DURATION_OPTIONS = frozenset({
    "snapshot.time-retained", "changelog.time-retained", "partition.expiration-time",
    "partition.expiration-check-interval", "consumer.expiration-time", "tag.default-time-retained",
    "tag.creation-period-duration", "snapshot.watermark-idleness-timeout", "older-than", "older_than",
})

SHORT_ID = 8  # the fewest characters of a plan id shown in a table


def duration(ms: int) -> str:
    """``ms`` as whole units, largest first: ``700 d``, ``1 d 12 h``, ``1 h 30 min``, ``500 ms``, ``0 s``."""
    if ms == 0:
        return "0 s"
    sign, rest = ("-", -ms) if ms < 0 else ("", ms)
    parts = []
    for unit, size in _UNITS:
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n} {unit}")
    return sign + " ".join(parts)


def elapsed(ms: int) -> str:
    """How long something took, to the precision a person reads: ``850 ms``, ``12.4 s``, ``3 min 05 s``,
    ``2 h 01 min``."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    s = ms // 1000
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _is_duration_key(key: str) -> bool:
    return key in DURATION_OPTIONS or key.endswith(("-ms", "_ms"))


# The largest values Java's int and long hold: what Paimon and Iceberg use for "no limit".
NO_LIMIT = frozenset({2**31 - 1, 2**63 - 1})


def option_value(key: str, value: Any) -> str:
    """An option's value for people: a duration in milliseconds (an int, a bare number or ``N ms``) as whole
    units with the number kept beside it when it was given as one (``432000000 (5 d)``); Java's largest int
    or long as ``unlimited``; a flag as ``true``/``false``, as the engines' options are written; an unset
    value as ``-``; others as they are."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and not isinstance(value, bool) and value in NO_LIMIT:
        return "unlimited"
    if isinstance(value, bool) or not _is_duration_key(key):
        return str(value)
    if isinstance(value, int):
        return duration(value)
    text = str(value).strip()
    m = re.fullmatch(r"(-?\d+)(\s*ms)?", text)
    if m is None:
        return text
    human = duration(int(m.group(1)))
    return human if m.group(2) else f"{text} ({human})"


def bytes_cell(known: int, unknown: int) -> str:
    """Bytes for a table cell: ``unknown`` when no size is known, ``≥ 1.2 MiB`` when some are not."""
    if unknown and not known:
        return "unknown"
    return ("≥ " if unknown else "") + human_bytes(known)


def short_ids(ids: Iterable[str], minimum: int = SHORT_ID) -> dict[str, str]:
    """Each id's shortest prefix of at least ``minimum`` characters that no other id in ``ids`` shares."""
    unique = sorted(set(ids))
    short: dict[str, str] = {}
    for i, full in enumerate(unique):
        n = minimum
        for other in (unique[i - 1] if i else None, unique[i + 1] if i + 1 < len(unique) else None):
            if other is not None:
                common = next((k for k, (a, b) in enumerate(zip(full, other)) if a != b), min(len(full), len(other)))
                n = max(n, common + 1)
        short[full] = full[:n]
    return short


def fitted(title: str | None, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]], width: int):
    """Rows as a table when every header and cell fits ``width`` columns whole, else as one block of
    ``header: value`` lines per row (the first column heads the block). ``columns``: (header, justify);
    cells are plain text."""
    needed = 1 + sum(3 + max([len(h), *(len(r[i]) for r in rows)]) for i, (h, _) in enumerate(columns))
    if needed <= width:
        t = Table(title=title)
        for header, justify in columns:
            t.add_column(header, justify=justify, no_wrap=True)
        for r in rows:
            t.add_row(*(escape(c) for c in r))
        return t
    label = max(len(h) for h, _ in columns[1:]) if len(columns) > 1 else 0
    lines: list[Text] = [] if title is None else [Text(title, style="italic")]
    for r in rows:
        lines.append(Text(f"{columns[0][0]}: {r[0]}", style="bold"))
        lines += [Text(f"  {h + ':':<{label + 1}} {c}") for (h, _), c in zip(columns[1:], r[1:])]
    return Group(*lines)
