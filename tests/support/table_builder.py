"""Paimon-format metadata with exact control over manifest entries, for the scenario tests
(ports of Paimon's ExpireSnapshotsTest and FileDeletionTest).

Real Paimon writers (pypaimon, Paimon's Java core) cannot be told "put an ADD of this file after its
DELETE in the same delta" or "give this file an external path and two extra files". These scenarios
come from Paimon's own ``ExpireSnapshotsTest``/``FileDeletionTest``, which build such commits with
their ``TestFileStore``. This builder writes the same layout Paimon does (Avro manifests with
``_VERSION``, snapshot JSON version 3, hint files) through lakesweep's own metadata writer
(``engine.paimon.writer``, which partition drops commit with), with placeholder data files; the differential
tests compare against tables Paimon itself wrote.
"""

from __future__ import annotations

import json
import os
import uuid as _uuid
import zlib
from dataclasses import dataclass, field

from lakesweep.engine.paimon.writer import (INDEX_MANIFEST_SCHEMA, MANIFEST_LIST_SCHEMA, MANIFEST_SCHEMA, avro_bytes,
                                            snapshot_bytes)
from tests.support.binary_row import encode_binary_row

ADD, DELETE = 0, 1


@dataclass(frozen=True)
class E:
    """A manifest entry to write. ``partition`` holds partition values in key order."""

    kind: int
    name: str
    partition: tuple = ()
    bucket: int = 0
    level: int = 0
    extra_files: tuple = ()
    external_path: str | None = None
    file_source: int | None = 0
    size: int = 100
    creation_ms: int | None = None  # _CREATION_TIME: the writer's local date-time as epoch milliseconds
    rows: int = 1


