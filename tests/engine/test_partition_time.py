"""A partition's time as Paimon's PartitionTimeExtractor reads it: Paimon's own test cases, Java's
DateTimeFormatter rules (lenient default, SMART custom patterns, adjacent value parsing), typed values, and
a differential against Paimon 0.9's extractor on generated values."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.partition import TimestampValue
from lakesweep.engine.paimon.partition_time import PartitionTimeExtractor, UnparseablePartition, java_value_string
from lakesweep.engine.paimon.types import DataType


def T(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


# -- PartitionTimeExtractorTest ---------------------------------------------------------------

@pytest.mark.parametrize("value", ["2023-01-01 20:08:08", "2023-1-1 20:08:08"])
def test_default_reads_a_date_time(value):
    assert PartitionTimeExtractor().extract([], [value]) == T("2023-01-01 20:08:08")


@pytest.mark.parametrize("value", ["2023-01-01", "2023-1-1"])
def test_default_reads_a_date_at_midnight(value):
    assert PartitionTimeExtractor().extract([], [value]) == T("2023-01-01 00:00:00")


def test_patterns_put_values_in_place_of_their_keys():
    e = PartitionTimeExtractor(pattern="$year-$month-$day 00:00:00")
    assert e.extract(["year", "month", "day"], ["2023", "01", "01"]) == T("2023-01-01 00:00")
    e = PartitionTimeExtractor(pattern="$year-$month-$day $hour:00:00")
    assert e.extract(["year", "month", "day", "hour"], ["2023", "01", "01", "01"]) == T("2023-01-01 01:00")
    e = PartitionTimeExtractor(pattern="$dt")
    assert e.extract(["other", "dt"], ["dummy", "2023-01-01"]) == T("2023-01-01 00:00")


def test_a_formatter_reads_compact_dates():
    assert PartitionTimeExtractor(formatter="yyyyMMdd").extract([], ["20230101"]) == T("2023-01-01 00:00")


def test_a_value_that_is_not_a_date_is_unparseable():
    with pytest.raises(UnparseablePartition, match="text 'unknown' could not be parsed"):
        PartitionTimeExtractor(pattern="$ds", formatter="yyyyMMdd").extract(["ds"], ["unknown"])


def test_the_longest_key_is_replaced_first():
    # Paimon 0.9 replaced $dt first, which corrupts $dt1 and $dt2 (the differential below shows it fails)
    e = PartitionTimeExtractor(pattern="$dt1-$dt-$dt2", formatter="MM-yyyy-dd")
    assert e.extract(["dt", "dt1", "dt2"], ["2023", "01", "05"]) == T("2023-01-05 00:00")
    e = PartitionTimeExtractor(pattern="$dt1$dt", formatter="MMyyyydd")
    assert e.extract(["dt", "dt1"], ["202305", "01"]) == T("2023-01-05 00:00")


# -- Java's resolution rules ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("2023-13-01", "2024-01-01 00:00"),  # LENIENT: months roll over
    ("2023-02-30", "2023-03-02 00:00"),
    ("2023-01-01 25:00:00", "2023-01-02 01:00"),
    ("2023-01-01 20:08:08.5", "2023-01-01 20:08:08.500"),
])
def test_the_default_formatter_is_lenient(value, expected):
    assert PartitionTimeExtractor().parse(value) == T(expected)


@pytest.mark.parametrize("value", ["2023-01-01 20:08", "2023/01/01", "19723", "", " 2023-01-01"])
def test_the_default_formatter_refuses_other_shapes(value):
    with pytest.raises(UnparseablePartition):
        PartitionTimeExtractor().parse(value)


@pytest.mark.parametrize("formatter, value, expected", [
    ("yyyyMMdd", "20230230", "2023-02-28 00:00"),  # SMART: clamped to the month's end
    ("yyyyMMdd", "20240230", "2024-02-29 00:00"),
    ("yyyyMMdd", "20230431", "2023-04-30 00:00"),
    ("yyyy-MM-dd HH", "2023-01-05 07", "2023-01-05 07:00"),  # an hour alone makes a time
    ("yyyy-MM-dd HH[:mm]", "2023-01-05 24:00", "2023-01-06 00:00"),  # SMART: 24:00 is the next midnight
    ("yyyyMMddHHmm", "202301050730", "2023-01-05 07:30"),
    ("yyyy-MM-dd HH:mm:ss.SSS", "2023-01-05 07:30:01.250", "2023-01-05 07:30:01.250"),
    ("yy-MM-dd", "23-01-05", "2023-01-05 00:00"),
    ("yyyyDDD", "2023032", "2023-02-01 00:00"),
    ("yyyy-MM-dd['T'HH:mm]", "2023-01-05T08:09", "2023-01-05 08:09"),
    ("yyyy-MM-dd['T'HH:mm]", "2023-01-05", "2023-01-05 00:00"),
    ("yyyy-MM-dd ss", "2023-01-05 07", "2023-01-05 00:00"),  # a second without a minute makes no time
])
def test_custom_formatters_are_smart(formatter, value, expected):
    assert PartitionTimeExtractor(formatter=formatter).parse(value) == T(expected)


@pytest.mark.parametrize("formatter, value", [
    ("yyyyMMdd", "20230132"), ("yyyyMMdd", "2023011"), ("yyyyMMdd", "202301011"), ("yyyyMMdd", "-20230101"),
    ("yyyy-MM-dd", "2023-1-05"), ("yyyy-MM-dd HH:mm", "2023-01-05 24:30"), ("yyyyDDD", "2023366"),
    ("yyyy-MM", "2023-01"),
])
def test_custom_formatters_refuse_what_java_refuses(formatter, value):
    with pytest.raises(UnparseablePartition):
        PartitionTimeExtractor(formatter=formatter).parse(value)


@pytest.mark.parametrize("formatter, message", [
    ("yyyy-MMM-dd", "'MMM' \\(a month as text\\) is not read by lakesweep"),
    ("EEE yyyy", "pattern letter 'E' is not one lakesweep reads"),
    ("yyyy-MM-dd hh a", "pattern letter 'h' is not one lakesweep reads"),
    ("yyyy-MM-ddd", "too many pattern letters: 'ddd'"),
    ("yyyy{", "'\\{' is reserved"), ("'yyyy", "a quote is not closed"), ("yyyy]", "an optional section is closed but never opened"),
])
def test_a_formatter_lakesweep_cannot_read_as_java_does_is_refused(formatter, message):
    with pytest.raises(PlanRejected, match=f"timestamp formatter '.*': {message}"):
        PartitionTimeExtractor(formatter=formatter)


def test_null_values_are_unparseable():
    with pytest.raises(UnparseablePartition, match="null"):
        PartitionTimeExtractor().extract(["dt"], [None])
    with pytest.raises(UnparseablePartition, match="null"):
        PartitionTimeExtractor(pattern="$dt $h:00:00").extract(["dt", "h"], ["2023-01-01", None])


def test_typed_dates_and_timestamps_are_read_as_the_text_of_javas_values():
    """A DATE is its epoch day (``19358``), which the default formatter does not read: values-time keeps it,
    as Paimon 0.9 and 1.4.2 do (test_current_paimon_kinds). A TIMESTAMP is ``LocalDateTime#toString``."""
    date, ts = DataType("DATE", raw="DATE"), DataType("TIMESTAMP", precision=3, raw="TIMESTAMP(3)")
    days = (dt.date(2025, 10, 10) - dt.date(1970, 1, 1)).days
    assert java_value_string(days, date) == "20371"
    for formatter in (None, "yyyyMMdd", "yyyy-MM-dd"):
        with pytest.raises(UnparseablePartition, match="text '20371' could not be parsed"):
            PartitionTimeExtractor(formatter=formatter).extract(["d"], [days], [date])
    with pytest.raises(UnparseablePartition, match="text '20371 06:00:00' could not be parsed"):
        PartitionTimeExtractor(pattern="$d 06:00:00").extract(["d"], [days], [date])

    def at(text: str, nano_of_milli: int = 0) -> TimestampValue:
        d = dt.datetime.fromisoformat(text) - dt.datetime(1970, 1, 1)
        return TimestampValue(d // dt.timedelta(milliseconds=1), nano_of_milli)

    assert java_value_string(at("2023-01-15 10:30:00"), ts) == "2023-01-15T10:30"
    assert java_value_string(at("2023-01-15 10:30:45"), ts) == "2023-01-15T10:30:45"
    assert java_value_string(at("2023-01-15 10:30:00.120"), ts) == "2023-01-15T10:30:00.120"
    assert java_value_string(at("2023-01-15 10:30:00.120", 500_000), ts) == "2023-01-15T10:30:00.120500"
    assert java_value_string(at("2023-01-15 00:00:00", 7), ts) == "2023-01-15T00:00:00.000000007"
    with pytest.raises(UnparseablePartition, match="text '2023-01-15T10:30:45' could not be parsed"):
        PartitionTimeExtractor().extract(["ts"], [at("2023-01-15 10:30:45")], [ts])
    quoted = PartitionTimeExtractor(formatter="yyyy-MM-dd'T'HH:mm[:ss]")
    assert quoted.extract(["ts"], [at("2023-01-15 10:30:45")], [ts]) == T("2023-01-15 10:30:45")


def test_an_int_partition_is_its_digits():
    i = DataType("INT", raw="INT")
    assert PartitionTimeExtractor(formatter="yyyyMMdd").extract(["dt"], [20230101], [i]) == T("2023-01-01 00:00")


# -- against Paimon 0.9's own extractor ------------------------------------------------------------------

FORMATTERS = [None, "yyyyMMdd", "yyyy-MM-dd", "yyyy-MM-dd HH:mm:ss", "yyyy/M/d", "yyyyMMddHH", "yy-MM-dd",
              "yyyy-MM-dd['T'HH:mm]", "uuuu-MM-dd", "yyyyDDD", "yyyy-MM-dd HH:mm:ss.SSS", "yyyy-MM-dd HH"]


def _num(draw, lo, hi, width_choices=(0, 1, 2)):
    v = draw(st.integers(lo, hi))
    width = draw(st.sampled_from(width_choices))
    return str(v).zfill(width)


@st.composite
def values(draw):
    y = _num(draw, 1000, 2999, (4,))
    m, d = _num(draw, 0, 14), _num(draw, 0, 33)
    sep = draw(st.sampled_from(["-", "/", ""]))
    text = f"{y}{sep}{m}{sep}{d}"
    tail = draw(st.sampled_from(["", " ", "T", " 12", " 7:05:09", " 23:59:59", " 24:00:00", " 25:61:61",
                                 " 12:30:00.5", " 12:30:00.123456789", "T08:09"]))
    if draw(st.booleans()):
        text += tail
    if draw(st.integers(0, 9)) == 0:
        text = draw(st.sampled_from(["abcd", "", "2023", "19723", "+2023-01-01", "2023-01-01x", "２０２３-01-01"]))
    if draw(st.integers(0, 9)) == 0:
        text = f"{y}{_num(draw, 1, 12, (2,))}{_num(draw, 1, 31, (2,))}{draw(st.sampled_from(['', '07', '7']))}"
    if draw(st.integers(0, 2)) == 0:  # the shapes the formatters expect, with days past the month's end
        y2, mo, da = draw(st.integers(1000, 2999)), draw(st.integers(1, 12)), draw(st.integers(1, 31))
        h, mi, se = draw(st.integers(0, 24)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
        ms = draw(st.integers(0, 999))
        text = draw(st.sampled_from([
            f"{y2}-{mo:02d}-{da:02d} {h:02d}:{mi:02d}:{se:02d}", f"{y2 % 100:02d}-{mo:02d}-{da:02d}",
            f"{y2}-{mo:02d}-{da:02d} {h:02d}", f"{y2}-{mo:02d}-{da:02d} {h:02d}:{mi:02d}:{se:02d}.{ms:03d}",
            f"{y2}{mo:02d}{da:02d}{h:02d}", f"{y2}-{mo:02d}-{da:02d}T{h:02d}:{mi:02d}", f"{y2}{da * 12:03d}"]))
    return text


def java_time(text: str) -> dt.datetime | None:
    """Java's LocalDateTime text; None for a year outside 1..9999, which lakesweep does not read (it keeps
    such a partition where Paimon would judge it by that year)."""
    year = int(text.split("-", 2)[1] if text.startswith("-") else text.split("-", 1)[0])
    if text.startswith("-") or text.startswith("+") or not 1 <= year <= 9999:
        return None
    return dt.datetime.fromisoformat(text)


@pytest.mark.java
@pytest.mark.parametrize("formatter", FORMATTERS)
@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(values(), min_size=150, max_size=150))
def test_agrees_with_paimons_extractor(paimon_java, formatter, batch):
    answers = paimon_java.partition_time(["dt"], [[v] for v in batch], formatter=formatter)
    ours = PartitionTimeExtractor(formatter=formatter)
    for text, java in zip(batch, answers):
        try:
            mine = ours.parse(text)
        except UnparseablePartition:
            mine = None
        expected = java_time(java["time"]) if "time" in java else None
        assert mine == expected, (formatter, text, java)


@pytest.mark.java
def test_paimon_0_9_replaces_keys_in_order_where_lakesweep_replaces_the_longest_first(paimon_java):
    [java] = paimon_java.partition_time(["dt", "dt1", "dt2"], [["2023", "01", "05"]], pattern="$dt1-$dt-$dt2",
                                        formatter="MM-yyyy-dd")
    assert java == {"error": "DateTimeParseException"}
    [java] = paimon_java.partition_time(["year", "month", "day"], [["2023", "01", "05"]],
                                        pattern="$year-$month-$day 00:00:00")
    assert java_time(java["time"]) == PartitionTimeExtractor(pattern="$year-$month-$day 00:00:00").extract(
        ["year", "month", "day"], ["2023", "01", "05"])
