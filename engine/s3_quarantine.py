"""Quarantine, restore and purge on S3, in the mode the bucket's versioning gives (GetBucketVersioning).

``Enabled``: versioned mode. A quarantine is an ordinary delete; the object's version stays behind a delete
marker and both ids are journaled (``VersionedDelete``). Versions are found by ListObjectVersions, one per
directory prefix of a batch. Otherwise (``Suspended``, never enabled: a delete replaces the null version):
copy mode, a CopyObject under the quarantine prefix with ``If-None-Match: *`` (which the store must be found to
honour, as ``engine.s3_conditional`` finds it for PUTs) and then a delete of the original.
Design: docs/design/quarantine.md#s3.
"""

from __future__ import annotations

import collections
import random
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from lakesweep.engine.errors import DeleteUnconfirmed, StorageError
from lakesweep.engine.fileio import DeleteOutcome, MoveOutcome, S3Settings
from lakesweep.engine.quarantine import VersionedDelete
from lakesweep.engine.s3_bulk import BudgetedCalls, split_s3
from lakesweep.engine.s3_conditional import ConditionalPutSupport, store_name

VERSIONED = "versioned"
COPY = "copy"
PROBE_NAME = ".lakesweep-conditional-copy-probe-"

Result = tuple[MoveOutcome | StorageError, str, int]  # (outcome or the error, where, attempts)


