"""HdfsFileIO beyond the shared contract (tests/engine/test_fileio_contract.py runs that against a real HDFS):
pickling, racing commits, failing closed, and where ``hdfs://`` locations lead."""

from __future__ import annotations

import pickle
import threading
import uuid

import pytest

from lakesweep.engine.errors import InvalidLocation, StorageError
from lakesweep.engine.fileio import fileio_for, is_filesystem_root, join, normalize_location
from lakesweep.engine.hdfs_fileio import HdfsFileIO


def test_an_hdfs_location_is_served_by_the_file_io_of_its_namenode():
    io = fileio_for(normalize_location("hdfs://nn.example:8020/wh/db.db/t/"))
    assert io == HdfsFileIO("nn.example:8020") and io.scheme == "hdfs" and io.supports_create_if_absent


def test_a_namenode_root_is_a_file_system_root():
    assert is_filesystem_root(normalize_location("hdfs://nn:8020/"))
    assert not is_filesystem_root(normalize_location("hdfs://nn:8020/wh"))


def test_a_path_of_another_namenode_is_refused():
    with pytest.raises(ValueError, match="not a location of hdfs://a:1: 'hdfs://b:1/t'"):
        HdfsFileIO("a:1").info("hdfs://b:1/t")


def test_it_pickles_without_connecting_and_keeps_its_settings():
    io = HdfsFileIO("127.0.0.1:1", {"dfs.client.failover.max.attempts": "1"})
    clone = pickle.loads(pickle.dumps(io))
    assert clone == io and clone.config == {"dfs.client.failover.max.attempts": "1"} and clone._client is None


def test_an_unreachable_namenode_is_a_storage_error_naming_the_path_never_an_empty_listing():
    io = HdfsFileIO("127.0.0.1:1", {"dfs.client.failover.max.attempts": "0"})
    with pytest.raises(StorageError) as e:
        io.list("hdfs://127.0.0.1:1/wh/t/snapshot")
    assert str(e.value).startswith("hdfs://127.0.0.1:1/wh/t/snapshot: cannot list: Connection refused")
    with pytest.raises(StorageError, match="cannot stat: Connection refused"):
        io.exists("hdfs://127.0.0.1:1/wh/t/snapshot/LATEST")
    with pytest.raises(StorageError, match="cannot stat: Connection refused"):
        io.delete("hdfs://127.0.0.1:1/wh/t/data-1.parquet")
    with pytest.raises(StorageError, match="cannot open: Connection refused"):
        io.read_bytes("hdfs://127.0.0.1:1/wh/t/snapshot/snapshot-1")


@pytest.mark.java
def test_a_connected_file_io_pickles_and_reconnects_after(hdfs):
    io = fileio_for(hdfs)
    p = f"{hdfs}/pickle-{uuid.uuid4().hex[:8]}/f"
    io.write_atomic(p, b"x")
    assert io.client is not None  # a live client must not stop pickling
    clone = pickle.loads(pickle.dumps(io))
    assert clone == io and clone._client is None
    assert clone.read_bytes(p) == b"x"


@pytest.mark.java
def test_listing_a_file_is_an_error_not_its_own_child(hdfs):
    io = fileio_for(hdfs)
    p = f"{hdfs}/plain-{uuid.uuid4().hex[:8]}"
    io.write_atomic(p, b"1")
    with pytest.raises(StorageError, match="cannot list: is a file, not a directory"):
        io.list(p)


@pytest.mark.java
def test_reading_a_directory_is_an_error_not_a_missing_file(hdfs):
    io = fileio_for(hdfs)
    d = f"{hdfs}/dir-{uuid.uuid4().hex[:8]}"
    io.write_atomic(join(d, "f"), b"1")
    with pytest.raises(StorageError, match="is a directory, not a file"):
        io.read_bytes(d)


@pytest.mark.java
def test_of_two_writers_racing_for_the_same_snapshot_exactly_one_wins(hdfs):
    """Two committers, each with its own client, create ``snapshot-N`` at once, eight times: one creates it,
    the other gets ``FileExistsError``, and the file holds the winner's bytes whole."""
    root = f"{hdfs}/race-{uuid.uuid4().hex[:8]}/snapshot"
    ios = [fileio_for(hdfs), fileio_for(hdfs)]
    for n in range(1, 9):
        path = join(root, f"snapshot-{n}")
        start = threading.Barrier(2)
        won: list[bytes] = []
        lost: list[BaseException] = []

        def commit(io, data):
            start.wait()
            try:
                io.create_if_absent(path, data)
                won.append(data)
            except FileExistsError as e:
                lost.append(e)

        payloads = [b"A" * 1000 + str(n).encode(), b"B" * 2000 + str(n).encode()]
        threads = [threading.Thread(target=commit, args=(io, data)) for io, data in zip(ios, payloads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1 and len(lost) == 1, n
        assert str(lost[0]) == path
        assert ios[0].read_bytes(path) == won[0]
    assert [f.path.rsplit("/", 1)[-1] for f in ios[0].list(root)] == sorted(f"snapshot-{n}" for n in range(1, 9))


def test_other_schemes_stay_refused_with_the_ones_that_work():
    with pytest.raises(InvalidLocation, match="unsupported scheme 'webhdfs': use a local path, s3://bucket/path "
                                              "or hdfs://namenode:port/path"):
        normalize_location("webhdfs://nn:9870/t")


def test_an_unreachable_namenode_is_an_error_when_removing_a_directory_not_a_kept_one():
    io = HdfsFileIO("127.0.0.1:1", {"dfs.client.failover.max.attempts": "0"})
    with pytest.raises(StorageError, match="cannot stat: Connection refused"):
        io.delete_empty_dir("hdfs://127.0.0.1:1/wh/t/dt=a/bucket-0")
