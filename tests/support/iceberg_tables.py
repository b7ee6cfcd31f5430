"""Reference Iceberg tables written by pyiceberg 0.12 itself, and the checks tests run on them.

Every table is created through pyiceberg's ``SqlCatalog`` on a SQLite file with
a ``file://`` warehouse, both under a test's ``tmp_path``, and written with
pyiceberg's own ``append`` / ``overwrite`` / ``delete`` (copy-on-write),
``update_schema``, ``update_spec`` and ``manage_snapshots``. What pyiceberg
cannot write (position and equality delete files, puffin statistics, partition
statistics) is written by ``tests.support.iceberg_files`` and committed through
pyiceberg's snapshot producer.

Each builder returns a ``BuiltTable``: the pyiceberg ``Table``, the steps it
took (which snapshots each produced, at which timestamp, on which ref) and the
rows each snapshot must hold, kept by the builder from what it wrote, never
read back through pyiceberg. ``rows_by_snapshot`` then asks pyiceberg's scan.

Time: a ``FrozenClock`` holds every timestamp pyiceberg 0.12 reads while a
builder runs (snapshot ``timestamp-ms``, ``last-updated-ms``, the snapshot and
metadata logs) at a value the builder advances by ``STEP_MS`` before each
change, starting at ``START_MS``. pyiceberg has no clock parameter, so the
clock patches the three places that read wall time (``time.time`` in
``pyiceberg.table.snapshots``, ``datetime.now`` in ``pyiceberg.table.update``
and ``pyiceberg.table.metadata``). Timestamps are exact and increase; the two
snapshots of one ``overwrite`` (or ``delete`` with a rewrite) share one.

pyiceberg 0.12 limits that shape these tables:

* partition transforms other than ``identity`` (``day``, ``bucket``, ...) need
  the ``pyiceberg-core`` extra on write, which is not installed: the tables are
  partitioned by identity on a string column and on a ``date`` column instead
  of ``day(ts)``.
* ``load_catalog(name)`` reads ``PYICEBERG_*`` variables once, when
  ``pyiceberg.catalog`` is imported (its module-level ``_ENV_CONFIG``); in the
  same process, rebuild it (``pyiceberg.catalog._ENV_CONFIG = Config()``) after
  setting them. A catalog name cannot contain ``_``: pyiceberg reads ``_`` in
  an environment variable's name as ``-``.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import os
import random
import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from unittest import mock
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, In
from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntryStatus
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, LongType, NestedField, StringType

from tests.support import iceberg_files

CATALOG_NAME = "lakesweep"
NAMESPACE = "db"
#: 2024-01-01T00:00:00Z, the builders' first timestamp; each change comes STEP_MS later.
START_MS = 1_704_067_200_000
STEP_MS = 3_600_000
DAY_MS = 86_400_000

FIRST_DAY = datetime.date(2024, 1, 1)


# --------------------------------------------------------------------------- catalog


def catalog_properties(tmp_dir: str | os.PathLike) -> dict[str, str]:
    """``uri`` (SQLite file) and ``warehouse`` (``file://`` directory) of the test catalog under ``tmp_dir``."""
    root = Path(tmp_dir).resolve()
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return {"uri": f"sqlite:///{root / 'catalog.db'}", "warehouse": (root / "warehouse").as_uri()}


def sql_catalog(tmp_dir: str | os.PathLike, name: str = CATALOG_NAME) -> SqlCatalog:
    """pyiceberg's SQL catalog on SQLite under ``tmp_dir``, with namespace ``db``; reopening finds the same tables."""
    catalog = SqlCatalog(name, **catalog_properties(tmp_dir))
    catalog.create_namespace_if_not_exists(NAMESPACE)
    return catalog


def catalog_env(tmp_dir: str | os.PathLike, name: str = CATALOG_NAME) -> dict[str, str]:
    """The ``PYICEBERG_CATALOG__<NAME>__*`` variables with which ``load_catalog(name)`` opens this catalog.

    The SQL catalog keys its rows by catalog name: ``name`` must be the name the
    tables were created under.
    """
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name):
        raise ValueError(
            f"catalog name {name!r}: pyiceberg reads environment variables lower-cased with '_' as '-', "
            "so use lower-case letters, digits and '-'"
        )
    prefix = f"PYICEBERG_CATALOG__{name.upper().replace('-', '_')}__"
    props = catalog_properties(tmp_dir)
    return {prefix + "TYPE": "sql", prefix + "URI": props["uri"], prefix + "WAREHOUSE": props["warehouse"]}


