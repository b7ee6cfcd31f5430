"""The reference the Iceberg manifest decoder is checked against: manifest lists read by pyiceberg
(``Snapshot.manifests``) and manifests decoded whole, every record a dict, by fastavro, each reduced to the
values ``engine.iceberg.table`` gives (``ManifestRef``, ``FileRef``) the plainest way."""

from __future__ import annotations

from io import BytesIO

import fastavro

from lakesweep.engine.iceberg.table import FileRef, ManifestRef, canonical


def manifest_refs(table, snapshot) -> tuple[ManifestRef, ...]:
    """The manifests a snapshot lists, as pyiceberg reads its manifest list."""
    return tuple(ManifestRef(canonical(m.manifest_path), int(m.content), int(m.manifest_length),
                             int(m.partition_spec_id), m.added_snapshot_id,
                             sum(x or 0 for x in (m.added_files_count, m.existing_files_count, m.deleted_files_count)),
                             m.has_added_files() or m.has_existing_files())
                 for m in snapshot.manifests(table.io))


def file_refs(table, manifest_location: str) -> tuple[FileRef, ...]:
    """Every entry of a manifest, all statuses: whole records decoded by fastavro, then their fields."""
    with table.io.new_input(manifest_location).open() as stream:
        records = list(fastavro.reader(BytesIO(stream.read())))
    out = []
    for r in records:
        f = r["data_file"]
        partition = "/".join("null" if v is None else str(v) for v in (f.get("partition") or {}).values())
        out.append(FileRef(canonical(f["file_path"]), int(f.get("content") or 0), int(f["file_size_in_bytes"]),
                           int(r["status"]), partition))
    return tuple(out)


def every_manifest(table) -> dict[str, str]:
    """Canonical location -> location as spelled, of every manifest any snapshot lists."""
    return {canonical(m.manifest_path): m.manifest_path
            for s in table.metadata.snapshots for m in s.manifests(table.io)}
