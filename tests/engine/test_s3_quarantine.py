"""Quarantine, restore and purge on SeaweedFS: a versioned bucket (the delete marker hides the version) and one
without versioning (a copy under the quarantine prefix)."""

import uuid

import pytest

from lakesweep.engine.errors import QuarantineUnsupported, StorageError
from lakesweep.engine.fileio import DeleteOutcome, MemoryFileIO, MoveOutcome, fileio_for, join, resolve_s3_settings
from lakesweep.engine.quarantine import VersionedDelete
from lakesweep.engine.s3_bulk import RequestBudget
from lakesweep.engine.s3_client import s3_client
from lakesweep.engine.s3_quarantine import forget_probes
from tests.support.s3_proxy import header_dropping_proxy
from tests.support.seaweed import VERSIONED_BUCKET, ensure_bucket


def _client():
    return s3_client(resolve_s3_settings({}), max_attempts=1)


def _versions(path: str) -> tuple[list[str], list[str]]:
    """The object versions and delete markers of the key ``path``, as the store lists them."""
    bucket, _, key = path[len("s3://"):].partition("/")
    page = _client().list_object_versions(Bucket=bucket, Prefix=key)
    return ([v["VersionId"] for v in page.get("Versions", ()) if v["Key"] == key],
            [m["VersionId"] for m in page.get("DeleteMarkers", ()) if m["Key"] == key])


@pytest.fixture(params=["versioned", "copy"])
def s3q(request, s3_env):
    bucket = ensure_bucket(VERSIONED_BUCKET, "Enabled") if request.param == "versioned" else s3_env["bucket"]
    root = f"s3://{bucket}/q-{uuid.uuid4().hex[:8]}/t"
    return fileio_for(root), root, request.param


def test_the_mode_follows_the_bucket_versioning_and_is_asked_once_per_fileio(s3_env):
    suspended = ensure_bucket("lake-suspended", "Enabled")
    io = fileio_for(f"s3://{suspended}/t")
    assert io.quarantine_mode(f"s3://{suspended}/t/f") == "versioned"
    ensure_bucket(suspended, "Suspended")  # a delete now replaces the null version: copies are needed
    assert io.quarantine_mode(f"s3://{suspended}/t/g") == "versioned"  # this FileIO asked already
    assert fileio_for(f"s3://{suspended}/t").quarantine_mode(f"s3://{suspended}/t/f") == "copy"
    assert io.quarantine_mode(f"s3://{s3_env['bucket']}/t/f") == "copy"  # never enabled


def test_quarantine_puts_a_file_aside_and_restore_brings_it_back(s3q):
    io, root, mode = s3q
    p, q = join(root, "data", "f.parquet"), join(root, "_lakesweep_quarantine", "p1", "data", "f.parquet")
    io.write_atomic(p, b"rows")
    outcome, where = io.quarantine(p, q)
    assert outcome is MoveOutcome.MOVED and not io.exists(p)
    if mode == "versioned":
        (version,), (marker,) = _versions(p)
        assert where == VersionedDelete(version, marker).where() and not io.exists(q)
    else:
        assert where == q and io.read_bytes(q) == b"rows"
    assert io.quarantine(p, q) == (MoveOutcome.ALREADY_MOVED, where)  # a retry after the move: idempotent
    assert io.restore(p, where) is MoveOutcome.MOVED
    assert io.read_bytes(p) == b"rows" and not io.exists(q)
    if mode == "versioned":
        assert _versions(p) == ([VersionedDelete.parse(where).version_id], [])  # the marker is gone
    assert io.restore(p, where) is MoveOutcome.ALREADY_MOVED
    nope = join(root, "nope")
    assert io.quarantine(nope, join(root, "q", "nope")) == (MoveOutcome.ABSENT, join(root, "q", "nope"))