# --------------------------------------------------------------------------- clock


class FrozenClock:
    """The time pyiceberg 0.12 sees while the clock is entered: ``now_ms``, until ``advance`` moves it."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms
        self._stack: contextlib.ExitStack | None = None

    def advance(self, ms: int = STEP_MS) -> int:
        if ms <= 0:
            raise ValueError("the clock only moves forward")
        self.now_ms += ms
        return self.now_ms

    def _datetime(self, tz: datetime.tzinfo | None = None) -> datetime.datetime:
        utc = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=self.now_ms)
        return utc.astimezone(tz) if tz is not None else utc

    def __enter__(self) -> FrozenClock:
        import pyiceberg.table.metadata
        import pyiceberg.table.snapshots
        import pyiceberg.table.update

        clock = self

        class _Now(datetime.datetime):
            @classmethod
            def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
                return clock._datetime(tz)

        # +0.5 ms so that pyiceberg's int(time.time() * 1000) cannot round down past now_ms
        fake_time = types.SimpleNamespace(time=lambda: (clock.now_ms + 0.5) / 1000)
        fake_datetime_module = types.SimpleNamespace(datetime=_Now)
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(mock.patch.object(pyiceberg.table.snapshots, "time", fake_time))
        self._stack.enter_context(mock.patch.object(pyiceberg.table.update, "datetime", _Now))
        self._stack.enter_context(mock.patch.object(pyiceberg.table.metadata, "datetime", fake_datetime_module))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stack is not None
        self._stack.close()
        self._stack = None


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Step:
    """One change a builder made: its kind, the ref it targeted, the snapshots it added, the clock at commit."""

    kind: str
    ref: str
    snapshot_ids: tuple[int, ...]
    timestamp_ms: int


@dataclass
class BuiltTable:
    table: Table
    steps: list[Step]
    #: snapshot id -> the rows pyiceberg's scan of that snapshot must return, as tuples in the
    #: column order of the snapshot's schema.
    expected: dict[int, collections.Counter] = field(default_factory=dict)

    def snapshots_of(self, kind: str) -> list[int]:
        return [sid for step in self.steps if step.kind == kind for sid in step.snapshot_ids]

    def step(self, kind: str) -> Step:
        (found,) = [s for s in self.steps if s.kind == kind]
        return found


Row = dict[str, Any]


class _Builder:
    """Runs a builder's changes under a clock and records steps and expected rows per ref."""

    def __init__(self, table: Table, clock: FrozenClock) -> None:
        self.table = table
        self.clock = clock
        self.built = BuiltTable(table, [])
        self.rows: dict[str, list[Row]] = {MAIN_BRANCH: []}

    def _expect(self, snapshot_id: int, rows: list[Row]) -> None:
        snapshot = self.table.snapshot_by_id(snapshot_id)
        names = [f.name for f in self.table.schemas()[snapshot.schema_id].fields]
        self.built.expected[snapshot_id] = collections.Counter(tuple(row.get(n) for n in names) for row in rows)

    def change(self, kind: str, ref: str, action: Callable[[], None], *after: list[Row]) -> Step:
        """Run ``action`` one clock step later; ``after`` holds the ref's rows after each snapshot it adds."""
        before = {s.snapshot_id for s in self.table.snapshots()}
        self.clock.advance()
        action()
        added = tuple(s.snapshot_id for s in self.table.snapshots() if s.snapshot_id not in before)
        if len(added) != len(after):
            raise AssertionError(f"{kind} on {ref} added {len(added)} snapshots, the builder expected {len(after)}")
        for snapshot_id, rows in zip(added, after):
            self._expect(snapshot_id, rows)
        if after:
            self.rows[ref] = list(after[-1])
        step = Step(kind, ref, added, self.clock.now_ms)
        self.built.steps.append(step)
        return step

    def append(self, rows: list[Row], ref: str = MAIN_BRANCH, kind: str = "append") -> Step:
        arrow = pa.Table.from_pylist(rows, schema=self.table.schema().as_arrow())
        return self.change(kind, ref, lambda: self.table.append(arrow, branch=ref), self.rows[ref] + rows)

    def delete_where(self, column: str, values: set, *after: list[Row]) -> Step:
        expr = EqualTo(column, next(iter(values))) if len(values) == 1 else In(column, values)
        return self.change("delete", MAIN_BRANCH, lambda: self.table.delete(expr), *after)

    def drop(self, ref: str, predicate: Callable[[Row], bool]) -> list[Row]:
        return [row for row in self.rows[ref] if not predicate(row)]


