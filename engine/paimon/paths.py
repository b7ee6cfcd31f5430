"""Where Paimon puts each file (``FileStorePathFactory``, ``DataFilePathFactory``, index path factories).

Resolution uses the table's current options, as Java does. Paths are returned as full
locations; ``relative`` turns one back into a table-relative path when it lies under the table root.
"""

from __future__ import annotations

import posixpath
from typing import Mapping, Sequence

from lakesweep.engine.errors import CorruptMetadata, InvalidLocation, UnsupportedTable
from lakesweep.engine.fileio import is_filesystem_root, join, normalize_location
from lakesweep.engine.paimon.model import DataFileMeta
from lakesweep.engine.paimon.partition import (DEFAULT_PARTITION_NAME, BinaryRowError, decode_binary_row,
                                               hierarchical_partition_paths, partition_path, partition_spec)
from lakesweep.engine.paimon.types import DataType

POSTPONE_BUCKET = -2


def external_roots(options: Mapping[str, str]) -> list[str]:
    """The declared external data roots (``data-file.external-paths``, comma separated), normalized.

    A root that does not normalize, or that is the file system root, is refused: everything would lie
    inside it (``file:///`` once made every local path count as the table's).
    """
    raw = options.get("data-file.external-paths") or ""
    roots = []
    for part in raw.split(","):
        if not part.strip():
            continue
        try:
            root = normalize_location(part, relative_ok=False)
        except InvalidLocation as e:
            raise UnsupportedTable(f"data-file.external-paths holds {part.strip()!r}, which lakesweep cannot "
                                   f"address: {e}") from e
        if is_filesystem_root(root):
            raise UnsupportedTable(f"data-file.external-paths holds {part.strip()!r}, the file system root; "
                                   "lakesweep refuses a table whose files may lie anywhere")
        roots.append(root)
    return roots


def external_location(path: str) -> str:
    """An ``_EXTERNAL_PATH`` (``file:/dir/f``, ``file:///dir/f``, ``s3a://b/k``) as the file it names."""
    try:
        return normalize_location(path, relative_ok=False)
    except InvalidLocation as e:
        raise CorruptMetadata(path, f"external path does not name a file lakesweep can address: {e}") from e


def _bool_option(options: Mapping[str, str], key: str, default: bool) -> bool:
    v = options.get(key)
    if v is None:
        return default
    return str(v).strip().lower() == "true"


