"""The kinds of plan lakesweep makes: one registry, keyed by (format, kind), that the CLI, the renderers and
``maintain`` read.

Each entry (``planner.plan_kind.PlanKind``) lives in its kind's own module, beside its planner
(``planner/<format>/<kind>.py``, its ``KIND``, with its ``plan`` command's options); this module only
collects them. Adding a kind is its module, one line here, and its action kinds and rules in the format's
own table (``engine/<format>/kinds.py``, ``PLAN_KIND_RULES``), plus where their files live
(``engine/paimon/layout.py`` for Paimon). ``purge`` is one kind of both formats (``planner/purge.py``).
"""

from __future__ import annotations

from typing import Mapping

from lakesweep.engine.plan import CleanupPlan
from lakesweep.planner.iceberg import compact, expire as iceberg_expire, orphans as iceberg_orphans, rewrite_manifests
from lakesweep.planner.paimon import changelog, consumers, expire, orphans, partitions, tags
from lakesweep.planner import purge
from lakesweep.planner.plan_kind import PlanDescription, PlanKind

__all__ = ["ICEBERG_KINDS", "KINDS", "PlanDescription", "PlanKind", "all_kinds", "describe_plan", "kinds_of",
           "plan_kind"]

KINDS: dict[str, PlanKind] = {k.name: k for k in (expire.KIND, orphans.KIND, partitions.KIND, consumers.KIND,
                                                    tags.KIND, changelog.KIND, purge.KIND)}
ICEBERG_KINDS: dict[str, PlanKind] = {k.name: k for k in (iceberg_expire.KIND, iceberg_orphans.KIND,
                                                            rewrite_manifests.KIND, compact.KIND,
                                                            purge.ICEBERG_KIND)}
_BY_FORMAT = {"paimon": KINDS, "iceberg": ICEBERG_KINDS}


def kinds_of(fmt: str) -> Mapping[str, PlanKind]:
    """The entries of table format ``fmt``, by kind name (empty for a format lakesweep does not know)."""
    return _BY_FORMAT.get(fmt, {})


def all_kinds() -> tuple[PlanKind, ...]:
    """Every entry, format by format."""
    return tuple(entry for kinds in _BY_FORMAT.values() for entry in kinds.values())


def plan_kind(name: str, fmt: str) -> PlanKind:
    """The registry entry of ``name`` for table format ``fmt`` (a KeyError for a kind lakesweep does not
    make is a bug)."""
    return _BY_FORMAT[fmt][name]


def describe_plan(plan: CleanupPlan) -> PlanDescription:
    """``plan`` described by its kind's entry; a plan of a kind without one by its action count."""
    entry = kinds_of(plan.format).get(plan.kind)
    if entry is not None:
        return entry.describe(plan)
    if not plan.actions:
        return PlanDescription(nothing_to_do=True, scope="the plan has no actions.")
    return PlanDescription(nothing_to_do=False, scope=f"{len(plan.actions)} actions")
