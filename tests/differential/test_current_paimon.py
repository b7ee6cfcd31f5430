"""Differentials against current Apache Paimon (paimon-bundle, pinned in tests/support/maven.py), beside the
0.9 ones: the same seeded histories, written by Paimon 0.9's harness, expired by current Paimon's
``ExpireSnapshotsImpl`` on one copy and by lakesweep on the other. Partition, tag, changelog and consumer
expiry against current Paimon are in test_current_paimon_kinds.py."""

from __future__ import annotations

import os

import pytest

from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.options import TIME_RULE_OWN
from tests.differential.test_expire_vs_paimon import run_history
from tests.differential.test_orphans_vs_paimon import (  # noqa: F401 (bases is a fixture)
    BASES, Junk, bases, bucket_dirs, copy_of, now_ms, partition_of, plan_for,
)

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def current_paimon():
    from tests.support.paimon_current import CurrentPaimon

    return CurrentPaimon()


class ExpiresWith:
    """The 0.9 harness, with expiry done by another Paimon."""

    def __init__(self, harness, expirer) -> None:
        self._harness = harness
        self.expire = expirer.expire

    def __getattr__(self, name):
        return getattr(self._harness, name)


# Paimon 1.4 still expires a snapshot by its own time; the successor rule lakesweep follows by default is
# master's (2.0; paimon-bundle 2.0.0 does not resolve on Maven Central): these run with --time-rule own.
@pytest.mark.parametrize("seed", range(4))
def test_expire_agrees_with_current_paimon(paimon_java, current_paimon, tmp_path, seed):
    run_history(ExpiresWith(paimon_java, current_paimon), tmp_path, seed, time_rule=TIME_RULE_OWN)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 40))
def test_expire_agrees_with_current_paimon_many(paimon_java, current_paimon, tmp_path, seed):
    run_history(ExpiresWith(paimon_java, current_paimon), tmp_path, seed, time_rule=TIME_RULE_OWN)


# -- orphans: LocalOrphanFilesClean, which lakesweep follows, had no differential before


def current_dry_run(current_paimon, root: str, now_ms: int) -> set[str]:
    """Current Paimon's LocalOrphanFilesClean at ``now_ms`` minus a day, as a dry run: paths relative to
    ``root``; nothing on disk changes."""
    from tests.differential.test_orphans_vs_paimon import DAY, tree_state

    before = tree_state(root)
    found = {os.path.relpath(p, root) for p in current_paimon.orphan_clean(root, older_than_ms=now_ms - DAY)}
    assert tree_state(root) == before, "Paimon's dry run changed the table"
    return found


@pytest.mark.parametrize("name", sorted(BASES))
def test_orphan_candidates_agree_with_current_paimons_local_orphan_files_clean(paimon_java, current_paimon, bases,
                                                                             tmp_path, name):
    """The junk of the 0.9 differential (failed writes, stray metadata, a junk bucket, files at the
    threshold, young files, directories that are not Paimon's), planned alike by both."""
    root, info = copy_of(bases, name, tmp_path)
    now = now_ms()
    fmt = info["options"]["file.format"]
    junk = Junk(root, now)
    first, last = bucket_dirs(root, info)[0], bucket_dirs(root, info)[-1]
    planned = {
        junk.file(f"{first}/data-failed0-0000-0000-0000-000000000000-0.{fmt}"),
        junk.file(f"{last}/data-failed1-0000-0000-0000-000000000000-0.{fmt}"),
        junk.file(f"{first}/changelog-failed2-0000-0000-0000-000000000000-0.{fmt}"),
        junk.file(f"{first}/data-failed3-0000-0000-0000-000000000000-0.{fmt}.index"),
        junk.file(os.path.join(partition_of(first), "bucket-7", f"data-failed4-0000-0000-0000-000000000000-0.{fmt}")),
        junk.file("manifest/manifest-stray0-0000-0000-0000-000000000000-0"),
        junk.file("manifest/manifest-list-stray1-0000-0000-0000-000000000000-0"),
        junk.file("manifest/index-manifest-stray2-0000-0000-0000-000000000000-0"),
        junk.file("index/index-stray3-0000-0000-0000-000000000000-0"),
        junk.file("statistics/stat-stray4-0000-0000-0000-000000000000-0"),
        junk.file("snapshot/UNKNOWN-stray5"),
        junk.file("snapshot/.snapshot-7.crc"),
        junk.file("changelog/UNKNOWN-stray6"),
    }
    junk.file(f"{first}/data-young0-0000-0000-0000-000000000000-0.{fmt}", young=True)
    junk.file("manifest/manifest-young1-0000-0000-0000-000000000000-0", young=True)
    junk.file(f"tmp/data-elsewhere0-0000-0000-0000-000000000000-0.{fmt}")
    junk.age()
    table = open_table(root)
    ours = {os.path.relpath(table.paths.absolute(a.path), root) for a in plan_for(root, now).actions}
    assert ours == planned
    assert current_dry_run(current_paimon, root, now) == ours