def _create(catalog: SqlCatalog, ident: str, schema: Schema, spec: PartitionSpec) -> Table:
    if "." not in ident:
        ident = f"{NAMESPACE}.{ident}"
    return catalog.create_table(ident, schema, partition_spec=spec)


def _identity(*fields: tuple[int, str]) -> PartitionSpec:
    return PartitionSpec(
        *(PartitionField(source_id, 1000 + i, IdentityTransform(), name) for i, (source_id, name) in enumerate(fields))
    )


def _rows_of_file(table: Table, location: str) -> list[Row]:
    with table.io.new_input(location).open() as f:
        return pq.read_table(f).to_pylist()


def files_added_in(table: Table, snapshot_id: int) -> list[DataFile]:
    """The data files ``snapshot_id`` added (live entries it wrote with status ADDED), in manifest order."""
    snapshot = table.snapshot_by_id(snapshot_id)
    return [
        entry.data_file
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        if entry.data_file.content == DataFileContent.DATA
        and entry.status == ManifestEntryStatus.ADDED
        and entry.snapshot_id == snapshot_id
    ]


# --------------------------------------------------------------------------- builders

REGIONS = ("eu", "us", "ap")

#: id, region, dt, amount: the schema of many_appends, position_deletes, equality_deletes, with_statistics.
EVENTS_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "dt", DateType(), required=False),
    NestedField(4, "amount", LongType(), required=False),
)


def _event(rng: random.Random, id_: int, region: str, day: int) -> Row:
    return {"id": id_, "region": region, "dt": FIRST_DAY + datetime.timedelta(days=day), "amount": rng.randint(0, 999)}


def many_appends(
    catalog: SqlCatalog,
    ident: str,
    n: int = 20,
    partitioned: bool = True,
    *,
    seed: int = 0,
    clock: FrozenClock | None = None,
) -> BuiltTable:
    """``n`` appends of 3 rows each (ids 3i..3i+2, day i mod 4), one snapshot and one new manifest each.

    Partitioned by identity(region), identity(dt); rows of one append spread over
    up to 3 partitions, hence up to 3 data files per append.
    """
    rng = random.Random(seed)
    clock = clock or FrozenClock()
    with clock:
        spec = _identity((2, "region"), (3, "dt")) if partitioned else PartitionSpec()
        b = _Builder(_create(catalog, ident, EVENTS_SCHEMA, spec), clock)
        for i in range(n):
            b.append([_event(rng, 3 * i + j, rng.choice(REGIONS), i % 4) for j in range(3)])
    return b.built


#: id, category, dt, qty (+ note from the schema evolution on): the schema churn starts with.
CHURN_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "dt", DateType(), required=False),
    NestedField(4, "qty", LongType(), required=False),
)

