"""Iceberg's answers to apply (``engine.formats.TableFormat``), over pyiceberg's table metadata: identity by
table UUID, paths by kind, reachability from every snapshot and ref, commits through ``engine.iceberg.commit``,
and compaction's merge tasks."""

from __future__ import annotations

from typing import AbstractSet, Sequence

from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.paths import PathResolver, refuse_symlinked_parents
from lakesweep.engine.formats import Targets, locations_of, planned_deletes
from lakesweep.engine.plan import Action, CleanupPlan, PhaseMode
from lakesweep.engine.plan_columns import deletes_anything
from lakesweep.engine.plan_io import format_plan_kinds


# Where each Iceberg action kind may live: "metadata" (the metadata directory or write.metadata.path), or
# "any" (anywhere under the table location or a write path).
_ICEBERG_METADATA_KINDS = frozenset({"manifest", "manifest-list", "statistics", "expire-snapshot", "rewrite-manifest",
                                     "orphan-metadata-file"})


class IcebergFormat:
    name = "iceberg"

    def open(self, plan: CleanupPlan, fileio: FileIO | None):
        from lakesweep.engine.iceberg.table import IcebergTable

        catalog, identifier = plan.scope.catalog, plan.scope.identifier
        if not isinstance(catalog, str) or not isinstance(identifier, str):
            raise PlanRejected(f"the plan {plan.plan_id} names no Iceberg catalog and table; re-run 'lakesweep plan'")
        table = IcebergTable(catalog, identifier)
        if fileio is not None:
            table.fileio = fileio
        return table

    def external_roots(self, table) -> list[str]:
        return table.external_roots()

    def verify_table(self, plan, table) -> None:
        from lakesweep.engine.iceberg.requirements import AssertTableUUID

        if plan.kind not in format_plan_kinds(plan.format):
            raise PlanRejected(f"plan kind '{plan.kind}' is not supported by this lakesweep")
        ids = [r for r in plan.requirements if isinstance(r, AssertTableUUID)]
        if not ids:
            raise PlanRejected(f"the plan {plan.plan_id} names no table identity to check; re-run 'lakesweep plan'")
        ids[0].check(table)
        if table.location != plan.table_location:
            raise PlanRejected(f"Iceberg table {table.identifier} now lives at {table.location}, not "
                               f"{plan.table_location} where the plan was made; nothing was done")
        reason = table.cannot_commit()
        if reason is not None and any(p.mode in (PhaseMode.COMMIT, PhaseMode.MERGE) for p in plan.phases):
            # read from the live table: a plan made before an upgrade, or forged, is refused here, not at the commit
            raise PlanRejected(f"{reason}; nothing was done")
        if any(a.verb.deletes for a in plan.actions) and not table.gc_enabled():
            # read from the live table whatever the plan's requirements say (a header can be edited)
            raise PlanRejected(f"Iceberg table {table.identifier} has gc.enabled=false: deleting its files may "
                               f"corrupt other tables, so nothing is deleted")
        self.check_neighbours(plan, table)

    def check_neighbours(self, plan, table) -> None:
        """An orphans plan: refuse (``SharedStorage``) when another table of the catalog, read now, stores
        files in the table's roots, whenever it appeared (the plan cannot tell: its file is not trusted)."""
        from lakesweep.engine.iceberg.neighbours import catalog_neighbours, table_roots
        from lakesweep.engine.iceberg.kinds import rules_of
        from lakesweep.engine.neighbours import refuse_shared_storage

        if rules_of(plan).shared_storage:
            refuse_shared_storage(f"Iceberg table {table.identifier}", table_roots(table), catalog_neighbours(table),
                                  outcome="Nothing was deleted")

    def verify_paths(self, plan, table) -> Sequence[str]:
        from lakesweep.engine.iceberg.kinds import PLAN_KIND_OF
        from lakesweep.engine.purge import PURGE, purge_targets

        if plan.kind == PURGE:  # quarantined files: never where a kind of the table's own files lives
            return purge_targets(plan, table.location, table.external_roots(), local=table.fileio.scheme == "file")

        roots = [table.location, *table.external_roots()]
        resolver = PathResolver(table.location, roots[1:])
        metadata = tuple(r + "/" for r in [table.location + "/metadata", *table.external_roots()])
        local = table.fileio.scheme == "file"
        checked: set[str] = set()
        targets = Targets(resolver.root)
        for a in plan.actions:
            label = str(a.kind)
            if PLAN_KIND_OF.get(label) != plan.kind:
                raise PlanRejected(f"action {a.action_id}: {label!r} actions do not belong in Iceberg "
                                   f"'{plan.kind}' plans; the plan is refused")
            full = resolver.full(a.path)
            if label in _ICEBERG_METADATA_KINDS and not full.startswith(metadata):
                raise PlanRejected(f"action {a.action_id}: {label} {a.path!r} is not under the table's metadata "
                                   f"directory; the plan is refused")
            if full == table.metadata_location:
                raise PlanRejected(f"action {a.action_id}: {a.path!r} is the table's current metadata file; "
                                   f"the plan is refused")
            if local and full[:full.rfind("/")] not in checked:
                refuse_symlinked_parents(full, resolver.containing_root(full), checked)
            targets.append(full, a.path)
        return targets

    def check_unreachable(self, plan, table, actions: Sequence[Action], targets: Sequence[str], *,
                          done: AbstractSet[str], strict: bool = False, index=None) -> dict[int, str]:
        """The actions to skip, each with why, or a refusal (``StalePlan``) when a file the actions delete is
        still used by the live table.

        Skipped (unless ``strict``): a file of an expiry plan (``expiry_gate``) held by a snapshot the plan expires and the live
        table keeps (a tag or branch created or moved since planning protects it; the commit kept it too).
        Any other holder refuses the plan: the plan's own view said nothing else holds the file."""
        from lakesweep.engine.iceberg.kinds import rules_of
        from lakesweep.engine.iceberg.reachability import reachable

        planned = planned_deletes(plan, actions, targets, index)
        expiry = rules_of(plan).expiry_gate
        expired = frozenset(plan.scope.expired) if expiry else frozenset()
        if expiry:
            hits = reachable(table, planned.keys(), expired=expired,
                             removed_refs=frozenset(plan.scope.removed_refs), live_only=True,
                             metadata_log=True)
        else:
            hits = reachable(table, planned.keys(), live_only=False, metadata_log=True)
        skip: dict[int, str] = {}
        for holder, path in hits:
            a = planned[path]
            if strict or holder.snapshot_id not in expired:
                raise StalePlan(f"the plan {plan.plan_id} is refused: {a.kind} {a.path} is still used by "
                                f"{holder.what} in the live table. Nothing more is deleted; re-run "
                                f"'lakesweep plan {plan.kind}'.")
            skip[a.action_id] = f"{holder.what} still needs it: the live table keeps that snapshot"
        return skip

    def held_outcomes(self, plan) -> frozenset[str]:
        """An expiry keeps what the live table protects (SKIPPED_REFERENCED); a rewrite or compaction leaves
        out what changed since planning (DROPPED)."""
        from lakesweep.engine.iceberg.kinds import rules_of

        if any(a.verb.deletes for a in plan.actions) or rules_of(plan).expiry_gate:
            return frozenset({"SKIPPED_REFERENCED"})
        return frozenset({"DROPPED"})

    def check_strict(self, plan, table) -> None:
        """``apply --strict``: the refs as at planning are the plan's ``STRICT_ONLY`` requirement."""

    def committer(self, plan, strict: bool):
        from lakesweep.engine.iceberg.commit import IcebergCommitter

        return IcebergCommitter(plan, strict=strict)

    def merge_tasks(self, plan, table, groups: Sequence[int]):
        """(the function a task runs, one task per group): each compaction bin of ``groups`` merged into its
        output, named from the plan id and the bin (``compaction_merge.output_location``), in the table's
        schema as at planning (``scope.schema_id``) and its live properties."""
        from lakesweep.engine.iceberg.compact_apply import BinTask, bins_from_scope, run_bin
        from lakesweep.engine.iceberg.compaction_merge import output_location

        bins = bins_from_scope(plan.scope)
        meta = table.metadata
        schema = next((s for s in meta.schemas if s.schema_id == plan.scope.schema_id), None)
        if schema is None:
            raise PlanRejected(f"the table has no schema {plan.scope.schema_id}, the plan's; re-run "
                               f"'lakesweep plan {plan.kind}'")
        tasks = []
        for g in groups:
            b = bins.get(g)
            if b is None:
                raise PlanRejected(f"the plan's actions name bin {g}, which its scope lacks; the plan is refused")
            target = output_location(meta.location, table.options, partition=b.partition, plan_id=plan.plan_id,
                                     bin_index=b.index)
            tasks.append(BinTask(b, target, table.fileio, schema, table.location, dict(table.options),
                                 meta.format_version))
        return run_bin, tasks

    def output_in_place(self, table, output) -> bool:
        """Whether a journaled output is there with its size (a bin whose every row was deleted has none)."""
        from lakesweep.engine.iceberg.table import canonical

        if not output["written"]:
            return True
        info = table.fileio.info(canonical(output["location"]))
        return info is not None and info.size == output["bytes"]

    def verify(self, plan, table, targets, index=None):
        from lakesweep.engine.iceberg.verify import verify_iceberg

        live = table.refreshed()
        if not deletes_anything(plan.actions):
            report = verify_iceberg(live, snapshot_id=live.current_snapshot_id) if live.current_snapshot_id \
                else verify_iceberg(live, only=())
            return report, report.referenced
        touched = locations_of(plan.actions, targets, index, deleting=True)
        return self.verify_neighbours(plan, live, verify_iceberg(live, only=touched), touched), touched

    def verify_neighbours(self, plan, live, report, touched):
        """``report`` with the problems of every other table of the catalog that needs a file an orphans
        plan deleted: the gate checked roots, not every file another table may name."""
        import dataclasses

        from lakesweep.engine.iceberg.kinds import rules_of
        from lakesweep.engine.iceberg.neighbours import neighbour_views
        from lakesweep.engine.iceberg.verify import verify_iceberg

        if not rules_of(plan).shared_storage:
            return report
        problems = list(report.problems)
        views = neighbour_views(live)
        for view in views:
            for p in verify_iceberg(view, only=touched).problems:
                problems.append(dataclasses.replace(p, needed_by=f"Iceberg table {view.identifier}: {p.needed_by}"))
        return dataclasses.replace(report, problems=tuple(problems),
                                   notes=(*report.notes, f"checked against {len(views)} other table(s) of the catalog"))


FORMAT = IcebergFormat()
