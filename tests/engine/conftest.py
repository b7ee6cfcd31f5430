import dataclasses
import os
import shutil

import pytest

from tests.support import pypaimon_tables as pt


@pytest.fixture(scope="module")
def written_once(tmp_path_factory):
    """pypaimon's tables, each written once per module on first use (``writer`` -> its ``WrittenTable``)."""
    made = {}

    def get(writer):
        if writer not in made:
            made[writer] = writer(str(tmp_path_factory.mktemp(writer.__name__) / "wh"))
        return made[writer]

    return get


def copy_of(written: pt.WrittenTable, warehouse: str) -> pt.WrittenTable:
    """The table's whole warehouse copied to ``warehouse``: the same table (its paths are relative) at a new
    path."""
    source = os.path.dirname(os.path.dirname(written.path))  # <warehouse>/db.db/<table>
    shutil.copytree(source, warehouse)
    return dataclasses.replace(written, path=os.path.join(warehouse, os.path.relpath(written.path, source)))


@pytest.fixture
def append_table(written_once, tmp_path):
    return copy_of(written_once(pt.write_append_table), str(tmp_path / "wh"))


@pytest.fixture
def pk_table(written_once, tmp_path):
    return copy_of(written_once(pt.write_pk_table), str(tmp_path / "wh"))
