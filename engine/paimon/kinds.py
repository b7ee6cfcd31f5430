"""Paimon's action kinds: each kind's spec (verb, phase, order within its phase, place), for each plan kind.

Expiry deletes in Java's order with a barrier between phases (``ExpireSnapshotsImpl#expireUntil``); orphan
cleaning deletes as ``LocalOrphanFilesClean#clean`` does, the stray files of the snapshot and changelog
directories first. The orders and why: docs/design/paimon-tables.md#the-order-of-deletes.
"""

from __future__ import annotations

import enum
import posixpath
from dataclasses import dataclass
from typing import Any, Callable

from lakesweep.engine.fileio import join
from lakesweep.engine.plan import Action, ActionKindSpec, ActionOrder, PhaseMode, PhaseSpec, Verb, register_action_kinds
from lakesweep.engine.purge import PURGE, PurgeKind, SPECS as PURGE_SPECS


class Phase(enum.IntEnum):
    """Expiry's phases, by their position in ``EXPIRE_PHASES`` (counted from 1, as stored)."""

    DATA_FILES = 1
    CHANGELOG_FILES = 2
    EMPTY_DIRS = 3
    METADATA = 4
    CHANGELOG_METADATA = 5
    SNAPSHOTS = 6
    HINT = 7


_MODES = {
    Phase.DATA_FILES: PhaseMode.BULK,
    Phase.CHANGELOG_FILES: PhaseMode.BULK,
    Phase.EMPTY_DIRS: PhaseMode.ORDERED,  # deepest first
    Phase.METADATA: PhaseMode.BULK,
    Phase.CHANGELOG_METADATA: PhaseMode.ORDERED,
    Phase.SNAPSHOTS: PhaseMode.ORDERED,  # ascending: a crash leaves a contiguous range
    Phase.HINT: PhaseMode.ORDERED,
}
EXPIRE_PHASES: tuple[PhaseSpec, ...] = tuple(PhaseSpec(p.name.lower(), _MODES[p]) for p in Phase)


class ActionKind(enum.StrEnum):
    DATA_FILE = "data-file"
    EXTRA_FILE = "extra-file"
    CHANGELOG_FILE = "changelog-file"
    EMPTY_DIR = "empty-dir"
    MANIFEST = "manifest"
    MANIFEST_LIST = "manifest-list"
    INDEX_FILE = "index-file"
    INDEX_MANIFEST = "index-manifest"
    STATISTICS = "statistics"
    WRITE_CHANGELOG = "write-changelog"  # copy snapshot-N to changelog/changelog-N (decoupled lifecycle)
    SNAPSHOT = "snapshot"
    WRITE_EARLIEST_HINT = "write-earliest-hint"


def _after_changelog_copy(fileio, target: str, a: Action) -> None:
    """A changelog copy moves the changelog directory's LATEST hint to its id, as Paimon's expiry does when
    it keeps a snapshot's changelog (decoupled lifecycle); never backwards (``advance_hint``)."""
    advance_hint(fileio, join(posixpath.dirname(target), "LATEST"), a.snapshot_id)


def _by_id(rank: int):
    """Snapshots (and their copies, changelogs) in ascending id, then by path."""
    return ActionOrder(rank, "snapshot_id")


def _deepest_first(rank: int):
    return ActionOrder(rank, "deepest")


def _by_path(rank: int):
    return ActionOrder(rank)


def _ordered(kind: enum.Enum, rank: int):
    """Expiry's order: snapshots and their changelog copies by id, empty directories deepest first, the
    rest by path."""
    if kind in (ActionKind.SNAPSHOT, ActionKind.WRITE_CHANGELOG):
        return _by_id(rank)
    return _deepest_first(rank) if kind is ActionKind.EMPTY_DIR else _by_path(rank)


_VERB = {k: Verb.WRITE_FILE if k in (ActionKind.WRITE_CHANGELOG, ActionKind.WRITE_EARLIEST_HINT)
         else Verb.DELETE_EMPTY_DIR if k is ActionKind.EMPTY_DIR else Verb.DELETE_FILE for k in ActionKind}
