"""Real tables, written by pypaimon and pyiceberg, and a plan of every kind the HTML report draws."""

from __future__ import annotations

import os
import time
from pathlib import Path

from typer.testing import CliRunner

from lakesweep.cli.main import app
from tests.support import pypaimon_tables as pt

NOW = "2100-01-01T00:00:00Z"
CUT_MS = 1_704_196_800_000  # 2024-01-02T12:00:00Z: partitions before it are dropped
OLD_MS = 946_684_800_000  # 2000-01-01: the modification time of the stray files orphan cleaning finds
CATALOG = "lsreport"


def run(*args) -> str:
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.output


def paimon_plans(root: Path) -> dict[str, Path]:
    """An append table (tags, a consumer, three dt partitions and one whose value is no date) with stray
    files, and its expire, orphans and partitions plans. The partitions plan drops the partitions before
    2024-01-02 12:00 UTC: dt=2024-01-01 and dt=2024-01-02."""
    table = pt.write_append_table(str(root / "wh"), commits=8)
    pt._commit(pt._catalog(str(root / "wh")).get_table(f"{pt.DATABASE}.append_t"),
               [{"id": 1000, "name": "late", "amount": 1.0, "dt": "someday"}], pt.APPEND_SCHEMA)
    for i, dt in enumerate(("2024-01-01", "2024-01-02", "2024-01-03")):
        for j in range(i + 1):
            stray = Path(table.path) / f"dt={dt}" / "bucket-0" / f"data-stray-{j}.parquet"
            stray.write_bytes(b"x" * (1000 * (j + 1) * (i + 1)))
            os.utime(stray, ns=((OLD_MS + j * 86_400_000 * 30) * 1_000_000,) * 2)
    out = {k: root / f"paimon-{k}.parquet" for k in ("expire", "orphans", "partitions", "consumers", "tags",
                                                     "changelog")}
    run("plan", "expire", table.path, "--out", out["expire"], "--now", NOW, "--retain-min", 2,
        "--time-retained", "0 s")
    run("plan", "orphans", table.path, "--out", out["orphans"], "--older-than", "2010-01-01T00:00:00Z")
    run("plan", "consumers", table.path, "--out", out["consumers"], "--expiration-time", "7 d")
    run("plan", "tags", table.path, "--out", out["tags"], "--tag", "t_early")
    run("plan", "changelog", table.path, "--out", out["changelog"])
    hours = int((time.time() * 1000 - CUT_MS) // 3_600_000)
    run("plan", "partitions", table.path, "--out", out["partitions"], "--expiration-time", f"{hours} h",
        "--time-zone", "UTC")
    return out


def iceberg_plans(root: Path, monkeypatch) -> dict[str, Path]:
    """A partitioned Iceberg table of many small appends, a tag and a branch, and its expire and compact
    plans."""
    from pyiceberg.catalog.sql import SqlCatalog

    from tests.support import iceberg_tables as it

    root.mkdir(parents=True, exist_ok=True)
    for key, value in it.catalog_env(str(root), CATALOG).items():
        monkeypatch.setenv(key, value)
    catalog = it.sql_catalog(str(root), CATALOG)
    assert isinstance(catalog, SqlCatalog)
    catalog.create_namespace("ns")
    built = it.many_appends(catalog, "ns.t", n=12)
    table = catalog.load_table("ns.t")
    snaps = [s.snapshot_id for s in table.metadata.snapshots]
    table.manage_snapshots().create_tag(snaps[3], "release-1").create_branch(snaps[6], "audit").commit()
    out = {k: root / f"iceberg-{k}.parquet" for k in ("expire", "compact", "orphans", "rewrite-manifests")}
    run("plan", "expire", "ns.t", "--catalog", CATALOG, "--out", out["expire"], "--retain-last", 3,
        "--older-than", "2030-01-01T00:00:00Z")
    run("plan", "orphans", "ns.t", "--catalog", CATALOG, "--out", out["orphans"], "--older-than", "3 d")
    run("plan", "rewrite-manifests", "ns.t", "--catalog", CATALOG, "--out", out["rewrite-manifests"],
        "--min-manifests", 2)
    run("plan", "compact", "ns.t", "--catalog", CATALOG, "--out", out["compact"], "--target-file-size-mb", 1,
        "--min-input-files", 2)
    return out
