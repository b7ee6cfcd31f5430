"""Storage behind a small interface: local paths and ``s3://`` through pyarrow.fs, ``hdfs://`` through
hdfs-native (``engine.hdfs_fileio``), and an in-memory twin.

Paths are full location strings: ``/abs/path`` (or ``file:/abs/path``), ``s3://bucket/key`` and
``hdfs://namenode:port/path``.
A ``FileIO`` pickles (Spark ships it to executors): it keeps only its configuration and builds the
pyarrow file system again on the other side.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import enum
import io
import itertools
import os
import posixpath
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from lakesweep.engine.errors import (AtomicCreateUnsupported, DeleteUnconfirmed, InvalidLocation, QuarantineUnsupported,
                                     StorageError)

T = TypeVar("T")


class DeleteOutcome(enum.StrEnum):
    DELETED = "DELETED"
    ALREADY_ABSENT = "ALREADY_ABSENT"


class MoveOutcome(enum.StrEnum):
    """What moving a file without replacing another did (``FileIO.move_no_replace``): a quarantine and its restore."""

    MOVED = "MOVED"  # moved now
    ALREADY_MOVED = "ALREADY_MOVED"  # the source is gone and the destination there: an earlier attempt moved it
    ABSENT = "ABSENT"  # neither is there: nothing to move


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    mtime_ms: int | None
    is_dir: bool = False


def join(base: str, *parts: str) -> str:
    """Join location parts with '/', keeping a scheme such as ``s3://`` intact."""
    out = base.rstrip("/")
    for part in parts:
        part = part.strip("/")
        if part:
            out = f"{out}/{part}"
    return out


def normalize_location(location: str, *, relative_ok: bool = True) -> str:
    """The one canonical form of a location, used for table roots, external roots and external file paths.

    ``/abs``, ``file:/abs`` and ``file:///abs`` become the plain absolute path; ``s3://``, ``s3a://`` and
    ``s3n://`` become ``s3://bucket/key``; ``hdfs://namenode:port/path`` stays as it is spelled (the scheme
    in lower case). No trailing '/'. A relative path is made absolute against the
    working directory only when ``relative_ok`` (a user's command-line input); locations read from
    metadata must be absolute. ``.``/``..`` and empty segments are refused in URIs and absolute paths
    rather than collapsed, and whitespace at either end is kept (a file may be named so), so no location
    can name a different file than it spells. Anything else (``http://``, ``file://host/``) raises
    ``InvalidLocation``.
    """
    if _plainly_absolute(location):
        return location  # what ``_normalized`` returns it as, found without splitting it
    return _normalized(location, relative_ok)


def _normalized(location: str, relative_ok: bool) -> str:
    """``normalize_location`` by its rules, one by one. Never trimmed: whitespace at either end is part of a
    name (``data-1.orc `` is not ``data-1.orc``)."""
    if not isinstance(location, str) or not location.strip():
        raise InvalidLocation(str(location), "an empty location")
    if location.startswith("file:"):
        rest = location[len("file:"):]
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):
                raise InvalidLocation(location, "file URIs with a host (file://host/...) are not supported; "
                                                "use file:///path or a plain path")
        if not rest.startswith("/"):
            raise InvalidLocation(location, "a file: URI must hold an absolute path")
        return _plain_absolute(rest, location)
    if "://" in location:
        scheme, rest = location.split("://", 1)
        if scheme.lower() == "hdfs":
            return _hdfs_location(rest, location)
        if scheme.lower() not in ("s3", "s3a", "s3n"):
            raise InvalidLocation(location, f"unsupported scheme {scheme!r}: use a local path, s3://bucket/path "
                                            "or hdfs://namenode:port/path")
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise InvalidLocation(location, "no bucket")
        key = key.rstrip("/")
        if key:
            _check_segments(key.split("/"), location)
        return f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    if not location.startswith("/"):
        if not relative_ok:
            raise InvalidLocation(location, "not an absolute location")
        return os.path.abspath(location)
    return _plain_absolute(location, location)


def _plainly_absolute(location) -> bool:
    """Whether ``location`` is already a normalized plain absolute path (the form apply's executors hand
    every local delete): a ``/`` first, no ``://``, no trailing ``/``, and no empty, ``.`` or ``..`` segment."""
    return (type(location) is str and location[:1] == "/" and location[-1] != "/"
            and "//" not in location and "/./" not in location and "/../" not in location
            and not location.endswith(("/.", "/..")) and ":/" not in location)


# File systems whose data lives on this machine's own disks or memory: a system call there takes microseconds
# to a fraction of a millisecond, and many threads only contend for the interpreter (network file systems and
# FUSE mounts wait on a server instead).
LOCAL_DISK_TYPES = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "reiserfs", "bcachefs",
                              "tmpfs", "ramfs", "overlay"})