_PHASE = {
    ActionKind.DATA_FILE: Phase.DATA_FILES,
    ActionKind.EXTRA_FILE: Phase.DATA_FILES,
    ActionKind.CHANGELOG_FILE: Phase.CHANGELOG_FILES,
    ActionKind.EMPTY_DIR: Phase.EMPTY_DIRS,
    ActionKind.MANIFEST: Phase.METADATA,
    ActionKind.MANIFEST_LIST: Phase.METADATA,
    ActionKind.INDEX_FILE: Phase.METADATA,
    ActionKind.INDEX_MANIFEST: Phase.METADATA,
    ActionKind.STATISTICS: Phase.METADATA,
    ActionKind.WRITE_CHANGELOG: Phase.CHANGELOG_METADATA,
    ActionKind.SNAPSHOT: Phase.SNAPSHOTS,
    ActionKind.WRITE_EARLIEST_HINT: Phase.HINT,
}
SPECS: dict[str, ActionKindSpec] = {k.value: ActionKindSpec(
    k.value, _VERB[k], int(_PHASE[k]), _ordered(k, i),
    after_write=_after_changelog_copy if k is ActionKind.WRITE_CHANGELOG else None) for i, k in enumerate(ActionKind)}
PARTITIONED_KINDS = frozenset({ActionKind.DATA_FILE, ActionKind.EXTRA_FILE, ActionKind.CHANGELOG_FILE})


class OrphanPhase(enum.IntEnum):
    """Orphan cleaning's phases, by their position in ``ORPHAN_PHASES``."""

    STRAY_METADATA = 1
    ORPHAN_FILES = 2
    EMPTY_DIRS = 3


ORPHAN_PHASES: tuple[PhaseSpec, ...] = (
    PhaseSpec("stray_metadata", PhaseMode.ORDERED),  # a few files: on the driver
    PhaseSpec("orphan_files", PhaseMode.BULK),
    PhaseSpec("empty_dirs", PhaseMode.ORDERED),  # deepest first, once their files are gone
)


class OrphanKind(enum.StrEnum):
    """What an orphan plan deletes: files, and (``--empty-dirs``) the bucket and partition directories its
    deletes leave empty, each removed only if it is empty (never recursively) and never a root.

    The stray kinds are files of a snapshot or changelog directory that are neither a snapshot (or
    changelog) file nor a hint (``OrphanFilesClean#cleanSnapshotDir``); nothing can refer to them. The
    other kinds are candidates Paimon keeps when any snapshot, tag or changelog of any branch names a
    file with their name (``by_name``), and apply checks that again before deleting them.
    """

    STRAY_SNAPSHOT_FILE = "stray-snapshot-file"
    STRAY_CHANGELOG_FILE = "stray-changelog-file"
    ORPHAN_DATA_FILE = "orphan-data-file"  # any file of a bucket directory: data, changelog, extra, index
    ORPHAN_MANIFEST = "orphan-manifest"  # manifest/: manifests, manifest lists, index manifests
    ORPHAN_INDEX_FILE = "orphan-index-file"
    ORPHAN_STATISTICS = "orphan-statistics"
    EMPTY_DIR = "orphan-empty-dir"  # a bucket or partition directory the plan's deletes leave empty


_STRAY = frozenset({OrphanKind.STRAY_SNAPSHOT_FILE, OrphanKind.STRAY_CHANGELOG_FILE})
# Candidates are kept when a file of their name is used (Paimon matches them by bare file name); stray
# metadata and the empty directories are not.
SPECS.update({k.value: ActionKindSpec(
    k.value, Verb.DELETE_EMPTY_DIR if k is OrphanKind.EMPTY_DIR else Verb.DELETE_FILE,
    OrphanPhase.EMPTY_DIRS if k is OrphanKind.EMPTY_DIR else
    OrphanPhase.STRAY_METADATA if k in _STRAY else OrphanPhase.ORPHAN_FILES,
    _deepest_first(i) if k is OrphanKind.EMPTY_DIR else _by_path(i),
    by_name=k not in _STRAY and k is not OrphanKind.EMPTY_DIR) for i, k in enumerate(OrphanKind)})


