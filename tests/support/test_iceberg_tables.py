"""The Iceberg reference tables are real pyiceberg 0.12 tables, and the checks on them can fail.

Observed pyiceberg 0.12.0 behaviour these tests pin:

* the SQL catalog puts a table at ``<warehouse>/<namespace>/<table>``; every
  location in its metadata is a ``file://`` URI.
* ``overwrite(df, overwrite_filter)`` commits two snapshots in one transaction:
  ``delete`` then ``append``. ``delete(filter)`` commits ``delete`` when whole
  files match (dropped by metadata alone) and ``overwrite`` when files must be
  rewritten (copy-on-write), nothing at all when no file matches.
* an older snapshot is scanned with the schema it was written with.
* the scan applies position deletes and refuses equality deletes with
  ``ValueError``.
* ``expire_snapshots`` only edits metadata: files stay on disk.
"""

from __future__ import annotations

import collections
import datetime
import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus
from pyiceberg.table.puffin import PuffinFile
from pyiceberg.table.refs import SnapshotRefType

from tests.support import iceberg_files
from tests.support.iceberg_tables import (
    CHURN_BRANCH,
    CHURN_BRANCH_MAX_REF_AGE_MS,
    CHURN_BRANCH_MAX_SNAPSHOT_AGE_MS,
    CHURN_BRANCH_MIN_SNAPSHOTS_TO_KEEP,
    CHURN_TAG_MAX_REF_AGE_MS,
    EQUALITY_DELETED_IDS,
    START_MS,
    STEP_MS,
    catalog_env,
    churn,
    equality_deletes,
    files_added_in,
    files_on_disk,
    many_appends,
    missing_files,
    position_deletes,
    referenced_files,
    rows_by_snapshot,
    sql_catalog,
    with_statistics,
)


@pytest.fixture
def catalog(tmp_path):
    return sql_catalog(tmp_path)


def _ops(table) -> list[str]:
    return [s.summary.operation.value for s in table.snapshots()]


def _ids(rows: collections.Counter) -> collections.Counter:
    return collections.Counter(row[0] for row in rows.elements())


def _file_rows(location: str) -> list[dict]:
    # ParquetFile, not read_table: read_table would add hive partition columns from "region=eu/" in the path
    return pq.ParquetFile(_local(location)).read().to_pylist()


def _local(location: str) -> str:
    assert location.startswith("file:///"), location
    return location[len("file://"):]


# --------------------------------------------------------------------------- catalog


