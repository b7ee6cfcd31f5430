"""Twin runs for the differentials against Iceberg's Java actions (test_vs_iceberg_java.py): copies of a lake,
its catalog opened by Iceberg's JdbcCatalog, what each side leaves, and the tables both sides work on.

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

from pyiceberg.catalog.sql import SqlCatalog

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.expire import plan_iceberg_expire, resolve_expire_options
from lakesweep.planner.iceberg.orphans import resolve_orphan_options
from lakesweep.planner.kinds import plan_kind
from tests.iceberg.conftest import CATALOG, SCHEMA, SPEC, Lake, batch, rows_by_snapshot

DAY_MS = 86_400_000
CURRENT = "metadata/<current>.metadata.json"
# Iceberg Java writes through Hadoop's local file system, which puts a checksum sidecar beside what it writes
CURRENT_CRC = "metadata/.<current>.metadata.json.crc"
_names = itertools.count(1)


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


def java_orphans(ice, lake: Lake, ident: str, *, older_than_ms: int) -> list[str]:
    root = canonical(lake.table(ident).metadata.location)
    with java_catalog(ice, lake) as cat:
        rows = ice.sql(f"CALL {cat}.system.remove_orphan_files(table => '{ident}', older_than => TIMESTAMP "
                       f"'{iso_utc(older_than_ms)}', dry_run => true)")
    return sorted(os.path.relpath(canonical(r[0]), root) for r in rows)


def lakesweep_orphans(lake: Lake, ident: str, *, older_than_ms: int) -> list[str]:
    view = IcebergTable(CATALOG, ident)
    p = plan_kind("orphans", "iceberg").read_and_plan(view, now_ms=now_ms(),
                                             options=resolve_orphan_options(view.options,
                                                                            older_than=str(older_than_ms)))
    return sorted(a.path for a in p.actions)


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
        from lakesweep.planner.iceberg.rewrite_manifests import plan_rewrite_manifests, resolve_rewrite_options

        p = plan_rewrite_manifests(view, now_ms=now_ms(), options=resolve_rewrite_options(view.options, **flags))
    else:
        from lakesweep.planner.iceberg.compact import plan_compact, resolve_compact_options

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


def rows_by_snapshot_of(table, snapshot_id: int) -> collections.Counter:
    from tests.support.iceberg_files import rows_from_files

    return rows_from_files(table, snapshot_id)
