"""Compaction's core on tables pyiceberg wrote: bins per spec and partition as SeaweedFS's worker packs them
(the seed's three before/after examples, file for file), the deletes each bin applies by Iceberg's
sequence-number rules, and merged outputs holding exactly the rows pyiceberg's scan reads from their inputs."""

from __future__ import annotations

import collections
import dataclasses
import os
import pickle
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, parquet_file_to_data_file
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import StringType

from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, PlanRejected
from lakesweep.engine.iceberg.compaction import (DELETES_NOT_APPLIED, NO_CURRENT_SNAPSHOT, NO_ELIGIBLE_FILES, pack,
                                                 plan_bins, target_file_size)
from lakesweep.engine.iceberg.compaction_merge import merge_bin, output_location
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from tests.iceberg.conftest import SCHEMA, SPEC
from tests.iceberg.test_seaweedfs import BUCKET, history, mini, sw  # noqa: F401 (mini, sw: fixtures)
from tests.iceberg.test_seaweedfs import CATALOG as SEAWEED_CATALOG
from tests.support import iceberg_files, iceberg_tables
from tests.support.seaweed_iceberg import run_iceberg_maintenance

MB = 1024 * 1024


# ---- helpers ------------------------------------------------------------------------------------------


def append(table, ids, region="us"):
    table.append(pa.table({"id": pa.array(ids, pa.int64()), "region": [region] * len(ids)}))


def manifest_order(table):
    """(canonical path, size, spec id) of the current snapshot's live data files, in manifest-list order."""
    return [(canonical(e.data_file.file_path), e.data_file.file_size_in_bytes, m.partition_spec_id)
            for m in table.current_snapshot().manifests(table.io) if m.content == 0
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]


def plan(view, *, target_bytes=MB, min_input_files=5, apply_deletes=True):
    return plan_bins(view, target_bytes=target_bytes, min_input_files=min_input_files, apply_deletes=apply_deletes)


def merge(view, b, *, plan_id="p0", fileio=None, schema=None):
    return merge_bin(
        b.inputs, b.position_deletes, b.equality_deletes,
        output_location=output_location(view.metadata.location, view.options, partition=b.partition,
                                        plan_id=plan_id, bin_index=b.index),
        fileio=fileio or view.fileio, schema=schema or view.metadata.schema(), table_location=view.location,
        properties=view.options, format_version=view.metadata.format_version, identity_values=b.identity_values)


def rows_of_output(merged) -> collections.Counter:
    arrow = pq.ParquetFile(canonical(merged.location)).read()
    return collections.Counter(tuple(r.values()) for r in arrow.to_pylist())


def scanned_rows(table, paths) -> collections.Counter:
    """The rows pyiceberg's own scan reads from the data files ``paths`` (their position deletes applied)."""
    tasks = [t for t in table.scan().plan_files() if canonical(t.file.file_path) in set(paths)]
    assert len(tasks) == len(set(paths))
    arrow = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks)
    return collections.Counter(tuple(r.values()) for r in arrow.to_pylist())


def built(tmp_path, builder, name):
    catalog = iceberg_tables.sql_catalog(tmp_path)
    b = builder(catalog, f"db.{name}")
    return b, IcebergTable(iceberg_tables.CATALOG_NAME, f"db.{name}", catalog=catalog)


# ---- the seed's examples ------------------------------------------------------------------------------


