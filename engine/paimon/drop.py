"""Dropping partitions of a Paimon table as one OVERWRITE commit (``FileStoreCommitImpl#dropPartitions``).

``drop_partitions`` marks every live file of the partitions DELETE in a snapshot of kind OVERWRITE; nothing
is deleted. Each attempt works on the latest snapshot as it is then: it finds a snapshot this commit already
made (same commit user and identifier) instead of making it twice, refuses (``PartitionsChanged``) when the
partitions' live files are not those the caller expects, publishes ``snapshot-<latest+1>`` only if no
snapshot has that id, and when another commit took the id removes what it wrote and tries again, a bounded
number of times. How entries and manifests are written: docs/design/paimon-tables.md#partition-drop-commits.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from lakesweep.engine.errors import CorruptMetadata, LakesweepError, StalePlan
from lakesweep.engine.fileio import join
from lakesweep.engine.paimon.partition import BinaryRowError, decode_binary_row, partition_path, partition_spec
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.engine.paimon.writer import AvroFile, MetadataWriter, read_avro

ADD, DELETE = 0, 1

DEFAULT_MAX_RETRIES = 10  # Paimon's commit.max-retries


class PartitionsChanged(StalePlan):
    """The partitions to drop no longer hold the files the plan drops."""


class CommitRetriesExhausted(LakesweepError):
    """Other commits kept taking the next snapshot id."""


@dataclass(frozen=True)
class DropResult:
    snapshot_id: int
    already: bool  # found committed by an earlier attempt (a resumed apply)
    files: int = 0
    rows: int = 0


@dataclass
class _Live:
    """The live ADD entries of the target partitions, each with the manifest that added it."""

    entries: dict[tuple, tuple[dict, str]] = field(default_factory=dict)  # identifier -> (record, manifest)


def _identifier(rec: Mapping[str, Any]) -> tuple:
    """``FileEntry.Identifier``: what a DELETE must repeat to cancel an ADD."""
    f = rec["_FILE"]
    return (bytes(rec["_PARTITION"]), int(rec["_BUCKET"]), int(f["_LEVEL"]), f["_FILE_NAME"],
            tuple(f.get("_EXTRA_FILES") or ()), f.get("_EMBEDDED_FILE_INDEX"), f.get("_EXTERNAL_PATH"))


class _Reader:
    """Raw reads of one table's metadata files for one attempt."""

    def __init__(self, table: PaimonTable):
        self.table = table
        self.fileio = table.fileio
        self.manifest_dir = join(table.location, "manifest")
        self._avro: dict[str, AvroFile] = {}

    def avro(self, name: str) -> AvroFile:
        found = self._avro.get(name)
        if found is None:
            path = join(self.manifest_dir, name)
            try:
                data = self.fileio.read_bytes(path)
            except FileNotFoundError as e:
                raise CorruptMetadata(path, "the manifest file a snapshot names does not exist") from e
            found = self._avro[name] = read_avro(path, data)
        return found

    def snapshot_json(self, snapshot_id: int) -> dict:
        path = self.table.snapshot_path(snapshot_id)
        try:
            return json.loads(self.fileio.read_bytes(path).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CorruptMetadata(path, f"malformed snapshot JSON: {e}") from e


def find_commit(table: PaimonTable, commit_user: str, commit_identifier: int, *, after: int) -> int | None:
    """The id of a snapshot newer than ``after`` committed as OVERWRITE by ``commit_user`` under
    ``commit_identifier``; None when there is none (as far back as snapshots are still kept)."""
    earliest, latest = table.earliest_latest()
    if latest is None:
        return None
    for sid in range(max(after + 1, earliest or 1), latest + 1):
        snap = table.try_snapshot(sid)
        if (snap is not None and snap.commit_user == commit_user and snap.commit_identifier == commit_identifier
                and snap.commit_kind == "OVERWRITE"):
            return sid
    return None


def drop_partitions(
    table: PaimonTable,
    partitions: Iterable[tuple],
    *,
    expected: Mapping[str, frozenset[tuple[int, str]]] | None,
    commit_user: str,
    commit_identifier: int,
    after: int,
    clock: Callable[[], int] = lambda: int(time.time() * 1000),
    max_retries: int = DEFAULT_MAX_RETRIES,
    sleep: Callable[[float], None] = time.sleep,
) -> DropResult:
    """Commit one OVERWRITE snapshot that drops ``partitions`` (decoded partition value tuples) of the
    table's main branch. ``expected``: for each partition, the (bucket, file name) pairs it must hold
    live, else ``PartitionsChanged`` and nothing is written (None: whatever it holds). ``after``: the
    snapshot the drop was planned on; a commit of this user and identifier after it is the drop, done.
    ``expected`` is keyed by partition name (``partition_name``).
    """
    targets = frozenset(partitions)
    if not targets:
        raise ValueError("no partitions to drop")
    types = table.schema.partition_types
    for attempt in range(max_retries + 1):
        view = table.refreshed()
        found = find_commit(view, commit_user, commit_identifier, after=after)
        if found is not None:
            return DropResult(found, already=True)
        _, latest = view.earliest_latest()
        if latest is None:
            raise PartitionsChanged(f"the table {table.location} has no snapshot any more; nothing was committed")
        reader = _Reader(view)
        prev = reader.snapshot_json(latest)
        live = _live_in(reader, prev, targets, types)
        _check_expected(live, expected, types, view)
        writer = MetadataWriter(view.fileio, reader.manifest_dir, view.snapshot_dir)
        try:
            snapshot, files, rows = _new_snapshot(reader, writer, prev, live, targets, types, view,
                                                  commit_user=commit_user, commit_identifier=commit_identifier,
                                                  now_ms=clock())
            if writer.publish(snapshot):
                return DropResult(int(snapshot["id"]), already=False, files=files, rows=rows)
        except BaseException:
            # Remove what this attempt wrote, unless its snapshot made it to the table (a failure after the
            # snapshot file was created): then the files are the table's.
            if find_commit(table.refreshed(), commit_user, commit_identifier, after=latest) is None:
                writer.discard()
            raise
        writer.discard()  # another commit took the id: start again from the new latest snapshot
        if attempt < max_retries:
            sleep(_backoff(attempt))
    raise CommitRetriesExhausted(
        f"other commits took the next snapshot id of {table.location} {max_retries + 1} times in a row; "
        "nothing was committed. Apply again (it resumes) when the table is quieter.")


def _backoff(attempt: int) -> float:
    """Paimon's ``RetryWaiter``: min(10 ms * 2^n, 10 s) plus up to 20 % jitter, in seconds."""
    base = min(0.010 * (2 ** attempt), 10.0)
    return base + random.uniform(0, base * 0.2)


def _partition_of(cache: dict, raw: bytes, types) -> tuple:
    found = cache.get(raw)
    if found is None:
        try:
            found = cache[raw] = tuple(decode_binary_row(raw, types))
        except BinaryRowError as e:
            raise CorruptMetadata(raw.hex(), f"partition bytes do not decode: {e}") from e
    return found


def _live_in(reader: _Reader, prev: dict, targets: frozenset, types) -> _Live:
    """``FileEntry.mergeEntries`` over the base and delta manifests, restricted to ``targets``."""
    live = _Live()
    decoded: dict[bytes, tuple] = {}
    for list_name in (prev["baseManifestList"], prev["deltaManifestList"]):
        for meta in reader.avro(list_name).records:
            name = meta["_FILE_NAME"]
            for rec in reader.avro(name).records:
                if _partition_of(decoded, bytes(rec["_PARTITION"]), types) not in targets:
                    continue
                ident = _identifier(rec)
                if rec["_KIND"] == ADD:
                    if ident in live.entries:
                        raise CorruptMetadata(join(reader.manifest_dir, name),
                                              f"file {rec['_FILE']['_FILE_NAME']} is added twice")
                    live.entries[ident] = (rec, name)
                else:
                    live.entries.pop(ident, None)
    return live


def _check_expected(live: _Live, expected, types, view: PaimonTable) -> None:
    """The live files of the target partitions, by partition name, must be ``expected`` exactly. By name:
    a null and an empty-string value are two partitions that share one name and one directory, and a plan
    lists their files under that name."""
    if expected is None:
        return
    decoded: dict[bytes, tuple] = {}
    now: dict[str, set] = {name: set() for name in expected}
    for rec, _ in live.entries.values():
        name = partition_name(view, _partition_of(decoded, bytes(rec["_PARTITION"]), types))
        now.setdefault(name, set()).add((int(rec["_BUCKET"]), rec["_FILE"]["_FILE_NAME"]))
    changed = []
    for name in sorted(now):
        have, want = now[name], set(expected.get(name, ()))
        if have != want:
            changed.append(f"partition {name} holds {len(have)} live files, {len(have - want)} of them not in "
                           f"the plan, and {len(want - have)} planned files are no longer live")
    if changed:
        raise PartitionsChanged("; ".join(changed) + "; nothing was committed")


def partition_name(table: PaimonTable, values: tuple) -> str:
    """``k1=v1/k2=v2`` of decoded partition values, as the table's paths render them."""
    paths = table.paths
    spec = partition_spec(values, paths.partition_keys, paths.partition_types, legacy=paths.legacy,
                          default_name=paths.default_name)
    return partition_path(spec).rstrip("/")


def _new_snapshot(reader: _Reader, writer: MetadataWriter, prev: dict, live: _Live, targets, types,
                  view: PaimonTable, *, commit_user: str, commit_identifier: int, now_ms: int):
    # DELETE manifests: one per manifest that added a dropped file, in its schema and codec.
    by_source: dict[str, list[dict]] = {}
    for rec, source in live.entries.values():
        by_source.setdefault(source, []).append(dict(rec, _KIND=DELETE))
    source_meta: dict[str, dict] = {}
    lists = {n: reader.avro(n) for n in (prev["baseManifestList"], prev["deltaManifestList"])}
    for avro in lists.values():
        for meta in avro.records:
            source_meta.setdefault(meta["_FILE_NAME"], meta)
    delta_metas = []
    rows = 0
    for source in sorted(by_source):
        records = by_source[source]
        src = reader.avro(source)
        name, size = writer.write("manifest", src.schema, records, src.codec)
        rows += sum(int(r["_FILE"]["_ROW_COUNT"]) for r in records)
        delta_metas.append(dict(source_meta[source], _FILE_NAME=name, _FILE_SIZE=size, _NUM_ADDED_FILES=0,
                                _NUM_DELETED_FILES=len(records)))
    base_avro, delta_avro = lists[prev["baseManifestList"]], lists[prev["deltaManifestList"]]
    list_schema, list_codec = _list_schema(base_avro, delta_avro)
    base_name, base_size = writer.write("manifest-list", list_schema, base_avro.records + delta_avro.records,
                                        list_codec)
    delta_name, delta_size = writer.write("manifest-list", list_schema, delta_metas, list_codec)
    index_manifest = _index_manifest(reader, writer, prev.get("indexManifest"), targets, types)

    snap: dict[str, Any] = {"version": prev.get("version", 3), "id": int(prev["id"]) + 1,
                            "schemaId": view.schema.id, "baseManifestList": base_name}
    sized = "baseManifestListSize" in prev  # written by a Paimon that records list sizes
    if sized:
        snap["baseManifestListSize"] = base_size
    snap["deltaManifestList"] = delta_name
    if sized:
        snap["deltaManifestListSize"] = delta_size
    snap["changelogManifestList"] = None
    if sized:
        snap["changelogManifestListSize"] = None
    if index_manifest is not None:
        snap["indexManifest"] = index_manifest
    snap.update({"commitUser": commit_user, "commitIdentifier": commit_identifier, "commitKind": "OVERWRITE",
                 "timeMillis": now_ms, "logOffsets": {}})
    total = prev.get("totalRecordCount")
    snap["totalRecordCount"] = None if total is None else int(total) - rows
    snap["deltaRecordCount"] = -rows
    snap["changelogRecordCount"] = 0
    if prev.get("watermark") is not None:
        snap["watermark"] = prev["watermark"]  # Java keeps the larger of the commit's (none) and the latest's
    if prev.get("statistics") is not None and int(prev["schemaId"]) == view.schema.id:
        snap["statistics"] = prev["statistics"]  # inherited while the schema is unchanged
    if prev.get("nextRowId") is not None:
        snap["nextRowId"] = prev["nextRowId"]
    return snap, len(live.entries), rows


def _list_schema(base: AvroFile, delta: AvroFile):
    """The schema the new lists are written with: the previous lists', or the wider of the two when
    different Paimon versions wrote them (the fields later versions add are optional)."""
    if base.schema == delta.schema:
        return base.schema, base.codec
    wider = base if len(base.schema["fields"]) >= len(delta.schema["fields"]) else delta
    return wider.schema, wider.codec


def _index_manifest(reader: _Reader, writer: MetadataWriter, name: str | None, targets, types) -> str | None:
    """The index manifest without the entries of dropped partitions (``IndexManifestFile`` combining the
    previous entries with DELETE changes); the previous one when it lists none of them."""
    if not name:
        return name
    avro = reader.avro(name)
    decoded: dict[bytes, tuple] = {}
    kept = [r for r in avro.records if _partition_of(decoded, bytes(r["_PARTITION"]), types) not in targets]
    if len(kept) == len(avro.records):
        return name
    new_name, _ = writer.write("index-manifest", avro.schema, kept, avro.codec)
    return new_name
