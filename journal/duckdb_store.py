"""The journal in a DuckDB file, readable while it is written.

DuckDB lets one process open a database file for writing and refuses every other process, readers included.
So the one writer holds the journal's writer lock (``fcntl.flock`` on ``<journal>.lock``, holding its pid)
for as long as its recorder is open, and opens the DuckDB file for each read or write batch (within ``held``,
an apply's, it keeps it open until a reader waits for it: ``readers_path``); readers open it read-only between
batches. Either side waits, briefly and bounded (``READ_WAIT_S``,
``WRITE_WAIT_S``), then raises ``JournalConflict`` naming the pid that holds it; a second writer, in this
process or another, is refused at once. Why: docs/design/journal-store.md#one-writer-readers-while-it-writes.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import duckdb
import pyarrow as pa

from lakesweep.engine.errors import JournalConflict, JournalError

from lakesweep.journal import rules
from lakesweep.journal.events import FileRecord, PlanRecorded, decode
from lakesweep.journal.recorder import Recorder, StoredEvent

SCHEMA_VERSION = 3  # 2: plan_actions has every action column (verb added); 3: file_records has moved_to
MEMORY = ":memory:"
_SMALL_BATCH = 64  # rows; larger batches go through Arrow
# How long a reader waits for the writer's batch to end (a batch holds the file for tens of milliseconds),
# and how long the writer waits for readers to finish their read before it gives up.
READ_WAIT_S = 5.0
WRITE_WAIT_S = 120.0
READER_POLL_S = 0.05  # how often a writer that keeps the file open (``held``) looks for readers waiting

# events.plan_id holds each event's stream key (``Event.stream_id``): a plan's id, or a maintain run's
# ``maintain:<run id>``.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq BIGINT PRIMARY KEY, event_type VARCHAR NOT NULL, schema_version INTEGER NOT NULL,
    plan_id VARCHAR NOT NULL, apply_id VARCHAR, payload JSON NOT NULL, recorded_ms BIGINT NOT NULL);
{plan_actions}
CREATE TABLE IF NOT EXISTS file_records (
    seq BIGINT PRIMARY KEY, apply_id VARCHAR NOT NULL, plan_id VARCHAR NOT NULL, action_id INTEGER NOT NULL,
    path VARCHAR NOT NULL, kind VARCHAR NOT NULL, phase INTEGER NOT NULL, bytes BIGINT, outcome VARCHAR NOT NULL,
    error VARCHAR, attempt INTEGER NOT NULL, time_ms BIGINT NOT NULL, moved_to VARCHAR);
""".replace("{plan_actions}", rules.PLAN_ACTIONS_DDL)
# Views are made again on every open, after any upgrade, so a journal of any schema version has today's.
_VIEWS = ("CREATE OR REPLACE VIEW file_audit AS\n" + rules.FILE_AUDIT + ";\n"
          "CREATE OR REPLACE VIEW maintenance_history AS\n" + rules.MAINTENANCE_HISTORY + ";\n")

# Journals of schema 2 and older have no column for where a quarantined file went.
_V2_MOVED_TO = "ALTER TABLE file_records ADD COLUMN IF NOT EXISTS moved_to VARCHAR;\n"

# Journals of schema 1 stored snapshot expiry's actions without their verb; each kind had one.
_V1_VERBS = """
ALTER TABLE plan_actions ADD COLUMN IF NOT EXISTS verb VARCHAR;
UPDATE plan_actions SET verb = CASE kind WHEN 'empty-dir' THEN 'delete-empty-dir'
    WHEN 'write-changelog' THEN 'write-file' WHEN 'write-earliest-hint' THEN 'write-file' ELSE 'delete-file' END
WHERE verb IS NULL;
"""

# DuckDB shares one database between the connections of a process, so its file lock cannot stop a
# second recorder here; this registry does. Weak, so a recorder dropped without close() frees its file.
_OPEN_IN_THIS_PROCESS: "weakref.WeakValueDictionary[str, DuckDBRecorder]" = weakref.WeakValueDictionary()


