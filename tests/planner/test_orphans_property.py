"""Property: orphan cleaning never plans a file that a snapshot, tag, branch or retained changelog of the table
can reach, nor a file named like one (but for stray files of snapshot and changelog directories, which
nothing refers to by name), however the table got where it is.

Tables are real: histories written by Paimon's Java core (append and primary-key tables, compactions,
overwrites, deletion vectors, changelog producers, tags, consumers; some with a decoupled changelog
lifecycle) or by pypaimon (tags, a branch with its own commits). On a copy, Hypothesis then expires with
Paimon or lakesweep, loses the oldest snapshot files (as a hand clean-up or an expiry that removes snapshot
files before their data leaves a table: their files become real orphans), adds tags and a branch by
copying snapshots, ages everything, and drops junk: copies of live files' names in other places, stray
manifests, files in and out of the directories orphan cleaning lists. The oracle is ``engine.paimon.reachability``, by path, over every holder of every branch:
not the planner's used set.
"""

from __future__ import annotations

import os
import posixpath
import random
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import MetadataNotFound
from lakesweep.engine.paimon.orphans import ListedFile, list_orphan_candidates
from lakesweep.engine.paimon.reachability import first_reachable, reachable_paths
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import kind_spec
from lakesweep.engine.timeutil import parse_duration_ms
from lakesweep.journal.memory_store import MemoryRecorder
from lakesweep.planner.paimon.options import resolve_orphan_options
from lakesweep.planner.paimon.orphans import plan_orphans
from tests.applier.test_safety import Lake
from tests.planner.conftest import expire as lakesweep_expire
from tests.planner.test_orphans import NOW

pytestmark = pytest.mark.java

DAY_S = 86_400
SOURCES = ("append", "pk", "pypaimon")


@pytest.fixture(scope="module")
def base_table(tmp_path_factory, paimon_java):
    """``base_table(source, seed, steps)``: the root of a table with that history, written once per module."""
    root = tmp_path_factory.mktemp("orphan-property-bases")
    made: dict[tuple, str] = {}

    def make(source: str, seed: int, steps: int) -> str:
        key = (source, seed, steps)
        if key not in made:
            where = str(root / f"{source}-{seed}-{steps}")
            if source == "pypaimon":
                made[key] = pypaimon_history(where, seed, steps)
            else:
                # Even seeds keep changelogs longer than snapshots: lakesweep's expiry then writes changelog-N.
                options = None if seed % 2 else {"changelog.num-retained.max": 3000}
                paimon_java.generate(where, seed=seed, kind=source, steps=steps, options=options)
                made[key] = where
        return made[key]

    return make


def pypaimon_history(warehouse: str, seed: int, steps: int) -> str:
    """Commits, an overwrite, tags and a branch with commits of its own, written by pypaimon."""
    rng = random.Random(seed)
    lake = Lake(warehouse)
    branched = False
    for step in range(steps):
        lake.commit(rng.choice("abc"), overwrite=rng.random() < 0.2)
        if rng.random() < 0.3:
            lake.table.create_tag(f"t{step}", snapshot_id=rng.randint(1, step + 1))
        if not branched and step >= 2 and rng.random() < 0.5:
            lake.table.create_tag("from", snapshot_id=step)
            lake.table.branch_manager().create_branch("b1", "from")
            branched = True
        elif branched and rng.random() < 0.4:
            lake.commit(rng.choice("abd"), branch="b1", overwrite=rng.random() < 0.3)
    return lake.root


# -- what Hypothesis does to a copy ----------------------------------------------------------------------


def snapshot_ids(base: str) -> list[int]:
    d = os.path.join(base, "snapshot")
    return sorted(int(n[len("snapshot-"):]) for n in os.listdir(d) if n.startswith("snapshot-")
                  and n[len("snapshot-"):].isdigit()) if os.path.isdir(d) else []


def write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def lose_oldest(root: str, n: int) -> None:
    """Remove the ``n`` oldest snapshot files of main, keeping one at least, and move EARLIEST past them."""
    ids = snapshot_ids(root)
    for sid in ids[:min(n, len(ids) - 1)]:
        os.remove(os.path.join(root, "snapshot", f"snapshot-{sid}"))
    hint = os.path.join(root, "snapshot", "EARLIEST")
    if os.path.exists(hint):
        write(hint, str(snapshot_ids(root)[0]).encode())


