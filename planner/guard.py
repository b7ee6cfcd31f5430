"""The guard beyond Paimon: no planned path may be reachable from what the table keeps.

Reachable = everything the latest snapshot, the plan's end snapshot, every tag, and every branch's
snapshots and tags reference: data and extra files, manifest lists, manifests, index manifests and
index files, statistics (and the changelog files of the retained main snapshots). Tags do not protect
changelog files in Paimon (L-2), so a tag's changelog list is not counted.

A hit is a planner bug or a table state Paimon itself would break (a branch built on a deleted tag,
#6272). Either way the plan is refused: ``PlannerInvariantViolated``, never a silently dropped action.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from engine.errors import PlannerInvariantViolated, TableFormatError
from engine.model import FileKind, Snapshot, Tag
from engine.plan import Action, ActionKind
from engine.table import PaimonTable


def reachable_paths(table: PaimonTable, snapshot: Snapshot, *, with_changelog: bool) -> set[str]:
    paths = table.paths
    out = {paths.manifest(snapshot.base_manifest_list), paths.manifest(snapshot.delta_manifest_list)}
    manifests = table.data_manifests(snapshot)
    out.update(paths.manifest(m.file_name) for m in manifests)
    for e in table.live_entries(snapshot):
        out.add(paths.data_file(e.partition, e.bucket, e.file))
        out.update(paths.extra_file(e.partition, e.bucket, e.file, x) for x in e.file.extra_files)
    if snapshot.index_manifest:
        out.add(paths.manifest(snapshot.index_manifest))
        for ie in table.index_manifest(snapshot.index_manifest):
            f = ie.index_file
            out.add(paths.index_file(ie.partition, ie.bucket, f.file_name, f.external_path))
    if snapshot.statistics:
        out.add(paths.statistics(snapshot.statistics))
    if with_changelog and snapshot.changelog_manifest_list:
        out.add(paths.manifest(snapshot.changelog_manifest_list))
        for m in table.manifest_list(snapshot.changelog_manifest_list):
            out.add(paths.manifest(m.file_name))
            for e in table.manifest(m.file_name):
                if e.kind == FileKind.ADD:
                    out.add(paths.data_file(e.partition, e.bucket, e.file))
    return out


def _holders(table: PaimonTable, end: int | None, tags: Sequence[Tag], tolerate) -> Iterable[tuple[str, PaimonTable, Snapshot, bool]]:
    earliest, latest = table.earliest_latest()
    for sid, what in ((latest, f"the latest snapshot {latest}"), (end, f"the retained snapshot {end}")):
        if sid is None or (sid == end and end == latest and what.startswith("the retained")):
            continue
        try:
            s = table.try_snapshot(sid)
        except TableFormatError as e:
            if tolerate is None:
                raise
            tolerate(e, f"the guard could not check the plan against {what}")
            continue
        if s is not None:
            yield what, table, s, True
    for t in tags:
        yield f"tag '{t.name}' (snapshot {t.snapshot.id})", table, t.snapshot, False
    for name in table.branch_names():
        b = table.branch_table(name)
        for sid in b.list_snapshot_ids():
            s = b.try_snapshot(sid)
            if s is not None:
                yield f"snapshot {sid} of branch '{name}'", b, s, False
        for t in b.tags():
            yield f"tag '{t.name}' of branch '{name}' (snapshot {t.snapshot.id})", b, t.snapshot, False


def assert_unreachable(
    table: PaimonTable,
    actions: Sequence[Action],
    *,
    end: int | None,
    tags: Sequence[Tag],
    tolerate: Callable[[TableFormatError, str], None] | None = None,
) -> None:
    """Raise ``PlannerInvariantViolated`` if a planned path is reachable from what the table keeps.

    A holder whose metadata cannot be read raises its ``TableFormatError``; with ``tolerate`` (the
    planner's skip-unreadable mode) it is reported through it instead and the other holders are checked.
    """
    planned = {
        table.paths.absolute(a.path): a
        for a in actions
        if a.kind.deletes and a.kind != ActionKind.EMPTY_DIR
    }
    if not planned:
        return
    for what, holder_table, snapshot, with_changelog in _holders(table, end, tags, tolerate):
        try:
            reachable = reachable_paths(holder_table, snapshot, with_changelog=with_changelog)
        except TableFormatError as e:
            if tolerate is None:
                raise
            tolerate(e, f"the guard could not check the plan against {what}")
            continue
        for path in reachable & planned.keys():
            a = planned[path]
            raise PlannerInvariantViolated(
                f"refusing the plan: {a.kind.value} {a.path} (planned for snapshot {a.snapshot_id}) is still "
                f"referenced by {what}. Nothing was deleted; please report this with the table's metadata."
            )
