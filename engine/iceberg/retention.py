"""Iceberg's snapshot retention rule (``org.apache.iceberg.RemoveSnapshots#internalApply``), read by the
planner to plan an expiry and by apply to check that a plan expires nothing the rule keeps.

1. Refs: ``main`` is always kept; another ref is kept while its snapshot is no older than its
   ``max-ref-age-ms`` (else the default); a ref whose snapshot is missing is removed.
2. Each kept branch keeps its head's ancestors while fewer than ``min-snapshots-to-keep`` are kept or the
   ancestor is no older than ``now - max-snapshot-age-ms``, and stops at the first that is neither.
3. Each kept ref's snapshot is kept; a snapshot no kept ref reaches is kept while it is no older than the
   cut-off. Every other snapshot expires (docs/design/iceberg.md#snapshot-expiry).
"""

from __future__ import annotations

from typing import Mapping


def ancestors(snapshots: Mapping[int, object], head: int):
    """The head and its ancestors, newest first, until a parent is missing."""
    sid = head
    while sid is not None and sid in snapshots:
        yield snapshots[sid]
        sid = snapshots[sid].parent_snapshot_id


def expire_rule(table, *, now_ms: int, cutoff_ms: int, retain_last: int,
                max_ref_age_ms: int) -> tuple[list[int], list[str]]:
    """(expired snapshot ids, removed ref names), ascending and sorted, by ``RemoveSnapshots``' rule: the
    defaults are ``cutoff_ms`` (expire-older-than), ``retain_last`` (min-snapshots-to-keep) and
    ``max_ref_age_ms``; a ref's own values win."""
    snapshots = table.snapshots
    cutoff = cutoff_ms
    kept_refs = {}
    removed = []
    for name, ref in sorted(table.metadata.refs.items()):
        if name == "main":
            kept_refs[name] = ref
            continue
        snap = snapshots.get(ref.snapshot_id)
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else max_ref_age_ms
        if snap is not None and now_ms - snap.timestamp_ms <= max_age:
            kept_refs[name] = ref
        else:
            removed.append(name)
    retain = {ref.snapshot_id for ref in kept_refs.values()}
    reached: set[int] = set()
    for ref in kept_refs.values():
        if getattr(ref.snapshot_ref_type, "value", ref.snapshot_ref_type) != "branch":
            reached.add(ref.snapshot_id)
            continue
        older = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else cutoff
        keep_n = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else retain_last
        kept_here = 0
        walking = True
        for snap in ancestors(snapshots, ref.snapshot_id):
            reached.add(snap.snapshot_id)
            if walking and (kept_here < keep_n or snap.timestamp_ms >= older):
                retain.add(snap.snapshot_id)
                kept_here += 1
            else:
                walking = False
    for sid, snap in snapshots.items():
        if sid not in reached and snap.timestamp_ms >= cutoff:
            retain.add(sid)
    return sorted(s for s in snapshots if s not in retain), removed
