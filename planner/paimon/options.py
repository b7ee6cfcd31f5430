"""Expire options: flags override the table's own options, which override Paimon's defaults.

Defaults are master's (``CoreOptions``): retain-min 10, retain-max Integer.MAX_VALUE, time-retained 1 h,
expire limit 50 (0.9 used 10). Every resolved value remembers where it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.paths import PATH_SHAPING_OPTIONS
from lakesweep.engine.plan import OptionValue
from lakesweep.engine.timeutil import format_time_ms, parse_duration_ms

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1

# Options that describe how the table was written, with Paimon's defaults (CoreOptions). The planner
# reads the table's files through them (which changelog files exist, which manifest lists retained
# changelogs still need, where data and index files live); a different value would plan for a table that
# is not there, e.g. changelog-producer=input on a 'none' table writes changelog-N files pointing at
# manifest lists the same plan deletes. ``--option`` may repeat the table's value, never change it.
TABLE_SHAPE_OPTIONS: Mapping[str, str | None] = {
    "changelog-producer": "none",
    "bucket": "-1",
    "bucket-key": None,
    **{
        key: {"partition.legacy-name": "true", "partition.default-name": "__DEFAULT_PARTITION__",
              "index-file-in-data-file-dir": "false"}.get(key)
        for key in PATH_SHAPING_OPTIONS
    },
}

TIME_RULE_SUCCESSOR = "successor"  # Paimon 2.0+: a snapshot expires when its successor is older than the window
TIME_RULE_OWN = "own"  # Paimon before 2.0: a snapshot expires when it is itself older than the window

def _bool(text: str, key: str) -> bool:
    v = str(text).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise PlanRejected(f"option '{key}' must be true or false, not '{text}'")


def _int(text, key: str) -> int:
    """A Java int option (every count option of expiry is one in Paimon's CoreOptions)."""
    try:
        value = int(str(text).strip())
    except ValueError as e:
        raise PlanRejected(f"option '{key}' must be an integer, not '{text}'") from e
    if not INT_MIN <= value <= INT_MAX:
        raise PlanRejected(f"option '{key}' is {value}, outside the range of a Java int (at most {INT_MAX})")
    return value


def _shape_value(key: str, value: str | None):
    """A table-shape option's value as Paimon compares it: enums and booleans case-insensitively, the
    bucket count as a number."""
    if value is None:
        return None
    v = str(value).strip()
    if key in ("changelog-producer", "partition.legacy-name", "index-file-in-data-file-dir"):
        return v.lower()
    if key == "bucket" and re.fullmatch(r"[+-]?[0-9]+", v):
        return int(v)
    return v


def check_table_shape_overrides(table_options: Mapping[str, str], overrides: Mapping[str, str]) -> None:
    """Refuse an ``--option`` that changes how the table was written (``TABLE_SHAPE_OPTIONS``)."""
    for key in sorted(set(overrides) & set(TABLE_SHAPE_OPTIONS)):
        given = overrides[key]
        written = table_options.get(key)
        default = TABLE_SHAPE_OPTIONS[key]
        if _shape_value(key, given) == _shape_value(key, written if written is not None else default):
            continue
        if written is not None:
            was = f"the table was written with {key}={written}"
        elif default is not None:
            was = f"the table was written with {key}={default} (Paimon's default; the table does not set it)"
        else:
            was = f"the table was written without {key}"
        raise PlanRejected(
            f"--option {key}={given}: {was}; an option that describes how a table was written cannot be "
            "overridden (drop it, or pass the table's own value)"
        )


@dataclass(frozen=True, slots=True)
class ExpireOptions:
    """Resolved options for one expire plan."""

    retain_min: int
    retain_max: int
    time_retained_ms: int
    max_deletes: int
    changelog_retain_min: int
    changelog_retain_max: int
    changelog_time_retained_ms: int
    clean_empty_dirs: bool
    changelog_producer: str
    consumer_changelog_only: bool
    time_rule: str
    skip_unreadable: bool
    sources: Mapping[str, OptionValue]

    @property
    def changelog_decoupled(self) -> bool:
        """``ExpireConfig.isChangelogDecoupled``: changelogs outlive snapshots."""
        return (
            self.changelog_retain_max > self.retain_max
            or self.changelog_retain_min > self.retain_min
            or self.changelog_time_retained_ms > self.time_retained_ms
        )


def resolve_expire_options(
    table_options: Mapping[str, str],
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    time_retained: str | int | None = None,
    max_deletes: int | None = None,
    overrides: Mapping[str, str] | None = None,
    time_rule: str = TIME_RULE_SUCCESSOR,
    skip_unreadable: bool = False,
) -> ExpireOptions:
    """Resolve flags > ``--option`` overrides > table options > Paimon defaults, and validate them."""
    merged_table = dict(table_options)
    overrides = dict(overrides or {})
    sources: dict[str, OptionValue] = {}

    check_table_shape_overrides(merged_table, overrides)

    def pick(key: str, flag, default, parse, fallback_keys=()):
        if flag is not None:
            value, src = parse(flag, key), "flag"
        elif key in overrides:
            value, src = parse(overrides[key], key), "flag"
        else:
            for k in (key, *fallback_keys):
                if k in merged_table:
                    value, src = parse(merged_table[k], k), "table"
                    break
            else:
                value, src = default, "default"
        sources[key] = OptionValue(value, src)
        return value

    def dur(text, key):
        return parse_duration_ms(text)

    rmin = pick("snapshot.num-retained.min", retain_min, 10, _int)
    rmax = pick("snapshot.num-retained.max", retain_max, INT_MAX, _int)
    tret = pick("snapshot.time-retained", time_retained, 3_600_000, dur)
    limit = pick("snapshot.expire.limit", max_deletes, 50, _int)
    # Changelog settings fall back to the *effective* snapshot settings, so that flags alone never make
    # the lifecycle decoupled (Java's procedure never sets them). Decoupling comes from the
    # table's explicit changelog.* options.
    cmin = pick("changelog.num-retained.min", None, rmin, _int)
    cmax = pick("changelog.num-retained.max", None, rmax, _int)
    ctime = pick("changelog.time-retained", None, tret, dur)
    clean = pick(
        "snapshot.clean-empty-directories", None, False, _bool, ("snapshot.expire.clean-empty-directories",)
    )
    producer = pick("changelog-producer", None, "none", lambda v, k: str(v).strip().lower())
    only = pick("consumer.changelog-only", None, False, _bool)
    sources["time-rule"] = OptionValue(time_rule, "flag" if time_rule != TIME_RULE_SUCCESSOR else "default")
    sources["skip-unreadable"] = OptionValue(skip_unreadable, "flag" if skip_unreadable else "default")

    unknown = set(overrides) - set(sources) - set(TABLE_SHAPE_OPTIONS)
    if unknown:
        raise PlanRejected(
            f"--option {sorted(unknown)[0]} is not an expire option; known: "
            + ", ".join(sorted(k for k in sources if "." in k or "-" in k))
        )
    if time_rule not in (TIME_RULE_SUCCESSOR, TIME_RULE_OWN):
        raise PlanRejected(f"time rule '{time_rule}' is unknown: use '{TIME_RULE_SUCCESSOR}' or '{TIME_RULE_OWN}'")
    if rmin < 1:
        raise PlanRejected(f"retain-min is {rmin}: at least 1 snapshot must be retained (Paimon issue #1167)")
    if rmax < rmin:
        raise PlanRejected(f"retain-max ({rmax}) must be at least retain-min ({rmin})")
    if limit < 1:
        raise PlanRejected(f"the expire limit is {limit}: it must be at least 1")
    if tret < 0:
        raise PlanRejected("time-retained must not be negative")
    if cmax < cmin:
        raise PlanRejected(f"changelog.num-retained.max ({cmax}) must be at least changelog.num-retained.min ({cmin})")
    return ExpireOptions(
        retain_min=rmin,
        retain_max=rmax,
        time_retained_ms=tret,
        max_deletes=limit,
        changelog_retain_min=cmin,
        changelog_retain_max=cmax,
        changelog_time_retained_ms=ctime,
        clean_empty_dirs=clean,
        changelog_producer=producer,
        consumer_changelog_only=only,
        time_rule=time_rule,
        skip_unreadable=skip_unreadable,
        sources=sources,
    )


# -- orphan cleaning --------------------------------------------------------------------------------------

ORPHAN_DEFAULT_OLDER_THAN = "1 d"  # LocalOrphanFilesClean: now - 1 day
ORPHAN_FORCE_BELOW_MS = 3_600_000  # a window below 1 h needs --force


@dataclass(frozen=True, slots=True)
class OrphanOptions:
    """Resolved options for one orphan plan. ``older_than`` is a duration back from the plan's now
    (``duration_ms``) or an instant (``at_ms``): exactly one is set. ``inventory``: the inventory files
    to read the listing from (full locations), none to list the store."""

    older_than: str
    duration_ms: int | None
    at_ms: int | None
    force: bool
    sources: Mapping[str, OptionValue]
    inventory: tuple[str, ...] = ()
    empty_dirs: bool = False  # also remove the bucket and partition directories the deletes leave empty
    # lists the table elsewhere (on Spark): returns a plain inventory file of the listing and its source
    lister: Callable[[Any], tuple[str, Mapping[str, Any]]] | None = None
    # with ``lister``: ``used_reader(listing file)`` reads the used set elsewhere (on Spark), as far as that
    # listing goes (``engine.paimon.orphans.read_used_names``' ``reader``)
    used_reader: Callable[[str], Callable[[Any], Any]] | None = None

    def threshold_ms(self, now_ms: int) -> int:
        """Files modified at or after this instant are kept; refuses a threshold at or after ``now_ms``,
        and one less than an hour back without ``force``."""
        threshold = now_ms - self.duration_ms if self.duration_ms is not None else self.at_ms
        if threshold >= now_ms:
            raise PlanRejected(
                f"--older-than {self.older_than} is not before now ({format_time_ms(now_ms)}): files being written "
                "now, not yet committed, would look unused. Give a time before now or a duration such as '1 d'")
        if now_ms - threshold < ORPHAN_FORCE_BELOW_MS and not self.force:
            raise PlanRejected(
                f"--older-than {self.older_than} keeps only files younger than {(now_ms - threshold) // 60_000} "
                "min: a writer that takes longer between writing a file and committing it would lose the file. "
                "Use at least 1 h, or add --force if no writer is running")
        return threshold


_UNIT_DURATION = re.compile(r"^\s*\d+\s*[a-zµ]+\s*$", re.IGNORECASE)


def resolve_orphan_options(
    table_options: Mapping[str, str],
    *,
    overrides: Mapping[str, str] | None = None,
    older_than: str | None = None,
    force: bool = False,
    inventory: Sequence[str] | None = None,
    empty_dirs: bool = False,
    spark: str | None = None,
    lister: Callable[[Any], tuple[str, Mapping[str, Any]]] | None = None,
    used_reader: Callable[[str], Callable[[Any], Any]] | None = None,
) -> OrphanOptions:
    """``older_than``: a Paimon duration with a unit (``1 d``, ``36 h``), measured back from the plan's
    now; or an instant (ISO-8601, ``2026-11-01 12:00:00`` read as UTC, or epoch milliseconds). Default
    ``1 d``. Paimon has no table option for it, so the table's options play no part. ``inventory``:
    inventory files (``engine.listing``) to read the listing from instead of listing the store.
    ``empty_dirs``: also plan the removal of the directories the plan's deletes leave empty. ``lister``:
    lists the table instead of the store walk (``--spark``: ``spark`` is its master), writing a plain
    inventory file; not with ``inventory``. ``used_reader``: reads the used set against that file
    (``OrphanOptions.used_reader``)."""
    from lakesweep.engine.fileio import normalize_location
    from lakesweep.engine.timeutil import parse_time_ms

    if overrides:
        raise PlanRejected(f"--option {sorted(overrides)[0]} is not an orphan-cleaning option; orphan "
                           "cleaning has none (use --older-than and --force)")
    text = ORPHAN_DEFAULT_OLDER_THAN if older_than is None else str(older_than).strip()
    if _UNIT_DURATION.match(text):
        duration, at = parse_duration_ms(text), None
    else:
        duration, at = None, parse_time_ms(text)
    files = tuple(normalize_location(str(f)) for f in inventory or ())
    if files and lister is not None:
        raise PlanRejected("--inventory and --spark both say where the listing comes from: give one of them")
    sources = {"older-than": OptionValue(text, "default" if older_than is None else "flag"),
               "force": OptionValue(bool(force), "flag" if force else "default"),
               "inventory": OptionValue(list(files) if files else None, "flag" if files else "default"),
               "empty-dirs": OptionValue(bool(empty_dirs), "flag" if empty_dirs else "default"),
               "spark": OptionValue(spark, "flag" if spark else "default")}
    return OrphanOptions(older_than=text, duration_ms=duration, at_ms=at, force=bool(force), sources=sources,
                         inventory=files, empty_dirs=bool(empty_dirs), lister=lister,
                         used_reader=used_reader if lister is not None else None)


# -- partition expiry ------------------------------------------------------------------------------------

STRATEGY_VALUES_TIME = "values-time"
STRATEGY_UPDATE_TIME = "update-time"
PARTITION_DEFAULT_MAX_EXPIRES = 100  # partition.expiration-max-num (master; 0.9 had no limit)


@dataclass(frozen=True, slots=True)
class PartitionOptions:
    """Resolved options for one partition-expiry plan. ``time_zone``: the zone whose local time Paimon's
    JVM would compare partition times with (``LocalDateTime.now()``)."""

    expiration_ms: int
    strategy: str
    timestamp_formatter: str | None
    timestamp_pattern: str | None
    max_expires: int
    time_zone: str
    sources: Mapping[str, OptionValue]

    def extractor(self):
        """The partition time extractor of ``values-time`` (Paimon's ``PartitionTimeExtractor``)."""
        from lakesweep.engine.paimon.partition_time import PartitionTimeExtractor

        return PartitionTimeExtractor(pattern=self.timestamp_pattern, formatter=self.timestamp_formatter)


def resolve_partition_options(
    table_options: Mapping[str, str],
    *,
    overrides: Mapping[str, str] | None = None,
    expiration_time: str | None = None,
    strategy: str | None = None,
    timestamp_formatter: str | None = None,
    timestamp_pattern: str | None = None,
    max_expires: int | None = None,
    time_zone: str | None = None,
    system_zone: str = "UTC",
) -> PartitionOptions:
    """Flags > ``--option`` overrides > the table's ``partition.*`` options > Paimon's defaults. The
    expiration time has no default: without it Paimon does not expire partitions, and neither does a plan.
    ``time_zone`` defaults to ``system_zone``, the zone of the machine that plans (a JVM's default)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    overrides = dict(overrides or {})
    known = {"partition.expiration-time", "partition.expiration-strategy", "partition.timestamp-formatter",
             "partition.timestamp-pattern", "partition.expiration-max-num"}
    unknown = set(overrides) - known
    if unknown:
        raise PlanRejected(f"--option {sorted(unknown)[0]} is not a partition-expiry option; known: "
                           + ", ".join(sorted(known)))
    sources: dict[str, OptionValue] = {}

    def pick(key: str, flag, default, parse):
        if flag is not None:
            value, src = parse(flag, key), "flag"
        elif key in overrides:
            value, src = parse(overrides[key], key), "flag"
        elif key in table_options:
            value, src = parse(table_options[key], key), "table"
        else:
            value, src = default, "default"
        sources[key] = OptionValue(value, src)
        return value

    def text(v, key):
        v = str(v)
        return v if v.strip() else None

    expiration = pick("partition.expiration-time", expiration_time, None, lambda v, k: parse_duration_ms(str(v)))
    if expiration is None:
        raise PlanRejected("no expiration time: pass --expiration-time (e.g. '7 d') or set the table option "
                           "partition.expiration-time")
    if expiration <= 0:
        raise PlanRejected(f"the expiration time must be positive, not {sources['partition.expiration-time'].value}")
    chosen = pick("partition.expiration-strategy", strategy, STRATEGY_VALUES_TIME, lambda v, k: str(v).strip().lower())
    if chosen not in (STRATEGY_VALUES_TIME, STRATEGY_UPDATE_TIME):
        raise PlanRejected(f"expiration strategy '{chosen}' is unknown: use '{STRATEGY_VALUES_TIME}' or "
                           f"'{STRATEGY_UPDATE_TIME}' (Paimon's custom strategies are not supported)")
    formatter = pick("partition.timestamp-formatter", timestamp_formatter, None, text)
    pattern = pick("partition.timestamp-pattern", timestamp_pattern, None, text)
    limit = pick("partition.expiration-max-num", max_expires, PARTITION_DEFAULT_MAX_EXPIRES, _int)
    if limit < 1:
        raise PlanRejected(f"--max-expires is {limit}: it must be at least 1")
    zone = time_zone if time_zone is not None else system_zone
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise PlanRejected(f"time zone '{zone}' is unknown: give an IANA name such as 'Europe/Berlin' or 'UTC'") from e
    sources["time-zone"] = OptionValue(zone, "flag" if time_zone is not None else "system")
    options = PartitionOptions(expiration_ms=expiration, strategy=chosen, timestamp_formatter=formatter,
                               timestamp_pattern=pattern, max_expires=limit, time_zone=zone, sources=sources)
    if chosen == STRATEGY_VALUES_TIME:
        options.extractor()  # an invalid formatter is refused now, not after reading the table
    return options


# -- consumer expiry -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """Resolved options for one consumer-expiry plan."""

    expiration_ms: int
    sources: Mapping[str, OptionValue]


def resolve_consumer_options(table_options: Mapping[str, str], *, overrides: Mapping[str, str] | None = None,
                             expiration_time: str | None = None) -> ConsumerOptions:
    """``--expiration-time`` > ``--option consumer.expiration-time`` > the table's option. There is no
    default: without it Paimon expires no consumer, and neither does a plan."""
    overrides = dict(overrides or {})
    unknown = set(overrides) - {"consumer.expiration-time"}
    if unknown:
        raise PlanRejected(f"--option {sorted(unknown)[0]} is not a consumer-expiry option; known: "
                           "consumer.expiration-time")
    key = "consumer.expiration-time"
    if expiration_time is not None:
        text, src = str(expiration_time), "flag"
    elif key in overrides:
        text, src = overrides[key], "flag"
    elif key in table_options:
        text, src = table_options[key], "table"
    else:
        raise PlanRejected("no expiration time: pass --expiration-time (e.g. '7 d') or set the table option "
                           "consumer.expiration-time")
    ms = parse_duration_ms(text)
    if ms <= 0:
        raise PlanRejected(f"the expiration time must be positive, not '{text}'")
    return ConsumerOptions(expiration_ms=ms, sources={key: OptionValue(ms, src)})


# -- tag expiry ------------------------------------------------------------------------------------------

TAG_PERIODS = ("daily", "hourly", "two-hours")
TAG_PERIOD_FORMATTERS = ("with_dashes", "without_dashes")


@dataclass(frozen=True, slots=True)
class TagOptions:
    """Resolved options for one tag-expiry plan. ``older_than`` is a duration back from now
    (``duration_ms``) or an instant (``at_ms``), or None; ``period``/``period_formatter`` say which tag
    names Paimon creates automatically (what ``num_retained_max`` counts)."""

    names: tuple[str, ...]
    older_than: str | None
    duration_ms: int | None
    at_ms: int | None
    num_retained_max: int | None
    period: str
    period_formatter: str
    time_zone: str
    sources: Mapping[str, OptionValue]

    def older_than_ms(self, now_ms: int) -> int:
        return now_ms - self.duration_ms if self.duration_ms is not None else self.at_ms


def resolve_tag_options(table_options: Mapping[str, str], *, overrides: Mapping[str, str] | None = None,
                        names: Sequence[str] | None = None, older_than: str | None = None,
                        num_retained_max: int | None = None, time_zone: str | None = None,
                        system_zone: str = "UTC") -> TagOptions:
    """``names``: tags to delete by name. ``older_than``: also tags created before this (a duration back
    from now, or a time). ``num_retained_max`` (table: ``tag.num-retained-max``): keep at most this many
    snapshots' worth of automatically created tags; only with ``tag.automatic-creation`` set, as in Paimon.
    Each tag's own time retained always applies."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from lakesweep.engine.timeutil import parse_time_ms

    overrides = dict(overrides or {})
    known = {"tag.num-retained-max"}
    unknown = set(overrides) - known
    if unknown:
        raise PlanRejected(f"--option {sorted(unknown)[0]} is not a tag-expiry option; known: tag.num-retained-max")
    merged = {**table_options, **overrides}
    sources: dict[str, OptionValue] = {}
    auto = str(merged.get("tag.automatic-creation", "none")).strip().lower()
    if num_retained_max is not None:
        limit, src = _int(num_retained_max, "tag.num-retained-max"), "flag"
    elif "tag.num-retained-max" in merged:
        limit, src = _int(merged["tag.num-retained-max"], "tag.num-retained-max"), \
            "flag" if "tag.num-retained-max" in overrides else "table"
    else:
        limit, src = None, "default"
    if limit is not None and auto == "none":
        if src == "table":
            limit, src = None, "ignored: tag.automatic-creation is none"
        else:
            raise PlanRejected("--num-retained-max counts the tags Paimon creates automatically, and this table "
                               "creates none (tag.automatic-creation is none); name tags with --tag or use "
                               "--older-than")
    if limit is not None and limit < 0:
        raise PlanRejected(f"--num-retained-max is {limit}: it must not be negative")
    sources["tag.num-retained-max"] = OptionValue(limit, src)
    period = str(merged.get("tag.creation-period", "daily")).strip().lower()
    formatter = str(merged.get("tag.period-formatter", "with_dashes")).strip().lower()
    if limit is not None and (period not in TAG_PERIODS or formatter not in TAG_PERIOD_FORMATTERS):
        raise PlanRejected(f"tag.creation-period '{period}' with tag.period-formatter '{formatter}' is not one "
                           f"lakesweep knows the tag names of ({', '.join(TAG_PERIODS)}; "
                           f"{', '.join(TAG_PERIOD_FORMATTERS)})")
    duration = at = None
    text = None
    if older_than is not None:
        text = str(older_than).strip()
        if _UNIT_DURATION.match(text):
            duration = parse_duration_ms(text)
        else:
            at = parse_time_ms(text)
    sources["older-than"] = OptionValue(text, "flag" if text else "default")
    tag_names = tuple(dict.fromkeys(str(n) for n in names or ()))
    sources["tags"] = OptionValue(list(tag_names) or None, "flag" if tag_names else "default")
    zone = time_zone if time_zone is not None else system_zone
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise PlanRejected(f"time zone '{zone}' is unknown: give an IANA name such as 'Europe/Berlin' or 'UTC'") from e
    sources["time-zone"] = OptionValue(zone, "flag" if time_zone is not None else "system")
    return TagOptions(names=tag_names, older_than=text, duration_ms=duration, at_ms=at, num_retained_max=limit,
                      period=period, period_formatter=formatter, time_zone=zone, sources=sources)