def test_catalog_env_opens_the_same_catalog_in_a_fresh_process(tmp_path, catalog):
    built = many_appends(catalog, "events", n=2)
    env = catalog_env(tmp_path)
    assert sorted(env) == [
        "PYICEBERG_CATALOG__LAKESWEEP__TYPE",
        "PYICEBERG_CATALOG__LAKESWEEP__URI",
        "PYICEBERG_CATALOG__LAKESWEEP__WAREHOUSE",
    ]
    script = textwrap.dedent(
        """
        from pyiceberg.catalog import load_catalog
        print(load_catalog("lakesweep").load_table("db.events").metadata_location)
        """
    )
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("PYICEBERG_")}
    out = subprocess.run(
        [sys.executable, "-c", script], env={**clean, **env}, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == built.table.metadata_location


def test_catalog_env_in_process_needs_pyiceberg_config_rebuilt(tmp_path, monkeypatch):
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    # the SQL catalog keys its rows by catalog name: the name must be the one the table was created under
    built = many_appends(sql_catalog(tmp_path, "lake-a"), "events", n=1)
    for key, value in catalog_env(tmp_path, "lake-a").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    loaded = pyiceberg.catalog.load_catalog("lake-a").load_table("db.events")
    assert loaded.metadata_location == built.table.metadata_location


def test_catalog_env_refuses_a_name_pyiceberg_cannot_read_back(tmp_path):
    with pytest.raises(ValueError) as e:
        catalog_env(tmp_path, "my_catalog")
    assert str(e.value) == (
        "catalog name 'my_catalog': pyiceberg reads environment variables lower-cased with '_' as '-', "
        "so use lower-case letters, digits and '-'"
    )


def test_sql_catalog_reopened_finds_the_table(tmp_path, catalog):
    built = many_appends(catalog, "events", n=1)
    again = sql_catalog(tmp_path).load_table("db.events")
    assert again.metadata_location == built.table.metadata_location
    assert again.location() == (tmp_path / "warehouse" / "db" / "events").resolve().as_uri()


# --------------------------------------------------------------------------- many_appends


def test_many_appends_one_snapshot_and_one_manifest_per_append(catalog):
    built = many_appends(catalog, "events", n=20)
    t = built.table
    snapshots = t.snapshots()
    assert len(snapshots) == 20
    assert _ops(t) == ["append"] * 20
    assert [len(s.manifests(t.io)) for s in snapshots] == list(range(1, 21))
    assert [s.timestamp_ms for s in snapshots] == [START_MS + STEP_MS * (i + 1) for i in range(20)]
    assert [f.name for f in t.spec().fields] == ["region", "dt"]
    # every data file holds one (region, dt) partition
    for s in snapshots:
        for f in files_added_in(t, s.snapshot_id):
            # a date partition value is stored as days since 1970-01-01
            days = {(r["region"], (r["dt"] - datetime.date(1970, 1, 1)).days) for r in _file_rows(f.file_path)}
            assert days == {(f.partition[0], f.partition[1])}


def test_many_appends_rows_grow_by_three_per_snapshot(catalog):
    built = many_appends(catalog, "events", n=20)
    rows = rows_by_snapshot(built.table)
    assert rows == built.expected
    ids = [sorted(_ids(rows[s.snapshot_id])) for s in built.table.snapshots()]
    assert ids == [list(range(3 * (i + 1))) for i in range(20)]


def test_many_appends_is_deterministic_given_the_seed(tmp_path):
    def content(path, seed):
        built = many_appends(sql_catalog(path), "events", n=3, seed=seed)
        return sorted(c for rows in built.expected.values() for c in rows.elements())

    assert content(tmp_path / "a", 7) == content(tmp_path / "b", 7)
    assert content(tmp_path / "a2", 7) != content(tmp_path / "c", 8)


def test_many_appends_unpartitioned_writes_one_file_per_append(catalog):
    built = many_appends(catalog, "flat", n=3, partitioned=False)
    t = built.table
    assert t.spec().is_unpartitioned()
    assert [len(files_added_in(t, s.snapshot_id)) for s in t.snapshots()] == [1, 1, 1]
    assert rows_by_snapshot(t) == built.expected


# --------------------------------------------------------------------------- churn


@pytest.fixture
def churned(catalog):
    return churn(catalog, "churn", seed=3)


def test_churn_snapshots_and_operations(churned):
    t = churned.table
    assert _ops(t) == [
        "append", "append",              # ids 0-11, 12-23
        "delete", "append",              # overwrite category a
        "delete",                        # category b: whole files
        "overwrite",                     # id in {2, 5}: copy-on-write rewrite
        "append",                        # with notes
        "append", "append",              # on the audit branch
        "append", "append",              # spec 1, spec 2
        "delete",                        # dt = day 4: whole files
        "append",
        "delete",                        # position delete file
    ]  # fmt: skip
    assert [s.kind for s in churned.steps if not s.snapshot_ids] == [
        "tag", "branch", "add-column", "branch-retention", "add-partition-field", "remove-partition-field", "tag"
    ]  # fmt: skip
    # every change one clock step after the one before; the overwrite's two snapshots share it
    assert [s.timestamp_ms for s in churned.steps] == [START_MS + STEP_MS * (i + 1) for i in range(len(churned.steps))]
    by_id = {s.snapshot_id: s for s in t.snapshots()}
    for step in churned.steps:
        assert [by_id[sid].timestamp_ms for sid in step.snapshot_ids] == [step.timestamp_ms] * len(step.snapshot_ids)
    assert t.metadata.last_updated_ms == churned.steps[-1].timestamp_ms
    log = [e.timestamp_ms for e in t.metadata.metadata_log]
    assert log == sorted(log) and len(log) == len(churned.steps)


def test_churn_refs(churned):
    t = churned.table
    s1, s2 = churned.snapshots_of("append")[:2]
    branch_heads = churned.snapshots_of("branch-append")
    refs = t.refs()
    assert sorted(refs) == ["audit", "first", "main", "release"]
    first = refs["first"]
    assert (first.snapshot_ref_type, first.snapshot_id, first.max_ref_age_ms) == (
        SnapshotRefType.TAG, s1, CHURN_TAG_MAX_REF_AGE_MS
    )  # fmt: skip
    audit = refs[CHURN_BRANCH]
    assert audit.snapshot_ref_type == SnapshotRefType.BRANCH
    assert audit.snapshot_id == branch_heads[1]
    assert (audit.max_ref_age_ms, audit.max_snapshot_age_ms, audit.min_snapshots_to_keep) == (
        CHURN_BRANCH_MAX_REF_AGE_MS, CHURN_BRANCH_MAX_SNAPSHOT_AGE_MS, CHURN_BRANCH_MIN_SNAPSHOTS_TO_KEEP
    )  # fmt: skip
    assert t.snapshot_by_id(branch_heads[1]).parent_snapshot_id == branch_heads[0]
    assert t.snapshot_by_id(branch_heads[0]).parent_snapshot_id == s2
    release = refs["release"]
    assert (release.snapshot_ref_type, release.max_ref_age_ms) == (SnapshotRefType.TAG, None)
    assert release.snapshot_id == churned.snapshots_of("append")[-2]  # the append after the spec's second change
    assert refs["main"].snapshot_id == churned.step("position-delete").snapshot_ids[0]


def test_churn_schema_and_spec_evolution(churned):
    t = churned.table
    assert [[f.name for f in s.fields] for s in t.schemas().values()] == [
        ["id", "category", "dt", "qty"],
        ["id", "category", "dt", "qty", "note"],
    ]
    assert {spec_id: [f.name for f in spec.fields] for spec_id, spec in t.specs().items()} == {
        0: ["category"],
        1: ["category", "dt"],
        2: ["dt"],
    }
    live_specs = collections.Counter(
        e.data_file.spec_id
        for m in t.current_snapshot().manifests(t.io)
        for e in m.fetch_manifest_entry(t.io)
        if e.data_file.content == DataFileContent.DATA
    )
    # day-4 files (specs 1 and 2) were deleted; spec 2 holds the last append
    assert set(live_specs) == {0, 2}


def test_churn_rows_by_snapshot_follow_the_writes(churned):
    t = churned.table
    rows = rows_by_snapshot(t)
    assert rows == churned.expected
    ids = {sid: _ids(r) for sid, r in rows.items()}
    s1, s2, _, s4, s5, s6, s7, b1, b2, s10, s11, s12, s13, s14 = [s.snapshot_id for s in t.snapshots()]
    cat = {sid: collections.Counter("abc"[i % 3] if i < 100 else None for i in c.elements()) for sid, c in ids.items()}
    assert sorted(ids[s1]) == list(range(12)) and sorted(ids[s2]) == list(range(24))
    overwrite_delete, overwrite_append = churned.step("overwrite").snapshot_ids
    assert "a" not in cat[overwrite_delete]
    assert ids[overwrite_append] - ids[overwrite_delete] == collections.Counter(range(100, 104))
    assert "b" not in cat[s5] and cat[s4]["b"] == 8
    assert ids[s5] - ids[s6] == collections.Counter([2, 5]) and not ids[s6] - ids[s5]
    # the schema evolution shows in the row shape: 4 columns before, 5 after
    assert {len(r) for r in rows[s6]} == {4} and {len(r) for r in rows[s7]} == {5}
    assert ids[b2] - ids[s2] == collections.Counter(range(300, 306))
    assert ids[s11] - ids[s7] == collections.Counter(range(400, 406)) + collections.Counter(range(500, 506))
    assert ids[s11] - ids[s12] == collections.Counter(range(400, 406)) + collections.Counter(range(500, 506))
    assert ids[s10] - ids[s7] == collections.Counter(range(400, 406))
    assert sum((ids[s13] - ids[s14]).values()) == 1 and set(ids[s13] - ids[s14]) <= set(range(600, 604))


def test_churn_position_delete_hides_row_zero_of_the_last_file(churned):
    t = churned.table
    last_append = churned.snapshots_of("append")[-1]
    (data_file,) = files_added_in(t, last_append)
    first_row = _file_rows(data_file.file_path)[0]
    rows = rows_by_snapshot(t)
    (pos_delete,) = churned.step("position-delete").snapshot_ids
    assert _ids(rows[last_append]) - _ids(rows[pos_delete]) == collections.Counter([first_row["id"]])
    summary = t.snapshot_by_id(pos_delete).summary
    assert (summary["added-position-delete-files"], summary["added-position-deletes"]) == ("1", "1")
    assert summary["total-position-deletes"] == "1"


def test_churn_is_deterministic_given_the_seed(tmp_path):
    def content(path, seed):
        built = churn(sql_catalog(path), "churn", seed=seed)
        snapshot_ids = [s.snapshot_id for s in built.table.snapshots()]
        return [sorted(built.expected[sid].elements(), key=repr) for sid in snapshot_ids]

    assert content(tmp_path / "a", 1) == content(tmp_path / "b", 1)
    assert content(tmp_path / "a2", 1) != content(tmp_path / "c", 2)


def test_pyiceberg_drops_branch_retention_on_a_commit_to_the_branch(catalog):
    built = many_appends(catalog, "events", n=1, partitioned=False)
    t = built.table
    t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, "b", 1000, 2000, 3).commit()
    ref = t.refs()["b"]
    assert (ref.max_ref_age_ms, ref.max_snapshot_age_ms, ref.min_snapshots_to_keep) == (1000, 2000, 3)
    t.append(t.scan().to_arrow(), branch="b")
    ref = t.refs()["b"]
    assert (ref.max_ref_age_ms, ref.max_snapshot_age_ms, ref.min_snapshots_to_keep) == (None, None, None)


