"""Iceberg's retention rule (``engine.iceberg.retention.expire_rule``) on random snapshot graphs: against a
transcription of ``RemoveSnapshots#internalApply`` step by step (``computeRetainedRefs``,
``computeAllBranchSnapshotsToRetain``, ``unreferencedSnapshotsToRetain``), and its invariants."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from hypothesis import given, strategies as st

from lakesweep.engine.iceberg.retention import expire_rule

LONG_MAX = (1 << 63) - 1


@dataclass
class Snap:
    snapshot_id: int
    parent_snapshot_id: int | None
    timestamp_ms: int


@dataclass
class Ref:
    snapshot_id: int
    snapshot_ref_type: str
    max_ref_age_ms: int | None = None
    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None


@st.composite
def tables(draw):
    n = draw(st.integers(1, 25))
    snaps = {}
    for i in range(1, n + 1):
        parent = draw(st.one_of(st.none(), st.integers(1, i - 1))) if i > 1 else None
        snaps[i] = Snap(i, parent, i * 1000)
    if draw(st.booleans()) and n > 2:  # a parent that was expired before: the walk stops there
        snaps.pop(draw(st.integers(1, n - 1)))
    ids = sorted(snaps)
    refs = {"main": Ref(draw(st.sampled_from(ids)), "branch")}
    ages = st.one_of(st.none(), st.integers(0, 30_000))
    for k in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["branch", "tag"]))
        refs[f"{kind}{k}"] = Ref(draw(st.sampled_from(ids + [999])), kind, draw(ages),
                                 draw(ages) if kind == "branch" else None,
                                 draw(st.one_of(st.none(), st.integers(1, 5))) if kind == "branch" else None)
    table = SimpleNamespace(snapshots=snaps, metadata=SimpleNamespace(refs=refs))
    settings = dict(now_ms=draw(st.integers(n * 1000, n * 1000 + 40_000)), cutoff_ms=draw(st.integers(0, n * 1000 + 1000)),
                    retain_last=draw(st.integers(1, 6)), max_ref_age_ms=draw(st.sampled_from([LONG_MAX, 5_000, 0])))
    return table, settings


def java_remove_snapshots(table, *, now_ms, cutoff_ms, retain_last, max_ref_age_ms):
    """``RemoveSnapshots#internalApply`` as Iceberg's Java writes it, loop for loop."""
    base = table.snapshots
    retained_refs = {}
    for name, ref in table.metadata.refs.items():
        if name == "main":
            retained_refs[name] = ref
            continue
        snapshot = base.get(ref.snapshot_id)
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else max_ref_age_ms
        if snapshot is not None and now_ms - snapshot.timestamp_ms <= max_age:
            retained_refs[name] = ref
    ids_to_retain = {ref.snapshot_id for ref in retained_refs.values()}
    for ref in retained_refs.values():  # computeAllBranchSnapshotsToRetain
        if ref.snapshot_ref_type != "branch":
            continue
        older = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else cutoff_ms
        min_keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else retain_last
        kept: set[int] = set()
        sid = ref.snapshot_id
        while sid in base:  # SnapshotUtil.ancestorsOf
            ancestor = base[sid]
            if len(kept) < min_keep or ancestor.timestamp_ms >= older:
                kept.add(ancestor.snapshot_id)
            else:
                break
            sid = ancestor.parent_snapshot_id
        ids_to_retain |= kept
    referenced = set()  # unreferencedSnapshotsToRetain
    for ref in retained_refs.values():
        if ref.snapshot_ref_type == "branch":
            sid = ref.snapshot_id
            while sid in base:
                referenced.add(sid)
                sid = base[sid].parent_snapshot_id
        else:
            referenced.add(ref.snapshot_id)
    ids_to_retain |= {s.snapshot_id for s in base.values()
                      if s.snapshot_id not in referenced and s.timestamp_ms >= cutoff_ms}
    removed_refs = sorted(set(table.metadata.refs) - set(retained_refs))
    return sorted(s for s in base if s not in ids_to_retain), removed_refs


@given(tables())
def test_the_rule_is_javas_remove_snapshots(case):
    table, settings = case
    assert expire_rule(table, **settings) == java_remove_snapshots(table, **settings)


@given(tables())
def test_main_and_every_kept_refs_snapshot_survive(case):
    table, settings = case
    expired, removed = expire_rule(table, **settings)
    assert "main" not in removed
    for name, ref in table.metadata.refs.items():
        if name not in removed:
            assert ref.snapshot_id not in expired
    assert expired == sorted(set(expired)) and set(expired) <= set(table.snapshots)