def default_journal_path() -> Path:
    """``$LAKESWEEP_JOURNAL``, else ``$XDG_DATA_HOME/lakesweep/journal.duckdb`` (XDG default ~/.local/share)."""
    explicit = os.environ.get("LAKESWEEP_JOURNAL")
    if explicit:
        return Path(explicit).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME")
    if not data_home or not os.path.isabs(data_home):  # the XDG spec says: ignore empty or relative values
        data_home = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data_home) / "lakesweep" / "journal.duckdb"


def connect_journal(path: str, *, read_only: bool, config: dict | None = None,
                    wait_s: float = 0.0) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB journal file, turning "another process holds it" into ``JournalConflict``.

    While another process holds the file (the writer in a batch, or readers while the writer wants it),
    the open is tried again for up to ``wait_s`` seconds; a reader that waits says so meanwhile (a shared
    lock on ``readers_path``), so that a writer keeping the file open across its writes lets go of it. A path
    that exists but is not a regular file (a directory, a FIFO, a device) is refused before DuckDB opens it:
    opening a FIFO would block forever."""
    _check_regular(path)
    deadline = time.monotonic() + wait_s
    pause = 0.002
    waiting: int | None = None
    try:
        while True:
            try:
                return duckdb.connect(path, read_only=read_only, config=config or {})
            except duckdb.IOException as e:
                if "Could not set lock" not in str(e):
                    raise JournalError(f"cannot open journal {path}: {e}") from e
                if read_only and waiting is None and wait_s > 0:
                    waiting = _reader_waits(path)
                left = deadline - time.monotonic()
                if left <= 0:
                    m = re.search(r"PID (\d+)", str(e))
                    pid = m.group(1) if m else (writer_pid(path) or "?")
                    if wait_s <= 0:
                        raise JournalConflict(
                            f"journal {path} is in use by another lakesweep process (pid {pid}); wait for it to "
                            f"finish, or point --journal / $LAKESWEEP_JOURNAL at another file") from e
                    raise JournalConflict(
                        f"journal {path} is in use by another lakesweep process (pid {pid}), which did not let "
                        f"it go within {wait_s:g} s; try again once it has finished") from e
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.05)
            except duckdb.ConnectionException as e:
                raise JournalConflict(f"journal {path} is already open in this process; close that recorder "
                                      "first") from e
            except duckdb.Error as e:
                raise JournalError(f"cannot open journal {path}: {e}") from e
    finally:
        if waiting is not None:
            os.close(waiting)  # and with it the shared lock


def readers_path(path: str | os.PathLike) -> str:
    """``<journal>.readers``: readers waiting for the DuckDB file hold a shared lock on it (``connect_journal``);
    the writer, when it finds it locked, closes the file after its current write (``DuckDBRecorder.held``)."""
    return f"{path}.readers"


def _reader_waits(path: str) -> int | None:
    """A descriptor holding a shared lock on the journal's readers file; None when there is no such file
    (no writer keeps the journal open) or it cannot be locked."""
    try:
        fd = os.open(readers_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _check_regular(path: str) -> None:
    if path != MEMORY and os.path.lexists(path) and not os.path.isfile(path):
        raise JournalError(f"journal {path} is not a regular file")


def lock_path(path: str | os.PathLike) -> str:
    """The journal's writer lock file: ``<journal>.lock``."""
    return f"{path}.lock"


def writer_pid(path: str | os.PathLike) -> int | None:
    """The pid the journal's lock file names, if that process is alive: the writer, or None."""
    try:
        with open(lock_path(path)) as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return int(text)


