"""Is an Iceberg table whole? Every file its metadata needs is in place.

Needed: the current metadata file and its log, every snapshot's manifest list and manifests, the data and
delete files of their live entries, and every statistics file. ``only`` limits the check to the locations
an apply touched; ``snapshot_id`` to what one snapshot needs (after a commit). One listing per directory.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from typing import AbstractSet, Iterable

from lakesweep.engine.errors import StorageError
from lakesweep.engine.iceberg.table import IcebergTable
from lakesweep.engine.paimon.verify import MISSING, Problem, VerifyReport


def needed_files(table: IcebergTable, snapshot_ids: Iterable[int]) -> dict[str, str]:
    """Needed location -> the first holder that needs it."""
    needed: dict[str, str] = {}
    for path in table.metadata_files():
        needed.setdefault(path, "the metadata log")
    for sid in snapshot_ids:
        for _, path, _ in table.snapshot_files(sid, live_only=True):
            needed.setdefault(path, f"snapshot {sid}")
    return needed


def verify_iceberg(table: IcebergTable, *, only: Iterable[str] | None = None,
                   snapshot_id: int | None = None) -> VerifyReport:
    sids = sorted(table.snapshots) if snapshot_id is None else [snapshot_id]
    needed = needed_files(table, sids)
    only_set = None if only is None else only if isinstance(only, AbstractSet) else set(only)
    check = needed if only_set is None else {p: h for p, h in needed.items() if p in only_set}
    by_dir: dict[str, list[str]] = defaultdict(list)
    for path in check:
        by_dir[posixpath.dirname(path)].append(path)
    problems = []
    for directory, paths in sorted(by_dir.items()):
        try:
            present = {f.path for f in table.fileio.list(directory)}
        except FileNotFoundError:
            present = set()
        except OSError as e:
            raise StorageError(directory, f"cannot be listed: {e}") from e
        for path in sorted(paths):
            if path not in present:
                problems.append(Problem(MISSING, path, "file is missing", needed_by=check[path], holders=1))
    return VerifyReport(table.location, {"snapshots": len(sids)}, len(check), tuple(problems),
                        only=len(check) if snapshot_id is not None else None if only_set is None else len(only_set), referenced=frozenset(check))
