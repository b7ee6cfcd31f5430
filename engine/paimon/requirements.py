"""What a Paimon plan requires of the live table, as typed requirements (``engine.plan.Requirement``).

Orphan cleaning's (``orphan_requirements``): the table; ``AssertNowReached`` (the plan's time is not ahead
of the clock); and ``AssertUnreferenced``, which re-reads before each phase what every snapshot, tag,
changelog and branch uses now and skips each candidate that has become used since planning. Snapshot
expiry's: what the plan's range protects (the table, its schema, its branches, tags below the end,
consumers reading inside the range, the planned snapshots as read); snapshots committed later never make a
plan stale (docs/design/paimon-tables.md#what-a-plan-requires).
"""

from __future__ import annotations

import posixpath
import weakref
from dataclasses import dataclass, field
from typing import AbstractSet, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import read_each
from lakesweep.engine.plan import Action, ActionCheck, Requirement, kind_spec, requirement
from lakesweep.engine.paimon.state import table_identity
from lakesweep.engine.paimon.table import snapshot_digest


@requirement
@dataclass(frozen=True, slots=True)
class AssertTableIdentity(Requirement):
    """The plan is for this table (its first schema file) and branch. A mismatch is not a stale plan but
    a wrong one: ``PlanRejected``."""

    TYPE = "paimon.table-identity"
    identity: str
    location: str
    branch: str

    def problems(self, view, *, done=frozenset()) -> list[str]:
        found = table_identity(view)
        if found != self.identity:
            raise PlanRejected(
                f"the plan is for another table: it was made for {self.location} ({self.identity}), "
                f"but {view.location} is {found}"
            )
        if view.branch != self.branch:
            raise PlanRejected(f"the plan is for branch '{self.branch}', not '{view.branch}'")
        return []


@requirement
@dataclass(frozen=True, slots=True)
class AssertSchemaId(Requirement):
    TYPE = "paimon.schema-id"
    schema_id: int

    def problems(self, view, *, done=frozenset()) -> list[str]:
        found = view.schema.id
        return [] if found == self.schema_id else [f"the schema changed from {self.schema_id} to {found}"]


@requirement
@dataclass(frozen=True, slots=True)
class AssertBranches(Requirement):
    """The same branches exist: a new branch may share files with the range, a removed one changes what
    other branches hold."""

    TYPE = "paimon.branches"
    branches: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "branches", tuple(sorted(self.branches)))

    def problems(self, view, *, done=frozenset()) -> list[str]:
        now, old = set(view.branch_names()), set(self.branches)
        if now == old:
            return []
        return [f"branches changed (added {sorted(now - old) or 'none'}, removed {sorted(old - now) or 'none'})"]


@requirement
@dataclass(frozen=True, slots=True)
class AssertTagsBelow(Requirement):
    """No tag below ``end`` was added, removed or moved: a tag at or after the end protects nothing the
    plan deletes; any tag below it can."""

    TYPE = "paimon.tags-below"
    end: int
    tags: Mapping[str, int]  # every tag when planned: name -> snapshot id

    def __post_init__(self):
        object.__setattr__(self, "tags", {str(k): int(v) for k, v in sorted(self.tags.items())})

    def problems(self, view, *, done=frozenset()) -> list[str]:
        now = {t.name: t.snapshot.id for t in view.tags()}
        out = []
        for name in sorted(set(self.tags) | set(now)):
            was, is_ = self.tags.get(name), now.get(name)
            if was == is_ or not any(x is not None and x < self.end for x in (was, is_)):
                continue
            if was is None:
                out.append(f"tag '{name}' was added at snapshot {is_}, inside the plan's protection range (< {self.end})")
            elif is_ is None:
                out.append(f"tag '{name}' (snapshot {was}) was removed")
            else:
                out.append(f"tag '{name}' moved from snapshot {was} to {is_}")
        return out


