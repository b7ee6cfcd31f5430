"""Differentials against Apache Iceberg's own Java actions, run on Spark (tests/support/iceberg_spark.py): the
same table, copied byte for byte, is expired (or listed for orphans) once by Iceberg's procedures and once by
lakesweep; the snapshots, refs and files that remain, and the orphan candidates, must be the same. After every
commit lakesweep makes, Iceberg Java reads every snapshot of the table, with pyiceberg's rows.

Identical copies: the lake (warehouse and SQLite catalog) is copied aside with its modification times, one
side runs, then the copy is put back at the same path and the other side runs. The catalog, the metadata,
manifest lists and manifests all hold absolute paths; restoring at the same path leaves every byte as it was,
where a copy elsewhere would need each of them rewritten. Iceberg Java opens the catalog under a name of its
own each time (``catalog_name`` is a column of pyiceberg's tables, renamed with one UPDATE), so no JDBC
connection Spark holds ever meets a catalog file that was replaced under it.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import os
import shutil
import sqlite3
import time
from contextlib import contextmanager

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from applier.apply import DriverExecutor, apply_plan
from engine.iceberg.table import IcebergTable, canonical
from journal.duckdb_store import DuckDBRecorder
from planner.iceberg.expire import plan_iceberg_expire, resolve_expire_options
from planner.iceberg.orphans import resolve_orphan_options
from planner.kinds import plan_kind
from tests.iceberg.conftest import CATALOG, SCHEMA, SPEC, Lake, batch, rows_by_snapshot, write_history

REFERENCE = [pytest.mark.slow, pytest.mark.spark, pytest.mark.java]
DAY_MS = 86_400_000
CURRENT = "metadata/<current>.metadata.json"
# Iceberg Java writes through Hadoop's local file system, which puts a checksum sidecar beside what it writes
CURRENT_CRC = "metadata/.<current>.metadata.json.crc"
_names = itertools.count(1)


@pytest.fixture(scope="module")
def ice():
    """One Spark session with Iceberg 1.12's runtime (a child process) for the whole module."""
    from tests.support.iceberg_spark import IcebergSpark

    with IcebergSpark.start() as session:
        yield session


# --------------------------------------------------------------------------- copies and catalogs


def _db(lake: Lake) -> str:
    return os.path.join(lake.root, "catalog.db")


def rename_catalog(lake: Lake, old: str, new: str) -> None:
    con = sqlite3.connect(_db(lake))
    try:
        with con:
            for table in ("iceberg_tables", "iceberg_namespace_properties"):
                con.execute(f"UPDATE {table} SET catalog_name = ? WHERE catalog_name = ?", (new, old))
    finally:
        con.close()


@contextmanager
def java_catalog(ice, lake: Lake):
    """The lake's catalog opened by Iceberg's JdbcCatalog, under a name Spark has never seen."""
    name = f"ref{next(_names)}"
    lake.catalog.engine.dispose()
    rename_catalog(lake, CATALOG, name)
    try:
        ice.register_catalog(name, _db(lake), os.path.join(lake.root, "wh"))
        yield name
    finally:
        rename_catalog(lake, name, CATALOG)


def put_aside(lake: Lake):
    """Copy the lake aside (modification times kept); the function returned puts that copy back in place."""
    lake.catalog.engine.dispose()
    aside = lake.root + ".aside"
    shutil.copytree(lake.root, aside, copy_function=shutil.copy2)

    def restore() -> Lake:
        lake.catalog.engine.dispose()
        shutil.rmtree(lake.root)
        shutil.copytree(aside, lake.root, copy_function=shutil.copy2)
        return Lake(lake.root, SqlCatalog(CATALOG, uri=f"sqlite:///{_db(lake)}", warehouse=f"file://{lake.root}/wh"))

    return restore


