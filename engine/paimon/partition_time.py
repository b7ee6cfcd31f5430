"""A partition's time from its values, as Paimon's ``PartitionTimeExtractor`` reads it.

The text is the first partition value, or the ``timestamp-pattern`` with each ``$key`` replaced by its value,
the longest key first. With no ``timestamp-formatter`` it is parsed with Paimon's own lenient formatter, with
one as Java's ``DateTimeFormatter.ofPattern(formatter, Locale.ROOT)`` (strict, SMART resolver; only numeric
patterns, any other letter refused). A value that does not parse (or is null) is ``UnparseablePartition``:
the partition is skipped, never expired. Typed values are read as the text of the Java object Paimon gives.
The rules in full: docs/design/paimon.md#partition-times.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.partition import TimestampValue, partition_value_str
from lakesweep.engine.paimon.types import DataType

_MAX_YEAR = 999_999_999


class UnparseablePartition(ValueError):
    """The partition's values do not make a time: Paimon skips such a partition (it never expires)."""


# -- the values a pattern sees ---------------------------------------------------------------------------


def java_value_string(value, data_type: DataType) -> str | None:
    """The text of one decoded partition value as the extractor substitutes it (None for null): Java's
    ``toString`` of the converted value, so a DATE is its epoch day and a TIMESTAMP ``LocalDateTime#toString``;
    other types as Paimon writes them in paths."""
    if value is None:
        return None
    if data_type.root == "DATE" and isinstance(value, int):
        return str(value)
    if data_type.root in ("TIMESTAMP", "TIMESTAMP_LTZ") and isinstance(value, TimestampValue):
        return _java_local_date_time(value)
    return partition_value_str(value, data_type, legacy=False, field="")


def _java_local_date_time(value: TimestampValue) -> str:
    """``LocalDateTime#toString``: seconds only when they or the fraction are not zero, the fraction in
    groups of three digits."""
    seconds, ms = divmod(value.millis, 1000)
    t = _dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=seconds)
    nanos = ms * 1_000_000 + value.nano_of_milli
    text = f"{t.date().isoformat()}T{t.hour:02d}:{t.minute:02d}"
    if t.second or nanos:
        text += f":{t.second:02d}"
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1000 == 0:
            text += f".{nanos // 1000:06d}"
        else:
            text += f".{nanos:09d}"
    return text


# -- a compiled DateTimeFormatter ------------------------------------------------------------------------


@dataclass
class _Number:
    field: str  # year, yoe, month, day, doy, hour, minute, second
    min_width: int
    max_width: int
    sign: str  # NORMAL, NOT_NEGATIVE, EXCEEDS_PAD
    subsequent: int = 0  # digits the fixed-width numbers right after it need (adjacent value parsing)
    reduced: bool = False  # 'yy': two digits, base year 2000

    @property
    def fixed(self) -> bool:
        return self.min_width == self.max_width and self.sign == "NOT_NEGATIVE"


@dataclass
class _Fraction:
    min_width: int
    max_width: int
    point: bool  # a decimal point comes first


@dataclass
class _Literal:
    text: str


@dataclass
class _Optional:
    items: list


_NUMBER_LETTERS = {"y": "yoe", "u": "year", "M": "month", "L": "month", "d": "day", "D": "doy", "H": "hour",
                   "m": "minute", "s": "second"}