class PathFactory:
    """Resolves every kind of table file to a full location.

    ``partition_keys``/``partition_types`` come from the latest schema; ``options`` are the latest
    schema's options.
    """

    def __init__(
        self,
        root: str,
        partition_keys: Sequence[str],
        partition_types: Sequence[DataType],
        options: Mapping[str, str],
    ):
        self.root = root.rstrip("/")
        self.partition_keys = tuple(partition_keys)
        self.partition_types = tuple(partition_types)
        self.legacy = _bool_option(options, "partition.legacy-name", True)
        self.default_name = options.get("partition.default-name", DEFAULT_PARTITION_NAME)
        self.path_directory = (options.get("data-file.path-directory") or "").strip("/")
        self.index_in_data_dir = _bool_option(options, "index-file-in-data-file-dir", False)
        self.external_roots = external_roots(options)  # refuses a root lakesweep cannot bound (``/``)
        self._spec_cache: dict[bytes, list[tuple[str, str]]] = {}
        self._partition_paths: dict[bytes, str] = {}  # every entry of a partition asks again
        self._bucket_dirs: dict[tuple[bytes, int], str] = {}

    # -- partitions ----------------------------------------------------------------------------

    def partition_spec(self, partition: bytes) -> list[tuple[str, str]]:
        spec = self._spec_cache.get(partition)
        if spec is None:
            try:
                values = decode_binary_row(partition, self.partition_types)
            except BinaryRowError as e:
                raise CorruptMetadata(self.root, f"partition bytes {partition.hex()} do not decode: {e}") from e
            spec = partition_spec(
                values, self.partition_keys, self.partition_types, legacy=self.legacy, default_name=self.default_name
            )
            self._spec_cache[partition] = spec
        return spec

    def partition_path(self, partition: bytes) -> str:
        """``k1=v1/k2=v2/`` (escaped), ``""`` when unpartitioned."""
        found = self._partition_paths.get(partition)
        if found is None:
            found = self._partition_paths[partition] = partition_path(self.partition_spec(partition))
        return found

    def partition_dirs(self, partition: bytes) -> list[str]:
        """The partition directories from deepest to shallowest, as empty-directory cleanup visits them.

        Like Java, these ignore ``data-file.path-directory``: deleting them can only miss.
        """
        paths = hierarchical_partition_paths(self.partition_spec(partition))
        return [join(self.root, p) for p in reversed(paths)]

    # -- data files ----------------------------------------------------------------------------

    def relative_bucket_dir(self, partition: bytes, bucket: int) -> str:
        name = "postpone" if bucket == POSTPONE_BUCKET else str(bucket)
        rel = self.partition_path(partition) + "bucket-" + name
        if self.path_directory:
            rel = self.path_directory + "/" + rel
        return rel

    def bucket_dir(self, partition: bytes, bucket: int) -> str:
        key = (partition, bucket)
        found = self._bucket_dirs.get(key)
        if found is None:
            found = self._bucket_dirs[key] = join(self.root, self.relative_bucket_dir(partition, bucket))
        return found

    def data_file(self, partition: bytes, bucket: int, file: DataFileMeta) -> str:
        return self.data_path(partition, bucket, file.file_name, file.external_path)

    def data_path(self, partition: bytes, bucket: int, file_name: str, external_path: str | None) -> str:
        """``data_file`` of a file given by its name and external path (a manifest row's fields)."""
        if external_path:
            return external_location(external_path)
        return self.bucket_dir(partition, bucket) + "/" + file_name

    def extra_file(self, partition: bytes, bucket: int, file: DataFileMeta, extra: str) -> str:
        """Extra files sit beside their data file: in the external directory if it has one."""
        if file.external_path:
            return posixpath.dirname(external_location(file.external_path)) + "/" + extra
        return self.bucket_dir(partition, bucket) + "/" + extra

    # -- metadata and index files --------------------------------------------------------------

    def manifest(self, name: str) -> str:
        return join(self.root, "manifest", name)

    def statistics(self, name: str) -> str:
        return join(self.root, "statistics", name)

    def index_file(self, partition: bytes, bucket: int, file_name: str, external_path: str | None) -> str:
        if external_path:
            return external_location(external_path)
        if self.index_in_data_dir:
            return self.bucket_dir(partition, bucket) + "/" + file_name
        return join(self.root, "index", file_name)

    def relative(self, path: str) -> str:
        """The path relative to the table root, or the full location when it lies outside (external)."""
        prefix = self.root + "/"
        return path[len(prefix):] if path.startswith(prefix) else path

    def absolute(self, rel_or_full: str) -> str:
        if "://" in rel_or_full or rel_or_full.startswith("/"):
            return rel_or_full
        return join(self.root, rel_or_full)


def check_path_options_stable(schemas: Sequence, keys: Sequence[str]) -> None:
    """Refuse tables whose path-shaping options changed between schema versions."""
    if len(schemas) < 2:
        return
    for key in keys:
        values = {s.options.get(key) for s in schemas}
        if len(values) > 1:
            raise UnsupportedTable(
                f"option '{key}' changed between schema versions ({sorted(map(str, values))}); files written "
                "under the old value live at paths Paimon can no longer compute, so lakesweep refuses to plan"
            )


PATH_SHAPING_OPTIONS = (
    "data-file.path-directory",
    "partition.legacy-name",
    "partition.default-name",
    "index-file-in-data-file-dir",
    "data-file.external-paths",
    "global-index.external-path",
)
