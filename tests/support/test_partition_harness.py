"""Tests of the harness's partition commands (``write_partitions``, ``partitions``, ``expire_partitions``).

They show that the harness reproduces Apache Paimon 0.9's own partition expiry, including the scenarios of
0.9's ``PartitionExpireTest``, and record where 0.9 differs from master: no max-num or batch
size, a null partition value or a TIMESTAMP partition under update-time fails the run, the procedure ignores
the table's ``partition.*`` options, and expired partitions come in scan order.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from lakesweep.engine.timeutil import system_zone
from tests.support.paimon_java import JVM_OPTIONS, JVM_QUIET_OPTIONS, Harness, HarnessError, ensure_harness

pytestmark = pytest.mark.java

F0 = [("f0", "STRING")]
F0_F1 = [("f0", "STRING"), ("f1", "STRING")]
# PartitionExpireTest#newExpireTable: 2 d, checked every day, values read with yyyyMMdd
EXPIRE_TEST_OPTIONS = {"expiration_time": "2 d", "check_interval": "1 d", "timestamp_formatter": "yyyyMMdd"}


def date(day: int) -> str:
    """PartitionExpireTest#date: 2023-01-<day> at midnight, as an ISO local date-time."""
    return dt.datetime(2023, 1, day).isoformat()


def local_ms(iso: str, zone: str | None = None) -> int:
    """Epoch ms of a naive local date-time in ``zone`` (this machine's, which the harness JVM uses)."""
    naive = dt.datetime.fromisoformat(iso)
    return int(naive.replace(tzinfo=ZoneInfo(zone or system_zone())).timestamp() * 1000)


def files_on_disk(table: Path) -> set[str]:
    """Files in the table's bucket directories, relative to the root."""
    return {str(p.relative_to(table)) for p in table.rglob("bucket-*/*") if p.is_file()}


def ids(rows: list[dict]) -> list[tuple[str, int]]:
    return sorted((r["f0"], r["id"]) for r in rows)


def write_expire_test_rows(h: Harness, table: Path, rows: list[tuple[str, int]]) -> None:
    """PartitionExpireTest#write(f0, f1) once per row: one commit of one row; f1 is carried by ``id``."""
    for f0, f1 in rows:
        h.write_partitions(table, kind="append", partition_keys=F0, partitions=[[f0]], first_id=f1)


def snapshot_ids(table: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in (table / "snapshot").glob("snapshot-*"))


# --------------------------------------------------------------------------- write_partitions


@pytest.mark.parametrize(
    ("type_", "value", "spec", "path", "row_value"),
    [
        ("STRING", "abcd", "abcd", "dt=abcd", "abcd"),
        ("INT", "20230101", "20230101", "dt=20230101", 20230101),
        # 0.9 names a DATE partition by its epoch day, in the spec and in the directory
        ("DATE", "2023-01-01", "19358", "dt=19358", 19358),
        ("TIMESTAMP(3)", "2023-01-01 10:00:00", "2023-01-01T10:00", "dt=2023-01-01T10%3A00", "2023-01-01T10:00"),
    ],
)
def test_write_partitions_creates_a_table_partitioned_by_the_given_type(
    paimon_java, tmp_path, type_, value, spec, path, row_value
):
    table = tmp_path / "t"
    out = paimon_java.write_partitions(table, kind="pk", partition_keys=[("dt", type_)], options={"bucket": "1"},
                                       partitions=[[value]], rows_per_partition=2, seed=3)
    schema = json.loads((table / "schema" / "schema-0").read_text())
    assert schema["partitionKeys"] == ["dt"] and schema["primaryKeys"] == ["dt", "id"]
    assert [f["name"] for f in schema["fields"]] == ["dt", "id", "v", "s"]
    assert schema["fields"][0]["type"] == f"{type_} NOT NULL"
    [part] = out["partitions"]
    assert part["spec"] == {"dt": spec} and part["path"] == path
    assert part["fileCount"] == 1 and part["recordCount"] == 2
    [only] = part["files"]
    assert only.startswith(f"{path}/bucket-0/data-") and (table / only).is_file()
    assert [(s["id"], s["commitKind"]) for s in out["snapshots"]] == [(1, "APPEND")] and out["committed"] == [1]
    assert [(r["dt"], r["id"], r["s"]) for r in paimon_java.read_rows(table)] == [
        (row_value, 0, "c0-r0"), (row_value, 1, "c0-r1")]
    assert paimon_java.live_files(table)["snapshots"] == {"1": [only]}


