"""Iceberg's action kinds: each kind's spec (verb, phase, order), for each plan kind.

Snapshot expiry commits first (``RemoveSnapshots``), then deletes what only the expired snapshots reached:
data and delete files, then manifests, then manifest lists and statistics files. Orphan removal deletes in
one bulk phase. Manifest rewriting only commits. Compaction merges each bin (one Spark task per bin), then
commits one ``replace`` snapshot. Why this order: docs/design/iceberg.md#the-order-of-deletes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from lakesweep.engine.plan import ActionKindSpec, ActionOrder, PhaseMode, PhaseSpec, Verb, register_action_kinds
from lakesweep.engine.purge import PURGE, PURGE_PHASES, PurgeKind, SPECS as PURGE_SPECS


class ExpirePhase(enum.IntEnum):
    COMMIT = 1
    DATA_FILES = 2
    MANIFESTS = 3
    METADATA = 4


EXPIRE_PHASES: tuple[PhaseSpec, ...] = (
    PhaseSpec("expire_snapshots", PhaseMode.COMMIT),
    PhaseSpec("data_files", PhaseMode.BULK),
    PhaseSpec("manifests", PhaseMode.BULK),
    PhaseSpec("manifest_lists", PhaseMode.BULK),
)


class ExpireKind(enum.StrEnum):
    """What an Iceberg snapshot expiry does: remove each expired snapshot from the metadata (one commit),
    then delete the files only expired snapshots reached (Iceberg's ``ReachableFileCleanup``)."""

    EXPIRE_SNAPSHOT = "expire-snapshot"  # path: the snapshot's manifest list; snapshot_id: the snapshot
    DATA_FILE = "data-file"
    POSITION_DELETE_FILE = "position-delete-file"
    EQUALITY_DELETE_FILE = "equality-delete-file"
    MANIFEST = "manifest"
    MANIFEST_LIST = "manifest-list"
    STATISTICS = "statistics"  # a statistics (puffin) or partition-statistics file


_EXPIRE_PHASE = {
    ExpireKind.EXPIRE_SNAPSHOT: ExpirePhase.COMMIT,
    ExpireKind.DATA_FILE: ExpirePhase.DATA_FILES,
    ExpireKind.POSITION_DELETE_FILE: ExpirePhase.DATA_FILES,
    ExpireKind.EQUALITY_DELETE_FILE: ExpirePhase.DATA_FILES,
    ExpireKind.MANIFEST: ExpirePhase.MANIFESTS,
    ExpireKind.MANIFEST_LIST: ExpirePhase.METADATA,
    ExpireKind.STATISTICS: ExpirePhase.METADATA,
}
# The snapshot commit in ascending id; the files by kind, then path.
SPECS: dict[str, ActionKindSpec] = {k.value: ActionKindSpec(
    k.value, Verb.COMMIT if k is ExpireKind.EXPIRE_SNAPSHOT else Verb.DELETE_FILE, int(_EXPIRE_PHASE[k]),
    ActionOrder(0, "snapshot_id") if k is ExpireKind.EXPIRE_SNAPSHOT else ActionOrder(i))
    for i, k in enumerate(ExpireKind)}
# What a snapshot reaches (``IcebergTable.snapshot_files``), as the expiry kind that deletes it.
FILE_KINDS = {"data-file": ExpireKind.DATA_FILE, "position-delete-file": ExpireKind.POSITION_DELETE_FILE,
              "equality-delete-file": ExpireKind.EQUALITY_DELETE_FILE, "manifest": ExpireKind.MANIFEST,
              "manifest-list": ExpireKind.MANIFEST_LIST, "statistics": ExpireKind.STATISTICS}


ORPHAN_PHASES: tuple[PhaseSpec, ...] = (PhaseSpec("orphan_files", PhaseMode.BULK),)


class OrphanKind(enum.StrEnum):
    """What Iceberg orphan removal deletes: a file under the table location (or a write root its
    properties name) that no metadata reaches, older than the cut-off."""

    ORPHAN_DATA_FILE = "orphan-data-file"  # under data/ or a data root
    ORPHAN_METADATA_FILE = "orphan-metadata-file"  # under metadata/
    ORPHAN_FILE = "orphan-file"  # anywhere else under the table location


SPECS.update({k.value: ActionKindSpec(k.value, Verb.DELETE_FILE, 1) for k in OrphanKind})


REWRITE_PHASES: tuple[PhaseSpec, ...] = (PhaseSpec("rewrite_manifests", PhaseMode.COMMIT),)


class RewriteKind(enum.StrEnum):
    """What a manifest rewrite commits: each data manifest of the current snapshot, replaced by one
    manifest per partition spec (delete manifests are carried over unchanged)."""

    REWRITE_MANIFEST = "rewrite-manifest"


SPECS["rewrite-manifest"] = ActionKindSpec("rewrite-manifest", Verb.COMMIT, 1)


COMPACT_PHASES: tuple[PhaseSpec, ...] = (PhaseSpec("merge_bins", PhaseMode.MERGE),
                                          PhaseSpec("commit_replace", PhaseMode.COMMIT))


class CompactKind(enum.StrEnum):
    """What a compaction does to each input data file (``bucket``: its bin's index, ``partition``: the bin's
    partition path): merge it into its bin's output (phase 1), then replace it by that output in one commit
    (phase 2). The file itself is not deleted: snapshot expiry frees it."""

    COMPACT_INPUT = "compact-input"
    COMPACT_REPLACE = "compact-replace"


# Each bin's inputs together, by path.
SPECS.update({k.value: ActionKindSpec(
    k.value, Verb.MERGE if k is CompactKind.COMPACT_INPUT else Verb.COMMIT,
    1 if k is CompactKind.COMPACT_INPUT else 2, ActionOrder(0, "bucket"))
    for k in CompactKind})


@dataclass(frozen=True, slots=True)
class IcebergPlanKind:
    """What apply does differently for one Iceberg plan kind: the format and the committer read these
    fields, never the kind's name."""

    name: str
    actions: type[enum.Enum]  # the action kinds its plans hold (any other is refused)
    phases: tuple[PhaseSpec, ...]
    # Reachability gate: snapshots the plan expires and refs it removes hold nothing, and a file a planned
    # snapshot the live table keeps still holds is held back (SKIPPED_REFERENCED), not refused. Without it
    # every holder counts and refuses the plan; a non-deleting plan holds back what changed (DROPPED).
    expiry_gate: bool = False
    # Refused when another table of the catalog stores files in the table's roots; verified against them.
    shared_storage: bool = False
    # The action its commit phase carries, and what the commit makes: (check, find, commit) steps of
    # ``engine.iceberg.commit``, read when committing (``commit_steps()``).
    commit_action: Any = None
    commit_steps: Callable[[], Any] | None = None
    version_label: str = "snapshot"  # what ``find`` and ``commit`` return


def _expire_steps():
    from lakesweep.engine.iceberg.commit import EXPIRE_STEPS

    return EXPIRE_STEPS


def _rewrite_steps():
    from lakesweep.engine.iceberg.commit import REWRITE_STEPS

    return REWRITE_STEPS


def _compact_steps():
    from lakesweep.engine.iceberg.commit import COMPACT_STEPS

    return COMPACT_STEPS


PLAN_KIND_RULES = {k.name: k for k in (
    IcebergPlanKind("expire", ExpireKind, EXPIRE_PHASES, expiry_gate=True, commit_action=ExpireKind.EXPIRE_SNAPSHOT,
                    commit_steps=_expire_steps, version_label="metadata version"),
    IcebergPlanKind("orphans", OrphanKind, ORPHAN_PHASES, shared_storage=True),
    IcebergPlanKind("rewrite-manifests", RewriteKind, REWRITE_PHASES, commit_action=RewriteKind.REWRITE_MANIFEST,
                    commit_steps=_rewrite_steps),
    IcebergPlanKind("compact", CompactKind, COMPACT_PHASES, commit_action=CompactKind.COMPACT_REPLACE,
                    commit_steps=_compact_steps),
    IcebergPlanKind(PURGE, PurgeKind, PURGE_PHASES),  # one kind for both formats: engine.purge
)}
PLAN_KINDS = tuple(PLAN_KIND_RULES)
# A plan kind without an entry (refused by ``verify_table`` before anything else) gets no special rule.
NO_RULES = IcebergPlanKind("", enum.Enum, ())


def rules_of(plan) -> IcebergPlanKind:
    return PLAN_KIND_RULES.get(plan.kind, NO_RULES)


SPECS.update(PURGE_SPECS)  # registered with PurgeKind by engine.purge, shared with Paimon
KINDS = {k.value: k for k in (*ExpireKind, *OrphanKind, *RewriteKind, *CompactKind, *PurgeKind)}
register_action_kinds(SPECS, ExpireKind, OrphanKind, RewriteKind, CompactKind)
SHAPES = {label: (spec.verb, spec.phase) for label, spec in SPECS.items()}
PLAN_KIND_OF = {k.value: rule.name for rule in PLAN_KIND_RULES.values() for k in rule.actions}
PHASES_OF = {rule.name: rule.phases for rule in PLAN_KIND_RULES.values()}
