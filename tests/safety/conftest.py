"""Fixtures of the known-loss suite: an Iceberg SQL catalog (``tests.iceberg.conftest``'s, under another name,
since ``lake`` here is a Paimon table as in ``tests.planner``)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyiceberg")

from tests.iceberg.conftest import Lake as IcebergLake, make_lake  # noqa: E402


@pytest.fixture
def ice(tmp_path, monkeypatch) -> IcebergLake:
    """A SQLite catalog named ``lsice`` in ``tmp_path`` with namespace ``ns``, configured through pyiceberg's
    environment variables as lakesweep reads it (the same catalog as ``tests.iceberg.conftest.lake``)."""
    return make_lake(tmp_path / "ice", monkeypatch)
