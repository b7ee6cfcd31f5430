"""The commit mode: a phase that applies by committing new table metadata instead of deleting files.

A commit is idempotent through its identifier (``engine.plan.commit_id``), derived from the plan id and the phase:
before committing, the committer looks for a commit that carries it (Paimon's ``FileStoreCommit``
filters already-committed identifiers the same way). A crash after the commit and before the journal
heard of it is found by a resumed apply, which journals ``ALREADY_COMMITTED`` and goes on.

Each table format provides its ``Committer`` (``engine.formats.TableFormat.committer``); a plan with a
commit phase for a format lakesweep does not know is refused before anything is done.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from lakesweep.engine.errors import LakesweepError, PlanRejected
from lakesweep.engine.formats import format_names, format_of
from lakesweep.engine.plan import Action, CleanupPlan, PhaseMode

from lakesweep.applier.actions import ActionResult, Outcome


class Committer(Protocol):
    """Commits a phase's actions to one table format."""

    def check(self, table, actions: Sequence[Action]) -> None:
        """Refuse (``PlanRejected``) commit actions this committer would not carry out as planned."""

    def find(self, table, commit_id: str) -> int | None:
        """The version (snapshot id, metadata version) of a commit carrying ``commit_id``; None if none."""

    def commit(self, table, actions: Sequence[Action], commit_id: str) -> int | None:
        """Commit the actions under ``commit_id``; the new version (None: nothing was left to commit).
        Raises ``LakesweepError`` when the table cannot take the commit (a conflict that retries did not
        resolve).

        A committer of plans with a merge phase also takes ``written=`` (the outputs by group, as journaled).
        After a commit a committer may have ``left_out`` (the ids of the actions the commit left out, each
        with why: DROPPED), ``kept`` (those the live table still needs: SKIPPED_REFERENCED) and
        ``attempts`` (the commits it tried)."""


def committer_for(plan: CleanupPlan, given: Committer | None, *, strict: bool = False) -> Committer | None:
    """The committer of the plan's format (``given`` wins), or None when the plan has no commit phase.
    A plan with a commit phase and no committer is refused. ``strict``: the committer refuses any change
    to the table since planning instead of committing on top of it."""
    if not any(p.mode == PhaseMode.COMMIT for p in plan.phases):
        return None
    if given is not None:
        return given
    if plan.format not in format_names():
        name = next(p.name for p in plan.phases if p.mode == PhaseMode.COMMIT)
        raise PlanRejected(f"phase '{name}' of plan {plan.plan_id} commits to the table, which this lakesweep "
                           f"cannot do for {plan.format} tables yet; nothing was done")
    return format_of(plan).committer(plan, strict)


def run_commit(committer: Committer, table, actions: Sequence[Action], cid: str, *, dry_run: bool,
               clock: Callable[[], int], written=None) -> tuple[list[ActionResult], int | None, bool]:
    """Commit ``actions`` once under ``cid``: (one result per action, the version, found already).

    Found already: every action ``ALREADY_COMMITTED``; committed now: ``COMMITTED``, or ``DROPPED`` (with
    the reason) for an action the commit left out, or ``SKIPPED_REFERENCED`` (with the reason) for one the
    live table still needs; a dry run only looks (``COMMITTED`` standing for "would commit"). A failure is
    ``FAILED`` for every action, with the reason. ``written``: the outputs of the plan's merge phase, for
    the committer (None: the plan has none). The version is None when nothing was committed."""
    left_out: dict[int, str] = {}
    kept: dict[int, str] = {}
    try:
        version = committer.find(table, cid)
        if version is not None:
            outcome, already = Outcome.ALREADY_COMMITTED, True
        elif dry_run:
            outcome, already = Outcome.COMMITTED, False
        else:
            version = (committer.commit(table, actions, cid) if written is None
                       else committer.commit(table, actions, cid, written=written))
            outcome, already = Outcome.COMMITTED, False
            left_out = dict(getattr(committer, "left_out", {}) or {})
            kept = dict(getattr(committer, "kept", {}) or {})
    except (LakesweepError, OSError) as e:
        now = clock()
        error = f"{type(e).__name__}: {e}"
        return [ActionResult(a.action_id, Outcome.FAILED, 1, error, now) for a in actions], None, False
    now = clock()
    attempts = max(1, int(getattr(committer, "attempts", 1) or 1))
    results = []
    for a in actions:
        if a.action_id in left_out:
            results.append(ActionResult(a.action_id, Outcome.DROPPED, attempts, left_out[a.action_id], now))
        elif a.action_id in kept:
            results.append(ActionResult(a.action_id, Outcome.SKIPPED_REFERENCED, attempts, kept[a.action_id], now))
        else:
            results.append(ActionResult(a.action_id, outcome, attempts, None, now))
    return results, version, already
