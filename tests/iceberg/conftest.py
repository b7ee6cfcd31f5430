"""Iceberg tables written by pyiceberg through its SQL catalog on SQLite, and the checks that prove no data
changed: the rows of every snapshot, and every file the metadata needs in place."""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass

import pyarrow as pa
import pytest

pyiceberg = pytest.importorskip("pyiceberg")

from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402
from pyiceberg.types import LongType, NestedField, StringType  # noqa: E402

from lakesweep.engine.iceberg.table import IcebergTable, canonical  # noqa: E402

CATALOG = "lsice"
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False))
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
REGIONS = ("us", "eu", "ap")


@dataclass
class Lake:
    root: str
    catalog: SqlCatalog

    def table(self, ident="ns.t"):
        return self.catalog.load_table(ident)

    def view(self, ident="ns.t") -> IcebergTable:
        return IcebergTable(CATALOG, ident)


@pytest.fixture
def lake(tmp_path, monkeypatch) -> Lake:
    """A SQLite catalog named ``lsice`` in ``tmp_path``, configured through pyiceberg's environment variables
    (as a user configures lakesweep), with namespace ``ns``."""
    return make_lake(tmp_path / "lake", monkeypatch)


def make_lake(root, monkeypatch) -> Lake:
    """The ``lake`` fixture's catalog, under ``root``."""
    root = str(root)
    os.makedirs(root + "/wh")
    env = {"URI": f"sqlite:///{root}/catalog.db", "WAREHOUSE": f"file://{root}/wh", "TYPE": "sql"}
    for key, value in env.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__{key}", value)
    catalog = SqlCatalog(CATALOG, uri=env["URI"], warehouse=env["WAREHOUSE"])
    catalog.create_namespace("ns")
    return Lake(root, catalog)


def batch(start: int, n: int = 6) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "region": [REGIONS[i % 3] for i in ids]})


def write_history(lake: Lake, ident="ns.t", *, appends=8, churn=True, properties=None):
    """A partitioned table with ``appends`` small appends, then (``churn``) a delete and an overwrite, both
    copy-on-write: manifests, files deleted by later snapshots, files only old snapshots read."""
    t = lake.catalog.create_table(ident, schema=SCHEMA, partition_spec=SPEC, properties=properties or {})
    for i in range(appends):
        t.append(batch(i * 10))
    if churn:
        t.delete("id < 13")
        t.overwrite(batch(500, 3).filter(pa.compute.equal(batch(500, 3)["region"], "us")),
                    overwrite_filter="region = 'us'")
    return lake.table(ident)


def rows_by_snapshot(table) -> dict[int, collections.Counter]:
    """Every snapshot's rows, as pyiceberg's own scan returns them, as a multiset."""
    out = {}
    for s in table.metadata.snapshots:
        data = table.scan(snapshot_id=s.snapshot_id).to_arrow()
        out[s.snapshot_id] = collections.Counter(zip(*(data.column(c).to_pylist() for c in data.column_names)))
    return out


def needed_files(table, *, without=frozenset()) -> set[str]:
    """What the metadata needs: metadata files, each snapshot's list, manifests, their live entries' files,
    statistics files (of every snapshot but those ``without``)."""
    needed = {canonical(table.metadata_location)} | {canonical(e.metadata_file) for e in table.metadata.metadata_log}
    for s in table.metadata.snapshots:
        if s.snapshot_id in without:
            continue
        needed.add(canonical(s.manifest_list))
        for m in s.manifests(table.io):
            needed.add(canonical(m.manifest_path))
            needed |= {canonical(e.data_file.file_path) for e in m.fetch_manifest_entry(table.io, discard_deleted=True)}
    needed |= {canonical(f.statistics_path) for f in table.metadata.statistics}
    needed |= {canonical(f.statistics_path) for f in table.metadata.partition_statistics}
    return needed


def files_on_disk(table) -> set[str]:
    root = canonical(table.metadata.location)
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def missing(table) -> set[str]:
    return needed_files(table) - files_on_disk(table)


def unlisted_manifests(table) -> set[str]:
    """Manifests and manifest lists in the metadata directory that no snapshot names."""
    return {f for f in files_on_disk(table) if "/metadata/" in f and f.endswith(".avro")} - needed_files(table)


def raced_committer(plan, race, *, races: int, producer, monkeypatch):
    """An ``IcebergCommitter`` that loses a race: ``race(attempt)`` commits a write between each attempt's
    read of the table and the catalog's check, for the first ``races`` attempts. Its ``reads`` and
    ``writes`` count the manifests each attempt reads and the ``producer`` class writes."""
    from pyiceberg.manifest import ManifestFile

    from lakesweep.engine.iceberg.commit import IcebergCommitter

    class Raced(IcebergCommitter):
        def _requirements(self, table):
            if self.attempts <= races:
                race(self.attempts)
            return super()._requirements(table)

    committer = Raced(plan, sleep=lambda s: None)
    committer.reads, committer.writes = collections.Counter(), collections.Counter()
    fetch, output = ManifestFile.fetch_manifest_entry, producer.new_manifest_output

    def counted_read(manifest, io, discard_deleted=True):
        committer.reads[committer.attempts] += 1
        return fetch(manifest, io, discard_deleted=discard_deleted)

    def counted_write(self):
        committer.writes[committer.attempts] += 1
        return output(self)

    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", counted_read)
    monkeypatch.setattr(producer, "new_manifest_output", counted_write)
    return committer
