"""Iceberg manifest rewriting: the current snapshot's data manifests, rewritten as one manifest per partition
spec (delete manifests carried over), skipped as SeaweedFS's worker skips it:

* no current snapshot: ``no current snapshot``;
* fewer data manifests than ``--min-manifests`` (default 5, ``min_manifests_to_rewrite``):
  ``only N data manifests, below threshold of M``;
* no live data entries: ``no data entries to rewrite``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.iceberg.kinds import REWRITE_PHASES, RewriteKind
from lakesweep.engine.iceberg.requirements import plan_requirements
from lakesweep.engine.iceberg.scopes import RewriteManifestsScope
from lakesweep.engine.plan import Action, CleanupPlan, OptionValue, canonical_actions, summarize
from lakesweep.planner.iceberg.common import refuse_unwritable, relative_to, scope_base
from lakesweep.planner.iceberg.common import MAX_COMMIT_RETRIES, cannot_maintain
from lakesweep.planner.plan_kind import Maintained, PlanCommand, PlanDescription, PlanFlag, PlanKind

DEFAULT_MIN_MANIFESTS = 5


@dataclass(frozen=True)
class RewriteOptions:
    min_manifests: int
    max_commit_retries: int
    sources: Mapping[str, OptionValue]


def resolve_rewrite_options(table_options: Mapping[str, str], *, min_manifests: int | None = None,
                            max_commit_retries: int | None = None, **_) -> RewriteOptions:
    if min_manifests is not None and min_manifests < 1:
        raise PlanRejected(f"--min-manifests must be at least 1, got {min_manifests}")
    if max_commit_retries is not None and max_commit_retries < 0:
        raise PlanRejected(f"--max-commit-retries must be at least 0, got {max_commit_retries}")
    n = DEFAULT_MIN_MANIFESTS if min_manifests is None else min_manifests
    retries = 5 if max_commit_retries is None else max_commit_retries
    return RewriteOptions(n, retries, {
        "min_manifests": OptionValue(n, "default" if min_manifests is None else "flag"),
        "max_commit_retries": OptionValue(retries, "default" if max_commit_retries is None else "flag")})


def plan_rewrite_manifests(table, *, now_ms: int, options: RewriteOptions) -> CleanupPlan:
    refuse_unwritable(table)
    current = table.current_snapshot_id
    actions: list[Action] = []
    skipped = None
    entries = 0
    specs: dict[int, int] = {}
    data = deletes = 0
    if current is None:
        skipped = "no current snapshot"
    else:
        manifests = table.manifest_list(table.snapshots[current])
        data_manifests = [m for m in manifests if m.content == 0]
        deletes = len(manifests) - len(data_manifests)
        data = len(data_manifests)
        for m in data_manifests:
            live = sum(1 for f in table.manifest_entries(m) if f.live)
            entries += live
            if live:
                specs[m.spec_id] = specs.get(m.spec_id, 0) + live
        if data < options.min_manifests:
            skipped = f"only {data} data manifests, below threshold of {options.min_manifests}"
        elif entries == 0:
            skipped = "no data entries to rewrite"
        else:
            roots = [table.location, *table.external_roots()]
            for m in data_manifests:
                rel = relative_to(m.path, roots)
                if rel is None:
                    raise PlanRejected(f"manifest {m.path} lies outside the table location {table.location}; "
                                       f"lakesweep does not rewrite such tables")
                actions.append(Action(RewriteKind.REWRITE_MANIFEST, rel, snapshot_id=current, size=m.size))
    canonical = canonical_actions(actions)
    return CleanupPlan(
        kind="rewrite-manifests", format="iceberg", table_location=table.location, table_identity=table.uuid,
        branch="main", now_ms=now_ms, options=dict(options.sources),
        scope=RewriteManifestsScope(**scope_base(table), snapshot_id=current, refs=dict(table.refs()),
                                    entries=entries, specs={str(k): v for k, v in sorted(specs.items())},
                                    data_manifests=data, delete_manifests=deletes, skipped=skipped),
        requirements=plan_requirements(table, gc=False),
        phases=REWRITE_PHASES, actions=canonical,
        stats={"summary": summarize(canonical), "warnings": []},
    )


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

def describe_rewrite(plan: CleanupPlan) -> PlanDescription:
    sc = plan.scope
    if sc.skipped:
        return PlanDescription(nothing_to_do=True, nothing_label="Nothing to rewrite", scope=sc.skipped,
                               document={"skipped": sc.skipped})
    scope = (f"rewrites {sc.data_manifests} data manifests of snapshot {sc.snapshot_id} into "
             f"{len(sc.specs)} ({sc.entries} entries); carries {sc.delete_manifests} delete manifest(s) over")
    return PlanDescription(nothing_to_do=False, scope=scope, document={"skipped": None})


def _plan(table, *, now_ms: int, options, read=None) -> CleanupPlan:
    return plan_rewrite_manifests(table, now_ms=now_ms, options=options)


def _detect(view, th, now_ms: int) -> str | None:
    reason = cannot_maintain(view)
    if reason is not None:
        return reason
    data = sum(1 for m in view.manifest_list(view.snapshots[view.current_snapshot_id]) if m.content == 0)
    if data < th.min_manifests_to_rewrite:
        return f"only {data} data manifests, below threshold of {th.min_manifests_to_rewrite}"
    return None


def _applied(plan: CleanupPlan, counts) -> str:
    sc = plan.scope
    return f"rewrote {sc.data_manifests} manifests into {len(sc.specs)} ({sc.entries} entries)"


COMMAND = PlanCommand(
    short_help="Rewrite data manifests (Iceberg).",
    help="Plan the rewrite of an Iceberg table's data manifests: one manifest per partition spec, with every live "
         "entry of the current snapshot, delete manifests carried over. Apply commits it as a 'replace' snapshot; "
         "the old manifests stay until snapshot expiry frees them.\n\n"
         "Skipped, with SeaweedFS's messages, when there is no current snapshot, fewer data manifests than "
         "--min-manifests, or no data entries. Nothing is changed. Review the plan with 'lakesweep show PLAN'.",
    flags=(PlanFlag("min_manifests", int, "Rewrite only when the current snapshot has at least this many data "
                    "manifests (default 5).", ("--min-manifests", "--min-manifests-to-rewrite")),
           MAX_COMMIT_RETRIES))

KIND = PlanKind("rewrite-manifests", resolve_options=resolve_rewrite_options, plan=_plan, describe=describe_rewrite,
                format="iceberg", command=COMMAND,
                maintain=Maintained(order=40, applied=_applied, detect=_detect,
                                    flags=lambda options, th: {"min_manifests": th.min_manifests_to_rewrite,
                                                               "max_commit_retries": th.max_commit_retries}))
