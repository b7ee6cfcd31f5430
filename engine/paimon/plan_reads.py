"""What Paimon's planners need from the store beyond the table's metadata: read by each kind's ``read`` step
(``planner.plan_kind.PlanKind.read``) before planning, and handed to the pure planner as a frozen value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from lakesweep.engine.fileio import FileInfo, join
from lakesweep.engine.paimon.model import Tag
from lakesweep.engine.paimon.requirements import consumer_digest
from lakesweep.engine.paimon.table import CONSUMER_PREFIX, PaimonTable, snapshot_digest


@dataclass(frozen=True, slots=True)
class ConsumerFiles:
    """The branch's consumer directory as listed, and what each consumer file held."""

    listed: tuple[FileInfo, ...]  # sorted by path
    digests: Mapping[str, str | None]  # consumer file path -> digest of its content; None: deleted since listed


def read_consumer_files(table: PaimonTable) -> ConsumerFiles:
    listed = tuple(sorted(table.fileio.list(table.consumer_dir), key=lambda f: f.path))
    digests = {f.path: consumer_digest(table.fileio, f.path) for f in listed
               if not f.is_dir and f.path.rsplit("/", 1)[-1].startswith(CONSUMER_PREFIX)}
    return ConsumerFiles(listed, digests)


@dataclass(frozen=True, slots=True)
class TagFiles:
    """The branch's tags as read, with what their files and snapshots are in the store."""

    tags: tuple[Tag, ...]  # as ``PaimonTable.tags`` returns them
    # tag name -> its file's modification time (None: the store keeps none), for the tags asked about; a tag
    # whose file is gone since it was listed is left out
    modified: Mapping[str, int | None]
    digests: Mapping[str, str | None]  # tag name -> digest of its file; None: gone since it was listed
    snapshots: frozenset[int]  # of the tagged snapshots, those whose snapshot file exists


def read_tag_files(table: PaimonTable, *, timed: Callable[[Tag], bool] = lambda t: False) -> TagFiles:
    """``timed``: whether a tag's file's modification time is asked for."""
    tags = tuple(table.tags())
    times = {}
    for t in tags:
        info = table.fileio.info(join(table.tag_dir, f"tag-{t.name}")) if timed(t) else None
        if info is not None:
            times[t.name] = info.mtime_ms
    digests = {}
    for t in tags:
        try:
            digests[t.name] = snapshot_digest(table.fileio.read_bytes(join(table.tag_dir, f"tag-{t.name}")))
        except FileNotFoundError:
            digests[t.name] = None
    present = frozenset(sid for sid in sorted({t.snapshot.id for t in tags})
                        if table.fileio.exists(table.snapshot_path(sid)))
    return TagFiles(tags, times, digests, present)


def changelog_digests(table: PaimonTable, ids: Iterable[int]) -> dict[int, str]:
    """Changelog id -> digest of its file, for those of ``ids`` whose file exists."""
    out = {}
    for cid in ids:
        try:
            out[cid] = snapshot_digest(table.fileio.read_bytes(table.changelog_path(cid)))
        except FileNotFoundError:
            continue
    return out


def existing_manifests(table: PaimonTable, names: Iterable[str]) -> frozenset[str]:
    """Of the manifest directory's file ``names``, those that exist."""
    return frozenset(n for n in sorted(set(names)) if table.fileio.exists(table.paths.manifest(n)))