def state(lake: Lake, ident: str) -> dict:
    t = lake.catalog.load_table(ident)
    root = canonical(t.metadata.location)
    files = {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}
    # each side's own commit writes the current metadata file under a name of its own (a random UUID)
    current = os.path.basename(canonical(t.metadata_location))
    rename = {f"metadata/{current}": CURRENT, f"metadata/.{current}.crc": CURRENT_CRC}
    files = {rename.get(f, f) for f in files}
    return {"snapshots": sorted(s.snapshot_id for s in t.metadata.snapshots),
            "refs": {name: ref.snapshot_id for name, ref in t.metadata.refs.items()},
            "files": files}


def iso_utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def now_ms() -> int:
    return int(time.time() * 1000)


def java_rows(ice, catalog: str, ident: str, snapshot_id: int) -> collections.Counter:
    rows = ice.sql(f"SELECT id, region FROM {catalog}.{ident} VERSION AS OF {snapshot_id}")
    return collections.Counter(tuple(r) for r in rows)


def assert_iceberg_java_reads_every_snapshot(ice, lake: Lake, ident: str) -> int:
    """Cross-read: Iceberg Java reads every snapshot of the table with the rows pyiceberg reads."""
    expected = rows_by_snapshot(lake.catalog.load_table(ident))
    with java_catalog(ice, lake) as cat:
        got = {sid: java_rows(ice, cat, ident, sid) for sid in expected}
    assert got == expected
    return len(expected)


