"""Reading a listing from inventory files: S3 Inventory's own Parquet columns and the plain form, only the rows
under the table's roots, and a clear refusal naming the file and the column (or row) for anything else."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import MemoryFileIO
from lakesweep.engine.listing import Inventory, ListedFile, read_inventory

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
UTC = dt.timezone.utc


def ts(ms):
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, UTC)


def write(path, columns: dict, schema=None, row_group_size=None) -> str:
    pq.write_table(pa.table(columns, schema=schema), str(path), row_group_size=row_group_size)
    return str(path)


def s3_columns(rows):
    """S3 Inventory rows: (bucket, key, size, last modified ms, is_latest, is_delete_marker)."""
    b, k, s, m, latest, marker = (list(c) for c in zip(*rows))
    return {"bucket": b, "key": k, "size": pa.array(s, pa.int64()),
            "last_modified_date": pa.array([ts(x) for x in m], pa.timestamp("ms", tz="UTC")),
            "is_latest": latest, "is_delete_marker": marker}


def test_an_s3_inventory_lists_the_current_objects_under_the_roots(tmp_path):
    inv = write(tmp_path / "inv.parquet", s3_columns([
        ("lake", "wh/t/dt=a/bucket-0/f1", 10, T0, True, False),
        ("lake", "wh/t/manifest/m1", 20, None, True, False),  # no modification time: kept as unknown
        ("lake", "wh/t/dt=a/bucket-0/old", 5, T0, False, False),  # a noncurrent version
        ("lake", "wh/t/dt=a/bucket-0/unsure", 5, T0, None, False),  # not known to be current
        ("lake", "wh/t/dt=a/bucket-0/gone", 0, T0 + 1, True, True),  # a delete marker
        ("lake", "wh/t/dt=a/", 0, T0, True, False),  # a folder marker
        ("lake", "wh/t/dt=a//x", 1, T0, True, False),  # an empty segment: no location lakesweep addresses
        ("lake", "wh/tt/dt=a/bucket-0/f", 1, T0, True, False),  # another table whose name starts alike
        ("other", "wh/t/dt=a/bucket-0/f", 1, T0, True, False),  # the same key in another bucket
        ("ext", "root/dt=b/bucket-1/f2", None, T0 + 2, True, False),  # an external root; no size
    ]), row_group_size=4)
    got = read_inventory([inv], roots=["s3://lake/wh/t", "s3a://ext/root/"], batch_rows=3)
    assert got.files == (ListedFile("s3://lake/wh/t/dt=a/bucket-0/f1", 10, T0),
                         ListedFile("s3://lake/wh/t/manifest/m1", 20, None),
                         ListedFile("s3://ext/root/dt=b/bucket-1/f2", None, T0 + 2))
    assert (got.rows, got.outside) == (10, 2)
    assert got.left_out == {"noncurrent-version": 2, "delete-marker": 1, "folder-marker": 1, "unaddressable": 1}
    assert got.source() == {"from": "inventory", "inventory": [{"file": inv, "form": "s3-inventory"}], "rows": 10,
                            "under_table": 3, "outside_table": 2,
                            "left_out": {"delete-marker": 1, "folder-marker": 1, "noncurrent-version": 2,
                                         "unaddressable": 1}}


def test_a_current_versions_inventory_has_no_version_columns(tmp_path):
    cols = s3_columns([("lake", "t/f", 1, T0, True, False)])
    del cols["is_latest"], cols["is_delete_marker"]
    got = read_inventory([write(tmp_path / "i.parquet", cols)], roots=["s3://lake/t"])
    assert got.files == (ListedFile("s3://lake/t/f", 1, T0),) and got.left_out == {}


@pytest.mark.parametrize("unit, tz", [("s", None), ("ms", "UTC"), ("us", "+02:00"), ("ns", None)])
def test_timestamps_of_any_unit_are_epoch_milliseconds_utc(tmp_path, unit, tz):
    when = dt.datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC)
    stamp = pa.array([when if tz else when.replace(tzinfo=None)], pa.timestamp(unit, tz=tz))
    cols = {"bucket": ["b"], "key": ["t/f"], "size": pa.array([1], pa.int32()), "last_modified_date": stamp}
    [f] = read_inventory([write(tmp_path / "i.parquet", cols)], roots=["s3://b/t"]).files
    assert f.mtime_ms == int(when.timestamp() * 1000)


def test_a_plain_inventory_names_files_in_any_spelling_of_the_root(tmp_path):
    root = str(tmp_path / "t")
    inv = write(tmp_path / "plain.parquet", {
        "path": [f"{root}/a", f"file:{root}/b", f"file://{root}/c", f"{root}x/d", "dt=a/bucket-0/e",
                 f"{root}/../t/f", f"/elsewhere{root}/g"],
        "size": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
        "mtime_ms": pa.array([T0, T0 + 1, None, T0, T0, T0, T0], pa.int64()),
    })
    got = read_inventory([inv], roots=[root], batch_rows=2)
    assert got.files == (ListedFile(f"{root}/a", 1, T0), ListedFile(f"{root}/b", 2, T0 + 1),
                         ListedFile(f"{root}/c", 3, None))
    assert (got.rows, got.outside, got.left_out) == (7, 3, {"unaddressable": 1})
    assert got.forms == ("plain",)


def test_a_plain_inventory_may_give_a_timestamp_and_several_files_may_be_read(tmp_path):
    root = str(tmp_path / "t")
    first = write(tmp_path / "part-0.parquet", {"path": [f"{root}/a"], "size": [1],
                                                "last_modified": pa.array([ts(T0)], pa.timestamp("ms"))})
    second = write(tmp_path / "part-1.parquet", s3_columns([("b", "k", 1, T0, True, False)]))
    got = read_inventory([first, second], roots=[root])
    assert got.files == (ListedFile(f"{root}/a", 1, T0),)
    assert (got.forms, got.rows, got.outside) == (("plain", "s3-inventory"), 2, 1)


def test_an_inventory_is_read_through_the_fileio_it_is_given():
    fio = MemoryFileIO()
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"path": ["/t/a"], "size": [1], "mtime_ms": [T0]}), sink)
    fio.put("/inv/i.parquet", sink.getvalue().to_pybytes())
    got = read_inventory(["/inv/i.parquet"], roots=["/t"], fileio=fio)
    assert isinstance(got, Inventory) and got.files == (ListedFile("/t/a", 1, T0),)


S3_OK = {"bucket": ["b"], "key": ["t/f"], "size": pa.array([1], pa.int64()),
         "last_modified_date": pa.array([ts(T0)], pa.timestamp("ms"))}
PLAIN_OK = {"path": ["/t/f"], "size": pa.array([1], pa.int64()), "mtime_ms": pa.array([T0], pa.int64())}


def change(base, **cols):
    out = dict(base)
    for k, v in cols.items():
        if v is None:
            del out[k]
        else:
            out[k] = v
    return out


FORMS = ("S3 Inventory's columns are bucket, key, size, last_modified_date; the plain form's are path, size, and "
         "mtime_ms or last_modified")


@pytest.mark.parametrize("cols, message", [
    (change(S3_OK, bucket=None), f"has no column 'bucket' \\({FORMS}\\)"),
    (change(S3_OK, size=None), "has no column 'size'"),
    (change(S3_OK, last_modified_date=None), "has no column 'last_modified_date'"),
    (change(S3_OK, size=["1"]), "column 'size' is string, not an integer"),
    (change(S3_OK, last_modified_date=["2024-01-01"]), "column 'last_modified_date' is string, not a timestamp"),
    (change(S3_OK, key=[1]), "column 'key' is int64, not a string"),
    (change(S3_OK, is_latest=["true"]), "column 'is_latest' is string, not a boolean"),
    (change(PLAIN_OK, path=None), f"has neither a 'path' column nor S3 Inventory's 'bucket' and 'key' \\({FORMS}\\)"),
    (change(PLAIN_OK, key=["k"]), "has both 'path' and S3 Inventory's 'key': use one form"),
    (change(PLAIN_OK, mtime_ms=None), "must have exactly one of 'mtime_ms' and 'last_modified', not neither"),
    (change(PLAIN_OK, last_modified=pa.array([ts(T0)], pa.timestamp("ms"))),
     "must have exactly one of 'mtime_ms' and 'last_modified', not mtime_ms and last_modified"),
    (change(PLAIN_OK, mtime_ms=[1.5e12]), "column 'mtime_ms' is double, not an integer \\(epoch milliseconds\\)"),
    (change(PLAIN_OK, size=None), "has no column 'size'"),
])
def test_a_missing_or_ill_typed_column_is_refused_naming_the_file_and_column(tmp_path, cols, message):
    inv = write(tmp_path / "bad.parquet", cols)
    with pytest.raises(PlanRejected, match=f"^inventory {inv}:? {message}"):
        read_inventory([inv], roots=["s3://b/t", "/t"])


def test_a_row_without_a_location_is_refused_naming_the_row(tmp_path):
    inv = write(tmp_path / "i.parquet", change(S3_OK, bucket=["b"] * 4, key=["t/a", "t/b", None, "t/d"],
                                               size=[1] * 4, last_modified_date=pa.array([ts(T0)] * 4,
                                                                                         pa.timestamp("ms"))))
    with pytest.raises(PlanRejected, match=f"^inventory {inv}: row 3 has no key$"):
        read_inventory([inv], roots=["s3://b/t"], batch_rows=2)


def test_modification_times_in_seconds_are_refused(tmp_path):
    inv = write(tmp_path / "i.parquet", change(PLAIN_OK, path=["/t/a", "/t/b"], size=[1, 1],
                                               mtime_ms=pa.array([T0, T0 // 1000], pa.int64())))
    with pytest.raises(PlanRejected, match=f"^inventory {inv}: row 2 has mtime_ms {T0 // 1000}, before 2000-01-01: "
                                           "mtime_ms must be epoch milliseconds \\(are these seconds\\?\\)$"):
        read_inventory([inv], roots=["/t"])


def test_a_file_that_is_no_inventory_is_refused(tmp_path):
    (tmp_path / "text.parquet").write_text("path,size\n")
    with pytest.raises(PlanRejected, match=f"^inventory {tmp_path}/text.parquet is not a readable Parquet file"):
        read_inventory([str(tmp_path / "text.parquet")], roots=["/t"])
    with pytest.raises(PlanRejected, match=f"^inventory {tmp_path}/absent.parquet does not exist$"):
        read_inventory([str(tmp_path / "absent.parquet")], roots=["/t"])
    with pytest.raises(PlanRejected, match=f"^inventory {tmp_path} is not a regular file$"):
        read_inventory([str(tmp_path)], roots=["/t"])