CHURN_TAG_MAX_REF_AGE_MS = 7 * DAY_MS
CHURN_BRANCH = "audit"
CHURN_BRANCH_MAX_REF_AGE_MS = 30 * DAY_MS
CHURN_BRANCH_MAX_SNAPSHOT_AGE_MS = 2 * DAY_MS
CHURN_BRANCH_MIN_SNAPSHOTS_TO_KEEP = 2


def churn(catalog: SqlCatalog, ident: str, seed: int = 0, *, clock: FrozenClock | None = None) -> BuiltTable:
    """A table through every kind of change pyiceberg 0.12 makes, one clock step apart.

    Steps (kind: snapshots added on main unless said):

    1. ``append`` ids 0-11 (category a/b/c by id mod 3, dt day 0/1 by id mod 2)
    2. ``append`` ids 12-23
    3. ``tag`` ``first`` -> snapshot 1, ``max_ref_age_ms`` 7 days
    4. ``branch`` ``audit`` -> snapshot 2, max ref age 30 days, max snapshot age 2 days, min 2 snapshots
    5. ``overwrite`` category = a with ids 100-103: a ``delete`` and an ``append`` snapshot
    6. ``delete`` category = b: whole files go, one ``delete`` snapshot
    7. ``delete-rewrite`` id in {2, 5}: part of a file goes, one ``overwrite`` snapshot (copy-on-write)
    8. ``add-column`` note (string), no snapshot
    9. ``append`` ids 200-205 with notes
    10. ``branch-append`` x2 on ``audit``: ids 300-302, then 303-305, then ``branch-retention``:
        the retention settings again (pyiceberg drops them from the ref on a commit to the branch)
    11. ``add-partition-field`` identity(dt) (spec 1: category, dt), then ``append`` ids 400-405 (day 4)
    12. ``remove-partition-field`` category (spec 2: dt), then ``append`` ids 500-505 (day 4)
    13. ``tag`` ``release`` -> the current snapshot, no max age
    14. ``delete`` dt = day 4: every such row sits in spec 1 and 2 files, whole files go
    15. ``append`` ids 600-603 (day 5, so one data file)
    16. ``position-delete`` of row 0 of step 15's file: one ``delete`` snapshot adding a delete file
    """
    rng = random.Random(seed)
    clock = clock or FrozenClock()

    def rows(ids: range, day: int | None = None, note: bool = False) -> list[Row]:
        out = []
        for i in ids:
            row = {
                "id": i,
                "category": "abc"[i % 3],
                "dt": FIRST_DAY + datetime.timedelta(days=i % 2 if day is None else day),
                "qty": rng.randint(0, 99),
            }
            if note:
                row["note"] = rng.choice(["n1", "n2", None])
            out.append(row)
        return out

    with clock:
        b = _Builder(_create(catalog, ident, CHURN_SCHEMA, _identity((2, "category"))), clock)
        t = b.table
        s1 = b.append(rows(range(0, 12))).snapshot_ids[0]
        s2 = b.append(rows(range(12, 24))).snapshot_ids[0]
        tag_first = t.manage_snapshots().create_tag
        b.change("tag", "first", lambda: tag_first(s1, "first", CHURN_TAG_MAX_REF_AGE_MS).commit())
        b.change("branch", CHURN_BRANCH, lambda: _set_branch(t, s2))
        b.rows[CHURN_BRANCH] = list(b.rows[MAIN_BRANCH])

        new_a = [dict(r, category="a") for r in rows(range(100, 104))]
        kept = b.drop(MAIN_BRANCH, lambda r: r["category"] == "a")
        b.change(
            "overwrite",
            MAIN_BRANCH,
            lambda: t.overwrite(
                pa.Table.from_pylist(new_a, schema=t.schema().as_arrow()), overwrite_filter=EqualTo("category", "a")
            ),
            kept,
            kept + new_a,
        )
        b.delete_where("category", {"b"}, b.drop(MAIN_BRANCH, lambda r: r["category"] == "b"))
        rewritten = b.drop(MAIN_BRANCH, lambda r: r["id"] in (2, 5))
        b.change("delete-rewrite", MAIN_BRANCH, lambda: t.delete(In("id", {2, 5})), rewritten)

        b.change("add-column", MAIN_BRANCH, lambda: t.update_schema().add_column("note", StringType()).commit())
        b.append(rows(range(200, 206), note=True))
        b.append(rows(range(300, 303), note=True), ref=CHURN_BRANCH, kind="branch-append")
        head = b.append(rows(range(303, 306), note=True), ref=CHURN_BRANCH, kind="branch-append").snapshot_ids[0]
        # pyiceberg 0.12's snapshot producer rewrites the branch ref without its retention
        # settings on every commit to the branch; set them again (same head)
        b.change("branch-retention", CHURN_BRANCH, lambda: _set_branch(t, head))

        b.change("add-partition-field", MAIN_BRANCH, lambda: t.update_spec().add_identity("dt").commit())
        b.append(rows(range(400, 406), day=4, note=True))
        b.change("remove-partition-field", MAIN_BRANCH, lambda: t.update_spec().remove_field("category").commit())
        b.append(rows(range(500, 506), day=4, note=True))
        current = t.current_snapshot().snapshot_id
        b.change("tag", "release", lambda: t.manage_snapshots().create_tag(current, "release").commit())

        day4 = FIRST_DAY + datetime.timedelta(days=4)
        b.delete_where("dt", {day4}, b.drop(MAIN_BRANCH, lambda r: r["dt"] == day4))
        last = b.append(rows(range(600, 604), day=5, note=True)).snapshot_ids[0]

        (data_file,) = files_added_in(t, last)
        hidden = _rows_of_file(t, data_file.file_path)[0]
        delete_file = iceberg_files.write_position_delete_file(t, data_file, [0])
        b.change(
            "position-delete",
            MAIN_BRANCH,
            lambda: iceberg_files.commit_delete_files(t, [delete_file]),
            b.drop(MAIN_BRANCH, lambda r: r["id"] == hidden["id"]),
        )
    return b.built


