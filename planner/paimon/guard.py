"""The guard beyond Paimon: no planned path may be reachable from what the table keeps.

Reachable = everything the holders of ``engine.paimon.reachability`` reference, a tag's changelog list
excepted (docs/design/paimon-tables.md#tags-do-not-hold-changelog-files). A hit on the plan's own branch is
a planner bug: ``PlannerInvariantViolated``. A hit on another branch is a table state Paimon itself would
break (a branch built on a tag or snapshot of main, #6272): the plan is refused with ``PlanRejected``.
Either way no action is ever silently dropped.
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakesweep.engine.errors import PlannerInvariantViolated, PlanRejected, TableFormatError
from lakesweep.engine.plan import Action, Verb
from lakesweep.engine.plan_columns import ColumnActions, column_values, values
from lakesweep.engine.paimon.reachability import PathColumn, first_reachable
from lakesweep.engine.paimon.reachability import reachable_paths  # noqa: F401  (re-exported)
from lakesweep.engine.paimon.table import PaimonTable


_BATCH = 65_536  # paths made full at a time


def planned_paths(table: PaimonTable, actions: Sequence[Action]) -> dict[str, int]:
    """Full location -> the action's position, for every action that deletes a file (directories are
    deleted only when empty, so they cannot take a reachable file with them)."""
    absolute = table.paths.absolute
    return {absolute(path): i for i, (path, verb) in enumerate(zip(values(actions, "path"), values(actions, "verb")))
            if verb == Verb.DELETE_FILE}


def planned_column(table: PaimonTable, actions: ColumnActions) -> tuple[pa.Array, np.ndarray]:
    """``planned_paths`` of actions held as columns: the full locations as one Arrow column, and the
    position of each among the actions."""
    absolute = table.paths.absolute
    positions, rel = actions.where_verb(Verb.DELETE_FILE.value, "path")
    chunks = [pa.array(list(map(absolute, column_values(rel.slice(start, _BATCH)))), pa.string())
              for start in range(0, len(rel), _BATCH)]
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string()), positions


def assert_unreachable(
    table: PaimonTable,
    actions: Sequence[Action],
    *,
    end: int | None,
    tags=None,
    tolerate: Callable[[TableFormatError, str], None] | None = None,
    without_changelogs: AbstractSet[int] = frozenset(),
) -> None:
    """Raise if a planned path is reachable from what the table keeps (see the module docstring).
    ``without_changelogs``: the retained changelogs a changelog-expiry plan deletes, which hold nothing
    after it.

    A holder whose metadata cannot be read raises its ``TableFormatError``; with ``tolerate`` (the
    planner's skip-unreadable mode) it is reported through it instead and the other holders are checked.
    """
    if isinstance(actions, ColumnActions):
        paths, positions = planned_column(table, actions)
        hit = first_reachable(table, PathColumn(paths), end=end, tolerate=tolerate,
                              without_changelogs=without_changelogs)
        if hit is None:
            return
        holder, path = hit
        last = np.flatnonzero(pc.equal(paths, path).to_numpy(zero_copy_only=False))[-1]  # as the dict keeps
        a = actions[int(positions[last])]
    else:
        by_path = planned_paths(table, actions)
        hit = first_reachable(table, frozenset(by_path), end=end, tolerate=tolerate,
                              without_changelogs=without_changelogs)
        if hit is None:
            return
        holder, path = hit
        a = actions[by_path[path]]
    if holder.own:
        raise PlannerInvariantViolated(
            f"refusing the plan: {a.kind} {a.path} (planned for snapshot {a.snapshot_id}) is still "
            f"referenced by {holder.what}. Nothing was deleted; please report this with the table's metadata."
        )
    raise PlanRejected(
        f"refusing the plan: {a.kind} {a.path} (planned for snapshot {a.snapshot_id}) is still used by "
        f"{holder.what}: branches share the table's files, and Paimon's own expiry does not look across branches "
        "(Paimon #6272). Nothing was planned; expire or drop what holds it first, then re-run 'lakesweep plan expire'."
    )