def on_local_disk(paths: Sequence[str], mounts: str = "/proc/self/mounts") -> bool:
    """Whether every one of ``paths`` (plain absolute paths) lies on a file system of ``LOCAL_DISK_TYPES``, by
    the mount table (the longest mount point holding each path's real location); False where the table cannot
    be read, as on systems other than Linux."""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as f:
            table = [line.split()[1:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return False
    points = {_unescaped(point): fstype for point, fstype in table}  # a later mount hides an earlier one
    for path in paths:
        real = os.path.realpath(path)
        holder = max((p for p in points if p == "/" or real == p or real.startswith(p + "/")), key=len, default=None)
        if holder is None or points[holder] not in LOCAL_DISK_TYPES:
            return False
    return True


def _unescaped(point: str) -> str:
    """A mount point as the mount table spells it, with its octal escapes (space, tab, newline, backslash)
    made the characters again."""
    for escape, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        point = point.replace(escape, char)
    return point


def _hdfs_location(rest: str, location: str) -> str:
    authority, _, path = rest.partition("/")
    if not authority or "@" in authority:
        raise InvalidLocation(location, "an hdfs:// location names its NameNode: hdfs://namenode:port/path "
                                        "(no user, no default file system)")
    host, colon, port = authority.rpartition(":")
    if colon and (not host or not port.isdigit()):
        raise InvalidLocation(location, f"{authority!r} is not a NameNode's host:port")
    path = path.rstrip("/")
    if path:
        _check_segments(path.split("/"), location)
    return f"hdfs://{authority}/{path}" if path else f"hdfs://{authority}"


def _check_segments(segments, location: str) -> None:
    for seg in segments:
        if seg in ("", ".", ".."):
            raise InvalidLocation(location, "'.', '..' and empty path segments are not allowed")


def _plain_absolute(path: str, location: str) -> str:
    trimmed = path.rstrip("/")
    if not trimmed:
        return "/"
    _check_segments(trimmed.split("/")[1:], location)
    return trimmed


def is_filesystem_root(location: str) -> bool:
    """``/`` or ``hdfs://namenode`` (after normalizing): never acceptable as a table root or an external data
    root."""
    return location == "/" or (location.startswith("hdfs://") and "/" not in location[len("hdfs://"):])


class FileIO(abc.ABC):
    """The storage operations lakesweep needs, and nothing more.

    Contract shared by every implementation (tests/engine/test_fileio_contract.py runs it against each):

    * ``read_bytes`` raises ``FileNotFoundError`` when the file does not exist, ``StorageError`` when it
      exists but cannot be read. Nothing is ever reported as missing because it could not be read.
    * ``open_input`` opens a file for reading in parts (a seekable binary file, for readers such as
      Parquet's that fetch only what they need), with the same errors as ``read_bytes``.
    * ``list`` returns the direct children (or all files below, when ``recursive``), sorted by path;
      a directory that does not exist has no children.
    * ``delete`` removes one file, never a directory. Deleting an absent file is the outcome
      ``ALREADY_ABSENT``, not an error: deletion is idempotent.
    * ``delete_empty_dir`` removes a directory only if it is empty (never recursively) and says whether it did.
    * ``write_atomic`` makes the new content visible all at once (readers see the old or the new bytes).
    * ``delete_many`` deletes each path as ``delete`` does and returns, per path, its outcome or the
      ``StorageError`` that stopped it; one path's failure does not stop the others. On S3 it sends
      DeleteObjects in batches (``engine.s3_bulk``: what each outcome means there).
    * ``create_if_absent`` writes a new file all at once and raises ``FileExistsError`` when the path
      already exists, leaving it untouched: two writers racing for ``snapshot-N`` cannot both win (on S3, a
      path that already holds exactly ``data`` is this writer's own: a retried PUT whose answer was lost). A store
      that cannot guarantee this (``supports_create_if_absent`` false, or an S3 store that ignores
      ``If-None-Match: *``) raises ``AtomicCreateUnsupported`` instead, and commits there are refused.
    """

    scheme: str = "file"

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    @abc.abstractmethod
    def open_input(self, path: str) -> BinaryIO: ...

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def info(self, path: str) -> FileInfo | None:
        """Size and modification time of a file, ``None`` if it does not exist."""

    @abc.abstractmethod
    def list(self, path: str, *, recursive: bool = False) -> list[FileInfo]: ...

    def list_pages(self, path: str, *, recursive: bool = False) -> Iterator[list[FileInfo]]:
        """``list`` a page at a time, for listings too large to hold: the same files (and, unless
        ``recursive``, the same sub-directories) in pages, each sorted by path. Here one page; on S3 each
        ListObjectsV2 response (``engine.s3_listing``)."""
        found = self.list(path, recursive=recursive)
        yield [f for f in found if not f.is_dir] if recursive else found

    @abc.abstractmethod
    def delete(self, path: str) -> DeleteOutcome: ...

    @abc.abstractmethod
    def delete_empty_dir(self, path: str) -> bool: ...

    @abc.abstractmethod
    def write_atomic(self, path: str, data: bytes) -> None: ...

    def write_atomic_from(self, path: str, fill: Callable[[BinaryIO], None]) -> None:
        """``write_atomic`` of the bytes ``fill(stream)`` writes to ``stream``. Here they are gathered in memory
        first; on local disk they go straight to the temporary file that is then renamed, so a large file
        (a plan of millions of actions) is never held whole. When ``fill`` raises, nothing is written."""
        buffer = io.BytesIO()
        fill(buffer)
        self.write_atomic(path, buffer.getvalue())

    supports_create_if_absent: bool = False

    def create_if_absent(self, path: str, data: bytes) -> None:
        raise AtomicCreateUnsupported(path, type(self).__name__)

    def move_no_replace(self, src: str, dst: str) -> MoveOutcome:
        """Move the file ``src`` to ``dst`` (making ``dst``'s directories) without ever replacing a file there:
        ``FileExistsError`` when both exist (nothing moved), ``ALREADY_MOVED`` when only ``dst`` does,
        ``ABSENT`` when neither does. Local and HDFS: one rename, nothing copied. A store that cannot
        raises ``QuarantineUnsupported``."""
        raise QuarantineUnsupported(src, type(self).__name__)

    def quarantine(self, path: str, dest: str) -> tuple[MoveOutcome, str]:
        """Put ``path`` aside so that ``restore`` can bring it back: what happened, and where the file is now
        (what the journal keeps): ``dest`` after a move; on a versioned S3 bucket, a
        ``engine.quarantine.VersionedDelete``'s ``where()``."""
        return self.move_no_replace(path, dest), dest

    def restore(self, path: str, where: str) -> MoveOutcome:
        """Bring a file ``quarantine`` put at ``where`` back to ``path``; ``FileExistsError``, with nothing
        changed, when a file is at ``path`` again."""
        return self.move_no_replace(where, path)

    def purge_version(self, path: str, versioned) -> DeleteOutcome:
        """Delete for good the version of ``path`` that a versioned delete hid (``versioned``, an
        ``engine.quarantine.VersionedDelete``: the version and its delete marker): ``ALREADY_ABSENT`` when
        neither is there any more. A store without versions raises ``QuarantineUnsupported``."""
        raise QuarantineUnsupported(path, type(self).__name__, "it keeps no versions to purge")

    def check_create_if_absent(self, location: str) -> str:
        """How files under ``location`` (a table's root) are created only if absent, for a committer's check and
        ``doctor``; ``AtomicCreateUnsupported``, naming the alternatives, when this store cannot. On S3 this
        asks the store, once per endpoint and bucket, without writing under ``location``."""
        if not self.supports_create_if_absent:
            raise AtomicCreateUnsupported(location, type(self).__name__)
        return f"{type(self).__name__} creates a file only if it is absent"

    bulk_deletes: bool = False  # whether delete_many sends fewer requests than one per path

    def delete_many(self, paths: Iterable[str]) -> dict[str, DeleteOutcome | StorageError]:
        return {path: outcome for path, (outcome, _) in self.delete_batch(paths).items()}

    def delete_batch(self, paths: Iterable[str]) -> dict[str, tuple[DeleteOutcome | StorageError, int]]:
        """``delete_many`` with the number of attempts each path took (one here: a loop over ``delete``)."""
        out: dict[str, tuple[DeleteOutcome | StorageError, int]] = {}
        for path in paths:
            try:
                out[path] = (self.delete(path), 1)
            except StorageError as e:
                out[path] = (e, 1)
        return out


READ_THREADS = 16  # remote files read at once: on S3 and HDFS each read waits on the network
READS_AHEAD = 4  # files ``ordered_reads`` keeps in flight per thread


def read_threads(fileio: FileIO, path: str) -> int:
    """How many threads read small files of ``fileio`` under ``path`` best: ``READ_THREADS`` where each read
    waits on a server (S3, HDFS, a network file system), one on this machine's own disks (``on_local_disk``),
    where a read takes microseconds and threads only contend for the interpreter (2 to 4 times slower), and
    one in memory (``MemoryFileIO``, whose locations need not be paths)."""
    if fileio.scheme == "memory":
        return 1
    return 1 if fileio.scheme == "file" and on_local_disk([normalize_location(path)]) else READ_THREADS


def read_each(fileio: FileIO, paths: Sequence[str], use: Callable[[bytes], T], *,
              threads: int | None = None) -> list[T | None]:
    """``use(data)`` of each file of ``paths``, in their order; ``None`` for a file that does not exist. Each
    file is dropped once used. Any other error of a read (``StorageError``) is raised, as ``read_bytes``
    raises it. The files are read by ``ordered_reads`` on ``threads`` threads (``read_threads``), so that
    on a remote store many small files, such as a table's snapshot files, cost about as many round trips
    as one."""
    if not paths:
        return []

    def read(path: str) -> T | None:
        try:
            data = fileio.read_bytes(path)
        except FileNotFoundError:
            return None
        return use(data)

    threads = read_threads(fileio, paths[0]) if threads is None else threads
    return [value for _, value in ordered_reads(paths, read, threads=threads)]


def ordered_reads(paths: Iterable[str], read: Callable[[str], T], *, threads: int) -> Iterator[tuple[str, T]]:
    """``(path, read(path))`` for each of ``paths``, in order, the reads made on ``threads`` threads up to
    ``READS_AHEAD`` files a thread ahead of the consumer (one thread: each read when it is asked for). The
    first read that fails raises its error where its file's turn comes, after the files before it; reads
    not started by then are not made."""
    if threads <= 1:
        for path in paths:
            yield path, read(path)
        return
    todo = iter(paths)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="lakesweep-read")
    try:
        pending = collections.deque((path, pool.submit(read, path))
                                    for path in itertools.islice(todo, threads * READS_AHEAD))
        while pending:
            path, future = pending.popleft()
            data = future.result()
            for more in itertools.islice(todo, 1):
                pending.append((more, pool.submit(read, more)))
            yield path, data
    finally:
        pool.shutdown(cancel_futures=True)


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where and as whom to reach S3: the FileIO's properties first, then the AWS environment."""

    endpoint: str | None
    region: str
    access_key: str | None
    secret_key: str | None = dataclasses.field(repr=False)
    session_token: str | None = dataclasses.field(repr=False)
    path_style: bool


def resolve_s3_settings(properties: Mapping[str, str], env: Mapping[str, str] | None = None) -> S3Settings:
    env = os.environ if env is None else env
    p = properties
    key = p.get("access_key") or env.get("AWS_ACCESS_KEY_ID")
    secret = p.get("secret_key") or env.get("AWS_SECRET_ACCESS_KEY")
    return S3Settings(
        endpoint=p.get("endpoint") or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"),
        region=(p.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or profile_region(env)
                or "us-east-1"),
        access_key=key if key and secret else None,
        secret_key=secret if key and secret else None,
        session_token=(p.get("session_token") or env.get("AWS_SESSION_TOKEN")) if key and secret else None,
        path_style=p.get("path_style", "true").lower() == "true",
    )


class ArrowFileIO(FileIO):
    """Local file systems and S3-compatible object stores through ``pyarrow.fs``.

    S3 settings come from the properties or the usual AWS environment: ``AWS_ENDPOINT_URL`` (or
    ``AWS_ENDPOINT_URL_S3``), ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, then the region of the profile
    (``AWS_PROFILE``, else ``default``) in ``AWS_CONFIG_FILE`` (``~/.aws/config``). Credentials are found
    where the file system is built, on the driver and on each executor: explicit properties (``access_key``,
    ``secret_key``, ``session_token``: an Iceberg catalog's), else ``AWS_ACCESS_KEY_ID`` /
    ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, else the AWS SDK's default chain inside pyarrow:
    the profile's keys in the shared credentials and config files (``AWS_SHARED_CREDENTIALS_FILE``,
    ``AWS_CONFIG_FILE``), then a container's or an EC2 instance's role.
    On S3, ``delete_many`` sends DeleteObjects through botocore (``engine.s3_bulk``), paced by the
    ``RequestBudget`` given to ``with_budget``.
    """

    def __init__(self, scheme: str = "file", properties: Mapping[str, str] | None = None):
        if scheme not in ("file", "s3"):
            raise ValueError(f"unsupported scheme {scheme!r}")
        self.scheme = scheme
        self.properties = dict(properties or {})
        self.budget = None  # a RequestBudget (engine.s3_bulk), set by with_budget
        self._fs = None
        self._client = None
        self._lock = threading.Lock()
        self._limiter = None
        self._deleter = None
        self._quarantiner = None
        self._modes: dict[str, str] = {}  # quarantine mode by bucket (engine.s3_quarantine)

    def __getstate__(self):
        return {"scheme": self.scheme, "properties": self.properties, "budget": self.budget}

    def __setstate__(self, state):
        self.scheme = state["scheme"]
        self.properties = state["properties"]
        self.budget = state.get("budget")
        self._fs = None
        self._client = None
        self._lock = threading.Lock()
        self._limiter = None
        self._deleter = None
        self._quarantiner = None
        self._modes: dict[str, str] = {}  # quarantine mode by bucket (engine.s3_quarantine)

    @property
    def bulk_deletes(self) -> bool:
        return self.scheme == "s3"

    def with_budget(self, budget) -> "ArrowFileIO":
        """A copy whose requests keep to ``budget`` (a ``RequestBudget``), with a pacer of its own."""
        copy = ArrowFileIO(self.scheme, self.properties)
        copy.budget = budget
        return copy

    @property
    def limiter(self):
        from lakesweep.engine.s3_bulk import RateLimiter

        with self._lock:
            if self._limiter is None:
                self._limiter = RateLimiter(None if self.budget is None else self.budget.max_requests_per_second)
            return self._limiter

    def delete_batch(self, paths: Iterable[str]) -> dict[str, tuple[DeleteOutcome | StorageError, int]]:
        if self.scheme != "s3":
            return super().delete_batch(paths)
        from lakesweep.engine.s3_bulk import DEFAULT_DELETE_BATCH, S3BulkDeleter
        from lakesweep.engine.s3_client import s3_client

        paths = list(paths)
        for path in paths:
            self._native(path)  # an s3:// location, or ValueError
        limiter = self.limiter
        with self._lock:
            if self._deleter is None:
                batch = DEFAULT_DELETE_BATCH if self.budget is None else self.budget.delete_batch
                client = s3_client(resolve_s3_settings(self.properties), max_attempts=1)  # it retries itself
                self._deleter = S3BulkDeleter(client, limiter, batch=batch)
        return self._deleter.delete(paths)

    def move_no_replace(self, src: str, dst: str) -> MoveOutcome:
        if self.scheme != "file":
            return self._s3_quarantine_copy(src).move(src, dst)  # a conditional CopyObject, then a delete
        s, d = self._native(src), self._native(dst)
        try:
            return _move_local(s, d)
        except (FileExistsError, FileNotFoundError):
            raise
        except OSError as e:
            raise StorageError(src, f"cannot move to {dst}: {e}") from e

    # Quarantine on S3 (engine.s3_quarantine): versioned buckets keep the deleted version, others get a copy.

    def _s3_quarantine(self):
        from lakesweep.engine.s3_client import s3_client
        from lakesweep.engine.s3_quarantine import S3Quarantine

        limiter = self.limiter
        with self._lock:
            if self._quarantiner is None:
                client = s3_client(resolve_s3_settings(self.properties), max_attempts=1)  # it retries itself
                self._quarantiner = S3Quarantine(client, limiter)
            return self._quarantiner

    def quarantine_mode(self, path: str) -> str:
        """How ``quarantine`` works for ``path`` on S3: ``"versioned"`` when its bucket's versioning is enabled,
        else ``"copy"``; asked once per bucket by this FileIO (GetBucketVersioning)."""
        from lakesweep.engine.s3_quarantine import versioning_mode

        bucket = self._native(path).partition("/")[0]
        with self._lock:
            if bucket in self._modes:
                return self._modes[bucket]
        mode = versioning_mode(self._s3_quarantine().client, bucket)
        with self._lock:
            return self._modes.setdefault(bucket, mode)

    def _s3_quarantine_copy(self, path: str):
        """The S3 quarantine, once the store is found to honour ``If-None-Match: *`` on CopyObject."""
        self._conditional_copy(path)
        return self._s3_quarantine()

    def _conditional_copy(self, path: str):
        from lakesweep.engine.s3_quarantine import conditional_copy_support

        bucket, _, key = self._native(path).partition("/")
        found = conditional_copy_support(resolve_s3_settings(self.properties), bucket, _scratch_prefix(key),
                                         client=self._s3_quarantine().client)
        if not found.supported:
            raise QuarantineUnsupported(path, found.store, f"a copy could replace an object: {found.evidence}")
        return found

    def check_quarantine(self, location: str) -> str:
        """How ``apply --quarantine`` works for a table at ``location`` on S3, for ``doctor``: the bucket's mode,
        and in copy mode the conditional-copy probe's evidence (``QuarantineUnsupported`` when the store ignores
        the header)."""
        from lakesweep.engine.s3_quarantine import describe_mode

        mode = self.quarantine_mode(location)
        if mode == "versioned":
            return describe_mode(mode)
        return f"{describe_mode(mode)}; {self._conditional_copy(location).evidence}"

    def quarantine(self, path: str, dest: str) -> tuple[MoveOutcome, str]:
        if self.scheme == "s3" and self.quarantine_mode(path) == "versioned":
            return self._s3_quarantine().quarantine_versioned(path, dest)
        return super().quarantine(path, dest)

    def restore(self, path: str, where: str) -> MoveOutcome:
        from lakesweep.engine.quarantine import VersionedDelete

        versioned = VersionedDelete.parse(where)
        if versioned is None:
            return super().restore(path, where)
        if self.scheme != "s3":
            raise StorageError(path, f"{where} names an S3 version, and {path} is not on S3")
        return self._s3_quarantine().restore_versioned(path, versioned)

    def purge_version(self, path: str, versioned) -> DeleteOutcome:
        if self.scheme != "s3":
            return super().purge_version(path, versioned)
        return self._s3_quarantine().purge_version(path, versioned)

    def quarantine_batch(self, pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[MoveOutcome | StorageError, str,
                                                                                    int]]:
        """``quarantine`` for many ``(path, dest)`` pairs: ``{path: (outcome or StorageError, where, attempts)}``.
        On S3, one ListObjectVersions per directory and DeleteObjects (versioned bucket), or a CopyObject per file
        and DeleteObjects (``engine.s3_quarantine``); elsewhere one ``quarantine`` per file."""
        pairs = list(dict(pairs).items())
        if self.scheme != "s3":
            out = {}
            for path, dest in pairs:
                try:
                    out[path] = (*self.quarantine(path, dest), 1)
                except StorageError as e:
                    out[path] = (e, dest, 1)
                except FileExistsError:
                    out[path] = (StorageError(path, f"not quarantined: a file is already at {dest}; both are kept"),
                                 dest, 1)
            return out
        from lakesweep.engine.s3_bulk import DEFAULT_DELETE_BATCH

        size = DEFAULT_DELETE_BATCH if self.budget is None else self.budget.delete_batch
        by_bucket: dict[str, list[tuple[str, str]]] = {}
        for path, dest in pairs:
            by_bucket.setdefault(self._native(path).partition("/")[0], []).append((path, dest))
        out: dict = {}
        for bucket, in_bucket in by_bucket.items():
            for i in range(0, len(in_bucket), size):  # at most delete_batch keys per DeleteObjects
                part = in_bucket[i:i + size]
                if self.quarantine_mode(part[0][0]) == "versioned":
                    out.update(self._s3_quarantine().quarantine_versioned_batch(bucket, part))
                else:
                    out.update(self._s3_quarantine_copy(part[0][0]).move_batch(part, self.delete_batch))
        return out

    def __eq__(self, other):
        return isinstance(other, ArrowFileIO) and (self.scheme, self.properties) == (
            other.scheme,
            other.properties,
        )

    def __hash__(self):
        return hash((self.scheme, tuple(sorted(self.properties.items()))))

    def __repr__(self):
        shown = {k: v for k, v in self.properties.items() if "secret" not in k and "token" not in k}
        return f"ArrowFileIO({self.scheme!r}, {shown})"

    @property
    def fs(self):
        with self._lock:
            if self._fs is None:
                self._fs = self._make_fs()
            return self._fs

    def _make_fs(self):
        from pyarrow import fs as pafs

        if self.scheme == "file":
            return pafs.LocalFileSystem()
        r = resolve_s3_settings(self.properties)
        kwargs = {"region": r.region}
        if r.access_key and r.secret_key:
            kwargs["access_key"] = r.access_key
            kwargs["secret_key"] = r.secret_key
            if r.session_token:
                kwargs["session_token"] = r.session_token
        if r.endpoint:
            scheme, _, rest = r.endpoint.partition("://")
            if rest:
                kwargs["scheme"] = scheme
                kwargs["endpoint_override"] = rest
            else:
                kwargs["endpoint_override"] = r.endpoint
        if r.path_style:
            kwargs["force_virtual_addressing"] = False
        return pafs.S3FileSystem(**kwargs)

    def _native(self, path: str) -> str:
        if self.scheme == "s3":
            if not path.startswith("s3://"):
                raise ValueError(f"not an s3:// location: {path!r}")
            return path[len("s3://"):]
        return normalize_location(path)

    def _full(self, native: str) -> str:
        return "s3://" + native if self.scheme == "s3" else native

    def read_bytes(self, path: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._native(path)) as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            if _is_not_found(e):
                raise FileNotFoundError(path) from e
            raise StorageError(path, f"cannot read: {e}") from e

    def open_input(self, path: str) -> BinaryIO:
        try:
            return self.fs.open_input_file(self._native(path))
        except FileNotFoundError:
            raise
        except OSError as e:
            if _is_not_found(e):
                raise FileNotFoundError(path) from e
            raise StorageError(path, f"cannot open: {e}") from e

    def info(self, path: str) -> FileInfo | None:
        from pyarrow import fs as pafs

        try:
            fi = self.fs.get_file_info(self._native(path))
        except OSError as e:
            raise StorageError(path, f"cannot stat: {e}") from e
        if fi.type == pafs.FileType.NotFound:
            return None
        return self._to_info(fi)

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def _to_info(self, fi) -> FileInfo:
        from pyarrow import fs as pafs

        mtime = fi.mtime_ns // 1_000_000 if fi.mtime_ns is not None else None
        is_dir = fi.type == pafs.FileType.Directory
        return FileInfo(self._full(fi.path), 0 if is_dir else int(fi.size or 0), mtime, is_dir)

    def list(self, path: str, *, recursive: bool = False) -> list[FileInfo]:
        from pyarrow import fs as pafs

        selector = pafs.FileSelector(self._native(path), allow_not_found=True, recursive=recursive)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as e:
            if _is_not_found(e):
                return []
            raise StorageError(path, f"cannot list: {e}") from e
        return sorted((self._to_info(fi) for fi in infos), key=lambda f: f.path)

    def list_pages(self, path: str, *, recursive: bool = False) -> Iterator[list[FileInfo]]:
        if self.scheme != "s3":
            yield from super().list_pages(path, recursive=recursive)
            return
        from lakesweep.engine.s3_listing import list_pages

        self._native(path)  # an s3:// location, or ValueError
        yield from list_pages(self._s3(), path, recursive=recursive)

    def delete(self, path: str) -> DeleteOutcome:
        native = self._native(path)
        if self.scheme == "file":
            return self._unlink(path, native)
        return self._delete_object(path, native)

    def _delete_object(self, path: str, native: str) -> DeleteOutcome:
        """A HEAD, to tell ``DELETED`` from ``ALREADY_ABSENT``, then a DeleteObject, through botocore: absence
        is a 404's status code, never an error's text. Once the HEAD has found the object, a failed DELETE is
        ``DeleteUnconfirmed`` (the store may have acted; ``applier.actions.execute_with_retry``). pyarrow's
        ``delete_file`` is not used: it gives up on a reply slower than 3 s, sends a HEAD of its own and writes
        a directory marker object when a directory empties."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = native.partition("/")
        client = self._s3()
        try:
            self.limiter.acquire("HEAD")
            client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            if _http_status(e) != 404:
                raise StorageError(path, f"cannot stat: {e}") from e
            return self._absent_unless_directory(path, bucket, key)
        except BotoCoreError as e:
            raise StorageError(path, f"cannot stat: {e}") from e
        try:
            self.limiter.acquire("DELETE")
            client.delete_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as e:
            raise DeleteUnconfirmed(path, f"cannot delete, or the store's answer was lost: {e}") from e
        return DeleteOutcome.DELETED

    def _absent_unless_directory(self, path: str, bucket: str, key: str) -> DeleteOutcome:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.limiter.acquire("LIST")
            page = self._s3().list_objects_v2(Bucket=bucket, Prefix=key.rstrip("/") + "/", MaxKeys=1)
        except (ClientError, BotoCoreError) as e:
            raise StorageError(path, f"cannot stat: {e}") from e
        if page.get("KeyCount") or page.get("Contents") or page.get("CommonPrefixes"):
            raise StorageError(path, "is a directory; lakesweep deletes files only")
        return DeleteOutcome.ALREADY_ABSENT

    @staticmethod
    def _unlink(path: str, native: str) -> DeleteOutcome:
        """A local delete in one system call (a stat first would double the cost of a bulk phase)."""
        try:
            os.unlink(native)
            return DeleteOutcome.DELETED
        except (FileNotFoundError, NotADirectoryError):
            return DeleteOutcome.ALREADY_ABSENT
        except IsADirectoryError:
            raise StorageError(path, "is a directory; lakesweep deletes files only") from None
        except OSError as e:
            if isinstance(e, PermissionError) and os.path.isdir(native):  # unlink(2) of a directory on BSDs
                raise StorageError(path, "is a directory; lakesweep deletes files only") from None
            raise StorageError(path, f"cannot delete: {e.strerror or e}") from e

    def delete_empty_dir(self, path: str) -> bool:
        if self.scheme != "file":
            # Object stores have no real directories; Paimon's cleanup of "empty directories" does
            # nothing useful there (and is off by default, PR #3749).
            return False
        try:
            os.rmdir(self._native(path))
            return True
        except FileNotFoundError:
            return False
        except OSError:
            return False

    def write_atomic(self, path: str, data: bytes) -> None:
        if self.scheme == "file":
            self.write_atomic_from(path, lambda f: f.write(data))
            return
        try:
            with self.fs.open_output_stream(self._native(path)) as f:  # a PUT is atomic
                f.write(data)
        except OSError as e:
            raise StorageError(path, f"cannot write: {e}") from e

    def write_atomic_from(self, path: str, fill: Callable[[BinaryIO], None]) -> None:
        if self.scheme != "file":
            # gathered first: an object store's stream, closed by an error in ``fill``, would complete the upload
            super().write_atomic_from(path, fill)
            return
        native = self._native(path)
        try:
            parent = os.path.dirname(native)
            os.makedirs(parent, exist_ok=True)
            tmp = os.path.join(parent, f".{os.path.basename(native)}.{uuid.uuid4().hex}.tmp")
            try:
                with open(tmp, "wb") as f:
                    fill(f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, native)
            except BaseException:
                if os.path.exists(tmp):
                    os.remove(tmp)  # never leave the temporary file behind
                raise
        except OSError as e:
            raise StorageError(path, f"cannot write: {e}") from e

    # Locally, link(2); on S3, a PutObject with If-None-Match: * where the store honours it (engine.s3_conditional).
    supports_create_if_absent = True

    def _s3(self):
        from lakesweep.engine.s3_client import s3_client
        from lakesweep.engine.s3_conditional import CLIENT_ATTEMPTS

        with self._lock:
            if self._client is None:
                self._client = s3_client(resolve_s3_settings(self.properties), max_attempts=CLIENT_ATTEMPTS)
            return self._client

    def _conditional_put(self, bucket: str, scratch_prefix: str, path: str):
        from lakesweep.engine.s3_conditional import conditional_put_support

        found = conditional_put_support(resolve_s3_settings(self.properties), bucket, scratch_prefix,
                                        client=self._s3())
        if not found.supported:
            raise AtomicCreateUnsupported(path, found.store, found.evidence)
        return found

    def check_create_if_absent(self, location: str) -> str:
        if self.scheme == "file":
            return "link(2) of a complete temporary file: the name appears only if it is free"
        bucket, _, key = self._native(location).partition("/")
        found = self._conditional_put(bucket, _scratch_prefix(key), location)
        return f"PutObject with If-None-Match: * on {found.store}: {found.evidence}"

    def create_if_absent(self, path: str, data: bytes) -> None:
        if self.scheme == "s3":
            from lakesweep.engine.s3_conditional import put_if_absent

            bucket, _, key = self._native(path).partition("/")
            self._conditional_put(bucket, "", path)  # probed already when a committer checked the table
            put_if_absent(self._s3(), bucket, key, data, path=path)
            return
        native = self._native(path)
        parent = os.path.dirname(native)
        tmp = os.path.join(parent, f".{os.path.basename(native)}.{uuid.uuid4().hex}.tmp")
        try:
            os.makedirs(parent, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            # link(2) fails when the name exists, and the name appears with the whole content: the local
            # equivalent of Hadoop's rename without overwrite, which Paimon commits by.
            os.link(tmp, native)
        except FileExistsError:
            raise
        except OSError as e:
            raise StorageError(path, f"cannot create: {e}") from e
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def _scratch_prefix(table_key: str) -> str:
    """Where to probe a store for a table at ``table_key``: the warehouse root (``wh`` of ``wh/db.db/t``),
    else the table's parent; never inside the table."""
    parent = posixpath.dirname(table_key.strip("/"))
    return posixpath.dirname(parent) if parent.endswith(".db") else parent


def _http_status(e) -> int:
    return int((getattr(e, "response", None) or {}).get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _move_local(s: str, d: str) -> MoveOutcome:
    """``FileIO.move_no_replace`` on a local file system: ``renameat2(RENAME_NOREPLACE)``, or where the file
    system lacks it, a hard link and an unlink (a crash between them leaves both names of one file, which
    the next attempt finishes)."""
    if os.path.isdir(s) and not os.path.islink(s):
        raise StorageError(s, "is a directory; lakesweep moves files only")
    for _ in range(2):
        try:
            _rename_noreplace(s, d)
            return MoveOutcome.MOVED
        except FileNotFoundError:
            if not os.path.lexists(s):
                return MoveOutcome.ALREADY_MOVED if os.path.lexists(d) else MoveOutcome.ABSENT
            os.makedirs(os.path.dirname(d), exist_ok=True)
        except FileExistsError:
            if os.path.lexists(s) and os.path.samefile(s, d) and not os.path.islink(s):
                os.unlink(s)  # an earlier attempt linked it and stopped before the unlink
                return MoveOutcome.MOVED
            if not os.path.lexists(s):
                return MoveOutcome.ALREADY_MOVED
            raise FileExistsError(d) from None
    raise StorageError(s, f"cannot move to {d}: its directory keeps disappearing")


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def _rename_noreplace(s: str, d: str) -> None:
    import ctypes
    import errno

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(s), _AT_FDCWD, os.fsencode(d), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), s, None, d)
    if os.path.isdir(s) and not os.path.islink(s):
        raise IsADirectoryError(errno.EISDIR, "lakesweep moves files only", s)
    os.link(s, d, follow_symlinks=False)
    os.unlink(s)


