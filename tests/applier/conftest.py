import os
import shutil

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def spark():
    # Executors import test helpers (the faulty FileIO) from the repository.
    os.environ["PYTHONPATH"] = REPO + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    from lakesweep.applier.spark_exec import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture
def recorder(tmp_path):
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    r = DuckDBRecorder(str(tmp_path / "journal.duckdb"))
    yield r
    r.close()


def copy_table(src: str, dst: str) -> str:
    shutil.copytree(src, dst)
    return dst