def test_six_small_unpartitioned_files_become_one_output_with_the_same_rows(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    start = 0
    for n in (10, 5, 8, 12, 3, 15):  # the seed's 10, 5, 8, 12, 3, 15 MB, in rows
        append(t, list(range(start, start + n)))
        start += n
    t = lake.table()
    files = manifest_order(t)
    view = lake.view()
    scope = plan(view)
    assert scope.skipped is None and scope.data_files == 6 and scope.small_files == 6
    [b] = scope.bins
    assert (b.index, b.spec_id, b.partition, b.partition_values) == (0, 0, "", ())
    assert [(f.path, f.size) for f in b.inputs] == [(p, s) for p, s, _ in files]
    assert b.record_count == 53 and b.position_deletes == () and b.equality_deletes == ()
    merged = merge(view, b)
    assert merged.written and merged.record_count == 53 and merged.rows_read == 53
    assert merged.location == f"{t.metadata.location}/data/compact-p0-0.parquet"
    assert rows_of_output(merged) == scanned_rows(t, [p for p, _, _ in files])


def test_only_the_partition_with_enough_small_files_is_compacted(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    for i in range(5):
        append(t, [10 * i, 10 * i + 1], "us")
    for i in range(2):
        append(t, [100 + i], "eu")
    t = lake.table()
    us = [p for p, _, _ in manifest_order(t) if "/region=us/" in p]
    scope = plan(lake.view())
    [b] = scope.bins
    assert (b.partition, b.partition_values, b.identity_values) == ("region=us", ("us",), ((2, "us"),))
    assert [f.path for f in b.inputs] == us
    merged = merge(lake.view(), b)
    assert merged.location == f"{t.metadata.location}/data/region=us/compact-p0-0.parquet"
    assert rows_of_output(merged) == scanned_rows(t, us) and merged.record_count == 10


def test_an_oversized_group_splits_into_bins_of_eight_and_leaves_four_files_alone(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(20):
        append(t, [1000 + i])
    t = lake.table()
    files = manifest_order(t)
    [size] = {s for _, s, _ in files}  # twenty files of one size, the seed's 30 MB
    target = 8 * size + size // 2  # the seed's 256 MB: 8 files fit, 9 do not
    scope = plan(lake.view(), target_bytes=target)
    assert [len(b.inputs) for b in scope.bins] == [8, 8]
    paths = [p for p, _, _ in files]
    assert [f.path for f in scope.bins[0].inputs] == paths[:8]
    assert [f.path for f in scope.bins[1].inputs] == paths[8:16]
    assert [b.index for b in scope.bins] == [0, 1]
    for b in scope.bins:
        assert b.total_size <= target
        merged = merge(lake.view(), b)
        assert rows_of_output(merged) == scanned_rows(t, [f.path for f in b.inputs])
        assert merged.location.endswith(f"/data/compact-p0-{b.index}.parquet")


def test_files_at_or_above_the_target_are_never_candidates(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(6):
        append(t, list(range(100_000 * i, 100_000 * i + 1 + 5000 * (i == 5))))  # the last file is the biggest
    files = manifest_order(lake.table())
    big = max(s for _, s, _ in files)
    scope = plan(lake.view(), target_bytes=big)
    [b] = scope.bins
    assert len(b.inputs) == 5 and all(f.size < big for f in b.inputs) and scope.small_files == 5


# ---- packing ------------------------------------------------------------------------------------------


def test_packing_splits_largest_first_and_folds_runts_where_they_fit():
    # next-fit over 120, 50, 50, 50, 50, 40, 40, 40, 10 (target 200): [120, 50] [50, 50, 50, 40] [40, 40, 10];
    # [120, 50] has 2 < 3 files: 120 fits nowhere, the first 50 fits only the last bin
    sizes = [50, 50, 50, 50, 120, 40, 40, 40, 10]
    assert pack(sizes, target_bytes=200, min_input_files=3) == [[1, 2, 3, 5], [6, 7, 8, 0]]
    # best fit: next-fit gives [64] [44, 31] [27, 26, 25] [25, 24, 21, 21] [17]; 64 fits nowhere, the runt 17
    # fits [44, 31] (8 left) and [27, 26, 25] (5 left): it goes where the least room is left, not the first
    sizes = [21, 64, 21, 24, 26, 25, 31, 44, 27, 17, 25]
    assert pack(sizes, target_bytes=100, min_input_files=2) == [[7, 6], [8, 4, 5, 9], [10, 3, 0, 2]]
    assert pack([10] * 4, target_bytes=100, min_input_files=5) == []
    assert pack([10] * 5, target_bytes=50, min_input_files=5) == [[0, 1, 2, 3, 4]]


def test_thresholds_below_their_minimum_are_refused(lake):
    lake.catalog.create_table("ns.t", schema=SCHEMA)
    with pytest.raises(PlanRejected, match="--min-input-files must be at least 2, got 1"):
        plan(lake.view(), min_input_files=1)
    with pytest.raises(PlanRejected, match="at least 1 byte, got 0"):
        plan(lake.view(), target_bytes=0)


def test_the_table_property_overrides_the_target_as_seaweedfs_does():
    assert target_file_size({}) == (256 * MB, "default")
    assert target_file_size({}, 64) == (64 * MB, "flag")
    assert target_file_size({"write.target-file-size-bytes": "1000"}, 64) == (1000, "table-property")
    assert target_file_size({"write.target-file-size-bytes": "-5"}, 64) == (64 * MB, "flag")
    assert target_file_size({"write.target-file-size-bytes": "big"}) == (256 * MB, "default")


# ---- specs and partitions -----------------------------------------------------------------------------


def test_files_of_two_specs_with_the_same_partition_value_never_share_a_bin(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    for i in range(3):
        append(t, [3 * i], "us")
    with t.update_spec() as update:  # spec 1: the same column, the same value "us", another field
        update.remove_field("region")
        update.add_field("region", IdentityTransform(), "reg")
    for i in range(3, 6):
        append(t, [3 * i], "us")
    files = manifest_order(lake.table())
    assert sorted(spec for _, _, spec in files) == [0, 0, 0, 1, 1, 1]
    # six files of value "us", but three per spec: no group reaches five
    assert plan(lake.view()).skipped == NO_ELIGIBLE_FILES
    scope = plan(lake.view(), min_input_files=3)
    assert [(b.spec_id, b.partition, b.partition_values, len(b.inputs)) for b in scope.bins] == [
        (0, "region=us", ("us",), 3), (1, "reg=us", ("us",), 3)]
    spec_of = {p: spec for p, _, spec in files}
    for b in scope.bins:
        assert {spec_of[f.path] for f in b.inputs} == {b.spec_id}


def test_an_added_column_reads_as_null_in_the_merged_rows_of_older_files(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(3):
        append(t, [i])
    with t.update_schema() as update:
        update.add_column("note", StringType())
    for i in range(3, 5):
        t.append(pa.table({"id": pa.array([i], pa.int64()), "region": ["us"], "note": [f"n{i}"]}))
    t = lake.table()
    [b] = plan(lake.view()).bins
    merged = merge(lake.view(), b)
    rows = rows_of_output(merged)
    assert rows == scanned_rows(t, [f.path for f in b.inputs])
    assert rows[(0, "us", None)] == 1 and rows[(4, "us", "n4")] == 1


def test_files_without_field_ids_are_read_through_the_name_mapping_add_files_sets(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    root = canonical(t.metadata.location)
    paths = []
    for i in range(5):  # written outside Iceberg: no field ids, the columns in another order
        path = f"{root}/imported/part-{i}.parquet"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(pa.table({"region": ["eu", "ap"], "id": pa.array([2 * i, 2 * i + 1], pa.int64())}), path)
        paths.append(f"file://{path}")
    t.add_files(paths)
    t = lake.table()
    assert "schema.name-mapping.default" in t.properties
    [b] = plan(lake.view()).bins
    merged = merge(lake.view(), b)
    assert rows_of_output(merged) == scanned_rows(t, [f.path for f in b.inputs])
    assert rows_of_output(merged)[(3, "ap")] == 1 and merged.record_count == 10


# ---- the merged file ----------------------------------------------------------------------------------


def test_the_merged_file_carries_field_ids_and_the_statistics_pyiceberg_computes(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(5):
        append(t, list(range(10 * i, 10 * i + 3)))
    view = lake.view()
    [b] = plan(view).bins
    merged = merge(view, b)
    schema = pq.read_schema(canonical(merged.location))
    assert [(f.name, f.metadata[b"PARQUET:field_id"]) for f in schema] == [("id", b"1"), ("region", b"2")]
    ours = merged.data_file(spec_id=b.spec_id, partition_values=b.partition_values)
    theirs = parquet_file_to_data_file(t.io, lake.table().metadata, merged.location)
    for name in ("record_count", "file_size_in_bytes", "column_sizes", "value_counts", "null_value_counts",
                 "nan_value_counts", "lower_bounds", "upper_bounds", "split_offsets"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.record_count == 15 and ours.file_path == merged.location and ours.spec_id == 0


def test_a_merge_runs_on_pickled_inputs_as_a_spark_task_would_and_writes_the_same_bytes(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(5):
        append(t, [i])
    view = lake.view()
    [b] = plan(view).bins
    first = merge(view, b, plan_id="a")
    b2, schema, fileio = pickle.loads(pickle.dumps((b, view.metadata.schema(), view.fileio)))
    second = merge(view, b2, plan_id="b", fileio=fileio, schema=schema)
    assert second.statistics == first.statistics and second.file_size_in_bytes == first.file_size_in_bytes
    with open(canonical(first.location), "rb") as x, open(canonical(second.location), "rb") as y:
        assert x.read() == y.read()


def test_an_output_name_must_come_from_a_plan_id():
    with pytest.raises(PlanRejected, match="cannot name a file"):
        output_location("/t", {}, partition="", plan_id="../x", bin_index=0)
    assert output_location("s3://b/t", {"write.data.path": "s3://b/elsewhere"}, partition="dt=1",
                           plan_id="abc", bin_index=3) == "s3://b/elsewhere/dt=1/compact-abc-3.parquet"


# ---- deletes ------------------------------------------------------------------------------------------


def test_position_deletes_apply_and_a_delete_manifest_goes_only_when_all_it_names_was_compacted(tmp_path):
    b, view = built(tmp_path, iceberg_tables.position_deletes, "pd")
    t = b.table
    scope = plan(view, min_input_files=2)
    [eu] = scope.bins
    assert eu.partition == "region=eu" and len(eu.inputs) == 2 and len(eu.position_deletes) == 2
    merged = merge(view, eu)
    expected = scanned_rows(t, [f.path for f in eu.inputs])
    assert rows_of_output(merged) == expected and merged.position_deleted == 4 and merged.record_count == 8
    current = t.current_snapshot().snapshot_id
    assert expected == collections.Counter(r for r in b.expected[current].elements() if r[1] == "eu")
    # the first delete commit names only an eu file: dropped; the second also names the us file: carried
    manifests = [m for m in t.current_snapshot().manifests(t.io) if m.content == 1]
    by_seq = {m.sequence_number: canonical(m.manifest_path) for m in manifests}
    assert scope.dropped_delete_manifests == (by_seq[2],)
    assert scope.carried_delete_manifests == (by_seq[4],)


def test_equality_deletes_apply_only_to_older_files_of_their_partition(tmp_path):
    b, view = built(tmp_path, iceberg_tables.equality_deletes, "eq")
    t = b.table
    scope = plan(view, min_input_files=2)
    [eu] = scope.bins
    assert eu.partition == "region=eu" and len(eu.inputs) == 2 and len(eu.equality_deletes) == 1
    assert eu.equality_deletes[0].equality_ids == (1,)
    merged = merge(view, eu)
    current = t.current_snapshot().snapshot_id
    expected = collections.Counter(
        {r: n for r, n in iceberg_files.rows_from_files(t, current).items() if r[1] == "eu"})
    assert rows_of_output(merged) == expected == collections.Counter(
        {r: n for r, n in b.expected[current].items() if r[1] == "eu"})
    # ids 3 and 7 of the first file go; id 3 appended after the delete stays
    assert merged.equality_deleted == 2 and sorted(r[0] for r in expected.elements()).count(3) == 1
    assert scope.dropped_delete_manifests == tuple(m.path for m in scope.delete_manifests)
    # with the eu partition below the threshold nothing is compacted
    assert plan(view, min_input_files=3).skipped == NO_ELIGIBLE_FILES


def upsert(table, rows: pa.Table, deleted_ids: list[int], region: str) -> None:
    """One commit adding a data file and an equality delete on ``id`` in ``region`` (a row delta, as an upsert
    writes it): the delete and the data file share a data sequence number."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    eu = next(e.data_file for m in table.current_snapshot().manifests(table.io)
              for e in m.fetch_manifest_entry(table.io) if e.data_file.partition[0] == region)
    delete_file = iceberg_files.write_equality_delete_file(
        table, partition=eu.partition, spec_id=eu.spec_id, rows=[{"id": i} for i in deleted_ids])
    with table.transaction() as tx:
        producer = iceberg_files._AddDeleteFiles(tx, table.io, [delete_file], "main", {})
        for data_file in _dataframe_to_data_files(tx.table_metadata, rows, table.io):
            producer.append_data_file(data_file)
        producer.commit()


def test_an_equality_delete_spares_rows_its_own_commit_added(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    append(t, [1, 4], "eu")
    append(t, [7, 10], "eu")
    padding = list(range(1000, 6000))
    upsert(t, pa.table({"id": pa.array([4, 7] + padding, pa.int64()), "region": ["eu"] * 5002}), [4, 7], "eu")
    t = lake.table()
    current = t.current_snapshot().snapshot_id
    expected = collections.Counter([(1, "eu"), (10, "eu"), (4, "eu"), (7, "eu")] + [(i, "eu") for i in padding])
    assert iceberg_files.rows_from_files(t, current) == expected
    files = manifest_order(t)
    big = max(size for _, size, _ in files)
    view = lake.view()
    # every file in one bin: 4 and 7 of the two older files go, those the upsert wrote stay
    [b] = plan(view, min_input_files=2).bins
    assert len(b.inputs) == 3 and len(b.equality_deletes) == 1
    merged = merge(view, b)
    assert rows_of_output(merged) == expected and merged.equality_deleted == 2
    # the upsert's file is too big to compact: the delete applies only to the two compacted files, so it goes
    scope = plan(view, target_bytes=big, min_input_files=2)
    [b] = scope.bins
    assert len(b.inputs) == 2 and all(f.size < big for f in b.inputs)
    assert scope.dropped_delete_manifests == tuple(m.path for m in scope.delete_manifests) != ()
    assert rows_of_output(merge(view, b)) == collections.Counter([(1, "eu"), (10, "eu")])


def test_a_position_delete_applies_to_a_file_its_own_commit_added(lake):
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    append(t, [1, 4], "eu")
    t = lake.table()
    with t.transaction() as tx:
        [new] = _dataframe_to_data_files(
            tx.table_metadata, pa.table({"id": pa.array([7, 10, 13], pa.int64()), "region": ["eu"] * 3}), t.io)
        new.spec_id = 0  # from_args drops it
        delete_file = iceberg_files.write_position_delete_file(t, new, [1])  # id 10, in the same commit
        producer = iceberg_files._AddDeleteFiles(tx, t.io, [delete_file], "main", {})
        producer.append_data_file(new)
        producer.commit()
    t = lake.table()
    [b] = plan(lake.view(), min_input_files=2).bins
    assert [f.sequence_number for f in b.inputs] == [2, 1] and b.position_deletes[0].sequence_number == 2
    merged = merge(lake.view(), b)
    assert rows_of_output(merged) == collections.Counter([(1, "eu"), (4, "eu"), (7, "eu"), (13, "eu")])
    assert rows_of_output(merged) == scanned_rows(t, [f.path for f in b.inputs])


def test_a_data_file_unlike_its_manifest_or_missing_is_refused(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA)
    for i in range(5):
        append(t, [i])
    view = lake.view()
    [b] = plan(view).bins
    wrong = dataclasses.replace(b, inputs=(dataclasses.replace(b.inputs[0], record_count=2), *b.inputs[1:]))
    with pytest.raises(CorruptMetadata, match="the manifest says 2 rows, the file has 1"):
        merge(view, wrong)
    gone = dataclasses.replace(b, inputs=(dataclasses.replace(b.inputs[0], path=b.inputs[0].path + ".gone"),))
    with pytest.raises(MetadataNotFound, match=r"\.gone: data file not found"):
        merge(view, gone)
    assert not os.path.exists(canonical(output_location(view.metadata.location, {}, partition="", plan_id="p0",
                                                        bin_index=0)))


def write_position_deletes(table, data_file_partition, spec_id, named: list[tuple[str, int]]) -> DataFile:
    """A position delete file whose ``file_path`` values are spelled exactly as given (relative, file://, /)."""
    field = iceberg_files._field
    schema = pa.schema([field("file_path", pa.string(), iceberg_files.FILE_PATH_FIELD_ID, False),
                        field("pos", pa.int64(), iceberg_files.POS_FIELD_ID, False)])
    arrow = pa.table({"file_path": [p for p, _ in named], "pos": [n for _, n in named]}, schema=schema)
    location = f"{table.location()}/data/{uuid.uuid4()}-pos-deletes.parquet"
    size = iceberg_files._write_parquet(table, location, arrow)
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=location, file_format=FileFormat.PARQUET,
        partition=data_file_partition, record_count=len(named), file_size_in_bytes=size, sort_order_id=None,
        equality_ids=None, key_metadata=None)
    delete_file.spec_id = spec_id
    return delete_file


def test_position_deletes_naming_files_by_relative_and_absolute_paths_both_apply(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    append(t, [1, 4, 7, 10], "eu")
    append(t, [13, 16, 19], "eu")
    t = lake.table()
    data = [e.data_file for m in t.current_snapshot().manifests(t.io)
            for e in m.fetch_manifest_entry(t.io, discard_deleted=True)]
    by_rows = {f.record_count: f for f in data}
    first, second = by_rows[4], by_rows[3]
    location = t.metadata.location
    assert first.file_path.startswith("file:///") and location.startswith("file:///")
    relative = first.file_path[len(location) + 1:]
    assert relative.startswith("data/region=eu/")
    plain = canonical(second.file_path)  # /abs/path, no scheme
    deletes = [write_position_deletes(t, first.partition, 0, [(relative, 0), (relative, 3)]),
               write_position_deletes(t, second.partition, 0, [(second.file_path, 1), (plain, 2)])]
    iceberg_files.commit_delete_files(t, deletes)
    view = lake.view()
    scope = plan(view, min_input_files=2)
    [b] = scope.bins
    assert len(b.position_deletes) == 2
    merged = merge(view, b)
    assert rows_of_output(merged) == collections.Counter([(4, "eu"), (7, "eu"), (13, "eu")])
    assert merged.position_deleted == 4 and merged.rows_read == 7
    assert len(scope.dropped_delete_manifests) == 1 and scope.carried_delete_manifests == ()


# ---- skips --------------------------------------------------------------------------------------------


def test_a_table_without_snapshots_is_skipped(lake):
    lake.catalog.create_table("ns.t", schema=SCHEMA)
    scope = plan(lake.view())
    assert (scope.skipped, scope.bins, scope.snapshot_id) == (NO_CURRENT_SNAPSHOT, (), None)
    assert NO_CURRENT_SNAPSHOT == "no current snapshot"


def test_no_eligible_files_when_every_file_is_big_or_no_group_reaches_the_minimum(lake):
    t = lake.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
    for i in range(4):
        append(t, [3 * i], "us")
    append(t, [1], "eu")
    view = lake.view()
    assert plan(view).skipped == NO_ELIGIBLE_FILES == "no files eligible for compaction"
    smallest = min(s for _, s, _ in manifest_order(lake.table()))
    assert plan(view, target_bytes=smallest, min_input_files=2).skipped == NO_ELIGIBLE_FILES
    assert len(plan(view, min_input_files=4).bins) == 1


def test_delete_manifests_with_apply_deletes_off_skip_the_table(tmp_path):
    _, view = built(tmp_path, iceberg_tables.position_deletes, "pd")
    scope = plan(view, min_input_files=2, apply_deletes=False)
    assert scope.skipped == DELETES_NOT_APPLIED == (
        "compaction skipped: delete manifests present and apply_deletes is disabled")
    assert scope.bins == ()


def test_schema_pickles_for_executors():
    schema = Schema(*SCHEMA.fields)
    assert pickle.loads(pickle.dumps(schema)) == schema


# ---- on S3, beside SeaweedFS's worker -----------------------------------------------------------------


def test_on_s3_the_bins_are_those_seaweedfs_worker_compacts_and_the_rows_the_same(mini, sw):
    """The same writes to two tables on SeaweedFS's REST catalog over S3; its worker compacts one
    (target_file_size_mb 1, min_input_files 5), lakesweep plans and merges the other through its S3 FileIO."""
    theirs, ours = history(sw, "ctheirs"), history(sw, "cours")
    job = run_iceberg_maintenance(mini, operations="compact", config={"target_file_size_mb": 1, "min_input_files": 5},
                                  bucket=BUCKET, namespace="ctheirs", table="t")
    assert job.succeeded, job
    view = IcebergTable(SEAWEED_CATALOG, "cours.t")
    assert view.fileio.scheme == "s3"
    scope = plan(view, target_bytes=MB, min_input_files=5)
    merged_files = sum(len(b.inputs) for b in scope.bins)
    assert job.messages["compact"] == (
        f"compacted {merged_files} files into {len(scope.bins)} (across {len(scope.bins)} bins)")
    assert [b.partition for b in scope.bins] == ["region=ap", "region=eu"]
    theirs = sw.load_table("ctheirs.t")
    added = collections.Counter()
    for m in theirs.current_snapshot().manifests(theirs.io):
        for e in m.fetch_manifest_entry(theirs.io):
            if e.status == 1 and e.snapshot_id == theirs.current_snapshot().snapshot_id:
                added[e.data_file.partition[0]] += e.data_file.record_count
    outputs = {}
    for b in scope.bins:
        merged = merge(view, b, plan_id="s3")
        assert merged.location.startswith("s3://lake/cours/t/data/region=")
        with view.fileio.open_input(canonical(merged.location)) as stream:
            arrow = pq.ParquetFile(stream).read()
        rows = collections.Counter(tuple(r.values()) for r in arrow.to_pylist())
        assert rows == scanned_rows(ours, [f.path for f in b.inputs])
        outputs[b.partition_values[0]] = merged.record_count
    assert outputs == dict(added)