def _mkdirs(path: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def copy_to_tag(root: str, pick: int) -> None:
    """Paimon's create_tag: the snapshot's JSON as ``tag/tag-<name>``."""
    ids = snapshot_ids(root)
    sid = ids[pick % len(ids)]
    shutil.copy(os.path.join(root, "snapshot", f"snapshot-{sid}"), _mkdirs(os.path.join(root, "tag", f"tag-p{sid}")))


def branch_from(root: str, pick: int, *, then_lose: bool) -> None:
    """Paimon's create_branch from a snapshot: its schemas and the snapshot, copied under branch/branch-prop;
    with ``then_lose``, main then loses every snapshot up to it (only the branch holds their files)."""
    ids = snapshot_ids(root)
    sid = ids[pick % len(ids)]
    base = os.path.join(root, "branch", "branch-prop")
    if os.path.exists(base):
        return
    shutil.copytree(os.path.join(root, "schema"), os.path.join(base, "schema"))
    shutil.copy(os.path.join(root, "snapshot", f"snapshot-{sid}"), _mkdirs(os.path.join(base, "snapshot",
                                                                                         f"snapshot-{sid}")))
    for hint in ("EARLIEST", "LATEST"):
        write(os.path.join(base, "snapshot", hint), str(sid).encode())
    if then_lose:
        lose_oldest(root, ids.index(sid) + 1)


def age_all(root: str, days: float) -> None:
    t = NOW / 1000 - days * DAY_S
    for d, _, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(d, f), (t, t))


def live_names(root: str) -> list[str]:
    """Names of files the table's latest snapshot reaches, to copy elsewhere."""
    t = open_table(root)
    _, latest = t.earliest_latest()
    return sorted({posixpath.basename(p) for p in reachable_paths(t, t.snapshot(latest), with_changelog=True)})


LISTED = ["{bucket}", "{bucket}", "dt=zz/bucket-5", "manifest", "index", "statistics", "snapshot", "changelog",
          "branch/branch-prop/snapshot"]  # {bucket}: one of the table's bucket directories
UNLISTED = ["tmp", "{bucket}/sub", "", "dt=zz"]
PLACES = LISTED + UNLISTED
# snapshot-<n>x and changelog-<n>.tmp start like Paimon's metadata files: never listed, never cleaned
NAMES = ["{live}", "{live}", "junk-{i}", "manifest-junk-{i}", "snapshot-{i}x", "changelog-{i}.tmp", "EARLIEST"]
UNUSED_NAMES = ("junk-{i}", "manifest-junk-{i}")

junk_strategy = st.lists(st.tuples(st.integers(0, len(PLACES) - 1), st.integers(0, len(NAMES) - 1),
                                   st.integers(0, 10_000), st.sampled_from([0, 0.5, 1.5, 3, 6])), max_size=12)


def drop_junk(root: str, junk) -> list[tuple[str, str, str, float]]:
    """Write the junk (never over a file of the table); returns (path, place, name, age in days) of each."""
    names = live_names(root)
    buckets = sorted({os.path.relpath(d, root) for d, _, _ in os.walk(root)
                      if posixpath.basename(d).startswith("bucket-")})
    made = []
    for i, (place, name, n, days) in enumerate(junk):
        rel_dir = PLACES[place].format(bucket=buckets[n % len(buckets)] if buckets else "dt=zz/bucket-0")
        if rel_dir.startswith("branch/") and not os.path.isdir(os.path.join(root, "branch", "branch-prop")):
            continue  # a directory without a schema would be a branch without one: refused, as in Java
        file_name = NAMES[name].format(live=names[n % len(names)], i=i)
        if file_name == "EARLIEST" and rel_dir.endswith(("snapshot", "changelog")):
            continue  # there it is the hint, not junk
        rel = posixpath.join(rel_dir, file_name) if rel_dir else file_name
        path = os.path.join(root, rel)
        parent = os.path.dirname(path)
        if os.path.exists(path) or (os.path.exists(parent) and not os.path.isdir(parent)):
            continue
        write(path, b"junk")
        t = NOW / 1000 - days * DAY_S
        os.utime(path, (t, t))
        made.append((rel, PLACES[place], NAMES[name], days))
    return made


# -- the oracle ------------------------------------------------------------------------------------------


def every_reachable_path(table) -> set[str]:
    """What every snapshot (with its changelog files), tag and retained changelog of every branch reaches."""
    out: set[str] = set()
    for view in [table] + [table.branch_table(b) for b in table.branch_names()]:
        for sid in view.list_snapshot_ids():
            s = view.try_snapshot(sid)
            if s is not None:
                out |= reachable_paths(view, s, with_changelog=True)
        for tag in view.tags():
            out |= reachable_paths(view, tag.snapshot, with_changelog=False)
        for cid in view.list_changelog_ids():
            try:
                out |= reachable_paths(view, view.changelog(cid), with_changelog=True)
            except MetadataNotFound:
                pass  # a list expiry removed: first_reachable (below) checks what that changelog still reaches
    return out


def first_holder(table, planned: set[str]) -> str | None:
    """``first_reachable`` from every branch's side: between them, every holder of the table."""
    for view in [table] + [table.branch_table(b) for b in table.branch_names()]:
        hit = first_reachable(view, frozenset(planned), end=None)
        if hit is not None:
            return f"{hit[0].what} reaches {hit[1]}"
    return None


