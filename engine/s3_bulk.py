"""Bulk deletes on S3 with each key's own outcome, under a request budget (AIMD on ``503 SlowDown``).

Bulk deletes go through botocore with its own retries off: every retry is ours, so throttling is seen,
counted and slowed for. The keys of a batch are first found with one LIST per directory prefix; those not
listed are ``ALREADY_ABSENT`` and are not sent (DeleteObjects reports an absent key as deleted); a key listed
and then removed by someone else before our DeleteObjects is ``DELETED``. Why botocore, and why the LIST:
docs/design/apply.md#bulk-deletes-on-s3.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from lakesweep.engine.errors import StorageError

MAX_DELETE_BATCH = 1000  # S3's limit on the keys of one DeleteObjects
DEFAULT_DELETE_BATCH = 250  # Iceberg's S3FileIO default (s3.delete.batch-size)
MIN_RATE = 1.0  # requests per second AIMD never goes below


@dataclass(frozen=True, slots=True)
class RequestBudget:
    """What one apply may send to the store: at most ``max_requests_per_second`` (all executors together)
    and ``max_concurrency`` requests in flight; DeleteObjects carries ``delete_batch`` keys."""

    max_requests_per_second: float | None = None
    max_concurrency: int | None = None
    delete_batch: int = DEFAULT_DELETE_BATCH

    def __post_init__(self):
        if self.max_requests_per_second is not None and not self.max_requests_per_second > 0:
            raise ValueError(f"max_requests_per_second must be > 0, got {self.max_requests_per_second!r}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency!r}")
        if not 1 <= self.delete_batch <= MAX_DELETE_BATCH:
            raise ValueError(f"delete_batch must be within 1..{MAX_DELETE_BATCH}, got {self.delete_batch!r}")

    def share(self, tasks: int) -> RequestBudget:
        """One task's share when ``tasks`` run at once: the rate and the concurrency divided evenly."""
        tasks = max(1, tasks)
        rate = None if self.max_requests_per_second is None else self.max_requests_per_second / tasks
        conc = None if self.max_concurrency is None else max(1, self.max_concurrency // tasks)
        return replace(self, max_requests_per_second=rate, max_concurrency=conc)


class RateLimiter:
    """Paces requests to ``rate`` per second (None: no limit). ``throttled`` halves the rate (from the rate
    seen over the last second when there was no limit); each success adds one request per second back, up
    to the ceiling (additive increase, multiplicative decrease). Counts requests by kind. Thread-safe."""

    def __init__(self, rate: float | None = None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.ceiling = rate
        self.rate = rate
        self._clock, self._sleep = clock, sleep
        self._next = 0.0
        self._recent: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()
        self.sent: collections.Counter[str] = collections.Counter()
        self.slowdowns = 0  # since the last report
        self.lowest: float | None = None  # the lowest rate since the last report

    def acquire(self, kind: str) -> None:
        with self._lock:
            now = self._clock()
            self.sent[kind] += 1
            self._recent.append(now)
            while self._recent and self._recent[0] < now - 1.0:
                self._recent.popleft()
            if self.rate is None:
                return
            at = max(now, self._next)
            self._next = at + 1.0 / self.rate
        if at > now:
            self._sleep(at - now)

    def succeeded(self) -> None:
        with self._lock:
            if self.rate is not None:
                self.rate = self.rate + 1.0 if self.ceiling is None else min(self.ceiling, self.rate + 1.0)

    def throttled(self) -> None:
        with self._lock:
            seen = self.rate if self.rate is not None else float(len(self._recent))
            self.rate = max(MIN_RATE, seen / 2)
            self.slowdowns += 1
            self.lowest = self.rate if self.lowest is None else min(self.lowest, self.rate)

    def take_report(self) -> tuple[int, float | None]:
        """(slowdowns, lowest rate) since the last report, then reset both."""
        with self._lock:
            out = (self.slowdowns, self.lowest)
            self.slowdowns, self.lowest = 0, None
            return out


def split_s3(path: str) -> tuple[str, str]:
    bucket, _, key = path[len("s3://"):].partition("/")
    return bucket, key


def _is_slowdown(e: Exception) -> bool:
    response = getattr(e, "response", None) or {}
    code = response.get("Error", {}).get("Code")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded") or status == 503


class BudgetedCalls:
    """Requests sent under a ``RateLimiter`` (``self.limiter``), with ``throttle_retries``, ``base_delay_s`` and
    ``_sleep`` set by the subclass."""

    def _call(self, kind: str, fn: Callable, **kwargs):
        """One request under the budget; ``503 SlowDown`` slows the limiter down and is sent again."""
        for n in range(self.throttle_retries + 1):
            self.limiter.acquire(kind)
            try:
                out = fn(**kwargs)
            except Exception as e:  # botocore raises ClientError and several transport errors
                if _is_slowdown(e) and n < self.throttle_retries:
                    self.limiter.throttled()
                    self._sleep(self.base_delay_s * (2 ** min(n, 6)) * (1 + random.random()))
                    continue
                raise
            self.limiter.succeeded()
            return out
        raise AssertionError("unreachable")


class S3BulkDeleter(BudgetedCalls):
    """Deletes keys in DeleteObjects batches; see the module docstring for what each outcome means."""

    def __init__(self, client, limiter: RateLimiter, *, batch: int = DEFAULT_DELETE_BATCH, attempts: int = 4,
                 base_delay_s: float = 0.05, throttle_retries: int = 20,
                 sleep: Callable[[float], None] = time.sleep):
        self.client, self.limiter, self.batch, self.attempts = client, limiter, batch, attempts
        self.base_delay_s, self.throttle_retries, self._sleep = base_delay_s, throttle_retries, sleep

    def delete(self, paths: Sequence[str]) -> dict[str, tuple[object, int]]:
        """``{path: (DeleteOutcome or StorageError, attempts)}`` for every ``s3://`` path."""
        out: dict[str, tuple[object, int]] = {}
        by_bucket: dict[str, list[str]] = collections.defaultdict(list)
        for path in dict.fromkeys(paths):
            by_bucket[split_s3(path)[0]].append(path)
        for bucket, bucket_paths in by_bucket.items():
            for i in range(0, len(bucket_paths), self.batch):
                out.update(self._batch(bucket, bucket_paths[i:i + self.batch]))
        return out

    def _existing(self, bucket: str, keys: Sequence[str]) -> tuple[set[str], set[str], dict[str, str]]:
        """Among ``keys``: those that exist and those that are directories (a prefix of other keys), by one
        LIST per directory prefix (paged from just before its first key to its last); and the error of each
        directory that could not be listed."""
        by_dir: dict[str, list[str]] = collections.defaultdict(list)
        for key in keys:
            by_dir[key.rpartition("/")[0]].append(key)
        found: set[str] = set()
        dirs: set[str] = set()
        failed: dict[str, str] = {}
        for directory, in_dir in by_dir.items():
            in_dir = sorted(in_dir)
            wanted = set(in_dir)
            prefix = f"{directory}/" if directory else ""
            # A page as long as the batch's share of the directory: a plan's keys are sorted, so it usually
            # covers them, and a store lists (and bills the time of) every entry it returns; more pages follow
            # only when other files lie between them.
            kwargs = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/", "MaxKeys": min(1000, len(in_dir) + 1),
                      "StartAfter": in_dir[0][:-1]}
            try:
                while True:
                    page = self._call("LIST", self.client.list_objects_v2, **kwargs)
                    listed = [c["Key"] for c in page.get("Contents", ())]
                    below = [p["Prefix"][:-1] for p in page.get("CommonPrefixes", ())]
                    found.update(k for k in listed if k in wanted)
                    dirs.update(k for k in below if k in wanted)
                    last = max(listed + below, default=None)
                    if not page.get("IsTruncated") or last is None or last >= in_dir[-1]:
                        break
                    kwargs["ContinuationToken"] = page["NextContinuationToken"]
            except Exception as e:  # fail closed: a directory that cannot be listed deletes nothing
                failed[directory] = f"cannot list s3://{bucket}/{prefix}: {e}"
        return found, dirs, failed

    def _batch(self, bucket: str, paths: list[str]) -> dict[str, tuple[object, int]]:
        from lakesweep.engine.fileio import DeleteOutcome

        keys = {split_s3(p)[1]: p for p in paths}
        out: dict[str, tuple[object, int]] = {}
        existing, dirs, unlisted = self._existing(bucket, list(keys))
        pending: list[str] = []
        for key, path in keys.items():
            directory = key.rpartition("/")[0]
            if directory in unlisted:
                out[path] = (StorageError(path, unlisted[directory]), 1)
            elif key in dirs and key not in existing:
                out[path] = (StorageError(path, "is a directory; lakesweep deletes files only"), 1)
            elif key in existing:
                pending.append(key)
            else:
                out[path] = (DeleteOutcome.ALREADY_ABSENT, 1)
        errors: dict[str, str] = {}
        for attempt in range(1, self.attempts + 1):
            if not pending:
                break
            if attempt > 1:
                self._sleep(self.base_delay_s * (2 ** (attempt - 2)) * (1 + random.random()))
            try:
                response = self._call("DELETE", self.client.delete_objects, Bucket=bucket, Delete={
                    "Objects": [{"Key": k} for k in pending], "Quiet": False})
            except Exception as e:  # the whole request failed: every key is tried again
                errors = {k: f"{type(e).__name__}: {e}" for k in pending}
                continue
            for d in response.get("Deleted", ()):
                if d["Key"] in keys and keys[d["Key"]] not in out:
                    out[keys[d["Key"]]] = (DeleteOutcome.DELETED, attempt)
            errors = {}
            for err in response.get("Errors", ()):
                key = err.get("Key")
                if key not in keys:
                    continue
                if err.get("Code") == "NoSuchKey":  # listed before this request, gone after it
                    out[keys[key]] = (DeleteOutcome.DELETED, attempt)
                else:
                    errors[key] = f"{err.get('Code')}: {err.get('Message')}"
            # A key the response does not mention was not confirmed: it is tried again, like a failure.
            pending = [k for k in pending if keys[k] not in out]
            for k in pending:
                errors.setdefault(k, "not in the DeleteObjects response")
        for k in pending:
            out[keys[k]] = (StorageError(keys[k], f"cannot delete: {errors.get(k)} (after {self.attempts} attempts)"),
                            self.attempts)
        return out


class BulkRequests:
    """``estimate_requests`` as a fold: the paths added in order, any number at a time (``add``), holding only
    the directories of the DeleteObjects batch being filled."""

    def __init__(self, batch: int = DEFAULT_DELETE_BATCH):
        self.batch, self.lists, self.deletes = batch, 0, 0
        self._dirs: set[tuple[str, str]] = set()
        self._keys = 0

    def add(self, paths: Iterable[str]) -> None:
        for p in paths:
            bucket, key = split_s3(p)
            self._dirs.add((bucket, key.rpartition("/")[0]))
            self._keys += 1
            if self._keys == self.batch:
                self.lists += len(self._dirs)
                self.deletes += 1
                self._dirs, self._keys = set(), 0

    def counts(self) -> dict[str, int]:
        return {"LIST": self.lists + len(self._dirs), "DELETE": self.deletes + (self._keys > 0)}


def estimate_requests(paths: Iterable[str], *, batch: int = DEFAULT_DELETE_BATCH) -> dict[str, int]:
    """The LIST and DELETE requests ``S3BulkDeleter`` sends for ``paths`` taken in order, ``batch`` at a
    time (one LIST page per directory of each batch: more when a directory's keys span pages)."""
    fold = BulkRequests(batch)
    fold.add(paths)
    return fold.counts()


def seconds_at(requests: int, rate: float | None) -> float | None:
    """How long ``requests`` take at ``rate`` per second (None: no budget, no figure)."""
    return None if rate is None else requests / rate


class PlanRequests:
    """``plan_requests`` as a fold over a plan's actions, added in order a batch at a time (``add``); it also
    counts what ``apply --quarantine`` changes (``engine.s3_quarantine.quarantine_requests``): the files
    deleted, their bytes, those of ordered phases, and the LISTs of the bulk ones."""

    def __init__(self, table_location: str, phases: Sequence, *, batch: int = DEFAULT_DELETE_BATCH):
        from lakesweep.engine.plan import PhaseMode

        self.location = table_location
        self._bulk_phase = tuple(p.mode == PhaseMode.BULK for p in phases)
        self.bulk = BulkRequests(batch)
        self._counts = dict.fromkeys(("LIST", "DELETE", "HEAD", "GET", "PUT"), 0)
        self.files = self.bytes = self.ordered = 0

    def add(self, actions: Iterable) -> None:
        from lakesweep.engine.plan import Verb

        counts, bulk = self._counts, []
        for a in actions:
            if a.verb is Verb.DELETE_FILE:
                self.files += 1
                self.bytes += a.size or 0
                if self._bulk_phase[a.phase - 1]:
                    bulk.append(f"{self.location}/{a.path}")
                else:
                    self.ordered += 1
                    counts["HEAD"] += 1
                    counts["DELETE"] += 1
            elif a.verb is Verb.WRITE_FILE:
                counts["GET"] += a.source is not None
                counts["PUT"] += 1
            elif a.verb is Verb.DELETE_EMPTY_DIR:
                counts["HEAD"] += 1
        self.bulk.add(bulk)

    def counts(self) -> dict[str, int]:
        bulk = self.bulk.counts()
        return {kind: n + bulk.get(kind, 0) for kind, n in self._counts.items()}


def plan_requests(plan, *, batch: int = DEFAULT_DELETE_BATCH, batches: Iterable[Sequence] | None = None,
                  ) -> dict[str, int]:
    """The requests applying ``plan``'s file actions sends to an object store, by kind: the deletes of bulk
    phases in DeleteObjects batches (``estimate_requests``), those of ordered phases one by one (a HEAD, to
    tell deleted from already absent, and a DELETE), a copy a GET and a PUT, a pointer a PUT, an empty
    directory a HEAD. Reading the table's metadata to re-check the plan comes on top. ``batches``: the
    plan's actions in order, a batch at a time (default: ``plan.actions``, whole); ``plan`` gives the rest."""
    fold = PlanRequests(plan.table_location, plan.phases, batch=batch)
    for actions in (plan.actions,) if batches is None else batches:
        fold.add(actions)
    return fold.counts()
