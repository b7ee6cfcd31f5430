"""Fixtures of the known-loss suite: an Iceberg SQL catalog (``tests.iceberg.conftest``'s, under another name,
since ``lake`` here is a Paimon table as in ``tests.planner``)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyiceberg")

from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402

from tests.iceberg.conftest import CATALOG, Lake as IcebergLake  # noqa: E402


@pytest.fixture
def ice(tmp_path, monkeypatch) -> IcebergLake:
    """A SQLite catalog named ``lsice`` in ``tmp_path`` with namespace ``ns``, configured through pyiceberg's
    environment variables as lakesweep reads it (the same catalog as ``tests.iceberg.conftest.lake``)."""
    root = str(tmp_path / "ice")
    os.makedirs(root + "/wh")
    env = {"URI": f"sqlite:///{root}/catalog.db", "WAREHOUSE": f"file://{root}/wh", "TYPE": "sql"}
    for key, value in env.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__{key}", value)
    catalog = SqlCatalog(CATALOG, uri=env["URI"], warehouse=env["WAREHOUSE"])
    catalog.create_namespace("ns")
    return IcebergLake(root, catalog)
