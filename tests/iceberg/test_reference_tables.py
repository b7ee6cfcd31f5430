"""Expire, orphans and rewrite-manifests on the reference tables (``tests/support/iceberg_tables.py``): churn
with branches, tags and spec evolution, position and equality delete files, statistics files. After each
operation every retained snapshot reads the rows the builder wrote, and no file the metadata needs is gone."""

from __future__ import annotations

import collections
import os

import pytest

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.kinds import plan_kind
from tests.support import iceberg_files, iceberg_tables as it

BUILDERS = {"churn": it.churn, "position": it.position_deletes, "equality": it.equality_deletes,
            "statistics": it.with_statistics}


@pytest.fixture
def catalog(tmp_path, monkeypatch):
    for key, value in it.catalog_env(tmp_path / "lake").items():
        monkeypatch.setenv(key, value)
    return it.sql_catalog(tmp_path / "lake")


def rows(table, sid):
    """A snapshot's rows: pyiceberg's scan, or the files read directly where pyiceberg refuses (equality deletes)."""
    try:
        data = table.scan(snapshot_id=sid).to_arrow()
    except ValueError as e:
        assert "equality deletes" in str(e)
        return iceberg_files.rows_from_files(table, sid)
    return collections.Counter(tuple(it._hashable(v) for v in row.values()) for row in data.to_pylist())


def all_rows(table):
    return {s.snapshot_id: rows(table, s.snapshot_id) for s in table.metadata.snapshots}


def run(kind, tmp_path, *, now_ms, **flags):
    view = IcebergTable(it.CATALOG_NAME, f"{it.NAMESPACE}.t")
    entry = plan_kind(kind, "iceberg")
    p = entry.read_and_plan(view, now_ms=now_ms, options=entry.resolve_options(view.options, **flags))
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole, report
    return p, report


