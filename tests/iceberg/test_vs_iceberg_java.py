"""Differentials against Apache Iceberg's own Java actions, run on Spark (tests/support/iceberg_spark.py): the
same table, copied byte for byte, is expired (or listed for orphans) once by Iceberg's procedures and once by
lakesweep; the snapshots, refs and files that remain, and the orphan candidates, must be the same. After every
commit lakesweep makes, Iceberg Java reads every snapshot of the table, with pyiceberg's rows.

Each side runs on an identical copy of the table (tests/iceberg/java_twins.py says how).
"""

from __future__ import annotations

import collections
import os

import pyarrow as pa
import pytest

from lakesweep.engine.iceberg.table import canonical
from tests.iceberg.conftest import Lake, write_history
from tests.iceberg.java_twins import (
    CURRENT_CRC, DAY_MS, after_commit, age_every_file, assert_iceberg_java_counts_every_snapshot,
    assert_iceberg_java_reads_every_snapshot, assert_same, both, expire_both, java_catalog, java_orphans,
    lakesweep_expire, lakesweep_orphans, live_entries, manifest_counts, now_ms, reference_table, rows_by_snapshot_of,
    spark_written, state, stray, with_refs,
)


# --------------------------------------------------------------------------- expire


@pytest.mark.spark
@pytest.mark.java
def test_expiry_of_a_pyiceberg_history_leaves_what_icebergs_expire_snapshots_leaves(ice, lake, tmp_path):
    """The quick one: a linear pyiceberg history with copy-on-write deletes, expired up to its sixth snapshot."""
    t = write_history(lake)
    cutoff = sorted(s.timestamp_ms for s in t.metadata.snapshots)[5]
    _, java, ours, lake = expire_both(ice, lake, tmp_path, "ns.t", older_than_ms=cutoff)
    assert len(java["snapshots"]) < len(t.metadata.snapshots)
    assert_same(ours, java)
    assert assert_iceberg_java_reads_every_snapshot(ice, lake, "ns.t") == len(ours["snapshots"])