def versioning_mode(client, bucket: str) -> str:
    """``VERSIONED`` when the bucket's versioning is ``Enabled``, else ``COPY``; ``StorageError`` when the
    status cannot be read (nothing is quarantined on a guess: a delete in a bucket that is not versioned is
    final)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        status = client.get_bucket_versioning(Bucket=bucket).get("Status")
    except (ClientError, BotoCoreError) as e:
        raise StorageError(f"s3://{bucket}", f"cannot read the bucket's versioning status "
                                             f"(s3:GetBucketVersioning), so nothing is quarantined there: {e}") from e
    return VERSIONED if status == "Enabled" else COPY


def describe_mode(mode: str) -> str:
    if mode == VERSIONED:
        return ("versioned bucket: --quarantine deletes as usual and journals each object's version id; restore "
                "removes the delete marker")
    return ("no versioning: --quarantine copies each file under _lakesweep_quarantine (CopyObject, "
            "If-None-Match: *) before deleting it; restore copies it back")


@dataclass(frozen=True, slots=True)
class KeyVersions:
    """One key's versions as ListObjectVersions lists them, newest first: its object versions, its delete
    markers, and the latest entry (``latest_is_marker``: the key is deleted)."""

    objects: tuple[str, ...]
    markers: tuple[str, ...]
    latest: str | None
    latest_is_marker: bool

    def hidden(self) -> str | None:
        """The version a latest delete marker hides (the newest object version), ``None`` when there is none."""
        return self.objects[0] if self.latest_is_marker and self.objects else None


def _just_before(key: str) -> str:
    """A key that sorts just before ``key`` (its last character one lower), so that a listing after it starts at
    ``key``, give or take the few keys that extend that lower string."""
    if key and ord(key[-1]) > 0x21 and not 0xD800 < ord(key[-1]) <= 0xE000:  # never a lone surrogate
        return key[:-1] + chr(ord(key[-1]) - 1)
    return key[:-1]


def _status(e) -> tuple[int, str]:
    response = getattr(e, "response", None) or {}
    return (int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0),
            str(response.get("Error", {}).get("Code") or ""))


class S3Quarantine(BudgetedCalls):
    """The requests of both modes, paced by the FileIO's ``RateLimiter`` (``503 SlowDown`` slows it and is
    sent again). ``client`` retries nothing itself: a versioned delete sent twice would stack two markers."""

    def __init__(self, client, limiter, *, attempts: int = 4, base_delay_s: float = 0.05,
                 throttle_retries: int = 20, sleep: Callable[[float], None] = time.sleep):
        self.client, self.limiter, self.attempts = client, limiter, attempts
        self.base_delay_s, self.throttle_retries, self._sleep = base_delay_s, throttle_retries, sleep

    def _backoff(self, attempt: int) -> None:
        if attempt > 1:
            self._sleep(self.base_delay_s * (2 ** (attempt - 2)) * (1 + random.random()))

    # Versioned mode

    def versions(self, bucket: str, keys: Sequence[str]) -> tuple[dict[str, KeyVersions], set[str], dict[str, str]]:
        """Among ``keys``: the versions of those listed, those that are directories, and the error of each
        directory that could not be listed; one ListObjectVersions per directory prefix (paged from just
        before its first key past its last)."""
        by_dir: dict[str, list[str]] = collections.defaultdict(list)
        for key in keys:
            by_dir[key.rpartition("/")[0]].append(key)
        found: dict[str, KeyVersions] = {}
        dirs: set[str] = set()
        failed: dict[str, str] = {}
        for directory, in_dir in by_dir.items():
            in_dir = sorted(set(in_dir))
            wanted = set(in_dir)
            prefix = f"{directory}/" if directory else ""
            kwargs = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/", "MaxKeys": min(1000, 2 * len(in_dir) + 2)}
            marker = _just_before(in_dir[0])
            if marker > prefix:
                kwargs["KeyMarker"] = marker  # ListObjectVersions lists the keys after KeyMarker
            entries: dict[str, list[tuple[bool, str, bool]]] = collections.defaultdict(list)
            try:
                while True:
                    page = self._call("LIST", self.client.list_object_versions, **kwargs)
                    for marker, listed in ((False, page.get("Versions", ())), (True, page.get("DeleteMarkers", ()))):
                        for v in listed:
                            if v["Key"] in wanted:
                                entries[v["Key"]].append((marker, str(v["VersionId"]), bool(v.get("IsLatest"))))
                    dirs.update(p["Prefix"][:-1] for p in page.get("CommonPrefixes", ()) if p["Prefix"][:-1] in wanted)
                    nxt = page.get("NextKeyMarker")
                    if not page.get("IsTruncated") or not nxt or nxt > in_dir[-1]:
                        break
                    kwargs["KeyMarker"] = nxt
                    if page.get("NextVersionIdMarker"):
                        kwargs["VersionIdMarker"] = page["NextVersionIdMarker"]
                    else:
                        kwargs.pop("VersionIdMarker", None)
            except Exception as e:  # fail closed: a directory that cannot be listed quarantines nothing
                failed[directory] = f"cannot list the versions under s3://{bucket}/{prefix}: {e}"
                continue
            for key, listed in entries.items():
                latest = [(marker, vid) for marker, vid, is_latest in listed if is_latest]
                found[key] = KeyVersions(tuple(vid for marker, vid, _ in listed if not marker),
                                         tuple(vid for marker, vid, _ in listed if marker),
                                         latest[0][1] if len(latest) == 1 else None,
                                         latest[0][0] if len(latest) == 1 else False)
        return found, dirs, failed

    def _one(self, path: str) -> KeyVersions | None:
        bucket, key = split_s3(path)
        found, dirs, failed = self.versions(bucket, [key])
        if failed:
            raise StorageError(path, next(iter(failed.values())))
        if key in dirs and key not in found:
            raise StorageError(path, "is a directory; lakesweep moves files only")
        state = found.get(key)
        if state is not None and state.latest is None:
            raise StorageError(path, "the store lists no latest version of this key; nothing is changed")
        return state

    @staticmethod
    def _settled(state: KeyVersions | None) -> MoveOutcome | str | None:
        """What a listed key's state already says: ``ALREADY_MOVED`` (a delete marker over a version: an earlier
        attempt's, whose answer was lost), ``ABSENT``, or ``None``: its current version is to be deleted."""
        if state is None or (state.latest_is_marker and not state.objects):
            return MoveOutcome.ABSENT
        if state.latest_is_marker:
            return MoveOutcome.ALREADY_MOVED
        return None

    def quarantine_versioned(self, path: str, dest: str) -> tuple[MoveOutcome, str]:
        """One key: ListObjectVersions, then a DeleteObject whose delete marker hides the listed version."""
        state = self._one(path)
        settled = self._settled(state)
        if settled is MoveOutcome.ALREADY_MOVED:
            return settled, VersionedDelete(state.hidden(), state.latest).where()
        if settled is MoveOutcome.ABSENT:
            return settled, dest
        bucket, key = split_s3(path)
        try:
            response = self._call("DELETE", self.client.delete_object, Bucket=bucket, Key=key)
        except Exception as e:
            raise DeleteUnconfirmed(path, f"cannot delete, or the store's answer was lost: {e}") from e
        marker = response.get("VersionId")
        if not response.get("DeleteMarker") or not marker:
            # The next attempt lists the key again and finds the marker, if the store made one.
            raise DeleteUnconfirmed(path, "the store's answer names no delete marker")
        return MoveOutcome.MOVED, VersionedDelete(state.latest, str(marker)).where()

    def quarantine_versioned_batch(self, bucket: str, pairs: Sequence[tuple[str, str]]) -> dict[str, Result]:
        """``quarantine_versioned`` for many keys of ``bucket``: one ListObjectVersions per directory, one
        DeleteObjects. Every retry lists the keys left again first, so that no key gets a second marker."""
        dest_of = dict(pairs)
        keys = {split_s3(p)[1]: p for p in dest_of}
        out: dict[str, Result] = {}
        errors: dict[str, str] = {}
        pending = list(keys)
        for attempt in range(1, self.attempts + 1):
            if not pending:
                break
            self._backoff(attempt)
            found, dirs, failed = self.versions(bucket, pending)
            hidden: dict[str, str] = {}
            for key in pending:
                path = keys[key]
                directory = key.rpartition("/")[0]
                state = found.get(key)
                if directory in failed:
                    errors[key] = failed[directory]
                elif key in dirs and state is None:
                    out[path] = (StorageError(path, "is a directory; lakesweep moves files only"), dest_of[path],
                                 attempt)
                elif state is not None and state.latest is None:
                    errors[key] = "the store lists no latest version of this key"
                elif (settled := self._settled(state)) is MoveOutcome.ABSENT:
                    out[path] = (settled, dest_of[path], attempt)
                elif settled is MoveOutcome.ALREADY_MOVED:
                    out[path] = (settled, VersionedDelete(state.hidden(), state.latest).where(), attempt)
                else:
                    hidden[key] = state.latest
            if hidden:
                try:
                    response = self._call("DELETE", self.client.delete_objects, Bucket=bucket, Delete={
                        "Objects": [{"Key": k} for k in hidden], "Quiet": False})
                except Exception as e:  # the whole request failed: the keys are listed again and retried
                    errors.update({k: f"{type(e).__name__}: {e}" for k in hidden})
                    response = {}
                for d in response.get("Deleted", ()):
                    key, marker = d.get("Key"), d.get("DeleteMarkerVersionId")
                    if key in hidden and marker and d.get("DeleteMarker", True):
                        out[keys[key]] = (MoveOutcome.MOVED, VersionedDelete(hidden[key], str(marker)).where(),
                                          attempt)
                for err in response.get("Errors", ()):
                    if err.get("Key") in hidden:
                        errors[err["Key"]] = f"{err.get('Code')}: {err.get('Message')}"
                for k in hidden:
                    if keys[k] not in out:
                        errors.setdefault(k, "not confirmed with a delete marker in the DeleteObjects response")
            pending = [k for k in pending if keys[k] not in out]
        for k in pending:
            path = keys[k]
            out[path] = (StorageError(path, f"cannot quarantine: {errors.get(k)} (after {self.attempts} attempts)"),
                         dest_of[path], self.attempts)
        return out

    def restore_versioned(self, path: str, versioned: VersionedDelete) -> MoveOutcome:
        """Remove the delete marker, after checking that it is the key's latest entry and that the version it
        hides is the newest object version: a key written again (``FileExistsError``) or hidden by another
        marker is left as it is."""
        state = self._one(path)
        if state is None:
            return MoveOutcome.ABSENT
        if not state.latest_is_marker:
            if state.latest == versioned.version_id:
                return MoveOutcome.ALREADY_MOVED
            raise FileExistsError(path)
        if versioned.version_id not in state.objects:
            return MoveOutcome.ABSENT  # purged: nothing to bring back
        if state.latest != versioned.marker_id or state.objects[0] != versioned.version_id:
            raise StorageError(path, f"its latest entry is the delete marker {state.latest} and its newest version "
                                     f"{state.objects[0]}, not the journaled marker {versioned.marker_id} over "
                                     f"{versioned.version_id}: the key was written or deleted again since; "
                                     "nothing is changed")
        bucket, key = split_s3(path)
        try:
            self._call("DELETE", self.client.delete_object, Bucket=bucket, Key=key, VersionId=versioned.marker_id)
        except Exception as e:
            raise StorageError(path, f"cannot remove the delete marker {versioned.marker_id}: {e}") from e
        return MoveOutcome.MOVED

    def purge_version(self, path: str, versioned: VersionedDelete) -> DeleteOutcome:
        """Delete the journaled version for good (``ALREADY_ABSENT`` when it is gone), then its marker unless
        removing it would bring an older version of the key back. A version that is current again (restored)
        is refused: it is a live file."""
        state = self._one(path)
        if state is None:
            return DeleteOutcome.ALREADY_ABSENT
        if not state.latest_is_marker and state.latest == versioned.version_id:
            raise StorageError(path, f"version {versioned.version_id} is the key's current object again (restored?); "
                                     "it is not purged")
        bucket, key = split_s3(path)
        outcome = DeleteOutcome.ALREADY_ABSENT
        try:
            if versioned.version_id in state.objects:
                self._call("DELETE", self.client.delete_object, Bucket=bucket, Key=key, VersionId=versioned.version_id)
                outcome = DeleteOutcome.DELETED
            others = [v for v in state.objects if v != versioned.version_id]
            if versioned.marker_id in state.markers and not (state.latest == versioned.marker_id and others):
                self._call("DELETE", self.client.delete_object, Bucket=bucket, Key=key, VersionId=versioned.marker_id)
        except Exception as e:
            raise DeleteUnconfirmed(path, f"cannot purge version {versioned.version_id}: {e}") from e
        return outcome

    # Copy mode

    def _head(self, path: str) -> dict | None:
        bucket, key = split_s3(path)
        try:
            return self._call("HEAD", self.client.head_object, Bucket=bucket, Key=key)
        except Exception as e:
            if _status(e)[0] == 404:
                return None
            raise StorageError(path, f"cannot stat: {e}") from e

    def copy_no_replace(self, src: str, dst: str) -> MoveOutcome | None:
        """A CopyObject of ``src`` to ``dst`` that never replaces an object there: ``None`` when ``src`` is now
        at both places (copied now, or by an earlier attempt: same ETag and size), else what the move is
        already (``ALREADY_MOVED``, ``ABSENT``); ``FileExistsError`` when ``dst`` holds another object."""
        sb, sk = split_s3(src)
        db, dk = split_s3(dst)
        try:
            for conflict in range(6):
                try:
                    self._call("COPY", self.client.copy_object, Bucket=db, Key=dk, CopySource={"Bucket": sb, "Key": sk},
                               IfNoneMatch="*")
                    return None
                except Exception as e:
                    if _status(e)[0] != 409 or conflict == 5:  # 409: another conditional write of dst in flight
                        raise
                self._sleep(0.05 * 2 ** conflict)
        except Exception as e:
            status, code = _status(e)
            if status == 404 or code in ("NoSuchKey", "NotFound"):
                return MoveOutcome.ALREADY_MOVED if self._head(dst) is not None else MoveOutcome.ABSENT
            if status != 412:
                raise StorageError(src, f"cannot copy to {dst}: {code or status or type(e).__name__}: {e}") from e
        at_src, at_dst = self._head(src), self._head(dst)
        if at_src is None:
            return MoveOutcome.ALREADY_MOVED if at_dst is not None else MoveOutcome.ABSENT
        if at_dst is not None and (at_src.get("ETag"), at_src.get("ContentLength")) == (
                at_dst.get("ETag"), at_dst.get("ContentLength")):
            return None  # an earlier attempt copied it and stopped before deleting the source
        raise FileExistsError(dst)

    def move(self, src: str, dst: str) -> MoveOutcome:
        """``FileIO.move_no_replace`` in copy mode: ``copy_no_replace``, then a DeleteObject of ``src``."""
        done = self.copy_no_replace(src, dst)
        if done is not None:
            return done
        bucket, key = split_s3(src)
        try:
            self._call("DELETE", self.client.delete_object, Bucket=bucket, Key=key)
        except Exception as e:
            raise StorageError(src, f"copied to {dst}, but cannot delete it (the next attempt does): {e}") from e
        return MoveOutcome.MOVED

    def move_batch(self, pairs: Sequence[tuple[str, str]],
                   delete_batch: Callable[[list[str]], dict]) -> dict[str, Result]:
        """``move`` for many files: each copied (retried with backoff), then the originals deleted together by
        ``delete_batch`` (``FileIO.delete_batch``: DeleteObjects). A copy whose original cannot be deleted stays;
        the next attempt finds it and deletes the original."""
        out: dict[str, Result] = {}
        copied: dict[str, tuple[str, int]] = {}
        for src, dst in pairs:
            last = None
            for attempt in range(1, self.attempts + 1):
                self._backoff(attempt)
                try:
                    done = self.copy_no_replace(src, dst)
                except FileExistsError:
                    out[src] = (StorageError(src, f"not quarantined: a file is already at {dst}, so {src} was not "
                                                  "moved there; both are kept"), dst, attempt)
                    break
                except StorageError as e:
                    last = e
                    continue
                if done is None:
                    copied[src] = (dst, attempt)
                else:
                    out[src] = (done, dst, attempt)
                break
            else:
                out[src] = (StorageError(src, f"{last} (after {self.attempts} attempts)"), dst, self.attempts)
        deleted = delete_batch(list(copied)) if copied else {}
        for src, (dst, tries) in copied.items():
            outcome, attempts = deleted[src]
            if isinstance(outcome, DeleteOutcome):
                out[src] = (MoveOutcome.MOVED, dst, max(tries, attempts))
            else:
                out[src] = (StorageError(src, f"copied to {dst}, but {outcome}"), dst, max(tries, attempts))
        return out


