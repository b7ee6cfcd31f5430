"""``hdfs://namenode:port/path`` through ``hdfs-native``, a client of HDFS's own RPC protocol (no JVM).

pyarrow's ``HadoopFileSystem`` is not used: it needs ``libhdfs.so`` from a Hadoop distribution, which no
package registry serves. One ``HdfsFileIO`` serves one NameNode (the location's authority); it pickles as
that URL alone and connects again, lazily, on the other side. Commits create ``snapshot-N`` as Hadoop's
``FileSystem.rename`` without overwrite does for Paimon: the content is written under a temporary name and
renamed to a name the NameNode refuses to replace.
"""

from __future__ import annotations

import threading
import uuid
from typing import BinaryIO, Mapping

from lakesweep.engine.errors import DeleteUnconfirmed, StorageError
from lakesweep.engine.fileio import DeleteOutcome, FileInfo, FileIO, MoveOutcome

SCHEME = "hdfs"

# Hadoop's defaults retry an unreachable NameNode for minutes (15 attempts, sleeps up to 15 s); a maintenance
# command should say so within seconds. ``HdfsFileIO(config=...)`` overrides any of them.
DEFAULT_CONFIG = {
    "dfs.client.failover.max.attempts": "3",
    "dfs.client.failover.sleep.base.millis": "200",
    "dfs.client.failover.sleep.max.millis": "2000",
}


def require_hdfs_native():
    try:
        import hdfs_native
    except ImportError as e:
        raise StorageError("hdfs://", "reading HDFS needs the 'hdfs-native' package: "
                                      "pip install 'lakesweep[hdfs]'") from e
    return hdfs_native