@pytest.mark.parametrize("retain_last", [1, 3])
@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_expiry_with_branches_and_tags_of_their_own_retention_agrees_with_iceberg_java(ice, lake, tmp_path,
                                                                                     retain_last):
    t = with_refs(lake)
    _, java, ours, lake = expire_both(ice, lake, tmp_path, "ns.r", older_than_ms=now_ms(),
                                      retain_last=retain_last)
    assert "stale" not in java["refs"] and {"main", "kept", "audit"} <= set(java["refs"])
    assert len(java["snapshots"]) < len(t.metadata.snapshots)
    assert_same(ours, java)
    assert_iceberg_java_reads_every_snapshot(ice, lake, "ns.r")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_expiry_of_a_spark_written_merge_on_read_table_agrees_with_iceberg_java_but_for_checksums(ice, lake,
                                                                                                tmp_path):
    """A table Iceberg Java wrote through Hadoop's local file system: every file has a ``.<name>.crc`` sidecar.
    Iceberg deletes through Hadoop's ChecksumFileSystem, which takes a file's sidecar with it; lakesweep
    deletes the file alone and leaves the sidecar (a hidden path, which neither side's orphan listing
    plans). That is the one difference, asserted path by path."""
    spark_written(ice, lake)
    before, java, ours, lake = expire_both(ice, lake, tmp_path, "ns.s", older_than_ms=now_ms())
    assert java["refs"].keys() == {"main", "keep"} and len(java["snapshots"]) < len(before["snapshots"])
    assert ours["snapshots"] == java["snapshots"] and ours["refs"] == java["refs"]
    deleted = {p for p in before["files"] - java["files"] if not p.endswith(".crc")}
    assert deleted and not deleted & ours["files"]  # every file Iceberg deleted, lakesweep deleted
    sidecars = {os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.crc") for p in deleted}
    assert sidecars <= before["files"]
    assert (sorted(ours["files"] - java["files"]), sorted(java["files"] - ours["files"])) == (sorted(sidecars),
                                                                                              [CURRENT_CRC])
    assert_iceberg_java_reads_every_snapshot(ice, lake, "ns.s")


# --------------------------------------------------------------------------- orphans


HIDDEN = ("data/_SUCCESS", "data/.spark-staging-0f3a/region=us/part-00000.parquet",
          "data/region=us/.spark-staging-1/part-00001.parquet", "metadata/.left-behind.avro.crc")


def _strays(lake: Lake, ident: str) -> tuple[list[str], list[str]]:
    """Old unreferenced files both must list, and hidden ones (plus a young file) neither may list."""
    t = lake.table(ident)
    live = sorted(canonical(e.data_file.file_path) for m in t.current_snapshot().manifests(t.io)
                  for e in m.fetch_manifest_entry(t.io))
    root = canonical(t.metadata.location)
    sidecar = os.path.join(os.path.dirname(os.path.relpath(live[0], root)), f".{os.path.basename(live[0])}.crc")
    hidden = [stray(lake, ident, rel) for rel in (*HIDDEN, sidecar)]
    stray(lake, ident, "data/region=eu/young.parquet", days=1 / 24)
    orphans = [stray(lake, ident, "data/region=us/00000-dead.parquet"), stray(lake, ident, "metadata/dead-m0.avro"),
               stray(lake, ident, "data/stray.txt")]
    return sorted(orphans), hidden


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_orphan_candidates_of_a_pyiceberg_table_are_icebergs_and_hidden_paths_are_skipped_by_both(ice, lake):
    write_history(lake)
    age_every_file(lake)
    orphans, hidden = _strays(lake, "ns.t")
    cutoff = now_ms() - 5 * DAY_MS
    java = java_orphans(ice, lake, "ns.t", older_than_ms=cutoff)
    assert java == orphans and not set(hidden) & set(java)
    assert lakesweep_orphans(lake, "ns.t", older_than_ms=cutoff) == java


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_orphan_candidates_of_a_spark_written_table_with_its_checksums_are_icebergs(ice, lake):
    """Every live file of this table has a Hadoop ``.crc`` sidecar beside it; none is a candidate."""
    spark_written(ice, lake)
    age_every_file(lake)
    orphans, hidden = _strays(lake, "ns.s")
    crcs = [f for f in state(lake, "ns.s")["files"] if f.endswith(".crc")]
    assert len(crcs) > 20
    cutoff = now_ms() - 5 * DAY_MS
    java = java_orphans(ice, lake, "ns.s", older_than_ms=cutoff)
    assert java == orphans
    assert lakesweep_orphans(lake, "ns.s", older_than_ms=cutoff) == java


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_a_partition_whose_field_name_starts_with_underscore_is_listed_by_both_and_its_sidecars_by_neither(ice,
                                                                                                         lake):
    """Iceberg's hidden-path filter is partition-aware: ``data/_cat=a/`` is data when ``_cat`` is a partition
    field, a ``_``-prefixed directory that is no partition (``data/_tmp/``) is hidden."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "_cat", StringType(), required=False))
    t = lake.catalog.create_table("ns.u", schema=schema,
                                  partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "_cat")))
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "_cat": ["a", "b"]}))
    age_every_file(lake)
    orphans = [stray(lake, "ns.u", "data/_cat=a/00000-dead.parquet"), stray(lake, "ns.u", "data/_cat=c/x.parquet")]
    for rel in ("data/_cat=a/.00000-dead.parquet.crc", "data/_tmp/part-0.parquet", "data/_cat=b/_SUCCESS"):
        stray(lake, "ns.u", rel)
    cutoff = now_ms() - 5 * DAY_MS
    java = java_orphans(ice, lake, "ns.u", older_than_ms=cutoff)
    assert java == sorted(orphans)
    assert lakesweep_orphans(lake, "ns.u", older_than_ms=cutoff) == java


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_after_an_expiry_the_files_only_expired_snapshots_reached_are_no_orphans_on_either_side(ice, lake, tmp_path):
    """Iceberg Java's orphan listing after lakesweep's expiry finds nothing lakesweep left behind."""
    t = write_history(lake)
    lakesweep_expire(lake, tmp_path, "ns.t", older_than_ms=now_ms())
    age_every_file(lake)
    cutoff = now_ms() - 5 * DAY_MS
    assert java_orphans(ice, lake, "ns.t", older_than_ms=cutoff) == []
    assert lakesweep_orphans(lake, "ns.t", older_than_ms=cutoff) == []
    assert len(lake.table("ns.t").metadata.snapshots) < len(t.metadata.snapshots)


# --------------------------------------------------------------------------- rewrite-manifests and compact


REWRITE_MANIFESTS = "CALL {cat}.system.rewrite_manifests(table => '%s')"


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.parametrize("ident", ["ns.t", "ns.s"])
def test_a_manifest_rewrite_leaves_the_live_entries_icebergs_rewrite_manifests_leaves(ice, lake, tmp_path, ident):
    """Every live entry kept as EXISTING with its snapshot id and sequence numbers, in one data manifest, the
    delete manifest carried over: on a pyiceberg history (``ns.t``) and a Spark-written merge-on-read table."""
    if ident == "ns.t":
        write_history(lake, appends=8)
    else:
        spark_written(ice, lake)
    before, java, ours, lake = both(ice, lake, tmp_path, ident, REWRITE_MANIFESTS % ident, "rewrite-manifests",
                                   after_commit(ident), min_manifests=2)
    assert before["manifests"][0] >= 5 and java["manifests"][0] == 1 and java["operation"] == "replace"
    assert {e[2] for e in java["entries"] if e[0] == 0} == {"EXISTING"}
    assert ours == java
    assert_iceberg_java_reads_every_snapshot(ice, lake, ident)


REWRITE_DATA_FILES = "CALL {cat}.system.rewrite_data_files(table => '%s', options => map('min-input-files', '2'))"


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_a_compaction_of_a_pyiceberg_history_agrees_with_icebergs_rewrite_data_files(ice, lake, tmp_path):
    """One file per partition, with the data sequence number of the snapshot compacted, and the same rows in
    every snapshot."""
    write_history(lake, appends=6)
    before, java, ours, lake = both(ice, lake, tmp_path, "ns.t", REWRITE_DATA_FILES % "ns.t", "compact",
                                   after_commit("ns.t"), min_input_files=2)
    per_dir = collections.Counter(os.path.dirname(e[1]) for e in before["entries"] if e[0] == 0)
    new = [e for e in java["entries"] if e[3] == "new"]
    assert [e[1] for e in new] == [f"{d}/<new>" for d, n in sorted(per_dir.items()) if n >= 2] != []
    assert {e[4] for e in new} == {before["sequence_number"]}
    assert java["rows"]["new"] == before["rows"]["new"]
    assert ours == java
    assert_iceberg_java_reads_every_snapshot(ice, lake, "ns.t")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_a_compaction_drops_the_position_delete_iceberg_keeps_dangling_and_reads_the_same_rows(ice, lake,
                                                                                             tmp_path):
    """On the Spark-written table the UPDATE's position delete names only a file both sides compact.
    Iceberg's ``rewrite_data_files`` (without ``remove-dangling-deletes``) keeps it live, applying to
    nothing; lakesweep drops the delete manifest whose every delete applies only to compacted files. That
    entry and its manifest are the one difference; the rows of every snapshot are the same."""
    spark_written(ice, lake)
    before, java, ours, lake = both(ice, lake, tmp_path, "ns.s", REWRITE_DATA_FILES % "ns.s", "compact",
                                   after_commit("ns.s"), min_input_files=2)
    [dangling] = [e for e in java["entries"] if e[0] == 1]
    assert dangling[1].endswith("-deletes.parquet") and dangling[4] == before["sequence_number"]
    assert ours["entries"] == [e for e in java["entries"] if e != dangling]
    assert java["manifests"] == {**ours["manifests"], 1: 1} and 1 not in ours["manifests"]
    assert ours["rows"] == java["rows"] and java["rows"]["new"] == before["rows"]["new"]
    assert ours["sequence_number"] == java["sequence_number"] and ours["operation"] == java["operation"]
    assert_iceberg_java_reads_every_snapshot(ice, lake, "ns.s")


# --------------------------------------------------------------------------- the reference tables


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.parametrize("builder", ["churn", "equality_deletes", "position_deletes", "with_statistics"])
def test_expiry_of_the_reference_tables_agrees_with_iceberg_java(ice, lake, tmp_path, builder):
    """Schema and spec evolution, branches and tags with their own retention, position and equality deletes,
    statistics and partition statistics, expired halfway through their history."""
    built = reference_table(lake, builder, "ns.x")
    stamps = sorted(s.timestamp_ms for s in built.table.metadata.snapshots)
    before, java, ours, lake = expire_both(ice, lake, tmp_path, "ns.x", older_than_ms=stamps[len(stamps) // 2])
    assert len(java["snapshots"]) < len(before["snapshots"])
    assert_same(ours, java)
    if builder == "equality_deletes":
        assert_pyicebergs_equality_delete_manifests_are_unreadable_to_iceberg_java(ice, lake, "ns.x")
    else:
        assert_iceberg_java_counts_every_snapshot(ice, lake, "ns.x")


def assert_pyicebergs_equality_delete_manifests_are_unreadable_to_iceberg_java(ice, lake: Lake, ident: str) -> None:
    """pyiceberg 0.12's manifest writer types ``equality_ids`` as ``list<long>`` (the spec: ``list<int>``,
    field 135), and Iceberg Java's reader casts each element to Integer: a snapshot whose delete manifest
    pyiceberg wrote with an equality delete in it is unreadable to Iceberg Java, before any maintenance as
    after. That manifest is the test table's (``iceberg_files.commit_delete_files``), not lakesweep's."""
    t = lake.catalog.load_table(ident)
    with_eq = {s.snapshot_id for s in t.metadata.snapshots
               if any(int(m.content) == 1 for m in s.manifests(t.io))}
    assert with_eq
    with java_catalog(ice, lake) as cat:
        for s in t.metadata.snapshots:
            statement = f"SELECT count(*) FROM {cat}.{ident} VERSION AS OF {s.snapshot_id}"
            if s.snapshot_id in with_eq:
                with pytest.raises(Exception, match="java.lang.Long cannot be cast to class java.lang.Integer"):
                    ice.sql(statement)
            else:
                assert ice.sql(statement) == [[sum(rows_by_snapshot_of(t, s.snapshot_id).values())]]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.java
def test_a_manifest_rewrite_across_three_partition_specs_agrees_with_iceberg_java_run_once_per_spec(ice, lake,
                                                                                                   tmp_path):
    """The churn table's current snapshot has live entries of several specs and a delete manifest. Iceberg's
    ``rewrite_manifests`` rewrites the manifests of one spec (``spec_id``, default the table's current one),
    lakesweep those of every spec in one commit: run once per spec, Iceberg leaves the same live entries
    in as many manifests, but for the status of a lone manifest's entries."""
    reference_table(lake, "churn", "ns.x")
    t = lake.table("ns.x")
    specs = sorted({m.partition_spec_id for m in t.current_snapshot().manifests(t.io) if int(m.content) == 0})
    assert len(specs) >= 2 and t.spec().spec_id in specs
    per_spec = [REWRITE_MANIFESTS.replace("'%s'", "'%s', spec_id => {spec}").replace("{spec}", str(spec)) % "ns.x"
                for spec in specs]
    before, java, ours, lake = both(ice, lake, tmp_path, "ns.x", per_spec, "rewrite-manifests", live_and_manifests,
                                   min_manifests=2)
    assert java["manifests"] == {0: len(specs), 1: before["manifests"][1]}
    assert ours["manifests"] == java["manifests"]
    # A spec whose live entries sit in one manifest already: Iceberg leaves that manifest alone (its entries
    # stay ADDED), lakesweep writes it anew like the others (EXISTING); snapshot ids and sequence numbers
    # are the same either way.
    java_only, ours_only = set(java["entries"]) - set(ours["entries"]), set(ours["entries"]) - set(java["entries"])
    assert java_only and {e[2] for e in java_only} == {"ADDED"}
    assert {(c, f, "EXISTING", sid, seq, fseq) for c, f, _, sid, seq, fseq in java_only} == ours_only
    assert_iceberg_java_counts_every_snapshot(ice, lake, "ns.x")


def live_and_manifests(lake: Lake) -> dict:
    return {"entries": live_entries(lake, "ns.x"), "manifests": manifest_counts(lake, "ns.x")}
