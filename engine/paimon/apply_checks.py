"""What apply checks of a Paimon plan against the live table, whatever the plan's requirements say: the
table's identity, each path where its kind of file lives (inside the table or a declared external root),
and nothing it deletes still used by a snapshot, tag, changelog or branch."""

from __future__ import annotations

import posixpath
from typing import AbstractSet, Sequence

from lakesweep.engine.errors import PlanRejected, StalePlan, TableFormatError
from lakesweep.engine.formats import TargetIndex, Targets, planned_deletes
from lakesweep.engine.paimon.kinds import ActionKind, changelogs_deleted, rules_of, tags_deleted
from lakesweep.engine.paimon.layout import Layout, check_action_kind, in_its_bucket_dir
from lakesweep.engine.paimon.paths import external_roots
from lakesweep.engine.paimon.reachability import first_reachable
from lakesweep.engine.paimon.requirements import AssertTableIdentity, live_used
from lakesweep.engine.paimon.table import SNAPSHOT_PREFIX, PaimonTable, parse_versioned_id
from lakesweep.engine.paths import PathResolver, refuse_symlinked_parents
from lakesweep.engine.plan import ACTION_FIELDS, Action, CleanupPlan, Verb, kind_spec, pointer_writes
from lakesweep.engine.plan_columns import ColumnActions, fields_of, taken
from lakesweep.engine.plan_io import format_plan_kinds


def verify_table(plan: CleanupPlan, table: PaimonTable) -> None:
    """The plan is of a kind this lakesweep applies, for this table (identity and branch): the plan's
    table-identity requirement, checked before anything else is read."""
    if plan.kind not in format_plan_kinds(plan.format):
        raise PlanRejected(f"plan kind '{plan.kind}' is not supported by this lakesweep")
    for r in plan.requirements:
        if isinstance(r, AssertTableIdentity):
            r.check(table)
            return
    raise PlanRejected(f"the plan {plan.plan_id} names no table identity to check; re-run 'lakesweep plan'")


def verify_paths(plan: CleanupPlan, table: PaimonTable) -> Targets:
    """Every action must be a path of its kind's directory (``check_action_kind``), resolve inside the
    table root or its declared external roots, and, on local storage, reach its file through no symbolic
    link below the root. Returns each action's full location, by action id (``check_unreachable`` takes
    them instead of resolving every path again)."""
    resolver = PathResolver(table.location, external_roots(table.options))
    shape = Layout(table)
    checked: set[str] = set()
    local = table.fileio.scheme == "file"
    targets = Targets(resolver.root)
    last = "\0"  # the directory of the action before, checked (a plan lists a directory's files together)
    # Each action's fields, not the action: the bulk of a plan passes ``in_its_bucket_dir`` and needs no more;
    # the others are built and checked whole.
    for row in fields_of(plan.actions, *ACTION_FIELDS):
        kind, path, _, _, _, _, source, _, _, verb, phase = row
        full = resolver.full(path)
        cut = full.rfind("/")
        if local and not (cut == len(last) and full.startswith(last)):
            last = full[:cut]
            if last not in checked:
                refuse_symlinked_parents(full, resolver.containing_root(full), checked)
        if kind == ActionKind.WRITE_CHANGELOG:
            source = resolver.full(source or "")
            if local:
                refuse_symlinked_parents(source, resolver.containing_root(source), checked)
        if not in_its_bucket_dir(plan.kind, kind, verb, phase, path, shape):
            check_action_kind(plan, Action(*row), shape)
        targets.append(full, path)
    if isinstance(plan.actions, ColumnActions):
        targets.share(plan.actions.stored_columns().column("path"))
    return targets


def check_unreachable(plan: CleanupPlan, table: PaimonTable, actions: Sequence[Action],
                      targets: Sequence[str] | None = None, *, done: AbstractSet[str] = frozenset(),
                      index: TargetIndex | None = None) -> None:
    """Refuse (``StalePlan``) when a file ``actions`` would delete is reachable, in the live table, from
    any snapshot of the branch the plan does not delete (from the earliest to the latest), a tag, a
    retained changelog, or any other branch's snapshots and tags.

    Nothing here depends on the plan's requirements, which an edited plan file can leave out: every
    retained snapshot is read, not only the latest and the plan's end (a file can live entirely between
    them), and an orphan plan is held to the whole used set, by name as Paimon matches orphans
    (``engine.paimon.orphans.read_used_names``).

    A tag-expiry plan is held to more (``check_tag_plan``): no tag it deletes is one a branch was created
    from, every other file it deletes is held by one of its expired tags, and the gate's end snapshot is
    the live earliest one. ``done``: full locations this apply already carried out. The hints ``actions``
    write are checked first (``check_pointers``).

    ``table`` must be a view read now (``PaimonTable.refreshed``), so that snapshots, tags and branches are
    seen as they are. ``targets`` are the plan's full locations by action id, as ``verify_paths`` returns
    them; without them every path is resolved here. ``index``: the ``TargetIndex`` of ``targets`` apply
    builds once, through which the planned locations are looked up (the holders' files are the fewer: each
    is looked up, instead of a set of every planned location built for each gate).
    """
    if targets is None:
        full = PathResolver(table.location, external_roots(table.options)).full
        targets = [full(a.path) for a in plan.actions]
    deleted_snapshots = snapshots_deleted(plan, table, targets)
    check_pointers(plan, table, actions, targets, deleted_snapshots, done=done)
    planned = planned_deletes(plan, actions, targets, index)
    rules, deleted_tags = rules_of(plan), tags_deleted(plan)
    end = plan.end if rules.gate_end is None else rules.gate_end(plan, table, planned, done)
    hit = first_reachable(table, planned.keys(), end=end, without_tags=deleted_tags,
                          without_changelogs=changelogs_deleted(plan), every_snapshot=True,
                          without_snapshots=deleted_snapshots)
    if hit is not None:
        holder, path = hit
        a = planned[path]
        raise StalePlan(
            f"the plan {plan.plan_id} is refused: {a.kind} {a.path} is still used by {holder.what} in the "
            f"live table. Nothing more is deleted; re-run 'lakesweep plan {plan.kind}'."
        )
    if rules.shared_storage:
        check_unused_names(plan, table, planned)


