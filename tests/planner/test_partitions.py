"""The partition-expiry planner (``NormalPartitionExpire``) on tables with exact creation times:
which partitions expire, in which order and how many, and what the plan lists for each."""

from __future__ import annotations

import datetime as dt

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import PartitionKind
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan_io import plan_to_bytes
from lakesweep.planner.paimon.options import resolve_partition_options
from lakesweep.planner.paimon.partitions import plan_partitions
from tests.support.table_builder import ADD, DELETE, E, TableBuilder

DAY = 86_400_000
NOW = dt.datetime(2024, 1, 10, 12, 0)  # the plan's now, in UTC


def ms(t: dt.datetime) -> int:
    return int((t - dt.datetime(1970, 1, 1)) / dt.timedelta(milliseconds=1))


def table(tmp_path, *, keys=("dt",), types=("STRING",), options=None) -> TableBuilder:
    return TableBuilder(str(tmp_path / "t"), partition_keys=keys, partition_types=types, options=options or {})


def plan(b: TableBuilder, *, now=NOW, **flags):
    t = open_table(b.root)
    flags.setdefault("strategy", "update-time")
    flags.setdefault("system_zone", "UTC")
    return plan_partitions(t, now_ms=ms(now), options=resolve_partition_options(t.options, **flags))


def created(days_ago: float, now=NOW) -> int:
    return ms(now - dt.timedelta(days=days_ago))


def test_update_time_expires_partitions_whose_newest_file_is_older_than_the_cutoff(tmp_path):
    b = table(tmp_path)
    b.commit([E(ADD, "a1", ("2024-01-01",), creation_ms=created(5), size=10, rows=3),
              E(ADD, "a2", ("2024-01-01",), bucket=1, creation_ms=created(4), size=20, rows=4),
              E(ADD, "b1", ("2024-01-02",), creation_ms=created(2))])
    p = plan(b, expiration_time="3 d")
    assert [(a.kind, a.path, a.partition, a.bucket, a.size) for a in p.actions] == [
        (PartitionKind.DROP_DATA_FILE, "dt=2024-01-01/bucket-0/a1", "dt=2024-01-01", 0, 10),
        (PartitionKind.DROP_DATA_FILE, "dt=2024-01-01/bucket-1/a2", "dt=2024-01-01", 1, 20)]
    [part] = p.scope.partitions
    assert (part["partition"], part["spec"], part["files"], part["bytes"]) == (
        "dt=2024-01-01", {"dt": "2024-01-01"}, 2, 30)
    assert part["time"] == "2024-01-06 12:00:00"
    assert part["reason"] == ("its newest file was written 2024-01-06 12:00:00, before the cut-off "
                              "2024-01-07 12:00:00")
    assert p.scope.snapshot == 1 and all(a.snapshot_id == 1 for a in p.actions)


def test_a_delete_entry_newer_than_the_cutoff_keeps_the_partition(tmp_path):
    # Paimon's PartitionEntry takes the newest creation time of ADD *and* DELETE entries.
    b = table(tmp_path)
    b.commit([E(ADD, "a1", ("x",), creation_ms=created(9)), E(ADD, "a2", ("x",), creation_ms=created(8)),
              E(ADD, "b1", ("y",), creation_ms=created(9))])
    b.commit([E(DELETE, "a2", ("x",), creation_ms=created(1))])
    p = plan(b, expiration_time="3 d")
    assert [x["partition"] for x in p.scope.partitions] == ["dt=y"]


def test_a_partition_without_live_files_is_not_considered(tmp_path):
    b = table(tmp_path)
    b.commit([E(ADD, "a1", ("x",), creation_ms=created(9)), E(ADD, "b1", ("y",), creation_ms=created(9))])
    b.commit([E(DELETE, "a1", ("x",), creation_ms=created(9))])
    p = plan(b, expiration_time="1 d")
    assert [x["partition"] for x in p.scope.partitions] == ["dt=y"]
    assert p.stats["partitions_considered"] == 1


def test_max_expires_takes_the_first_partitions_by_their_values_joined_with_commas(tmp_path):
    b = table(tmp_path, keys=("dt", "region"), types=("STRING", "STRING"))
    b.commit([E(ADD, f"f{i}", parts, creation_ms=created(9)) for i, parts in enumerate(
        [("20240103", "eu"), ("20240101", "us"), ("20240101", "eu"), ("20240102", "ap")])])
    p = plan(b, expiration_time="1 d", max_expires=3)
    assert [x["partition"] for x in p.scope.partitions] == [
        "dt=20240101/region=eu", "dt=20240101/region=us", "dt=20240102/region=ap"]
    assert p.stats["partitions_left_by_max"] == 1
    assert p.stats["warnings"] == ["1 more expired partition(s) are left for a later plan (--max-expires 3)"]


