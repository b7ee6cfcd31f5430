"""An Iceberg table's ``_lakesweep_quarantine`` is never part of the table: orphan removal on a table pyiceberg
wrote plans nothing there (old data files, manifests and ``*.metadata.json`` files a plan put aside), takes
no quarantined metadata file for another table's; a purge after the retention deletes exactly what an
apply with a quarantine put aside, and leaves the table whole."""

from __future__ import annotations

import os
import shutil

from lakesweep.engine.iceberg.table import canonical
from lakesweep.engine.quarantine import QUARANTINE_DIR
from tests.iceberg.conftest import write_history
from tests.iceberg.test_orphans import old, plan, stray

PLAN = "0123456789abcdef0123456789abcdef"


def quarantine(location: str) -> list[str]:
    """Copy every file of the table to ``<location>/_lakesweep_quarantine/<plan>/`` (metadata, manifests,
    data), 30 days old, as ``apply --quarantine`` leaves a plan's files; the copies' paths."""
    q = os.path.join(location, QUARANTINE_DIR, PLAN)
    copies = []
    for d, _, fs in os.walk(location):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), location)
            if rel.startswith(QUARANTINE_DIR + "/"):
                continue
            os.makedirs(os.path.dirname(os.path.join(q, rel)), exist_ok=True)
            shutil.copyfile(os.path.join(d, f), os.path.join(q, rel))
            copies.append(old(os.path.join(q, rel), 30))
    return sorted(copies)


def test_orphan_removal_leaves_the_quarantine_alone(lake):
    t = write_history(lake)
    dead = stray(t, "data/region=us/00000-dead.parquet")
    view = lake.view()
    before = plan(view)
    assert [a.path for a in before.actions] == ["data/region=us/00000-dead.parquet"]
    location = canonical(t.metadata.location)
    copies = quarantine(location)
    assert any(c.endswith(".metadata.json") for c in copies) and any("/data/region=" in c for c in copies)
    after = plan(lake.view())
    assert [a.path for a in after.actions] == ["data/region=us/00000-dead.parquet"]
    assert after.stats["kept"]["hidden"] == before.stats["kept"]["hidden"] + len(copies)
    assert os.path.exists(dead)


def test_an_iceberg_tables_quarantine_is_purged_after_its_retention(lake, tmp_path):
    from lakesweep.applier.apply import DriverExecutor, apply_plan
    from lakesweep.engine.quarantine import QuarantineSpec
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.journal.quarantined import quarantine_records
    from lakesweep.planner.kinds import plan_kind
    from lakesweep.planner.purge import resolve_purge_options
    from tests.iceberg.conftest import missing, rows_by_snapshot

    t = write_history(lake)
    stray(t, "data/region=us/00000-dead.parquet")
    stray(t, "metadata/compact-failed.avro")
    before = rows_by_snapshot(t)
    p = plan(lake.view())
    journal = str(tmp_path / "j.duckdb")
    with DuckDBRecorder(journal) as rec:
        report = apply_plan(p, rec, executor=DriverExecutor(), quarantine=QuarantineSpec(p.plan_id, retention_ms=0))
        assert report.counts["QUARANTINED"] == 2
        records = quarantine_records(rec)
    location = canonical(t.metadata.location)
    folder = os.path.join(location, QUARANTINE_DIR, p.plan_id)
    assert sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs) == [
        "data/region=us/00000-dead.parquet", "metadata/compact-failed.avro"]
    view = lake.view()
    entry = plan_kind("purge", "iceberg")
    purge = entry.read_and_plan(view, now_ms=max(q.due_ms for q in records),
                                options=resolve_purge_options(view.options, journal=journal, records=records))
    folder_rel = f"{QUARANTINE_DIR}/{p.plan_id}"
    assert sorted(a.path for a in purge.actions) == [folder_rel, *(f"{folder_rel}/{rel}" for rel in (
        "data", "data/region=us", "data/region=us/00000-dead.parquet", "metadata", "metadata/compact-failed.avro"))]
    with DuckDBRecorder(journal) as rec:
        done = apply_plan(purge, rec, executor=DriverExecutor())
    assert (done.state, done.counts["DELETED"], done.whole) == ("COMPLETED", 6, True)
    assert os.listdir(os.path.join(location, QUARANTINE_DIR)) == []
    after = lake.table()
    assert rows_by_snapshot(after) == before and missing(after) == set()