class HdfsFileIO(FileIO):
    """Files of one HDFS NameNode. ``authority`` is ``host:port`` (``host`` alone: HDFS's port 8020);
    ``config`` holds Hadoop client settings as hdfs-native reads them, over ``DEFAULT_CONFIG``."""

    scheme = SCHEME
    supports_create_if_absent = True

    def __init__(self, authority: str, config: Mapping[str, str] | None = None):
        if not authority or "/" in authority:
            raise ValueError(f"not an HDFS authority (host:port): {authority!r}")
        self.authority = authority
        self.config = dict(config or {})
        self._client = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"{SCHEME}://{self.authority}"

    def __getstate__(self):
        return {"authority": self.authority, "config": self.config}

    def __setstate__(self, state):
        self.__init__(state["authority"], state["config"])

    def __eq__(self, other):
        return isinstance(other, HdfsFileIO) and (other.authority, other.config) == (self.authority, self.config)

    def __hash__(self):
        return hash((SCHEME, self.authority, tuple(sorted(self.config.items()))))

    def __repr__(self):
        return f"HdfsFileIO({self.authority!r})"

    @property
    def client(self):
        with self._lock:
            if self._client is None:
                hdfs_native = require_hdfs_native()
                try:
                    self._client = hdfs_native.Client(self.url, {**DEFAULT_CONFIG, **self.config})
                except Exception as e:
                    raise StorageError(self.url, f"cannot connect: {_first_line(e)}") from e
            return self._client

    def _native(self, path: str) -> str:
        prefix = self.url
        if path == prefix:
            return "/"
        if not path.startswith(prefix + "/"):
            raise ValueError(f"not a location of {prefix}: {path!r}")
        return path[len(prefix):]

    def _full(self, native: str) -> str:
        return self.url + native

    def _status(self, path: str, native: str):
        """The ``FileStatus`` of ``native``, ``None`` when nothing is there (or a file stands where a parent
        directory would be: nothing can be below it)."""
        try:
            return self.client.get_file_info(native)
        except FileNotFoundError:
            return None
        except StorageError:
            raise
        except Exception as e:
            raise StorageError(path, f"cannot stat: {_first_line(e)}") from e

    def _to_info(self, st) -> FileInfo:
        return FileInfo(self._full(st.path), 0 if st.isdir else int(st.length), int(st.modification_time),
                        bool(st.isdir))

    def read_bytes(self, path: str) -> bytes:
        with self.open_input(path) as f:
            try:
                return f.read()
            except Exception as e:
                raise StorageError(path, f"cannot read: {_first_line(e)}") from e

    def open_input(self, path: str) -> BinaryIO:
        native = self._native(path)
        try:
            return self.client.read(native)
        except FileNotFoundError as e:
            st = self._status(path, native)
            if st is not None and st.isdir:
                raise StorageError(path, "is a directory, not a file") from e
            raise FileNotFoundError(path) from e
        except StorageError:
            raise
        except Exception as e:
            raise StorageError(path, f"cannot open: {_first_line(e)}") from e

    def info(self, path: str) -> FileInfo | None:
        st = self._status(path, self._native(path))
        return None if st is None else self._to_info(st)

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def list(self, path: str, *, recursive: bool = False) -> list[FileInfo]:
        native = self._native(path)
        try:
            found = [self._to_info(st) for st in self.client.list_status(native, recursive)]
        except FileNotFoundError:
            return []
        except StorageError:
            raise
        except Exception as e:
            raise StorageError(path, f"cannot list: {_first_line(e)}") from e
        if len(found) == 1 and found[0].path == path.rstrip("/") and not found[0].is_dir:
            raise StorageError(path, "cannot list: is a file, not a directory")
        return sorted(found, key=lambda f: f.path)

    def delete(self, path: str) -> DeleteOutcome:
        native = self._native(path)
        st = self._status(path, native)
        if st is None:
            return DeleteOutcome.ALREADY_ABSENT
        if st.isdir:
            raise StorageError(path, "is a directory; lakesweep deletes files only")
        try:
            deleted = self.client.delete(native, False)
        except FileNotFoundError:
            return DeleteOutcome.ALREADY_ABSENT
        except Exception as e:
            # The call went out: the NameNode may have deleted the file before its answer was lost.
            raise DeleteUnconfirmed(path, f"cannot delete, or the NameNode's answer was lost: {_first_line(e)}") from e
        return DeleteOutcome.DELETED if deleted else DeleteOutcome.ALREADY_ABSENT

    def delete_empty_dir(self, path: str) -> bool:
        native = self._native(path)
        st = self._status(path, native)
        if st is None or not st.isdir:
            return False
        try:
            # non-recursive: the NameNode refuses a directory that is not empty (PathIsNotEmptyDirectoryException)
            return bool(self.client.delete(native, False))
        except FileNotFoundError:
            return False
        except Exception as e:
            if "PathIsNotEmptyDirectoryException" in str(e):
                return False
            raise StorageError(path, f"cannot delete the directory: {_first_line(e)}") from e

    def _write_temporary(self, path: str, native: str, data: bytes) -> str:
        parent, _, name = native.rpartition("/")
        tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        hdfs_native = require_hdfs_native()
        try:
            with self.client.create(tmp, hdfs_native.WriteOptions(overwrite=False, create_parent=True)) as w:
                w.write(data)
        except Exception as e:
            self._drop(tmp)
            raise StorageError(path, f"cannot write: {_first_line(e)}") from e
        return tmp

    def _drop(self, tmp: str) -> None:
        try:
            self.client.delete(tmp, False)
        except Exception:  # the temporary file is the one thing left to tidy; the write's error is the news
            pass

    def write_atomic(self, path: str, data: bytes) -> None:
        native = self._native(path)
        tmp = self._write_temporary(path, native, data)
        try:
            self.client.rename(tmp, native, True)
        except Exception as e:
            self._drop(tmp)
            raise StorageError(path, f"cannot write: {_first_line(e)}") from e

    def create_if_absent(self, path: str, data: bytes) -> None:
        native = self._native(path)
        if self._status(path, native) is not None:
            raise FileExistsError(path)
        tmp = self._write_temporary(path, native, data)
        try:
            # rename without overwrite: the NameNode refuses it when the name exists (FileAlreadyExistsException)
            self.client.rename(tmp, native, False)
        except FileExistsError as e:
            self._drop(tmp)
            raise FileExistsError(path) from e
        except Exception as e:
            self._drop(tmp)
            raise StorageError(path, f"cannot create: {_first_line(e)}") from e

    def move_no_replace(self, src: str, dst: str) -> MoveOutcome:
        # HDFS's rename without overwrite is refused by the NameNode when dst exists (FileAlreadyExistsException),
        # so nothing is ever replaced; one RPC, no bytes copied.
        s, d = self._native(src), self._native(dst)
        st = self._status(src, s)
        if st is None:
            return MoveOutcome.ALREADY_MOVED if self._status(dst, d) is not None else MoveOutcome.ABSENT
        if st.isdir:
            raise StorageError(src, "is a directory; lakesweep moves files only")
        try:
            self.client.mkdirs(d.rpartition("/")[0] or "/", create_parent=True)
            self.client.rename(s, d, False)
        except FileExistsError:
            if self._status(src, s) is None:
                return MoveOutcome.ALREADY_MOVED  # another attempt moved it meanwhile
            raise FileExistsError(dst) from None
        except FileNotFoundError:
            if self._status(src, s) is None:
                return MoveOutcome.ALREADY_MOVED if self._status(dst, d) is not None else MoveOutcome.ABSENT
            raise StorageError(src, f"cannot move to {dst}: a parent of it is not a directory") from None
        except Exception as e:
            raise StorageError(src, f"cannot move to {dst}: {_first_line(e)}") from e
        return MoveOutcome.MOVED


def _first_line(e: BaseException) -> str:
    """An HDFS error without the NameNode's Java stack trace."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