# Whether a store honours If-None-Match: * on CopyObject, by (endpoint, bucket), as engine.s3_conditional's probe.
_FOUND: dict[tuple[str, str], ConditionalPutSupport] = {}
_FOUND_LOCK = threading.Lock()


def conditional_copy_support(settings: S3Settings, bucket: str, scratch_prefix: str, *,
                             client) -> ConditionalPutSupport:
    """Whether the store honours ``If-None-Match: *`` on CopyObject, probed under ``scratch_prefix`` (outside
    every table) the first time this process asks about this endpoint and bucket: a scratch key is copied twice
    to one destination, and the second copy must be refused with 412. ``StorageError`` when the probe fails."""
    cache_key = (settings.endpoint or f"aws:{settings.region}", bucket)
    with _FOUND_LOCK:
        if cache_key in _FOUND:
            return _FOUND[cache_key]
    found = _probe(client, store_name(settings, bucket), bucket, scratch_prefix)
    with _FOUND_LOCK:
        return _FOUND.setdefault(cache_key, found)


def forget_probes() -> None:
    with _FOUND_LOCK:
        _FOUND.clear()


def _probe(client, store: str, bucket: str, prefix: str) -> ConditionalPutSupport:
    from botocore.exceptions import BotoCoreError, ClientError

    base = f"{prefix.strip('/') + '/' if prefix.strip('/') else ''}{PROBE_NAME}{uuid.uuid4().hex}"
    src, dst = f"{base}-src", f"{base}-dst"
    where = f"s3://{bucket}/{dst}"
    copy = {"Bucket": bucket, "Key": dst, "CopySource": {"Bucket": bucket, "Key": src}, "IfNoneMatch": "*"}
    try:
        client.put_object(Bucket=bucket, Key=src, Body=b"1")
        for n in (1, 2):
            try:
                client.copy_object(**copy)
            except ClientError as e:
                status, code = _status(e)
                if n == 2 and status == 412:
                    return ConditionalPutSupport(store, True, f"a second CopyObject to {where} with If-None-Match: * "
                                                              f"was answered 412 {code}")
                if status in (400, 501) and code in ("NotImplemented", "InvalidArgument", "InvalidRequest"):
                    return ConditionalPutSupport(store, False, f"a CopyObject to {where} with If-None-Match: * was "
                                                               f"answered {status} {code}")
                raise StorageError(where, f"the conditional-copy probe failed: {code or status}: {e}") from e
        return ConditionalPutSupport(store, False, f"a second CopyObject to {where} with If-None-Match: * succeeded "
                                                   "and replaced the object: the header is ignored")
    except BotoCoreError as e:
        raise StorageError(where, f"the conditional-copy probe failed: {e}") from e
    finally:
        for key in (dst, src):
            try:
                client.delete_object(Bucket=bucket, Key=key)
            except (ClientError, BotoCoreError):
                pass  # a leftover scratch key outside every table harms nothing