# --------------------------------------------------------------------------- delete files


def test_position_deletes_hide_exactly_the_rows_at_those_positions(catalog):
    built = position_deletes(catalog, "pos")
    t = built.table
    s1, d1, s3, d2 = [s.snapshot_id for s in t.snapshots()]
    assert _ops(t) == ["append", "delete", "append", "delete"]
    files = {f.partition[0]: _file_rows(f.file_path) for f in files_added_in(t, s1)}
    third = _file_rows(files_added_in(t, s3)[0].file_path)
    rows = rows_by_snapshot(t)
    assert rows == built.expected
    assert _ids(rows[s1]) - _ids(rows[d1]) == collections.Counter([files["eu"][1]["id"], files["eu"][4]["id"]])
    assert _ids(rows[s3]) - _ids(rows[d2]) == collections.Counter(
        [files["us"][0]["id"], third[2]["id"], third[3]["id"]]
    )
    assert not _ids(rows[d1]) - _ids(rows[s1]) and not _ids(rows[d2]) - _ids(rows[s3])
    # position deletes apply to data of the same or older sequence number only: the third file
    # (newer than d1) lost only what d2 names
    assert t.snapshot_by_id(d2).summary["total-position-deletes"] == "5"
    manifests = t.snapshot_by_id(d2).manifests(t.io)
    assert sorted(m.content for m in manifests) == [ManifestContent.DATA] * 2 + [ManifestContent.DELETES] * 2
    deletes = [e for m in manifests if m.content == ManifestContent.DELETES for e in m.fetch_manifest_entry(t.io)]
    assert {e.data_file.content for e in deletes} == {DataFileContent.POSITION_DELETES}
    assert sorted(e.data_file.record_count for e in deletes) == [1, 2, 2]


