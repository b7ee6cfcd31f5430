"""What ``lakesweep maintain`` takes on: the operations (each kind the registry marks ``Maintained``, in the
worker's canonical order), the tables in scope, the thresholds, and what a table does not need (detection,
each kind's ``Maintained.detect``)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.plan import FORMATS
from lakesweep.planner.kinds import kinds_of


def _canonical(fmt: str) -> tuple[str, ...]:
    """The kinds ``maintain`` runs on a table of format ``fmt``, in the worker's canonical order."""
    entries = sorted((e.maintain.order, e.name) for e in kinds_of(fmt).values() if e.maintain is not None)
    return tuple(name for _, name in entries)


CANONICAL = {fmt: _canonical(fmt) for fmt in FORMATS}
# The worker's operation names, as ``--operations`` accepts them too.
ALIASES = {"expire_snapshots": "expire", "remove_orphans": "orphans", "rewrite_manifests": "rewrite-manifests"}
ALL_OPERATIONS = tuple(name for _, name in sorted({(e.maintain.order, e.name) for fmt in CANONICAL
                                                   for e in kinds_of(fmt).values() if e.maintain is not None}))


@dataclass(frozen=True)
class Thresholds:
    """The worker's thresholds (SeaweedFS ``weed/worker/tasks/iceberg/config.go``). Retention left at None is
    each engine's own default, as ``plan`` uses it: Iceberg keeps 1 snapshot and 5 days
    (``history.expire.*``) and orphans older than 3 days; Paimon its ``snapshot.*`` options and orphans
    older than 1 day. SeaweedFS's own defaults (5 snapshots, 168 h, 72 h) are not used unless given."""

    max_snapshots_to_keep: int | None = None
    snapshot_retention_hours: int | None = None
    orphan_older_than_hours: int | None = None
    min_manifests_to_rewrite: int = 5
    max_commit_retries: int = 5
    target_file_size_mb: int = 256  # a table's write.target-file-size-bytes wins
    min_input_files: int = 5
    apply_deletes: bool = True


@dataclass(frozen=True, order=True)
class TableRef:
    format: str  # "iceberg" or "paimon"
    namespace: str
    table: str
    location: str | None = None  # a Paimon table's directory
    catalog: str | None = None  # an Iceberg table's catalog

    @property
    def name(self) -> str:
        return f"{self.namespace}.{self.table}"

    @property
    def label(self) -> str:
        return f"iceberg:{self.catalog}/{self.name}" if self.format == "iceberg" else f"paimon:{self.location}"


def parse_operations(text: str, fmt: str | None = None) -> tuple[str, ...]:
    """``all`` or a comma-separated list (lakesweep's names or the worker's), in canonical order whatever
    the order given."""
    names = [n.strip() for n in str(text).split(",") if n.strip()]
    if not names:
        raise PlanRejected("--operations is empty: give 'all' or a list such as 'expire,orphans'")
    if names == ["all"]:
        chosen = set(ALL_OPERATIONS)
    else:
        chosen = set()
        for n in names:
            op = ALIASES.get(n, n)
            if op not in ALL_OPERATIONS:
                raise PlanRejected(f"unknown operation {n!r}: use all, or some of {', '.join(ALL_OPERATIONS)} "
                                   f"(or the worker's names {', '.join(ALIASES)})")
            chosen.add(op)
    return tuple(op for op in ALL_OPERATIONS if op in chosen)


def _globs(text: str | None) -> list[str]:
    return [g.strip() for g in (text or "").split(",") if g.strip()]


def in_scope(name: str, globs: Sequence[str]) -> bool:
    return not globs or any(fnmatch.fnmatchcase(name, g) for g in globs)


def discover(*, catalog: str | None, warehouse: str | None, namespace_filter: str | None = None,
             table_filter: str | None = None) -> list[TableRef]:
    """The tables in scope, sorted."""
    ns_globs, table_globs = _globs(namespace_filter), _globs(table_filter)
    refs: list[TableRef] = []
    if catalog is not None:
        from lakesweep.engine.iceberg.table import list_tables

        for name in list_tables(catalog):
            namespace, _, table = name.rpartition(".")
            refs.append(TableRef("iceberg", namespace, table, catalog=catalog))
    if warehouse is not None:
        from lakesweep.engine.paimon.table import discover_tables

        for db, table, location in discover_tables(warehouse):
            refs.append(TableRef("paimon", db, table, location=location))
    return sorted(r for r in refs if in_scope(r.namespace, ns_globs) and in_scope(r.table, table_globs))


# ---- detection ------------------------------------------------------------------------------------------

def detect(view, ref: TableRef, ops: Sequence[str], th: Thresholds, now_ms: int) -> dict[str, str]:
    """Operations the table does not need, each with the worker's message, from metadata alone (each
    kind's ``Maintained.detect``)."""
    skip: dict[str, str] = {}
    for op in ops:
        entry = kinds_of(ref.format).get(op)
        if entry is None or entry.maintain is None or entry.maintain.detect is None:
            continue
        reason = entry.maintain.detect(view, th, now_ms)
        if reason is not None:
            skip[op] = reason
    return skip