def plan_quarantine_requests(plan, *, batch: int, batches: Iterable[Sequence] | None = None) -> dict:
    """What ``apply --quarantine`` of ``plan`` sends to S3, by request kind, in each mode (``show``): as
    ``engine.s3_bulk.plan_requests`` counts a delete, with, on a versioned bucket, ListObjectVersions
    (``LIST_VERSIONS``) in place of the bulk phases' LIST and of the ordered phases' HEAD; without versioning,
    a CopyObject (``COPY``) per file in place of the ordered phases' HEAD, and the bytes the store copies.
    Asking the bucket's versioning, and in copy mode the conditional-copy probe, come on top. ``batches``:
    the plan's actions in order, a batch at a time (default: ``plan.actions``, whole)."""
    from lakesweep.engine.s3_bulk import PlanRequests

    fold = PlanRequests(plan.table_location, plan.phases, batch=batch)
    for actions in (plan.actions,) if batches is None else batches:
        fold.add(actions)
    return quarantine_requests(fold)


def quarantine_requests(fold) -> dict:
    """``plan_quarantine_requests`` from a ``PlanRequests`` fold that has seen every action of the plan."""
    base, listed, ordered = fold.counts(), fold.bulk.counts()["LIST"], fold.ordered
    versioned = {**base, "LIST": base["LIST"] - listed, "HEAD": base["HEAD"] - ordered,
                 "LIST_VERSIONS": listed + ordered}
    copy = {**base, "HEAD": base["HEAD"] - ordered, "COPY": fold.files}
    return {"store": "s3", "files": fold.files, "bytes": fold.bytes,
            VERSIONED: {k: n for k, n in versioned.items() if n}, COPY: {k: n for k, n in copy.items() if n},
            "bytes_copied": fold.bytes}
