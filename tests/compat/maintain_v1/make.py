"""Write ``journal.duckdb``: the journal of three ``lakesweep maintain`` runs, as lakesweep wrote it before
maintenance results had a stream of their own (``MaintenanceResult`` v1, kept in its plan's stream, or in
``maintain:<run id>`` when it had no plan), and the outputs that journal gave then (``expected.json``).

Run once, from the repository root, at the commit that added it (the lakesweep of that time, whose maintain
lived in ``applier/maintain.py``): ``python -m tests.compat.maintain_v1.make``.
The tables live under ``/tmp/lakesweep-fixture-maintain`` while it runs; only the journal is kept.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lakesweep.applier.apply import DriverExecutor
from lakesweep.applier.maintain import Maintenance, Thresholds
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.compat.maintain_v1.outputs import outputs
from tests.iceberg.conftest import CATALOG, make_lake, write_history
from tests.support import pypaimon_tables as pt

HERE = Path(__file__).parent
ROOT = Path("/tmp/lakesweep-fixture-maintain")


def main() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    journal = HERE / "journal.duckdb"
    journal.unlink(missing_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        lake = make_lake(ROOT / "lake", mp)
        write_history(lake, "ns.orders")
        write_history(lake, "ns.items", appends=3, churn=False)
        lake.catalog.create_namespace("ops")
        write_history(lake, "ops.events", properties={"gc.enabled": "false"})
        pt.write_demo_table(str(ROOT / "wh"))
        th = Thresholds(max_snapshots_to_keep=2, snapshot_retention_hours=0, min_manifests_to_rewrite=2)
        with DuckDBRecorder(journal) as rec:
            # a dry run first: every plan written, nothing applied
            Maintenance(rec, str(ROOT / "plans"), catalog=CATALOG, thresholds=th, executor=DriverExecutor(),
                        namespace_filter="ns", operations=("expire", "rewrite-manifests"), dry_run=True,
                        run_id="dryrun000001").run()
            # applied, skipped by detection, skipped by its plan, failed
            Maintenance(rec, str(ROOT / "plans"), catalog=CATALOG, thresholds=th, executor=DriverExecutor(),
                        run_id="nightly00001").run()
            Maintenance(rec, str(ROOT / "plans"), warehouse=str(ROOT / "wh"), executor=DriverExecutor(),
                        run_id="paimon000001").run()
    (HERE / "expected.json").write_text(json.dumps(outputs(journal), indent=1, sort_keys=True) + "\n")
    shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
