"""An Iceberg table's ``_lakesweep_quarantine`` is never part of the table: orphan removal on a table pyiceberg
wrote plans nothing there (old data files, manifests and ``*.metadata.json`` files a plan put aside), takes
no quarantined metadata file for another table's."""

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
