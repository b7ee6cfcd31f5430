"""One contract, every FileIO implementation (local files and S3 through pyarrow.fs, HDFS through hdfs-native,
and the in-memory twin)."""

import functools
import pickle
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakesweep.engine import fileio
from lakesweep.engine.errors import InvalidLocation, StorageError
from lakesweep.engine.fileio import (ArrowFileIO, DeleteOutcome, MemoryFileIO, MoveOutcome, _normalized,
                                     _plainly_absolute, join, normalize_location, on_local_disk, read_each)


@pytest.fixture(params=["local", "memory", "s3", pytest.param("hdfs", marks=pytest.mark.java)])
def fio(request, tmp_path):
    if request.param == "local":
        return ArrowFileIO("file"), str(tmp_path)
    if request.param == "hdfs":
        import uuid

        from lakesweep.engine.fileio import fileio_for

        root = f"{request.getfixturevalue('hdfs')}/contract-{uuid.uuid4().hex[:8]}"
        return fileio_for(root), root
    if request.param == "s3":
        import uuid

        from lakesweep.engine.fileio import fileio_for

        request.getfixturevalue("s3_env")
        s3 = request.getfixturevalue("s3")
        root = f"s3://{s3['bucket']}/contract-{uuid.uuid4().hex[:8]}"
        return fileio_for(root), root
    return MemoryFileIO(clock=lambda: 1000), "/mem/root"


def test_write_read_roundtrip(fio):
    io, root = fio
    p = join(root, "a", "b.txt")
    io.write_atomic(p, b"hello")
    assert io.read_bytes(p) == b"hello"
    assert io.exists(p)
    info = io.info(p)
    assert info.size == 5 and not info.is_dir


def test_open_input_reads_any_part_of_a_file(fio):
    io, root = fio
    p = join(root, "a", "parts.bin")
    io.write_atomic(p, b"0123456789")
    with io.open_input(p) as f:
        f.seek(6)
        assert f.read(3) == b"678"
        f.seek(0)
        assert f.read() == b"0123456789"
    with pytest.raises(FileNotFoundError):
        io.open_input(join(root, "a", "nope"))


def test_overwrite_is_atomic_replacement(fio):
    io, root = fio
    p = join(root, "hint")
    io.write_atomic(p, b"1")
    io.write_atomic(p, b"22")
    assert io.read_bytes(p) == b"22"
    assert [f.path for f in io.list(root)] == [p]  # no temporary files left behind


def test_a_file_written_from_a_stream_appears_whole_and_a_failed_one_not_at_all(fio):
    io, root = fio
    p = join(root, "plan.parquet")

    def fill(stream):
        for i in range(3):
            stream.write(b"part %d;" % i)

    io.write_atomic_from(p, fill)
    assert io.read_bytes(p) == b"part 0;part 1;part 2;"

    def broken(stream):
        stream.write(b"half")
        raise ValueError("refused while writing")

    with pytest.raises(ValueError, match="refused while writing"):
        io.write_atomic_from(p, broken)
    assert io.read_bytes(p) == b"part 0;part 1;part 2;"  # the old content, whole
    with pytest.raises(ValueError):
        io.write_atomic_from(join(root, "new.parquet"), broken)
    assert [f.path for f in io.list(root)] == [p]  # nothing new, no temporary file left behind

def test_missing_file_raises_file_not_found(fio):
    io, root = fio
    with pytest.raises(FileNotFoundError):
        io.read_bytes(join(root, "nope"))
    assert io.info(join(root, "nope")) is None
    assert not io.exists(join(root, "nope"))


def test_delete_is_idempotent(fio):
    io, root = fio
    p = join(root, "x", "f")
    io.write_atomic(p, b"data")
    assert io.delete(p) == DeleteOutcome.DELETED
    assert io.delete(p) == DeleteOutcome.ALREADY_ABSENT
    assert not io.exists(p)


def test_delete_refuses_directories(fio):
    io, root = fio
    io.write_atomic(join(root, "d", "f"), b"1")
    with pytest.raises(StorageError, match="is a directory"):
        io.delete(join(root, "d"))
    assert io.exists(join(root, "d", "f"))


