"""Partition expiry planning with Apache Paimon's semantics (``NormalPartitionExpire``).

``plan_partitions(table, now_ms=..., options=...)`` reads the live files of the latest snapshot, groups them
by partition and expires a partition when the cut-off (``now - expiration-time`` as a local date-time in the
plan's time zone) is strictly after its time: by ``values-time`` what its values say, by ``update-time`` the
newest ``_CREATION_TIME`` of its entries. The first ``max-expires`` by their comma-joined values are dropped:
every live data file as one ``drop-data-file`` action of a single commit phase. Nothing is deleted. Reads no
clock. The rules: docs/design/paimon.md#partition-expiry.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import PARTITION_PHASES, PartitionKind
from lakesweep.engine.paimon.model import FileKind
from lakesweep.engine.paimon.partition import decode_binary_row, partition_path, partition_spec
from lakesweep.engine.paimon.requirements import partition_files_digest, partition_requirements
from lakesweep.engine.paimon.scopes import PartitionScope
from lakesweep.engine.paimon.state import table_identity
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions, summarize
from lakesweep.planner.paimon.options import STRATEGY_VALUES_TIME, PartitionOptions
from lakesweep.engine.units import human_bytes
from lakesweep.planner.paimon.options import resolve_partition_options
from lakesweep.planner.plan_kind import (Maintained, PlanCommand, PlanDescription, PlanFlag, PlanKind,
                                          refuse_future_now)

_EPOCH = _dt.datetime(1970, 1, 1)


def local_time(now_ms: int, zone: str) -> _dt.datetime:
    """``now_ms`` as the naive local date-time a JVM in ``zone`` reads from ``LocalDateTime.now()``."""
    from zoneinfo import ZoneInfo

    try:
        aware = _dt.datetime.fromtimestamp(now_ms / 1000, tz=_dt.timezone.utc).astimezone(ZoneInfo(zone))
    except (OverflowError, ValueError, OSError) as e:
        raise PlanRejected(f"the time {now_ms} (epoch ms) is outside the years 1 to 9999") from e
    return aware.replace(tzinfo=None)


def _duration(ms: int) -> str:
    """``ms`` in the largest unit that holds it exactly, as a duration is written (``7 d``, ``36 h``)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def naive_millis(ms: int) -> _dt.datetime:
    """A ``_CREATION_TIME`` as the local date-time its writer stored (Paimon stores the local time as if
    it were UTC epoch milliseconds)."""
    return _EPOCH + _dt.timedelta(milliseconds=ms)


class _Partition:
    __slots__ = ("row", "values", "files", "count", "created")

    def __init__(self, row: bytes, values: tuple):
        self.row = row
        self.values = values
        self.files: dict[tuple, Any] = {}  # identifier -> live ADD entry
        self.count = 0  # ADD entries minus DELETE entries: Paimon's PartitionEntry.fileCount
        self.created: int | None = None  # newest _CREATION_TIME of its ADD and DELETE entries


def _partitions(table: PaimonTable, snapshot) -> dict[tuple, _Partition]:
    types = table.schema.partition_types
    parts: dict[tuple, _Partition] = {}
    decoded: dict[bytes, tuple] = {}
    for e in table.entries(table.data_manifests(snapshot)):
        values = decoded.get(e.partition)
        if values is None:
            values = decoded[e.partition] = tuple(decode_binary_row(e.partition, types))
        p = parts.get(values)
        if p is None:
            p = parts[values] = _Partition(e.partition, values)
        ident = e.identifier
        if e.kind == FileKind.ADD:
            p.count += 1
            p.files[ident] = e
        else:
            p.count -= 1
            p.files.pop(ident, None)
        ct = e.file.creation_time_ms
        if ct is not None and (p.created is None or ct > p.created):
            p.created = ct
    return {v: p for v, p in parts.items() if p.count > 0 and p.files}