def test_null_and_empty_values_are_two_partitions_in_one_directory(paimon_java, tmp_path):
    table = tmp_path / "t"
    out = paimon_java.write_partitions(table, partition_keys=F0_F1,
                                       partitions=[["20230101", None], ["20230101", ""], ["20230101", "us"]])
    assert [(p["spec"], p["path"], p["fileCount"]) for p in out["partitions"]] == [
        ({"f0": "20230101", "f1": ""}, "f0=20230101/f1=__DEFAULT_PARTITION__", 1),
        ({"f0": "20230101", "f1": None}, "f0=20230101/f1=__DEFAULT_PARTITION__", 1),
        ({"f0": "20230101", "f1": "us"}, "f0=20230101/f1=us", 1),
    ]
    assert sorted(((r["f1"] is None, r["f1"] or "") for r in paimon_java.read_rows(table))) == [
        (False, ""), (False, "us"), (True, "")]
    assert set(paimon_java.live_files(table)["snapshots"]["1"]) == {
        f for p in out["partitions"] for f in p["files"]}


def test_a_primary_key_table_refuses_a_null_partition_value(paimon_java, tmp_path):
    with pytest.raises(HarnessError, match=r"Cannot write null to non-null column\(f1\)"):
        paimon_java.write_partitions(tmp_path / "t", kind="pk", partition_keys=F0_F1, partitions=[["a", None]])


def test_commits_get_their_creation_times_and_distinct_snapshot_times(paimon_java, tmp_path):
    table = tmp_path / "t"
    times = ["2023-01-02T00:00:00", "2023-01-03T10:00:00", "2023-01-01T08:30:00"]
    out = paimon_java.write_partitions(table, partition_keys=F0, partitions=[["20230101"], ["abcd"]], commits=3,
                                       rows_per_partition=2, creation_times=times)
    assert [(s["id"], s["commitKind"], s["totalRecordCount"]) for s in out["snapshots"]] == [
        (1, "APPEND", 4), (2, "APPEND", 8), (3, "APPEND", 12)]
    stamps = [s["timeMillis"] for s in out["snapshots"]]
    assert all(b >= a + 10 for a, b in zip(stamps, stamps[1:]))
    for part in out["partitions"]:
        assert part["fileCount"] == 3 and part["recordCount"] == 6 and len(part["files"]) == 3
        # Paimon's PartitionEntry keeps the newest creation time, whatever the commit order
        assert part["lastFileCreationTime"] == local_ms("2023-01-03T10:00:00")
    # the partitions of snapshot 1 have only the first commit's file and time
    assert [(p["fileCount"], p["lastFileCreationTime"]) for p in paimon_java.partitions(table, snapshot=1)] == [
        (1, local_ms(times[0]))] * 2
    assert sorted(r["id"] for r in paimon_java.read_rows(table) if r["f0"] == "abcd") == [0, 1, 2, 3, 4, 5]


def test_a_second_call_appends_partitions_and_rows(paimon_java, tmp_path):
    table = tmp_path / "t"
    first = paimon_java.write_partitions(table, kind="append", partition_keys=F0, partitions=[["20230101"]])
    second = paimon_java.write_partitions(table, partitions=[["20230101"], ["20230102"]], first_id=10, commits=2)
    assert first["committed"] == [1] and second["committed"] == [2, 3]
    assert [s["id"] for s in second["snapshots"]] == [1, 2, 3]
    assert [(p["spec"]["f0"], p["fileCount"]) for p in second["partitions"]] == [("20230101", 3), ("20230102", 2)]
    assert ids(paimon_java.read_rows(table)) == [
        ("20230101", 0), ("20230101", 10), ("20230101", 11), ("20230102", 10), ("20230102", 11)]