class _WriterLock:
    """The journal's writer lock: ``fcntl.flock`` on ``<journal>.lock``, held by the one process that writes
    the journal for as long as its recorder is open. The file holds that process's pid while it does. The
    kernel drops the lock when the process dies, so a crashed apply leaves nothing to clean up."""

    def __init__(self, journal: str):
        self.path = lock_path(journal)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise JournalError(f"cannot create the lock file {self.path} of journal {journal}: "
                               f"{e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(fd)
            raise JournalConflict(
                f"journal {journal} is in use by another lakesweep process (pid {writer_pid(journal) or '?'}); "
                f"wait for it to finish, or point --journal / $LAKESWEEP_JOURNAL at another file") from e
        except OSError as e:
            os.close(fd)
            raise JournalError(f"cannot lock journal {journal} ({self.path}): {e.strerror or e}; the journal "
                               f"must be on a file system that supports flock") from e
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd: int | None = fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)  # the pid names no writer any more
            finally:
                os.close(fd)  # and closing the only descriptor releases the lock


def has_journal_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database holds lakesweep's tables. A kill while a journal is created can leave the DuckDB
    file without them (the tables are created in one transaction): such a journal is empty, and the first
    recorder that opens it for writing creates them."""
    return con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'events'").fetchall()[0][0] > 0


def _schema_version(con: duckdb.DuckDBPyConnection, path: str) -> int | None:
    """The journal's schema version (None: no journal tables yet); ``JournalError`` if this lakesweep
    cannot read it."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'meta'").fetchone()[0]:
        return None
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    if not re.fullmatch(r"[0-9]+", str(row[0])):
        raise JournalError(f"journal {path} has schema version {row[0]!r}, which is not a number: "
                           "the file is not a lakesweep journal, or it was damaged")
    if int(row[0]) > SCHEMA_VERSION:
        raise JournalError(f"journal {path} has schema version {row[0]}, newer than this lakesweep "
                           f"understands ({SCHEMA_VERSION}); upgrade lakesweep")
    return int(row[0])


