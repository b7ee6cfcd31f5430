"""A delete on HDFS whose answer is lost after the NameNode acted (a proxy in front of a real NameNode drops
the connection) is never journaled ``ALREADY_ABSENT`` when it is retried and finds the file gone."""

import uuid

import pytest

from lakesweep.applier.actions import Outcome, execute_with_retry
from lakesweep.engine.errors import DeleteUnconfirmed
from lakesweep.engine.fileio import DeleteOutcome, fileio_for
from lakesweep.engine.hdfs_fileio import HdfsFileIO
from lakesweep.engine.plan import Action, Verb
from tests.support.hdfs_proxy import losing_proxy


@pytest.fixture
def table(hdfs):
    """A table root on the real HDFS with two files, and the same root through the proxy."""
    name = f"lost-{uuid.uuid4().hex[:8]}"
    io = fileio_for(f"{hdfs}/{name}")
    for f in ("data/f-0", "data/f-1"):
        io.write_atomic(f"{hdfs}/{name}/{f}", b"x")
    with losing_proxy(hdfs) as proxy:
        yield io, f"{hdfs}/{name}", proxy, f"hdfs://127.0.0.1:{proxy.port}/{name}"


def test_a_delete_whose_answer_was_lost_is_journaled_deleted_on_retry(table):
    io, root, proxy, through_proxy = table
    proxy.lose_deletes = 1
    action = Action("data-file", "data/f-0", verb=Verb.DELETE_FILE, phase=1, action_id=3)

    result = execute_with_retry(HdfsFileIO(through_proxy.split("/")[2]), through_proxy, action,
                                sleep=lambda s: None, clock_ms=lambda: 5)

    # The first attempt's delete reached the NameNode and its answer was lost; the second finds the file gone.
    assert (proxy.lost, result.outcome, result.attempts, result.error) == (1, Outcome.DELETED, 2, None)
    assert [f.path.rsplit("/", 1)[1] for f in io.list(f"{root}/data")] == ["f-1"]


def test_a_lost_delete_answer_raises_delete_unconfirmed_naming_the_path(table):
    _, _, proxy, through_proxy = table
    proxy.lose_deletes = 1
    io = HdfsFileIO(through_proxy.split("/")[2])

    with pytest.raises(DeleteUnconfirmed) as caught:
        io.delete(f"{through_proxy}/data/f-0")

    assert caught.value.path == f"{through_proxy}/data/f-0"
    assert io.delete(f"{through_proxy}/data/f-0") == DeleteOutcome.ALREADY_ABSENT  # on its own: nothing there
