"""One request per object on S3 (HEAD, then DELETE): a delete whose answer is lost is never journaled
``ALREADY_ABSENT`` when it is retried and finds the object gone (the fault-injecting proxy loses the answers)."""

import uuid

import pytest

from lakesweep.applier.actions import Outcome, execute_with_retry
from lakesweep.engine.errors import DeleteUnconfirmed
from lakesweep.engine.fileio import ArrowFileIO, DeleteOutcome
from lakesweep.engine.plan import Action, Verb
from tests.support.s3_proxy import faulty_s3
from tests.support.seaweed import list_tree

pytestmark = pytest.mark.s3


@pytest.fixture
def proxy(s3):
    with faulty_s3(s3) as p:
        yield p


def _fileio(s3, proxy) -> ArrowFileIO:
    return ArrowFileIO("s3", {"endpoint": proxy.url, "region": s3["AWS_REGION"],
                              "access_key": s3["AWS_ACCESS_KEY_ID"], "secret_key": s3["AWS_SECRET_ACCESS_KEY"]})


def _table(s3, names) -> str:
    prefix = f"{s3['bucket']}/lost-{uuid.uuid4().hex[:8]}"
    for n in names:
        with s3["fs"].open_output_stream(f"{prefix}/{n}") as f:
            f.write(b"x")
    return prefix


def test_a_delete_whose_answers_were_lost_is_journaled_deleted_on_retry(s3, proxy):
    prefix = _table(s3, ["data/f-0", "data/f-1"])
    key = f"{prefix.partition('/')[2]}/data/f-0"
    proxy.lose_answers([key], times=100)  # every DeleteObject of the key is carried out, none is answered
    action = Action("data-file", "data/f-0", verb=Verb.DELETE_FILE, phase=1, action_id=7)

    result = execute_with_retry(_fileio(s3, proxy), f"s3://{prefix}", action, sleep=lambda s: None,
                                clock_ms=lambda: 5)

    # The first attempt saw the object, sent its DELETE and lost the answers; the second finds it gone.
    assert (result.outcome, result.attempts, result.error) == (Outcome.DELETED, 2, None)
    assert list_tree(s3["fs"], prefix) == {"data/f-1"}


def test_a_lost_delete_answer_raises_delete_unconfirmed_naming_the_path(s3, proxy):
    prefix = _table(s3, ["data/f-0"])
    proxy.lose_answers([f"{prefix.partition('/')[2]}/data/f-0"], times=100)
    io = _fileio(s3, proxy)

    with pytest.raises(DeleteUnconfirmed) as caught:
        io.delete(f"s3://{prefix}/data/f-0")

    assert caught.value.path == f"s3://{prefix}/data/f-0"
    assert io.delete(f"s3://{prefix}/data/f-0") == DeleteOutcome.ALREADY_ABSENT  # on its own, a HEAD: 404
    assert list_tree(s3["fs"], prefix) == set()


def test_per_object_delete_sends_one_head_and_one_delete_and_writes_no_marker(s3, proxy):
    prefix = _table(s3, ["data/only"])
    io = _fileio(s3, proxy)

    assert io.delete(f"s3://{prefix}/data/only") == DeleteOutcome.DELETED
    assert io.delete(f"s3://{prefix}/data/only") == DeleteOutcome.ALREADY_ABSENT

    # The second HEAD (404) is followed by one LIST: is the path a directory? No object is ever written.
    assert dict(proxy.sent) == {"HEAD": 2, "DELETE_ONE": 1, "LIST": 1}
    assert list_tree(s3["fs"], prefix) == set()