@dataclass
class TableBuilder:
    root: str
    partition_keys: tuple = ()
    partition_types: tuple = ()  # Paimon type strings, e.g. ("STRING", "INT")
    options: dict = field(default_factory=dict)
    time_millis: int = 1_000
    write_data: bool = True
    branch: str | None = None  # a branch's snapshots, tags and schema live in branch/branch-<name>/

    @property
    def meta_dir(self) -> str:
        return self.root if self.branch is None else os.path.join(self.root, "branch", f"branch-{self.branch}")

    def __post_init__(self):
        os.makedirs(os.path.join(self.meta_dir, "schema"), exist_ok=True)
        fields = [{"id": i, "name": k, "type": t} for i, (k, t) in enumerate(zip(self.partition_keys, self.partition_types))]
        fields.append({"id": len(fields), "name": "v", "type": "STRING"})
        schema = {
            "version": 3, "id": 0, "fields": fields, "highestFieldId": len(fields) - 1,
            "partitionKeys": list(self.partition_keys), "primaryKeys": [],
            "options": {k: str(v) for k, v in self.options.items()}, "timeMillis": 1,
        }
        self._write(os.path.join(self.meta_dir, "schema", "schema-0"), json.dumps(schema).encode())
        # a branch's builder names its manifests apart from main's (they share manifest/)
        self._uuid = _uuid.UUID(int=0 if self.branch is None else zlib.crc32(self.branch.encode()) + 1)
        self._n = 0
        self.snapshots: dict[int, dict] = {}
        self.base: list[dict] = []  # manifest list entries of the next base list
        self.base_at: dict[int, list[dict]] = {}  # snapshot id -> its base + delta entries (for rollback, branches)
        self.index_entries: list[dict] = []
        self.manifest_entries: dict[str, list[E]] = {}  # manifest name -> its entries, in order
        self.list_manifests: dict[str, list[str]] = {}  # manifest list name -> its manifests
        self.index_files: dict[str, list[str]] = {}  # index manifest name -> its index files

    # -- helpers ---------------------------------------------------------------------------------

    def _write(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def _name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}-{self._uuid}-{self._n}"

    def partition_bytes(self, values: tuple) -> bytes:
        roots = []
        for t in self.partition_types:
            u = t.upper()
            roots.append("VARCHAR" if u.startswith(("STRING", "VARCHAR", "CHAR")) else u.split("(")[0])
        return encode_binary_row(list(values), roots)

    def partition_dir(self, values: tuple) -> str:
        return "".join(f"{k}={v}/" for k, v in zip(self.partition_keys, values))

    def data_path(self, e: E) -> str:
        if e.external_path:
            return e.external_path
        sub = self.options.get("data-file.path-directory")
        rel = (sub + "/" if sub else "") + self.partition_dir(e.partition) + f"bucket-{e.bucket}/{e.name}"
        return os.path.join(self.root, rel)

    def _avro(self, schema, records) -> bytes:
        return avro_bytes(schema, records, "null")

    def _manifest(self, entries: list[E]) -> dict:
        records = []
        for e in entries:
            records.append({
                "_VERSION": 2, "_KIND": e.kind, "_PARTITION": self.partition_bytes(e.partition),
                "_BUCKET": e.bucket, "_TOTAL_BUCKETS": 1,
                "_FILE": {
                    "_FILE_NAME": e.name, "_FILE_SIZE": e.size, "_ROW_COUNT": e.rows, "_MIN_KEY": b"", "_MAX_KEY": b"",
                    "_KEY_STATS": {"_MIN_VALUES": b"", "_MAX_VALUES": b"", "_NULL_COUNTS": None},
                    "_VALUE_STATS": {"_MIN_VALUES": b"", "_MAX_VALUES": b"", "_NULL_COUNTS": None},
                    "_MIN_SEQUENCE_NUMBER": 0, "_MAX_SEQUENCE_NUMBER": 0, "_SCHEMA_ID": 0, "_LEVEL": e.level,
                    "_EXTRA_FILES": list(e.extra_files), "_CREATION_TIME": e.creation_ms, "_DELETE_ROW_COUNT": None,
                    "_EMBEDDED_FILE_INDEX": None, "_FILE_SOURCE": e.file_source, "_VALUE_STATS_COLS": None,
                    "_EXTERNAL_PATH": e.external_path,
                },
            })
        name = self._name("manifest")
        self.manifest_entries[name] = list(entries)
        data = self._avro(MANIFEST_SCHEMA, records)
        self._write(os.path.join(self.root, "manifest", name), data)
        return {
            "_VERSION": 2, "_FILE_NAME": name, "_FILE_SIZE": len(data),
            "_NUM_ADDED_FILES": sum(1 for e in entries if e.kind == ADD),
            "_NUM_DELETED_FILES": sum(1 for e in entries if e.kind == DELETE),
            "_PARTITION_STATS": {"_MIN_VALUES": b"", "_MAX_VALUES": b"", "_NULL_COUNTS": None}, "_SCHEMA_ID": 0,
        }

    def _list(self, metas: list[dict]) -> tuple[str, int]:
        name = self._name("manifest-list")
        self.list_manifests[name] = [m["_FILE_NAME"] for m in metas]
        data = self._avro(MANIFEST_LIST_SCHEMA, metas)
        self._write(os.path.join(self.root, "manifest", name), data)
        return name, len(data)

    # -- operations ------------------------------------------------------------------------------

    def commit(self, *manifests: list[E], kind: str = "APPEND", time_millis: int | None = None,
               changelog: list[E] | None = None, index_files: list[tuple] | None = None,
               statistics: str | None = None) -> int:
        """One snapshot whose delta holds the given manifests (each a list of entries, in order)."""
        sid = max(self.snapshots, default=0) + 1
        for m in manifests:
            for e in m:
                if e.kind == ADD and self.write_data:
                    self._write(self.data_path(e), b"x" * e.size)
                    for x in e.extra_files:
                        d = os.path.dirname(self.data_path(e))
                        self._write(os.path.join(d, x), b"extra")
        deltas = [self._manifest(m) for m in manifests]
        base_name, base_size = self._list(self.base)
        delta_name, delta_size = self._list(deltas)
        snap = {
            "version": 3, "id": sid, "schemaId": 0, "baseManifestList": base_name, "baseManifestListSize": base_size,
            "deltaManifestList": delta_name, "deltaManifestListSize": delta_size, "commitUser": "test",
            "commitIdentifier": sid, "commitKind": kind,
            "timeMillis": time_millis if time_millis is not None else self.time_millis + sid,
            "totalRecordCount": 0, "deltaRecordCount": 0,
        }
        if changelog is not None:
            for e in changelog:
                if self.write_data:
                    self._write(self.data_path(e), b"c" * e.size)
            snap["changelogManifestList"], snap["changelogManifestListSize"] = self._list([self._manifest(changelog)])
        if index_files is not None:
            # index_files: [(partition tuple, bucket, file name)] - the full live index set
            records = []
            for part, bucket, name in index_files:
                self._write(os.path.join(self.root, "index", name), b"dv")
                records.append({"_VERSION": 1, "_KIND": ADD, "_PARTITION": self.partition_bytes(part),
                                "_BUCKET": bucket, "_INDEX_TYPE": "DELETION_VECTORS", "_FILE_NAME": name,
                                "_FILE_SIZE": 2, "_ROW_COUNT": 1, "_DELETIONS_VECTORS_RANGES": None})
            iname = self._name("index-manifest")
            self.index_files[iname] = [name for _, _, name in index_files]
            self._write(os.path.join(self.root, "manifest", iname), self._avro(INDEX_MANIFEST_SCHEMA, records))
            snap["indexManifest"] = iname
        if statistics is not None:
            self._write(os.path.join(self.root, "statistics", statistics), b"{}")
            snap["statistics"] = statistics
        self._write(os.path.join(self.meta_dir, "snapshot", f"snapshot-{sid}"), snapshot_bytes(snap))
        self._write(os.path.join(self.meta_dir, "snapshot", "LATEST"), str(sid).encode())
        self.snapshots[sid] = snap
        self.base = self.base + deltas
        self.base_at[sid] = self.base
        return sid

    def tag(self, name: str, snapshot_id: int) -> None:
        self._write(os.path.join(self.meta_dir, "tag", f"tag-{name}"), json.dumps(self.snapshots[snapshot_id]).encode())

    def delete_tag(self, name: str) -> None:
        os.remove(os.path.join(self.meta_dir, "tag", f"tag-{name}"))

    def rollback(self, to: int) -> None:
        """Paimon's ``rollback_to(snapshot)``: snapshots and tags after ``to`` are removed and LATEST is ``to``.
        The next commit reuses the removed ids (with other content). Data files are left (a leak, not a loss)."""
        for sid in sorted(s for s in self.snapshots if s > to):
            os.remove(os.path.join(self.meta_dir, "snapshot", f"snapshot-{sid}"))
            del self.snapshots[sid]
        tag_dir = os.path.join(self.meta_dir, "tag")
        for name in sorted(os.listdir(tag_dir)) if os.path.isdir(tag_dir) else []:
            with open(os.path.join(tag_dir, name)) as f:
                if json.load(f)["id"] > to:
                    os.remove(os.path.join(tag_dir, name))
        self._write(os.path.join(self.meta_dir, "snapshot", "LATEST"), str(to).encode())
        self.base = self.base_at[to]

    def create_branch(self, name: str, from_snapshot: int) -> "TableBuilder":
        """Paimon's ``create_branch(name, tag)`` from a snapshot: the branch starts with a copy of it (same
        manifest lists, same files). Returns a builder that commits to the branch."""
        b = TableBuilder(self.root, self.partition_keys, self.partition_types, self.options, self.time_millis,
                         self.write_data, branch=name)
        snap = self.snapshots[from_snapshot]
        b._write(os.path.join(b.meta_dir, "snapshot", f"snapshot-{from_snapshot}"), json.dumps(snap).encode())
        b._write(os.path.join(b.meta_dir, "snapshot", "LATEST"), str(from_snapshot).encode())
        b._write(os.path.join(b.meta_dir, "snapshot", "EARLIEST"), str(from_snapshot).encode())
        b.snapshots = {from_snapshot: snap}
        b.base = b.base_at[from_snapshot] = self.base_at[from_snapshot]
        b.manifest_entries, b.list_manifests, b.index_files = self.manifest_entries, self.list_manifests, self.index_files
        return b

    def consumer(self, consumer_id: str, next_snapshot: int) -> None:
        self._write(os.path.join(self.meta_dir, "consumer", f"consumer-{consumer_id}"),
                    json.dumps({"nextSnapshot": next_snapshot}).encode())

    def delta_manifest_names(self, snapshot_id: int) -> list[str]:
        from lakesweep.engine.paimon.table import PaimonTable

        t = PaimonTable(self.root)
        return [m.file_name for m in t.manifest_list(self.snapshots[snapshot_id]["deltaManifestList"])]


    def files_in_use(self, snapshot_id: int, *, with_changelog: bool = True) -> set[str]:
        """Absolute paths of every file snapshot ``snapshot_id`` needs, from what this builder wrote.

        The oracle of Paimon's ``TestFileStore#getFilesInUse``, computed without lakesweep's engine:
        manifest lists and their manifests, the live data files (ADD/DELETE merged in manifest order,
        keyed like Paimon's file identifier) with their extra files, the index manifest and its files,
        statistics, and (``with_changelog``) the changelog list, its manifests and changelog files.
        """
        snap = self.snapshots[snapshot_id]
        man = os.path.join(self.root, "manifest")
        out = set()
        live: dict[tuple, E] = {}
        for key in ("baseManifestList", "deltaManifestList"):
            out.add(os.path.join(man, snap[key]))
            for m in self.list_manifests[snap[key]]:
                out.add(os.path.join(man, m))
                for e in self.manifest_entries[m]:
                    ident = (e.partition, e.bucket, e.level, e.name, e.extra_files, e.external_path)
                    if e.kind == ADD:
                        live[ident] = e
                    else:
                        live.pop(ident, None)
        for e in live.values():
            out.add(self.data_path(e))
            out.update(os.path.join(os.path.dirname(self.data_path(e)), x) for x in e.extra_files)
        if with_changelog and snap.get("changelogManifestList"):
            out.add(os.path.join(man, snap["changelogManifestList"]))
            for m in self.list_manifests[snap["changelogManifestList"]]:
                out.add(os.path.join(man, m))
                out.update(self.data_path(e) for e in self.manifest_entries[m] if e.kind == ADD)
        if snap.get("indexManifest"):
            out.add(os.path.join(man, snap["indexManifest"]))
            out.update(os.path.join(self.root, "index", n) for n in self.index_files[snap["indexManifest"]])
        if snap.get("statistics"):
            out.add(os.path.join(self.root, "statistics", snap["statistics"]))
        return out


def all_files(root: str) -> set[str]:
    out = set()
    for d, _, files in os.walk(root):
        for f in files:
            out.add(os.path.relpath(os.path.join(d, f), root))
    return out
