"""The one errors module of lakesweep.

Every error says what object it is about and, where there is one, the next step the user can take.
Read errors are never turned into "missing": a file that cannot be read raises, and whatever depends
on it is kept.
"""

from __future__ import annotations


class LakesweepError(Exception):
    """Base class of every error lakesweep raises on purpose."""


class TableFormatError(LakesweepError):
    """A Paimon metadata file could not be read or does not make sense.

    ``path`` names the file (or directory) at fault.
    """

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


class MetadataNotFound(TableFormatError):
    """A metadata file that something points to does not exist."""

    def __init__(self, path: str, what: str = "file"):
        super().__init__(path, f"{what} not found")


class CorruptMetadata(TableFormatError):
    """A metadata file exists but cannot be parsed (truncated Avro, malformed JSON, wrong layout)."""


class UnsupportedTable(LakesweepError):
    """The table uses a feature lakesweep cannot handle exactly as Paimon does, so it refuses to touch it."""


class CatalogError(LakesweepError):
    """An Iceberg catalog could not be loaded, or does not hold the table named."""


class InvalidLocation(LakesweepError):
    """A location lakesweep cannot address safely: an unsupported scheme, a ``file://host/`` URI, a relative
    path where an absolute one is required, ``.``/``..`` segments, or the file system root as a table or
    external root."""

    def __init__(self, location: str, message: str):
        self.path = location
        super().__init__(f"{location!r}: {message}")


class AtomicCreateUnsupported(LakesweepError):
    """The store cannot create a file only if it is absent (``FileIO.create_if_absent``), so nothing that
    needs it, such as a commit of ``snapshot-N``, may run there."""

    ALTERNATIVES = ("commit on a store that honours conditional writes (PutObject with If-None-Match: *, as AWS "
                    "S3 does), on HDFS or a local file system, or with Paimon's own commit under a catalog lock "
                    "(a Hive or JDBC catalog with lock.enabled)")

    def __init__(self, path: str, store: str, reason: str | None = None):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {store} cannot create a file only if it is absent, which a commit needs"
                         + (f" ({reason})" if reason else "")
                         + f"; lakesweep refuses to commit there and never checks first and writes after: "
                         f"{self.ALTERNATIVES}")


class QuarantineUnsupported(LakesweepError):
    """The store cannot put a file aside without copying or replacing another (``FileIO.move_no_replace``), so
    ``apply --quarantine`` is refused there before anything is changed."""

    def __init__(self, path: str, store: str, reason: str | None = None):
        self.path = path
        super().__init__(f"{path}: {store} cannot quarantine files" + (f" ({reason})" if reason else "")
                         + "; apply without --quarantine deletes them for good")


class StorageError(LakesweepError):
    """The file system or object store failed (permission denied, network, throttling...)."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


class DeleteUnconfirmed(StorageError):
    """A delete request went out and its answer was lost (a timeout, a dropped connection, a server error after
    the store may have acted): the file may be gone or not. A later attempt that finds it absent reports it
    ``DELETED``, never ``ALREADY_ABSENT``: it was there when the first attempt looked."""


class PlanRejected(LakesweepError):
    """A plan cannot be built or accepted: bad options, a tampered file, a plan for another table."""


class StalePlan(PlanRejected):
    """The live table changed since the plan was made in a way that makes the plan unsafe."""


class SharedStorage(PlanRejected):
    """Another table stores files where this table's orphan cleaning lists: its location, a write path or
    its metadata lies in, contains or equals one of this table's roots. Its files would look unused, so
    nothing is planned or deleted. ``neighbour`` names the other table."""

    def __init__(self, neighbour: str, message: str):
        self.neighbour = neighbour
        super().__init__(message)


class PlannerInvariantViolated(LakesweepError):
    """The planner's own safety check found a planned path that is still reachable. This is a bug."""


class SparkUnavailable(LakesweepError):
    """A Spark session could not be started (bad master, bad configuration, unreachable cluster)."""


class JournalError(LakesweepError):
    """The journal cannot be opened or written."""


class JournalConflict(JournalError):
    """Another process holds the journal, or the journal already records a conflicting run."""


class ExecutorEnvironmentError(LakesweepError):
    """The Spark executors cannot run lakesweep's tasks: their Python is missing, lacks lakesweep or its
    dependencies, or runs other versions than the driver. The message says how to provide it."""


class ForeignDirectory(LakesweepError):
    """A directory lakesweep was asked to write into holds files lakesweep did not create there.

    lakesweep refuses instead of removing or overwriting them; ``path`` names the directory."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")