def test_appending_checks_the_table_it_appends_to(paimon_java, tmp_path):
    table = tmp_path / "t"
    paimon_java.write_partitions(table, kind="append", partition_keys=F0, partitions=[["a"]])
    with pytest.raises(HarnessError, match=r"is partitioned by \[f0 STRING\], not \[f0 INT\]"):
        paimon_java.write_partitions(table, partition_keys=[("f0", "INT")], partitions=[["1"]])
    with pytest.raises(HarnessError, match=r"is an append table, not 'pk'"):
        paimon_java.write_partitions(table, kind="pk", partitions=[["a"]])
    with pytest.raises(HarnessError, match=r"options apply only when the table is created"):
        paimon_java.write_partitions(table, options={"bucket": "2"}, partitions=[["a"]])
    with pytest.raises(HarnessError, match=r"partition \[\"a\",\"b\"\] must list 1 values"):
        paimon_java.write_partitions(table, partitions=[["a", "b"]])
    with pytest.raises(HarnessError, match=r"creationTimes lists 1 times for 2 commits"):
        paimon_java.write_partitions(table, partitions=[["a"]], commits=2, creation_times=["2023-01-01T00:00:00"])
    assert snapshot_ids(table) == [1]


def test_0_9_refuses_expiration_time_on_an_unpartitioned_table(paimon_java, tmp_path):
    """0.9's PartitionExpireTest#testNonPartitionedTable (master accepts the option as a no-op)."""
    with pytest.raises(HarnessError, match="Can not set 'partition.expiration-time' for non-partitioned table"):
        paimon_java.write_partitions(tmp_path / "t", partition_keys=[], partitions=[],
                                     options={"partition.expiration-time": "1 d"})


# --------------------------------------------------------------------------- expire_partitions: 0.9's own tests


@pytest.mark.parametrize("via", ["table", "procedure"])
def test_0_9_illegal_partition_is_kept(paimon_java, tmp_path, via):
    """PartitionExpireTest#testIllegalPartition: at date(8) everything but ``abcd`` goes, without an error."""
    table = tmp_path / "t"
    write_expire_test_rows(paimon_java, table, [("20230101", 11), ("abcd", 12), ("20230101", 12),
                                                ("20230103", 31), ("20230103", 32), ("20230105", 51)])
    if via == "table":
        out = paimon_java.expire_partitions(table, via="table", last_check=date(1), now=date(8), **EXPIRE_TEST_OPTIONS)
    else:
        out = paimon_java.expire_partitions(table, expiration_time="2 d", timestamp_formatter="yyyyMMdd", now=date(8))
    [run] = out["runs"]
    assert sorted(p["f0"] for p in run["expired"]) == ["20230101", "20230103", "20230105"]
    assert [(s["id"], s["commitKind"], s["commitUser"], s["commitIdentifier"]) for s in run["snapshots"]] == [
        (7, "OVERWRITE", "", 2**63 - 1)]
    assert ids(paimon_java.read_rows(table)) == [("abcd", 12)]
    assert [p["spec"] for p in paimon_java.partitions(table)] == [{"f0": "abcd"}]