def _set_branch(table: Table, snapshot_id: int) -> None:
    table.manage_snapshots().create_branch(
        snapshot_id,
        CHURN_BRANCH,
        max_ref_age_ms=CHURN_BRANCH_MAX_REF_AGE_MS,
        max_snapshot_age_ms=CHURN_BRANCH_MAX_SNAPSHOT_AGE_MS,
        min_snapshots_to_keep=CHURN_BRANCH_MIN_SNAPSHOTS_TO_KEEP,
    ).commit()


def position_deletes(catalog: SqlCatalog, ident: str, seed: int = 0, *, clock: FrozenClock | None = None) -> BuiltTable:
    """Position delete files committed through pyiceberg's snapshot producer, partitioned by identity(region).

    1. ``append`` ids 0-11 (eu: even ids, us: odd ids): two data files of 6 rows
    2. ``position-delete`` rows 1 and 4 of the eu file
    3. ``append`` ids 12-17 (eu): a third data file
    4. ``position-delete`` row 0 of the us file and rows 2, 3 of step 3's file: two delete files, one commit

    The hidden rows are the rows at those positions in the files as written
    (read back with pyarrow), so the expectation does not rest on pyiceberg.
    """
    rng = random.Random(seed)
    clock = clock or FrozenClock()
    with clock:
        b = _Builder(_create(catalog, ident, EVENTS_SCHEMA, _identity((2, "region"))), clock)
        t = b.table
        s1 = b.append([_event(rng, i, "eu" if i % 2 == 0 else "us", 0) for i in range(12)]).snapshot_ids[0]
        by_region = {f.partition[0]: f for f in files_added_in(t, s1)}
        b.change(
            "position-delete",
            MAIN_BRANCH,
            *_position_delete(b, [(by_region["eu"], [1, 4])]),
        )
        s3 = b.append([_event(rng, i, "eu", 1) for i in range(12, 18)]).snapshot_ids[0]
        (third,) = files_added_in(t, s3)
        b.change(
            "position-delete",
            MAIN_BRANCH,
            *_position_delete(b, [(by_region["us"], [0]), (third, [2, 3])]),
        )
    return b.built