class PartitionKind(enum.StrEnum):
    """What a partition drop commits: each live data file of a dropped partition, marked DELETE in one
    OVERWRITE snapshot (``FileStoreCommitImpl#dropPartitions``). Nothing is deleted: snapshot expiry removes
    the files once no retained snapshot, tag or branch holds them."""

    DROP_DATA_FILE = "drop-data-file"


PARTITION_PHASES: tuple[PhaseSpec, ...] = (PhaseSpec("drop_partitions", PhaseMode.COMMIT),)
SPECS["drop-data-file"] = ActionKindSpec("drop-data-file", Verb.COMMIT, 1)

class ConsumerKind(enum.StrEnum):
    """What consumer expiry deletes: a branch's ``consumer/consumer-<id>`` files not updated within the
    window (``ConsumerManager#expire``), one after another on the driver."""

    CONSUMER_FILE = "consumer-file"


CONSUMER_PHASES: tuple[PhaseSpec, ...] = (PhaseSpec("consumers", PhaseMode.ORDERED),)
SPECS["consumer-file"] = ActionKindSpec("consumer-file", Verb.DELETE_FILE, 1)

class TagPhase(enum.IntEnum):
    """Tag expiry's phases, in ``TagManager#deleteTag``'s order: the tag files first (a crash then leaks
    files, never leaves a tag whose files are gone), the files only expired tags held, their metadata."""

    TAG_FILES = 1
    DATA_FILES = 2
    METADATA = 3


TAG_PHASES: tuple[PhaseSpec, ...] = (
    PhaseSpec("tag_files", PhaseMode.ORDERED),
    PhaseSpec("tag_data_files", PhaseMode.BULK),
    PhaseSpec("tag_metadata", PhaseMode.BULK),
)


class TagKind(enum.StrEnum):
    """What tag expiry deletes: tag files, and for a tag whose snapshot is gone and which no other tag
    shares, the data, extra and index files and the manifests, lists and statistics that only it held
    (``TagDeletion``); never changelog files."""

    TAG_FILE = "tag-file"
    TAG_DATA_FILE = "tag-data-file"  # a data or extra file of a partition's bucket (or an external path)
    TAG_MANIFEST = "tag-manifest"  # manifest/: a manifest, a manifest list or an index manifest
    TAG_INDEX_FILE = "tag-index-file"
    TAG_STATISTICS = "tag-statistics"


# Each freed file lives where the expiry kind of the same file lives (``place``).
_TAG_PLACE = {TagKind.TAG_DATA_FILE: ActionKind.DATA_FILE, TagKind.TAG_MANIFEST: ActionKind.MANIFEST,
              TagKind.TAG_INDEX_FILE: ActionKind.INDEX_FILE, TagKind.TAG_STATISTICS: ActionKind.STATISTICS}
SPECS.update({k.value: ActionKindSpec(
    k.value, Verb.DELETE_FILE,
    TagPhase.TAG_FILES if k is TagKind.TAG_FILE else
    TagPhase.DATA_FILES if k is TagKind.TAG_DATA_FILE else TagPhase.METADATA,
    place=_TAG_PLACE[k].value if k in _TAG_PLACE else None) for k in TagKind})


class ChangelogPhase(enum.IntEnum):
    """Decoupled changelog expiry's phases (``ExpireChangelogImpl#expireUntil``): data and changelog
    files, the directories that leaves empty, manifests and lists, the changelog files in ascending id,
    and the changelog directory's EARLIEST hint last."""

    FILES = 1
    EMPTY_DIRS = 2
    METADATA = 3
    CHANGELOGS = 4
    HINT = 5


CHANGELOG_PHASES: tuple[PhaseSpec, ...] = (
    PhaseSpec("changelog_data_files", PhaseMode.BULK),
    PhaseSpec("changelog_empty_dirs", PhaseMode.ORDERED),
    PhaseSpec("changelog_manifests", PhaseMode.BULK),
    PhaseSpec("changelogs", PhaseMode.ORDERED),
    PhaseSpec("changelog_hint", PhaseMode.ORDERED),
)


