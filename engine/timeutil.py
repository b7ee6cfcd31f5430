"""Durations and instants as lakesweep reads them from flags and shows them: Paimon's duration syntax, epoch
milliseconds or ISO-8601 times, within the range Python's datetime and a Java long share."""

from __future__ import annotations

import datetime as _dt
import re
import time

from lakesweep.engine.errors import PlanRejected

LONG_MAX = 2**63 - 1

# The times lakesweep can show and store: Python's datetime (years 1 to 9999, UTC), inside a Java long.
MIN_TIME_MS = -62_135_596_800_000
MAX_TIME_MS = 253_402_300_799_999

_UNITS = {
    "ns": 1e-6, "nano": 1e-6, "nanos": 1e-6, "nanosecond": 1e-6, "nanoseconds": 1e-6,
    "us": 1e-3, "µs": 1e-3, "micro": 1e-3, "micros": 1e-3, "microsecond": 1e-3, "microseconds": 1e-3,
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}

_DURATION = re.compile(r"^\s*(\d+)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """Paimon's ``TimeUtils.parseDuration``: ``1 h``, ``30 min``, ``0 s``, ``7 d``, ``500 ms``; no unit = ms."""
    m = _DURATION.match(str(text))
    if not m:
        raise PlanRejected(f"'{text}' is not a duration: use a number and a unit, e.g. '1 h', '30 min', '7 d', '500 ms'")
    value, unit = int(m.group(1)), m.group(2).lower()
    if unit and unit not in _UNITS:
        raise PlanRejected(f"'{text}': unknown time unit '{unit}' (use ms, s, min, h or d)")
    ms = value * _UNITS[unit] if unit else value
    if ms > LONG_MAX:
        raise PlanRejected(f"'{text}' is too long a duration (at most {LONG_MAX} ms, as in Paimon)")
    return int(ms)


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 date-time (a time without an offset is read as UTC), between
    the years 1 and 9999 (UTC)."""
    t = str(text).strip()
    if re.fullmatch(r"-?[0-9]+", t):
        ms = int(t)
    else:
        try:
            d = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
            if d.tzinfo is None:
                d = d.replace(tzinfo=_dt.timezone.utc)
            ms = (d - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)) // _dt.timedelta(milliseconds=1)
        except (ValueError, OverflowError) as e:
            raise PlanRejected(
                f"'{text}' is neither epoch milliseconds nor an ISO-8601 time (e.g. 2024-05-01T12:00:00Z)"
            ) from e
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        raise PlanRejected(f"'{text}' is outside the times lakesweep handles (the years 1 to 9999, UTC)")
    return ms


def wall_clock_ms() -> int:
    """The current time in epoch milliseconds (what apply-time checks compare a plan's times with)."""
    return int(time.time() * 1000)


def format_time_ms(ms: int) -> str:
    """``ms`` as a UTC time to the second, ``2026-11-25 22:35:01Z``: the one spelling of times in messages
    and text output (ISO 8601 with a space; ``parse_time_ms`` reads it back)."""
    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    except OverflowError:  # beyond what a datetime holds (an epoch-ms typo): say the number
        return f"{ms} ms after 1970-01-01 00:00:00Z"
    return t.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def iso_time_ms(ms: int) -> str:
    """``ms`` as UTC ISO-8601 with milliseconds, ``2026-11-25T23:59:01.123Z``: for machine-read logs and
    the engines' SQL timestamps, where ``format_time_ms``'s spelling is for people."""
    t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def system_zone() -> str:
    """The IANA name of this machine's time zone, as a JVM started here would default to: ``TZ`` when set
    to a zone name, else where ``/etc/localtime`` points into the zone database, else UTC."""
    import os
    from zoneinfo import ZoneInfo

    def known(name: str | None) -> str | None:
        if not name:
            return None
        try:
            ZoneInfo(name)
        except (ValueError, OSError):
            return None
        return name

    tz = known(os.environ.get("TZ", "").lstrip(":"))
    if tz is not None:
        return tz
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        target = ""
    marker = "/zoneinfo/"
    if marker in target:
        found = known(target.split(marker, 1)[1])
        if found is not None:
            return found
    return "UTC"
