"""A maintenance operation with a commit between its start and its commit, run by Iceberg 1.12's Spark
actions and by lakesweep on identical copies of one table (test_conflicts_vs_iceberg_java.py).

Iceberg Java: the table object is held (``IcebergSpark.hold``), the change committed through another, then
the action runs on the held one: it plans from the table as held and commits through the catalog as it is.
lakesweep: ``plan``, the change, ``apply``. Iceberg Java makes the change on both sides (Spark SQL, or a
``RowDelta`` for an equality delete). Each side's table is judged against itself just before the
maintenance commit: the rows of every snapshot (every delete applied), and the files the metadata needs.
"""

from __future__ import annotations

import collections
import itertools
import re
import sqlite3
import time
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.table import StaticTable
from pyiceberg.typedef import Record

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import LakesweepError
from lakesweep.engine.iceberg.table import IcebergTable, canonical
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.iceberg.conftest import CATALOG, SCHEMA, SPEC, Lake, files_on_disk, needed_files
from tests.iceberg.java_twins import java_catalog, put_aside
from tests.support import iceberg_files
from tests.support.iceberg_spark import IcebergSparkError

IDENT = "ns.c"
_keys = itertools.count(1)

#: The concurrent changes, each made by Iceberg Java between the maintenance's start and its commit.
CHANGES = ("append", "delete (copy-on-write)", "delete (merge-on-read)", "equality delete",
           "equality delete, then append", "tag on an expiring snapshot", "branch on an expiring snapshot",
           "rollback")
OPERATIONS = ("expire", "rewrite-manifests", "compact")


def history(lake: Lake) -> list[int]:
    """A v2 table partitioned by region: four appends of two ``us`` rows and one ``eu`` row each (one file
    per partition), then a copy-on-write delete of id 1. Its snapshot ids, oldest first."""
    t = lake.catalog.create_table(IDENT, schema=SCHEMA, partition_spec=SPEC, properties={"format-version": "2"})
    for i in range(4):
        ids = [10 * i, 10 * i + 1, 10 * i + 2]
        t.append(pa.table({"id": pa.array(ids, pa.int64()), "region": ["us", "us", "eu"]}))
    t.delete("id = 1")
    t = lake.table(IDENT)
    time.sleep(0.01)  # the cut-off falls strictly after the last snapshot
    return [s.snapshot_id for s in t.metadata.snapshots]


def static(lake: Lake) -> StaticTable:
    """The table as the catalog holds it now, read without the catalog's name (Iceberg Java may hold it)."""
    con = sqlite3.connect(f"{lake.root}/catalog.db")
    try:
        [(location,)] = con.execute("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? "
                                    "AND table_name = ?", tuple(IDENT.split("."))).fetchall()
    finally:
        con.close()
    return StaticTable.from_metadata(location)


def snapshot_rows(table) -> dict[int, collections.Counter | str]:
    """Every snapshot's rows as a multiset, or why it cannot be read (a file it needs is gone)."""
    out: dict[int, collections.Counter | str] = {}
    for s in table.metadata.snapshots:
        try:
            out[s.snapshot_id] = iceberg_files.rows_from_files(table, s.snapshot_id)
        except OSError as e:
            out[s.snapshot_id] = f"unreadable: {type(e).__name__}"
    return out