def test_restore_never_replaces_a_file_written_again(s3q):
    io, root, mode = s3q
    p, q = join(root, "f"), join(root, "q", "f")
    io.write_atomic(p, b"old")
    _, where = io.quarantine(p, q)
    io.write_atomic(p, b"new")
    with pytest.raises(FileExistsError):
        io.restore(p, where)
    assert io.read_bytes(p) == b"new"
    if mode == "versioned":
        versions, markers = _versions(p)
        assert len(versions) == 2 and markers == [VersionedDelete.parse(where).marker_id]  # nothing removed
    else:
        assert io.read_bytes(q) == b"old"


def test_a_copy_never_replaces_an_object_at_the_quarantine_location(s3_env):
    root = f"s3://{s3_env['bucket']}/q-{uuid.uuid4().hex[:8]}"
    io = fileio_for(root)
    p, q = join(root, "f"), join(root, "q", "f")
    io.write_atomic(p, b"mine")
    io.write_atomic(q, b"someone else's")
    with pytest.raises(FileExistsError):
        io.quarantine(p, q)
    assert io.read_bytes(p) == b"mine" and io.read_bytes(q) == b"someone else's"


def test_a_copy_left_by_an_interrupted_quarantine_is_finished(s3_env):
    root = f"s3://{s3_env['bucket']}/q-{uuid.uuid4().hex[:8]}"
    io = fileio_for(root)
    p, q = join(root, "f"), join(root, "q", "f")
    io.write_atomic(p, b"rows")
    bucket = s3_env["bucket"]
    _client().copy_object(Bucket=bucket, Key=q.partition(f"{bucket}/")[2],  # copied, stopped before the delete
                          CopySource={"Bucket": bucket, "Key": p.partition(f"{bucket}/")[2]})
    assert io.quarantine(p, q) == (MoveOutcome.MOVED, q)
    assert not io.exists(p) and io.read_bytes(q) == b"rows"


def test_a_versioned_delete_whose_answer_was_lost_is_found_by_the_retry(s3_env):
    root = f"s3://{ensure_bucket(VERSIONED_BUCKET, 'Enabled')}/q-{uuid.uuid4().hex[:8]}"
    io = fileio_for(root)
    p = join(root, "f")
    io.write_atomic(p, b"rows")
    bucket, _, key = p[len("s3://"):].partition("/")
    marker = _client().delete_object(Bucket=bucket, Key=key)["VersionId"]  # the delete went through, unanswered
    (version,), _ = _versions(p)
    assert io.quarantine(p, join(root, "q", "f")) == (MoveOutcome.ALREADY_MOVED,
                                                      VersionedDelete(version, marker).where())
    assert _versions(p) == ([version], [marker])  # no second marker
    assert io.restore(p, VersionedDelete(version, marker).where()) is MoveOutcome.MOVED
    assert io.read_bytes(p) == b"rows"


def test_purge_deletes_the_version_and_its_marker_and_refuses_a_restored_one(s3_env):
    root = f"s3://{ensure_bucket(VERSIONED_BUCKET, 'Enabled')}/q-{uuid.uuid4().hex[:8]}"
    io = fileio_for(root)
    p, kept = join(root, "f"), join(root, "g")
    io.write_atomic(p, b"rows")
    io.write_atomic(kept, b"rows")
    versioned = VersionedDelete.parse(io.quarantine(p, join(root, "q", "f"))[1])
    assert io.purge_version(p, versioned) is DeleteOutcome.DELETED
    assert _versions(p) == ([], []) and not io.exists(p)
    assert io.purge_version(p, versioned) is DeleteOutcome.ALREADY_ABSENT
    restored = VersionedDelete.parse(io.quarantine(kept, join(root, "q", "g"))[1])
    io.restore(kept, restored.where())
    with pytest.raises(StorageError) as refused:
        io.purge_version(kept, restored)
    assert str(refused.value) == (f"{kept}: version {restored.version_id} is the key's current object again "
                                  "(restored?); it is not purged")
    assert io.read_bytes(kept) == b"rows"


def test_stores_without_versions_cannot_purge_one():
    with pytest.raises(QuarantineUnsupported):
        MemoryFileIO().purge_version("/t/f", VersionedDelete("v1", "m1"))