def _position_delete(b: _Builder, targets: list[tuple[DataFile, list[int]]]) -> tuple[Callable[[], None], list[Row]]:
    hidden = {
        _rows_of_file(b.table, data_file.file_path)[pos]["id"] for data_file, positions in targets for pos in positions
    }
    delete_files = [iceberg_files.write_position_delete_file(b.table, f, positions) for f, positions in targets]
    return (
        lambda: iceberg_files.commit_delete_files(b.table, delete_files),
        b.drop(MAIN_BRANCH, lambda r: r["id"] in hidden),
    )


#: The ids equality_deletes deletes in region eu.
EQUALITY_DELETED_IDS = (3, 7)


def equality_deletes(catalog: SqlCatalog, ident: str, seed: int = 0, *, clock: FrozenClock | None = None) -> BuiltTable:
    """An equality delete file committed through pyiceberg's snapshot producer, partitioned by identity(region).

    1. ``append`` ids 0-9 in eu and the same ids 0-9 in us
    2. ``equality-delete`` on ``id`` in partition eu: ids 3 and 7 (the us rows stay: other partition)
    3. ``append`` id 3 in eu again (data sequence number above the delete's: it stays)

    pyiceberg 0.12's scan refuses equality deletes, so ``expected`` is checked
    with ``iceberg_files.rows_from_files``, not ``rows_by_snapshot``.
    """
    rng = random.Random(seed)
    clock = clock or FrozenClock()
    with clock:
        b = _Builder(_create(catalog, ident, EVENTS_SCHEMA, _identity((2, "region"))), clock)
        t = b.table
        s1 = b.append([_event(rng, i, region, 0) for region in ("eu", "us") for i in range(10)]).snapshot_ids[0]
        eu = next(f for f in files_added_in(t, s1) if f.partition[0] == "eu")
        delete_file = iceberg_files.write_equality_delete_file(
            t, partition=eu.partition, spec_id=eu.spec_id, rows=[{"id": i} for i in EQUALITY_DELETED_IDS]
        )
        b.change(
            "equality-delete",
            MAIN_BRANCH,
            lambda: iceberg_files.commit_delete_files(t, [delete_file]),
            b.drop(MAIN_BRANCH, lambda r: r["region"] == "eu" and r["id"] in EQUALITY_DELETED_IDS),
        )
        b.append([_event(rng, 3, "eu", 1)])
    return b.built


def with_statistics(catalog: SqlCatalog, ident: str, seed: int = 0, *, clock: FrozenClock | None = None) -> BuiltTable:
    """Statistics (puffin) and partition statistics (parquet) files referenced from the table metadata.

    1. ``append`` ids 0-5, 2. ``append`` ids 6-11 (region by id mod 3), 3. ``statistics``: a puffin
    file for each of snapshots 1 and 2 (theta sketches of id and region), 4. ``partition-statistics``
    for snapshot 2, 5. ``append`` ids 12-14 (no statistics).
    """
    rng = random.Random(seed)
    clock = clock or FrozenClock()
    with clock:
        b = _Builder(_create(catalog, ident, EVENTS_SCHEMA, _identity((2, "region"))), clock)
        t = b.table
        s1 = b.append([_event(rng, i, REGIONS[i % 3], 0) for i in range(6)]).snapshot_ids[0]
        s2 = b.append([_event(rng, i, REGIONS[i % 3], 1) for i in range(6, 12)]).snapshot_ids[0]
        stats = [iceberg_files.write_statistics_file(t, sid, ["id", "region"]) for sid in (s1, s2)]

        def set_statistics() -> None:
            with t.update_statistics() as update:
                for statistics_file in stats:
                    update.set_statistics(statistics_file)

        b.change("statistics", MAIN_BRANCH, set_statistics)
        partition_stats = iceberg_files.write_partition_statistics_file(t, s2)
        set_partition_statistics = iceberg_files.set_partition_statistics
        b.change("partition-statistics", MAIN_BRANCH, lambda: set_partition_statistics(t, partition_stats))
        b.append([_event(rng, i, REGIONS[i % 3], 2) for i in range(12, 15)])
    return b.built


