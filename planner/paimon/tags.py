"""Tag expiry planning with Apache Paimon's semantics: which tags go, and what goes with them.

Which: those named (``--tag``, ``delete_tag``); those whose own time retained has passed (``TagTimeExpire``);
those created before ``--older-than`` (``TagTimeExpire#withOlderThanTime``); with ``tag.num-retained-max``,
the oldest automatically created tags beyond that many (``TagAutoCreation``). Tags a branch was created from
are kept, with a note (#6272). What goes with them (``TagManager#deleteTag``, ``TagDeletion``): the tag
files, and the files of their snapshots that ``engine.paimon.tag_expiry`` frees and nothing left holds.
Changelog files are never touched. Reads no clock. The rules: docs/design/paimon.md#tag-expiry.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from lakesweep.engine.errors import MetadataNotFound, PlanRejected, PlannerInvariantViolated
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.kinds import TAG_PHASES, TagKind
from lakesweep.engine.paimon.plan_reads import TagFiles, read_tag_files
from lakesweep.engine.paimon.reachability import holder_files, holders
from lakesweep.engine.paimon.requirements import tag_requirements
from lakesweep.engine.paimon.scopes import TagScope
from lakesweep.engine.paimon.state import table_identity
from lakesweep.engine.paimon.tag_expiry import branch_origins, tag_snapshot_files
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions, summarize
from lakesweep.planner.paimon.options import TagOptions
from lakesweep.planner.paimon.partitions import local_time
from lakesweep.planner.paimon.options import resolve_tag_options
from lakesweep.planner.plan_kind import PlanCommand, PlanDescription, PlanFlag, PlanKind, refuse_future_now


def tag_create_time(create: tuple[int, ...] | None) -> _dt.datetime | None:
    """Jackson's LocalDateTime array ``[y, m, d, h, mi, s, nanos]`` as a naive date-time."""
    if not create:
        return None
    y, mo, d, *rest = create
    h, mi, s, ns = (list(rest) + [0, 0, 0, 0])[:4]
    return _dt.datetime(y, mo, d, h, mi, s, ns // 1000)


def tag_time_retained(text: str | None) -> _dt.timedelta | None:
    """Jackson's Duration (decimal seconds, ``3600.000000000``) as a timedelta."""
    if text is None:
        return None
    try:
        seconds, _, fraction = str(text).partition(".")
        return _dt.timedelta(seconds=int(seconds), microseconds=int((fraction + "000000")[:6]) if fraction else 0)
    except ValueError as e:
        raise PlanRejected(f"a tag's tagTimeRetained {text!r} is not a number of seconds") from e


_AUTO_DAY = {"with_dashes": re.compile(r"-?\d{1,10}-\d{2}-\d{2}"), "without_dashes": re.compile(r"-?\d{5,14}")}
_AUTO_HOUR = {"with_dashes": re.compile(r"-?\d{1,10}-\d{2}-\d{2} \d{2}"),
              "without_dashes": re.compile(r"-?\d{5,14} \d{2}")}


def is_auto_tag(name: str, period: str, formatter: str) -> bool:
    """``TagPeriodHandler#isAutoTag``: the name parses with the period's formatter (daily reads the part
    before the first space)."""
    if period == "daily":
        return bool(_AUTO_DAY[formatter].fullmatch(name.split(" ")[0]))
    if period == "hourly":
        return bool(_AUTO_HOUR[formatter].fullmatch(name))
    return bool(_AUTO_HOUR["with_dashes"].fullmatch(name))  # two-hours


def _select(table: PaimonTable, now_ms: int, options: TagOptions, notes: list[str], read: TagFiles) -> dict[str, str]:
    """The tags to expire, each with why."""
    tags = read.tags
    by_name = {t.name: t for t in tags}
    unknown = [n for n in options.names if n not in by_name]
    if unknown:
        raise PlanRejected(f"branch '{table.branch}' has no tag named {unknown[0]!r}; nothing was planned")
    zone = options.time_zone
    now_local = None  # read only when a tag has a time retained (a --now far out of range is refused then)
    older = local_time(options.older_than_ms(now_ms), zone) if options.older_than else None
    chosen: dict[str, str] = {}
    for t in tags:
        if t.name in options.names:
            chosen[t.name] = "named"
            continue
        created = tag_create_time(t.create_time)
        retained = tag_time_retained(t.time_retained)
        by_file = False
        if created is None or retained is None:
            # TagTimeExpire (master): without both fields a tag is judged, under --older-than only, by its
            # file's modification time, even when it records a creation time.
            if older is None:
                continue
            if t.name not in read.modified:
                continue  # deleted since it was listed: as Java, skip it
            mtime_ms = read.modified[t.name]
            if mtime_ms is None:
                notes.append(f"tag '{t.name}' is kept: its file has no modification time to judge --older-than by")
                continue
            created, by_file = local_time(mtime_ms, zone), True
        when = f"created {created.isoformat(sep=' ')}" + (" (its file's modification time)" if by_file else "")
        if retained is not None:
            now_local = now_local or local_time(now_ms, zone)
            if now_local > created + retained:
                chosen[t.name] = f"{when}, retained {retained}: expired"
                continue
        if older is not None and older > created:
            chosen[t.name] = f"{when}, before --older-than {older.isoformat(sep=' ')}"
    if options.num_retained_max is not None:
        _beyond_num_retained_max(tags, options, chosen)
    for name, branch in sorted(branch_origins(table).items()):
        if name in chosen:
            del chosen[name]
            notes.append(f"tag '{name}' is kept: branch '{branch}' was created from it")
    return chosen


def _beyond_num_retained_max(tags, options: TagOptions, chosen: dict[str, str]) -> None:
    """``TagAutoCreation``: the automatically created tags of the oldest snapshots beyond
    ``tag.num-retained-max`` snapshots' worth. A snapshot with two of them is refused, as Java refuses it
    (``checkAndGetOneAutoTag``)."""
    auto: dict[int, list[str]] = {}
    for t in tags:
        if is_auto_tag(t.name, options.period, options.period_formatter):
            auto.setdefault(t.snapshot.id, []).append(t.name)
    for sid in sorted(auto)[:max(0, len(auto) - options.num_retained_max)]:
        if len(auto[sid]) > 1:
            raise PlanRejected(
                f"snapshot {sid} has more than one automatically created tag ({', '.join(auto[sid])}), which "
                "Paimon's TagAutoCreation refuses too; delete the extra ones with --tag first")
        chosen.setdefault(auto[sid][0], f"beyond tag.num-retained-max {options.num_retained_max} "
                                        "automatically created tags")


def plan_tags(table: PaimonTable, *, now_ms: int, options: TagOptions, read: TagFiles) -> CleanupPlan:
    """Plan the expiry of ``table``'s (branch's) tags as of ``now_ms`` (see the module docstring), from its
    tags and their files as ``read`` (``read_tags``) holds them."""
    notes: list[str] = []
    chosen = _select(table, now_ms, options, notes, read)
    tags = {t.name: t for t in read.tags}
    digests = {n: _digest(table, read, n) for n in sorted(chosen)}
    by_snapshot: dict[int, list[str]] = {}
    for t in tags.values():
        by_snapshot.setdefault(t.snapshot.id, []).append(t.name)
    earliest, latest = table.earliest_latest()
    gone: list[int] = []
    for sid, names in sorted(by_snapshot.items()):
        if not all(n in chosen for n in names):
            continue  # another tag keeps the snapshot's files (deleteTag stops there too)
        if sid in read.snapshots:
            continue
        if earliest is None or sid < earliest:  # engine.paimon.tag_expiry.frees_files, from what was read
            gone.append(sid)
        else:
            notes.append(f"snapshot {sid} of tag(s) {', '.join(sorted(names))} is missing but not older than the "
                         f"earliest snapshot {earliest}: the snapshots around it may hold its files, so only the "
                         "tag file goes")
    actions: list[Action] = [Action(TagKind.TAG_FILE, _relative(table, join(table.tag_dir, f"tag-{n}")))
                             for n in sorted(chosen)]
    candidates: dict[str, tuple[TagKind, int | None]] = {}
    for sid in gone:
        candidates.update(tag_snapshot_files(table, tags[by_snapshot[sid][0]].snapshot))
    if candidates:
        held: set[str] = set()
        for h in holders(table, end=earliest, without_tags=frozenset(chosen)):
            held |= holder_files(h).keys()
        for path, (kind, size) in sorted(candidates.items()):
            if path not in held:
                actions.append(Action(kind, table.paths.relative(path), size=size))
        if any(a.kind is not TagKind.TAG_FILE and table.paths.absolute(a.path) in held for a in actions):
            raise PlannerInvariantViolated("a planned file is held by the table")  # the subtraction above failed
    actions = canonical_actions(actions)
    listed: list[dict[str, Any]] = [{"tag": n, "snapshot": tags[n].snapshot.id, "reason": chosen[n],
                                     "files_freed": tags[n].snapshot.id in gone} for n in sorted(chosen)]
    return CleanupPlan(
        kind="tags",
        format="paimon",
        table_location=table.location,
        table_identity=table_identity(table),
        branch=table.branch,
        now_ms=now_ms,
        options=dict(options.sources),
        scope=TagScope(tags=listed, snapshots_gone=gone, earliest=earliest, latest=latest),
        requirements=tag_requirements(identity=table_identity(table), location=table.location, branch=table.branch,
                                      now_ms=now_ms, tags=digests, gone=gone),
        phases=TAG_PHASES,
        actions=actions,
        stats={"summary": summarize(actions), "warnings": [], "notes": notes, "tags_kept": len(tags) - len(chosen)},
    )


def _relative(table: PaimonTable, full: str) -> str:
    return table.paths.relative(full)


def _digest(table: PaimonTable, read: TagFiles, name: str) -> str:
    digest = read.digests.get(name)
    if digest is None:  # gone since it was listed: what apply would check against is unknown
        raise MetadataNotFound(join(table.tag_dir, f"tag-{name}"), "tag")
    return digest


def read_tags(table: PaimonTable, *, options: TagOptions) -> TagFiles:
    """What ``plan_tags`` needs from the store: the tags, their files' digests and snapshots, and, under
    ``--older-than``, the modification times of the files of tags that do not record both a creation time
    and a time retained."""
    return read_tag_files(table, timed=lambda t: bool(options.older_than)
                          and (not t.create_time or t.time_retained is None))


# ---- the registry entry (``planner.kinds``) ------------------------------------------------------------

def _read(table, *, now_ms: int, options) -> TagFiles:
    refuse_future_now(table, now_ms, "tag expiry")  # apply would refuse the plan: say so now
    return read_tags(table, options=options)


def _plan(table, *, now_ms: int, options, read: TagFiles) -> CleanupPlan:
    return plan_tags(table, now_ms=now_ms, options=options, read=read)


def describe_tags(plan: CleanupPlan) -> PlanDescription:
    """A tag expiry: which tags and why, and what their files free."""
    listed = plan.scope.tags
    gone = plan.scope.snapshots_gone
    document = {"tags": listed, "snapshots_gone": gone}
    notes = tuple(plan.stats.get("notes") or ())
    if not listed:
        return PlanDescription(nothing_to_do=True, nothing_label="No tags to expire",
                               scope=f"no tag of branch '{plan.branch}' is expired ({plan.stats.get('tags_kept', 0)} "
                                     "kept).", notes=notes, document=document)
    files = sum(1 for a in plan.actions if str(a.kind) != "tag-file")
    lines = tuple(f"tag '{t['tag']}' (snapshot {t['snapshot']}): {t['reason']}"
                  + ("; its files go with it" if t["files_freed"] else "") for t in listed)
    return PlanDescription(
        nothing_to_do=False, document=document,
        scope=(f"deletes {len(listed)} tag(s) of branch '{plan.branch}', then {files} file(s) only they held "
               f"(of snapshot(s) {gone})" if gone else
               f"deletes {len(listed)} tag(s) of branch '{plan.branch}'; their snapshots still exist, so snapshot "
               "expiry frees their files later"),
        notes=(*lines, *notes,
               "files any snapshot, other tag, retained changelog or branch still holds are kept; apply checks "
               "that again before deleting any"))


COMMAND = PlanCommand(
    short_help="Expire tags (Paimon).",
    help="Plan the expiry of tags as Apache Paimon would delete them, and save the plan.\n\n"
         "Every tag whose own time retained has passed goes, and those named with --tag, created before "
         "--older-than, or beyond --num-retained-max. A tag whose snapshot is already expired takes with it the "
         "files nothing else holds (no snapshot, other tag, retained changelog or branch). Tags a branch was "
         "created from are kept.\n\n"
         "Nothing is deleted now. Review the plan with 'lakesweep show PLAN'.",
    flags=(PlanFlag("names", list, "Delete this tag (repeatable), as Paimon's delete_tag does.", ("--tag",)),
           PlanFlag("older_than", str, "Also delete tags created before this: a duration back from --now ('30 d') "
                    "or a time (ISO-8601, read as UTC, or epoch ms). A tag without a creation time is judged by its "
                    "file's modification time."),
           PlanFlag("num_retained_max", int, "Keep at most this many snapshots' worth of automatically created "
                    "tags, deleting the oldest (tag.num-retained-max; needs tag.automatic-creation)."),
           PlanFlag("time_zone", str, "The zone of the tags' creation times, as Paimon's JVM wrote them (default: "
                    "this machine's).")),
    branch="Branch whose tags to expire.", system_zone=True)

KIND = PlanKind("tags", resolve_options=resolve_tag_options, plan=_plan, describe=describe_tags, format="paimon",
                command=COMMAND, read=_read)