def needed(table) -> set[str]:
    return {f for f in it.referenced_files(table)}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_expire_keeps_what_retained_snapshots_read_and_frees_the_rest(catalog, tmp_path, name):
    built = BUILDERS[name](catalog, f"{it.NAMESPACE}.t")
    t = catalog.load_table(f"{it.NAMESPACE}.t")
    before = all_rows(t)
    stamps = sorted(s.timestamp_ms for s in t.metadata.snapshots)
    cutoff = stamps[len(stamps) // 2]
    p, report = run("expire", tmp_path, now_ms=stamps[-1] + it.DAY_MS, older_than=str(cutoff))
    assert p.scope.expired, "the cut-off expires something"
    after = catalog.load_table(f"{it.NAMESPACE}.t")
    kept = {s.snapshot_id for s in after.metadata.snapshots}
    assert not kept & set(p.scope.expired)
    for name_, ref in after.metadata.refs.items():
        assert ref.snapshot_id in kept, name_
    assert all_rows(after) == {sid: r for sid, r in before.items() if sid in kept}
    for sid in kept:
        if sid in built.expected:
            assert rows(after, sid) == built.expected[sid]
    assert it.missing_files(after) == []
    # nothing that only expired snapshots reached is left: what is on disk, the metadata names (or it is an
    # old metadata file, which expiry never deletes)
    leftover = {f for f in it.files_on_disk(after) - needed(after) if not f.endswith(".metadata.json")}
    assert leftover == set()


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rewrite_manifests_keeps_every_snapshots_rows_and_carries_delete_manifests(catalog, tmp_path, name):
    BUILDERS[name](catalog, f"{it.NAMESPACE}.t")
    t = catalog.load_table(f"{it.NAMESPACE}.t")
    before = all_rows(t)
    head = t.current_snapshot()
    manifests = head.manifests(t.io)
    deletes = sorted(canonical(m.manifest_path) for m in manifests if m.content == 1)
    specs = {m.partition_spec_id for m in manifests if m.content == 0 and (m.added_files_count or m.existing_files_count)}
    p, _ = run("rewrite-manifests", tmp_path, now_ms=0, min_manifests=1)
    after = catalog.load_table(f"{it.NAMESPACE}.t")
    new_head = after.current_snapshot()
    new = new_head.manifests(after.io)
    assert sorted(canonical(m.manifest_path) for m in new if m.content == 1) == deletes
    assert sorted(m.partition_spec_id for m in new if m.content == 0) == sorted(specs)
    assert rows(after, new_head.snapshot_id) == before[head.snapshot_id]
    assert {sid: r for sid, r in all_rows(after).items() if sid != new_head.snapshot_id} == before
    assert it.missing_files(after) == []


def test_expiring_snapshots_with_statistics_deletes_their_files_and_keeps_the_rest(catalog, tmp_path):
    built = it.with_statistics(catalog, f"{it.NAMESPACE}.t")
    t = catalog.load_table(f"{it.NAMESPACE}.t")
    stats = {f.snapshot_id: canonical(f.statistics_path) for f in t.metadata.statistics}
    partition_stats = {f.snapshot_id: canonical(f.statistics_path) for f in t.metadata.partition_statistics}
    s1, s2 = sorted(stats, key=lambda s: t.snapshot_by_id(s).timestamp_ms)
    cutoff = t.snapshot_by_id(s2).timestamp_ms  # expires snapshot 1 only
    p, _ = run("expire", tmp_path, now_ms=cutoff + it.DAY_MS, older_than=str(cutoff), retain_last=1)
    assert p.scope.expired == [s1]
    assert not os.path.exists(stats[s1]) and os.path.exists(stats[s2]) and os.path.exists(partition_stats[s2])
    after = catalog.load_table(f"{it.NAMESPACE}.t")
    assert [f.snapshot_id for f in after.metadata.statistics] == [s2]
    assert it.missing_files(after) == [] and built.expected


def test_orphans_keep_statistics_files_and_remove_an_unreferenced_one(catalog, tmp_path):
    it.with_statistics(catalog, f"{it.NAMESPACE}.t")
    t = catalog.load_table(f"{it.NAMESPACE}.t")
    root = canonical(t.metadata.location)
    stray = os.path.join(root, "metadata", "orphan-stats.puffin")
    with open(stray, "wb") as f:
        f.write(b"PFA1")
    for path in {canonical(f) for f in it.files_on_disk(t)} | {stray}:
        os.utime(path, (1, 1))
    p, report = run("orphans", tmp_path, now_ms=it.START_MS + 400 * it.DAY_MS)
    assert [a.path for a in p.actions] == ["metadata/orphan-stats.puffin"] and report.counts["DELETED"] == 1
    after = catalog.load_table(f"{it.NAMESPACE}.t")
    assert it.missing_files(after) == []


def test_expiring_the_snapshot_with_partition_statistics_deletes_them_and_takes_them_out_of_the_metadata(
        catalog, tmp_path):
    it.with_statistics(catalog, f"{it.NAMESPACE}.t")
    t = catalog.load_table(f"{it.NAMESPACE}.t")
    stats = {canonical(f.statistics_path) for f in t.metadata.statistics}
    [partition_stats] = [canonical(f.statistics_path) for f in t.metadata.partition_statistics]
    head = t.current_snapshot()
    p, _ = run("expire", tmp_path, now_ms=head.timestamp_ms + it.DAY_MS, older_than=str(head.timestamp_ms),
               retain_last=1)
    assert len(p.scope.expired) == len(t.metadata.snapshots) - 1
    after = catalog.load_table(f"{it.NAMESPACE}.t")
    assert after.metadata.statistics == [] and after.metadata.partition_statistics == []
    assert not any(os.path.exists(f) for f in stats | {partition_stats})
    assert it.missing_files(after) == [] and it.rows_by_snapshot(after)[head.snapshot_id]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_manifest_entries_read_as_pyiceberg_reads_them(catalog, name):
    BUILDERS[name](catalog, f"{it.NAMESPACE}.t")
    t = catalog.load_table(f"{it.NAMESPACE}.t")
    view = IcebergTable(it.CATALOG_NAME, f"{it.NAMESPACE}.t")
    checked = 0
    for s in t.metadata.snapshots:
        for ref, m in zip(view.manifest_list(view.snapshots[s.snapshot_id]), s.manifests(t.io)):
            theirs = [(canonical(e.data_file.file_path), int(e.data_file.content), e.data_file.file_size_in_bytes,
                       int(e.status), len(e.data_file.partition)) for e in m.fetch_manifest_entry(t.io, discard_deleted=False)]
            ours = [(f.path, f.content, f.size, f.status, len(f.partition.split("/")) if f.partition else 0)
                    for f in view.manifest_entries(ref)]
            assert ours == theirs
            checked += len(ours)
    assert checked > 5
