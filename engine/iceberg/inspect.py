"""What ``lakesweep inspect ns.table --catalog C`` reports: a read-only summary of an Iceberg table's metadata."""

from __future__ import annotations

from lakesweep.engine.iceberg.table import IcebergTable


def inspect_iceberg(table: IcebergTable) -> dict:
    """Format version, schema, partition spec, properties, snapshots, branches and tags, and the data and
    delete files the current snapshot reads versus those only older snapshots still reach (what snapshot
    expiry could free)."""
    md = table.metadata
    current = table.current_snapshot_id
    snapshots = [{"id": s.snapshot_id, "parent_id": s.parent_snapshot_id, "time_millis": s.timestamp_ms,
                  "operation": str(s.summary.operation.value) if s.summary is not None else None}
                 for s in sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.snapshot_id))]
    files: dict[int, dict[str, int]] = {}
    for sid in table.snapshots:
        files[sid] = {path: size or 0 for kind, path, size in table.snapshot_files(sid, live_only=True)
                      if kind.endswith("-file")}
    live = files.get(current, {}) if current is not None else {}
    older = {p: size for sid, f in files.items() if sid != current for p, size in f.items() if p not in live}
    refs = sorted(md.refs.items())
    return {
        "identifier": table.identifier,
        "catalog": table.catalog_name,
        "location": table.location,
        "metadata_location": table.metadata_location,
        "format_version": table.format_version,
        "schema": {"id": md.current_schema_id,
                   "fields": [{"name": f.name, "type": str(f.field_type)} for f in md.schema().fields]},
        "partition_spec": [str(f) for f in md.spec().fields],
        "properties": dict(sorted(table.options.items())),
        "snapshots": snapshots,
        "current_snapshot_id": current,
        "branches": [{"name": n, "snapshot_id": r.snapshot_id} for n, r in refs if str(r.snapshot_ref_type) == "branch"],
        "tags": [{"name": n, "snapshot_id": r.snapshot_id} for n, r in refs if str(r.snapshot_ref_type) == "tag"],
        "current_live": {"files": len(live), "bytes": sum(live.values())},
        "older_only": {"files": len(older), "bytes": sum(older.values())},
    }
