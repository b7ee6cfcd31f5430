"""Paimon manifests decoded in worker processes (``PaimonTable.prefetch``): plans are byte for byte the same
with the process pool as without, on tables Paimon Java and pypaimon wrote, the same metadata files are read,
and a manifest that cannot be read fails the prefetch with the error reading it alone raises."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from lakesweep.engine import fileio
from lakesweep.engine.decode_pool import ENV
from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound, StalePlan, StorageError
from lakesweep.engine.fileio import ArrowFileIO
from lakesweep.engine.paimon import table as table_module
from lakesweep.engine.paimon.requirements import AssertSnapshotsPresent
from lakesweep.engine.paimon.state import snapshot_pins
from lakesweep.engine.paimon.table import PaimonTable, open_table, snapshot_digest
from lakesweep.engine.plan_io import plan_to_bytes, read_plan
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import resolve_expire_options
from tests.support import pypaimon_tables as pt
from tests.support.processes import LAKESWEEP

NOW = int(time.time() * 1000)


class Reads:
    def __init__(self):
        self.files: Counter = Counter()

    def read(self, path, what, nbytes):
        self.files[(path, what, nbytes)] += 1

    def named(self, names):
        pass


def _plan(kind: str, root: Path, out: Path, processes: str, *flags: str) -> bytes:
    env = {**os.environ, ENV: processes}
    r = subprocess.run([*LAKESWEEP, "plan", kind, str(root), "--out", str(out), "--now", str(NOW), *flags],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    return out.read_bytes()


def _assert_plans_alike(root: Path, tmp_path: Path) -> dict[str, int]:
    """Expire, orphans and (when the table has tags) the expiry of its first tag plan the same bytes with two
    decode processes as with one; the number of actions of each."""
    stray = next(root.glob("*/bucket-0")) / "left-behind.parquet"
    stray.write_bytes(b"x")
    for p in root.rglob("*"):
        os.utime(p, (1, 1))
    counts = {}
    tags = sorted(p.name[len("tag-"):] for p in root.glob("tag/tag-*"))
    for kind, flags in (("expire", ("--retain-min", "1", "--retain-max", "1", "--time-retained", "0 s",
                                    "--max-deletes", "1000")),
                        ("orphans", ("--older-than", "1 d")),
                        *((("tags", ("--tag", tags[0])),) if tags else ())):
        one, two = (_plan(kind, root, tmp_path / f"{kind}-{p}.parquet", p, *flags) for p in ("1", "2"))
        assert one == two, kind
        counts[kind] = len(read_plan(str(tmp_path / f"{kind}-2.parquet")).actions)
    return counts


def _reads(root: Path, processes: str, monkeypatch) -> tuple[int, Counter]:
    monkeypatch.setenv(ENV, processes)
    reads = Reads()
    t = open_table(str(root), on_read=reads)
    opts = resolve_expire_options(t.options, retain_min=1, retain_max=1, time_retained=0, max_deletes=1000)
    plan = plan_expire(t, now_ms=NOW, options=opts)
    return len(plan.actions), reads.files


@pytest.mark.java
@pytest.mark.slow
def test_plans_of_a_table_paimon_java_wrote_are_the_same_bytes_with_the_process_pool_as_without(
        paimon_java, tmp_path, monkeypatch):
    root = tmp_path / "t"
    paimon_java.generate(root, seed=3, kind="pk", steps=24, partitions=3, ops={"consumer": 0, "untag": 0},
                         options={"changelog-producer": "input", "deletion-vectors.enabled": "true"})
    assert list((root / "tag").iterdir()), "the history should have tags"
    counts = _assert_plans_alike(root, tmp_path)
    assert counts["expire"] > 50 and counts["orphans"] >= 1 and counts["tags"] > 0, counts
    (actions, serial), (same, pooled) = (_reads(root, p, monkeypatch) for p in ("1", "2"))
    assert actions == same and actions > 50
    assert pooled == serial
    assert {n for (_, what, _), n in serial.items() if what in ("manifest", "manifest list")} == {1}  # once each
    assert {what for _, what, _ in serial} >= {"manifest", "manifest list", "index manifest", "tag"}


@pytest.mark.parametrize("writer", [pt.write_append_table, pt.write_pk_table], ids=["append", "pk"])
@pytest.mark.slow
def test_plans_of_tables_pypaimon_wrote_are_the_same_bytes_with_the_process_pool_as_without(
        written_once, writer, tmp_path):
    table = written_once(writer)
    root = tmp_path / "t"
    shutil.copytree(table.path, root)
    counts = _assert_plans_alike(root, tmp_path)
    assert counts["expire"] >= 5 and counts["orphans"] >= 1, counts


def _data_manifests(root: Path) -> tuple[PaimonTable, list]:
    t = open_table(str(root))
    metas = []
    for sid in t.list_snapshot_ids():
        metas += [m for m in t.data_manifests(t.snapshot(sid)) if m not in metas]
    return t, metas


@pytest.fixture
def java_table(paimon_java, tmp_path) -> Path:
    root = tmp_path / "t"
    paimon_java.generate(root, seed=5, kind="append", steps=12, partitions=2, ops={"consumer": 0})
    return root


@pytest.mark.java
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_truncated_manifest_fails_the_prefetch_as_reading_it_alone_does(java_table, processes, monkeypatch):
    _, metas = _data_manifests(java_table)
    victim = metas[len(metas) // 2]
    path = java_table / "manifest" / victim.file_name
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
    with pytest.raises(CorruptMetadata) as serial:
        open_table(str(java_table)).manifest(victim.file_name)
    monkeypatch.setenv(ENV, processes)
    reads = Reads()
    t = PaimonTable(str(java_table), on_read=reads)
    with pytest.raises(CorruptMetadata) as pooled:
        t.prefetch(metas)
    assert str(pooled.value) == str(serial.value) and pooled.value.path == str(path)
    assert str(serial.value).startswith(f"{path}: cannot decode Avro: ")
    # the manifests before it were decoded and kept: reading them again reads nothing
    before = sum(reads.files.values())
    for m in metas[:len(metas) // 2]:
        t.manifest(m.file_name)
    assert sum(reads.files.values()) == before


@pytest.mark.java
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_corrupt_manifest_before_a_missing_one_is_the_error_the_prefetch_raises(java_table, processes,
                                                                                 monkeypatch, tmp_path):
    """Workers decode ahead of the reads: a read that fails later must not overtake the earlier failure."""
    _, metas = _data_manifests(java_table)
    corrupt, missing = (java_table / "manifest" / metas[i].file_name for i in (1, 2))
    corrupt.write_bytes(b"Obj\x01garbage")
    shutil.move(missing, tmp_path / "aside")
    monkeypatch.setenv(ENV, processes)
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(str(java_table)).prefetch(metas)
    assert e.value.path == str(corrupt)
    with pytest.raises(MetadataNotFound) as e:
        PaimonTable(str(java_table)).prefetch(metas[2:])
    assert str(e.value) == f"{missing}: manifest not found"


@pytest.mark.java
@pytest.mark.parametrize("skip_unreadable", [False, True])
def test_expiry_over_a_missing_manifest_plans_as_it_did_without_the_process_pool(java_table, skip_unreadable,
                                                                                 monkeypatch, tmp_path):
    t, _ = _data_manifests(java_table)
    first = t.snapshot(t.list_snapshot_ids()[1])
    victim = t.manifest_list(first.delta_manifest_list)[0]
    shutil.move(java_table / "manifest" / victim.file_name, tmp_path / "aside")
    outcomes = []
    for processes in ("1", "2"):
        monkeypatch.setenv(ENV, processes)
        view = open_table(str(java_table))
        opts = resolve_expire_options(view.options, retain_min=1, retain_max=1, time_retained=0,
                                      max_deletes=1000, skip_unreadable=skip_unreadable)
        try:
            plan = plan_expire(view, now_ms=NOW, options=opts)
            outcomes.append((plan_to_bytes(plan), plan.stats["skipped_snapshots"]))
        except MetadataNotFound as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]
    if skip_unreadable:
        assert outcomes[0][1] == [first.id]
    else:
        assert outcomes[0] == f"{java_table / 'manifest' / victim.file_name}: manifest not found"


@pytest.mark.java
@pytest.mark.parametrize("processes", ["1", "2"])
def test_manifest_lists_read_ahead_stop_at_one_that_cannot_be_read_and_leave_its_error_to_manifest_list(
        java_table, processes, monkeypatch):
    t = open_table(str(java_table))
    lists = [(s.delta_manifest_list, s.delta_manifest_list_size) for s in map(t.snapshot, t.list_snapshot_ids())]
    victim = java_table / "manifest" / lists[len(lists) // 2][0]
    victim.write_bytes(b"Obj\x01garbage")
    with pytest.raises(CorruptMetadata) as alone:
        open_table(str(java_table)).manifest_list(victim.name)
    monkeypatch.setenv(ENV, processes)
    reads = Reads()
    view = PaimonTable(str(java_table), on_read=reads)
    view.prefetch_lists(lists)  # raises nothing: the error is manifest_list's to raise
    listed = {path for path, what, _ in reads.files if what == "manifest list"}
    # those before it and it (with workers, the reading process may have read further ahead)
    assert len(listed) == len(lists) // 2 + 1 if processes == "1" else len(listed) >= len(lists) // 2 + 1
    before = sum(reads.files.values())
    for name, _ in lists[:len(lists) // 2]:
        assert view.manifest_list(name) == open_table(str(java_table)).manifest_list(name)
    assert sum(reads.files.values()) == before  # kept: read once
    with pytest.raises(CorruptMetadata) as later:
        view.manifest_list(victim.name)
    assert str(later.value) == str(alone.value)


class _FailingRead(ArrowFileIO):
    def __init__(self, failing: str):
        super().__init__("file")
        self.failing = failing

    def read_bytes(self, path):
        if path == self.failing:
            raise StorageError(path, "cannot read: Permission denied")
        return super().read_bytes(path)


@pytest.mark.java
@pytest.mark.parametrize("remote", [False, True], ids=["local", "threads"])
def test_snapshots_read_ahead_answer_from_memory_and_leave_a_missing_or_bad_one_to_snapshot(java_table, remote,
                                                                                            monkeypatch):
    ids = open_table(str(java_table)).list_snapshot_ids()
    expected = {sid: open_table(str(java_table)).snapshot(sid) for sid in ids}
    gone, bad = ids[2], ids[4]
    (java_table / "snapshot" / f"snapshot-{gone}").unlink()
    (java_table / "snapshot" / f"snapshot-{bad}").write_bytes(b'{"id": ')
    with pytest.raises(CorruptMetadata) as alone:
        open_table(str(java_table)).snapshot(bad)
    monkeypatch.setattr(fileio, "on_local_disk", lambda paths: not remote)
    monkeypatch.setattr(fileio, "READS_AHEAD", 1)
    monkeypatch.setattr(table_module, "SNAPSHOT_READS", 3)
    reads = Reads()
    view = PaimonTable(str(java_table), on_read=reads)
    view.prefetch_snapshots(ids)
    assert sorted(path for path, what, _ in reads.files) == sorted(
        str(java_table / "snapshot" / f"snapshot-{sid}") for sid in ids if sid != gone)
    first = sum(reads.files.values())
    assert all(view.snapshot(sid) == expected[sid] for sid in ids if sid not in (gone, bad))
    assert view.try_snapshot(gone) is None
    assert sum(reads.files.values()) == first  # kept: read once
    with pytest.raises(CorruptMetadata) as later:
        view.snapshot(bad)
    assert str(later.value) == str(alone.value)


@pytest.mark.java
def test_a_snapshot_that_cannot_be_read_stops_the_read_ahead_and_its_error_is_the_one_snapshot_raises(
        java_table, monkeypatch):
    ids = open_table(str(java_table)).list_snapshot_ids()
    failing = str(java_table / "snapshot" / f"snapshot-{ids[4]}")
    monkeypatch.setattr(table_module, "SNAPSHOT_READS", 3)
    reads = Reads()
    view = PaimonTable(str(java_table), fileio=_FailingRead(failing), on_read=reads)
    view.prefetch_snapshots(ids)  # raises nothing: the error is snapshot's to raise
    assert len(reads.files) == 3  # the first part; the part holding it is dropped, and those after it not read
    with pytest.raises(StorageError) as e:
        view.snapshot(ids[4])
    assert e.value.path == failing


@pytest.mark.java
def test_pins_name_the_bytes_the_planner_read_and_apply_refuses_a_snapshot_replaced_since(java_table):
    view = open_table(str(java_table))
    ids = view.list_snapshot_ids()
    read = {sid: (java_table / "snapshot" / f"snapshot-{sid}").read_bytes() for sid in ids}
    for sid in ids[:-1]:
        view.snapshot(sid)
    replaced = java_table / "snapshot" / f"snapshot-{ids[3]}"
    body = json.loads(replaced.read_bytes())
    body["timeMillis"] += 1  # a rollback and a commit again, while planning: the same id, another snapshot
    replaced.write_text(json.dumps(body))
    pins = snapshot_pins(view, ids)  # the last one was not read by the planner: it is read now
    assert pins == {sid: snapshot_digest(read[sid]) for sid in ids}
    assert view.snapshot(ids[3]).time_millis == body["timeMillis"] - 1  # the view answers with what it read
    requirement = AssertSnapshotsPresent(ids[-1], tuple(ids[:-1]), pins, None)
    assert requirement.problems(view.refreshed()) == [
        f"snapshot {ids[3]} is not the snapshot the plan read: its file changed (was the table rolled back and "
        "committed again?)"]
    fresh = open_table(str(java_table))
    (java_table / "snapshot" / f"snapshot-{ids[1]}").unlink()
    with pytest.raises(StalePlan, match=rf"snapshot {ids[1]} \(.*\) disappeared while planning"):
        snapshot_pins(fresh, ids)
