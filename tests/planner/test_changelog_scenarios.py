"""Decoupled changelog expiry scenarios of Paimon's ExpireSnapshotsTest and ChangelogExpireTest (spec §11.1
items 21 and 23, §11.5), which need changelog expiry to run: snapshot expiry leaves changelogs, then
changelog expiry removes them as Paimon does."""

from __future__ import annotations

import os

from applier.local import apply_locally
from engine.paimon.paths import external_roots
from engine.paimon.table import PaimonTable, open_table
from engine.paimon.verify import verify_table
from planner.changelog import plan_changelog
from planner.kinds import plan_kind
from tests.planner.conftest import FAR_FUTURE, expire
from tests.support.table_builder import ADD, DELETE, E, all_files

P = dict(partition_keys=("dt",), partition_types=("STRING",))


def expire_changelog(root, **flags):
    """Plan and apply a changelog expiry (in-process, sequential); returns the plan."""
    t = open_table(root)
    flags.setdefault("time_retained", "0 s")
    plan = plan_changelog(t, now_ms=FAR_FUTURE, options=plan_kind("changelog").resolve_options(t.options, **flags))
    results = apply_locally(plan, external=external_roots(t.options))
    assert all(r.outcome != "FAILED" for r in results)
    return plan


def changelog_ids(b):
    return PaimonTable(b.root).list_changelog_ids()


def test_changelog_outlived_snapshot(builder):
    # testChangelogOutLivedSnapshot: 10 commits, snapshot max 2, changelog max 3
    b = builder(options={"changelog.num-retained.max": "3"}, **P)
    for i in range(10):
        b.commit([E(ADD, f"f{i}", ("x",))])
    expire(b.root, retain_min=2, retain_max=2)
    assert PaimonTable(b.root).list_snapshot_ids() == [9, 10]
    assert changelog_ids(b) == list(range(1, 9))  # contiguous with the snapshots
    for _ in range(2):
        expire_changelog(b.root, retain_min=1, retain_max=3)
    assert changelog_ids(b) == [8]  # the earliest and the latest changelog: earliestSnapshot - 1
    t = PaimonTable(b.root)
    assert t.changelog_earliest_latest() == (8, 8)
    assert verify_table(t).whole


def test_a_consumer_keeps_the_changelogs_it_reads(builder):
    # testConsumerChangelogOnly: consumer at 3; snapshots expire to the latest, changelogs from 3 stay
    b = builder(options={"consumer.changelog-only": "true", "changelog.num-retained.max": "100"}, **P)
    for i in range(6):
        b.commit([E(ADD, f"f{i}", ("x",))])
    b.consumer("job", 3)
    expire(b.root, retain_min=1, retain_max=1)
    assert PaimonTable(b.root).list_snapshot_ids() == [6]
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert (plan.begin, plan.end, plan.scope["bound"]) == (1, 3, "a consumer")
    assert changelog_ids(b)[0] == 3


def test_a_missing_middle_changelog_does_not_stop_expiry(builder):
    # ChangelogExpireTest#testExpireWithMiddleChangelogNotFound
    b = builder(options={"changelog.num-retained.max": "100"}, **P)
    for i in range(8):
        b.commit([E(ADD, f"f{i}", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    os.remove(os.path.join(b.root, "changelog", "changelog-3"))
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    [present] = [r for r in plan.requirements if r.TYPE == "paimon.changelogs-present"]
    assert (plan.begin, plan.end) == (1, 7) and sorted(present.changelogs) == [1, 2, 4, 5, 6]
    assert changelog_ids(b) == [7]
    assert verify_table(PaimonTable(b.root)).whole


def test_manifests_the_earliest_snapshot_still_lists_survive(builder):
    # ChangelogExpireTest#testChangelogExpireWithUncleanedManifestLists: the skipping set holds the
    # earliest snapshot, so the manifests its lists still name survive, though expired changelogs' base
    # lists (kept by snapshot expiry for producer 'none') name them too
    b = builder(options={"changelog.num-retained.max": "100"}, **P)
    for name in "abcd":
        b.commit([E(ADD, name, ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    expire_changelog(b.root, retain_min=1, retain_max=1)
    t = PaimonTable(b.root)
    assert verify_table(t).whole
    latest = t.snapshot(t.earliest_latest()[1])
    for m in t.data_manifests(latest):
        assert os.path.exists(t.paths.manifest(m.file_name))


def test_append_files_deferred_by_snapshot_expiry_go_with_their_changelog(builder):
    b = builder(options={"changelog.num-retained.max": "100"}, **P)
    a = E(ADD, "a", ("x",))
    b.commit([a])
    b.commit([E(DELETE, "a", ("x",), file_source=0)])  # an APPEND-sourced delete: deferred (T-14)
    b.commit([E(ADD, "c", ("x",))])
    b.commit([E(ADD, "d", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    assert os.path.exists(b.data_path(a))
    plan = expire_changelog(b.root, retain_min=1, retain_max=1)
    assert (plan.begin, plan.end) == (1, 3)
    assert not os.path.exists(b.data_path(a))
    assert "changelog/changelog-1" not in all_files(b.root) and "changelog/changelog-3" in all_files(b.root)