@requirement
@dataclass(frozen=True, slots=True)
class AssertConsumersOutside(Requirement):
    """No consumer reads inside ``[begin, end)`` that did not read there when planned."""

    TYPE = "paimon.consumers-outside"
    begin: int | None
    end: int
    consumers: Mapping[str, int]  # every consumer when planned: id -> next snapshot

    def __post_init__(self):
        object.__setattr__(self, "consumers", {str(k): int(v) for k, v in sorted(self.consumers.items())})

    def problems(self, view, *, done=frozenset()) -> list[str]:
        return [f"consumer '{c.consumer_id}' now reads from snapshot {c.next_snapshot}, inside the plan's range "
                f"[{self.begin}, {self.end})"
                for c in sorted(view.consumers(), key=lambda c: c.consumer_id)
                if c.next_snapshot < self.end and self.consumers.get(c.consumer_id) != c.next_snapshot]


@requirement
@dataclass(frozen=True, slots=True)
class AssertSnapshotsPresent(Requirement):
    """The planned snapshots and the end snapshot are there with the content the plan read.

    A planned snapshot may be gone when this plan deleted it (``done``), or when the plan was applied
    before without this journal: every planned snapshot gone and the EARLIEST hint at the plan's value.
    ``pins`` (snapshot id -> digest) tell a rolled-back and recommitted id from the one planned; a plan
    without pins (written before they existed) is refused.
    """

    TYPE = "paimon.snapshots-present"
    end: int
    snapshots: tuple[int, ...]  # the snapshot files the plan deletes
    pins: Mapping[int, str] | None
    hint: int | None  # the EARLIEST value the plan writes

    def __post_init__(self):
        object.__setattr__(self, "snapshots", tuple(sorted(int(s) for s in self.snapshots)))
        if self.pins is not None:
            object.__setattr__(self, "pins", {int(k): str(v) for k, v in sorted(self.pins.items(), key=lambda kv: int(kv[0]))})

    def to_json(self) -> dict:
        return {"type": self.TYPE, "end": self.end, "snapshots": list(self.snapshots), "hint": self.hint,
                "pins": None if self.pins is None else {str(k): v for k, v in self.pins.items()}}

    def problems(self, view, *, done: AbstractSet[str] = frozenset()) -> list[str]:
        # One read of each file the requirement names, on threads (``read_each``): whether it is there and,
        # where pinned, its digest. On S3 a plan's thousands of snapshot files are one GET each, made at once.
        pins = self.pins or {}
        ids = sorted({*self.snapshots, self.end, *pins})
        found = dict(zip(ids, read_each(view.fileio, [view.snapshot_path(sid) for sid in ids], snapshot_digest)))
        out = []
        gone = [sid for sid in self.snapshots if found[sid] is None]
        already_applied = bool(self.snapshots) and len(gone) == len(self.snapshots) and \
            view.read_hint("EARLIEST") == self.hint
        missing = [] if already_applied else [sid for sid in gone if view.snapshot_path(sid) not in done]
        if missing:
            out.append(f"snapshot(s) {missing} of the plan's range are gone, removed by something other than this "
                       "plan (another expiry ran?)")
        if found[self.end] is None:
            out.append(f"the plan's end snapshot {self.end} no longer exists")
        if self.pins is None:
            out.append("the plan does not pin the content of its snapshots (it was written by an older "
                       "lakesweep), so a rolled-back and recommitted snapshot id could not be told apart")
            return out
        for sid, digest in self.pins.items():
            # a file gone is reported above when it matters (a planned snapshot, or the end)
            if found[sid] is not None and found[sid] != digest:
                out.append(f"snapshot {sid} is not the snapshot the plan read: its file changed (was the table "
                           "rolled back and committed again?)")
        return out


def expire_requirements(*, identity: str, location: str, branch: str, begin: int | None, end: int | None,
                        hint: int | None, deletes: bool, schema_id: int, branches: Sequence[str],
                        tags: Mapping[str, int], consumers: Mapping[str, int], consumer_changelog_only: bool,
                        snapshots: Sequence[int], pins: Mapping[int, str] | None) -> tuple[Requirement, ...]:
    """Snapshot expiry's requirements, from what the planner read (and from a version-1 plan's
    fingerprint, the same way). A plan that deletes nothing requires only the table."""
    reqs: list[Requirement] = [AssertTableIdentity(identity, location, branch)]
    if not deletes or end is None:
        return tuple(reqs)
    reqs += [AssertSchemaId(schema_id), AssertBranches(tuple(branches)), AssertTagsBelow(end, tags)]
    if not consumer_changelog_only:  # consumers then protect only changelog files
        reqs.append(AssertConsumersOutside(begin, end, consumers))
    reqs.append(AssertSnapshotsPresent(end, tuple(snapshots), pins, hint))
    return tuple(reqs)


