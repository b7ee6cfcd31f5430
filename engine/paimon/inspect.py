"""What ``lakesweep inspect`` reports: a read-only summary of a table's metadata."""

from __future__ import annotations

from lakesweep.engine.errors import TableFormatError
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.table import PaimonTable


def _file_set(table: PaimonTable, snapshot) -> dict[str, int]:
    """Live data files (and their extra files) of a snapshot: path -> bytes (extra files count 0)."""
    paths = table.paths
    out = {}
    for e in table.live_entries(snapshot):
        out[paths.data_file(e.partition, e.bucket, e.file)] = e.file.file_size
        for x in e.file.extra_files:
            out.setdefault(paths.extra_file(e.partition, e.bucket, e.file, x), 0)
    return out


def inspect_table(table: PaimonTable) -> dict:
    """Schema, snapshots, hints, tags, consumers, branches, and live versus reclaimable files.

    Metadata that cannot be read is listed under ``problems`` (with the path) instead of being guessed.
    """
    schema = table.schema
    earliest, latest = table.earliest_latest()
    problems: list[str] = []

    def hint(name):
        try:
            return table.read_hint(name)
        except TableFormatError as e:
            problems.append(str(e))
            return None

    snapshots = []
    live_by_snapshot: dict[int, dict[str, int]] = {}
    for sid in table.list_snapshot_ids():
        try:
            s = table.snapshot(sid)
        except TableFormatError as e:
            problems.append(str(e))
            continue
        snapshots.append(
            {
                "id": s.id,
                "time_millis": s.time_millis,
                "commit_kind": s.commit_kind,
                "total_record_count": s.total_record_count,
                "delta_record_count": s.delta_record_count,
                "schema_id": s.schema_id,
            }
        )
        try:
            live_by_snapshot[sid] = _file_set(table, s)
        except TableFormatError as e:
            problems.append(f"snapshot {sid}: {e}")

    tags, tag_files = [], {}
    for name in table.tag_names():
        try:
            t = table.tag(name)
        except TableFormatError as e:
            problems.append(str(e))
            continue
        tags.append({"name": t.name, "snapshot_id": t.snapshot.id})
        try:
            tag_files.update(_file_set(table, t.snapshot))
        except TableFormatError as e:
            problems.append(f"tag '{name}': {e}")

    try:
        consumers = [{"id": c.consumer_id, "next_snapshot": c.next_snapshot} for c in table.consumers()]
    except TableFormatError as e:
        problems.append(str(e))
        consumers = []

    branches = []
    for name in table.branch_names():
        try:
            b = table.branch_table(name)
            e_, l_ = b.earliest_latest()
            branches.append({"name": name, "earliest": e_, "latest": l_, "tags": b.tag_names()})
        except TableFormatError as e:
            problems.append(str(e))

    live = live_by_snapshot.get(latest, {}) if latest is not None else {}
    older: dict[str, int] = {}
    for sid, files in live_by_snapshot.items():
        if sid != latest:
            for p, size in files.items():
                if p not in live:
                    older[p] = size
    older_tagged = {p: s for p, s in older.items() if p in tag_files}

    return {
        "location": table.location,
        "branch": table.branch,
        "schema": {
            "id": schema.id,
            "fields": [{"name": f.name, "type": f.type.raw} for f in schema.fields],
            "partition_keys": list(schema.partition_keys),
            "primary_keys": list(schema.primary_keys),
            "options": dict(sorted(schema.options.items())),
        },
        "snapshots": snapshots,
        "earliest": earliest,
        "latest": latest,
        "hints": {"EARLIEST": hint("EARLIEST"), "LATEST": hint("LATEST"), "dir": join(table.base, "snapshot")},
        "tags": tags,
        "consumers": consumers,
        "branches": branches,
        "latest_live": {"files": len(live), "bytes": sum(live.values())},
        "older_only": {
            "files": len(older),
            "bytes": sum(older.values()),
            "held_by_tags": {"files": len(older_tagged), "bytes": sum(older_tagged.values())},
        },
        "problems": problems,
    }
