"""The weed mini Iceberg fixture: REST catalog over S3 with pyiceberg, and SeaweedFS's own maintenance worker."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pytest

from tests.support.seaweed_iceberg import (
    SeaweedError,
    WeedMini,
    create_table_bucket,
    run_iceberg_maintenance,
    weed_mini,
)

BUCKET = "lake"


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeedMini]:
    with weed_mini(str(tmp_path_factory.mktemp("weedmini"))) as m:
        assert create_table_bucket(m, BUCKET) == f"arn:aws:s3tables:us-east-1:000000000000:bucket/{BUCKET}"
        yield m


def _schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(NestedField(1, "id", LongType(), required=False),
                  NestedField(2, "region", StringType(), required=False))


def _spec():
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    return PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def _batch(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i * 10 + j for j in range(5)], pa.int64()),
                     "region": ["us", "eu", "us", "ap", "eu"]})


def _make_table(mini: WeedMini, namespace: str, n_appends: int):
    """A table partitioned by region, one snapshot (3 data files, one manifest) per append."""
    cat = mini.catalog(BUCKET)
    cat.create_namespace(namespace)
    table = cat.create_table(f"{namespace}.t", schema=_schema(), partition_spec=_spec())
    for i in range(n_appends):
        table.append(_batch(i))
    return cat, cat.load_table(f"{namespace}.t")


def _rows(table) -> list[tuple[int, str]]:
    data = table.scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column("region").to_pylist()))


def _expected_rows_of(i: int) -> list[tuple[int, str]]:
    return list(zip(_batch(i).column("id").to_pylist(), _batch(i).column("region").to_pylist()))


def _expected_rows(n_appends: int) -> list[tuple[int, str]]:
    return sorted(r for i in range(n_appends) for r in _expected_rows_of(i))


def test_rest_catalog_writes_and_reads_a_partitioned_table(mini: WeedMini, monkeypatch: pytest.MonkeyPatch) -> None:
    cat, table = _make_table(mini, "roundtrip", n_appends=3)

    assert table.location() == f"s3://{BUCKET}/roundtrip/t"
    assert len(table.metadata.snapshots) == 3
    assert [len(s.manifests(table.io)) for s in table.metadata.snapshots] == [1, 2, 3]
    assert _rows(table) == _expected_rows(3)
    assert table.scan(row_filter="region = 'ap'").to_arrow().num_rows == 3

    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    for key, value in mini.pyiceberg_env("sweep", BUCKET).items():
        monkeypatch.setenv(key, value)
    # pyiceberg reads its environment once, at import; a process started with these variables needs no reload.
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())
    assert _rows(pyiceberg.catalog.load_catalog("sweep").load_table("roundtrip.t")) == _expected_rows(3)


def test_rest_catalog_refuses_a_wrong_secret(mini: WeedMini) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import OAuthError

    props = {**mini.catalog_properties(BUCKET), "credential": f"{mini.access_key}:wrong"}
    with pytest.raises(OAuthError, match="invalid_client: Invalid client credentials"):
        RestCatalog("bad", **props)


def test_second_table_bucket_with_the_same_name_is_refused(mini: WeedMini) -> None:
    with pytest.raises(SeaweedError, match=f"bucket name {BUCKET} is already used"):
        create_table_bucket(mini, BUCKET)


def test_worker_keeps_snapshots_younger_than_its_retention_hours(mini: WeedMini) -> None:
    cat, table = _make_table(mini, "young", n_appends=4)

    with pytest.raises(SeaweedError, match="the detector proposed no iceberg_maintenance job"):
        run_iceberg_maintenance(mini, operations="expire_snapshots", bucket=BUCKET, namespace="young", table="t",
                                config={"max_snapshots_to_keep": 2, "snapshot_retention_hours": 1})

    assert len(cat.load_table("young.t").metadata.snapshots) == 4


def test_worker_expires_all_but_the_newest_two_snapshots(mini: WeedMini) -> None:
    cat, table = _make_table(mini, "expire", n_appends=5)
    # The worker's retention is whole hours; the table property overrides it (table_properties_override).
    with table.transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": "1"})
    table = cat.load_table("expire.t")
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)
    assert len(snapshots) == 5

    job = run_iceberg_maintenance(mini, operations="expire_snapshots", bucket=BUCKET, namespace="expire",
                                  table="t", config={"max_snapshots_to_keep": 2, "snapshot_retention_hours": 1})

    assert (job.succeeded, job.bucket, job.namespace, job.table) == (True, BUCKET, "expire", "t")
    # Appends only: every manifest and data file is still referenced by the two kept snapshots, so only
    # the three expired manifest lists are unreferenced.
    assert job.messages == {"expire_snapshots": "expired 3 snapshot(s), deleted 3 unreferenced file(s)"}
    assert job.outputs["expire_snapshots.snapshots_expired"] == 3
    assert job.outputs["expire_snapshots.files_deleted"] == 3

    after = cat.load_table("expire.t")
    assert [s.snapshot_id for s in after.metadata.snapshots] == [s.snapshot_id for s in snapshots[3:]]
    assert after.current_snapshot().snapshot_id == snapshots[-1].snapshot_id
    assert [after.io.new_input(s.manifest_list).exists() for s in snapshots] == [False] * 3 + [True] * 2
    assert _rows(after) == _expected_rows(5)


def _referenced(table, snapshots) -> set[str]:
    """Manifest lists, manifests and every manifest entry's file, DELETED entries included: the worker's
    reference set (``collectSnapshotFiles`` in weed/worker/tasks/iceberg/operations.go)."""
    files = set()
    for snap in snapshots:
        files.add(snap.manifest_list)
        for manifest in snap.manifests(table.io):
            files.add(manifest.manifest_path)
            files.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False))
    return files


def test_worker_keeps_data_files_a_kept_snapshot_records_as_deleted(mini: WeedMini) -> None:
    cat, table = _make_table(mini, "deleted", n_appends=3)
    us_files = {t.file.file_path for t in table.scan(row_filter="region = 'us'").plan_files()}
    table.delete("region = 'us'")  # whole files: the us files become DELETED entries of the new manifests
    table = cat.load_table("deleted.t")
    table.append(_batch(3))
    with table.transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": "1"})
    table = cat.load_table("deleted.t")
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)
    assert len(snapshots) == 5 and len(us_files) == 3
    expired, kept = snapshots[:3], snapshots[3:]
    unreferenced = _referenced(table, expired) - _referenced(table, kept)
    assert us_files <= _referenced(table, kept)
    # The three expired manifest lists, and the three append manifests the delete rewrote (each held a us file).
    assert len(unreferenced) == 6
    assert sum(f.endswith(".parquet") for f in unreferenced) == 0

    job = run_iceberg_maintenance(mini, operations="expire_snapshots", bucket=BUCKET, namespace="deleted",
                                  table="t", config={"max_snapshots_to_keep": 2, "snapshot_retention_hours": 1})

    assert job.messages == {"expire_snapshots": f"expired 3 snapshot(s), deleted {len(unreferenced)} "
                                                f"unreferenced file(s)"}
    after = cat.load_table("deleted.t")
    assert [s.snapshot_id for s in after.metadata.snapshots] == [s.snapshot_id for s in kept]
    assert not any(after.io.new_input(f).exists() for f in unreferenced)
    # The worker counts DELETED entries as references (iceberg.ReadManifest(..., discardDeleted=false)), so
    # files that only a kept snapshot's DELETED entries name survive the expiry.
    assert all(after.io.new_input(f).exists() for f in us_files)
    assert _rows(after) == sorted([r for r in _expected_rows(3) if r[1] != "us"] + _expected_rows_of(3))


def test_worker_rewrites_the_current_manifests_into_one(mini: WeedMini) -> None:
    cat, table = _make_table(mini, "manifests", n_appends=4)
    assert len(table.current_snapshot().manifests(table.io)) == 4

    job = run_iceberg_maintenance(mini, operations="rewrite_manifests", bucket=BUCKET, namespace="manifests",
                                  table="t", config={"min_manifests_to_rewrite": 2}, enable=True)

    assert job.succeeded
    assert job.messages == {"rewrite_manifests": "rewrote 4 manifests into 1 (12 entries)"}
    assert job.outputs["rewrite_manifests.manifests_rewritten"] == 4
    assert job.outputs["rewrite_manifests.entries_total"] == 12
    after = cat.load_table("manifests.t")
    manifests = after.current_snapshot().manifests(after.io)
    assert [(m.partition_spec_id, m.content.name) for m in manifests] == [(0, "DATA")]
    assert len(after.metadata.snapshots) == 5
    assert _rows(after) == _expected_rows(4)