class ChangelogKind(enum.StrEnum):
    """What decoupled changelog expiry deletes (``ChangelogDeletion``): the changelog files a changelog's
    list adds, or without one the files its delta deleted that snapshot expiry deferred (APPEND-sourced,
    ``changelog-producer=none``), their manifests and lists, the ``changelog/changelog-<id>`` files, and
    finally the changelog EARLIEST hint. Each lives where the expiry kind of the same file lives
    (``rule``)."""

    DATA_FILE = "expired-changelog-data-file"
    EXTRA_FILE = "expired-changelog-extra-file"
    CHANGELOG_FILE = "expired-changelog-file"
    EMPTY_DIR = "expired-changelog-empty-dir"
    MANIFEST = "expired-changelog-manifest"
    MANIFEST_LIST = "expired-changelog-manifest-list"
    CHANGELOG_META = "expired-changelog"
    WRITE_EARLIEST_HINT = "write-changelog-earliest-hint"


_CHANGELOG_RULE = {ChangelogKind.DATA_FILE: ActionKind.DATA_FILE, ChangelogKind.EXTRA_FILE: ActionKind.EXTRA_FILE,
                   ChangelogKind.CHANGELOG_FILE: ActionKind.CHANGELOG_FILE, ChangelogKind.EMPTY_DIR: ActionKind.EMPTY_DIR,
                   ChangelogKind.MANIFEST: ActionKind.MANIFEST, ChangelogKind.MANIFEST_LIST: ActionKind.MANIFEST_LIST}
_CHANGELOG_PHASE = {ChangelogKind.DATA_FILE: ChangelogPhase.FILES, ChangelogKind.EXTRA_FILE: ChangelogPhase.FILES,
                    ChangelogKind.CHANGELOG_FILE: ChangelogPhase.FILES, ChangelogKind.EMPTY_DIR: ChangelogPhase.EMPTY_DIRS,
                    ChangelogKind.MANIFEST: ChangelogPhase.METADATA,
                    ChangelogKind.MANIFEST_LIST: ChangelogPhase.METADATA,
                    ChangelogKind.CHANGELOG_META: ChangelogPhase.CHANGELOGS,
                    ChangelogKind.WRITE_EARLIEST_HINT: ChangelogPhase.HINT}
SPECS.update({k.value: ActionKindSpec(
    k.value, Verb.WRITE_FILE if k is ChangelogKind.WRITE_EARLIEST_HINT else
    Verb.DELETE_EMPTY_DIR if k is ChangelogKind.EMPTY_DIR else Verb.DELETE_FILE,
    int(_CHANGELOG_PHASE[k]),
    _by_id(0) if k is ChangelogKind.CHANGELOG_META else _deepest_first(0) if k is ChangelogKind.EMPTY_DIR else
    _by_path(i), place=_CHANGELOG_RULE[k].value if k in _CHANGELOG_RULE else None)
    for i, k in enumerate(ChangelogKind)})
# An expiry action kind as the changelog expiry kind of the same file.
CHANGELOG_KIND_OF = {ActionKind.DATA_FILE: ChangelogKind.DATA_FILE, ActionKind.EXTRA_FILE: ChangelogKind.EXTRA_FILE,
                     ActionKind.CHANGELOG_FILE: ChangelogKind.CHANGELOG_FILE, ActionKind.EMPTY_DIR: ChangelogKind.EMPTY_DIR,
                     ActionKind.MANIFEST: ChangelogKind.MANIFEST, ActionKind.MANIFEST_LIST: ChangelogKind.MANIFEST_LIST}

SPECS.update(PURGE_SPECS)  # registered with PurgeKind by engine.purge, shared with Iceberg
KINDS = {k.value: k for k in (*ActionKind, *OrphanKind, *PartitionKind, *ConsumerKind, *TagKind, *ChangelogKind,
                               *PurgeKind)}
register_action_kinds(SPECS, ActionKind, OrphanKind, PartitionKind, ConsumerKind, TagKind, ChangelogKind)
# A label -> (verb, phase), looked up by the label's text: hashing an enum member calls Enum.__hash__ in
# Python, once per action of a 300,000-action plan.
SHAPES = {label: (spec.verb, spec.phase) for label, spec in SPECS.items()}
# A label -> the plan kind whose actions it is: a kind is refused in a plan of another kind (its phase
# number means another phase there).