# The used names read for one live view: ``problems`` and ``skipped`` run on the same view one after the
# other before each phase, and the view is read anew for the next.
_USED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def live_used(view):
    """The used set of ``view`` (``engine.paimon.orphans.read_used_names``), read once per view: the
    per-action re-check and apply's own orphan gate share it."""
    from lakesweep.engine.paimon.orphans import read_used_names

    used = _USED.get(view)
    if used is None:
        used = _USED[view] = read_used_names(view)
    return used


@requirement
@dataclass(frozen=True, slots=True)
class AssertUnreferenced(ActionCheck):
    """No orphan candidate is used by the live table: before each phase, every file name reachable from
    every snapshot, tag and changelog of every branch is read again (``engine.paimon.orphans``), and a
    candidate whose name is among them is skipped (journaled, never deleted). A used set that cannot be
    read, or that misses a file a newest snapshot references, stops the apply."""

    TYPE = "paimon.unreferenced"

    def problems(self, view, *, done=frozenset()) -> list[str]:
        try:
            live_used(view)
        except PlanRejected as e:
            return [str(e)]
        return []

    def skipped(self, view, actions: Sequence[Action], targets: Sequence[str]) -> AbstractSet[int]:
        checked = [a for a in actions if (spec := kind_spec(a.kind)) is not None and spec.by_name]
        if not checked:
            return frozenset()
        names = live_used(view).names
        return frozenset(a.action_id for a in checked if posixpath.basename(targets[a.action_id]) in names)


CLOCK_SKEW_MS = 60_000  # how far a plan's now may be ahead of the clock that checks it (machines disagree)


@requirement
@dataclass(frozen=True, slots=True)
class AssertNowReached(Requirement):
    """The plan's now is not ahead of the clock. Orphan cleaning judged each file's age against it: a plan
    made as of a later time than the files were listed at (``--now`` in the future, a time read in the
    wrong zone) takes files written just before the listing, which writers may not have committed yet,
    for old ones, and nothing else checks their age again. Once the clock has reached the plan's now,
    every planned file is at least ``--older-than`` old. Allows ``CLOCK_SKEW_MS`` between machines."""

    TYPE = "paimon.now-reached"
    now_ms: int

    def problems(self, view, *, done=frozenset()) -> list[str]:
        from lakesweep.engine.timeutil import format_time_ms, wall_clock_ms

        clock = wall_clock_ms()
        if self.now_ms <= clock + CLOCK_SKEW_MS:
            return []
        return [f"the plan was made as of {format_time_ms(self.now_ms)}, after the current time "
                f"{format_time_ms(clock)}: files it found older than its --older-than may be younger, and a "
                "writer may not have committed them yet"]


def orphan_requirements(*, identity: str, location: str, deletes: bool,
                        now_ms: int | None = None) -> tuple[Requirement, ...]:
    """Orphan cleaning's requirements: the table (main: the plan covers every branch), and, when the plan
    deletes anything, that its now has been reached and the per-action re-check."""
    reqs: list[Requirement] = [AssertTableIdentity(identity, location, "main")]
    if deletes:
        if now_ms is not None:
            reqs.append(AssertNowReached(now_ms))
        reqs.append(AssertUnreferenced())
    return tuple(reqs)


