"""The scope of each Iceberg plan kind (``Scope``): how apply finds the table again (its catalog and name),
the snapshot the plan saw as current, and what the kind itself covers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lakesweep.engine.plan import Scope, scope_type


@dataclass(frozen=True, slots=True)
class IcebergScope(Scope):
    catalog: str | None
    identifier: str | None
    current_snapshot_id: int | None


@scope_type
@dataclass(frozen=True, slots=True)
class ExpireScope(IcebergScope):
    """The snapshots expired, the refs removed (past their max-ref-age-ms), the age cut-off and the refs
    as planned."""

    TYPE = "iceberg.expire"
    expired: Sequence[int]
    removed_refs: Sequence[str]
    cutoff_ms: int
    refs: Mapping[str, int]


@scope_type
@dataclass(frozen=True, slots=True)
class OrphanScope(IcebergScope):
    TYPE = "iceberg.orphans"
    cutoff_ms: int
    refs: Mapping[str, int]


@scope_type
@dataclass(frozen=True, slots=True)
class RewriteManifestsScope(IcebergScope):
    """The snapshot whose data manifests are rewritten, its entry and manifest counts by spec, or why the
    plan does nothing (``skipped``)."""

    TYPE = "iceberg.rewrite-manifests"
    snapshot_id: int | None
    refs: Mapping[str, int]
    entries: int
    specs: Mapping[str, Any]
    data_manifests: int
    delete_manifests: int
    skipped: str | None


@scope_type
@dataclass(frozen=True, slots=True)
class CompactScope(IcebergScope):
    """The snapshot compacted, its bins (``engine.iceberg.compact_apply.scope_bins``), the delete manifests
    the commit rewrites, the options that made the bins, or why the plan does nothing (``skipped``)."""

    TYPE = "iceberg.compact"
    snapshot_id: int | None
    sequence_number: int | None
    schema_id: int | None
    refs: Mapping[str, int]
    skipped: str | None
    target_bytes: int
    min_input_files: int
    apply_deletes: bool
    data_files: int
    small_files: int
    bins: Sequence[Mapping[str, Any]]
    delete_manifests: Sequence[Mapping[str, Any]]


def removed_refs(scope: IcebergScope) -> Sequence[str]:
    """The refs a plan removes: an expiry's; none for any other kind."""
    return scope.removed_refs if isinstance(scope, ExpireScope) else ()


@scope_type
@dataclass(frozen=True, slots=True)
class PurgeScope(IcebergScope):
    """The plans whose quarantined files a purge deletes (``engine.purge``)."""

    TYPE = "iceberg.purge"
    quarantines: Sequence[str]
