"""The scope of each Paimon plan kind: what the plan covers, as the plan header stores it (``Scope``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lakesweep.engine.plan import Scope, scope_type


@scope_type
@dataclass(frozen=True, slots=True)
class ExpireScope(Scope):
    """Snapshot expiry's range [begin, end) and the EARLIEST hint it writes; all None when nothing expires."""

    TYPE = "paimon.expire"
    begin: int | None
    end: int | None
    earliest_hint: int | None


@scope_type
@dataclass(frozen=True, slots=True)
class ChangelogScope(Scope):
    """Decoupled changelog expiry's range of changelog ids, its hint and the option or state that bounds it."""

    TYPE = "paimon.changelog"
    begin: int | None
    end: int | None
    earliest_hint: int | None
    bound: str | None


@scope_type
@dataclass(frozen=True, slots=True)
class OrphanScope(Scope):
    TYPE = "paimon.orphans"
    older_than_ms: int


@scope_type
@dataclass(frozen=True, slots=True)
class PartitionScope(Scope):
    """The snapshot whose partitions were judged, the rule and cut-off, and each dropped partition."""

    TYPE = "paimon.partitions"
    snapshot: int | None
    strategy: str
    cutoff: str
    time_zone: str
    partitions: Sequence[Mapping[str, Any]]


@scope_type
@dataclass(frozen=True, slots=True)
class ConsumerScope(Scope):
    TYPE = "paimon.consumers"
    cutoff_ms: int
    consumers: Sequence[Mapping[str, Any]]  # {"consumer", "modified", "modified_ms"}


@scope_type
@dataclass(frozen=True, slots=True)
class TagScope(Scope):
    """The tags expired (each with its snapshot and reason), the snapshots of theirs already gone, and the
    branch's earliest and latest snapshot at planning."""

    TYPE = "paimon.tags"
    tags: Sequence[Mapping[str, Any]]
    snapshots_gone: Sequence[int]
    earliest: int | None
    latest: int | None


@scope_type
@dataclass(frozen=True, slots=True)
class PurgeScope(Scope):
    """The plans whose quarantined files a purge deletes (``engine.purge``)."""

    TYPE = "paimon.purge"
    quarantines: Sequence[str]