def partition_files_digest(files) -> str:
    """A digest of a partition's live files, (bucket, file name) pairs in any order."""
    import hashlib

    text = "\n".join(f"{b}/{n}" for b, n in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@requirement
@dataclass(frozen=True, slots=True)
class AssertPartitionsUnchanged(Requirement):
    """Each partition a drop plan drops still holds, live in the latest snapshot, exactly the files the
    plan read (Paimon's conflict check, made stricter: a plan drops what it showed or nothing). Writes to
    other partitions, and new partitions, do not matter. A partition whose drop this plan already
    committed (its ``first`` file is done) is not checked again.

    ``partitions``: the partition's BinaryRow (hex, as a manifest holds it) -> the digest of its files
    (``partition_files_digest``); ``first``: the same key -> one of its planned files (path)."""

    TYPE = "paimon.partitions-unchanged"
    partitions: Mapping[str, str]
    first: Mapping[str, str]

    def problems(self, view, *, done=frozenset()) -> list[str]:
        from lakesweep.engine.fileio import join
        from lakesweep.engine.paimon.drop import partition_name
        from lakesweep.engine.paimon.partition import decode_binary_row

        types = view.schema.partition_types
        wanted: dict[tuple, str] = {}
        for row, digest in self.partitions.items():
            path = self.first.get(row, "")
            full = path if "://" in path or path.startswith("/") else join(view.location, path)
            if full in done:
                continue
            try:
                wanted[tuple(decode_binary_row(bytes.fromhex(row), types))] = row
            except ValueError as e:
                raise PlanRejected(f"the plan names partition {row!r}, which is not a partition of this table; "
                                   "the plan is refused") from e
        if not wanted:
            return []
        _, latest = view.earliest_latest()
        files: dict[tuple, set] = {p: set() for p in wanted}
        if latest is not None:
            decoded: dict[bytes, tuple] = {}
            for e in view.live_entries(view.snapshot(latest)):
                part = decoded.get(e.partition)
                if part is None:
                    part = decoded[e.partition] = tuple(decode_binary_row(e.partition, types))
                if part in files:
                    files[part].add((e.bucket, e.file.file_name))
        out = []
        for part, row in wanted.items():
            if partition_files_digest(files[part]) != self.partitions[row]:
                out.append(f"partition {partition_name(view, part)} changed since planning (it now holds "
                           f"{len(files[part])} live files)")
        return out


def partition_requirements(*, identity: str, location: str, now_ms: int, partitions: Mapping[str, str],
                           first: Mapping[str, str]) -> tuple[Requirement, ...]:
    """A partition drop's requirements: the table's main branch, a now the clock has reached (a drop
    planned as of a later time expires partitions early), and partitions unchanged."""
    return (AssertTableIdentity(identity, location, "main"), AssertNowReached(now_ms),
            AssertPartitionsUnchanged(dict(partitions), dict(first)))


@requirement
@dataclass(frozen=True, slots=True)
class AssertConsumersUnmodified(ActionCheck):
    """A consumer file planned for expiry has not been written since planning: a reader that has moved on
    (a newer modification time, or other content where the store keeps the time) is not idle any more.
    Such a candidate, and any file the plan did not plan (an edited plan), is skipped and journaled, never
    deleted. ``mtimes``: each planned file (path) -> the modification time planned on; ``digests``: the
    same files -> a digest of the content planned on."""

    TYPE = "paimon.consumers-unmodified"
    mtimes: Mapping[str, int]
    digests: Mapping[str, str] = field(default_factory=dict)

    def problems(self, view, *, done=frozenset()) -> list[str]:
        return []

    def skipped(self, view, actions: Sequence[Action], targets: Sequence[str]) -> AbstractSet[int]:
        out = set()
        for a in actions:
            planned = self.mtimes.get(a.path)
            info = view.fileio.info(targets[a.action_id])
            if info is None:
                continue  # gone already: the delete finds it absent
            if planned is None or info.mtime_ms is None or info.mtime_ms != planned:
                out.add(a.action_id)
                continue
            digest = self.digests.get(a.path)
            if digest is not None and consumer_digest(view.fileio, targets[a.action_id]) not in (None, digest):
                out.add(a.action_id)
        return out


def consumer_digest(fileio, path: str) -> str | None:
    """A digest of a consumer file's content, ``None`` when the file is gone."""
    try:
        return snapshot_digest(fileio.read_bytes(path))
    except FileNotFoundError:
        return None


def consumer_requirements(*, identity: str, location: str, branch: str, now_ms: int,
                          mtimes: Mapping[str, int], digests: Mapping[str, str]) -> tuple[Requirement, ...]:
    """Consumer expiry's requirements: the table and branch, a now the clock has reached (files judged
    idle by a later time may not be), and each candidate unmodified."""
    return (AssertTableIdentity(identity, location, branch), AssertNowReached(now_ms),
            AssertConsumersUnmodified(dict(mtimes), dict(digests)))


@requirement
@dataclass(frozen=True, slots=True)
class AssertTagsUnchanged(Requirement):
    """The tags a tag-expiry plan deletes are there with the content the plan read (or this plan deleted
    them), and the snapshots whose files it deletes are still gone: a tag written again, or a snapshot
    restored (a rollback to the tag), makes the plan stale. ``tags``: name -> digest of the tag file;
    ``gone``: the snapshot ids whose files the plan deletes."""

    TYPE = "paimon.tags-unchanged"
    tags: Mapping[str, str]
    gone: tuple[int, ...]

    def __post_init__(self):
        if isinstance(self.gone, list):  # as a plan file stores it
            object.__setattr__(self, "gone", tuple(self.gone))

    def problems(self, view, *, done=frozenset()) -> list[str]:
        from lakesweep.engine.fileio import join

        out = []
        for name, digest in sorted(self.tags.items()):
            path = join(view.tag_dir, f"tag-{name}")
            try:
                data = view.fileio.read_bytes(path)
            except FileNotFoundError:
                if path not in done:
                    out.append(f"tag '{name}' is gone, deleted by something other than this plan")
                continue
            if snapshot_digest(data) != digest:
                out.append(f"tag '{name}' is not the tag the plan read: it was written again")
        for sid in self.gone:
            if view.fileio.exists(view.snapshot_path(sid)):
                out.append(f"snapshot {sid}, whose files the plan deletes with its tag, exists again")
        return out


def tag_requirements(*, identity: str, location: str, branch: str, now_ms: int, tags: Mapping[str, str],
                     gone: Sequence[int]) -> tuple[Requirement, ...]:
    """Tag expiry's requirements: the table and branch, a now the clock has reached, the tags as read."""
    return (AssertTableIdentity(identity, location, branch), AssertNowReached(now_ms),
            AssertTagsUnchanged(dict(tags), tuple(sorted(gone))))


@requirement
@dataclass(frozen=True, slots=True)
class AssertChangelogsPresent(Requirement):
    """The changelog files a changelog-expiry plan deletes are there with the content it read (or this plan
    deleted them, or the plan was applied before: all gone and the changelog EARLIEST hint at the plan's
    value), and the changelog at ``end``, whose lists protect what it still needs, exists."""

    TYPE = "paimon.changelogs-present"
    end: int
    changelogs: Mapping[int, str]  # id -> digest of its file
    hint: int

    def __post_init__(self):
        object.__setattr__(self, "changelogs", {int(k): str(v) for k, v in sorted(self.changelogs.items(),
                                                                                 key=lambda kv: int(kv[0]))})

    def to_json(self) -> dict:
        return {"type": self.TYPE, "end": self.end, "hint": self.hint,
                "changelogs": {str(k): v for k, v in self.changelogs.items()}}

    def problems(self, view, *, done=frozenset()) -> list[str]:
        out = []
        gone = [cid for cid in self.changelogs if not view.fileio.exists(view.changelog_path(cid))]
        applied = len(gone) == len(self.changelogs) and view.read_hint("EARLIEST", view.changelog_dir) == self.hint
        missing = [] if applied else [cid for cid in gone if view.changelog_path(cid) not in done]
        if missing:
            out.append(f"changelog(s) {missing} of the plan's range are gone, removed by something other than this "
                       "plan")
        if not view.fileio.exists(view.changelog_path(self.end)):
            out.append(f"the plan's end changelog {self.end} no longer exists")
        for cid, digest in self.changelogs.items():
            try:
                data = view.fileio.read_bytes(view.changelog_path(cid))
            except FileNotFoundError:
                continue
            if snapshot_digest(data) != digest:
                out.append(f"changelog {cid} is not the changelog the plan read: its file changed")
        return out


def changelog_requirements(*, identity: str, location: str, branch: str, begin: int, end: int, hint: int,
                           schema_id: int, branches: Sequence[str], tags: Mapping[str, int],
                           consumers: Mapping[str, int], changelogs: Mapping[int, str]) -> tuple[Requirement, ...]:
    """Changelog expiry's requirements: what protects the range (branches, tags below its end, consumers
    reading inside it) unchanged, and the planned changelogs present as read."""
    return (AssertTableIdentity(identity, location, branch), AssertSchemaId(schema_id),
            AssertBranches(tuple(branches)), AssertTagsBelow(end, dict(tags)),
            AssertConsumersOutside(begin, end, dict(consumers)), AssertChangelogsPresent(end, dict(changelogs), hint))
