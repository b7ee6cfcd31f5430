"""Planner properties over random histories (hypothesis): determinism, safety, idempotence."""

import os
import random
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakesweep.engine.plan_io import plan_to_bytes
from lakesweep.engine.paimon.table import PaimonTable
from lakesweep.planner.paimon.guard import reachable_paths
from tests.planner.conftest import expire, make_plan
from tests.support.table_builder import ADD, DELETE, E, TableBuilder


def random_history(root: str, seed: int, steps: int) -> TableBuilder:
    rng = random.Random(seed)
    b = TableBuilder(root, partition_keys=("dt",), partition_types=("STRING",),
                     options={"snapshot.clean-empty-directories": str(rng.random() < 0.5).lower()})
    live: list[E] = []
    n = 0
    for _ in range(steps):
        op = rng.random()
        adds = []
        for _ in range(rng.randint(0, 3)):
            n += 1
            adds.append(E(ADD, f"data-{n}", (rng.choice("abc"),), bucket=rng.randint(0, 1),
                          extra_files=(f"data-{n}.index",) if rng.random() < 0.2 else ()))
        dels = []
        if live and op < 0.5:
            for e in rng.sample(live, rng.randint(1, min(3, len(live)))):
                dels.append(E(DELETE, e.name, e.partition, e.bucket, e.level, e.extra_files))
        if live and 0.5 <= op < 0.6:  # compaction upgrade of one file (same name, new level)
            e = rng.choice(live)
            up = E(ADD, e.name, e.partition, e.bucket, e.level + 1, e.extra_files, file_source=1)
            dels.append(E(DELETE, e.name, e.partition, e.bucket, e.level, e.extra_files))
            b.commit(dels + [up] + adds, kind="COMPACT")
            live = [x for x in live if x.name != e.name] + [up] + adds
        else:
            if not adds and not dels:
                n += 1
                adds = [E(ADD, f"data-{n}", ("a",))]
            b.commit(adds + dels)
            gone = {d.name for d in dels}
            live = [x for x in live if x.name not in gone] + adds
        if rng.random() < 0.15:
            b.tag(f"tag{len(b.snapshots)}", rng.choice(list(b.snapshots)))
    if rng.random() < 0.3:
        b.consumer("job", rng.randint(1, max(b.snapshots) + 1))
    return b


def referenced(root: str) -> set[str]:
    t = PaimonTable(root)
    out = set()
    for sid in t.list_snapshot_ids():
        out |= reachable_paths(t, t.snapshot(sid), with_changelog=True)
    for tag in t.tags():
        out |= reachable_paths(t, tag.snapshot, with_changelog=False)
    return out


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 14), retain=st.integers(1, 6))
def test_plans_are_deterministic_and_safe_and_idempotent(seed, steps, retain):
    root = tempfile.mkdtemp(prefix="lakesweep-prop-")
    try:
        b = random_history(os.path.join(root, "t"), seed, steps)
        first = make_plan(b.root, retain_min=retain, retain_max=retain + 2)
        assert plan_to_bytes(make_plan(b.root, retain_min=retain, retain_max=retain + 2)) == plan_to_bytes(first)
        expire(b.root, retain_min=retain, retain_max=retain + 2)
        missing = {p for p in referenced(b.root) if not os.path.exists(p)}
        assert not missing, f"retained snapshots or tags lost files: {sorted(missing)[:5]}"
        again = make_plan(b.root, retain_min=retain, retain_max=retain + 2)
        assert not again.deletes_anything, [a.path for a in again.actions][:5]
    finally:
        shutil.rmtree(root)
