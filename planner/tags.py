"""Tag expiry planning with Apache Paimon's semantics (spec §6): which tags go, and what goes with them.

Which tags: those named (``--tag``, Paimon's ``delete_tag``); those whose own time retained has passed
(``TagTimeExpire``: the tag's creation time plus the ``tagTimeRetained`` it was created with, against
the local now); those created before ``--older-than`` (``expire_tags``' older_than; a tag without a
creation time is judged by its file's modification time); and with ``tag.num-retained-max``, the oldest
automatically created tags beyond that many snapshots (``TagAutoCreation``: only tags whose names the
table's tag period would make count). Tags a branch was created from are kept, with a note (Paimon #6272).

What goes with them (``TagManager#deleteTag``, ``TagDeletion``): the tag files; and for each snapshot whose
file is already gone and whose every tag goes, the data, extra and index files, manifests, manifest lists
and statistics its tags held that nothing left holds: not the earliest or latest snapshot, another tag, a
retained changelog, or any snapshot or tag of another branch (Java looks at the neighbouring tags and the
earliest snapshot only, and at no branch). Changelog files are never touched. Reads no clock.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from engine.errors import PlanRejected, PlannerInvariantViolated
from engine.fileio import join
from engine.paimon.kinds import TAG_PHASES, TagKind
from engine.paimon.reachability import holder_files, holders, other_branches, reachable_files
from engine.paimon.requirements import tag_requirements
from engine.paimon.state import snapshot_digest, table_identity
from engine.paimon.table import PaimonTable
from engine.plan import Action, CleanupPlan, canonical_actions, summarize
from planner.options import TagOptions
from planner.partitions import local_time


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


def _branch_bases(table: PaimonTable) -> dict[str, str]:
    """Tags other branches were created from: tag name -> branch (a branch created from a tag holds a copy
    of it, same name, same snapshot)."""
    out: dict[str, str] = {}
    mine = {t.name: t.snapshot for t in table.tags()}
    for other in other_branches(table):
        for t in other.tags():
            snap = mine.get(t.name)
            if snap is not None and snap.id == t.snapshot.id and snap.base_manifest_list == t.snapshot.base_manifest_list:
                out.setdefault(t.name, other.branch)
    return out


def _select(table: PaimonTable, now_ms: int, options: TagOptions, notes: list[str]) -> dict[str, str]:
    """The tags to expire, each with why."""
    tags = table.tags()
    by_name = {t.name: t for t in tags}
    unknown = [n for n in options.names if n not in by_name]
    if unknown:
        raise PlanRejected(f"branch '{table.branch}' has no tag named {unknown[0]!r}; nothing was planned")
    now_local = local_time(now_ms, options.time_zone)
    older = local_time(options.older_than_ms(now_ms), options.time_zone) if options.older_than else None
    chosen: dict[str, str] = {}
    for t in tags:
        if t.name in options.names:
            chosen[t.name] = "named"
            continue
        created = tag_create_time(t.create_time)
        retained = tag_time_retained(t.time_retained)
        if created is None and older is not None:
            info = table.fileio.info(join(table.tag_dir, f"tag-{t.name}"))
            created = local_time(info.mtime_ms, options.time_zone) if info and info.mtime_ms is not None else None
        if retained is not None and created is not None and now_local > created + retained:
            chosen[t.name] = f"created {created.isoformat(sep=' ')}, retained {retained}: expired"
        elif older is not None and created is not None and older > created:
            chosen[t.name] = f"created {created.isoformat(sep=' ')}, before --older-than {older.isoformat(sep=' ')}"
    if options.num_retained_max is not None:
        auto: dict[int, list[str]] = {}
        for t in tags:
            if is_auto_tag(t.name, options.period, options.period_formatter):
                auto.setdefault(t.snapshot.id, []).append(t.name)
        extra = len(auto) - options.num_retained_max
        for sid in sorted(auto)[:max(0, extra)]:
            for name in auto[sid]:
                chosen.setdefault(name, f"beyond tag.num-retained-max {options.num_retained_max} "
                                        "automatically created tags")
    for name, branch in sorted(_branch_bases(table).items()):
        if name in chosen:
            del chosen[name]
            notes.append(f"tag '{name}' is kept: branch '{branch}' was created from it")
    return chosen


def _classify(table: PaimonTable, snapshot) -> dict[str, TagKind]:
    """Every file the tag's snapshot holds (not its changelog), by kind."""
    paths = table.paths
    out: dict[str, TagKind] = {}
    for p in reachable_files(table, snapshot, with_changelog=False):
        out[p] = TagKind.TAG_DATA_FILE
    for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list, snapshot.index_manifest):
        if name:
            out[paths.manifest(name)] = TagKind.TAG_MANIFEST
    for m in table.data_manifests(snapshot):
        out[paths.manifest(m.file_name)] = TagKind.TAG_MANIFEST
    if snapshot.index_manifest:
        for ie in table.index_manifest(snapshot.index_manifest):
            f = ie.index_file
            out[paths.index_file(ie.partition, ie.bucket, f.file_name, f.external_path)] = TagKind.TAG_INDEX_FILE
    if snapshot.statistics:
        out[paths.statistics(snapshot.statistics)] = TagKind.TAG_STATISTICS
    return out