# --------------------------------------------------------------------------- checks


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


def rows_by_snapshot(table: Table) -> dict[int, collections.Counter]:
    """For every snapshot in the metadata, the multiset of rows pyiceberg's scan of it returns.

    Rows are tuples in the column order of the snapshot's own schema (pyiceberg
    scans an old snapshot with the schema it was written with). A table with
    equality deletes raises pyiceberg's ``ValueError``: use
    ``iceberg_files.rows_from_files`` there.
    """
    out = {}
    for snapshot in table.metadata.snapshots:
        arrow = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        names = arrow.column_names
        out[snapshot.snapshot_id] = collections.Counter(
            tuple(_hashable(row[n]) for n in names) for row in arrow.to_pylist()
        )
    return out


def referenced_files(table: Table) -> set[str]:
    """Every file location the table metadata references, as recorded (``file://`` URIs here).

    The current metadata file and those of the metadata log; for every snapshot
    its manifest list, its manifests and every file their entries name, whatever
    the entry's status (ADDED, EXISTING, DELETED) or content (data, position or
    equality deletes); statistics and partition-statistics files. A manifest list
    or manifest that cannot be read raises (pyiceberg's error): nothing is skipped.
    """
    metadata = table.metadata
    out = {table.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    for snapshot in metadata.snapshots:
        out.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            out.add(manifest.manifest_path)
            entries = manifest.fetch_manifest_entry(table.io, discard_deleted=False)
            out.update(entry.data_file.file_path for entry in entries)
    out.update(s.statistics_path for s in metadata.statistics)
    out.update(s.statistics_path for s in metadata.partition_statistics)
    return out


def _local_path(location: str) -> str:
    parsed = urlparse(location)
    if parsed.scheme not in ("file", ""):
        raise ValueError(f"{location}: only local (file://) tables are supported here")
    return parsed.path


def missing_files(table: Table) -> list[str]:
    """Files a reader of some retained snapshot needs that are not on disk, sorted.

    Checked: the current metadata file; for every snapshot in the metadata its
    manifest list, manifests and the files of their live entries (ADDED and
    EXISTING, data and deletes); statistics and partition-statistics files.
    Not checked: older metadata files of the metadata log and files of DELETED
    entries, which a maintenance run may legitimately remove.
    """
    metadata = table.metadata
    needed = {table.metadata_location}
    for snapshot in metadata.snapshots:
        needed.add(snapshot.manifest_list)
        if not os.path.exists(_local_path(snapshot.manifest_list)):
            continue  # its manifests cannot be listed; the list itself is reported
        for manifest in snapshot.manifests(table.io):
            needed.add(manifest.manifest_path)
            if os.path.exists(_local_path(manifest.manifest_path)):
                entries = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
                needed.update(entry.data_file.file_path for entry in entries)
    needed.update(s.statistics_path for s in metadata.statistics)
    needed.update(s.statistics_path for s in metadata.partition_statistics)
    return sorted(p for p in needed if not os.path.exists(_local_path(p)))


def files_on_disk(table: Table) -> set[str]:
    """Every file under the table location, as ``file://`` URIs in the form the metadata records."""
    root = _local_path(table.location())
    prefix = table.location()[: len(table.location()) - len(root)]
    out = set()
    for directory, _, names in os.walk(root):
        out.update(prefix + os.path.join(directory, name) for name in names)
    return out