def lakesweep_expire(lake: Lake, tmp_path, ident: str, *, older_than_ms: int, retain_last: int = 1):
    view = IcebergTable(CATALOG, ident)
    p = plan_iceberg_expire(view, now_ms=now_ms(),
                            options=resolve_expire_options(view.options, older_than=str(older_than_ms),
                                                           retain_last=retain_last))
    with DuckDBRecorder(tmp_path / f"expire-{next(_names)}.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole
    return p


def java_expire(ice, lake: Lake, ident: str, *, older_than_ms: int, retain_last: int = 1) -> None:
    with java_catalog(ice, lake) as cat:
        ice.sql(f"CALL {cat}.system.expire_snapshots(table => '{ident}', older_than => TIMESTAMP "
                f"'{iso_utc(older_than_ms)}', retain_last => {retain_last})")


def expire_both(ice, lake: Lake, tmp_path, ident: str, *, older_than_ms: int, retain_last: int = 1):
    """(state before, after Iceberg Java's expiry, after lakesweep's, the lake lakesweep expired)."""
    before = state(lake, ident)
    restore = put_aside(lake)
    java_expire(ice, lake, ident, older_than_ms=older_than_ms, retain_last=retain_last)
    java = state(lake, ident)
    lake = restore()
    assert state(lake, ident) == before
    lakesweep_expire(lake, tmp_path, ident, older_than_ms=older_than_ms, retain_last=retain_last)
    return before, java, state(lake, ident), lake


def assert_same(ours: dict, java: dict) -> None:
    """The same snapshots, refs and files, but for the checksum sidecar of the metadata file Iceberg Java
    committed (lakesweep's commit, through pyiceberg and pyarrow, writes none)."""
    assert (ours["snapshots"], ours["refs"]) == (java["snapshots"], java["refs"])
    assert (sorted(ours["files"] - java["files"]), sorted(java["files"] - ours["files"])) == ([], [CURRENT_CRC])


# --------------------------------------------------------------------------- tables


def spark_written(ice, lake: Lake, ident: str = "ns.s") -> None:
    """A v2 table Iceberg Java writes through Spark SQL: statistics and partition statistics of an early
    snapshot, a tag retained for a year, a rollback that leaves a snapshot no ref reaches, then merge-on-read
    position deletes (a DELETE and an UPDATE) in the current snapshot, and statistics of it."""
    with java_catalog(ice, lake) as cat:
        t = f"{cat}.{ident}"
        ice.sql(f"CREATE TABLE {t} (id BIGINT, region STRING) USING iceberg PARTITIONED BY (region) "
                "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
                "'write.update.mode'='merge-on-read')")
        for i in range(3):
            ice.sql(f"INSERT INTO {t} VALUES ({i * 3}, 'us'), ({i * 3 + 1}, 'eu'), ({i * 3 + 2}, 'ap')")
        ice.sql(f"CALL {cat}.system.compute_table_stats(table => '{ident}')")
        ice.sql(f"CALL {cat}.system.compute_partition_stats(table => '{ident}')")
        ids = [r[0] for r in ice.sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at")]
        ice.sql(f"INSERT INTO {t} VALUES (9, 'us'), (10, 'eu')")
        ice.sql(f"ALTER TABLE {t} CREATE TAG `keep` AS OF VERSION {ids[1]} RETAIN 365 DAYS")
        ice.sql(f"CALL {cat}.system.rollback_to_snapshot('{ident}', {ids[2]})")
        ice.sql(f"INSERT INTO {t} VALUES (50, 'us'), (51, 'ap'), (52, 'eu')")
        ice.sql(f"DELETE FROM {t} WHERE id = 4")
        ice.sql(f"UPDATE {t} SET id = id + 100 WHERE id = 6")
        ice.sql(f"CALL {cat}.system.compute_table_stats(table => '{ident}')")
        ice.sql(f"CALL {cat}.system.compute_partition_stats(table => '{ident}')")


def with_refs(lake: Lake, ident: str = "ns.r"):
    """A pyiceberg table with a branch ``audit`` keeping 2 snapshots, a tag ``stale`` whose max-ref-age (1 ms)
    has passed, and a tag ``kept`` with no max-ref-age."""
    t = lake.catalog.create_table(ident, schema=SCHEMA, partition_spec=SPEC)
    for i in range(4):
        t.append(batch(i * 10))
    ids = [s.snapshot_id for s in lake.table(ident).metadata.snapshots]
    with lake.table(ident).manage_snapshots() as ms:
        ms.create_tag(ids[0], "stale", max_ref_age_ms=1)
        ms.create_tag(ids[1], "kept")
        ms.create_branch(ids[2], "audit", min_snapshots_to_keep=2)
    t = lake.table(ident)
    for i in range(2):
        t.append(batch(100 + i * 10), branch="audit")
        t = lake.table(ident)
    t.delete("id < 25")
    return lake.table(ident)


def age_every_file(lake: Lake, days: float = 10) -> None:
    t = time.time() - days * 86400
    for d, _, fs in os.walk(os.path.join(lake.root, "wh")):
        for f in fs:
            os.utime(os.path.join(d, f), (t, t))


def stray(lake: Lake, ident: str, rel: str, *, days: float = 10) -> str:
    root = canonical(lake.table(ident).metadata.location)
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"left behind")
    t = time.time() - days * 86400
    os.utime(path, (t, t))
    return rel


# --------------------------------------------------------------------------- expire


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


def java_orphans(ice, lake: Lake, ident: str, *, older_than_ms: int) -> list[str]:
    root = canonical(lake.table(ident).metadata.location)
    with java_catalog(ice, lake) as cat:
        rows = ice.sql(f"CALL {cat}.system.remove_orphan_files(table => '{ident}', older_than => TIMESTAMP "
                       f"'{iso_utc(older_than_ms)}', dry_run => true)")
    return sorted(os.path.relpath(canonical(r[0]), root) for r in rows)


def lakesweep_orphans(lake: Lake, ident: str, *, older_than_ms: int) -> list[str]:
    view = IcebergTable(CATALOG, ident)
    p = plan_kind("orphans", "iceberg").plan(view, now_ms=now_ms(),
                                             options=resolve_orphan_options(view.options,
                                                                            older_than=str(older_than_ms)))
    return sorted(a.path for a in p.actions)


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


def live_entries(lake: Lake, ident: str) -> list[tuple]:
    """The current snapshot's live manifest entries: (content, file, status, snapshot id, data sequence number,
    file sequence number), sorted."""
    t = lake.catalog.load_table(ident)
    root = canonical(t.metadata.location)
    return sorted((int(m.content), os.path.relpath(canonical(e.data_file.file_path), root), e.status.name,
                   e.snapshot_id, e.sequence_number, e.file_sequence_number)
                  for m in t.current_snapshot().manifests(t.io)
                  for e in m.fetch_manifest_entry(t.io, discard_deleted=True))


def manifest_counts(lake: Lake, ident: str) -> dict[int, int]:
    t = lake.catalog.load_table(ident)
    return dict(collections.Counter(int(m.content) for m in t.current_snapshot().manifests(t.io)))


def run_lakesweep(lake: Lake, tmp_path, kind: str, ident: str, **flags):
    view = IcebergTable(CATALOG, ident)
    if kind == "rewrite-manifests":
        from planner.iceberg.rewrite_manifests import plan_rewrite_manifests, resolve_rewrite_options

        p = plan_rewrite_manifests(view, now_ms=now_ms(), options=resolve_rewrite_options(view.options, **flags))
    else:
        from planner.iceberg.compact import plan_compact, resolve_compact_options

        p = plan_compact(view, now_ms=now_ms(), options=resolve_compact_options(view.options, **flags))
    assert p.actions
    with DuckDBRecorder(tmp_path / f"{kind}-{next(_names)}.duckdb") as rec:
        report = apply_plan(p, rec, executor=DriverExecutor())
    assert report.state == "COMPLETED" and report.whole
    return p


def both(ice, lake: Lake, tmp_path, ident: str, java_sql: str | list[str], kind: str, observe, **flags):
    """``observe(lake)`` after Iceberg Java's ``java_sql`` (``{cat}`` its catalog), then after lakesweep's
    ``kind`` with ``flags``, each on an identical copy: (before, java, ours, the lake lakesweep changed)."""
    before = observe(lake)
    restore = put_aside(lake)
    with java_catalog(ice, lake) as cat:
        for statement in [java_sql] if isinstance(java_sql, str) else java_sql:
            ice.sql(statement.format(cat=cat))
    java = observe(lake)
    lake = restore()
    run_lakesweep(lake, tmp_path, kind, ident, **flags)
    return before, java, observe(lake), lake


def after_commit(ident: str):
    """What a rewrite must keep, comparable across the two sides: the live entries, with the commit's own
    snapshot id as ``"new"`` and a file it wrote as its directory plus ``<new>`` (names are each side's own);
    the manifests per content; the operation; and the rows of every snapshot, the new one as ``"new"``."""
    def observe(lake: Lake) -> dict:
        t = lake.catalog.load_table(ident)
        head = t.current_snapshot()
        entries = [(c, f"{os.path.dirname(f)}/<new>" if sid == head.snapshot_id and status == "ADDED" else f,
                    status, "new" if sid == head.snapshot_id else sid, seq, fseq)
                   for c, f, status, sid, seq, fseq in live_entries(lake, ident)]
        rows = {("new" if sid == head.snapshot_id else sid): r for sid, r in rows_by_snapshot(t).items()}
        return {"entries": sorted(entries), "manifests": manifest_counts(lake, ident),
                "operation": head.summary.operation.value, "sequence_number": head.sequence_number, "rows": rows}
    return observe


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


def reference_table(lake: Lake, builder: str, ident: str):
    """One of tests/support/iceberg_tables.py's tables, written at its frozen 2024 clock into this lake."""
    from tests.support import iceberg_tables

    return getattr(iceberg_tables, builder)(lake.catalog, ident)


def assert_iceberg_java_counts_every_snapshot(ice, lake: Lake, ident: str) -> None:
    """Cross-read where pyiceberg's scan cannot be the yardstick (it refuses equality deletes): Iceberg Java's
    row count of every snapshot is that of its files read with every delete applied."""
    from tests.support.iceberg_files import rows_from_files

    t = lake.catalog.load_table(ident)
    expected = {s.snapshot_id: sum(rows_from_files(t, s.snapshot_id).values()) for s in t.metadata.snapshots}
    with java_catalog(ice, lake) as cat:
        got = {sid: ice.sql(f"SELECT count(*) FROM {cat}.{ident} VERSION AS OF {sid}")[0][0] for sid in expected}
    assert got == expected


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


def rows_by_snapshot_of(table, snapshot_id: int) -> collections.Counter:
    from tests.support.iceberg_files import rows_from_files

    return rows_from_files(table, snapshot_id)


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
