"""Differential: lakesweep's plan + apply against Paimon's own ExpireSnapshotsImpl (Paimon 0.9 Java core),
on seeded random histories written by Paimon itself.

Each history is copied twice; Paimon expires one copy, lakesweep plans and applies the other; the two
file trees (directories included) and the EARLIEST hints must be identical. Paimon 0.9 decides by a
snapshot's own time, so lakesweep runs with ``time_rule="own"`` here; the cut-off is placed midway
between two snapshot times, far from the clock drift of the Java call.

The same tables also check the engine: for every snapshot and tag, the live data files and index files
lakesweep computes equal the ones Paimon's reader uses.
"""

import os
import random
import shutil

import pytest

from lakesweep.applier.local import apply_locally
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import TIME_RULE_OWN, resolve_expire_options

pytestmark = pytest.mark.java


def tree(root: str) -> tuple[set[str], set[str]]:
    files, dirs = set(), set()
    for d, dirnames, filenames in os.walk(root):
        for n in filenames:
            files.add(os.path.relpath(os.path.join(d, n), root))
        for n in dirnames:
            dirs.add(os.path.relpath(os.path.join(d, n), root))
    return files, dirs


def hint(root: str):
    try:
        with open(os.path.join(root, "snapshot", "EARLIEST")) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def engine_live(table, snapshot) -> tuple[set[str], set[str]]:
    paths = table.paths
    data = set()
    for e in table.live_entries(snapshot):
        data.add(paths.relative(paths.data_file(e.partition, e.bucket, e.file)))
        data.update(paths.relative(paths.extra_file(e.partition, e.bucket, e.file, x)) for x in e.file.extra_files)
    index = set()
    if snapshot.index_manifest:
        for ie in table.index_manifest(snapshot.index_manifest):
            f = ie.index_file
            index.add(paths.relative(paths.index_file(ie.partition, ie.bucket, f.file_name, f.external_path)))
    return data, index


def check_live_files(harness, root: str) -> int:
    """Engine's live sets == Paimon's, for every snapshot and tag; and ``verify`` checks exactly the data
    files of their union. Returns how many were compared."""
    paimon = harness.live_files(root)
    table = open_table(root)
    union = set().union(*paimon["snapshots"].values(), *paimon["tags"].values())
    verified = {table.paths.relative(p) for p in verify_table(table).referenced}
    data = {p for p in verified if "/bucket-" in p and not os.path.basename(p).startswith("changelog-")}
    assert data == {p for p in union if not p.startswith("index/")}, "verify checks other files than are live"
    compared = 0
    for sid, files in paimon["snapshots"].items():
        data, index = engine_live(table, table.snapshot(int(sid)))
        paimon_data = {p for p in files if not p.startswith("index/")}
        assert data == paimon_data, f"snapshot {sid}: engine and Paimon disagree on live data files"
        assert index == set(paimon["indexFiles"].get(sid, [])), f"snapshot {sid}: index files differ"
        assert {p for p in files if p.startswith("index/")} <= index
        compared += 1
    tags = {t.name: t for t in table.tags()}
    for name, files in paimon["tags"].items():
        data, _ = engine_live(table, tags[name].snapshot)
        assert data == {p for p in files if not p.startswith("index/")}, f"tag {name}: live data files differ"
        compared += 1
    return compared


def run_history(harness, tmp_path, seed: int, *, time_rule: str = TIME_RULE_OWN) -> dict:
    rng = random.Random(seed)
    kind = "pk" if seed % 2 == 0 else "append"
    base = str(tmp_path / "base")
    options = {"snapshot.clean-empty-directories": str(rng.random() < 0.4).lower()}
    ops = None if rng.random() < 0.5 else {"consumer": 0}
    gen = harness.generate(base, seed=seed, kind=kind, steps=rng.randint(8, 28), options=options, ops=ops)
    check_live_files(harness, base)

    snaps = gen["snapshots"]
    n = len(snaps)
    times = sorted(s["timeMillis"] for s in snaps)
    cut = rng.randrange(0, n + 1)
    if cut == 0:
        older_than = times[0] - 1_000
    elif cut == n:
        older_than = times[-1] + 1_000
    else:
        older_than = (times[cut - 1] + times[cut]) // 2
    retain_min = rng.randint(1, max(1, n - 1))
    retain_max = rng.randint(retain_min, n + 2)
    max_deletes = rng.choice([n + 10, rng.randint(1, n + 1)])

    theirs, ours = str(tmp_path / "paimon"), str(tmp_path / "lakesweep")
    shutil.copytree(base, theirs)
    shutil.copytree(base, ours)
    harness.expire(theirs, retain_min=retain_min, retain_max=retain_max, older_than_ms=older_than,
                   max_deletes=max_deletes)
    table = open_table(ours)
    opts = resolve_expire_options(table.options, retain_min=retain_min, retain_max=retain_max, time_retained=0,
                                  max_deletes=max_deletes, time_rule=time_rule)
    plan = plan_expire(table, now_ms=older_than, options=opts)
    results = apply_locally(plan)
    assert all(r.outcome != "FAILED" for r in results)

    t_files, t_dirs = tree(theirs)
    o_files, o_dirs = tree(ours)
    setting = dict(seed=seed, kind=kind, n=n, retain_min=retain_min, retain_max=retain_max,
                   max_deletes=max_deletes, cut=cut, range=(plan.begin, plan.end), options=gen["options"])
    assert o_files - t_files == set(), f"lakesweep kept files Paimon deleted: {setting}"
    assert t_files - o_files == set(), f"lakesweep deleted files Paimon kept: {setting}"
    assert o_dirs == t_dirs, f"directories differ: {setting}"
    assert hint(ours) == hint(theirs), setting
    # Paimon's generated history, and both expiries of it, leave whole tables
    for location in (base, theirs, ours):
        report = verify_table(open_table(location))
        assert report.whole, (location, report.problems[:3], setting)
    return {"deleted": len(set(tree(base)[0]) - o_files), "range": (plan.begin, plan.end)}


# Seeds 0 to 10 draw every combination of table kind, clean-empty-directories and consumer; the slow tier
# runs the other histories.
@pytest.mark.parametrize("seed", range(11))
def test_expire_agrees_with_paimon(paimon_java, tmp_path, seed):
    run_history(paimon_java, tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(11, 230))
def test_expire_agrees_with_paimon_many(paimon_java, tmp_path, seed):
    run_history(paimon_java, tmp_path, seed)


def test_differential_suite_exercises_real_deletions(paimon_java, tmp_path):
    """Guard against a vacuous differential: across a few seeds, files really are deleted by both."""
    deleted = [run_history(paimon_java, tmp_path / str(s), s)["deleted"] for s in (101, 102, 103, 104)]
    assert sum(deleted) > 0
