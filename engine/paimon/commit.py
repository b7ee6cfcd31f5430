"""Paimon's committer for plans that commit: a partition drop (``engine.paimon.drop``).

The commit user is ``lakesweep-<plan id>`` and the commit identifier the phase number: both come from
the commit id the applier derives from the plan (``engine.plan.commit_id``), so any apply of the same
plan, first or resumed, commits under the same pair and finds a commit it made before. Why this writer
and not pypaimon's ``FileStoreCommit``: docs/design/paimon.md#partition-expiry.
"""

from __future__ import annotations

from typing import Sequence

from lakesweep.engine.errors import AtomicCreateUnsupported, PlanRejected
from lakesweep.engine.paimon.drop import drop_partitions, find_commit
from lakesweep.engine.paimon.kinds import PartitionKind, rules_of
from lakesweep.engine.paimon.partition import BinaryRowError, decode_binary_row
from lakesweep.engine.paimon.scopes import PartitionScope
from lakesweep.engine.plan import Action, CleanupPlan


def commit_user_and_identifier(commit_id: str) -> tuple[str, int]:
    """``lakesweep-<plan id>-<phase>`` as Paimon's (commit user, commit identifier)."""
    user, _, phase = commit_id.rpartition("-")
    if not user or not phase.isdigit():
        raise ValueError(f"commit id {commit_id!r} is not lakesweep-<plan id>-<phase>")
    return user, int(phase)


class PaimonCommitter:
    """Commits a partition-drop plan's commit phase as one OVERWRITE snapshot."""

    def __init__(self, plan: CleanupPlan):
        self.plan = plan

    def _partitions(self, table) -> dict[str, list[tuple]]:
        """The plan's partitions: name (as actions give it) -> the decoded values of each partition of that
        name (a null and an empty-string value share a name)."""
        scope = self.plan.scope.partitions if isinstance(self.plan.scope, PartitionScope) else None
        if not isinstance(scope, (list, tuple)):
            raise PlanRejected(f"the plan {self.plan.plan_id} lists no partitions to drop; the plan is refused")
        types = table.schema.partition_types
        out: dict[str, list[tuple]] = {}
        for p in scope:
            try:
                out.setdefault(str(p["partition"]), []).append(
                    tuple(decode_binary_row(bytes.fromhex(p["row"]), types)))
            except (KeyError, TypeError, ValueError, BinaryRowError) as e:
                raise PlanRejected(f"the plan {self.plan.plan_id} names a partition {p!r} that is not one of this "
                                   "table's; the plan is refused") from e
        return out

    def _base_snapshot(self) -> int:
        """The snapshot a partition-drop plan was made on; 0 for a plan of another kind (``check`` refuses it)."""
        scope = self.plan.scope
        return int(scope.snapshot or 0) if isinstance(scope, PartitionScope) else 0

    def check(self, table, actions: Sequence[Action]) -> None:
        if not rules_of(self.plan).commits:
            raise PlanRejected(f"'{self.plan.kind}' plans commit nothing; the plan {self.plan.plan_id} is refused")
        if table.branch != "main":
            raise PlanRejected("partition drops commit to the main branch only")
        try:
            table.fileio.check_create_if_absent(table.location)
        except AtomicCreateUnsupported as e:
            raise PlanRejected(f"the plan {self.plan.plan_id} is refused, nothing was done: {e}") from e
        parts = self._partitions(table)
        scope = self.plan.scope.snapshot
        for a in actions:
            if a.kind is not PartitionKind.DROP_DATA_FILE:
                raise PlanRejected(f"action {a.action_id} ({a.kind} {a.path!r}) is not a partition drop; "
                                   "the plan is refused")
            if a.partition not in parts or a.bucket is None or a.snapshot_id != scope:
                raise PlanRejected(f"action {a.action_id} ({a.kind} {a.path!r}) names partition {a.partition!r}, "
                                   f"bucket {a.bucket} and snapshot {a.snapshot_id}, which do not match the plan's "
                                   "partitions and snapshot; the plan is refused")
        named = {a.partition for a in actions}
        if named != set(parts):
            raise PlanRejected(f"the plan {self.plan.plan_id} drops partitions without files, or files of "
                               "partitions it does not list; the plan is refused")

    def find(self, table, commit_id: str) -> int | None:
        user, identifier = commit_user_and_identifier(commit_id)
        return find_commit(table, user, identifier, after=self._base_snapshot())

    def commit(self, table, actions: Sequence[Action], commit_id: str) -> int:
        user, identifier = commit_user_and_identifier(commit_id)
        parts = self._partitions(table)
        expected: dict[str, set] = {name: set() for name in parts}
        for a in actions:
            expected[a.partition].add((a.bucket, a.path.rsplit("/", 1)[-1]))
        result = drop_partitions(table, [v for values in parts.values() for v in values],
                                 expected={k: frozenset(v) for k, v in expected.items()},
                                 commit_user=user, commit_identifier=identifier,
                                 after=self._base_snapshot())
        return result.snapshot_id