def test_independent_reader_agrees_with_pyiceberg_scan_on_position_deletes(catalog):
    built = position_deletes(catalog, "pos")
    t = built.table
    independent = {s.snapshot_id: iceberg_files.rows_from_files(t, s.snapshot_id) for s in t.snapshots()}
    assert independent == rows_by_snapshot(t)


def test_position_delete_on_a_branch_leaves_main_alone(catalog):
    built = many_appends(catalog, "events", n=2, partitioned=False)
    t = built.table
    s1, s2 = [s.snapshot_id for s in t.snapshots()]
    t.manage_snapshots().create_branch(s2, "fix").commit()
    (data_file,) = files_added_in(t, s1)
    on_branch = iceberg_files.commit_delete_files(
        t, [iceberg_files.write_position_delete_file(t, data_file, [0])], branch="fix"
    )
    assert t.refs()["fix"].snapshot_id == on_branch and t.current_snapshot().snapshot_id == s2
    rows = rows_by_snapshot(t)
    assert sum(rows[s2].values()) == 6 and sum(rows[on_branch].values()) == 5


def test_equality_deletes_hide_matching_rows_of_their_partition_only(catalog):
    built = equality_deletes(catalog, "eq")
    t = built.table
    s1, d, s3 = [s.snapshot_id for s in t.snapshots()]
    assert _ops(t) == ["append", "delete", "append"]
    rows = {sid: iceberg_files.rows_from_files(t, sid) for sid in (s1, d, s3)}
    assert rows == built.expected
    by_region = {sid: collections.Counter((r[1], r[0]) for r in c.elements()) for sid, c in rows.items()}
    assert by_region[s1] - by_region[d] == collections.Counter(("eu", i) for i in EQUALITY_DELETED_IDS)
    assert all(by_region[d][("us", i)] == 1 for i in EQUALITY_DELETED_IDS)
    # the re-appended eu id 3 is newer than the delete file: it stays
    assert by_region[s3] - by_region[d] == collections.Counter([("eu", 3)])
    summary = t.snapshot_by_id(d).summary
    assert (summary["added-equality-delete-files"], summary["added-equality-deletes"]) == ("1", "2")