@dataclass(frozen=True, slots=True)
class PaimonPlanKind:
    """What apply does differently for one Paimon plan kind: the format, its checks and its committer read
    these fields, never the kind's name."""

    name: str
    actions: type[enum.Enum]  # the action kinds its plans hold (any other is refused)
    # Refused when another table stores files in the table's roots, and held to the whole used set by name
    # (orphan cleaning: what it deletes was found unused by a listing).
    shared_storage: bool = False
    commits: bool = False  # its commit phase is a Paimon commit (``engine.paimon.commit``)
    # The snapshot the reachability gate keeps from, ``gate_end(plan, table, planned, done)``; None: the
    # plan's end.
    gate_end: Callable[..., Any] | None = None
    deletes_tags: bool = False  # the tags it deletes hold nothing for the gate (``tags_deleted``)
    deletes_changelogs: bool = False  # the changelogs it deletes hold nothing for the gate


def _tag_gate_end(plan, table, planned, done):
    """A tag-expiry plan is held to more (``tag_expiry.check_tag_plan``), which gives the gate's end."""
    from lakesweep.engine.paimon.tag_expiry import check_tag_plan

    return check_tag_plan(table, tags_deleted(plan), planned, done)


def _changelog_gate_end(plan, table, planned, done):
    """A changelog plan's end is a changelog id; the snapshot the gate keeps is the live earliest one, which
    the plan's skipping set held (any snapshot expiry since made the old one a changelog)."""
    return table.earliest_latest()[0]


PLAN_KIND_RULES = {k.name: k for k in (
    PaimonPlanKind("expire", ActionKind),
    PaimonPlanKind("orphans", OrphanKind, shared_storage=True),
    PaimonPlanKind("partitions", PartitionKind, commits=True),
    PaimonPlanKind("consumers", ConsumerKind),
    PaimonPlanKind("tags", TagKind, gate_end=_tag_gate_end, deletes_tags=True),
    PaimonPlanKind("changelog", ChangelogKind, gate_end=_changelog_gate_end, deletes_changelogs=True),
    PaimonPlanKind(PURGE, PurgeKind),  # one kind for both formats: engine.purge
)}
PLAN_KINDS = tuple(PLAN_KIND_RULES)  # the plan kinds whose actions are defined here
# A plan kind without an entry (refused by ``verify_table`` before anything else) gets no special rule.
NO_RULES = PaimonPlanKind("", enum.Enum)


def rules_of(plan) -> PaimonPlanKind:
    return PLAN_KIND_RULES.get(plan.kind, NO_RULES)


PLAN_KIND_OF = {k.value: rule.name for rule in PLAN_KIND_RULES.values() for k in rule.actions}


def tags_deleted(plan) -> frozenset[str]:
    """The tags a tag-expiry plan deletes (its tag-file actions): holders the reachability gate leaves out,
    since the plan deletes them before the files only they hold. Empty for any other plan."""
    if not rules_of(plan).deletes_tags:
        return frozenset()
    return frozenset(a.path.rsplit("/tag-", 1)[1] for a in plan.actions if a.kind is TagKind.TAG_FILE)


def changelogs_deleted(plan) -> frozenset[int]:
    """The changelog ids a changelog-expiry plan deletes: holders the reachability gate leaves out, since
    the plan deletes what only they hold. Empty for any other plan."""
    if not rules_of(plan).deletes_changelogs:
        return frozenset()
    return frozenset(a.snapshot_id for a in plan.actions if a.kind is ChangelogKind.CHANGELOG_META)


def advance_hint(fileio, path: str, value: int) -> None:
    """Write ``value`` to the hint file ``path`` unless the hint there is already at or past it: a pointer
    only moves forward (a copy made again on resume, after a later one, must not pull it back). A hint that
    holds no number is replaced; Java lists the directory then, and the copy's id is a true lower bound."""
    try:
        current = fileio.read_bytes(path).decode("utf-8", errors="replace").strip()
    except FileNotFoundError:
        current = None
    if current is not None and current.isascii() and current.isdigit() and int(current) >= value:
        return
    fileio.write_atomic(path, str(value).encode())
