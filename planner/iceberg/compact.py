"""Iceberg data-file compaction: the current snapshot's small Parquet data files, merged bin by bin into one
file each (``engine.iceberg.compaction``), then replaced by the outputs in one ``replace`` commit. Skipped,
with SeaweedFS's messages, as ``plan_bins`` skips.

The plan holds two actions per input file, both with ``bucket`` = its bin's index and ``partition`` = the
bin's partition path: ``compact-input`` (phase 1, merge) and ``compact-replace`` (phase 2, commit). Its
``scope`` holds the bins and each delete manifest's fate. An output is named at apply time from the plan id
and its bin (``compaction_merge.output_location``): a plan cannot name a file after its own id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.iceberg.compact_apply import scope_bins, scope_delete_manifests
from lakesweep.engine.iceberg.compaction import DEFAULT_MIN_INPUT_FILES, plan_bins, target_file_size
from lakesweep.engine.iceberg.kinds import COMPACT_PHASES, CompactKind
from lakesweep.engine.iceberg.requirements import plan_requirements
from lakesweep.engine.iceberg.scopes import CompactScope
from lakesweep.engine.paimon.requirements import AssertNowReached
from lakesweep.engine.plan import Action, CleanupPlan, OptionValue, canonical_actions, summarize
from lakesweep.planner.iceberg.common import refuse_unwritable, relative_to, scope_base
from lakesweep.engine.units import human_bytes
from lakesweep.planner.iceberg.common import MAX_COMMIT_RETRIES, cannot_maintain
from lakesweep.planner.plan_kind import Maintained, PlanCommand, PlanDescription, PlanFlag, PlanKind


@dataclass(frozen=True)
class CompactOptions:
    target_file_size_mb: int | None
    min_input_files: int
    apply_deletes: bool
    max_commit_retries: int
    sources: Mapping[str, OptionValue]


def resolve_compact_options(table_options: Mapping[str, str], *, target_file_size_mb: int | None = None,
                            min_input_files: int | None = None, apply_deletes: bool | None = None,
                            max_commit_retries: int | None = None, **_) -> CompactOptions:
    if min_input_files is not None and min_input_files < 2:
        raise PlanRejected(f"--min-input-files must be at least 2, got {min_input_files}")
    if max_commit_retries is not None and max_commit_retries < 0:
        raise PlanRejected(f"--max-commit-retries must be at least 0, got {max_commit_retries}")
    target, source = target_file_size(table_options, target_file_size_mb)
    n = DEFAULT_MIN_INPUT_FILES if min_input_files is None else min_input_files
    deletes = True if apply_deletes is None else bool(apply_deletes)
    retries = 5 if max_commit_retries is None else max_commit_retries
    return CompactOptions(target_file_size_mb, n, deletes, retries, {
        "target_file_size_bytes": OptionValue(target, source),
        "min_input_files": OptionValue(n, "default" if min_input_files is None else "flag"),
        "apply_deletes": OptionValue(deletes, "default" if apply_deletes is None else "flag"),
        "max_commit_retries": OptionValue(retries, "default" if max_commit_retries is None else "flag")})


def plan_compact(table, *, now_ms: int, options: CompactOptions) -> CleanupPlan:
    refuse_unwritable(table)
    target = int(options.sources["target_file_size_bytes"].value)
    scope = plan_bins(table, target_bytes=target, min_input_files=options.min_input_files,
                      apply_deletes=options.apply_deletes)
    roots = [table.location, *table.external_roots()]
    actions: list[Action] = []
    for b in scope.bins:
        for f in b.inputs:
            rel = relative_to(f.path, roots)
            if rel is None:
                raise PlanRejected(f"data file {f.path} lies outside the table location {table.location} and its "
                                   f"write paths; lakesweep does not compact such tables")
            for kind in CompactKind:
                actions.append(Action(kind, rel, snapshot_id=scope.snapshot_id, partition=b.partition,
                                      bucket=b.index, size=f.size))
    canonical = canonical_actions(actions)
    merged = sum(len(b.inputs) for b in scope.bins)
    return CleanupPlan(
        kind="compact", format="iceberg", table_location=table.location, table_identity=table.uuid, branch="main",
        now_ms=now_ms, options=dict(options.sources),
        scope=CompactScope(**scope_base(table), snapshot_id=scope.snapshot_id, sequence_number=scope.sequence_number,
                           schema_id=scope.schema_id, refs=dict(table.refs()), skipped=scope.skipped,
                           target_bytes=scope.target_bytes, min_input_files=scope.min_input_files,
                           apply_deletes=scope.apply_deletes, data_files=scope.data_files,
                           small_files=scope.small_files, bins=scope_bins(scope.bins),
                           delete_manifests=scope_delete_manifests(scope.delete_manifests)),
        requirements=(*plan_requirements(table, gc=False), AssertNowReached(now_ms)),
        phases=COMPACT_PHASES, actions=canonical,
        stats={"summary": summarize(canonical), "warnings": [], "bins": len(scope.bins), "inputs": merged,
               "input_bytes": sum(b.total_size for b in scope.bins),
               "dropped_delete_manifests": len(scope.dropped_delete_manifests)},
    )


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

def describe_compact(plan: CleanupPlan) -> PlanDescription:
    sc = plan.scope
    bins = sc.bins
    document = {"skipped": sc.skipped,
                "bins": [{"index": b["index"], "partition": b["partition"], "inputs": len(b["inputs"]),
                          "bytes": sum(f["size"] for f in b["inputs"]),
                          "records": sum(f["record_count"] for f in b["inputs"]),
                          "position_deletes": len(b["position_deletes"]),
                          "equality_deletes": len(b["equality_deletes"])} for b in bins]}
    if sc.skipped:
        return PlanDescription(nothing_to_do=True, nothing_label="Nothing to compact", scope=sc.skipped,
                               document=document)
    inputs = sum(len(b["inputs"]) for b in bins)
    dropped = sum(1 for m in sc.delete_manifests if m["dropped"])
    scope = (f"merges {inputs} of the {sc.data_files} data files of snapshot {sc.snapshot_id} into "
             f"{len(bins)} file(s) of at most {human_bytes(sc.target_bytes)} each, in one 'replace' commit")
    notes = tuple(f"bin {b['index']} ({b['partition'] or 'unpartitioned'}): {d['inputs']} files, {human_bytes(d['bytes'])}, "
                  f"{d['position_deletes']} position and {d['equality_deletes']} equality delete file(s) applied"
                  for b, d in zip(bins, document["bins"]))
    notes += (f"delete manifests: {dropped} dropped (all they delete is compacted), "
              f"{len(sc.delete_manifests) - dropped} carried over",)
    return PlanDescription(nothing_to_do=False, scope=scope, notes=notes, document=document)


def _plan(table, *, now_ms: int, options, read=None) -> CleanupPlan:
    return plan_compact(table, now_ms=now_ms, options=options)


def _flags(options, th) -> dict:
    return {"target_file_size_mb": th.target_file_size_mb, "min_input_files": th.min_input_files,
            "apply_deletes": th.apply_deletes, "max_commit_retries": th.max_commit_retries}


def _detect(view, th, now_ms: int) -> str | None:
    """The worker's test: some partition has at least ``min_input_files`` live data files below the target."""
    reason = cannot_maintain(view)
    if reason is not None:
        return reason
    target, _ = target_file_size(view.options, th.target_file_size_mb)
    small: dict[tuple, int] = {}
    for m in view.manifest_list(view.snapshots[view.current_snapshot_id]):
        if m.content == 0:
            for f in view.manifest_entries(m):
                if f.live and f.content == 0 and f.size < target:
                    small[(m.spec_id, f.partition)] = small.get((m.spec_id, f.partition), 0) + 1
    if not any(n >= th.min_input_files for n in small.values()):
        return "no files eligible for compaction"
    return None