def _is_not_found(e: OSError) -> bool:
    text = str(e).lower()
    return isinstance(e, FileNotFoundError) or "not found" in text or "no such file" in text or "nosuchkey" in text


class MemoryFileIO(FileIO):
    """An in-memory file system for unit tests. Directories exist while they hold files, or when made empty."""

    scheme = "memory"

    def __init__(self, clock=None):
        self.files: dict[str, tuple[bytes, int]] = {}
        self.empty_dirs: set[str] = set()
        self._clock = clock or (lambda: int(time.time() * 1000))

    def put(self, path: str, data: bytes, mtime_ms: int | None = None) -> None:
        self.files[path] = (bytes(data), self._clock() if mtime_ms is None else mtime_ms)

    def read_bytes(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path][0]

    def open_input(self, path: str) -> BinaryIO:
        return io.BytesIO(self.read_bytes(path))

    def info(self, path: str) -> FileInfo | None:
        if path in self.files:
            data, mtime = self.files[path]
            return FileInfo(path, len(data), mtime)
        if path in self.empty_dirs or any(p.startswith(path.rstrip("/") + "/") for p in self.files):
            return FileInfo(path, 0, None, True)
        return None

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def list(self, path: str, *, recursive: bool = False) -> list[FileInfo]:
        prefix = path.rstrip("/") + "/"
        out: dict[str, FileInfo] = {}
        for p, (data, mtime) in self.files.items():
            if not p.startswith(prefix):
                continue
            rest = p[len(prefix):]
            if recursive or "/" not in rest:
                out[p] = FileInfo(p, len(data), mtime)
            else:
                d = prefix + rest.split("/", 1)[0]
                out.setdefault(d, FileInfo(d, 0, None, True))
        for d in self.empty_dirs:
            if d.startswith(prefix) and (recursive or "/" not in d[len(prefix):]):
                out.setdefault(d, FileInfo(d, 0, None, True))
        return sorted(out.values(), key=lambda f: f.path)

    def delete(self, path: str) -> DeleteOutcome:
        if path in self.files:
            del self.files[path]
            parent = posixpath.dirname(path)
            if not any(p.startswith(parent + "/") for p in self.files):
                self.empty_dirs.add(parent)
            return DeleteOutcome.DELETED
        if self.info(path) is not None:
            raise StorageError(path, "is a directory; lakesweep deletes files only")
        return DeleteOutcome.ALREADY_ABSENT

    def delete_empty_dir(self, path: str) -> bool:
        path = path.rstrip("/")
        if any(p.startswith(path + "/") for p in self.files):
            return False
        if any(d.startswith(path + "/") for d in self.empty_dirs):
            return False
        if path in self.empty_dirs:
            self.empty_dirs.discard(path)
            parent = posixpath.dirname(path)
            if parent and not any(p.startswith(parent + "/") for p in self.files):
                self.empty_dirs.add(parent)
            return True
        return False

    def write_atomic(self, path: str, data: bytes) -> None:
        self.put(path, data)

    def move_no_replace(self, src: str, dst: str) -> MoveOutcome:
        if src not in self.files:
            if self.info(src) is not None:
                raise StorageError(src, "is a directory; lakesweep moves files only")
            return MoveOutcome.ALREADY_MOVED if dst in self.files else MoveOutcome.ABSENT
        if self.info(dst) is not None:
            raise FileExistsError(dst)
        self.files[dst] = self.files.pop(src)
        return MoveOutcome.MOVED

    supports_create_if_absent = True

    def create_if_absent(self, path: str, data: bytes) -> None:
        if self.info(path) is not None:
            raise FileExistsError(path)
        self.put(path, data)