def _compile(pattern: str) -> list:
    """``DateTimeFormatterBuilder.appendPattern`` for the numeric letters; ``ValueError`` for the rest."""
    root: list = []
    stack = [root]
    last_value: list = [None]  # the active variable-width number of the innermost section

    def add_number(n: _Number):
        # DateTimeFormatterBuilder#appendValue: a fixed-width number right after a number joins it (the
        # first number leaves it the digits it needs); any other number becomes the one others may join.
        items = stack[-1]
        base = last_value[0]
        items.append(n)
        if base is not None and base[0] is items and n.fixed:
            base[1].subsequent += n.max_width
        else:
            last_value[0] = (items, n)

    def add_other(item):
        stack[-1].append(item)
        last_value[0] = None

    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c.isascii() and c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            count = j - i
            if c in "yu":
                field = _NUMBER_LETTERS[c]
                if count == 2:
                    add_number(_Number(field, 2, 2, "NOT_NEGATIVE", reduced=True))
                elif count < 4:
                    add_number(_Number(field, count, 19, "NORMAL"))
                else:
                    add_number(_Number(field, count, 19, "EXCEEDS_PAD"))
            elif c in "ML":
                if count > 2:
                    raise ValueError(f"'{c * count}' (a month as text) is not read by lakesweep")
                add_number(_Number("month", 1, 19, "NORMAL") if count == 1 else _Number("month", 2, 2, "NOT_NEGATIVE"))
            elif c in "dHms":
                if count > 2:
                    raise ValueError(f"too many pattern letters: '{c * count}'")
                add_number(_Number(_NUMBER_LETTERS[c], 1, 19, "NORMAL") if count == 1
                           else _Number(_NUMBER_LETTERS[c], 2, 2, "NOT_NEGATIVE"))
            elif c == "D":
                if count > 3:
                    raise ValueError(f"too many pattern letters: '{c * count}'")
                add_number({1: _Number("doy", 1, 19, "NORMAL"), 2: _Number("doy", 2, 3, "NOT_NEGATIVE"),
                            3: _Number("doy", 3, 3, "NOT_NEGATIVE")}[count])
            elif c == "S":
                add_other(_Fraction(count, count, False))
            else:
                raise ValueError(f"pattern letter '{c}' is not one lakesweep reads (it reads y u M d D H m s S)")
            i = j
        elif c == "'":
            j = i + 1
            text = []
            while True:
                if j >= len(pattern):
                    raise ValueError("a quote is not closed")
                if pattern[j] == "'":
                    if j + 1 < len(pattern) and pattern[j + 1] == "'":
                        text.append("'")
                        j += 2
                        continue
                    break
                text.append(pattern[j])
                j += 1
            add_other(_Literal("".join(text) if j > i + 1 else "'"))
            i = j + 1
        elif c == "[":
            opt = _Optional([])
            add_other(opt)
            stack.append(opt.items)
            i += 1
        elif c == "]":
            if len(stack) == 1:
                raise ValueError("an optional section is closed but never opened")
            stack.pop()
            last_value[0] = None
            i += 1
        elif c in "{}#":
            raise ValueError(f"'{c}' is reserved in patterns")
        else:
            add_other(_Literal(c))
            i += 1
    return root


_DIGITS = re.compile(r"\d")


class _Parse:
    """One strict parse of a text: the fields found, or a failure."""

    def __init__(self, text: str):
        self.text = text
        self.fields: dict[str, int] = {}

    def run(self, items: list, pos: int) -> int:
        """The position after ``items``, or -1."""
        for item in items:
            pos = self.one(item, pos)
            if pos < 0:
                return -1
        return pos

    def one(self, item, pos: int) -> int:
        text = self.text
        if isinstance(item, _Literal):
            return pos + len(item.text) if text.startswith(item.text, pos) else -1
        if isinstance(item, _Optional):
            saved = dict(self.fields)
            end = self.run(item.items, pos)
            if end < 0:
                self.fields = saved
                return pos
            return end
        if isinstance(item, _Fraction):
            if item.point:
                if not text.startswith(".", pos):
                    return pos if item.min_width == 0 else -1
                pos += 1
            j = pos
            while j < len(text) and j - pos < item.max_width and text[j].isascii() and text[j].isdigit():
                j += 1
            if j - pos < item.min_width:
                return -1
            digits = text[pos:j]
            self.fields["nano"] = int(digits.ljust(9, "0")[:9]) if digits else 0
            return j
        return self.number(item, pos)

    def number(self, n: _Number, pos: int) -> int:
        text = self.text
        sign = ""
        if pos < len(text) and text[pos] in "+-" and n.sign != "NOT_NEGATIVE":
            sign = text[pos]
            if sign == "+" and n.sign == "NORMAL":
                return -1  # strict NORMAL: a plus sign is not accepted
            pos += 1
        max_width = n.max_width + n.subsequent
        j = pos
        while j < len(text) and j - pos < max_width and text[j].isascii() and text[j].isdigit():
            j += 1
        if j - pos < n.min_width or j == pos:
            return -1
        if n.subsequent:  # leave the adjacent fixed-width numbers their digits (Java parses twice)
            j = pos + max(n.min_width, (j - pos) - n.subsequent)
        width = j - pos
        if n.sign == "EXCEEDS_PAD":
            if sign == "+" and width <= n.min_width:
                return -1
            if sign == "" and width > n.min_width:
                return -1
        value = int(text[pos:j])
        if n.reduced:
            value = 2000 + value  # base 2000: 00..99 are 2000..2099
        if sign == "-":
            if value == 0:
                return -1  # Java: a strict parse refuses negative zero
            value = -value
        if n.field in self.fields and self.fields[n.field] != value:
            return -1
        self.fields[n.field] = value
        return j