def test_delete_below_a_file_finds_nothing_there(fio):
    io, root = fio
    io.write_atomic(join(root, "plain"), b"1")
    assert io.delete(join(root, "plain", "f")) == DeleteOutcome.ALREADY_ABSENT
    assert io.read_bytes(join(root, "plain")) == b"1"


def test_local_delete_of_a_symbolic_link_removes_the_link_not_its_target(tmp_path):
    target = tmp_path / "kept"
    target.write_bytes(b"data")
    (tmp_path / "link").symlink_to(target)
    assert ArrowFileIO("file").delete(str(tmp_path / "link")) == DeleteOutcome.DELETED
    assert not (tmp_path / "link").is_symlink() and target.read_bytes() == b"data"


def test_local_delete_error_names_the_path(tmp_path):
    io = ArrowFileIO("file")
    long_name = str(tmp_path / ("x" * 300))
    with pytest.raises(StorageError, match=r"cannot delete: File name too long") as e:
        io.delete(long_name)
    assert long_name in str(e.value)


def test_list_direct_children_and_recursive(fio):
    io, root = fio
    for name in ("b", "a", "sub/c", "sub/deeper/d"):
        io.write_atomic(join(root, name), name.encode())
    direct = io.list(root)
    assert [f.path for f in direct] == [join(root, "a"), join(root, "b"), join(root, "sub")]
    assert [f.is_dir for f in direct] == [False, False, True]
    files = [f.path for f in io.list(root, recursive=True) if not f.is_dir]
    assert files == sorted(join(root, n) for n in ("a", "b", "sub/c", "sub/deeper/d"))


def test_listing_a_missing_directory_is_empty(fio):
    io, root = fio
    assert io.list(join(root, "absent")) == []
    assert [f for page in io.list_pages(join(root, "absent")) for f in page] == []


def test_list_pages_lists_what_list_lists(fio):
    io, root = fio
    for name in ("b", "a", "sub/c", "sub/deeper/d"):
        io.write_atomic(join(root, name), name.encode())
    paged = [[(f.path, f.size, f.is_dir) for f in page] for page in io.list_pages(root)]
    assert all(page == sorted(page) for page in paged)
    assert sorted(f for page in paged for f in page) == [(f.path, f.size, f.is_dir) for f in io.list(root)]
    recursive = sorted((f.path, f.size) for page in io.list_pages(root, recursive=True) for f in page)
    assert recursive == [(f.path, f.size) for f in io.list(root, recursive=True) if not f.is_dir]
    clone = pickle.loads(pickle.dumps(io)) if io.scheme != "memory" else io  # a client made for listing stays
    assert [f.path for page in clone.list_pages(root, recursive=True) for f in page] == [p for p, _ in recursive]


def test_delete_empty_dir_is_never_recursive(fio):
    io, root = fio
    io.write_atomic(join(root, "p", "bucket-0", "f"), b"1")
    assert io.delete_empty_dir(join(root, "p", "bucket-0")) is False
    assert io.delete_empty_dir(join(root, "p")) is False
    assert io.exists(join(root, "p", "bucket-0", "f"))
    io.delete(join(root, "p", "bucket-0", "f"))
    if io.scheme == "s3":
        # Object stores have no directories, and removing a "directory marker" cannot be made atomic
        # against a concurrent writer: lakesweep never deletes directories there.
        assert not io.exists(join(root, "p", "bucket-0", "f"))
        assert io.delete_empty_dir(join(root, "p", "bucket-0")) is False
        return
    assert io.delete_empty_dir(join(root, "p", "bucket-0")) is True
    assert io.delete_empty_dir(join(root, "p")) is True
    assert not io.exists(join(root, "p"))


def test_arrow_fileio_pickles_and_works_after(tmp_path):
    io = ArrowFileIO("file", {"region": "eu-west-1"})
    p = str(tmp_path / "f")
    io.write_atomic(p, b"x")
    _ = io.fs  # a live pyarrow file system must not stop pickling
    clone = pickle.loads(pickle.dumps(io))
    assert clone == io
    assert clone.read_bytes(p) == b"x"


def test_s3_fileio_pickles_without_connecting():
    io = ArrowFileIO("s3", {"endpoint": "http://127.0.0.1:1", "access_key": "k", "secret_key": "s"})
    clone = pickle.loads(pickle.dumps(io))
    assert clone.scheme == "s3" and clone.properties == io.properties
    assert "secret" not in repr(clone)


