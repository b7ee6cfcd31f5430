"""Consumer expiry planning with Apache Paimon's semantics (``ConsumerManager#expire``).

A consumer file (``consumer/consumer-<id>``) records the next snapshot a streaming reader will read, and
snapshot expiry keeps every snapshot from the smallest of them on: an idle reader holds expiry back for
ever. Paimon's writers delete, when ``consumer.expiration-time`` is set, every consumer file of their branch
whose modification time is before now minus that time. ``plan_consumers`` plans the same deletes; the
files' contents play no part in the choice (a consumer file that does not parse is judged by its time like
the others), but the plan pins each candidate's content and time: apply keeps a consumer written since
(``AssertConsumersUnmodified``). Files without a modification time are kept. Reads no clock.
"""

from __future__ import annotations

from lakesweep.engine.paimon.kinds import CONSUMER_PHASES, ConsumerKind
from lakesweep.engine.paimon.plan_reads import ConsumerFiles, read_consumer_files
from lakesweep.engine.paimon.requirements import consumer_requirements
from lakesweep.engine.paimon.scopes import ConsumerScope
from lakesweep.engine.paimon.state import table_identity
from lakesweep.engine.paimon.table import CONSUMER_PREFIX, PaimonTable
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions, summarize
from lakesweep.engine.timeutil import format_time_ms
from lakesweep.planner.paimon.options import ConsumerOptions
from lakesweep.planner.paimon.options import resolve_consumer_options
from lakesweep.planner.plan_kind import (PlanCommand, PlanDescription, PlanFlag, PlanKind, refuse_future_now,
                                          utc)


def plan_consumers(table: PaimonTable, *, now_ms: int, options: ConsumerOptions, read: ConsumerFiles) -> CleanupPlan:
    """Plan the deletion of ``table``'s (branch's) consumer files not modified since ``now_ms`` minus the
    expiration time, from its consumer directory as ``read`` (``read_consumer_files``) holds it."""
    cutoff = now_ms - options.expiration_ms
    prefix = table.base[len(table.location):].strip("/")
    rel_dir = (prefix + "/" if prefix else "") + "consumer/"
    actions, listed, warnings, mtimes, digests = [], [], [], {}, {}
    kept = 0
    for f in read.listed:
        name = f.path.rsplit("/", 1)[-1]
        if f.is_dir or not name.startswith(CONSUMER_PREFIX) or name == CONSUMER_PREFIX:
            continue
        consumer = name[len(CONSUMER_PREFIX):]
        if f.mtime_ms is None:
            warnings.append(f"consumer '{consumer}' has no modification time: it is kept")
            kept += 1
            continue
        if f.mtime_ms < cutoff:
            rel = rel_dir + name
            digest = read.digests.get(f.path)
            if digest is None:
                continue  # deleted since it was listed
            digests[rel] = digest
            actions.append(Action(ConsumerKind.CONSUMER_FILE, rel, size=f.size))
            mtimes[rel] = f.mtime_ms
            listed.append({"consumer": consumer, "modified": format_time_ms(f.mtime_ms), "modified_ms": f.mtime_ms})
        else:
            kept += 1
    actions = canonical_actions(actions)
    return CleanupPlan(
        kind="consumers",
        format="paimon",
        table_location=table.location,
        table_identity=table_identity(table),
        branch=table.branch,
        now_ms=now_ms,
        options=dict(options.sources),
        scope=ConsumerScope(cutoff_ms=cutoff, consumers=listed),
        requirements=consumer_requirements(identity=table_identity(table), location=table.location,
                                           branch=table.branch, now_ms=now_ms, mtimes=mtimes,
                                           digests=digests),
        phases=CONSUMER_PHASES,
        actions=actions,
        stats={"summary": summarize(actions), "warnings": warnings, "consumers_kept": kept},
    )


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

def _read(table, *, now_ms: int, options) -> ConsumerFiles:
    refuse_future_now(table, now_ms, "consumer expiry")  # apply would refuse the plan: say so now
    return read_consumer_files(table)


def _plan(table, *, now_ms: int, options, read: ConsumerFiles) -> CleanupPlan:
    return plan_consumers(table, now_ms=now_ms, options=options, read=read)


def describe_consumers(plan: CleanupPlan) -> PlanDescription:
    """A consumer expiry: which consumers have been idle since before the cut-off."""
    listed = plan.scope.consumers
    cutoff = plan.scope.cutoff_ms
    when = utc(cutoff) if isinstance(cutoff, int) else str(cutoff)
    document = {"consumers": listed, "cutoff_ms": cutoff}
    kept = plan.stats.get("consumers_kept", 0)
    if not listed:
        return PlanDescription(nothing_to_do=True, nothing_label="No idle consumers",
                               scope=f"no consumer of branch '{plan.branch}' was last written before {when} "
                                     f"({kept} kept).", document=document)
    notes = (*(f"consumer '{c['consumer']}': last written {c['modified']}" for c in listed),
             f"kept: {kept} written since",
             "apply deletes each only if it has not been written since planning (else SKIPPED_REFERENCED)")
    return PlanDescription(nothing_to_do=False, notes=notes, document=document,
                           scope=f"deletes {len(listed)} consumer file(s) of branch '{plan.branch}' last written "
                                 f"before {when}: snapshot expiry no longer waits for these readers")


COMMAND = PlanCommand(
    short_help="Delete idle consumers (Paimon).",
    help="Plan the deletion of idle consumers as Apache Paimon's consumer.expiration-time does, and save the "
         "plan.\n\n"
         "A consumer file records where a streaming reader will continue; snapshot expiry keeps every snapshot "
         "from the oldest consumer's on. A consumer whose file was last written before now minus "
         "--expiration-time is planned for deletion, whatever it holds. Apply deletes each only if it has not "
         "been written since planning.\n\n"
         "Nothing is deleted now. Review the plan with 'lakesweep show PLAN'.",
    flags=(PlanFlag("expiration_time", str, "Delete consumers not written for this long, e.g. '7 d' (table: "
                    "consumer.expiration-time; required when the table does not set it)."),),
    branch="Branch whose consumers to expire.")

KIND = PlanKind("consumers", resolve_options=resolve_consumer_options, plan=_plan, describe=describe_consumers,
                format="paimon", command=COMMAND, read=_read)