def plan_partitions(table: PaimonTable, *, now_ms: int, options: PartitionOptions) -> CleanupPlan:
    """Plan the drop of ``table``'s expired partitions as of ``now_ms`` (see the module docstring)."""
    paths = table.paths
    keys, types = paths.partition_keys, paths.partition_types
    now = local_time(now_ms, options.time_zone)
    try:
        cutoff = now - _dt.timedelta(milliseconds=options.expiration_ms)
    except OverflowError as e:  # Java's LocalDateTime reaches further back; a datetime stops at the year 1
        raise PlanRejected(f"now {now.isoformat(sep=' ', timespec='seconds')} ({options.time_zone}) minus the "
                           f"expiration time {_duration(options.expiration_ms)} is before the year 1, the earliest "
                           "time lakesweep handles: give a shorter expiration time or a later --now") from e
    _, latest = table.earliest_latest()
    warnings: list[str] = []
    expired: list[tuple[str, _Partition, _dt.datetime, str]] = []
    unreadable: list[str] = []  # 'name (why)' of each partition whose values are not a time
    considered = 0
    if not keys:
        warnings.append("the table has no partition keys: there is nothing to expire")
    elif latest is not None:
        extractor = options.extractor() if options.strategy == STRATEGY_VALUES_TIME else None
        for values, p in _partitions(table, table.snapshot(latest)).items():
            considered += 1
            spec = partition_spec(values, keys, types, legacy=paths.legacy, default_name=paths.default_name)
            name = partition_path(spec).rstrip("/")
            when = _partition_time(p, values, keys, types, extractor, name, warnings, unreadable)
            if when is not None and cutoff > when:
                expired.append((",".join(v for _, v in spec), p, when, name))
        if unreadable and len(unreadable) == considered:
            raise PlanRejected(_none_readable(unreadable, options))
        if unreadable:
            warnings.append(_unreadable_warning(unreadable))
    expired.sort(key=lambda x: x[0])
    limited = max(0, len(expired) - options.max_expires)
    expired = expired[:options.max_expires]

    actions: list[Action] = []
    listed, digests, first = [], {}, {}
    what = "its values say" if options.strategy == STRATEGY_VALUES_TIME else "its newest file was written"
    for _, p, when, name in expired:
        files = sorted(p.files.values(), key=lambda e: (e.bucket, e.file.file_name))
        rels = []
        for e in files:
            rel = paths.relative(paths.data_file(e.partition, e.bucket, e.file))
            rels.append(rel)
            actions.append(Action(PartitionKind.DROP_DATA_FILE, rel, snapshot_id=latest, partition=name,
                                  bucket=e.bucket, size=e.file.file_size))
        row = p.row.hex()
        digests[row] = partition_files_digest((e.bucket, e.file.file_name) for e in files)
        first[row] = rels[0]
        listed.append({"partition": name, "spec": dict(partition_spec(
            p.values, keys, types, legacy=paths.legacy, default_name=paths.default_name)), "row": row,
            "files": len(files), "bytes": sum(e.file.file_size for e in files), "time": when.isoformat(sep=" ", timespec="seconds"),
            "reason": f"{what} {when.isoformat(sep=' ', timespec='seconds')}, before the cut-off "
                      f"{cutoff.isoformat(sep=' ', timespec='seconds')}"})
    actions = canonical_actions(actions)
    stats: dict[str, Any] = {
        "summary": summarize(actions), "warnings": warnings, "partitions_considered": considered,
        "partitions_expired": len(listed), "partitions_left_by_max": limited,
    }
    if limited:
        warnings.append(f"{limited} more expired partition(s) are left for a later plan (--max-expires "
                        f"{options.max_expires})")
    scope = PartitionScope(snapshot=latest, strategy=options.strategy,
                           cutoff=cutoff.isoformat(sep=" ", timespec="seconds"), time_zone=options.time_zone,
                           partitions=listed)
    return CleanupPlan(
        kind="partitions",
        format="paimon",
        table_location=table.location,
        table_identity=table_identity(table),
        branch=table.branch,
        now_ms=now_ms,
        options=dict(options.sources),
        scope=scope,
        requirements=partition_requirements(identity=table_identity(table), location=table.location,
                                            now_ms=now_ms, partitions=digests, first=first),
        phases=PARTITION_PHASES,
        actions=actions,
        stats=stats,
    )


def _partition_time(p: _Partition, values: tuple, keys, types, extractor, name: str,
                    warnings: list[str], unreadable: list[str]) -> _dt.datetime | None:
    """The time Paimon judges a partition by; None (never expired, with a warning) when there is none."""
    if extractor is None:  # update-time
        if p.created is None:
            warnings.append(f"partition {name} has no file creation time: it is never expired by update-time")
            return None
        return naive_millis(p.created)
    from lakesweep.engine.paimon.partition_time import UnparseablePartition

    try:
        return extractor.extract(list(keys), values, types)
    except UnparseablePartition as e:
        unreadable.append(f"{name} ({e})")
        return None


_EXAMPLES = 3


def _unreadable_warning(unreadable: list[str]) -> str:
    """One warning for every partition whose values are not a time (Paimon logs one line each)."""
    if len(unreadable) == 1:
        name, _, why = unreadable[0].partition(" ")
        return f"partition {name} is skipped, never expired: its value cannot be read as a time {why}"
    more = len(unreadable) - _EXAMPLES
    return (f"{len(unreadable)} partitions are skipped, never expired: their values cannot be read as a time: "
            + ", ".join(unreadable[:_EXAMPLES]) + (f" and {more} more" if more > 0 else ""))


def _none_readable(unreadable: list[str], options: PartitionOptions) -> str:
    """A setting that reads no partition as a time is a misconfiguration, not 'nothing to expire'."""
    how = (f"timestamp formatter '{options.timestamp_formatter}'" if options.timestamp_formatter
           else "Paimon's default formatter (yyyy-M-d, optionally with a time of day)")
    if options.timestamp_pattern:
        how += f" and timestamp pattern '{options.timestamp_pattern}'"
    return (f"no partition's value can be read as a time with the {how}: "
            f"{'all ' if len(unreadable) > 1 else ''}{len(unreadable)} partition(s) would be skipped, e.g. "
            f"{unreadable[0]}; set --timestamp-formatter / --timestamp-pattern (partition.timestamp-formatter, "
            "partition.timestamp-pattern) to match the partition values, or plan with --strategy update-time "
            "(partition.expiration-strategy), which goes by when each partition was last written (Paimon reads "
            "a DATE partition as its day count since 1970, such as 19358, not as a date)")


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