@pytest.mark.parametrize(
    "given, expected",
    [
        ("file:///tmp/t/", "/tmp/t"),
        ("file:/tmp/t", "/tmp/t"),
        ("s3://bucket/wh/t/", "s3://bucket/wh/t"),
        ("s3a://bucket/t", "s3://bucket/t"),
        ("hdfs://nn:8020/wh/t/", "hdfs://nn:8020/wh/t"),
        ("HDFS://nn/wh/t", "hdfs://nn/wh/t"),
    ],
)
def test_normalize_location(given, expected):
    assert normalize_location(given) == expected


@settings(max_examples=2000)
@given(st.text(alphabet="/.a:s3 \n\t", max_size=14), st.booleans())
def test_a_location_taken_as_already_normal_is_what_the_rules_make_of_it(location, relative_ok):
    """The shortcut for a plain absolute path (apply's local deletes) agrees with the rules applied one by
    one: it passes only what they would return unchanged, never what they would refuse."""
    if _plainly_absolute(location):
        assert _normalized(location, relative_ok) == location
    try:
        expected = _normalized(location, relative_ok)
    except InvalidLocation:
        with pytest.raises(InvalidLocation):
            normalize_location(location, relative_ok=relative_ok)
    else:
        assert normalize_location(location, relative_ok=relative_ok) == expected


@pytest.mark.parametrize("location", ["/a/b", "/a/.b/c..", "/a/b:c", "/x", "/a ", "/a\n", "/ a/b"])
def test_plain_absolute_paths_take_the_shortcut(location):
    assert _plainly_absolute(location) and normalize_location(location) == location


@pytest.mark.parametrize("location", ["/", "/a/", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/a/s3://b",
                                      " /a", "a/b", ""])
def test_everything_else_goes_through_the_rules(location):
    assert not _plainly_absolute(location)


def test_normalize_location_rejects_other_schemes():
    with pytest.raises(InvalidLocation) as e:
        normalize_location("viewfs://cluster/t")
    assert str(e.value) == ("'viewfs://cluster/t': unsupported scheme 'viewfs': use a local path, s3://bucket/path "
                            "or hdfs://namenode:port/path")


@pytest.mark.parametrize("uri, expected", [
    ("/data/t/", "/data/t"),
    ("file:/data/t", "/data/t"),
    ("file:///data/t/", "/data/t"),
    ("s3a://bucket/wh/t/", "s3://bucket/wh/t"),
    ("s3://bucket", "s3://bucket"),
    ("file:///", "/"),
])
def test_every_spelling_of_a_location_normalizes_to_the_file_it_names(uri, expected):
    assert normalize_location(uri, relative_ok=False) == expected


@pytest.mark.parametrize("uri, message", [
    ("http://host/t", "unsupported scheme 'http'"),
    ("file://host/t", "file URIs with a host"),
    ("file:t", "must hold an absolute path"),
    ("/data/t/../other", "'.', '..' and empty path segments"),
    ("s3://bucket/a//b", "'.', '..' and empty path segments"),
    ("relative/t", "not an absolute location"),
    ("hdfs:///wh/t", "an hdfs:// location names its NameNode"),
    ("hdfs://user@nn:8020/t", "an hdfs:// location names its NameNode"),
    ("hdfs://nn:port/t", "'nn:port' is not a NameNode's host:port"),
    ("hdfs://nn:8020/wh/../t", "'.', '..' and empty path segments"),
    ("", "an empty location"),
])
def test_locations_that_could_name_another_file_are_refused(uri, message):
    with pytest.raises(InvalidLocation, match=message):
        normalize_location(uri, relative_ok=False)


def test_a_name_that_ends_in_whitespace_is_another_file(fio):
    io, root = fio
    plain, spaced = join(root, "w", "a"), join(root, "w", "a") + " "
    io.write_atomic(plain, b"kept")
    assert io.delete(spaced) == DeleteOutcome.ALREADY_ABSENT
    io.write_atomic(spaced, b"gone")
    assert io.read_bytes(spaced) == b"gone" and io.read_bytes(plain) == b"kept"
    assert io.delete(spaced) == DeleteOutcome.DELETED
    assert io.read_bytes(plain) == b"kept" and not io.exists(spaced)


