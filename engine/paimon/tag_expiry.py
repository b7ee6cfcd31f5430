"""What a tag's expiry may free, for the tag planner and for apply's gate alike.

A tag's files are freed only when its snapshot file is gone and the snapshot is older than the branch's
earliest snapshot, and then only what the earliest and latest snapshots, every remaining tag, retained
changelog and branch do not hold (Paimon's ``TagManager#deleteTag`` looks at the neighbouring tags and the
earliest snapshot only). A tag on a snapshot missing inside ``[earliest, latest]`` goes without its files; a
tag a branch was created from is kept (Paimon #6272). Why checking the earliest snapshot is checking them
all: docs/design/paimon-tables.md#contiguous-lifetimes.
"""

from __future__ import annotations

from typing import AbstractSet, Mapping

from lakesweep.engine.errors import MetadataNotFound, PlanRejected, StalePlan
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.kinds import TagKind
from lakesweep.engine.paimon.model import Snapshot
from lakesweep.engine.paimon.reachability import other_branches, reachable_files
from lakesweep.engine.paimon.table import TAG_PREFIX, PaimonTable
from lakesweep.engine.plan import Action


def frees_files(table: PaimonTable, snapshot_id: int, earliest: int | None) -> bool:
    """A tag on ``snapshot_id`` may take files with it: the snapshot file is gone and the snapshot is older
    than the earliest one (``earliest`` None: the branch keeps no snapshot)."""
    if earliest is not None and snapshot_id >= earliest:
        return False
    return not table.fileio.exists(table.snapshot_path(snapshot_id))


def tag_snapshot_files(table: PaimonTable, snapshot: Snapshot) -> dict[str, tuple[TagKind, int | None]]:
    """Every file a tag's snapshot holds, full path -> (kind, the size its metadata records or None): data
    and extra files, data manifests, the manifest lists and index manifest, index files, statistics. Not
    its changelog: tags do not protect changelog files (``ExpireSnapshotsImpl#expireUntil``), and tag deletion
    leaves them to changelog expiry."""
    paths = table.paths
    out: dict[str, tuple[TagKind, int | None]] = {
        p: (TagKind.TAG_DATA_FILE, size) for p, size in reachable_files(table, snapshot, with_changelog=False).items()}
    for name, size in ((snapshot.base_manifest_list, snapshot.base_manifest_list_size),
                       (snapshot.delta_manifest_list, snapshot.delta_manifest_list_size),
                       (snapshot.index_manifest, None)):
        if name:
            out[paths.manifest(name)] = (TagKind.TAG_MANIFEST, size)
    for m in table.data_manifests(snapshot):
        out[paths.manifest(m.file_name)] = (TagKind.TAG_MANIFEST, m.file_size)
    if snapshot.index_manifest:
        for ie in table.index_manifest(snapshot.index_manifest):
            f = ie.index_file
            out[paths.index_file(ie.partition, ie.bucket, f.file_name, f.external_path)] = (TagKind.TAG_INDEX_FILE,
                                                                                             f.file_size)
    if snapshot.statistics:
        out[paths.statistics(snapshot.statistics)] = (TagKind.TAG_STATISTICS, None)
    return out


def branch_origins(table: PaimonTable) -> dict[str, str]:
    """The tags of ``table``'s branch that another branch was created from: tag name -> that branch. A
    branch created from a tag holds a copy of it (same name, same snapshot id and base manifest list)."""
    out: dict[str, str] = {}
    mine = {t.name: t.snapshot for t in table.tags()}
    for other in other_branches(table):
        for t in other.tags():
            snap = mine.get(t.name)
            same = snap is not None and (snap.id, snap.base_manifest_list) == (t.snapshot.id,
                                                                               t.snapshot.base_manifest_list)
            if same:
                out.setdefault(t.name, other.branch)
    return out


def check_tag_plan(table: PaimonTable, names: AbstractSet[str], planned: Mapping[str, Action],
                   done: AbstractSet[str] = frozenset()) -> int | None:
    """Apply's own check of a tag-expiry plan against the live ``table``, whatever the plan file says:

    * no tag it deletes is one another branch was created from (``StalePlan``: a branch created since);
    * every file it deletes besides tag files (``planned``: full path -> action) is held by a tag it
      deletes whose snapshot is gone and older than the earliest snapshot (``PlanRejected`` otherwise).

    A tag this apply already deleted (its path in ``done``: a resumed apply, or a later phase) cannot be
    read again; its files were checked when the apply started, before any tag was deleted (a resumed plan
    is the journal's, by its id). Returns the live earliest snapshot id, which the reachability gate must
    then hold against the planned files (with the latest snapshot, the remaining tags, retained
    changelogs and every branch).
    """
    earliest, _ = table.earliest_latest()
    origins = branch_origins(table) if names else {}
    freed: set[str] = set()
    deleted_before = False
    for name in sorted(names):
        try:
            tag = table.tag(name)
        except MetadataNotFound:
            deleted_before = deleted_before or join(table.tag_dir, TAG_PREFIX + name) in done
            continue
        if name in origins:
            raise StalePlan(f"tag '{name}' is the tag branch '{origins[name]}' was created from: deleting it lets "
                            f"snapshot expiry break the branch (Paimon #6272). Nothing more is deleted; re-run "
                            f"'lakesweep plan tags'.")
        if frees_files(table, tag.snapshot.id, earliest):
            freed |= tag_snapshot_files(table, tag.snapshot).keys()
    if deleted_before:
        return earliest
    for path, a in planned.items():
        if a.kind is not TagKind.TAG_FILE and path not in freed:
            raise PlanRejected(
                f"action {a.action_id} ({a.kind} {a.path!r}) is refused: no tag the plan deletes whose snapshot "
                f"is gone and older than the earliest snapshot {earliest} holds it; the plan is refused")
    return earliest
