"""What lakesweep asks of a table format, and the one registry of formats.

A ``TableFormat`` opens a plan's table and answers apply's questions about it: is the plan for this table,
are its paths where their kinds of file live, is anything it deletes still used, how it commits, and is the
table whole afterwards. Each format lives in its own package (``engine/<format>/format.py``); adding one is
that package plus its name in ``engine.plan.FORMATS``. Apply's loop (``applier.apply``) is the same for every format.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Protocol, Sequence

from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.plan import FORMATS, Action, CleanupPlan, PhaseMode, Verb, format_module


class TableFormat(Protocol):
    """One table format's answers to apply. ``table`` is the format's own table view (``open``)."""

    name: str

    def open(self, plan: CleanupPlan, fileio: FileIO | None) -> Any:
        """The plan's table, read now (``fileio`` given: through it)."""

    def external_roots(self, table) -> list[str]:
        """Roots outside the table location where the table keeps files."""

    def verify_table(self, plan: CleanupPlan, table) -> None:
        """Refuse (``PlanRejected``) a plan of a kind this format does not apply, or for another table."""

    def check_neighbours(self, plan: CleanupPlan, table) -> None:
        """Refuse (``SharedStorage``) an orphans plan when another table stores files in this one's roots."""

    def verify_paths(self, plan: CleanupPlan, table) -> list[str]:
        """Each action's full location, by action id; refuse a path outside the table's roots or where its
        kind of file does not live."""

    def check_unreachable(self, plan: CleanupPlan, table, actions: Sequence[Action], targets: Sequence[str], *,
                          done: AbstractSet[str], strict: bool = False) -> dict[int, str]:
        """The actions to hold back, each with why, or a refusal (``StalePlan``) when a file the actions
        delete is still used by the live ``table``."""

    def held_outcomes(self, plan: CleanupPlan) -> frozenset[str]:
        """Outcomes beyond the usual by which an apply of ``plan`` holds actions back on a live table."""

    def check_strict(self, plan: CleanupPlan, table) -> None:
        """``apply --strict``: refuse when the table changed since planning."""

    def committer(self, plan: CleanupPlan, strict: bool):
        """The committer of the plan's commit phases (``applier.commit.Committer``)."""

    def verify(self, plan: CleanupPlan, table, targets: Sequence[str]):
        """(the check's report, the locations checked) after the last phase."""


def format_names() -> tuple[str, ...]:
    return FORMATS


def format_named(name: str) -> TableFormat:
    """The format ``name`` (``engine.<name>.format.FORMAT``; the names are ``engine.plan.FORMATS``, the one
    registry); ``PlanRejected`` for one lakesweep does not know."""
    if name not in FORMATS:
        raise PlanRejected(f"table format {name!r} is not one lakesweep applies")
    return format_module(name, "format").FORMAT


def format_of(plan: CleanupPlan) -> TableFormat:
    return format_named(plan.format)


# -- checks every plan gets, whatever its format


def check_phases(plan: CleanupPlan) -> None:
    """Commit actions run in commit phases and merge actions in merge phases, and those phases hold nothing
    else."""
    for a in plan.actions:
        commit_phase = plan.phases[a.phase - 1].mode == PhaseMode.COMMIT
        merge_phase = plan.phases[a.phase - 1].mode == PhaseMode.MERGE
        if (a.verb is Verb.COMMIT) != commit_phase or (a.verb is Verb.MERGE) != merge_phase:
            raise PlanRejected(f"action {a.action_id} ({a.kind} {a.path!r}) is a {a.verb} action in the "
                               f"{plan.phases[a.phase - 1].mode} phase '{plan.phase_name(a.phase)}'; the plan is refused")


def check_requirements(plan: CleanupPlan, table, *, done: AbstractSet[str] = frozenset(),
                       strict: bool = False) -> None:
    """Every requirement of the plan against the live ``table``; raise one ``StalePlan`` naming all that
    changed. ``done`` are full locations this plan already carried out (a resumed apply). Requirements
    that pin the table as at planning (``STRICT_ONLY``) count only when ``strict``."""
    problems: list[str] = []
    for r in plan.requirements:
        if r.STRICT_ONLY and not strict:
            continue
        problems += r.problems(table, done=done)
    if problems:
        raise StalePlan(
            f"the plan {plan.plan_id} is stale: " + "; ".join(problems) + f". Re-run 'lakesweep plan {plan.kind}'."
        )