def every_file(root: str) -> list[ListedFile]:
    out = []
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            st = os.stat(p)
            out.append(ListedFile(p, st.st_size, st.st_mtime_ns // 1_000_000))
    return out


HISTORIES = dict(
    source=st.sampled_from(SOURCES), seed=st.integers(0, 5), steps=st.sampled_from([6, 14]),
    expiry=st.sampled_from([None, "paimon", "lakesweep", "lakesweep"]), retain=st.integers(1, 4),
    lose=st.integers(0, 3), tag=st.none() | st.integers(0, 50), branch=st.none() | st.integers(0, 50),
    lose_below_branch=st.booleans(), table_age=st.sampled_from([0, 0.5, 2, 5, 5]), junk=junk_strategy,
    older_than=st.sampled_from(["1 h", "1 d", "2 d", "4 d"]))


# 40 examples in the default tier; the slow tier's twin below draws 120 (or $LAKESWEEP_ORPHAN_EXAMPLES).
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**HISTORIES)
def test_orphan_cleaning_never_plans_what_any_holder_reaches(base_table, paimon_java, source, seed, steps, expiry,
                                                             retain, lose, tag, branch, lose_below_branch,
                                                             table_age, junk, older_than):
    work = tempfile.mkdtemp(prefix="lakesweep-orphan-prop-")
    try:
        root = os.path.join(work, "t")
        shutil.copytree(base_table(source, seed, steps), root)
        if expiry == "paimon" and source != "pypaimon":
            paimon_java.expire(root, retain_min=retain, retain_max=retain, max_deletes=1000)
        elif expiry == "lakesweep":
            lakesweep_expire(root, retain_min=retain, retain_max=retain, max_deletes=1000)
        lose_oldest(root, lose)
        if tag is not None:
            copy_to_tag(root, tag)
        if branch is not None and source != "pypaimon":
            branch_from(root, branch, then_lose=lose_below_branch)
        age_all(root, table_age)
        made = drop_junk(root, junk)

        table = open_table(root)
        options = resolve_orphan_options({}, older_than=older_than)
        plan = plan_orphans(table, list_orphan_candidates(table), now_ms=NOW, options=options)
        planned = {table.paths.absolute(a.path): a for a in plan.actions}

        reachable = every_reachable_path(table)
        assert not set(planned) & reachable, sorted(set(planned) & reachable)[:3]
        assert first_holder(table, set(planned)) is None
        used = {posixpath.basename(p) for p in reachable}
        # Stray files of snapshot and changelog directories are the exception: nothing refers to a file there by
        # name (Java deletes them whatever their name).
        by_name = [a.path for a in plan.actions if kind_spec(a.kind).by_name and posixpath.basename(a.path) in used]
        assert not by_name, by_name[:3]
        # And it finds what it must: old junk under a name nothing uses, directly in a listed directory; never
        # junk elsewhere.
        window_days = parse_duration_ms(older_than) / 86_400_000
        paths = {a.path for a in plan.actions}
        assert {rel for rel, place, name, days in made if place in LISTED and name in UNUSED_NAMES
                and days > window_days} <= paths
        assert not {rel for rel, place, _, _ in made if place in UNLISTED} & paths

        junk_paths = {rel for rel, _, _, _ in made}
        event(f"plans {'some' if paths - junk_paths else 'no'} file Paimon wrote")
        live_copies = any(name == "{live}" for _, _, name, _ in made)
        event(f"{'has' if live_copies else 'has no'} junk named like a live file")
        event(f"retained changelogs: {bool(table.list_changelog_ids())}; branches: {bool(table.branch_names())}")

        # The same plan from a listing of every file (an inventory), and an apply that loses nothing.
        again = plan_orphans(table, every_file(root), now_ms=NOW, options=options)
        assert [a.path for a in again.actions] == [a.path for a in plan.actions]
        if plan.actions:
            with MemoryRecorder() as recorder:
                report = apply_plan(plan, recorder, executor=DriverExecutor())
            assert report.state == "COMPLETED" and report.counts["SKIPPED_REFERENCED"] == 0
        assert all(os.path.exists(p) for p in reachable), sorted(p for p in reachable if not os.path.exists(p))[:3]
    finally:
        shutil.rmtree(work)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("LAKESWEEP_ORPHAN_EXAMPLES", 120)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(**HISTORIES)
def test_orphan_cleaning_never_plans_what_any_holder_reaches_on_more_examples(
        base_table, paimon_java, source, seed, steps, expiry, retain, lose, tag, branch, lose_below_branch, table_age,
        junk, older_than):
    test_orphan_cleaning_never_plans_what_any_holder_reaches.hypothesis.inner_test(
        base_table, paimon_java, source, seed, steps, expiry, retain, lose, tag, branch, lose_below_branch, table_age,
        junk, older_than)