def test_pyiceberg_scan_refuses_equality_deletes(catalog):
    built = equality_deletes(catalog, "eq")
    t = built.table
    s1, d, _ = [s.snapshot_id for s in t.snapshots()]
    assert sum(rows_by_snapshot_of(t, s1).values()) == 20
    with pytest.raises(ValueError) as e:
        t.scan(snapshot_id=d).to_arrow()
    assert str(e.value) == (
        "PyIceberg does not yet support equality deletes: https://github.com/apache/iceberg/issues/6568"
    )
    with pytest.raises(ValueError):
        rows_by_snapshot(t)


def rows_by_snapshot_of(table, snapshot_id):
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow()
    return collections.Counter(tuple(r.values()) for r in arrow.to_pylist())


# --------------------------------------------------------------------------- statistics


def test_statistics_files_are_valid_puffin_and_referenced(catalog):
    built = with_statistics(catalog, "stats")
    t = built.table
    s1, s2, _ = [s.snapshot_id for s in t.snapshots()]
    stats = {s.snapshot_id: s for s in t.metadata.statistics}
    assert sorted(stats) == sorted([s1, s2])
    for sid, expected_ndv in ((s1, {1: "6", 2: "3"}), (s2, {1: "12", 2: "3"})):
        statistics_file = stats[sid]
        with open(_local(statistics_file.statistics_path), "rb") as f:
            data = f.read()
        assert len(data) == statistics_file.file_size_in_bytes
        puffin = PuffinFile(data)
        last_blob = puffin.footer.blobs[-1]
        assert statistics_file.file_footer_size_in_bytes == len(data) - last_blob.offset - last_blob.length
        assert [(b.type, b.fields, b.snapshot_id) for b in puffin.footer.blobs] == [
            ("apache-datasketches-theta-v1", [1], sid), ("apache-datasketches-theta-v1", [2], sid)
        ]  # fmt: skip
        assert {b.fields[0]: b.properties["ndv"] for b in puffin.footer.blobs} == expected_ndv
        for blob in puffin.footer.blobs:
            sketch = puffin.get_blob_payload(blob)
            # compact theta sketch: 2 preamble longs, then one 8-byte hash per distinct value
            assert sketch[:3] == bytes([2, 3, 3])
            assert int.from_bytes(sketch[8:12], "little") == int(blob.properties["ndv"])
            assert len(sketch) == 16 + 8 * int(blob.properties["ndv"])
    (partition_stats,) = t.metadata.partition_statistics
    assert partition_stats.snapshot_id == s2
    table = pq.ParquetFile(_local(partition_stats.statistics_path)).read()
    assert os.path.getsize(_local(partition_stats.statistics_path)) == partition_stats.file_size_in_bytes
    assert [f.metadata[b"PARQUET:field_id"] for f in table.schema][:5] == [b"1", b"2", b"3", b"4", b"5"]
    counts = [(r["partition"]["region"], r["data_record_count"], r["data_file_count"]) for r in table.to_pylist()]
    assert sorted(counts) == [("ap", 4, 2), ("eu", 4, 2), ("us", 4, 2)]
    referenced = referenced_files(t)
    assert {s.statistics_path for s in stats.values()} | {partition_stats.statistics_path} <= referenced


