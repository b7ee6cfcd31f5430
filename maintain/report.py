"""What a ``lakesweep maintain`` run returns: one ``TableResult`` per operation on one table, in a
``RunReport`` the CLI renders (text, or ``--output json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakesweep.journal.events import MaintenanceOutcome


@dataclass
class TableResult:
    """One operation on one table. ``files`` and ``bytes``: applied, the files deleted or written and the
    bytes reclaimed; planned (a dry run), the files the plan deletes or writes and the bytes it would
    reclaim; 0 when nothing was planned or applied. ``duration_ms``: from planning to the end of the apply
    (0 for what detection skipped, which reads each table once for all its operations)."""

    table: str
    operation: str
    outcome: str
    message: str
    plan_id: str | None = None
    files: int = 0
    bytes: int = 0
    duration_ms: int = 0


@dataclass
class RunReport:
    run_id: str
    cycles: int = 0
    results: list[TableResult] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(r.outcome == MaintenanceOutcome.FAILED for r in self.results)

    def counts(self) -> dict[str, int]:
        """Operations by outcome."""
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        return counts

    def to_json(self) -> dict:
        return {"run_id": self.run_id, "cycles": self.cycles, "counts": self.counts(),
                "results": [vars(r) for r in self.results]}
