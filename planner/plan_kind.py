"""One plan kind's entry (``PlanKind``): everything kind-specific the CLI, the renderers and ``maintain``
need, kept in the kind's own module (``planner/<format>/<kind>.py``); ``planner.kinds`` only collects them.

Every kind's planner also leaves in ``plan.stats`` what the generic renderer shows for any plan:
``summary`` (``engine.plan.summarize`` of the actions) and ``warnings`` (a list of strings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from lakesweep.engine.plan import CleanupPlan


@dataclass(frozen=True, slots=True)
class PlanDescription:
    """What a plan does, in plain text lines (no markup) a renderer prints as they are."""

    # The plan does none of the work its kind exists for (it may still carry housekeeping: ``remaining``).
    nothing_to_do: bool
    # One line: what the plan covers, or, when there is nothing to do, why.
    scope: str
    # How the kind says there is nothing to do.
    nothing_label: str = "Nothing to do"
    # When there is nothing to do: what apply still does.
    remaining: tuple[str, ...] = ()
    # What the plan protected, deferred or was bounded by: shown whether or not there is anything to do.
    notes: tuple[str, ...] = ()
    # Keys this kind adds to the plan's JSON document (``lakesweep show --output json``), kept for scripts.
    document: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Maintained:
    """How ``lakesweep maintain`` runs a kind. ``th`` is maintain's ``Thresholds`` (the worker's names)."""

    # Its place in the canonical order of SeaweedFS's maintenance worker (compact, expire, orphans,
    # rewrite-manifests, then lakesweep's own).
    order: int
    # ``flags(table_options, th)``: the plan flags, thresholds as defaults under the table's own properties;
    # None when the table cannot take the kind (``not_configured`` says why).
    flags: Callable[[Mapping[str, str], Any], dict | None]
    # ``applied(plan, counts)``: the result's message once applied (counts: outcome -> actions).
    applied: Callable[[CleanupPlan, Mapping[str, int]], str]
    # ``detect(view, th, now_ms)``: why the table does not need the kind, from metadata alone (the worker's
    # message), or None (plan it: the plan decides).
    detect: Callable[[Any, Any, int], str | None] | None = None
    not_configured: str = ""
    # What a plan with nothing to do says; None: its description's scope.
    nothing_message: str | None = None


@dataclass(frozen=True, slots=True)
class PlanFlag:
    """One option of a kind's ``lakesweep plan KIND`` command, handed to its option resolver as given (None,
    or False for a flag, when not given)."""

    name: str  # the resolver's keyword
    type: type  # int, str, bool (a flag, or with ``default=None`` a --x/--no-x pair) or list (repeatable str)
    help: str
    names: tuple[str, ...] = ()  # the option's names; default: the keyword as --kebab-case
    default: Any = None


@dataclass(frozen=True, slots=True)
class PlanCommand:
    """The ``lakesweep plan KIND`` command of a kind with one format, built by the CLI from this entry:
    the table (and for Iceberg --catalog), --out, ``flags``, --branch (when ``branch`` says what it
    names), --now, --option (Paimon) and --output."""

    short_help: str
    help: str
    flags: tuple[PlanFlag, ...] = ()
    branch: str | None = None  # the --branch option's help; None: the kind plans the main branch only
    # The resolver also takes ``system_zone``: the zone of the machine that plans, which the CLI reads.
    system_zone: bool = False


@dataclass(frozen=True, slots=True)
class PlanKind:
    name: str
    # ``resolve_options(table_options, *, overrides, **flags)``: flags as the user gave them (None: not given)
    # over ``overrides`` (``--option key=value``) over the table's options over defaults, each value with
    # its source. Raises ``PlanRejected`` on a bad value.
    resolve_options: Callable[..., Any]
    # ``plan(table, *, now_ms, options, read=None)``: the pure planner; ``read`` is what ``read`` returned.
    plan: Callable[..., CleanupPlan]
    describe: Callable[[CleanupPlan], PlanDescription]
    format: str
    maintain: Maintained | None = None  # None: ``maintain`` does not run it
    # ``read(table, *, now_ms, options)``: what the planner needs from storage beyond the table's metadata
    # (a listing, the other tables), read by the caller before planning and passed to ``plan`` as a value;
    # the checks that must come before a long listing run first. None: the planner needs nothing more.
    read: Callable[..., Any] | None = None
    # Its ``lakesweep plan`` command; None: the CLI writes the command itself (a kind of several formats,
    # or one whose options need the CLI: a Spark listing, arithmetic across options).
    command: PlanCommand | None = None

    def read_and_plan(self, table, *, now_ms: int, options) -> CleanupPlan:
        """``read`` (when the kind has one), then ``plan`` with what it read: what a caller without a listing
        of its own does."""
        read = self.read(table, now_ms=now_ms, options=options) if self.read is not None else None
        return self.plan(table, now_ms=now_ms, options=options, read=read)


def refuse_future_now(table, now_ms: int, what: str) -> None:
    """Refuse (``PlanRejected``) a plan as of a time the clock has not reached: its ``AssertNowReached``
    would have apply refuse it until then."""
    from lakesweep.engine.errors import PlanRejected
    from lakesweep.engine.paimon.requirements import AssertNowReached

    ahead = AssertNowReached(now_ms).problems(table)
    if ahead:
        raise PlanRejected(f"--now: {ahead[0]}. Plan {what} as of the current time or an earlier one")


def utc(ms: int) -> str:
    from lakesweep.engine.timeutil import format_time_ms

    return format_time_ms(ms)


def hours(value: int | None) -> str | None:
    """A threshold in whole hours as a plan flag; None leaves the engine's own default."""
    return None if value is None else f"{value} h"
