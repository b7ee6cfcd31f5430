"""Orphan planning compares locations in one form: ``s3a://`` and ``s3n://`` are ``s3://`` (Iceberg's
``equal_schemes`` default), and a used path spelled with another bucket refuses the plan (Iceberg's
``prefix_mismatch_mode=ERROR``). A stub view stands in for the table: these are rules about names."""

from __future__ import annotations

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import FileInfo
from lakesweep.engine.iceberg.table import canonical
from lakesweep.planner.iceberg.orphans import (metadata_to_read, metadata_version, plan_iceberg_orphans,
                                               resolve_orphan_options)

NOW = 10 * 86_400_000
OLD = 1_000


class StubView:
    """What orphan planning reads of a table; every location as the metadata spells it."""

    catalog_name, identifier, uuid, location = "c", "ns.t", "u-1", "s3://lake/t"
    current_snapshot_id = 1
    options: dict = {}

    def __init__(self, used: list[str]):
        self.used = [canonical(u) for u in used]  # IcebergTable reads every location through canonical()
        self.snapshots = {1: object()}

    def gc_enabled(self):
        return True

    def external_roots(self):
        return []

    def partition_specs(self):
        return []

    def refs(self):
        return {"main": 1}

    def metadata_files(self):
        return [canonical("s3a://lake/t/metadata/00003-abc.metadata.json")]

    def statistics_files(self, snapshot_id=None):
        return []

    def prefetch_snapshots(self, snapshot_ids):
        pass  # its locations are in memory already

    def snapshot_files(self, sid, *, live_only):
        for u in self.used:
            yield "data-file", u, 1


def plan(view, listed):
    return plan_iceberg_orphans(view, [FileInfo(p, 1, OLD) for p in listed], now_ms=NOW,
                                options=resolve_orphan_options({}))


def test_s3a_and_s3n_spellings_in_the_metadata_are_the_listed_s3_files():
    view = StubView(["s3a://lake/t/data/a.parquet", "s3n://lake/t/data/b.parquet"])
    p = plan(view, ["s3://lake/t/data/a.parquet", "s3://lake/t/data/b.parquet", "s3://lake/t/data/c.parquet",
                    "s3://lake/t/metadata/00003-abc.metadata.json"])
    assert [a.path for a in p.actions] == ["data/c.parquet"]


def test_a_used_path_in_another_bucket_refuses_the_plan():
    view = StubView(["s3://elsewhere/t/data/a.parquet"])
    with pytest.raises(PlanRejected, match="the same path with another scheme or bucket"):
        plan(view, ["s3://lake/t/data/a.parquet"])


def test_metadata_file_versions_are_read_from_each_naming_scheme():
    assert metadata_version("00012-5e3b1a2c-0000-0000-0000-000000000000.metadata.json") == 12
    assert metadata_version("v7.metadata.json") == 7
    assert metadata_version("v8-1718000000000000000.metadata.json") == 8
    assert metadata_version("00004-abc.gz.metadata.json") == 4
    assert metadata_version("random.metadata.json") is None


def test_only_this_tables_metadata_newer_than_the_log_is_kept():
    view = StubView([])
    listed = ["s3://lake/t/metadata/random.metadata.json", "s3://lake/t/metadata/00001-x.metadata.json",
              "s3://lake/t/metadata/00004-ours.metadata.json", "s3://lake/t/metadata/00005-theirs.metadata.json",
              "s3://lake/t/metadata/00006-junk.metadata.json", "s3://lake/t/metadata/v7.metadata.json"]
    # What the engine read of each file the rule asks about: its table-uuid, None when it does not parse.
    owners = {"s3://lake/t/metadata/random.metadata.json": "u-1",
              "s3://lake/t/metadata/00004-ours.metadata.json": "u-1",
              "s3://lake/t/metadata/00005-theirs.metadata.json": "u-2",
              "s3://lake/t/metadata/00006-junk.metadata.json": None}
    assert metadata_to_read(view, [FileInfo(p, 1, OLD) for p in listed]) == sorted(set(listed) - {
        "s3://lake/t/metadata/00001-x.metadata.json"})  # version 1 is older than the log's oldest (3): no read
    current = view.metadata_files()[0]  # a listing that misses it would be incomplete
    p = plan_iceberg_orphans(view, [FileInfo(p, 1, OLD) for p in [*listed, current]], now_ms=NOW,
                             options=resolve_orphan_options({}), metadata_owners=owners)
    assert [a.path for a in p.actions] == ["metadata/00001-x.metadata.json", "metadata/00005-theirs.metadata.json",
                                           "metadata/00006-junk.metadata.json", "metadata/v7.metadata.json"]
    assert p.stats["kept"]["newer_metadata"] == 2  # ours (4 > 3), and random (this table's, no version to order)