def test_0_9_check_interval_sequence(paimon_java, tmp_path):
    """PartitionExpireTest#test: one PartitionExpire, last check date(1), run at date(3), 5, 6 and 8."""
    table = tmp_path / "t"
    write_expire_test_rows(paimon_java, table, [("20230101", 11), ("20230101", 12), ("20230103", 31),
                                                ("20230103", 32), ("20230105", 51)])
    out = paimon_java.expire_partitions(table, via="table", last_check=date(1),
                                        now=[date(3), date(5), date(6), date(8)], **EXPIRE_TEST_OPTIONS)
    runs = [(r["now"], None if r["expired"] is None else sorted(p["f0"] for p in r["expired"]),
             [(s["id"], s["commitKind"]) for s in r["snapshots"]]) for r in out["runs"]]
    assert runs == [
        (date(3), [], []),                                         # checked; nothing is older than date(1)
        (date(5), ["20230101"], [(6, "OVERWRITE")]),
        (date(6), None, []),                                       # the day since date(5) has not passed
        (date(8), ["20230103", "20230105"], [(7, "OVERWRITE")]),
    ]
    assert ids(paimon_java.read_rows(table, snapshot=5)) == [
        ("20230101", 11), ("20230101", 12), ("20230103", 31), ("20230103", 32), ("20230105", 51)]
    assert ids(paimon_java.read_rows(table, snapshot=6)) == [("20230103", 31), ("20230103", 32), ("20230105", 51)]
    assert paimon_java.read_rows(table) == []
    assert len(out["expired"]) == 3 and [s["id"] for s in out["snapshots"]] == [6, 7]


def test_0_9_fails_on_an_expired_null_sub_partition_and_drops_nothing(paimon_java, tmp_path):
    """Master's PartitionExpireTest#testExpireWithNullOrEmptyPartition drops the null and empty sub-partitions
    by f0's date. 0.9 names each expired partition with ``value.toString()``: a null value is a
    NullPointerException before anything is committed."""
    table = tmp_path / "t"
    rows = [("20230101", "11"), ("20230101", "12"), ("20230101", None), ("20230103", ""), ("20230103", "32"),
            ("20230105", "51")]
    for f0, f1 in rows:
        paimon_java.write_partitions(table, kind="append", partition_keys=F0_F1, partitions=[[f0, f1]])
    for strategy, expiration in (("values-time", "2 d"), ("update-time", "1 s")):
        with pytest.raises(HarnessError, match=r"^java.lang.NullPointerException: .*array\[i\]"):
            paimon_java.expire_partitions(table, expiration_time=expiration, strategy=strategy,
                                          timestamp_formatter="yyyyMMdd", now="2099-01-01T00:00:00")
    assert snapshot_ids(table) == [1, 2, 3, 4, 5, 6]
    assert len(paimon_java.partitions(table)) == 6


def test_0_9_drops_an_empty_sub_partition_by_its_date(paimon_java, tmp_path):
    """testExpireWithNullOrEmptyPartition without the null row: at date(6) all but 20230105 goes, ``""`` too."""
    table = tmp_path / "t"
    for f0, f1 in [("20230101", "11"), ("20230101", "12"), ("20230103", ""), ("20230103", "32"), ("20230105", "51")]:
        paimon_java.write_partitions(table, kind="append", partition_keys=F0_F1, partitions=[[f0, f1]])
    out = paimon_java.expire_partitions(table, expiration_time="2 d", timestamp_formatter="yyyyMMdd", now=date(6))
    assert sorted((p["f0"], p["f1"]) for p in out["expired"]) == [
        ("20230101", "11"), ("20230101", "12"), ("20230103", ""), ("20230103", "32")]
    assert [s["commitKind"] for s in out["snapshots"]] == ["OVERWRITE"]
    assert [p["spec"] for p in paimon_java.partitions(table)] == [{"f0": "20230105", "f1": "51"}]


def test_0_9_fails_on_a_null_first_value_under_values_time(paimon_java, tmp_path):
    """Without a pattern 0.9 reads the first value's toString(): a null there is a NullPointerException from
    the partition filter (only DateTimeParseException is caught), whatever the cut-off."""
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=F0, partitions=[[None], ["20230101"]])
    # thrown on a manifest-reading thread, so it arrives wrapped
    with pytest.raises(HarnessError, match=r'NullPointerException: Cannot invoke "Object.toString\(\)" because the '
                                           r'return value of "java.util.List.get\(int\)" is null$'):
        paimon_java.expire_partitions(table, expiration_time="2 d", timestamp_formatter="yyyyMMdd", now=date(8))
    assert snapshot_ids(table) == [1]