def change(ice, lake: Lake, cat: str, kind: str, ids: list[int]) -> None:
    """Commit the concurrent change ``kind`` through Iceberg Java (catalog ``cat``); ``ids`` are the
    history's snapshots. Every row change touches id 10, in the second ``us`` file."""
    t = f"{cat}.{IDENT}"
    if kind == "append":
        ice.sql(f"INSERT INTO {t} VALUES (900, 'us')")
    elif kind == "delete (copy-on-write)":
        ice.sql(f"DELETE FROM {t} WHERE id = 10")
    elif kind == "delete (merge-on-read)":
        ice.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
        ice.sql(f"DELETE FROM {t} WHERE id = 10")
    elif kind in ("equality delete", "equality delete, then append"):
        table = static(lake)
        f = iceberg_files.write_equality_delete_file(table, partition=Record("us"), spec_id=table.spec().spec_id,
                                                     rows=[{"id": 10}])
        ice.equality_delete(t, path=f.file_path, size=f.file_size_in_bytes, records=1, field_ids=[1],
                            partition_path="region=us")
        if kind.endswith("append"):
            ice.sql(f"INSERT INTO {t} VALUES (900, 'us')")
    elif kind == "tag on an expiring snapshot":
        ice.sql(f"ALTER TABLE {t} CREATE TAG `audit` AS OF VERSION {ids[1]}")
    elif kind == "branch on an expiring snapshot":
        ice.sql(f"ALTER TABLE {t} CREATE BRANCH `audit` AS OF VERSION {ids[1]}")
    elif kind == "rollback":
        ice.sql(f"CALL {cat}.system.rollback_to_snapshot('{IDENT}', {ids[-2]})")
    else:
        raise ValueError(f"unknown change {kind!r}")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one side's maintenance did, and whether the table lost anything by it."""

    outcome: str  # "committed", "refused: <exception class>", or lakesweep's held-back actions
    detail: str  # the refusal's message, or what was held back and why
    changed: dict = field(default_factory=dict)  # snapshot id -> (rows before, rows after): must stay empty
    wrong_commits: dict = field(default_factory=dict)  # the maintenance's own snapshots not reading their parent's
    head_before: collections.Counter = field(default_factory=collections.Counter)
    head_after: collections.Counter = field(default_factory=collections.Counter)
    missing: frozenset = frozenset()  # files a retained snapshot or ref needs, deleted
    snapshots: frozenset = frozenset()  # the snapshots left
    refs: dict = field(default_factory=dict)
    deletes: list = field(default_factory=list)  # the head's live delete files (``live_deletes``)
    us_files: list = field(default_factory=list)  # the data sequence numbers of the head's region=us files
    last_sequence_number: int = 0  # of the table before the maintenance
    counts: dict = field(default_factory=dict)  # Iceberg Java: the action's result

    @property
    def lost(self) -> bool:
        return bool(self.changed or self.wrong_commits or self.missing or self.head_before != self.head_after)


def judge(lake: Lake, before: dict, head_before: collections.Counter, last_sequence_number: int, outcome: str,
          detail: str, counts: dict | None = None) -> Verdict:
    t = static(lake)
    after = snapshot_rows(t)
    changed = {sid: (before[sid], rows) for sid, rows in after.items() if sid in before and rows != before[sid]}
    wrong = {}
    for s in t.metadata.snapshots:
        if s.snapshot_id in before:
            continue
        parent = after.get(s.parent_snapshot_id, before.get(s.parent_snapshot_id))
        if after[s.snapshot_id] != parent:
            wrong[s.snapshot_id] = (parent, after[s.snapshot_id])
    head = after[t.metadata.current_snapshot_id]
    root = canonical(t.metadata.location)
    missing = frozenset(p.removeprefix(root + "/") for p in needed_files(t) - files_on_disk(t))
    return Verdict(outcome, detail, changed, wrong, head_before, head, missing,
                   frozenset(after), {n: r.snapshot_id for n, r in t.metadata.refs.items()},
                   live_deletes(t), live_data(t, "us"), last_sequence_number, counts or {})


def _before(lake: Lake) -> tuple[dict, collections.Counter, int]:
    t = static(lake)
    rows = snapshot_rows(t)
    return rows, rows[t.metadata.current_snapshot_id], t.metadata.last_sequence_number


def refusal(e: Exception) -> tuple[str, str]:
    """A Java exception's class and message, from the Py4J error text."""
    found = re.search(r"org\.apache\.iceberg\.exceptions\.(\w+): ([^\n]*)", str(e))
    if found is None:
        return f"failed: {type(e).__name__}", str(e)[:400]
    return f"refused: {found.group(1)}", found.group(2)


def java_side(ice, lake: Lake, operation: str, kind: str, ids: list[int], cutoff_ms: int,
              options: dict[str, str]) -> Verdict:
    with java_catalog(ice, lake) as cat:
        key = f"start{next(_keys)}"
        assert ice.hold(key, f"{cat}.{IDENT}") == ids[-1]
        change(ice, lake, cat, kind, ids)
        before, head, last = _before(lake)
        try:
            if operation == "expire":
                result = ice.action(key, "expire_snapshots", older_than_ms=cutoff_ms, retain_last=1)
            elif operation == "rewrite-manifests":
                result = ice.action(key, "rewrite_manifests")
            else:
                result = ice.action(key, "rewrite_data_files", **{"min-input-files": "2", **options})
            outcome, detail = "committed", str(result)
        except IcebergSparkError as e:
            result, (outcome, detail) = {}, refusal(e)
    return judge(lake, before, head, last, outcome, detail, result)