def test_the_cutoff_is_a_local_time_in_the_plans_zone(tmp_path):
    # Writers store _CREATION_TIME as their local date-time; Paimon compares it with LocalDateTime.now().
    b = table(tmp_path)
    b.commit([E(ADD, "a1", ("x",), creation_ms=ms(NOW - dt.timedelta(hours=2)))])
    assert not plan(b, expiration_time="3 h").actions  # UTC: 2 h old, kept
    shanghai = plan(b, expiration_time="3 h", time_zone="Asia/Shanghai")  # local now is 20:00: 10 h old
    assert [a.path for a in shanghai.actions] == ["dt=x/bucket-0/a1"]
    assert shanghai.scope.cutoff == "2024-01-10 17:00:00" and shanghai.scope.time_zone == "Asia/Shanghai"
    assert shanghai.options["time-zone"].source == "flag"


def test_a_partition_without_a_creation_time_is_never_expired_by_update_time(tmp_path):
    b = table(tmp_path)
    b.commit([E(ADD, "a1", ("x",))])
    p = plan(b, expiration_time="1 d")
    assert not p.actions
    assert p.stats["warnings"] == ["partition dt=x has no file creation time: it is never expired by update-time"]


def test_an_unpartitioned_table_has_nothing_to_expire(tmp_path):
    b = table(tmp_path, keys=(), types=())
    b.commit([E(ADD, "a1", (), creation_ms=created(9))])
    p = plan(b, expiration_time="1 d")
    assert not p.actions and p.scope.partitions == []
    assert p.stats["warnings"] == ["the table has no partition keys: there is nothing to expire"]


def test_the_plan_is_the_same_bytes_every_time(tmp_path):
    b = table(tmp_path)
    b.commit([E(ADD, f"f{i}", (f"p{i % 3}",), bucket=i % 2, creation_ms=created(9)) for i in range(12)])
    assert plan_to_bytes(plan(b, expiration_time="1 d")) == plan_to_bytes(plan(b, expiration_time="1 d"))


def test_table_options_are_the_defaults_and_flags_override_them(tmp_path):
    b = table(tmp_path, options={"partition.expiration-time": "5 d", "partition.expiration-strategy": "update-time",
                                 "partition.expiration-max-num": "7"})
    b.commit([E(ADD, "a1", ("x",), creation_ms=created(4))])
    t = open_table(b.root)
    opts = resolve_partition_options(t.options, system_zone="UTC")
    assert (opts.expiration_ms, opts.strategy, opts.max_expires) == (5 * DAY, "update-time", 7)
    assert opts.sources["partition.expiration-time"].source == "table"
    assert not plan_partitions(t, now_ms=ms(NOW), options=opts).actions
    assert plan(b, expiration_time="3 d").actions


@pytest.mark.parametrize("flags, message", [
    ({}, "no expiration time: pass --expiration-time"),
    ({"expiration_time": "0 s"}, "the expiration time must be positive"),
    ({"expiration_time": "1 d", "strategy": "newest"}, "expiration strategy 'newest' is unknown"),
    ({"expiration_time": "1 d", "max_expires": 0}, "--max-expires is 0: it must be at least 1"),
    ({"expiration_time": "1 d", "time_zone": "Mars/Olympus"}, "time zone 'Mars/Olympus' is unknown"),
    ({"expiration_time": "1 d", "overrides": {"snapshot.time-retained": "1 h"}},
     "--option snapshot.time-retained is not a partition-expiry option"),
])
def test_bad_options_are_refused_before_the_table_is_read(flags, message):
    with pytest.raises(PlanRejected, match=message):
        resolve_partition_options({}, system_zone="UTC", **{"strategy": "update-time", **flags})


# -- values-time: Paimon's PartitionExpireTest --------------------------------------------------

def at_day(n: int) -> dt.datetime:
    """PartitionExpireTest's date(n): 2023-01-n 00:00."""
    return dt.datetime(2023, 1, n)


def expired(b: TableBuilder, n: int, **flags) -> list[str]:
    flags = {"strategy": "values-time", "expiration_time": "2 d", "timestamp_formatter": "yyyyMMdd", **flags}
    return [p["partition"] for p in plan(b, now=at_day(n), **flags).scope.partitions]


def test_values_time_follows_paimons_date_sequence(tmp_path):
    b = table(tmp_path, keys=("f0",))
    b.commit([E(ADD, f"f{d}", (d,)) for d in ("20230101", "20230103", "20230105")])
    assert expired(b, 3) == []
    assert expired(b, 5) == ["f0=20230101"]
    assert expired(b, 8) == ["f0=20230101", "f0=20230103", "f0=20230105"]