def s3_properties_from_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where the store is (endpoint, region), from the usual AWS environment, captured on the driver so that
    a pickled FileIO takes them to executors whose environment may differ. Never credentials: those are
    found again wherever the file system is built (``ArrowFileIO``), so that no secret is part of a
    FileIO's state, and executors use their own (``applier.spark_exec.forward_credentials``)."""
    env = os.environ if env is None else env
    found = {
        "endpoint": env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"),
        "region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or profile_region(env),
    }
    return {k: v for k, v in found.items() if v}


def profile_region(env: Mapping[str, str] | None = None) -> str | None:
    """The ``region`` of the AWS profile (``AWS_PROFILE``, else ``default``) in the shared config file
    (``AWS_CONFIG_FILE``, else ``~/.aws/config``), as the AWS CLI reads it; ``None`` when there is none."""
    import configparser

    env = os.environ if env is None else env
    path = env.get("AWS_CONFIG_FILE") or os.path.join(os.path.expanduser("~"), ".aws", "config")
    profile = env.get("AWS_PROFILE") or "default"
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None  # an unreadable file names no region; the SDK reports it when it looks for credentials
    section = "default" if profile == "default" else f"profile {profile}"
    return parser.get(section, "region", fallback=None) or None


def fileio_for(location: str, properties: Mapping[str, str] | None = None) -> FileIO:
    """The FileIO that serves a normalized location."""
    if location.startswith("hdfs://"):
        from lakesweep.engine.hdfs_fileio import HdfsFileIO

        return HdfsFileIO(location[len("hdfs://"):].partition("/")[0])
    if location.startswith("s3://"):
        return ArrowFileIO("s3", {**s3_properties_from_env(), **(properties or {})})
    return ArrowFileIO("file", properties)
