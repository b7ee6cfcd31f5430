"""Paimon's answers to apply (``engine.formats.TableFormat``): its checks live in
``engine.paimon.apply_checks``, its commits in ``engine.paimon.commit``."""

from __future__ import annotations

from lakesweep.engine.errors import StalePlan
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.formats import locations_of
from lakesweep.engine.plan_columns import deletes_anything
from lakesweep.engine.plan import CleanupPlan, Verb, commit_id


class PaimonFormat:
    name = "paimon"

    def open(self, plan: CleanupPlan, fileio: FileIO | None):
        from lakesweep.engine.paimon.table import open_table

        return open_table(plan.table_location, fileio, branch=plan.branch)

    def external_roots(self, table) -> list[str]:
        from lakesweep.engine.paimon.paths import external_roots

        return external_roots(table.options)

    def verify_table(self, plan, table) -> None:
        from lakesweep.engine.paimon.apply_checks import verify_table

        verify_table(plan, table)
        self.check_neighbours(plan, table)

    def check_neighbours(self, plan, table) -> None:
        """An orphans plan: refuse (``SharedStorage``) when another table of the warehouse, or one found under
        the table's roots, read now, stores files in the table's roots (the plan file is not trusted)."""
        from lakesweep.engine.neighbours import refuse_shared_storage
        from lakesweep.engine.paimon.kinds import rules_of
        from lakesweep.engine.paimon.neighbours import paimon_neighbours, table_roots

        if rules_of(plan).shared_storage:
            refuse_shared_storage(f"Paimon table {table.location}", table_roots(table.location, table.options),
                                  paimon_neighbours(table), outcome="Nothing was deleted")

    def verify_paths(self, plan, table) -> list[str]:
        from lakesweep.engine.paimon.apply_checks import verify_paths
        from lakesweep.engine.purge import PURGE, purge_targets

        if plan.kind == PURGE:  # quarantined files: never where a kind of the table's own files lives
            return purge_targets(plan, table.location, self.external_roots(table), local=table.fileio.scheme == "file")
        return verify_paths(plan, table)

    def check_unreachable(self, plan, table, actions, targets, *, done, strict: bool = False,
                          index=None) -> dict[int, str]:
        """Refuse (``StalePlan``) when a file the actions delete is still used; nothing is skipped. ``index``:
        the ``TargetIndex`` of ``targets``, through which the gate looks up each holder's files."""
        from lakesweep.engine.paimon.apply_checks import check_unreachable

        check_unreachable(plan, table, actions, targets, done=done, index=index)
        return {}

    def held_outcomes(self, plan) -> frozenset[str]:
        """Outcomes beyond the usual by which an apply of ``plan`` holds actions back on a live table: none
        (a Paimon gate refuses instead)."""
        return frozenset()

    def check_strict(self, plan, table) -> None:
        """``apply --strict``: refuse when a snapshot was committed since planning (other than this plan's own
        commit): its time is after the plan's now."""
        from lakesweep.engine.paimon.commit import commit_user_and_identifier

        latest = table.earliest_latest()[1]
        if latest is None:
            return
        snap = table.snapshot(latest)
        ours = commit_user_and_identifier(commit_id(plan.plan_id, 1))[0]  # one commit user for every phase
        if snap.time_millis > plan.now_ms and snap.commit_user != ours:
            raise StalePlan(f"the plan {plan.plan_id} is stale (--strict): snapshot {latest} was committed after "
                            f"the plan was made. Nothing more is done; re-run 'lakesweep plan {plan.kind}', or "
                            f"apply without --strict")

    def committer(self, plan, strict: bool):
        from lakesweep.engine.paimon.commit import PaimonCommitter

        return PaimonCommitter(plan)

    def verify(self, plan, table, targets, index=None):
        """(the check's report, the locations checked) after the last phase."""
        from lakesweep.engine.paimon.verify import verify_kept, verify_table as verify_whole

        if not deletes_anything(plan.actions):
            # A commit marks files DELETE without deleting them: the snapshots before it still need every
            # one, so each must still be in place. Nothing else changed, so no snapshot is walked.
            kept = {targets[a.action_id]: a.size for a in plan.actions if a.verb is Verb.COMMIT}
            return verify_kept(table.refreshed(), kept, "the snapshots before the plan's commit"), kept
        touched = locations_of(plan.actions, targets, index, deleting=True)
        return verify_whole(table.refreshed(), only=touched), touched


FORMAT = PaimonFormat()
