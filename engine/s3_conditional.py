"""Create-if-absent on S3: a PutObject with ``If-None-Match: *``, which the store refuses with 412 Precondition
Failed when the key exists (AWS S3 since August 2024).

A store that ignores the header overwrites instead, so whether it honours it is found once per endpoint and
bucket, before anything is committed: a scratch key outside every table is put twice with the header, the
second put must answer 412, and the key is deleted. A store that does not honour it is refused; nothing is
ever created by checking that a key is absent and writing it after.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

from lakesweep.engine.errors import StorageError
from lakesweep.engine.fileio import S3Settings
from lakesweep.engine.s3_client import s3_client

PROBE_NAME = ".lakesweep-conditional-put-probe-"
_CONFLICT_RETRIES = 5  # AWS answers 409 while another conditional write of the key is in flight: retry
CLIENT_ATTEMPTS = 4  # botocore's standard retries: a PUT whose answer was lost is sent again (put_if_absent)


@dataclass(frozen=True, slots=True)
class ConditionalPutSupport:
    """What the probe of one endpoint and bucket found; ``evidence`` says what the store answered."""

    store: str
    supported: bool
    evidence: str


_FOUND: dict[tuple[str, str], ConditionalPutSupport] = {}
_FOUND_LOCK = threading.Lock()


def store_name(settings: S3Settings, bucket: str) -> str:
    return f"s3://{bucket} at {settings.endpoint or f'AWS S3 ({settings.region})'}"


def _status(e) -> tuple[int, str]:
    response = getattr(e, "response", None) or {}
    return (int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0),
            str(response.get("Error", {}).get("Code") or ""))


def _put(client, bucket: str, key: str, data: bytes):
    """One PutObject with ``If-None-Match: *``: ``None`` when it succeeded, else the store's ``ClientError``.
    A 409 (AWS: another conditional write of the key is in flight) is retried; the retry then meets the
    winner's object and gets 412."""
    from botocore.exceptions import ClientError

    attempt = 0
    while True:
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return None
        except ClientError as e:
            if _status(e)[0] != 409 or attempt == _CONFLICT_RETRIES:
                return e
        time.sleep(0.05 * 2 ** attempt)
        attempt += 1


def put_if_absent(client, bucket: str, key: str, data: bytes, *, path: str) -> None:
    """Put ``data`` at ``key`` only if no object is there; ``FileExistsError`` (the object untouched) if one is.
    The caller has established that the store honours ``If-None-Match: *`` (``conditional_put_support``)."""
    from botocore.exceptions import BotoCoreError

    try:
        refused = _put(client, bucket, key, data)
    except BotoCoreError as e:
        raise StorageError(path, f"cannot create: {e}") from e
    if refused is None:
        return
    status, code = _status(refused)
    if status == 412:
        # The client retries a request whose answer was lost; if the lost answer was our own success, the
        # retry meets our object. The bytes tell: the object is ours exactly when it holds what we put.
        if _holds(client, bucket, key, data, path):
            return
        raise FileExistsError(path) from refused
    raise StorageError(path, f"cannot create: {code or status}: {refused}") from refused


def _holds(client, bucket: str, key: str, data: bytes, path: str) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    except (ClientError, BotoCoreError) as e:
        raise StorageError(path, f"created by someone, and cannot be read back: {e}") from e


def conditional_put_support(settings: S3Settings, bucket: str, scratch_prefix: str, *,
                            client=None) -> ConditionalPutSupport:
    """Whether the store honours ``If-None-Match: *`` on PutObject, probed under ``scratch_prefix`` (a key
    prefix in ``bucket`` outside every table, "" for the bucket's root) the first time this process asks about
    this endpoint and bucket. ``StorageError`` when the probe itself fails (nothing is remembered then)."""
    cache_key = (settings.endpoint or f"aws:{settings.region}", bucket)
    with _FOUND_LOCK:
        if cache_key in _FOUND:
            return _FOUND[cache_key]
    client = client or s3_client(settings, max_attempts=CLIENT_ATTEMPTS)
    found = _probe(client, store_name(settings, bucket), bucket, scratch_prefix)
    with _FOUND_LOCK:
        return _FOUND.setdefault(cache_key, found)


def forget_probes() -> None:
    """Drop what earlier probes found (tests that restart a store on the same endpoint)."""
    with _FOUND_LOCK:
        _FOUND.clear()


def _probe(client, store: str, bucket: str, prefix: str) -> ConditionalPutSupport:
    from botocore.exceptions import BotoCoreError, ClientError

    key = f"{prefix.strip('/') + '/' if prefix.strip('/') else ''}{PROBE_NAME}{uuid.uuid4().hex}"
    where = f"s3://{bucket}/{key}"
    try:
        refused = _put(client, bucket, key, b"1")
        if refused is not None:
            status, code = _status(refused)
            if status in (400, 501) and code in ("NotImplemented", "InvalidArgument", "InvalidRequest"):
                return ConditionalPutSupport(store, False, f"a PutObject of {where} with If-None-Match: * was "
                                                          f"answered {status} {code}")
            raise StorageError(where, f"the conditional-write probe failed: {code or status}: {refused}") \
                from refused
        refused = _put(client, bucket, key, b"2")
        if refused is None:
            return ConditionalPutSupport(store, False, f"a second PutObject of {where} with If-None-Match: * "
                                                       "succeeded and replaced the object: the header is ignored")
        status, code = _status(refused)
        if status == 412:
            return ConditionalPutSupport(store, True, f"a second PutObject of {where} with If-None-Match: * "
                                                      f"was answered 412 {code}")
        raise StorageError(where, f"the conditional-write probe failed: {code or status}: {refused}") from refused
    except BotoCoreError as e:
        raise StorageError(where, f"the conditional-write probe failed: {e}") from e
    finally:
        try:
            client.delete_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError):
            pass  # a leftover scratch key outside every table harms nothing; the answer stands