class DuckDBRecorder(Recorder):
    """The journal in a DuckDB file (``":memory:"`` for a throw-away one). Creates the parent directory.

    A writer (the default) holds the journal's writer lock for its whole life, so there is one writer at a
    time, and has the DuckDB file open only while one of its reads or writes runs: other processes can
    read the journal between two batches. Each write is one transaction, durable when the call returns.

    With ``read_only=True`` it is a reader: no lock, no writes; it holds the file open read-only from its
    construction to ``close()``, so everything it reads is one state of the journal, and the writer waits
    for it (keep readers short). A journal of an older schema, or without tables yet, is brought up to
    date first, as a writer would.

    ``wait_s``: how long to wait for the other side to let go of the DuckDB file (default ``READ_WAIT_S``
    for a reader, ``WRITE_WAIT_S`` for a writer).
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False, wait_s: float | None = None):
        super().__init__()
        self.path = str(path)
        self.read_only = read_only
        self.wait_s = (READ_WAIT_S if read_only else WRITE_WAIT_S) if wait_s is None else wait_s
        self._key = None
        self._lock: _WriterLock | None = None
        self._con: duckdb.DuckDBPyConnection | None = None
        self._closed = False
        self._depth = 0  # nested sessions of a writer
        self._holding: int | None = None  # within ``held``: the readers file, to hear of readers waiting
        self._mutex = threading.Lock()  # the connection: opened, closed, counted under it (``held``'s watcher)
        if read_only:
            if self.path == MEMORY:
                raise JournalError("an in-memory journal cannot be opened read-only")
            self._con = self._open_reader()
            return
        if self.path != MEMORY:
            _check_regular(self.path)
            _make_parent(self.path, "journal")
            key = os.path.realpath(self.path)
            other = _OPEN_IN_THIS_PROCESS.get(key)
            if other is not None and not other._closed:
                raise JournalConflict(f"journal {self.path} is already open in this process; close that recorder first")
            self._lock = _WriterLock(self.path)
            weakref.finalize(self, self._lock.release)  # a recorder dropped without close() frees the file
            self._key = key
            _OPEN_IN_THIS_PROCESS[key] = self
        else:
            self._con = connect_journal(MEMORY, read_only=False)  # kept: closing it would drop the journal
        try:
            with self._session():
                self._init_schema()
                self._seq = self._con.execute(
                    "SELECT greatest((SELECT coalesce(max(seq), 0) FROM events), "
                    "(SELECT coalesce(max(seq), 0) FROM file_records))").fetchone()[0]
        except BaseException:
            self.close()
            raise

    def _open_reader(self) -> duckdb.DuckDBPyConnection:
        con = connect_journal(self.path, read_only=True, wait_s=self.wait_s)
        try:
            current = _schema_version(con, self.path) == SCHEMA_VERSION and has_journal_tables(con)
        except BaseException:
            con.close()
            raise
        if current:
            return con
        con.close()
        # Only a writer creates or upgrades the tables; every writer does so when it opens the journal.
        DuckDBRecorder(self.path, wait_s=self.wait_s).close()
        return connect_journal(self.path, read_only=True, wait_s=self.wait_s)

    @contextmanager
    def _session(self) -> Iterator[None]:
        """The DuckDB file open for a writer's read or write, and closed again (which checkpoints) when the
        outermost session ends, unless ``held`` keeps it open; a reader's or an in-memory journal's
        connection stays open."""
        self._check_open()
        if self._lock is None:
            yield
            return
        with self._mutex:
            if self._con is None:
                self._con = connect_journal(self.path, read_only=False, wait_s=self.wait_s)
            self._depth += 1
        failed = True
        try:
            yield
            failed = False
        finally:
            with self._mutex:
                self._depth -= 1
                if self._depth == 0 and (self._holding is None or failed):
                    self._let_go(failed)

    def _let_go(self, failed: bool) -> None:
        con, self._con = self._con, None
        if con is None:
            return
        try:
            con.close()
        except duckdb.Error as e:
            if not failed:  # otherwise the error of the session is the one to report
                raise JournalError(f"journal {self.path}: could not close it after writing: {e}") from e

    @contextmanager
    def _held(self) -> Iterator[None]:
        """The DuckDB file kept open across the block's reads and writes (each write still its own transaction,
        durable when it returns), and closed at its end. A reader that waits for the file (``readers_path``)
        is let in: a watcher thread closes the file as soon as no read or write is under way, and the next
        one opens it again."""
        if self._lock is None or self._holding is not None:
            yield
            return
        try:
            self._holding = os.open(readers_path(self.path), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            yield  # no way to hear of readers: the file is opened for each write, as without the block
            return
        stop = threading.Event()
        watcher = threading.Thread(target=self._let_readers_in, args=(stop,), name="lakesweep-journal-readers",
                                   daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()
            with self._mutex:
                fd, self._holding = self._holding, None
                os.close(fd)
                if self._depth == 0:
                    self._let_go(False)

    def _let_readers_in(self, stop: threading.Event) -> None:
        while not stop.wait(READER_POLL_S):
            with self._mutex:
                if self._depth == 0 and self._con is not None and self._reader_waiting():
                    self._let_go(True)  # every write was committed; a failed checkpoint is redone by the next

    def _reader_waiting(self) -> bool:
        try:
            fcntl.flock(self._holding, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # a reader holds its shared lock (or the lock cannot be taken): let go
        fcntl.flock(self._holding, fcntl.LOCK_UN)
        return False

    def _init_schema(self) -> None:
        version = _schema_version(self._con, self.path)
        with self._transaction("create the journal tables"):
            self._con.execute(_SCHEMA)
            if version is not None and version < 2:
                self._con.execute(_V1_VERBS)
            if version is not None and version < 3:
                self._con.execute(_V2_MOVED_TO)
                self._con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
            self._con.execute(_VIEWS)
            self._con.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
                              [str(SCHEMA_VERSION)])

    def _transaction(self, what: str):
        return _Transaction(self, what)

    def _check_writable(self, what: str) -> None:
        self._check_open()
        if self.read_only:
            raise JournalError(f"journal {self.path} is open read-only: cannot {what}")

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError(f"journal {self.path} is closed")

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        con, self._con = self._con, None
        fd, self._holding = getattr(self, "_holding", None), None
        try:
            if con is not None:
                con.close()
        finally:
            if fd is not None:
                os.close(fd)
            if self._lock is not None:
                self._lock.release()
            if self._key is not None:
                if _OPEN_IN_THIS_PROCESS.get(self._key) is self:
                    del _OPEN_IN_THIS_PROCESS[self._key]
                self._key = None

    def _next(self, n: int) -> list[int]:
        # The recorder is the only writer (the writer lock + the in-process registry), so a counter is enough.
        return list(range(self._seq + 1, self._seq + n + 1))

    # -- plans -------------------------------------------------------------------------------------

    def _plan_ids(self):
        with self._session():
            return [r[0] for r in self._con.execute(
                "SELECT plan_id FROM events WHERE event_type = 'PlanRecorded' ORDER BY seq").fetchall()]

    def _insert_plan(self, row, actions):
        self._check_writable(f"record plan {row.stream_id}")
        table = rules.actions_table(row.stream_id, actions)
        with self._session(), self._transaction(f"record plan {row.stream_id}"):
            seqs = self._insert_events([row])
            if table.num_rows:
                self._insert_arrow("plan_actions", table)
        self._seq = seqs[-1]

    def _load_plan(self, plan_id):
        with self._session():
            found = self._con.execute(
                "SELECT event_type, schema_version, payload FROM events WHERE plan_id = ? "
                "AND event_type = 'PlanRecorded' ORDER BY seq LIMIT 1", [plan_id]).fetchall()
            if not found:
                return None
            row = found[0]
            columns = ", ".join(f'"{c}"' for c in rules.ACTIONS_SCHEMA.names)
            # as Arrow, not a tuple per row: a million rows fetched one by one took seconds
            table = self._con.sql(f"SELECT {columns} FROM plan_actions WHERE plan_id = $1 ORDER BY action_id",
                                  params=[plan_id]).to_arrow_table()
        event = decode(row[0], row[1], json.loads(row[2]))
        assert isinstance(event, PlanRecorded)
        return event, rules.actions_of_table(event, table)

    # -- events ------------------------------------------------------------------------------------

    def _insert_events(self, rows: Sequence[StoredEvent]) -> list[int]:
        seqs = self._next(len(rows))
        self._con.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            [[s, r.event_type, r.schema_version, r.stream_id, r.apply_id, json.dumps(r.payload, sort_keys=True),
              r.time_ms] for s, r in zip(seqs, rows)])
        return seqs

    def _append_rows(self, rows):
        self._check_writable(f"append {len(rows)} events")
        with self._session(), self._transaction(f"append {len(rows)} events"):
            seqs = self._insert_events(rows)
        self._seq = seqs[-1]
        return seqs

    def _event_rows(self, plan_id, apply_id):
        where, params = _where(plan_id=plan_id, apply_id=apply_id)
        with self._session():
            rows = self._con.execute(
                "SELECT event_type, schema_version, plan_id, apply_id, payload, recorded_ms, seq FROM events"
                f"{where} ORDER BY seq", params).fetchall()
        return [StoredEvent(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows]

    # -- file records ------------------------------------------------------------------------------

    def _insert_files(self, records):
        self._check_writable(f"record {len(records)} file outcomes")
        seqs = self._next(len(records))
        rows = [rules.file_row(s, r) for s, r in zip(seqs, records)]
        with self._session(), self._transaction(f"record {len(records)} file outcomes"):
            self._insert_rows("file_records", rows)
        self._seq = seqs[-1]
        return seqs

    def _insert_file_table(self, table):
        self._check_writable(f"record {table.num_rows} file outcomes")
        seqs = self._next(table.num_rows)
        batch = table.add_column(0, rules.FILES_SCHEMA.field("seq"), pa.array(seqs, pa.int64()))
        with self._session(), self._transaction(f"record {table.num_rows} file outcomes"):
            self._insert_arrow("file_records", batch)
        self._seq = seqs[-1]
        return seqs

    def _insert_arrow(self, table_name: str, batch: pa.Table) -> None:
        self._con.register("_lakesweep_batch", batch)
        try:
            self._con.execute(f"INSERT INTO {table_name} SELECT * FROM _lakesweep_batch")
        finally:
            self._con.unregister("_lakesweep_batch")

    def _insert_rows(self, table_name: str, rows: list[tuple]) -> None:
        schema = rules.RELATIONS[table_name]
        if not rows:
            return
        if len(rows) <= _SMALL_BATCH:  # one multi-row VALUES statement: cheapest for the driver's small batches
            values = ", ".join(["(" + ", ".join("?" * len(schema)) + ")"] * len(rows))
            self._con.execute(f"INSERT INTO {table_name} VALUES {values}", [v for r in rows for v in r])
            return
        self._insert_arrow(table_name, rules.arrow_table(schema, rows))

    def _file_records(self, plan_id, apply_id):
        where, params = _where(plan_id=plan_id, apply_id=apply_id)
        with self._session():
            rows = self._con.execute(
                "SELECT apply_id, plan_id, action_id, path, kind, phase, bytes, outcome, error, attempt, time_ms, "
                "moved_to "
                f"FROM file_records{where} ORDER BY seq", params).fetchall()
        return [FileRecord(*r) for r in rows]

    def _select(self, sql, params):
        with self._session():
            return self._con.execute(sql, list(params)).fetchall()

    def export_file_audit(self, out_path: str | os.PathLike) -> int:
        """Write the ``file_audit`` view (every file record, joined) as Parquet; returns the row count."""
        with self._session():
            return copy_to_parquet(self._con, "SELECT * FROM file_audit ORDER BY seq", out_path)


def _make_parent(path: str | os.PathLike, what: str) -> None:
    """Create the directory ``path`` goes in; ``JournalError`` naming what is in the way otherwise."""
    parent = Path(path).parent
    in_the_way = next((p for p in (parent, *parent.parents) if p.exists() and not p.is_dir()), None)
    if in_the_way is not None:
        raise JournalError(f"cannot create the {what} {path}: {in_the_way} is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise JournalError(f"cannot create the directory of the {what} {path}: {e.strerror or e}") from e


def copy_to_parquet(con: duckdb.DuckDBPyConnection, select: str, out_path: str | os.PathLike) -> int:
    """Write a query's rows to a Parquet file; returns the row count. Failures raise ``JournalError``."""
    out = Path(out_path)
    if os.path.lexists(out) and not out.is_file():
        raise JournalError(f"cannot write the export {out}: it exists and is not a regular file")
    _make_parent(out, "export")
    literal = str(out).replace("'", "''")
    try:
        return con.execute(f"COPY ({select}) TO '{literal}' (FORMAT PARQUET)").fetchone()[0]  # COPY returns its count
    except duckdb.Error as e:
        raise JournalError(f"cannot write the export {out}: {e}") from e