def test_a_value_that_is_not_a_date_is_never_expired_and_warned_about(tmp_path):
    b = table(tmp_path, keys=("f0",))
    b.commit([E(ADD, f"f{d}", (d,)) for d in ("20230101", "abcd", "20230103", "20230105")])
    p = plan(b, now=at_day(8), strategy="values-time", expiration_time="2 d", timestamp_formatter="yyyyMMdd")
    assert [x["partition"] for x in p.scope.partitions] == ["f0=20230101", "f0=20230103", "f0=20230105"]
    assert p.stats["warnings"] == ["partition f0=abcd is skipped, never expired: its value cannot be read as a "
                                   "time (text 'abcd' could not be parsed)"]


def test_many_unreadable_values_are_one_warning_with_examples(tmp_path):
    b = table(tmp_path, keys=("f0",))
    b.commit([E(ADD, f"f{d}", (d,)) for d in ("20230101", "a", "b", "c", "d", "e")])
    p = plan(b, now=at_day(8), strategy="values-time", expiration_time="2 d", timestamp_formatter="yyyyMMdd")
    assert [x["partition"] for x in p.scope.partitions] == ["f0=20230101"]
    assert p.stats["warnings"] == [
        "5 partitions are skipped, never expired: their values cannot be read as a time: f0=a (text 'a' could not "
        "be parsed), f0=b (text 'b' could not be parsed), f0=c (text 'c' could not be parsed) and 2 more"]


def test_a_formatter_that_reads_no_partition_is_refused_as_a_misconfiguration(tmp_path):
    b = table(tmp_path, keys=("dt",))
    b.commit([E(ADD, f"f{d}", (f"2024-01-{d:02d}",)) for d in range(1, 31)])
    with pytest.raises(PlanRejected) as e:
        plan(b, now=dt.datetime(2024, 3, 1), strategy="values-time", expiration_time="2 d",
             timestamp_formatter="yyyyMMdd")
    assert str(e.value) == (
        "no partition's value can be read as a time with the timestamp formatter 'yyyyMMdd': all 30 partition(s) "
        "would be skipped, e.g. dt=2024-01-01 (text '2024-01-01' could not be parsed); set --timestamp-formatter "
        "/ --timestamp-pattern (partition.timestamp-formatter, partition.timestamp-pattern) to match the "
        "partition values, or plan with --strategy update-time (partition.expiration-strategy), which goes by "
        "when each partition was last written (Paimon reads a DATE partition as its day count since 1970, such "
        "as 19358, not as a date)")
    # the default formatter reads them, and they expire
    assert len(plan(b, now=dt.datetime(2024, 3, 1), strategy="values-time", expiration_time="2 d")
               .scope.partitions) == 30


def test_null_and_empty_sub_partitions_expire_by_the_first_key(tmp_path):
    b = table(tmp_path, keys=("f0", "f1"), types=("STRING", "STRING"))
    b.commit([E(ADD, "a", ("20230101", "x")), E(ADD, "b", ("20230101", None)), E(ADD, "c", ("20230101", "")),
              E(ADD, "d", ("20230105", "x"))])
    assert expired(b, 6) == ["f0=20230101/f1=__DEFAULT_PARTITION__", "f0=20230101/f1=__DEFAULT_PARTITION__",
                             "f0=20230101/f1=x"]
    p = plan(b, now=at_day(6), strategy="values-time", expiration_time="2 d", timestamp_formatter="yyyyMMdd")
    assert sorted(a.path.rsplit("/", 1)[1] for a in p.actions) == ["a", "b", "c"]


def test_a_value_holding_the_delimiter_stays_one_partition(tmp_path):
    b = table(tmp_path, keys=("f0", "f1"), types=("STRING", "STRING"))
    b.commit([E(ADD, "a", ("20230101", "us,ca")), E(ADD, "b", ("20230101", "us")), E(ADD, "c", ("20230109", "us"))])
    p = plan(b, now=at_day(8), strategy="values-time", expiration_time="2 d", timestamp_formatter="yyyyMMdd")
    assert [(x["partition"], x["spec"]) for x in p.scope.partitions] == [
        ("f0=20230101/f1=us", {"f0": "20230101", "f1": "us"}),
        ("f0=20230101/f1=us,ca", {"f0": "20230101", "f1": "us,ca"})]


def test_a_pattern_reads_the_time_from_several_keys(tmp_path):
    b = table(tmp_path, keys=("dt", "hour"), types=("STRING", "INT"))
    b.commit([E(ADD, f"f{h}", ("2023-01-07", h)) for h in (10, 11, 12, 13)])
    p = plan(b, now=dt.datetime(2023, 1, 8, 12, 0), strategy="values-time", expiration_time="1 d",
             timestamp_pattern="$dt $hour:00:00")
    assert [x["partition"] for x in p.scope.partitions] == ["dt=2023-01-07/hour=10", "dt=2023-01-07/hour=11"]
