"""How a command's results reach the user: ``TextOutput`` (rich, for people) or ``JsonOutput`` (one JSON
document on stdout, for scripts), after pyiceberg's ``cli/output.py``.

A command picks one implementation from ``--output`` (``output_for``) and hands it each result it
computed; it never asks which one it holds. Diagnostics (warnings, errors, progress) go to stderr, and
only text output draws progress (``draws_progress``), so stdout under ``--output json`` is exactly one
JSON document. Exit codes stay with the commands.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Any, Sequence

from lakesweep.cli import render


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"


class Output(ABC):
    """One method per kind of result a command shows."""

    draws_progress: bool = False

    @abstractmethod
    def inspect(self, info: dict) -> None:
        """What ``inspect_table`` found in a table."""

    @abstractmethod
    def plan_written(self, plan, location: str) -> None:
        """A plan just made and written to ``location``."""

    @abstractmethod
    def plan_shown(self, plan, *, files: bool, requests: dict | None = None, quarantine: dict | None = None,
                   figures=None) -> None:
        """A saved plan read back; with ``files``, every action, listed as ``plan.actions`` gives them (a
        plan read in batches streams them); ``requests``: what applying it sends to an object store
        (``{"by_kind", "total", "rate", "seconds"}``), for a plan on one; ``quarantine``: what ``apply
        --quarantine`` costs (``applier.quarantine.quarantine_cost``); ``figures``: its
        ``render.ActionFigures``, when already counted."""

    @abstractmethod
    def apply_report(self, report) -> None:
        """What one apply (or dry run) did: an ``ApplyReport``."""

    @abstractmethod
    def resume_reports(self, reports: Sequence) -> None:
        """What resume did: one ``ApplyReport`` per unfinished apply (none: nothing to resume)."""

    @abstractmethod
    def verify(self, report, *, files: bool) -> None:
        """What ``verify_table`` found (a ``VerifyReport``); with ``files``, every unreferenced file."""

    @abstractmethod
    def journal_plans(self, rows: list[dict]) -> None:
        """The journal's plans (``journal.audit.list_plans``)."""

    @abstractmethod
    def journal_files(self, rows: list[dict], *, more: int = 0) -> None:
        """The journal's per-file records (``journal.audit.list_files``); ``more``: how many more the
        filters select beyond those (the limit cut them off)."""

    @abstractmethod
    def query_result(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """The result of a read-only SQL query over the journal."""

    @abstractmethod
    def journal_exported(self, out: str, n_rows: int) -> None:
        """``n_rows`` file records written to the Parquet file ``out``."""

    @abstractmethod
    def doctor(self, checks: Sequence) -> None:
        """The doctor's checks (``applier.doctor.Check``), in order."""

    # The demo tells its story step by step for people, and gives scripts one document at the end.

    @abstractmethod
    def demo_step(self, text: str) -> None:
        """A line of the demo's story (rich markup)."""

    @abstractmethod
    def demo_inspect(self, info: dict) -> None: ...

    @abstractmethod
    def demo_plan(self, plan) -> None: ...

    @abstractmethod
    def demo_report(self, report) -> None: ...

    @abstractmethod
    def demo_finished(self, doc: dict) -> None:
        """Everything the demo did, as data."""


class TextOutput(Output):
    draws_progress = True

    def inspect(self, info: dict) -> None:
        render.render_inspect(info)

    def plan_written(self, plan, location: str) -> None:
        render.render_plan(plan, location=location)

    def plan_shown(self, plan, *, files: bool, requests: dict | None = None, quarantine: dict | None = None,
                   figures=None) -> None:
        render.render_plan(plan, files=files, figures=figures)
        if requests is not None:
            kinds = ", ".join(f"{n} {kind}" for kind, n in requests["by_kind"].items())
            pace = (f"{requests['seconds']:.1f} s at {requests['rate']:g} requests/s" if requests["rate"] is not None
                    else "no request budget (apply --max-requests-per-second)")
            render.out.print(f"Requests to the store: {kinds}; {requests['total']} in all, {pace}")
        if quarantine is not None:
            render.render_quarantine_cost(quarantine)

    def apply_report(self, report) -> None:
        render.render_report(report)

    def resume_reports(self, reports: Sequence) -> None:
        if not reports:
            render.out.print("Nothing to resume: every apply in the journal has finished.")
        for r in reports:
            render.render_report(r)

    def verify(self, report, *, files: bool) -> None:
        render.render_verify(report, files=files)

    def journal_plans(self, rows: list[dict]) -> None:
        render.render_journal_plans(rows)

    def journal_files(self, rows: list[dict], *, more: int = 0) -> None:
        render.render_journal_files(rows, more=more)

    def query_result(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        render.render_query(columns, rows)

    def journal_exported(self, out: str, n_rows: int) -> None:
        render.out.print(f"wrote {n_rows} file records to {out}")

    def doctor(self, checks: Sequence) -> None:
        render.render_doctor(checks)

    def demo_step(self, text: str) -> None:
        render.out.print(text)

    def demo_inspect(self, info: dict) -> None:
        render.render_inspect(info)

    def demo_plan(self, plan) -> None:
        render.render_plan(plan, files=True)

    def demo_report(self, report) -> None:
        render.render_report(report)

    def demo_finished(self, doc: dict) -> None:
        pass  # the story has been told


class JsonOutput(Output):
    def inspect(self, info: dict) -> None:
        render.emit_json(info)

    def plan_written(self, plan, location: str) -> None:
        render.emit_json(render.plan_document(plan) | {"out": location})

    def plan_shown(self, plan, *, files: bool, requests: dict | None = None, quarantine: dict | None = None,
                   figures=None) -> None:
        document = render.plan_document(plan)
        if requests is not None:
            document["requests"] = requests
        if quarantine is not None:
            document["quarantine_cost"] = quarantine
        if files:
            render.emit_json_listing(document, "actions", (render.action_document(plan, a) for a in plan.actions))
        else:
            render.emit_json(document)

    def apply_report(self, report) -> None:
        render.emit_json(report.to_json())

    def resume_reports(self, reports: Sequence) -> None:
        render.emit_json([r.to_json() for r in reports])

    def verify(self, report, *, files: bool) -> None:
        render.emit_json(report.to_json())

    def journal_plans(self, rows: list[dict]) -> None:
        render.emit_json(rows)

    def journal_files(self, rows: list[dict], *, more: int = 0) -> None:
        render.emit_json(rows)

    def query_result(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        render.emit_json([dict(zip(columns, r)) for r in rows])

    def journal_exported(self, out: str, n_rows: int) -> None:
        render.emit_json({"out": out, "rows": n_rows})

    def doctor(self, checks: Sequence) -> None:
        render.emit_json({"ok": all(c.ok for c in checks), "checks": [c.to_json() for c in checks]})

    def demo_step(self, text: str) -> None:
        pass

    def demo_inspect(self, info: dict) -> None:
        pass

    def demo_plan(self, plan) -> None:
        pass

    def demo_report(self, report) -> None:
        pass

    def demo_finished(self, doc: dict) -> None:
        render.emit_json(doc)


def output_for(fmt: OutputFormat) -> Output:
    """The implementation ``--output`` names."""
    return JsonOutput() if OutputFormat(fmt) == OutputFormat.json else TextOutput()