def snapshots_deleted(plan: CleanupPlan, table: PaimonTable, targets: Sequence[str]) -> frozenset[int]:
    """The ids of the branch's snapshot files the plan deletes, from the locations its actions name
    (whatever kind they claim)."""
    out = set()
    directory = table.snapshot_dir
    marker = "/" + SNAPSHOT_PREFIX  # in every such location: a cheap first look at each of a million
    if isinstance(targets, Targets):
        # Looked for in what is held: of a location under the root, the part after it, which holds the
        # marker too whenever the location is a snapshot file (snapshot directories lie below the root).
        marked = targets.holding(marker)
    else:
        marked = [i for i, target in enumerate(targets) if marker in target]
    for i, a in zip(marked, taken(plan.actions, marked)):
        target = targets[i]
        name = posixpath.basename(target)
        if a.verb is Verb.DELETE_FILE and posixpath.dirname(target) == directory and name.startswith(SNAPSHOT_PREFIX):
            sid = parse_versioned_id(name[len(SNAPSHOT_PREFIX):])
            if sid is not None:
                out.add(sid)
    return frozenset(out)


def check_unused_names(plan: CleanupPlan, table: PaimonTable, planned: dict[str, Action]) -> None:
    """Refuse (``StalePlan``) an orphan plan that would delete a file whose name the live table uses: Paimon
    keeps a candidate when any snapshot, tag or changelog of any branch names a file of that name. The
    plan's own re-check (``AssertUnreferenced``) skips such candidates; this holds when it was edited out.
    A used set that cannot be read refuses the plan (``PlanRejected``)."""
    by_name = {path: a for path, a in planned.items() if (spec := kind_spec(a.kind)) is not None and spec.by_name}
    if not by_name:
        return
    names = live_used(table).names
    for path in sorted(by_name):
        if posixpath.basename(path) in names:
            a = by_name[path]
            raise StalePlan(
                f"the plan {plan.plan_id} is refused: {a.kind} {a.path} is named by a file the live table uses "
                f"(a snapshot, tag or changelog of some branch names a file called {posixpath.basename(path)}). "
                "Nothing more is deleted; re-run 'lakesweep plan orphans'."
            )


def check_pointers(plan: CleanupPlan, table: PaimonTable, actions: Sequence[Action], targets: Sequence[str],
                   deleted: AbstractSet[int], *, done: AbstractSet[str] = frozenset()) -> None:
    """Refuse (``StalePlan``) a hint ``actions`` would write (``snapshot/EARLIEST``, ``changelog/EARLIEST``)
    that moves the live hint backwards, or that names a snapshot (changelog) that does not exist: a stale
    plan, applied after another expiry, would put back what that expiry removed (a hint-only plan has no
    other requirement). The snapshot hint may also not move past a snapshot the plan does not delete: the
    snapshots below it would leave the table with their files (``deleted``: the snapshot ids the plan
    deletes, ``snapshots_deleted``). A hint this apply already wrote (``done``) is not checked again."""
    for a in pointer_writes(actions):
        target = targets[a.action_id]
        if target in done:
            continue
        directory, value = posixpath.dirname(target), a.snapshot_id
        snapshots = directory == table.snapshot_dir
        kind = "snapshot" if snapshots else "changelog"
        shown = a.path

        def stale(why: str) -> StalePlan:
            return StalePlan(f"the plan {plan.plan_id} is refused: the plan writes {shown} = {value}, {why}. The "
                             f"hint is not written; re-run 'lakesweep plan {plan.kind}'.")

        try:
            live = table.read_hint(posixpath.basename(target), directory)
        except TableFormatError as e:
            raise stale(f"but the live hint cannot be read ({e})") from e
        if live is not None and live > value:
            raise stale(f"but the live hint is {live}: a hint only moves forward, and this one would put back "
                        f"{kind}s another expiry removed")
        path = table.snapshot_path(value) if snapshots else table.changelog_path(value)
        if not table.fileio.exists(path):
            raise stale(f"which names {kind} {value}; it does not exist")
        if snapshots:
            earliest = table.earliest_latest()[0]
            kept = [sid for sid in table.list_snapshot_ids()
                    if earliest is not None and earliest <= sid < value and sid not in deleted]
            if kept:
                raise StalePlan(
                    f"the plan {plan.plan_id} is refused: the plan moves {shown} to {value} past snapshot {kept[0]}, "
                    f"which it does not delete: the snapshots below the hint would leave the table with their "
                    f"files. The hint is not written; re-run 'lakesweep plan {plan.kind}'.")
