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