# --------------------------------------------------------------------------- expire_partitions: what 0.9 has


def test_0_9_has_no_max_expires_or_batch_size(paimon_java, tmp_path):
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=F0, partitions=[["20230101"], ["20230102"]])
    for field in ("maxExpires", "batchSize"):
        with pytest.raises(HarnessError, match=rf"UnsupportedOperationException: Paimon 0.9 has no '{field}'"):
            paimon_java.call({"cmd": "expire_partitions", "table": str(table), "expirationTime": "1 d",
                              "now": date(8), field: 1})
    # without a limit, both go in one commit
    out = paimon_java.expire_partitions(table, expiration_time="1 d", timestamp_formatter="yyyyMMdd", now=date(8))
    assert len(out["expired"]) == 2 and [s["commitKind"] for s in out["snapshots"]] == ["OVERWRITE"]
    assert snapshot_ids(table) == [1, 2]


def test_the_procedure_ignores_the_tables_partition_options(paimon_java, tmp_path):
    """0.9's procedure reads only its own arguments: the table's formatter is not used, so ``20230101`` does not
    parse with the default formatter and nothing expires; a writer (via table) uses it."""
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=F0, partitions=[["20230101"]],
                                 options={"partition.timestamp-formatter": "yyyyMMdd"})
    shutil.copytree(table, tmp_path / "u")
    procedure = paimon_java.expire_partitions(table, expiration_time="1 d", now=date(8))
    assert procedure["expired"] == [] and procedure["snapshots"] == []
    writer = paimon_java.expire_partitions(tmp_path / "u", expiration_time="1 d", now=date(8), via="table",
                                           check_interval="0 s")
    assert writer["expired"] == [{"f0": "20230101"}]


def test_the_procedure_has_no_check_interval(paimon_java, tmp_path):
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=F0, partitions=[["20230101"]])
    with pytest.raises(HarnessError, match=r"the procedure's check interval is always 0"):
        paimon_java.expire_partitions(table, expiration_time="1 d", now=date(8), check_interval="1 d")


def test_expiration_time_in_milliseconds(paimon_java, tmp_path):
    """A bare number is milliseconds to Paimon's TimeUtils: 2 days + 1 ms keeps what ``"2 d"`` drops."""
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=F0, partitions=[["2023-01-01"], ["2023-01-03"]])
    shutil.copytree(table, tmp_path / "u")
    just = paimon_java.expire_partitions(table, expiration_time=2 * 86_400_000 + 1, now="2023-01-03T00:00:00.001")
    assert just["expired"] == []
    day2 = paimon_java.expire_partitions(tmp_path / "u", expiration_time="2 d", now="2023-01-03T00:00:00.001")
    assert day2["expired"] == [{"f0": "2023-01-01"}]


def test_values_time_reads_partitions_as_0_9_does(paimon_java, tmp_path):
    """INT values parse with a formatter; DATE partitions (epoch days) and TIMESTAMP ones
    (``2023-01-01T10:00``) never parse, so values-time keeps them."""
    cases = {"INT": ["20230101", "20230105"], "DATE": ["2023-01-01", "2023-01-05"],
             "TIMESTAMP(3)": ["2023-01-01 10:00:00", "2023-01-05 00:00:00"]}
    expired = {}
    for type_, values in cases.items():
        table = tmp_path / type_.replace("(", "").replace(")", "")
        paimon_java.write_partitions(table, partition_keys=[("dt", type_)], partitions=[[v] for v in values])
        for formatter in (None, "yyyyMMdd"):
            copy = tmp_path / f"{table.name}-{formatter}"
            shutil.copytree(table, copy)
            out = paimon_java.expire_partitions(copy, expiration_time="1 d", timestamp_formatter=formatter,
                                                now="2023-01-04T00:00:00")
            expired[type_, formatter] = sorted(p["dt"] for p in out["expired"])
    assert expired == {("INT", None): [], ("INT", "yyyyMMdd"): ["20230101"], ("DATE", None): [],
                       ("DATE", "yyyyMMdd"): [], ("TIMESTAMP(3)", None): [], ("TIMESTAMP(3)", "yyyyMMdd"): []}