def _plan(table, *, now_ms: int, options, read=None) -> CleanupPlan:
    refuse_future_now(table, now_ms, "partition expiry")  # apply would refuse the plan: say so now
    return plan_partitions(table, now_ms=now_ms, options=options)


PARTITIONS_SHOWN = 20  # partitions listed one by one in a plan's description; the JSON has them all


def describe_partitions(plan: CleanupPlan) -> PlanDescription:
    """A partition drop: which partitions, why each expired, and that it is a commit, not a delete."""
    scope = plan.scope
    parts = scope.partitions
    strategy, cutoff = scope.strategy, scope.cutoff
    judged = (f"{strategy}, cut-off {cutoff} ({scope.time_zone})")
    if not parts:
        return PlanDescription(nothing_to_do=True, nothing_label="No expired partitions",
                               scope=f"no partition of snapshot {scope.snapshot} expired by {judged}.",
                               document={"partitions": [], "cutoff": cutoff, "strategy": strategy,
                                         "snapshot": scope.snapshot})
    files = sum(p.get("files", 0) for p in parts)
    size = sum(p.get("bytes", 0) for p in parts)
    lines = [f"{p['partition']}: {p['files']} files, {human_bytes(p['bytes'])}; {p['reason']}"
             for p in parts[:PARTITIONS_SHOWN]]
    if len(parts) > PARTITIONS_SHOWN:
        lines.append(f"... and {len(parts) - PARTITIONS_SHOWN} more partitions (all in --output json)")
    notes = (*lines,
             "apply commits one OVERWRITE snapshot marking these files DELETE; nothing is deleted now: snapshot "
             "expiry removes the files once no retained snapshot, tag or branch holds them",
             "apply refuses the plan if any of these partitions changed since planning")
    return PlanDescription(
        nothing_to_do=False,
        scope=(f"drops {len(parts)} partition(s) of snapshot {scope.snapshot} expired by {judged}: "
               f"{files} live files, {human_bytes(size)}"),
        notes=notes,
        document={"partitions": parts, "cutoff": cutoff, "strategy": strategy, "snapshot": scope.snapshot,
                  "time_zone": scope.time_zone})


def _flags(options, th) -> dict | None:
    return {} if options.get("partition.expiration-time") else None


def _applied(plan: CleanupPlan, counts) -> str:
    return f"dropped {len(plan.scope.partitions)} partition(s)"


COMMAND = PlanCommand(
    short_help="Drop expired partitions (Paimon).",
    help="Plan the drop of expired partitions as Apache Paimon's expire_partitions would, and save the plan.\n\n"
         "A partition expires when now minus --expiration-time, as a local time, is after the partition's time. "
         "A value that cannot be read as a time is skipped, never dropped (the plan's warnings list it). The plan "
         "lists every live file of each partition to drop. Apply drops them as Paimon does, by committing one "
         "OVERWRITE snapshot that marks the files DELETE: nothing is deleted, time travel to older snapshots "
         "still sees them, and snapshot expiry removes them later.\n\n"
         "Nothing changes now. Review the plan with 'lakesweep show PLAN'.",
    flags=(PlanFlag("expiration_time", str, "Drop partitions older than this, e.g. '7 d', '36 h' (table: "
                    "partition.expiration-time; required when the table does not set it)."),
           PlanFlag("strategy", str, "'values-time': a partition's time is what its values say; 'update-time': "
                    "when its newest file was written (partition.expiration-strategy, default values-time)."),
           PlanFlag("timestamp_formatter", str, "How to read a partition's time, a Java DateTimeFormatter pattern "
                    "such as 'yyyyMMdd' (partition.timestamp-formatter; default: Paimon's lenient "
                    "'yyyy-M-d[ H:m:s]')."),
           PlanFlag("timestamp_pattern", str, "How partition values make a time text, e.g. '$dt $hour:00:00' "
                    "(partition.timestamp-pattern; default: the first partition value)."),
           PlanFlag("max_expires", int, "Drop at most this many partitions (partition.expiration-max-num, "
                    "default 100)."),
           PlanFlag("time_zone", str, "The zone whose local time partition times are compared with, as Paimon's "
                    "JVM would (default: this machine's).")),
    system_zone=True)

KIND = PlanKind("partitions", resolve_options=resolve_partition_options, plan=_plan, describe=describe_partitions,
                format="paimon", command=COMMAND,
                maintain=Maintained(order=50, flags=_flags, applied=_applied,
                                    not_configured="partition.expiration-time is not set"))
