"""``gc.enabled=false`` is read from the live table at apply, whatever the plan header says: a plan whose
``iceberg.gc-enabled`` requirement was cut from the header (the id recomputed, as a forger with the plan file
can) deletes nothing on a table whose gc was disabled since planning."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.iceberg.requirements import AssertGcEnabled
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.iceberg.conftest import files_on_disk, write_history
from tests.iceberg.test_expire import apply
from tests.iceberg.test_expire import plan as plan_expire
from tests.iceberg.test_orphans import plan as plan_orphans
from tests.iceberg.test_orphans import stray

GC_DISABLED = "Iceberg table ns.t has gc.enabled=false: deleting its files may corrupt other tables, so nothing is deleted"


def without_gc_requirement(p):
    forged = replace(p, requirements=tuple(r for r in p.requirements if not isinstance(r, AssertGcEnabled)))
    assert len(forged.requirements) == len(p.requirements) - 1 and forged.plan_id != p.plan_id
    return forged


def disable_gc(lake) -> None:
    with lake.table().transaction() as tx:
        tx.set_properties({"gc.enabled": "false"})


def assert_refused_and_untouched(lake, forged, tmp_path, before_files, before_snapshots):
    with pytest.raises(PlanRejected) as e:
        apply(forged, tmp_path)
    assert str(e.value) == GC_DISABLED
    after = lake.table()
    assert files_on_disk(after) == before_files
    assert sorted(s.snapshot_id for s in after.metadata.snapshots) == before_snapshots
    with DuckDBRecorder(tmp_path / "j.duckdb") as rec:
        events = [ev.EVENT_TYPE for ev in rec.events(plan_id=forged.plan_id)]
        assert rec.file_records(plan_id=forged.plan_id) == []
    assert events == ["PlanRecorded", "ApplyRefused"]


def test_an_orphans_plan_without_the_gc_requirement_deletes_nothing_of_a_gc_disabled_table(lake, tmp_path):
    t = write_history(lake)
    left = stray(t, "data/x.parquet", days=5)
    p = plan_orphans(lake.view())
    assert [a.path for a in p.actions] == ["data/x.parquet"]
    forged = without_gc_requirement(p)
    disable_gc(lake)
    after = lake.table()
    assert left in files_on_disk(after)
    assert_refused_and_untouched(lake, forged, tmp_path, files_on_disk(after),
                                 sorted(s.snapshot_id for s in after.metadata.snapshots))


def test_an_expire_plan_without_the_gc_requirement_expires_and_deletes_nothing_of_a_gc_disabled_table(lake, tmp_path):
    write_history(lake)
    p = plan_expire(lake.view(), older_than="0 s")
    assert p.scope.expired and any(a.verb.deletes for a in p.actions)
    forged = without_gc_requirement(p)
    disable_gc(lake)
    after = lake.table()
    assert_refused_and_untouched(lake, forged, tmp_path, files_on_disk(after),
                                 sorted(s.snapshot_id for s in after.metadata.snapshots))