def lakesweep_plan(operation: str, cutoff_ms: int):
    view = IcebergTable(CATALOG, IDENT)
    now = int(time.time() * 1000)
    if operation == "expire":
        from lakesweep.planner.iceberg.expire import plan_iceberg_expire, resolve_expire_options

        return plan_iceberg_expire(view, now_ms=now, options=resolve_expire_options(
            view.options, older_than=str(cutoff_ms), retain_last=1))
    if operation == "rewrite-manifests":
        from lakesweep.planner.iceberg.rewrite_manifests import plan_rewrite_manifests, resolve_rewrite_options

        return plan_rewrite_manifests(view, now_ms=now, options=resolve_rewrite_options(view.options,
                                                                                         min_manifests=2))
    from lakesweep.planner.iceberg.compact import plan_compact, resolve_compact_options

    return plan_compact(view, now_ms=now, options=resolve_compact_options(view.options, min_input_files=2))


class ChangingDuringTheMerge(DriverExecutor):
    """An executor that runs ``change`` once, right after the first compaction bin is merged."""

    def __init__(self, change) -> None:
        super().__init__()
        self.change = change

    def map(self, fn, items, *, on_result) -> None:
        def merge_then_change(task):
            out = fn(task)
            if self.change is not None:
                self.change()
                self.change = None
            return out

        super().map(merge_then_change, items, on_result=on_result)


def lakesweep_side(ice, lake: Lake, tmp_path, operation: str, kind: str, ids: list[int], cutoff_ms: int, *,
                   during_merge: bool = False) -> Verdict:
    plan = lakesweep_plan(operation, cutoff_ms)
    assert plan.actions
    seen = []

    def commit_change() -> None:
        with java_catalog(ice, lake) as cat:
            change(ice, lake, cat, kind, ids)
        seen.append(_before(lake))

    executor = ChangingDuringTheMerge(commit_change) if during_merge else DriverExecutor()
    if not during_merge:
        commit_change()
    try:
        with DuckDBRecorder(tmp_path / f"j{next(_keys)}.duckdb") as rec:
            report = apply_plan(plan, rec, executor=executor)
        held = {k: n for k, n in report.counts.items() if k in ("DROPPED", "SKIPPED_REFERENCED") and n}
        outcome = "committed" if report.commits and report.commits[0].get("version") is not None else "no commit"
        if held:
            outcome += ", " + ", ".join(f"{n} {k}" for k, n in sorted(held.items()))
        detail = report.held_reason or ""
    except LakesweepError as e:
        outcome, detail = f"refused: {type(e).__name__}", str(e)
    [(before, head, last)] = seen  # the change was made, once
    return judge(lake, before, head, last, outcome, detail)


def twin(ice, lake: Lake, tmp_path, operation: str, kind: str, java_options: dict[str, str] | None = None, *,
         during_merge: bool = False) -> tuple[Verdict, Verdict, Lake]:
    """(Iceberg Java's verdict, lakesweep's, the lake lakesweep changed) for ``operation`` with ``kind``
    committed in between; ``java_options`` are further options of Iceberg's ``rewrite_data_files``. With
    ``during_merge`` lakesweep's side commits the change after its apply merged the first bin, not before
    the apply."""
    ids = history(lake)
    cutoff = int(time.time() * 1000)
    restore = put_aside(lake)
    java = java_side(ice, lake, operation, kind, ids, cutoff, java_options or {})
    lake = restore()
    ours = lakesweep_side(ice, lake, tmp_path, operation, kind, ids, cutoff, during_merge=during_merge)
    return java, ours, lake


def live_deletes(t) -> list[tuple[str, int]]:
    """The current snapshot's live delete files: (content, data sequence number), sorted."""
    return sorted((e.data_file.content.name, e.sequence_number) for m in t.current_snapshot().manifests(t.io)
                  if int(m.content) == 1 for e in m.fetch_manifest_entry(t.io, discard_deleted=True))


def live_data(t, region: str) -> list[int]:
    """The data sequence numbers of the current snapshot's live data files in ``region``, sorted."""
    return sorted(e.sequence_number for m in t.current_snapshot().manifests(t.io) if int(m.content) == 0
                  for e in m.fetch_manifest_entry(t.io, discard_deleted=True) if e.data_file.partition[0] == region)