def _applied(plan: CleanupPlan, counts) -> str:
    bins = plan.scope.bins
    inputs = sum(len(b["inputs"]) for b in bins)
    return f"compacted {inputs} files into {len(bins)} (across {len(bins)} bins)"


COMMAND = PlanCommand(
    short_help="Compact small data files (Iceberg).",
    help="Plan the compaction of an Iceberg table's small Parquet data files: per partition, bins of at least "
         "--min-input-files files, each merged into one file with its deleted rows dropped. Apply writes the "
         "merged files (one Spark task per bin), then commits one 'replace' snapshot; the old files stay until "
         "snapshot expiry frees them.\n\n"
         "Skipped, with SeaweedFS's messages, when there is no current snapshot, when delete files exist and "
         "--no-apply-deletes is given, or when no bin has enough files. Nothing is changed. Review the plan with "
         "'lakesweep show PLAN'.",
    flags=(PlanFlag("target_file_size_mb", int, "Files smaller than this are merged, into files of at most this "
                    "size (default 256; the table's write.target-file-size-bytes wins)."),
           PlanFlag("min_input_files", int, "The fewest files a bin merges (default 5, at least 2)."),
           PlanFlag("apply_deletes", bool, "Apply position and equality deletes while merging (default); with "
                    "--no-apply-deletes a table with delete files is skipped.",
                    ("--apply-deletes/--no-apply-deletes",)),
           MAX_COMMIT_RETRIES))

KIND = PlanKind("compact", resolve_options=resolve_compact_options, plan=_plan, describe=describe_compact,
                format="iceberg", command=COMMAND,
                maintain=Maintained(order=10, flags=_flags, applied=_applied, detect=_detect))
