"""BinaryRow decoding and partition paths, rendered as Paimon's Java renders them."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.errors import UnsupportedTable
from lakesweep.engine.paimon.partition import (BinaryRowError, FloatValue, decode_binary_row, escape_path_name,
                                               java_float_str, partition_path, partition_spec)
from lakesweep.engine.paimon.types import parse_type
from tests.support.binary_row import encode_binary_row


def T(s):
    return parse_type(s)


def path(values, roots, types, keys=None, **kw):
    keys = keys or [f"k{i}" for i in range(len(values))]
    decoded = decode_binary_row(encode_binary_row(values, roots), [T(t) for t in types])
    return partition_path(partition_spec(decoded, keys, [T(t) for t in types], **kw))


def test_empty_row_of_unpartitioned_table():
    assert decode_binary_row(b"\0\0\0\0" + b"\0" * 8, []) == ()


def test_arity_mismatch_is_an_error():
    with pytest.raises(BinaryRowError, match="arity 1 does not match the 2 partition fields"):
        decode_binary_row(encode_binary_row([1], ["INT"]), [T("INT"), T("INT")])


def test_truncated_row_is_an_error():
    data = encode_binary_row([1, 2], ["INT", "INT"])
    with pytest.raises(BinaryRowError, match="shorter than its fixed part"):
        decode_binary_row(data[:-3], [T("INT"), T("INT")])


@pytest.mark.parametrize(
    "value, expected",
    [("short", "k0=short/"), ("a longer string value", "k0=a longer string value/"), ("ü", "k0=ü/")],
)
def test_inline_and_variable_strings(value, expected):
    assert path([value], ["VARCHAR"], ["STRING"]) == expected


def test_legacy_names_render_internal_values():
    got = path(
        [7, 19723, 1234567890123, True, -3, 12],
        ["INT", "DATE", "BIGINT", "BOOLEAN", "SMALLINT", "TINYINT"],
        ["INT", "DATE", "BIGINT", "BOOLEAN", "SMALLINT", "TINYINT"],
    )
    assert got == "k0=7/k1=19723/k2=1234567890123/k3=true/k4=-3/k5=12/"


def test_non_legacy_date_is_iso():
    assert path([19723], ["DATE"], ["DATE"], legacy=False) == "k0=2024-01-01/"


def test_legacy_timestamp_is_local_date_time_to_string_with_escaped_colons():
    ms = 1704164645123  # 2024-01-02T03:04:05.123
    assert path([ms], ["TIMESTAMP3"], ["TIMESTAMP(3)"]) == "k0=2024-01-02T03%3A04%3A05.123/"
    assert path([1704164640000], ["TIMESTAMP3"], ["TIMESTAMP(3)"]) == "k0=2024-01-02T03%3A04/"
    assert path([(1704164645000, 500)], ["TIMESTAMP9"], ["TIMESTAMP(9)"]) == "k0=2024-01-02T03%3A04%3A05.000000500/"
    assert path([(1704164645001, 0)], ["TIMESTAMP9"], ["TIMESTAMP(6)"]) == "k0=2024-01-02T03%3A04%3A05.001/"


def test_non_legacy_timestamp_pads_fraction_to_precision():
    assert path([1704164645000], ["TIMESTAMP3"], ["TIMESTAMP(3)"], legacy=False) == "k0=2024-01-02 03%3A04%3A05.000/"
    assert path([1704164645120], ["TIMESTAMP3"], ["TIMESTAMP(3)"], legacy=False) == "k0=2024-01-02 03%3A04%3A05.120/"
    assert path([(1704164645000, 0)], ["TIMESTAMP9"], ["TIMESTAMP(6)"], legacy=False) == "k0=2024-01-02 03%3A04%3A05.000000/"


def test_time_renders_millis_or_clock():
    assert path([3723000], ["TIME"], ["TIME(3)"]) == "k0=3723000/"
    # DateTimeUtils.formatTimestampMillis stops at the first zero remainder.
    assert path([3723000], ["TIME"], ["TIME(3)"], legacy=False) == "k0=01%3A02%3A03.0/"
    assert path([3723450], ["TIME"], ["TIME(3)"], legacy=False) == "k0=01%3A02%3A03.45/"


def test_decimals_render_plain():
    assert path([1230], ["DECIMAL18"], ["DECIMAL(10, 2)"]) == "k0=12.30/"
    assert path([-5], ["DECIMAL18"], ["DECIMAL(10, 3)"]) == "k0=-0.005/"
    big = 123456789012345678901234567890
    assert path([big], ["DECIMAL38"], ["DECIMAL(38, 4)"]) == "k0=12345678901234567890123456.7890/"


@pytest.mark.parametrize(
    "value, single, expected",
    [
        (0.1, False, "0.1"),
        (100.0, False, "100.0"),
        (1e10, False, "1.0E10"),
        (1e7, False, "1.0E7"),
        (1234567.0, False, "1234567.0"),
        (0.001, False, "0.001"),
        (1e-4, False, "1.0E-4"),
        (123456789.0, False, "1.23456789E8"),
        (-2.5, False, "-2.5"),
        (1.1, True, "1.1"),
        (struct.unpack("<f", struct.pack("<f", 0.3))[0], True, "0.3"),
        (float("nan"), False, "NaN"),
        (-0.0, False, "-0.0"),
    ],
)
def test_java_float_to_string(value, single, expected):
    assert java_float_str(FloatValue(value, single)) == expected


def test_null_and_blank_values_use_the_default_name():
    assert path([None, "  ", ""], ["VARCHAR"] * 3, ["STRING"] * 3) == (
        "k0=__DEFAULT_PARTITION__/k1=__DEFAULT_PARTITION__/k2=__DEFAULT_PARTITION__/"
    )
    assert path([None], ["INT"], ["INT"], default_name="NULLP") == "k0=NULLP/"
    # A no-break space is not Java whitespace: it stays a value.
    assert path(["\u00a0"], ["VARCHAR"], ["STRING"]) == "k0=\u00a0/"


def test_escaping_is_ascii_only_and_upper_case():
    assert escape_path_name('a b/c:d=e%"#\'*?\\{}[]^\x7f\x01ü') == (
        "a b%2Fc%3Ad%3De%25%22%23%27%2A%3F%5C%7B%7D%5B%5D%5E%7F%01ü"
    )


def test_binary_partition_with_legacy_names_is_refused():
    with pytest.raises(UnsupportedTable, match="cannot be reproduced"):
        path([b"\x01\x02"], ["VARBINARY"], ["BYTES"])
    assert path([b"ab"], ["VARBINARY"], ["BYTES"], legacy=False) == "k0=ab/"


def test_local_time_zone_timestamp_cast_is_refused():
    with pytest.raises(UnsupportedTable, match="default time zone"):
        path([1704164645000], ["TIMESTAMP3"], ["TIMESTAMP(3) WITH LOCAL TIME ZONE"], legacy=False)
    assert path([1704164645000], ["TIMESTAMP3"], ["TIMESTAMP(3) WITH LOCAL TIME ZONE"]) == "k0=2024-01-02T03%3A04%3A05/"


@given(st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), min_size=0, max_size=70))
def test_int_rows_roundtrip_through_the_layout(values):
    data = encode_binary_row(values, ["INT"] * len(values))
    assert decode_binary_row(data, [T("INT")] * len(values)) == tuple(values)


@given(st.lists(st.one_of(st.none(), st.text(max_size=20)), min_size=1, max_size=5))
def test_string_rows_roundtrip_through_the_layout(values):
    data = encode_binary_row(values, ["VARCHAR"] * len(values))
    assert decode_binary_row(data, [T("STRING")] * len(values)) == tuple(values)