def plan_tags(table: PaimonTable, *, now_ms: int, options: TagOptions) -> CleanupPlan:
    """Plan the expiry of ``table``'s (branch's) tags as of ``now_ms`` (see the module docstring)."""
    notes: list[str] = []
    chosen = _select(table, now_ms, options, notes)
    tags = {t.name: t for t in table.tags()}
    digests = {n: snapshot_digest(table.fileio.read_bytes(join(table.tag_dir, f"tag-{n}"))) for n in sorted(chosen)}
    by_snapshot: dict[int, list[str]] = {}
    for t in tags.values():
        by_snapshot.setdefault(t.snapshot.id, []).append(t.name)
    earliest, latest = table.earliest_latest()
    gone = sorted(sid for sid, names in by_snapshot.items()
                  if all(n in chosen for n in names) and not table.fileio.exists(table.snapshot_path(sid)))
    actions: list[Action] = [Action(TagKind.TAG_FILE, _relative(table, join(table.tag_dir, f"tag-{n}")))
                             for n in sorted(chosen)]
    candidates: dict[str, TagKind] = {}
    for sid in gone:
        candidates.update(_classify(table, tags[by_snapshot[sid][0]].snapshot))
    if candidates:
        held: set[str] = set()
        for h in holders(table, end=earliest, without_tags=frozenset(chosen)):
            held |= holder_files(h).keys()
        for path, kind in sorted(candidates.items()):
            if path not in held:
                actions.append(Action(kind, table.paths.relative(path)))
        if any(a.kind is not TagKind.TAG_FILE and table.paths.absolute(a.path) in held for a in actions):
            raise PlannerInvariantViolated("a planned file is held by the table")  # the subtraction above failed
    actions = canonical_actions(actions)
    listed: list[dict[str, Any]] = [{"tag": n, "snapshot": tags[n].snapshot.id, "reason": chosen[n],
                                     "files_freed": tags[n].snapshot.id in gone} for n in sorted(chosen)]
    return CleanupPlan(
        kind="tags",
        table_location=table.location,
        table_identity=table_identity(table),
        branch=table.branch,
        now_ms=now_ms,
        options=dict(options.sources),
        scope={"tags": listed, "snapshots_gone": gone, "earliest": earliest, "latest": latest},
        requirements=tag_requirements(identity=table_identity(table), location=table.location, branch=table.branch,
                                      now_ms=now_ms, tags=digests, gone=gone),
        phases=TAG_PHASES,
        actions=actions,
        stats={"summary": summarize(actions), "warnings": [], "notes": notes, "tags_kept": len(tags) - len(chosen)},
    )


def _relative(table: PaimonTable, full: str) -> str:
    return table.paths.relative(full)