@pytest.mark.parametrize("mode", ["versioned", "copy"])
def test_quarantine_batch_lists_once_per_directory_and_deletes_in_one_request(s3_env, mode):
    bucket = ensure_bucket(VERSIONED_BUCKET, "Enabled") if mode == "versioned" else s3_env["bucket"]
    root = f"s3://{bucket}/q-{uuid.uuid4().hex[:8]}"
    io = fileio_for(root)
    files = [join(root, d, f"f{i}") for d in ("a", "b") for i in range(3)]
    for f in files:
        io.write_atomic(f, f.encode())
    dest = {f: join(root, "_lakesweep_quarantine", "p", f[len(root) + 1:]) for f in files + [join(root, "a", "gone")]}
    _, earlier = io.quarantine(files[0], dest[files[0]])  # an earlier attempt's
    io.limiter.sent.clear()
    out = io.quarantine_batch(dest.items())
    outcomes = {f[len(root) + 1:]: (o, n) for f, (o, _, n) in out.items()}
    assert outcomes == {"a/f0": (MoveOutcome.ALREADY_MOVED, 1), "a/f1": (MoveOutcome.MOVED, 1),
                        "a/f2": (MoveOutcome.MOVED, 1), "b/f0": (MoveOutcome.MOVED, 1), "b/f1": (MoveOutcome.MOVED, 1),
                        "b/f2": (MoveOutcome.MOVED, 1), "a/gone": (MoveOutcome.ABSENT, 1)}
    assert out[files[0]][1] == earlier
    assert not any(io.exists(f) for f in files)
    if mode == "versioned":
        assert dict(io.limiter.sent) == {"LIST": 2, "DELETE": 1}
    else:
        # a copy per file; the two not there are found by a HEAD of their destination
        assert dict(io.limiter.sent) == {"COPY": 7, "HEAD": 2, "LIST": 2, "DELETE": 1}
        assert all(io.read_bytes(dest[f]) == f.encode() for f in files)
    for f in files:
        assert io.restore(f, out[f][1]) is MoveOutcome.MOVED
        assert io.read_bytes(f) == f.encode()


def test_copy_mode_is_refused_where_the_store_ignores_if_none_match(s3_env, monkeypatch):
    forget_probes()
    root = f"s3://{s3_env['bucket']}/q-{uuid.uuid4().hex[:8]}"
    fileio_for(root).write_atomic(join(root, "f"), b"rows")
    with header_dropping_proxy(s3_env["AWS_ENDPOINT_URL"],
                               (s3_env["AWS_ACCESS_KEY_ID"], s3_env["AWS_SECRET_ACCESS_KEY"])) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        io = fileio_for(root)
        with pytest.raises(QuarantineUnsupported) as refused:
            io.quarantine(join(root, "f"), join(root, "q", "f"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_env["AWS_ENDPOINT_URL"])
    forget_probes()
    assert str(refused.value).startswith(f"{root}/f: s3://lake at {endpoint} cannot quarantine files (a copy could "
                                         f"replace an object: a second CopyObject to s3://lake/")
    assert str(refused.value).endswith("with If-None-Match: * succeeded and replaced the object: the header is "
                                       "ignored); apply without --quarantine deletes them for good")
    assert fileio_for(root).read_bytes(join(root, "f")) == b"rows"


def test_quarantine_batch_sends_at_most_the_budget_s_keys_per_delete_objects(s3_env):
    root = f"s3://{ensure_bucket(VERSIONED_BUCKET, 'Enabled')}/q-{uuid.uuid4().hex[:8]}"
    io = fileio_for(root).with_budget(RequestBudget(delete_batch=2))
    files = [join(root, f"f{i}") for i in range(5)]
    for f in files:
        io.write_atomic(f, b"x")
    out = io.quarantine_batch([(f, join(root, "q", f)) for f in files])
    assert {f: o for f, (o, _, _) in out.items()} == dict.fromkeys(files, MoveOutcome.MOVED)
    assert dict(io.limiter.sent) == {"LIST": 3, "DELETE": 3}
