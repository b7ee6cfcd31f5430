"""Tests of the Paimon 0.9 Java harness itself (tests/support/paimon_java.py).

Every assertion is about what Paimon wrote to disk or what Paimon's own APIs report.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import fastavro
import pytest

from tests.support.paimon_java import Harness, HarnessError

pytestmark = pytest.mark.java

APPEND_SEED = 3
PK_SEED = 11
PK_OPTIONS = {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"}
STEPS = 30


@pytest.fixture(scope="module")
def tables(paimon_java: Harness, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    root = tmp_path_factory.mktemp("paimon-harness")
    out = {}
    append = root / "append_t"
    out["append"] = (append, paimon_java.generate(append, seed=APPEND_SEED, kind="append", steps=STEPS))
    pk = root / "pk_t"
    out["pk"] = (pk, paimon_java.generate(pk, seed=PK_SEED, kind="pk", steps=STEPS, options=PK_OPTIONS))
    return out


def _snapshot_ids_on_disk(table: Path) -> list[int]:
    return sorted(int(p.name.split("-", 1)[1]) for p in (table / "snapshot").glob("snapshot-*"))


def _files(table: Path, pattern: str) -> set[str]:
    return {str(p.relative_to(table)) for p in table.glob(pattern) if p.is_file()}


def _manifests_in_list(table: Path, manifest_list: str) -> set[str]:
    with open(table / "manifest" / manifest_list, "rb") as f:
        return {rec["_FILE_NAME"] for rec in fastavro.reader(f)}


def _data_and_index_files(table: Path) -> set[str]:
    return _files(table, "dt=*/bucket-*/*") | _files(table, "index/*")


# --------------------------------------------------------------------------- generate


@pytest.mark.parametrize("kind", ["append", "pk"])
def test_generate_layout_matches_report(tables, kind):
    table, info = tables[kind]
    snaps = info["snapshots"]
    ids = [s["id"] for s in snaps]
    assert len(ids) >= 15
    assert ids == list(range(1, len(ids) + 1))

    # snapshot directory: exactly the reported snapshots, plus hints
    assert _snapshot_ids_on_disk(table) == ids
    assert (table / "snapshot" / "LATEST").read_text().strip() == str(ids[-1])
    assert (table / "snapshot" / "EARLIEST").read_text().strip() == "1"
    for s in snaps:
        on_disk = json.loads((table / "snapshot" / f"snapshot-{s['id']}").read_text())
        assert on_disk["timeMillis"] == s["timeMillis"]
        assert on_disk["commitKind"] == s["commitKind"]
    times = [s["timeMillis"] for s in snaps]
    assert all(b - a >= 10 for a, b in zip(times, times[1:])), "snapshot times must be 10 ms apart"
    kinds = {s["commitKind"] for s in snaps}
    assert {"APPEND", "COMPACT", "OVERWRITE"} <= kinds

    # manifest directory: the manifest lists / index manifests on disk are exactly the referenced ones
    lists = {
        s[k] for s in snaps for k in ("baseManifestList", "deltaManifestList", "changelogManifestList") if s[k]
    }
    assert {p.name for p in (table / "manifest").glob("manifest-list-*")} == lists
    index_manifests = {s["indexManifest"] for s in snaps if s["indexManifest"]}
    assert {p.name for p in (table / "manifest").glob("index-manifest-*")} == index_manifests
    base_manifests: set[str] = set()
    delta_manifests: set[str] = set()
    changelog_manifests: set[str] = set()
    for s in snaps:
        base_manifests |= _manifests_in_list(table, s["baseManifestList"])
        delta_manifests |= _manifests_in_list(table, s["deltaManifestList"])
        if s["changelogManifestList"]:
            changelog_manifests |= _manifests_in_list(table, s["changelogManifestList"])
    data_manifests = {p.name for p in (table / "manifest").glob("manifest-*")} - lists
    assert base_manifests | delta_manifests | changelog_manifests == data_manifests
    # small manifest.merge-min-count: Paimon merged manifests that no delta list ever held
    assert base_manifests - delta_manifests

    # bucket directories: exactly those the snapshots reference
    assert sorted(str(p.relative_to(table)) for p in table.glob("dt=*/bucket-*") if p.is_dir()) == info["bucketDirs"]
    assert info["bucketDirs"]
    for d in info["bucketDirs"]:
        part, bucket = d.split("/")
        assert part.split("=", 1)[1] in info["partitions"]
        if info["bucket"] > 0:
            assert 0 <= int(bucket.split("-")[1]) < info["bucket"]
        else:
            assert bucket == "bucket-0"

    # tags, consumers, schema
    assert {p.name for p in (table / "tag").glob("tag-*")} == {f"tag-{n}" for n in info["tags"]}
    for name, sid in info["tags"].items():
        assert json.loads((table / "tag" / f"tag-{name}").read_text())["id"] == sid
    assert {p.name for p in (table / "consumer").glob("consumer-*")} == {f"consumer-{c}" for c in info["consumers"]}
    for cid, nxt in info["consumers"].items():
        assert json.loads((table / "consumer" / f"consumer-{cid}").read_text())["nextSnapshot"] == nxt
    schema = json.loads((table / "schema" / "schema-0").read_text())
    assert schema["options"] == info["options"]
    assert schema["partitionKeys"] == ["dt"]
    fmt = info["options"]["file.format"]
    assert all(f.endswith("." + fmt) for f in _files(table, "dt=*/bucket-*/*"))


def test_generate_pk_dv_and_changelog(tables):
    table, info = tables["pk"]
    assert info["options"]["deletion-vectors.enabled"] == "true"
    assert info["options"]["changelog-producer"] == "lookup"
    assert info["bucket"] > 0
    assert _files(table, "index/index-*"), "deletion vectors must have produced index files"
    assert _files(table, "dt=*/bucket-*/changelog-*"), "lookup must have produced changelog files"
    assert any(op.startswith("delete") for op in info["ops"])
    assert any(s["changelogManifestList"] for s in info["snapshots"])


def test_generate_is_seeded(paimon_java, tables, tmp_path):
    _, info = tables["append"]
    again = paimon_java.generate(tmp_path / "again", seed=APPEND_SEED, kind="append", steps=STEPS)
    assert again["ops"] == info["ops"]
    assert [s["commitKind"] for s in again["snapshots"]] == [s["commitKind"] for s in info["snapshots"]]
    assert again["options"] == info["options"]
    assert again["tags"] == info["tags"] and again["consumers"] == info["consumers"]
    assert paimon_java.read_rows(tmp_path / "again") == paimon_java.read_rows(tables["append"][0])


def test_generate_refuses_existing_table(paimon_java, tables):
    table, _ = tables["append"]
    with pytest.raises(HarnessError, match="already exists"):
        paimon_java.generate(table, seed=1, kind="append", steps=2)


# --------------------------------------------------------------------------- live files / rows


@pytest.mark.parametrize("kind", ["append", "pk"])
def test_live_files_agree_with_disk(paimon_java, tables, kind):
    table, info = tables[kind]
    live = paimon_java.live_files(table)
    assert sorted(map(int, live["snapshots"])) == [s["id"] for s in info["snapshots"]]
    assert set(live["tags"]) == set(info["tags"]) and live["tagSnapshots"] == info["tags"]
    for files in live["snapshots"].values():
        assert files == sorted(files)

    referenced = set()
    for section in ("snapshots", "changelogs", "indexFiles"):
        for files in live[section].values():
            referenced |= set(files)
    on_disk = _data_and_index_files(table)
    assert referenced <= on_disk
    # nothing was expired yet: every data file on disk is read by some snapshot
    assert {f for f in on_disk if "/data-" in f} <= referenced
    # only changelog files of OVERWRITE commits (which Paimon 0.9 drops) may be unreferenced
    assert all("/changelog-" in f for f in on_disk - referenced)
    for tag, sid in live["tagSnapshots"].items():
        assert live["tags"][tag] == live["snapshots"][str(sid)]
    # the latest snapshot's files are in the reported bucket directories
    latest = live["snapshots"][str(info["snapshots"][-1]["id"])]
    assert {f.rsplit("/", 1)[0] for f in latest if not f.startswith("index/")} <= set(info["bucketDirs"])
    if kind == "pk":
        assert any(f.startswith("index/") for fs in live["snapshots"].values() for f in fs), "DV files read"
        assert live["changelogs"]


def test_read_rows_append_counts(paimon_java, tables):
    table, info = tables["append"]
    for s in info["snapshots"]:
        rows = paimon_java.read_rows(table, snapshot=s["id"])
        assert len(rows) == s["totalRecordCount"]
        assert rows == sorted(rows, key=lambda r: json.dumps(r, separators=(",", ":")))
    assert set(paimon_java.read_rows(table)[0]) == {"dt", "id", "v", "s"}


def test_read_rows_pk_unique_keys(paimon_java, tables):
    table, info = tables["pk"]
    latest = paimon_java.read_rows(table)
    assert latest == paimon_java.read_rows(table, snapshot=info["snapshots"][-1]["id"])
    keys = [(r["dt"], r["id"]) for r in latest]
    assert len(keys) == len(set(keys)) > 0
    for name, sid in info["tags"].items():
        assert paimon_java.read_rows(table, tag=name) == paimon_java.read_rows(table, snapshot=sid)


def test_errors_are_reported_and_harness_survives(paimon_java, tables):
    table, _ = tables["pk"]
    with pytest.raises(HarnessError, match="does not exist"):
        paimon_java.read_rows(table, snapshot=10_000)
    with pytest.raises(HarnessError, match="tag 'nope' does not exist"):
        paimon_java.read_rows(table, tag="nope")
    with pytest.raises(HarnessError, match="unknown command"):
        paimon_java.call({"cmd": "bogus"})
    assert paimon_java.call({"cmd": "ping"})["ok"] is True


# --------------------------------------------------------------------------- expire


@pytest.mark.parametrize("kind,seed,options", [("append", 5, None), ("pk", 12, PK_OPTIONS)])
def test_expire_keeps_two_newest(paimon_java, tmp_path, kind, seed, options):
    table = tmp_path / kind
    info = paimon_java.generate(table, seed=seed, kind=kind, steps=STEPS, options=options, ops={"consumer": 0})
    assert info["consumers"] == {}
    ids = [s["id"] for s in info["snapshots"]]
    latest = ids[-1]
    expired_tags = {n: sid for n, sid in info["tags"].items() if sid < latest - 1}
    assert expired_tags, "the seed should tag at least one snapshot that gets expired"
    rows_before = {sid: paimon_java.read_rows(table, snapshot=sid) for sid in (latest - 1, latest)}
    tag_rows_before = {n: paimon_java.read_rows(table, tag=n) for n in info["tags"]}
    files_before = _data_and_index_files(table)

    result = paimon_java.expire(table, retain_min=2, retain_max=2, max_deletes=10_000)

    assert result["expired"] == len(ids) - 2
    assert _snapshot_ids_on_disk(table) == [latest - 1, latest]
    assert (table / "snapshot" / "EARLIEST").read_text().strip() == str(latest - 1)
    for sid, rows in rows_before.items():
        assert paimon_java.read_rows(table, snapshot=sid) == rows
    for name, rows in tag_rows_before.items():  # tagged snapshots' data survives expiry
        assert paimon_java.read_rows(table, tag=name) == rows
    with pytest.raises(HarnessError):
        paimon_java.read_rows(table, snapshot=ids[0])

    files_after = _data_and_index_files(table)
    assert files_after < files_before, "expiry must have deleted files"
    live = paimon_java.live_files(table)
    assert sorted(map(int, live["snapshots"])) == [latest - 1, latest]
    needed = set()
    for section in ("snapshots", "tags", "indexFiles", "tagIndexFiles"):
        for files in live[section].values():
            needed |= set(files)
    assert needed <= files_after


def test_expire_stops_at_consumers(paimon_java, tables, tmp_path):
    src, info = tables["append"]
    ids = [s["id"] for s in info["snapshots"]]
    min_consumer = min(info["consumers"].values())
    assert ids[0] < min_consumer < ids[-1], "the seed should have a consumer in the middle"
    table = tmp_path / "consumers"
    shutil.copytree(src, table)
    res = paimon_java.expire(table, retain_min=1, retain_max=1, max_deletes=10_000)
    assert res["expired"] == min_consumer - ids[0]
    assert _snapshot_ids_on_disk(table) == list(range(min_consumer, ids[-1] + 1))


def test_expire_time_and_max_deletes(paimon_java, tables, tmp_path):
    src, info = tables["pk"]
    assert info["consumers"] == {}, "the seed should have no consumer (they would bound expiry)"
    ids = [s["id"] for s in info["snapshots"]]
    times = {s["id"]: s["timeMillis"] for s in info["snapshots"]}

    # max_deletes bounds one run
    t1 = tmp_path / "max_deletes"
    shutil.copytree(src, t1)
    assert paimon_java.expire(t1, retain_min=1, retain_max=1, max_deletes=3)["expired"] == 3
    assert _snapshot_ids_on_disk(t1) == ids[3:]

    # older_than_ms: only snapshots strictly older than the cut-off go (cut-off between two snapshots)
    t2 = tmp_path / "older_than"
    shutil.copytree(src, t2)
    k = ids[len(ids) // 2]
    cutoff = (times[k - 1] + times[k]) // 2
    res = paimon_java.expire(t2, retain_min=1, retain_max=10_000, older_than_ms=cutoff, max_deletes=10_000)
    assert res["expired"] == k - ids[0]
    assert _snapshot_ids_on_disk(t2) == list(range(k, ids[-1] + 1))
    # ... but retain_max still wins over time
    assert paimon_java.expire(t2, retain_min=1, retain_max=3, older_than_ms=cutoff, max_deletes=10_000)["expired"]
    assert _snapshot_ids_on_disk(t2) == ids[-3:]

    # time_retained_ms large => nothing is old enough
    t3 = tmp_path / "time_retained"
    shutil.copytree(src, t3)
    res = paimon_java.expire(t3, retain_min=1, retain_max=10_000, time_retained_ms=3_600_000, max_deletes=10_000)
    assert res["expired"] == 0
    assert _snapshot_ids_on_disk(t3) == ids


# --------------------------------------------------------------------------- branches


def test_branches_are_made_from_a_tag_written_and_dropped(paimon_java, tables, tmp_path):
    src, info = tables["pk"]
    table = tmp_path / "branched"
    shutil.copytree(src, table)
    tag = sorted(info["tags"])[0]
    tagged = info["tags"][tag]
    main_snapshots = _snapshot_ids_on_disk(table)
    paimon_java.create_branch(table, "b1", tag=tag)
    branch = table / "branch" / "branch-b1"
    assert (branch / "tag" / f"tag-{tag}").is_file() and _snapshot_ids_on_disk(branch) == [tagged]

    out = paimon_java.write(table, branch="b1", seed=1, commits=2, partitions=info["partitions"])
    assert [op.split()[0] for op in out["ops"]] == ["write", "write"]
    assert _snapshot_ids_on_disk(branch) == list(range(tagged, out["latest"] + 1))
    assert _snapshot_ids_on_disk(table) == main_snapshots
    assert paimon_java.read_rows(table, snapshot=main_snapshots[-1])  # main still reads

    paimon_java.delete_branch(table, "b1")
    assert not branch.exists() and (table / "branch").is_dir()
    with pytest.raises(HarnessError, match="Branch b1 does not exist"):
        paimon_java.write(table, branch="b1", seed=1, commits=1)


def test_generate_unpartitioned(paimon_java, tmp_path):
    flat = tmp_path / "flat"
    info = paimon_java.generate(flat, seed=3, kind="pk", steps=10, ops={"overwrite": 200}, partitioned=False)
    assert json.loads((flat / "schema" / "schema-0").read_text())["partitionKeys"] == []
    assert not list(flat.glob("dt=*"))
    assert info["bucketDirs"] == sorted(p.name for p in flat.glob("bucket-*")) != []
    assert any(op.startswith("overwrite * ") for op in info["ops"])
    assert any(s["commitKind"] == "OVERWRITE" for s in info["snapshots"])


# --------------------------------------------------------------------------- orphan clean


def test_orphan_clean_records_at_the_exact_threshold_and_deletes_nothing(paimon_java, tables, tmp_path):
    src, info = tables["append"]
    table = tmp_path / "orphans"
    shutil.copytree(src, table)
    threshold = int(time.time() * 1000) - 86_400_000  # Paimon's own files are younger: never candidates
    bucket = table / info["bucketDirs"][0]
    older, at, sub = bucket / "data-older-0.orc", bucket / "data-at-0.orc", bucket / "sub"
    sub.mkdir()
    for f in (older, at, sub / "data-inside-0.orc"):
        f.write_text("junk")
    for p, ms in ((older, threshold - 1), (at, threshold), (sub, threshold - 1)):
        os.utime(p, ns=(ms * 1_000_000, ms * 1_000_000))
    before = {p: (p.stat().st_mtime_ns, p.is_dir()) for p in table.rglob("*")}

    cleaned = paimon_java.orphan_clean(table, older_than_ms=threshold)

    assert cleaned == {str(older): False, str(sub): True}
    assert {p: (p.stat().st_mtime_ns, p.is_dir()) for p in table.rglob("*")} == before
    with pytest.raises(HarnessError, match="missing field 'olderThanMillis'"):
        paimon_java.call({"cmd": "orphan_clean", "table": str(table)})


# --------------------------------------------------------------------------- sizes for benchmarks


def test_generate_partitions_rows_per_write_and_no_bucket_dirs(paimon_java, tmp_path):
    table = tmp_path / "wide"
    info = paimon_java.generate(table, seed=5, kind="append", steps=6,
                                options={"bucket": "-1", "bucket-key": None, "compaction.min.file-num": None},
                                ops={"write": 1, "compact": 0, "overwrite": 0, "tag": 0, "untag": 0, "consumer": 0},
                                partitions=12, rows_per_write=300, bucket_dirs=False)
    names = [f"2024-01-{d:02d}" for d in range(1, 13)]
    assert info["partitions"] == names
    assert "bucketDirs" not in info
    assert info["ops"] == ["write 300"] * 6
    assert [s["totalRecordCount"] for s in info["snapshots"]] == [300 * i for i in range(1, 7)]
    # 300 rows over 12 partitions reach every partition: 12 new files per write
    on_disk = sorted(str(p.relative_to(table)) for p in table.glob("dt=*") if p.is_dir())
    assert on_disk == [f"dt={n}" for n in names]
    assert len(_files(table, "dt=*/bucket-0/data-*")) == 12 * 6


def test_generate_refuses_bad_sizes(paimon_java, tmp_path):
    with pytest.raises(HarnessError, match="partitions must be >= 1, got 0"):
        paimon_java.generate(tmp_path / "a", seed=1, kind="append", steps=2, partitions=0)
    with pytest.raises(HarnessError, match="rowsPerWrite must be >= 1 .* got -3"):
        paimon_java.generate(tmp_path / "b", seed=1, kind="append", steps=2, rows_per_write=-3)


def test_jvm_options_replace_the_tuning_options(tmp_path):
    from tests.support.paimon_java import ensure_harness

    with ensure_harness(jvm_options=["-Xmx256m"]) as h:
        info = h.generate(tmp_path / "t", seed=2, kind="append", steps=3)
        assert h.expire(tmp_path / "t", retain_min=1, retain_max=1, max_deletes=100)["expired"] == len(info["snapshots"]) - 1
        assert not h.stray_output
