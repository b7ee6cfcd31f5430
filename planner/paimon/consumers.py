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

from engine.paimon.kinds import CONSUMER_PHASES, ConsumerKind
from engine.paimon.requirements import consumer_digest, consumer_requirements
from engine.paimon.state import table_identity
from engine.paimon.table import CONSUMER_PREFIX, PaimonTable
from engine.plan import Action, CleanupPlan, canonical_actions, summarize
from engine.timeutil import format_time_ms
from planner.paimon.options import ConsumerOptions


def plan_consumers(table: PaimonTable, *, now_ms: int, options: ConsumerOptions) -> CleanupPlan:
    """Plan the deletion of ``table``'s (branch's) consumer files not modified since ``now_ms`` minus the
    expiration time."""
    cutoff = now_ms - options.expiration_ms
    prefix = table.base[len(table.location):].strip("/")
    rel_dir = (prefix + "/" if prefix else "") + "consumer/"
    actions, listed, warnings, mtimes, digests = [], [], [], {}, {}
    kept = 0
    for f in sorted(table.fileio.list(table.consumer_dir), key=lambda f: f.path):
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
            digest = consumer_digest(table.fileio, f.path)
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
        scope={"cutoff_ms": cutoff, "consumers": listed},
        requirements=consumer_requirements(identity=table_identity(table), location=table.location,
                                           branch=table.branch, now_ms=now_ms, mtimes=mtimes,
                                           digests=digests),
        phases=CONSUMER_PHASES,
        actions=actions,
        stats={"summary": summarize(actions), "warnings": warnings, "consumers_kept": kept},
    )
