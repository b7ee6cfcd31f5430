import pytest

from tests.support import pypaimon_tables as pt


@pytest.fixture
def append_table(tmp_path):
    return pt.write_append_table(str(tmp_path / "wh"))


@pytest.fixture
def pk_table(tmp_path):
    return pt.write_pk_table(str(tmp_path / "wh"))