def test_theta_sketch_of_nothing_is_the_empty_compact_sketch():
    assert iceberg_files.theta_sketch([]) == bytes([1, 3, 3, 0, 0, 0b11110]) + (0x93CC).to_bytes(2, "little")


# --------------------------------------------------------------------------- checks


def test_every_file_on_disk_is_referenced_and_none_is_missing(churned):
    t = churned.table
    assert files_on_disk(t) == referenced_files(t)
    assert missing_files(t) == []


def test_missing_files_names_a_deleted_data_file_and_statistics_file(catalog):
    built = with_statistics(catalog, "stats")
    t = built.table
    s1 = t.snapshots()[0].snapshot_id
    data_path = files_added_in(t, s1)[0].file_path
    stats_path = t.metadata.statistics[0].statistics_path
    os.remove(_local(data_path))
    os.remove(_local(stats_path))
    assert missing_files(t) == sorted([data_path, stats_path])


def test_missing_files_reports_a_missing_manifest_list_and_skips_what_it_lists(catalog):
    built = many_appends(catalog, "events", n=2, partitioned=False)
    t = built.table
    s1, s2 = t.snapshots()
    os.remove(_local(s2.manifest_list))
    assert missing_files(t) == [s2.manifest_list]


def test_old_metadata_files_are_referenced_but_not_required(catalog):
    built = many_appends(catalog, "events", n=2)
    t = built.table
    (first, second) = [e.metadata_file for e in t.metadata.metadata_log]
    assert {first, second, t.metadata_location} <= referenced_files(t)
    os.remove(_local(first))
    assert missing_files(t) == []
    os.remove(_local(t.metadata_location))
    assert missing_files(t) == [t.metadata_location]


def test_files_only_in_deleted_entries_are_referenced_but_not_required(catalog):
    built = many_appends(catalog, "events", n=2, partitioned=True, seed=5)
    t = built.table
    s1, s2 = [s.snapshot_id for s in t.snapshots()]
    region = files_added_in(t, s1)[0].partition[0]
    t.delete(EqualTo("region", region))
    assert _ops(t)[-1] == "delete"
    gone = {f.file_path for sid in (s1, s2) for f in files_added_in(t, sid) if f.partition[0] == region}
    t.maintenance.expire_snapshots().by_ids([s1, s2]).commit()
    assert [s.snapshot_id for s in t.snapshots()] == [t.current_snapshot().snapshot_id]
    deleted_entries = {
        e.data_file.file_path
        for m in t.current_snapshot().manifests(t.io)
        for e in m.fetch_manifest_entry(t.io, discard_deleted=False)
        if e.status == ManifestEntryStatus.DELETED
    }
    assert deleted_entries == gone and gone <= referenced_files(t)
    for path in gone:
        os.remove(_local(path))
    assert missing_files(t) == []


def test_an_orphan_is_on_disk_but_not_referenced(churned):
    t = churned.table
    orphan = f"{t.location()}/data/orphan.parquet"
    with open(_local(orphan), "wb") as f:
        f.write(b"not referenced")
    assert files_on_disk(t) - referenced_files(t) == {orphan}