def test_values_time_with_a_timestamp_pattern(paimon_java, tmp_path):
    """``$dt $hr:00:00`` over two keys: the hour counts."""
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=[("dt", "STRING"), ("hr", "STRING")],
                                 partitions=[["2023-01-01", "10"], ["2023-01-01", "23"]])
    out = paimon_java.expire_partitions(table, expiration_time="1 d", timestamp_pattern="$dt $hr:00:00",
                                        now="2023-01-02T12:00:00")
    assert out["expired"] == [{"dt": "2023-01-01", "hr": "10"}]


@pytest.mark.parametrize(("keys", "expired"),
                         [(["dt", "dt1"], []), (["dt1", "dt"], [{"dt1": "2023-01-01", "dt": "x"}])])
def test_0_9_pattern_substitution_follows_key_order(paimon_java, tmp_path, keys, expired):
    """0.9 substitutes ``$key`` with replaceAll in key order, so with keys (dt, dt1) ``$dt1`` becomes
    ``x1`` and never parses; with (dt1, dt) it reads dt1. Master replaces the longest key first."""
    table = tmp_path / "t"
    values = {"dt": "x", "dt1": "2023-01-01"}
    paimon_java.write_partitions(table, partition_keys=[(k, "STRING") for k in keys],
                                 partitions=[[values[k] for k in keys]])
    out = paimon_java.expire_partitions(table, expiration_time="1 d", timestamp_pattern="$dt1", now=date(8))
    assert out["expired"] == expired


def test_update_time_compares_the_newest_creation_time(paimon_java, tmp_path):
    """update-time: a partition goes when now - expiration is strictly after its newest _CREATION_TIME."""
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=F0, partitions=[["a"], ["b"]], commits=2,
                                 creation_times=["2023-01-01T00:00:00", "2023-01-02T00:00:00"])
    paimon_java.write_partitions(table, partitions=[["b"], ["c"]], creation_times=["2023-01-05T00:00:00"])
    shutil.copytree(table, tmp_path / "u")
    at_cutoff = paimon_java.expire_partitions(table, expiration_time="1 d", strategy="update-time",
                                              now="2023-01-03T00:00:00")
    assert at_cutoff["expired"] == []  # the cut-off equals a's newest file: not strictly after it
    out = paimon_java.expire_partitions(tmp_path / "u", expiration_time="1 d", strategy="update-time",
                                        now="2023-01-03T00:00:00.001")
    assert out["expired"] == [{"f0": "a"}]
    assert [p["spec"]["f0"] for p in paimon_java.partitions(tmp_path / "u")] == ["b", "c"]


def test_update_time_drops_a_date_partition_by_its_epoch_day(paimon_java, tmp_path):
    """0.9 names a DATE partition ``19358`` and casts that back as an epoch day (BinaryStringUtils#toDate reads
    a number as days), so update-time drops exactly the expired DATE partition (not a no-op)."""
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=[("dt", "DATE")], partitions=[["2023-01-01"]],
                                 creation_times=["2023-01-02T00:00:00"])
    paimon_java.write_partitions(table, partitions=[["2023-01-05"]], creation_times=["2023-01-07T12:00:00"])
    out = paimon_java.expire_partitions(table, expiration_time="1 d", strategy="update-time", now=date(8))
    assert out["expired"] == [{"dt": "19358"}]
    assert [(s["id"], s["commitKind"], s["totalRecordCount"]) for s in out["snapshots"]] == [(3, "OVERWRITE", 1)]
    assert [p["spec"] for p in paimon_java.partitions(table)] == [{"dt": "19362"}]