def test_delete_many_reports_each_path(fio):
    io, root = fio
    present, absent, directory = join(root, "m", "a"), join(root, "m", "gone"), join(root, "m", "d")
    io.write_atomic(present, b"1")
    io.write_atomic(join(directory, "inside"), b"2")
    out = io.delete_many([present, absent, directory])
    assert out[present] == DeleteOutcome.DELETED and out[absent] == DeleteOutcome.ALREADY_ABSENT
    assert isinstance(out[directory], StorageError) and "is a directory" in str(out[directory])
    assert not io.exists(present) and io.exists(join(directory, "inside"))


@pytest.mark.parametrize("threads", [None, 1, 4])
def test_read_each_uses_every_file_in_order_and_gives_none_for_one_that_is_absent(fio, threads, monkeypatch):
    io, root = fio
    monkeypatch.setattr(fileio, "READS_AHEAD", 1)  # the threads finish their reads in any order
    paths = [join(root, "each", f"f{i}") for i in range(10)]
    for i, path in enumerate(paths):
        if i not in (4, 9):
            io.write_atomic(path, b"x" * i)
    assert read_each(io, paths, len, threads=threads) == [0, 1, 2, 3, None, 5, 6, 7, 8, None]
    assert read_each(io, [], len, threads=threads) == []


class _RemoteFileIO(MemoryFileIO):
    """An in-memory store taken for a remote one: records the thread of each read, and fails one path."""

    scheme = "s3"

    def __init__(self, failing: str | None = None):
        super().__init__()
        self.failing, self.threads = failing, []

    def read_bytes(self, path: str) -> bytes:
        self.threads.append(threading.current_thread().name)
        if path == self.failing:
            raise StorageError(path, "cannot read: Access Denied")
        return super().read_bytes(path)


def test_read_each_reads_remote_files_on_threads_and_local_ones_on_the_calling_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(fileio, "READS_AHEAD", 1)
    remote = _RemoteFileIO()
    paths = [f"/mem/t/snapshot-{i}" for i in range(40)]
    for path in paths:
        remote.put(path, path.encode())
    assert read_each(remote, paths, bytes.decode) == paths
    assert len(remote.threads) == 40 and all(t.startswith("lakesweep-read") for t in remote.threads)

    class Local(ArrowFileIO):
        def read_bytes(self, path):
            remote.threads.append(threading.current_thread().name)
            return super().read_bytes(path)

    local = [str(tmp_path / f"f{i}") for i in range(40)]
    for path in local:
        open(path, "wb").close()
    remote.threads.clear()
    monkeypatch.setattr(fileio, "on_local_disk", lambda paths: True)
    assert read_each(Local("file"), local, len) == [0] * 40
    assert remote.threads == [threading.current_thread().name] * 40
    monkeypatch.setattr(fileio, "on_local_disk", lambda paths: False)  # a network file system: threads
    remote.threads.clear()
    assert read_each(Local("file"), local, len) == [0] * 40
    assert all(t.startswith("lakesweep-read") for t in remote.threads)


def test_files_in_memory_are_read_on_the_calling_thread_whatever_their_locations():
    io = MemoryFileIO()
    io.put("mem://t/snapshot-1", b"{}")
    assert fileio.read_threads(io, "mem://t/snapshot-1") == 1
    assert read_each(io, ["mem://t/snapshot-1", "mem://t/snapshot-2"], len) == [2, None]


def test_read_each_raises_a_file_it_cannot_read_and_never_takes_it_for_absent(monkeypatch):
    monkeypatch.setattr(fileio, "READS_AHEAD", 1)
    paths = [f"/mem/t/snapshot-{i}" for i in range(40)]
    remote = _RemoteFileIO(failing=paths[7])
    for path in paths:
        remote.put(path, b"{}")
    for threads in (1, 4):
        with pytest.raises(StorageError) as e:
            read_each(remote, paths, len, threads=threads)
        assert e.value.path == paths[7]


def test_create_if_absent_never_replaces(fio):
    io, root = fio
    p = join(root, "snapshot", "snapshot-7")
    io.create_if_absent(p, b"first")
    with pytest.raises(FileExistsError):
        io.create_if_absent(p, b"second")
    assert io.read_bytes(p) == b"first"
    assert [f.path for f in io.list(join(root, "snapshot"))] == [p]  # no temporary file left behind


