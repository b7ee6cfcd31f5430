"""Whether an apply quarantines, and how: the user's flags over the live table's own option.

A Paimon table option or Iceberg table property ``lakesweep.quarantine = true`` makes quarantine the table's
default, ``lakesweep.quarantine.retention`` (a duration, ``7 d``) its retention; flags given to ``apply`` or
``maintain`` win. Design: docs/design/quarantine.md#applying-with---quarantine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import join, normalize_location
from lakesweep.engine.quarantine import DEFAULT_RETENTION_MS, QUARANTINE_DIR, QuarantineSpec
from lakesweep.engine.timeutil import parse_duration_ms

TABLE_OPTION = "lakesweep.quarantine"
RETENTION_OPTION = "lakesweep.quarantine.retention"


@dataclass(frozen=True, slots=True)
class QuarantineChoice:
    """What the user asked for: ``enabled`` (None: the table's option decides), ``retention_ms`` (None: the
    table's option, else 7 days) and a quarantine ``root`` for the table root's files (None: inside the
    table). ``spec`` resolves it against the live table's options. ``many_tables``: given to ``maintain``
    for every table in scope, the retention is for the tables that quarantine (not a request to)."""

    enabled: bool | None = None
    retention_ms: int | None = None
    root: str | None = None
    many_tables: bool = False

    def spec(self, plan_id: str, table_location: str, options: Mapping[str, str]) -> QuarantineSpec | None:
        """The apply's ``QuarantineSpec``, None when it deletes. ``PlanRejected`` for a table option that is
        not a boolean or a duration, for a retention or root given to an apply that does not quarantine, and
        for a root inside the table (other than the table's own quarantine folder)."""
        enabled = self.enabled if self.enabled is not None else table_enabled(options)
        if not enabled:
            if (self.retention_ms is not None or self.root is not None) and not self.many_tables:
                raise PlanRejected("a quarantine retention or root was given, but the apply deletes: add "
                                   f"--quarantine (or set the table option '{TABLE_OPTION}' to true)")
            return None
        retention = self.retention_ms if self.retention_ms is not None else table_retention_ms(options)
        return QuarantineSpec(plan_id, retention, check_root(self.root, table_location))


def table_enabled(options: Mapping[str, str]) -> bool:
    """The table's ``lakesweep.quarantine`` (absent: false)."""
    value = options.get(TABLE_OPTION)
    if value is None:
        return False
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise PlanRejected(f"the table option '{TABLE_OPTION}' is {value!r}; set it to true or false")
    return text == "true"


def table_retention_ms(options: Mapping[str, str]) -> int:
    """The table's ``lakesweep.quarantine.retention`` in milliseconds (absent: 7 days)."""
    value = options.get(RETENTION_OPTION)
    if value is None:
        return DEFAULT_RETENTION_MS
    try:
        return parse_duration_ms(value)
    except PlanRejected as e:
        raise PlanRejected(f"the table option '{RETENTION_OPTION}': {e}") from e


def check_root(root: str | None, table_location: str) -> str | None:
    """A quarantine root the user names, as a location; refused inside the table (the orphan planners would
    take its files for orphans) unless it is the table's own quarantine folder, and on another store."""
    if root is None:
        return None
    location = normalize_location(root, relative_ok=False).rstrip("/")
    table = table_location.rstrip("/")
    if location == join(table, QUARANTINE_DIR):
        return None
    if location == table or location.startswith(table + "/"):
        raise PlanRejected(f"the quarantine root {location} is inside the table {table}; its files would be taken "
                           f"for orphans. Use a directory outside the table, or leave the root out "
                           f"({join(table, QUARANTINE_DIR)})")
    if _store(location) != _store(table):
        raise PlanRejected(f"the quarantine root {location} is on another store than the table {table}; files are "
                           "moved by one rename, which never crosses stores")
    return location


def _store(location: str) -> str:
    scheme, sep, rest = location.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}" if sep else "file"


class QuarantineCost:
    """``quarantine_cost`` as a fold over a plan's actions, added a batch at a time (``add``)."""

    def __init__(self, table_location: str, plan_id: str):
        self.location, self.plan_id, self.files, self.bytes = table_location, plan_id, 0, 0

    def add(self, actions: Iterable) -> None:
        from lakesweep.engine.plan import Verb

        for a in actions:
            if a.verb is Verb.DELETE_FILE:
                self.files += 1
                self.bytes += a.size or 0

    def cost(self) -> dict | None:
        if self.location.startswith("s3://"):
            return None
        return {"store": "hdfs" if self.location.startswith("hdfs://") else "local", "files": self.files,
                "bytes": self.bytes, "renames": self.files, "bytes_copied": 0,
                "directory": join(self.location, QUARANTINE_DIR, self.plan_id)}


def quarantine_cost(plan, *, batches: Iterable[Sequence] | None = None) -> dict | None:
    """What ``apply --quarantine`` of ``plan`` costs on a store that moves files by renaming them (local,
    HDFS): one rename per file it deletes, no byte copied, and the space they take until purged. None for
    a plan on S3, whose costs depend on the bucket. ``batches``: the plan's actions in order, a batch at a
    time (default: ``plan.actions``, whole)."""
    fold = QuarantineCost(plan.table_location, plan.plan_id)
    if not plan.table_location.startswith("s3://"):
        for actions in (plan.actions,) if batches is None else batches:
            fold.add(actions)
    return fold.cost()
