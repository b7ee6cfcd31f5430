"""Bulk deletes on S3 (SeaweedFS, behind the fault-injecting proxy): each key's outcome is the store's truth."""

import uuid

import pytest

from lakesweep.engine.errors import StorageError
from lakesweep.engine.fileio import ArrowFileIO, DeleteOutcome
from lakesweep.engine.s3_bulk import RateLimiter, RequestBudget, estimate_requests
from tests.support.s3_proxy import faulty_s3
from tests.support.seaweed import list_tree

pytestmark = pytest.mark.s3


@pytest.fixture
def proxy(s3):
    with faulty_s3(s3) as p:
        yield p


def _fileio(s3, proxy, **budget) -> ArrowFileIO:
    io = ArrowFileIO("s3", {"endpoint": proxy.url, "region": s3["AWS_REGION"], "access_key": s3["AWS_ACCESS_KEY_ID"],
                            "secret_key": s3["AWS_SECRET_ACCESS_KEY"]})
    return io.with_budget(RequestBudget(**budget)) if budget else io


def _put(s3, prefix: str, names) -> list[str]:
    for n in names:
        with s3["fs"].open_output_stream(f"{prefix}/{n}") as f:
            f.write(b"x")
    return [f"s3://{prefix}/{n}" for n in names]


def test_bulk_delete_journal_matches_store_with_deletes_racing_the_list(s3, proxy):
    prefix = f"{s3['bucket']}/bulk-{uuid.uuid4().hex[:8]}"
    names = [f"d{d}/f-{i:03d}" for d in range(3) for i in range(120)]  # 360 keys, 3 directories
    paths = _put(s3, prefix, names)
    _put(s3, prefix, ["d0/keep-me", "d2/zz-keep"])
    gone_before = paths[5:15]  # removed before lakesweep looks: ALREADY_ABSENT
    for p in gone_before:
        s3["fs"].delete_file(p[len("s3://"):])
    # Removed by another process after our LIST, before our DeleteObjects: S3 reports them deleted, and
    # they were there when listed, so they are DELETED (the module docstring of engine.s3_bulk).
    racing = [paths[130], paths[131], paths[300]]
    raced: list[str] = []

    def other_process(keys):
        for p in racing:
            key = p[len(f"s3://{s3['bucket']}/"):]
            if key in keys and p not in raced:
                s3["fs"].delete_file(p[len("s3://"):])
                raced.append(p)

    proxy.before_delete_objects = other_process
    out = _fileio(s3, proxy, delete_batch=100).delete_many(paths)

    expected = {p: DeleteOutcome.ALREADY_ABSENT if p in gone_before else DeleteOutcome.DELETED for p in paths}
    assert out == expected and sorted(raced) == sorted(racing)
    assert list_tree(s3["fs"], prefix) == {"d0/keep-me", "d2/zz-keep"}
    # 4 batches of 100: one LIST per directory of each batch (1 + 2 + 2 + 1: batches 2 and 3 span two
    # directories), as show's estimate counts them, and one DeleteObjects each, without the keys already gone.
    assert proxy.sent["LIST"] == estimate_requests(paths, batch=100)["LIST"] == 6
    assert proxy.sent["DELETE"] == 4 and proxy.sent["HEAD"] == proxy.sent["DELETE_ONE"] == 0
    assert sum(len(k) for k in proxy.delete_requests) == 360 - len(gone_before)


def test_partly_failed_batch_retries_exactly_its_failed_keys(s3, proxy):
    prefix = f"{s3['bucket']}/partial-{uuid.uuid4().hex[:8]}"
    paths = _put(s3, prefix, [f"data/f-{i:02d}" for i in range(20)])
    key = lambda p: p[len(f"s3://{s3['bucket']}/"):]  # noqa: E731
    proxy.fail_keys([key(paths[3]), key(paths[7])], times=1)
    proxy.fail_keys([key(paths[11])], times=10)  # fails every attempt

    out = _fileio(s3, proxy).delete_batch(paths)

    assert [sorted(k) for k in proxy.delete_requests] == [
        sorted(map(key, paths)), sorted(map(key, (paths[3], paths[7], paths[11]))), [key(paths[11])],
        [key(paths[11])]]
    assert {p: o for p, o in out.items() if p != paths[11]} == {
        p: (DeleteOutcome.DELETED, 2 if p in (paths[3], paths[7]) else 1) for p in paths if p != paths[11]}
    error, attempts = out[paths[11]]
    assert attempts == 4 and isinstance(error, StorageError)
    assert str(error) == (f"{paths[11]}: cannot delete: InternalError: injected failure (after 4 attempts)")
    assert list_tree(s3["fs"], prefix) == {"data/f-11"}


def test_slowdown_halves_the_rate_and_each_success_adds_one_back(s3, proxy):
    prefix = f"{s3['bucket']}/slow-{uuid.uuid4().hex[:8]}"
    paths = _put(s3, prefix, [f"data/f-{i:02d}" for i in range(10)])
    io = _fileio(s3, proxy, max_requests_per_second=200.0)
    proxy.slow_down(3)

    out = io.delete_many(paths)

    assert set(out.values()) == {DeleteOutcome.DELETED} and list_tree(s3["fs"], prefix) == set()
    assert proxy.slowdowns_sent == 3
    # 200 -> 100 -> 50 -> 25 after three SlowDowns, then +1 for the LIST and +1 for the DeleteObjects.
    assert io.limiter.take_report() == (3, 25.0) and io.limiter.rate == 27.0
    assert io.limiter.sent == {"LIST": 4, "DELETE": 1}  # the LIST sent 4 times: 3 answered SlowDown


def test_rate_limiter_paces_requests_and_recovers_additively():
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    lim = RateLimiter(4.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        lim.acquire("DELETE")
    assert slept == [0.25, 0.25, 0.25, 0.25]
    lim.throttled()
    lim.throttled()
    assert lim.rate == 1.0
    lim.succeeded()
    assert lim.rate == 2.0
    for _ in range(5):
        lim.succeeded()
    assert lim.rate == 4.0  # never above the ceiling


def test_budget_shares_rate_and_concurrency_among_tasks():
    b = RequestBudget(max_requests_per_second=100.0, max_concurrency=8, delete_batch=500)
    assert b.share(4) == RequestBudget(max_requests_per_second=25.0, max_concurrency=2, delete_batch=500)
    assert b.share(16).max_concurrency == 1
    with pytest.raises(ValueError, match="delete_batch must be within 1..1000, got 1001"):
        RequestBudget(delete_batch=1001)


def test_a_listed_key_reported_no_such_key_is_deleted_never_already_absent(s3, proxy):
    prefix = f"{s3['bucket']}/nosuchkey-{uuid.uuid4().hex[:8]}"
    paths = _put(s3, prefix, ["data/f-0", "data/f-1"])
    # Listed, then removed by someone else, and the store answers NoSuchKey for it: it existed before our
    # request and is gone after it.
    proxy.before_delete_objects = lambda keys: s3["fs"].delete_file(paths[0][len("s3://"):])
    proxy.fail_keys([paths[0][len(f"s3://{s3['bucket']}/"):]], code="NoSuchKey")

    out = _fileio(s3, proxy).delete_batch(paths)

    assert out == {paths[0]: (DeleteOutcome.DELETED, 1), paths[1]: (DeleteOutcome.DELETED, 1)}
    assert list_tree(s3["fs"], prefix) == set()
