"""One apply of a plan file into a journal, on the driver (no Spark), for tests that kill it with
``LAKESWEEP_TEST_CRASH``: ``python -m tests.support.driver_apply PLAN_FILE JOURNAL [quarantine]`` (the last:
apply --quarantine, into the table's quarantine folder).

Every result is journaled on its own (journal batches of one, executor batches of one), so a crash point
counted in results (``before-journal:k`` / ``after-journal:k``) lands between any two actions of a phase,
not only where a full batch of 500 would end.
"""

from __future__ import annotations

import sys


def main(plan_file: str, journal: str, mode: str = "delete") -> int:
    import lakesweep.applier.phases as phases
    from lakesweep.applier.apply import DriverExecutor, apply_plan
    from lakesweep.engine.plan_io import read_plan
    from lakesweep.engine.quarantine import QuarantineSpec
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    phases._DRIVER_BATCH = 1
    phases._BULK_JOURNAL_BATCH = 1
    plan = read_plan(plan_file)
    with DuckDBRecorder(journal) as rec:
        report = apply_plan(plan, rec, executor=DriverExecutor(batch=1),
                            quarantine=QuarantineSpec(plan.plan_id) if mode == "quarantine" else None)
    print(report.state)
    return 0 if report.state == "COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