@pytest.fixture(params=["local", "memory", pytest.param("hdfs", marks=pytest.mark.java)])
def mover(request, tmp_path):
    """The stores that quarantine by moving a file (one rename); S3 quarantines in its own ways."""
    if request.param == "local":
        return ArrowFileIO("file"), str(tmp_path)
    if request.param == "hdfs":
        import uuid

        from lakesweep.engine.fileio import fileio_for

        root = f"{request.getfixturevalue('hdfs')}/mover-{uuid.uuid4().hex[:8]}"
        return fileio_for(root), root
    return MemoryFileIO(clock=lambda: 1000), "/mem/root"


def test_quarantine_moves_a_file_aside_and_restore_brings_it_back(mover):
    io, root = mover
    p, q = join(root, "data", "f.parquet"), join(root, "_lakesweep_quarantine", "p1", "data", "f.parquet")
    io.write_atomic(p, b"rows")
    assert io.quarantine(p, q) == (MoveOutcome.MOVED, q)
    assert not io.exists(p) and io.read_bytes(q) == b"rows"
    assert io.quarantine(p, q) == (MoveOutcome.ALREADY_MOVED, q)  # a retry after the move: idempotent
    assert io.restore(p, q) is MoveOutcome.MOVED
    assert io.read_bytes(p) == b"rows" and not io.exists(q)
    assert io.restore(p, q) is MoveOutcome.ALREADY_MOVED
    assert io.quarantine(join(root, "nope"), join(root, "q", "nope")) == (MoveOutcome.ABSENT, join(root, "q", "nope"))


def test_restore_never_replaces_a_file_written_again(mover):
    io, root = mover
    p, q = join(root, "f"), join(root, "q", "f")
    io.write_atomic(p, b"old")
    io.quarantine(p, q)
    io.write_atomic(p, b"new")
    with pytest.raises(FileExistsError):
        io.restore(p, q)
    assert io.read_bytes(p) == b"new" and io.read_bytes(q) == b"old"


def test_a_move_never_replaces_a_file_and_refuses_a_directory(mover):
    io, root = mover
    p, q = join(root, "d", "f"), join(root, "q", "deep", "er", "f")
    io.write_atomic(p, b"mine")
    io.write_atomic(q, b"theirs")
    with pytest.raises(FileExistsError):
        io.move_no_replace(p, q)
    assert io.read_bytes(p) == b"mine" and io.read_bytes(q) == b"theirs"
    with pytest.raises(StorageError, match="is a directory; lakesweep moves files only"):
        io.move_no_replace(join(root, "d"), join(root, "q2", "d"))
    assert io.read_bytes(p) == b"mine"


def test_moving_a_file_that_is_not_there_creates_nothing(mover):
    io, root = mover
    assert io.move_no_replace(join(root, "a", "nope"), join(root, "q", "a", "nope")) is MoveOutcome.ABSENT
    assert not io.exists(join(root, "q"))


def test_local_move_finishes_a_link_left_by_an_interrupted_move(tmp_path):
    import os

    src, dst = tmp_path / "f", tmp_path / "q" / "f"
    src.write_bytes(b"x")
    dst.parent.mkdir()
    os.link(src, dst)  # what a move through link and unlink leaves when it stops between the two
    assert ArrowFileIO("file").move_no_replace(str(src), str(dst)) is MoveOutcome.MOVED
    assert not src.exists() and dst.read_bytes() == b"x"


def test_a_path_is_on_a_local_disk_by_the_longest_mount_holding_it(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\n"
                      "server:/export /mnt/nfs nfs4 rw 0 0\n"
                      "tmpfs /mnt/nfs/scratch tmpfs rw 0 0\n"
                      "s3fs /mnt/my\\040bucket fuse.s3fs rw 0 0\n")
    local = functools.partial(on_local_disk, mounts=str(mounts))
    assert local(["/data/t"]) and local(["/mnt/nfs/scratch/t", "/data/t"]) and local(["/mnt/nfsx/t"])
    assert not local(["/mnt/nfs/t"]) and not local(["/data/t", "/mnt/nfs"]) and not local(["/mnt/my bucket/t"])
    assert local(["/mnt/my/t"])
    assert not local(["/data/t"], mounts=str(tmp_path / "no-such-table"))  # unknown: not taken for local
