"""What an Iceberg table's metadata reaches, and the gate that keeps apply from deleting any of it.

Two readings, as Iceberg's own cleanups read them (docs/design/iceberg.md#reading-a-table):

* **expiry** (``ReachableFileCleanup``): a data or delete file is needed while a *live* entry (ADDED or
  EXISTING) of a retained snapshot's manifest names it; manifests, manifest lists and statistics files while
  a retained snapshot names them.
* **orphans** (``DeleteOrphanFiles``): a file is used while any snapshot's metadata names it in any entry,
  or it is the current metadata file or one its metadata log keeps. Keeping more is the safe side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Iterable, Iterator

from lakesweep.engine.iceberg.table import IcebergTable


@dataclass(frozen=True, slots=True)
class Holder:
    """What keeps a file: a snapshot (``snapshot_id``, and the refs pointing at it), or the table's
    metadata log (``snapshot_id`` None)."""

    what: str
    snapshot_id: int | None = None


def retained_snapshots(table: IcebergTable, expired: AbstractSet[int],
                       removed_refs: AbstractSet[str] = frozenset()) -> list[int]:
    """The snapshots the live table keeps once ``expired`` are gone: every other snapshot, and every
    snapshot a branch or tag other than ``removed_refs`` points at, whatever the plan says."""
    pinned = {sid for name, sid in table.refs().items() if name not in removed_refs}
    return sorted(s for s in table.snapshots if s not in expired or s in pinned)


def used_files(table: IcebergTable, snapshot_ids: Iterable[int], *, live_only: bool) -> set[str]:
    """Every location the snapshots reach (``IcebergTable.snapshot_files``)."""
    snapshot_ids = list(snapshot_ids)
    table.prefetch_snapshots(snapshot_ids)
    used: set[str] = set()
    for sid in snapshot_ids:
        used.update(path for _, path, _ in table.snapshot_files(sid, live_only=live_only))
    return used


def all_referenced(table: IcebergTable) -> set[str]:
    """Every location the table's metadata names: metadata files (current and logged), and every
    snapshot's list, manifests, entries of any status and statistics files."""
    used = used_files(table, table.snapshots, live_only=False)
    used.update(table.metadata_files())
    used.update(path for _, path, _ in table.statistics_files())
    return used


def current_references(table: IcebergTable) -> Iterator[tuple[str, str]]:
    """``(location, what references it)`` of what a reader of the table's current state opens: the current
    metadata file, and the current snapshot's list, manifests, live data and delete files and statistics."""
    yield table.metadata_files()[0], "the table's current metadata"  # metadata_files() lists it first
    sid = table.current_snapshot_id
    if sid is not None:
        for kind, path, _ in table.snapshot_files(sid, live_only=True):
            yield path, f"the current snapshot {sid} ({kind})"


def reachable(table: IcebergTable, planned: AbstractSet[str], *, expired: AbstractSet[int] = frozenset(),
              removed_refs: AbstractSet[str] = frozenset(), live_only: bool = True,
              metadata_log: bool = False) -> Iterator[tuple[Holder, str]]:
    """Each (holder, location) of ``planned`` that the live table still needs, each location once.

    The holders are the snapshots kept once ``expired`` are gone (``retained_snapshots``), read with
    ``live_only`` entries, and with ``metadata_log`` the metadata files and every statistics file. The
    refs pointing at a snapshot are named in the holder; ``removed_refs`` (refs the plan removes, past their
    age, which apply checks before committing) hold nothing."""
    if not planned:
        return
    seen: set[str] = set()
    retained = retained_snapshots(table, expired, removed_refs)
    if metadata_log:
        for path in table.metadata_files():
            if path in planned and path not in seen:
                seen.add(path)
                yield Holder("the table's metadata log"), path
        kept = set(retained)
        for sid, path, _ in table.statistics_files():
            if path in planned and path not in seen and (sid in kept or sid not in table.snapshots):
                seen.add(path)
                yield Holder(f"the statistics of snapshot {sid}", sid), path
    refs_at: dict[int, list[str]] = {}
    for name, sid in table.refs().items():
        refs_at.setdefault(sid, []).append(name)
    table.prefetch_snapshots(retained)
    for sid in retained:
        for _, path, _ in table.snapshot_files(sid, live_only=live_only):
            if path in planned and path not in seen:
                seen.add(path)
                names = refs_at.get(sid)
                held = f"snapshot {sid}" + (f" (ref {', '.join(sorted(names))})" if names else "")
                yield Holder(held, sid), path