def _resolve_date(fields: dict, lenient: bool) -> _dt.date | None:
    year = fields.get("year")
    yoe = fields.get("yoe")
    if yoe is not None:
        if not 1 <= yoe <= _MAX_YEAR + 1:
            raise ValueError(f"year-of-era {yoe} is out of range")
        if year is not None and year != yoe:
            raise ValueError("the year and the year-of-era disagree")
        year = yoe
    if year is None:
        return None
    if not -_MAX_YEAR <= year <= _MAX_YEAR:
        raise ValueError(f"year {year} is out of range")
    month, day, doy = fields.get("month"), fields.get("day"), fields.get("doy")
    if month is not None and day is not None:
        if lenient:
            first = _dt.date(year, 1, 1) if 1 <= year <= 9999 else None
            if first is None:
                raise ValueError(f"year {year} is outside what lakesweep computes with")
            months = year * 12 + (month - 1)
            y, m = divmod(months, 12)
            return _dt.date(y, m + 1, 1) + _dt.timedelta(days=day - 1)
        if not 1 <= month <= 12 or not 1 <= day <= 31:
            raise ValueError("month or day out of range")
        if month in (4, 6, 9, 11):
            day = min(day, 30)
        elif month == 2:
            day = min(day, 29 if _leap(year) else 28)
        return _dt.date(year, month, day)
    if doy is not None and month is None and day is None:
        if not 1 <= doy <= 366:
            raise ValueError("day-of-year out of range")
        if doy == 366 and not _leap(year):
            raise ValueError("day-of-year 366 in a year that is not leap")
        return _dt.date(year, 1, 1) + _dt.timedelta(days=doy - 1)
    return None


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _resolve_time(fields: dict, lenient: bool) -> tuple[_dt.time, int] | None:
    """(time, days carried over), or None when the fields make no time (``Parsed#resolveTimeLenient``:
    no hour, or a second without a minute, or a fraction without a second)."""
    hour = fields.get("hour")
    minute, second, nano = fields.get("minute"), fields.get("second"), fields.get("nano")
    if hour is None or (minute is None and (second is not None or nano is not None)) or \
            (minute is not None and second is None and nano is not None):
        return None
    minute, second, nano = minute or 0, second or 0, nano or 0
    if lenient:
        total = ((hour * 60 + minute) * 60 + second) * 1_000_000_000 + nano
        days, rest = divmod(total, 86_400_000_000_000)
        secs, ns = divmod(rest, 1_000_000_000)
        return _dt.time(secs // 3600, secs // 60 % 60, secs % 60, ns // 1000), days
    if not 0 <= minute <= 59 or not 0 <= nano <= 999_999_999:
        raise ValueError("time out of range")
    if hour == 24 and minute == 0 and second == 0 and nano == 0:
        return _dt.time(), 1  # SMART: 24:00 is the next day's midnight
    if not 0 <= hour <= 23 or not 0 <= second <= 59:
        raise ValueError("time out of range")
    return _dt.time(hour, minute, second, nano // 1000), 0


def _parse(items: list, text: str, lenient: bool) -> tuple[_dt.date | None, tuple | None]:
    p = _Parse(text)
    end = p.run(items, 0)
    if end != len(text):
        raise UnparseablePartition(f"text '{text}' could not be parsed")
    try:
        return _resolve_date(p.fields, lenient), _resolve_time(p.fields, lenient)
    except (ValueError, OverflowError) as e:
        raise UnparseablePartition(f"text '{text}' could not be parsed: {e}") from e


def _local_date_time(items: list, text: str, lenient: bool) -> _dt.datetime:
    """``LocalDateTime.parse`` with the formatter, else ``LocalDate.parse`` at midnight."""
    date, time = _parse(items, text, lenient)
    if date is None:
        raise UnparseablePartition(f"text '{text}' has no date")
    if time is None:
        return _dt.datetime.combine(date, _dt.time())
    t, days = time
    try:
        return _dt.datetime.combine(date + _dt.timedelta(days=days), t)
    except OverflowError as e:
        raise UnparseablePartition(f"text '{text}' is out of range") from e


# Paimon's default: yyyy-M-d, then optionally " H:m:s" and a fraction after a point; LENIENT.
_DEFAULT = [_Number("year", 1, 10, "NORMAL"), _Literal("-"), _Number("month", 1, 2, "NORMAL"), _Literal("-"),
            _Number("day", 1, 2, "NORMAL"),
            _Optional([_Literal(" "), _Number("hour", 1, 2, "NORMAL"), _Literal(":"),
                       _Number("minute", 1, 2, "NORMAL"), _Literal(":"), _Number("second", 1, 2, "NORMAL"),
                       _Optional([_Fraction(1, 9, True)])])]


class PartitionTimeExtractor:
    """Paimon's ``PartitionTimeExtractor(pattern, formatter)`` (see the module docstring)."""

    def __init__(self, *, pattern: str | None = None, formatter: str | None = None):
        self.pattern = pattern
        self.formatter = formatter
        if formatter is None:
            self._items, self._lenient = _DEFAULT, True
        else:
            try:
                self._items, self._lenient = _compile(formatter), False
            except ValueError as e:
                raise PlanRejected(f"timestamp formatter '{formatter}': {e}") from e

    def parse(self, text: str) -> _dt.datetime:
        """A time text as ``toLocalDateTime`` reads it."""
        return _local_date_time(self._items, text, self._lenient)

    def extract(self, keys: Sequence[str], values: Sequence, types: Sequence[DataType] | None = None) -> _dt.datetime:
        """The time of a partition: ``values`` decoded (with ``types``) or already text (``types`` None)."""
        texts = [java_value_string(v, t) for v, t in zip(values, types)] if types is not None else list(values)
        if self.pattern is None:
            if not texts or texts[0] is None:
                raise UnparseablePartition("the partition value is null")
            return self.parse(texts[0])
        if any(texts[i] is None for i, k in enumerate(keys) if f"${k}" in self.pattern):
            raise UnparseablePartition("a partition value the pattern uses is null")
        return self.parse(substitute(self.pattern, keys, texts))


def substitute(pattern: str, keys: Sequence[str], texts: Sequence[str | None]) -> str:
    """``$key`` replaced by its value in one pass, the longest key first where keys share a prefix."""
    order = sorted(range(len(keys)), key=lambda i: -len(keys[i]))
    alternatives = "|".join(re.escape(keys[i]) for i in order)
    if not alternatives:
        return pattern
    by_key = {keys[i]: texts[i] for i in order}
    return re.sub(r"\$(" + alternatives + ")", lambda m: by_key[m.group(1)] or "", pattern)
