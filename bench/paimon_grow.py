"""Grow a Paimon-written append table to a large size cheaply, for bench_user_path.py.

Paimon's Java writer writes a small table first; this continues its history with snapshots, manifest lists
and manifests written with fastavro in the Avro schemas and codec Paimon wrote them in (read from the
table's own files). Every new data file is a hard link of one data file Paimon wrote in the same partition
(one seed per partition: ext4 allows 65,000 links per file), with that file's own manifest entry as its
template. The history follows Paimon's for such a table: appends write one file per partition, compactions
and overwrites replace one partition's live files by one, and base manifest lists are merged into one
manifest of the live files once they hold ``merge_min_count`` manifests.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import fastavro

ADD, DELETE = 0, 1
FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT = 0, 1


@dataclass(frozen=True)
class Avro:
    """A writer schema and codec Paimon used for one kind of file."""

    schema: dict
    codec: str

    @classmethod
    def of(cls, path: Path) -> "Avro":
        with open(path, "rb") as f:
            r = fastavro.reader(f)
            return cls(fastavro.parse_schema(json.loads(r.metadata["avro.schema"])), r.codec)


def read_avro(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        return list(fastavro.reader(io.BytesIO(f.read())))


@dataclass
class Grower:
    """A table being grown: its latest snapshot, live files and manifests, changed by each commit."""

    table: Path
    rng: random.Random
    manifest_avro: Avro
    list_avro: Avro
    snapshot: dict  # the latest snapshot's JSON
    live: dict[bytes, dict[str, dict]]  # partition -> file name -> ADD entry
    base: list[dict]  # the latest snapshot's base + delta manifest metas: the next one's base before merging
    seeds: dict[bytes, tuple[Path, dict]]  # partition -> (data file to link, its ADD entry)
    dirs: dict[bytes, Path]
    merge_min_count: int
    written: dict[str, int] = field(default_factory=lambda: {"snapshots": 0, "data": 0, "meta": 0})

    def name(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    def write_avro(self, avro: Avro, name: str, records: list[dict]) -> int:
        path = self.table / "manifest" / name
        with open(path, "wb") as f:
            fastavro.writer(f, avro.schema, records, codec=avro.codec)
        self.written["meta"] += 1
        return path.stat().st_size

    def manifest(self, entries: list[dict]) -> dict:
        """Write a manifest of ``entries``; return its meta (the manifest list's record)."""
        name = self.name("manifest") + "-0"
        parts = sorted({e["_PARTITION"] for e in entries})
        return {"_VERSION": 2, "_FILE_NAME": name, "_FILE_SIZE": self.write_avro(self.manifest_avro, name, entries),
                "_NUM_ADDED_FILES": sum(e["_KIND"] == ADD for e in entries),
                "_NUM_DELETED_FILES": sum(e["_KIND"] == DELETE for e in entries),
                "_PARTITION_STATS": {"_MIN_VALUES": parts[0], "_MAX_VALUES": parts[-1], "_NULL_COUNTS": [0]},
                "_SCHEMA_ID": self.snapshot["schemaId"]}

    def new_file(self, part: bytes, source: int, now_ms: int) -> dict:
        seed, template = self.seeds[part]
        name = self.name("data") + "-0." + seed.name.rsplit(".", 1)[1]
        os.link(seed, self.dirs[part] / name)
        self.written["data"] += 1
        f = dict(template["_FILE"], _FILE_NAME=name, _FILE_SOURCE=source, _CREATION_TIME=now_ms)
        return dict(template, _KIND=ADD, _FILE=f)

    def commit(self, kind: str, entries: list[dict]) -> None:
        """One snapshot: the previous one's manifests as its base (merged into one manifest of the live files
        once there are ``merge_min_count`` of them), and ``entries`` as its delta."""
        base = self.base
        if len(base) >= self.merge_min_count:
            base = [self.manifest([e for p in sorted(self.live) for e in self.live[p].values()])]
        delta = [self.manifest(entries)]
        for e in entries:
            files = self.live[e["_PARTITION"]]
            if e["_KIND"] == ADD:
                files[e["_FILE"]["_FILE_NAME"]] = e
            else:
                del files[e["_FILE"]["_FILE_NAME"]]
        prefix = self.name("manifest-list")
        base_name, delta_name = prefix + "-0", prefix + "-1"
        self.write_avro(self.list_avro, base_name, base)
        self.write_avro(self.list_avro, delta_name, delta)
        rows = sum(e["_FILE"]["_ROW_COUNT"] * (1 if e["_KIND"] == ADD else -1) for e in entries)
        prev = self.snapshot
        snap = dict(prev, id=prev["id"] + 1, baseManifestList=base_name, deltaManifestList=delta_name,
                    changelogManifestList=None, commitIdentifier=prev["commitIdentifier"] + 1, commitKind=kind,
                    timeMillis=prev["timeMillis"] + 1, totalRecordCount=prev["totalRecordCount"] + rows,
                    deltaRecordCount=rows, changelogRecordCount=0)
        (self.table / "snapshot" / f"snapshot-{snap['id']}").write_text(json.dumps(snap, indent=2))
        self.written["snapshots"] += 1
        self.snapshot = snap
        self.base = base + delta

    def step(self, kind: str) -> None:
        """Commit one APPEND (a file in every partition), COMPACT or OVERWRITE (one partition's live files
        replaced by one file)."""
        now_ms = self.snapshot["timeMillis"] + 1
        parts = sorted(self.live)
        if kind == "APPEND":
            entries = [self.new_file(p, FILE_SOURCE_APPEND, now_ms) for p in parts]
        else:
            p = self.rng.choice(parts)
            entries = [dict(e, _KIND=DELETE) for e in self.live[p].values()]
            entries.append(self.new_file(p, FILE_SOURCE_COMPACT if kind == "COMPACT" else FILE_SOURCE_APPEND,
                                         now_ms))
        self.commit(kind, entries)

    def grow(self, files: int, ops: dict[str, int]) -> None:
        """Commit steps drawn with the weights ``ops`` (APPEND, COMPACT, OVERWRITE) until the table holds
        ``files`` files; then point the LATEST hint at the last snapshot."""
        kinds, weights = zip(*ops.items())
        have = sum(len(names) for _, _, names in os.walk(self.table))
        while have + sum(self.written.values()) < files:
            self.step(self.rng.choices(kinds, weights)[0])
        (self.table / "snapshot" / "LATEST").write_text(str(self.snapshot["id"]))


def open_grower(table: Path, *, seed: int, merge_min_count: int) -> Grower:
    """Read the latest snapshot of a Paimon-written append table: its live files, manifests and schemas."""
    snaps = table / "snapshot"
    latest = int((snaps / "LATEST").read_text().strip())
    snapshot = json.loads((snaps / f"snapshot-{latest}").read_text())
    manifests = table / "manifest"
    metas = [m for key in ("baseManifestList", "deltaManifestList")
             for m in read_avro(manifests / snapshot[key])]
    live: dict[bytes, dict[str, dict]] = {}
    for m in metas:
        for e in read_avro(manifests / m["_FILE_NAME"]):
            files = live.setdefault(e["_PARTITION"], {})
            if e["_KIND"] == ADD:
                files[e["_FILE"]["_FILE_NAME"]] = e
            else:
                files.pop(e["_FILE"]["_FILE_NAME"], None)
    dirs, seeds = {}, {}
    for part, files in live.items():
        entry = next(iter(files.values()))
        d = next(p.parent for p in table.glob(f"*/bucket-{entry['_BUCKET']}/{entry['_FILE']['_FILE_NAME']}"))
        path = d / entry["_FILE"]["_FILE_NAME"]
        if path.stat().st_size != entry["_FILE"]["_FILE_SIZE"]:
            raise SystemExit(f"{path}: {path.stat().st_size} bytes, its manifest entry says "
                             f"{entry['_FILE']['_FILE_SIZE']}")
        dirs[part], seeds[part] = d, (path, copy.deepcopy(entry))
    return Grower(table=table, rng=random.Random(seed), manifest_avro=Avro.of(manifests / metas[0]["_FILE_NAME"]),
               list_avro=Avro.of(manifests / snapshot["baseManifestList"]), snapshot=snapshot, live=live,
               base=metas, seeds=seeds, dirs=dirs, merge_min_count=merge_min_count)