def _where(**filters) -> tuple[str, list]:
    given = [(k, v) for k, v in filters.items() if v is not None]
    if not given:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k, _ in given), [v for _, v in given]


class _Transaction:
    """One DuckDB transaction: commit on success, roll back and raise ``JournalError`` on a database error."""

    def __init__(self, recorder: DuckDBRecorder, what: str):
        self.recorder, self.what = recorder, what

    def __enter__(self):
        self.recorder._check_open()
        try:
            self.recorder._con.begin()
        except duckdb.Error as e:
            raise self._error(e) from e
        return self

    def __exit__(self, exc_type, exc, tb):
        con = self.recorder._con
        if exc_type is None:
            try:
                con.commit()
                return False
            except duckdb.Error as e:
                self._rollback(con)
                raise self._error(e) from e
        self._rollback(con)
        if isinstance(exc, duckdb.Error):
            raise self._error(exc) from exc
        return False

    def _error(self, e: duckdb.Error) -> JournalError:
        return JournalError(f"journal {self.recorder.path}: could not {self.what}: {e}")

    @staticmethod
    def _rollback(con) -> None:
        # After an I/O failure DuckDB may have invalidated the database, and the rollback fails too. The
        # first error is the one to report; nothing was committed either way.
        try:
            con.rollback()
        except duckdb.Error:
            pass