def test_update_time_fails_on_a_timestamp_partition(paimon_java, tmp_path):
    """0.9 names a TIMESTAMP partition ``2023-01-01T10:00``, which its drop cannot cast back: the run fails
    with a DateTimeParseException and commits nothing."""
    table = tmp_path / "t"
    paimon_java.write_partitions(table, partition_keys=[("dt", "TIMESTAMP(3)")],
                                 partitions=[["2023-01-01 10:00:00"]], creation_times=["2023-01-02T00:00:00"])
    with pytest.raises(HarnessError, match=r"DateTimeParseException: Text '2023-01-01T10:00' could not be parsed"):
        paimon_java.expire_partitions(table, expiration_time="1 d", strategy="update-time", now=date(8))
    assert snapshot_ids(table) == [1]


def test_creation_times_are_local_to_the_jvm_zone(tmp_path):
    """_CREATION_TIME is a local date-time; Paimon turns it into epoch ms in the JVM's zone, and
    update-time compares it with the local now there."""
    zone = "America/New_York"
    tuning = [o for o in JVM_OPTIONS if o not in JVM_QUIET_OPTIONS]
    with ensure_harness(jvm_options=[*tuning, f"-Duser.timezone={zone}"]) as h:
        table = tmp_path / "t"
        out = h.write_partitions(table, partition_keys=F0, partitions=[["a"]], creation_times=["2023-01-02T00:00:00"])
        assert out["partitions"][0]["lastFileCreationTime"] == local_ms("2023-01-02T00:00:00", zone)
        kept = h.expire_partitions(table, expiration_time="1 d", strategy="update-time", now="2023-01-03T00:00:00")
        dropped = h.expire_partitions(table, expiration_time="1 d", strategy="update-time",
                                      now="2023-01-03T00:00:00.001")
    assert kept["expired"] == [] and dropped["expired"] == [{"f0": "a"}]


# --------------------------------------------------------------------------- after a drop


@pytest.mark.parametrize("kind", ["append", "pk"])
def test_snapshot_expiry_after_a_drop_frees_exactly_the_dropped_files(paimon_java, tmp_path, kind):
    """The drop deletes nothing; Paimon's snapshot expiry past the OVERWRITE snapshot deletes the dropped
    files, except those a tag still holds."""
    table = tmp_path / "t"
    options = {"bucket": "1"} if kind == "pk" else {"bucket": "1", "bucket-key": "id"}
    paimon_java.write_partitions(table, kind=kind, partition_keys=F0_F1, options=options, commits=2,
                                 partitions=[["20230101", "us"], ["20230103", "us"], ["20230106", "us"]])
    paimon_java.create_tag(table, "kept", 1)
    before = {p["spec"]["f0"]: set(p["files"]) for p in paimon_java.partitions(table)}
    on_disk = files_on_disk(table)
    assert on_disk == set().union(*before.values())
    out = paimon_java.expire_partitions(table, expiration_time="2 d", timestamp_formatter="yyyyMMdd", now=date(6))
    assert sorted(p["f0"] for p in out["expired"]) == ["20230101", "20230103"]
    live = paimon_java.live_files(table)
    assert set(live["snapshots"]["3"]) == before["20230106"]
    assert files_on_disk(table) == on_disk  # the drop is a commit, not a delete
    tagged = set(live["tags"]["kept"])
    paimon_java.expire(table, retain_min=1, retain_max=1, max_deletes=1000)
    assert snapshot_ids(table) == [3]
    dropped = before["20230101"] | before["20230103"]
    assert files_on_disk(table) == before["20230106"] | (dropped & tagged)
    assert dropped & tagged and dropped - tagged  # the tag holds snapshot 1's files, not snapshot 2's
    assert ids(paimon_java.read_rows(table)) == [("20230106", 0), ("20230106", 1)]
    assert len(paimon_java.read_rows(table, tag="kept")) == 3
