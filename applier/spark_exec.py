"""Running bulk phases as Spark tasks: FileIO on the executors, results streamed back per batch.

The driver parallelizes compact action rows, each task executes its actions (with retries) and yields
its results in batches; the driver consumes them with ``toLocalIterator`` so it never holds more than
a few batches, and journals each batch as it arrives.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import re
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected, SparkUnavailable, StorageError
from lakesweep.engine.fileio import DeleteOutcome, FileIO, MoveOutcome, on_local_disk
from lakesweep.engine.paths import PathResolver, refuse_symlinked_parents, resolve_action_path, target_of
from lakesweep.engine.plan import Action, Verb
from lakesweep.engine.plan_columns import ColumnActions
from lakesweep.engine.quarantine import QuarantineSpec
from lakesweep.engine.s3_bulk import DEFAULT_DELETE_BATCH

from lakesweep.applier.actions import ActionResult, Outcome, execute_with_retry
from lakesweep.applier.class_archive import DRIVER_OPTIONS, WRITE_WAIT_S, ClassArchive, class_archive, user_options

DEFAULT_BATCH = 500
DEFAULT_THREADS = 8  # per task: deletes wait on storage, so a task keeps several in flight
TASKS_IN_FLIGHT = 2  # toLocalIterator runs one partition at a time and prefetches the next
LOCAL_UNLINK_THREADS = 4  # per task, on this machine's own disks (``execute_rows``)
ROW_CHUNKS = 8  # the task rows go to the JVM in this many lists (task_rows)
THROTTLED = -1  # the action id of a result row that reports throttling: (-1, "THROTTLED", slowdowns, rate, ms, None)
_DELETE_FILE = Verb.DELETE_FILE.value
LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


SPARK_UI = {"spark.ui.enabled": "true"}  # what --spark-ui adds to the session's configuration


LOOPBACK_DRIVER = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def session_conf(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The configuration ``spark_session`` starts a session with: lakesweep's defaults (no UI, the
    executors' Python, a quiet log, and for a local master only, a driver bound to loopback), each
    overridden by ``conf``."""
    conf = dict(conf or {})
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.python.worker.reuse": "true",
        # The driver JVM schedules tasks and relays rows; it runs briefly and does little computing, so
        # it starts faster (about 0.8 s here) on the client JIT and the serial collector.
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J} -XX:TieredStopAtLevel=1 "
                                         "-XX:+UseSerialGC",
    }
    if is_local_master(master):
        # The executors live in this process: nothing needs to reach the driver from another host. A
        # cluster's executors do, so there Spark's own choice (or the user's --conf) stands.
        defaults.update(LOOPBACK_DRIVER)
    if os.environ.get("PYTHONPATH"):
        defaults["spark.executorEnv.PYTHONPATH"] = os.environ["PYTHONPATH"]
    choice = executor_python(master, conf)
    if choice.python is not None:
        defaults["spark.pyspark.python"] = choice.python
    if not conf.get("spark.pyspark.driver.python") and not os.environ.get("PYSPARK_DRIVER_PYTHON"):
        defaults["spark.pyspark.driver.python"] = sys.executable
    return {**defaults, **conf}


def spark_context(master: str = "local[*]", conf: dict[str, str] | None = None, *, preflight: bool = True,
                  on_ui: Callable[[str], None] | None = None, write_class_archive: bool = False):
    """A SparkContext for applying plans (quiet: no UI unless ``conf`` enables it, warnings only): the
    running one when this process has one, else one started here. Apply runs RDD tasks only, so it starts
    no SparkSession, which would take seconds more (``spark_session`` adds one). When the context has a UI,
    ``on_ui`` is given its URL as soon as it is up.

    The executors' Python is chosen as Spark documents it (``spark.pyspark.python``, then
    ``PYSPARK_PYTHON``); when neither is set and the master runs on this machine, it is this very
    interpreter, so the workers import the same lakesweep, pyarrow and Python as the driver. Unless
    ``preflight`` is false, one task then checks that the executors can run lakesweep's tasks
    (``applier.preflight.check_executors``) and the context is refused, and stopped if it was started
    here, with ``ExecutorEnvironmentError`` when they cannot.

    A JVM started here maps the driver's class archive (``applier.class_archive``) when there is one; with
    ``write_class_archive`` and none there, it writes one as it exits, which the caller then keeps by
    stopping the context with ``stop_context``.
    """
    from pyspark import SparkConf, SparkContext

    conf = dict(conf or {})
    if is_local_master(master):
        # Bind to loopback: Spark otherwise picks the first non-loopback interface for a local session.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    created = SparkContext._active_spark_context is None
    if created:
        check_master_reachable(master)
    choice = executor_python(master, conf)
    settings = session_conf(master, conf)
    # A driver started as a plain Python process (not through spark-submit) takes the workers'
    # interpreter from PYSPARK_PYTHON alone, read once when the SparkContext is made
    # (pyspark/core/context.py); spark.pyspark.python only reaches it through spark-submit. So the
    # choice above is handed over in the environment, for this call only.
    with _environment(PYSPARK_PYTHON=choice.python):
        if created and SparkContext._gateway is None:
            _start_jvm(master, settings, options_given=user_options(conf),
                       write_archive=write_class_archive)
        else:
            # the running context, or (its gateway left from a stopped one) a new context on that JVM
            SparkContext.getOrCreate(SparkConf().setMaster(master).setAppName("lakesweep-apply")
                                     .setAll(settings.items()))
        sc = SparkContext._active_spark_context
    sc.setLogLevel("ERROR")
    forward_credentials(sc)
    if on_ui is not None and sc.uiWebUrl:
        on_ui(sc.uiWebUrl)
    if preflight:
        from lakesweep.applier.preflight import check_executors

        try:
            check_executors(sc, master=master, choice=choice)
        except BaseException:
            if created:
                stop_context(sc)
            raise
    return sc


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None, *, preflight: bool = True,
                  on_ui: Callable[[str], None] | None = None):
    """A SparkSession on ``spark_context(master, conf)``, for what runs DataFrame jobs (planning on Spark,
    the tests' shared session); the executor preflight runs before the session is made."""
    from pyspark.sql import SparkSession

    spark_context(master, conf, preflight=preflight, on_ui=on_ui)
    builder = SparkSession.builder.appName("lakesweep-apply").master(master)
    for k, v in session_conf(master, conf).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


# What the JVM prints on stderr whenever Spark starts, whatever its log configuration: the module system's
# notice (Spark 4 adds jdk.incubator.vector) and Spark's hints about its default log level. Not for users.
SPARK_START_NOISE = (
    b"WARNING: Using incubator modules",
    b'Setting default log level to "WARN"',
    b"To adjust logging level use sc.setLogLevel",
    b"Using Spark's default log4j profile",
)


def is_start_noise(line: bytes) -> bool:
    return any(line.lstrip().startswith(n) for n in SPARK_START_NOISE)


def _forward_stderr(stream, sink=None) -> None:
    """Copy the Spark JVM's stderr to ours, line by line, without its start-up notices (errors pass); the
    pipe is closed at its end, when the JVM exits, so no open file is left for the collector to find."""
    sink = sink or (lambda line: (os.write(2, line)))
    with stream:
        for line in iter(stream.readline, b""):
            if not is_start_noise(line):
                sink(line)


_WRITING: ClassArchive | None = None  # the class archive this process's JVM writes as it exits (stop_context)


def _start_jvm(master: str, settings: Mapping[str, str], *, options_given: bool, write_archive: bool) -> None:
    """``_start_quiet_context`` with the driver's class archive (``applier.class_archive``) mapped, or
    written at exit, unless the user gave the JVM's options. A JVM that exits before it answers while
    mapping an archive is started again without it, and the archive deleted. A start that fails while its
    JVM was to write one (a bad ``--conf``) ends that JVM before raising, keeping what it wrote: no partial
    archive is left to be written after lakesweep exits."""
    global _WRITING
    archive = None if options_given else class_archive(write=write_archive)
    if archive is None:
        _start_quiet_context(master, settings)
        return
    options = settings.get(DRIVER_OPTIONS, "")
    try:
        _start_quiet_context(master, {**settings, DRIVER_OPTIONS: f"{options} {archive.java_options()}"})
    except Exception as e:  # noqa: BLE001  (pyspark raises its own types; only the JVM's early exit is retried)
        if archive.write is not None:
            _end_writing_jvm(archive)
            raise
        if "JAVA_GATEWAY_EXITED" not in str(e):
            raise
        archive.discard()
        _start_quiet_context(master, settings)
        return
    _WRITING = archive if archive.write is not None else None


def stop_context(sc) -> None:
    """``sc.stop()``; when this process's JVM writes the driver's class archive as it exits, the JVM is told
    to exit now (its stdin closed, as when Python exits) and waited for, and the archive it wrote kept."""
    global _WRITING
    sc.stop()
    archive, _WRITING = _WRITING, None
    if archive is not None:
        _end_writing_jvm(archive)


def _end_writing_jvm(archive: ClassArchive) -> None:
    """The JVM that writes ``archive`` as it exits (if one was started): told to exit (its stdin closed) and
    waited for; then the archive kept if written whole (``ClassArchive.finish``), its partial file removed
    if not. The next context starts a JVM of its own."""
    import subprocess

    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    code = None
    if proc is not None:
        try:
            proc.stdin.close()
            code = proc.wait(timeout=WRITE_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        SparkContext._gateway = SparkContext._jvm = None
    archive.finish(code)


def _start_quiet_context(master: str, conf: Mapping[str, str]) -> None:
    """Start the Spark JVM (once per process) with its stderr piped through ``_forward_stderr``, and the
    SparkContext on it, configured as the session builder would."""
    import subprocess
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName("lakesweep-apply")
    for k, v in conf.items():
        spark_conf.set(k, v)
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_forward_stderr, args=(gateway.proc.stderr,), name="spark-stderr", daemon=True).start()
    SparkContext(conf=spark_conf, gateway=gateway)


@dataclass(frozen=True, slots=True)
class PythonChoice:
    """The interpreter the executors are told to run (``None``: Spark's default, ``python3`` on their
    ``PATH``) and where that choice came from, for messages."""

    python: str | None
    source: str


_LOCAL_MASTER = re.compile(r"local(\[\s*(\*|\d+)\s*(,\s*\d+\s*)?\])?|local-cluster\[[^\]]*\]")


def executor_python(master: str, conf: Mapping[str, str], env: Mapping[str, str] | None = None) -> PythonChoice:
    """Spark's precedence (``spark.pyspark.python``, then ``PYSPARK_PYTHON``), then this interpreter
    when the master runs on this machine: a local master, or a standalone master whose hosts are all
    this machine's own names or addresses."""
    env = os.environ if env is None else env
    if conf.get("spark.pyspark.python"):
        return PythonChoice(conf["spark.pyspark.python"], "--conf spark.pyspark.python")
    if env.get("PYSPARK_PYTHON"):
        return PythonChoice(env["PYSPARK_PYTHON"], "PYSPARK_PYTHON")
    if master_on_this_machine(master):
        return PythonChoice(sys.executable, "lakesweep's own interpreter (the master runs on this machine)")
    return PythonChoice(None, "Spark's default: python3 on the executors' PATH")


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[N,F]``, ``local[*]`` or ``local-cluster[...]``: executors on this machine,
    started by this driver."""
    return _LOCAL_MASTER.fullmatch(master.strip()) is not None


def standalone_masters(master: str) -> list[tuple[str, int]]:
    """The (host, port) of each master of a ``spark://host[:port][,host[:port]...]`` URL (port 7077 when
    none is given; ``[v6]:port`` accepted); ``[]`` for any other master."""
    m = master.strip()
    if not m.startswith("spark://"):
        return []
    found = []
    for hostport in m[len("spark://"):].split(","):
        hostport = hostport.strip()
        if hostport.startswith("["):
            host, _, rest = hostport[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port = hostport.partition(":") if hostport.count(":") == 1 else (hostport, "", "")
        found.append((host, int(port) if port.isdigit() else 7077))
    return found


MASTER_CONNECT_TIMEOUT_S = 3.0


def check_master_reachable(master: str, *, timeout: float = MASTER_CONNECT_TIMEOUT_S, consequence: str = "") -> None:
    """For a standalone master, that at least one of its masters accepts a TCP connection within
    ``timeout`` seconds each; ``SparkUnavailable`` naming every master and why it did not answer
    otherwise. Spark itself gives up on an unreachable master only after its registration retries
    (about 80 s) and then reports a stopped SparkContext. Other masters are not checked."""
    masters = standalone_masters(master)
    failures = []
    for host, port in masters:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except socket.timeout:
            failures.append(f"{host}:{port} did not answer within {timeout:g} s")
        except OSError as e:
            failures.append(f"{host}:{port}: {e.strerror or type(e).__name__}")
    if failures:
        tail = f"; {consequence}" if consequence else ""
        raise SparkUnavailable(f"Spark master {master} cannot be reached ({'; '.join(failures)}). Check --master "
                               f"and that the master is running{tail}.")


# What the executors need to find S3 credentials the way the driver does (engine.fileio): handed to executors on
# this machine through Spark's executor environment, never through the plan or the pickled FileIO.
CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                  "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")


def forward_credentials(sc, env: Mapping[str, str] | None = None) -> None:
    """When ``sc``'s master runs on this machine, make the executors' environment carry this process's AWS
    credential variables as they are now (one unset here is no longer handed over), through the SparkContext's
    executor environment, which each Python task takes along in memory; it is not in the Spark
    configuration, so it reaches no event log. A variable the user set with ``--conf spark.executorEnv.X``
    is left as given. A remote cluster's executors use their own environment (docs/cluster.md)."""
    if not master_on_this_machine(sc.master):
        return
    env = os.environ if env is None else env
    conf = sc.getConf()
    for name in CREDENTIAL_ENV:
        if conf.contains(f"spark.executorEnv.{name}"):
            continue
        if env.get(name):
            sc.environment[name] = env[name]
        else:
            sc.environment.pop(name, None)


def master_on_this_machine(master: str) -> bool:
    """``local``, ``local[N]``, ``local[N,F]``, ``local[*]``, ``local-cluster[...]``, or
    ``spark://host:port[,host:port...]`` whose every host is this machine."""
    m = master.strip()
    if _LOCAL_MASTER.fullmatch(m):
        return True
    if not m.startswith("spark://"):
        return False
    hosts = []
    for hostport in m[len("spark://"):].split(","):
        host = hostport.rsplit(":", 1)[0] if ":" in hostport else hostport
        hosts.append(host.strip().strip("[]"))
    return bool(hosts) and all(_is_this_host(h) for h in hosts)


def _is_this_host(host: str) -> bool:
    """Whether every address ``host`` resolves to can be bound here, i.e. belongs to this machine."""
    if not host:
        return False
    if host.lower() == "localhost" or host == socket.gethostname():
        return True
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return False
    addresses = {(family, sockaddr[0]) for family, _, _, _, sockaddr in infos}
    for family, address in addresses:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((address, 0))
        except OSError:
            return False
    return bool(addresses)


@contextlib.contextmanager
def _environment(**values: str | None):
    """Set the non-None ``values`` in ``os.environ`` for the duration of the block, then restore."""
    saved = {k: os.environ.get(k) for k, v in values.items() if v is not None}
    try:
        for k in saved:
            os.environ[k] = values[k]
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def task_row(a: Action) -> tuple:
    """What a task needs of an action, as a compact tuple (the driver ships these, not ``Action``s)."""
    return (a.action_id, str(a.kind), a.path, a.snapshot_id, a.source, a.verb.value, a.phase)


def task_rows_of(actions: Sequence[Action]) -> list[tuple]:
    """``task_row`` of each action, the labels of its few kinds and verbs looked up rather than made a million
    times."""
    if isinstance(actions, ColumnActions):  # the stored columns are the rows' values
        return actions.rows("action_id", "kind", "path", "snapshot_id", "source", "verb", "phase")
    labels = {kind: str(kind) for kind in {a.kind for a in actions}}
    verbs = {verb: verb.value for verb in {a.verb for a in actions}}
    return [(a.action_id, labels[a.kind], a.path, a.snapshot_id, a.source, verbs[a.verb], a.phase) for a in actions]


def kinds_of(actions: Sequence[Action]) -> dict[str, object]:
    """The action kinds ``actions`` use, by label: shipped with the tasks, so that a task rebuilds each
    action with its own format's kind (a kind may act after a write) and knows no format's table."""
    if isinstance(actions, ColumnActions):
        return actions.kinds_used()
    return {str(a.kind): a.kind for a in actions}


def _action(row: tuple, kinds: Mapping[str, object]) -> Action:
    action_id, kind, path, snapshot_id, source, verb, phase = row
    return Action(kinds.get(kind, kind), path, snapshot_id=snapshot_id, source=source, action_id=action_id,
                  verb=Verb(verb), phase=phase)


def execute_rows(
    rows: Iterator[tuple], fileio: FileIO, root: str, external: Sequence[str], dry_run: bool, batch: int,
    threads: int = 1, kinds: Mapping[str, object] | None = None, budget=None,
    quarantine: QuarantineSpec | None = None,
) -> Iterator[list[tuple]]:
    """Executor side: run each action and yield result batches ``[(action_id, outcome, attempts, error, ms,
    moved_to)]``. ``kinds``: the actions' kinds by label (``kinds_of``); ``budget``: this task's share of the
    apply's ``RequestBudget`` (its pace, its concurrency and the DeleteObjects batch size); ``quarantine``:
    files to delete are put aside as it says (``applier.actions.quarantine_action``), not deleted.

    With ``threads`` > 1 the actions of a batch run on that many threads: the actions of a bulk phase
    are independent of one another, and a delete spends its time waiting on storage (a network file
    system, a request to an object store), not holding the interpreter. Local deletes on the machine's own
    disks (``on_local_disk``) wait only while the file system frees a file's blocks: they run on at most
    ``LOCAL_UNLINK_THREADS``, since more threads only contend for the interpreter. On a store
    with bulk deletes (S3), the batch's file deletes go to ``FileIO.delete_batch`` in DeleteObjects-sized
    parts, and the parts of the next batches are started while this one's are answered (up to ``threads``
    parts in flight). A batch is yielded when all its actions are done, so what is journaled is what was
    done; when the store throttled the batch, the batch ends with a ``THROTTLED`` row
    (``results_and_throttling``). A quarantine goes through the bulk path only on a store whose FileIO has
    ``quarantine_batch`` (``submit_bulk``); elsewhere each file is moved on its own.
    """

    if budget is not None and hasattr(fileio, "with_budget"):
        fileio = fileio.with_budget(budget)
        if budget.max_concurrency is not None:
            threads = max(1, min(threads, budget.max_concurrency))
    bulk = fileio.bulk_deletes and not dry_run and (quarantine is None or hasattr(fileio, "quarantine_batch"))
    checked: set[str] = set()  # directories found not to be symbolic links, in this batch

    def run(row: tuple, first_attempt: int = 1) -> tuple:
        action = _action(row, kinds or {})
        if dry_run:
            target = resolve_action_path(root, action.path, external)
            exists = fileio.exists(target)
            if quarantine is not None and action.verb is Verb.DELETE_FILE and exists:
                res = ActionResult(action.action_id, Outcome.QUARANTINED, 0,
                                   moved_to=quarantine.location(target, root, external))
            else:
                res = ActionResult(action.action_id, Outcome.DELETED if exists else Outcome.ALREADY_ABSENT, 0)
        else:
            res = execute_with_retry(fileio, root, action, external_roots=external, checked=checked,
                                     quarantine=quarantine, first_attempt=first_attempt)
        return (res.action_id, res.outcome.value, res.attempts, res.error, res.finished_ms, res.moved_to)

    def submit_bulk(chunk: list[tuple]) -> tuple:
        """Start the DeleteObjects batches of ``chunk``'s file deletes on the task's threads (a quarantine:
        put the batch's files aside now, ``quarantine_bulk``)."""
        done: dict[int, tuple] = {}
        targets: dict[int, str] = {}
        for row in chunk:
            if row[5] != Verb.DELETE_FILE.value:
                continue
            try:
                targets[row[0]] = target_of(fileio, root, row[2], external, checked)
            except PlanRejected as e:
                done[row[0]] = (row[0], Outcome.FAILED.value, 1, f"refused: {e}", _now_ms(), None)
            except (StorageError, OSError) as e:
                done[row[0]] = (row[0], Outcome.FAILED.value, 1, f"{type(e).__name__}: {e}", _now_ms(), None)
        if quarantine is not None:
            done.update(quarantine_bulk(targets))
            return chunk, done, {}, []
        unique = list(dict.fromkeys(targets.values()))
        parts = [unique[i:i + size] for i in range(0, len(unique), size)]
        futures = [pool.submit(fileio.delete_batch, part) for part in parts] if pool is not None else parts
        return chunk, done, targets, futures

    def finish_bulk(chunk: list[tuple], done: dict, targets: dict, futures: list) -> list[tuple]:
        outcomes: dict = {}
        for part in futures:
            outcomes.update(part.result() if pool is not None else fileio.delete_batch(part))
        now = _now_ms()
        for action_id, target in targets.items():
            outcome, attempts = outcomes[target]
            if isinstance(outcome, DeleteOutcome):
                value = Outcome.DELETED if outcome == DeleteOutcome.DELETED else Outcome.ALREADY_ABSENT
                done[action_id] = (action_id, value.value, attempts, None, now, None)
            else:
                done[action_id] = (action_id, Outcome.FAILED.value, attempts, f"{type(outcome).__name__}: {outcome}",
                                   now, None)
        rest = [row for row in chunk if row[0] not in done]
        for out in (pool.map(run, rest) if pool is not None else map(run, rest)):
            done[out[0]] = out
        return [done[row[0]] for row in chunk]

    def bulk_batches() -> Iterator[list[tuple]]:
        # The DeleteObjects batches (each after its LIST) of the next task batches go out while those of
        # this one are answered, up to the task's threads in flight: the store is never left waiting on a
        # batch's slowest request, its results, or the driver. A batch is still yielded only when done.
        window: collections.deque = collections.deque()
        in_flight = 0  # DeleteObjects batches submitted and not yet taken
        while True:
            ahead = pool is not None and quarantine is None  # a quarantine moves its batch at submit_bulk
            while (not window or (ahead and len(window) < threads and in_flight < threads)) and (
                    chunk := list(itertools.islice(rows, batch))):
                checked.clear()  # a directory is checked again in every batch: the window stays short
                window.append(submit_bulk(chunk))
                in_flight += len(window[-1][3])
            if not window:
                return
            head = window.popleft()
            in_flight -= len(head[3])
            yield finish_bulk(*head)

    def quarantine_bulk(targets: Mapping[int, str]) -> dict[int, tuple]:
        """The bulk path's quarantine (a store whose FileIO has ``quarantine_batch``): the batch's files put
        aside together. ``quarantine_batch([(path, dest), ...])`` answers ``{path: (MoveOutcome or the error,
        where, attempts)}``, as ``FileIO.quarantine`` answers for one file (an error: the file kept)."""
        pairs = [(t, quarantine.location(t, root, external)) for t in dict.fromkeys(targets.values())]
        answers = fileio.quarantine_batch(pairs)
        now = _now_ms()
        out: dict[int, tuple] = {}
        for action_id, target in targets.items():
            outcome, where, attempts = answers[target]
            if outcome == MoveOutcome.ABSENT:
                out[action_id] = (action_id, Outcome.ALREADY_ABSENT.value, attempts, None, now, None)
            elif isinstance(outcome, MoveOutcome):
                out[action_id] = (action_id, Outcome.QUARANTINED.value, attempts, None, now, where)
            else:
                out[action_id] = (action_id, Outcome.FAILED.value, attempts, f"{type(outcome).__name__}: {outcome}",
                                  now, None)
        return out

    rows = iter(rows)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lakesweep-action") if threads > 1 else None
    limiter = getattr(fileio, "limiter", None) if fileio.bulk_deletes else None
    own = getattr(fileio, "budget", None)
    size = own.delete_batch if own is not None else DEFAULT_DELETE_BATCH

    resolver = PathResolver(root, external)
    unlinks = not dry_run and quarantine is None and fileio.scheme == "file"
    # On this machine's own disks an unlink waits on the file system's journal only to free a file's blocks
    # (some 100 µs; a hard link's takes 5): a few threads halve that, more only contend for the interpreter.
    # A network or FUSE file system waits on its server: the task's threads.
    local = unlinks and on_local_disk([root, *external])
    unlink_threads = min(threads, LOCAL_UNLINK_THREADS) if local else threads

    def unlink_part(part: list[tuple]) -> list[tuple]:
        """Local file deletes, one system call each; a file that is neither deleted nor absent (an error,
        or a path refused) goes through ``run``, with its retries, and ends as it would have there."""
        out = []
        deleted, absent = Outcome.DELETED.value, Outcome.ALREADY_ABSENT.value
        for row in part:
            if row[5] != _DELETE_FILE:
                out.append(run(row))
                continue
            try:
                full = resolver.full(row[2])
                parent = full[:full.rfind("/")]
                if parent not in checked:
                    refuse_symlinked_parents(full, resolver.containing_root(full), checked)
            except (PlanRejected, StorageError, OSError):
                out.append(run(row))  # refused, or the check could not look: as run says, from its first attempt
                continue
            try:
                answer = fileio.delete(full)
            except (StorageError, OSError):
                out.append(run(row, first_attempt=2))  # this was the first attempt: run retries
                continue
            out.append((row[0], deleted if answer == DeleteOutcome.DELETED else absent, 1, None, _now_ms(), None))
        return out

    def plain_batches() -> Iterator[list[tuple]]:
        while chunk := list(itertools.islice(rows, batch)):
            checked.clear()  # a directory is checked again in every batch: the window stays short
            if unlinks:
                # A thread per slice of the batch, not per file: a local unlink takes microseconds, less
                # than handing it to a thread.
                step = -(-len(chunk) // unlink_threads)
                parts = [chunk[i:i + step] for i in range(0, len(chunk), step)]
                yield [r for part in (pool.map(unlink_part, parts) if pool is not None and len(parts) > 1 else
                                      map(unlink_part, parts)) for r in part]
            else:
                yield list(pool.map(run, chunk)) if pool is not None else [run(row) for row in chunk]

    try:
        for out in (bulk_batches() if bulk else plain_batches()):
            if limiter is not None:
                slowdowns, lowest = limiter.take_report()
                if slowdowns:
                    out.append((THROTTLED, "THROTTLED", slowdowns, repr(lowest), _now_ms(), None))
            yield out
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)  # a consumer that stops early: what has not started never starts


def _now_ms() -> int:
    return int(time.time() * 1000)


def results_and_throttling(batch: list[tuple]) -> tuple[list[tuple], list[tuple[int, float]]]:
    """A result batch from ``execute_rows`` as its result rows ``(action_id, outcome, attempts, error, ms,
    moved_to)`` and (slowdowns, lowest rate) reports (``THROTTLED`` rows, which end a batch)."""
    throttled = []
    while batch and batch[-1][0] == THROTTLED:
        _, _, slowdowns, rate, _, _ = batch[-1]
        throttled.append((slowdowns, float(rate)))
        batch = batch[:-1]
    return batch, throttled[::-1]


def tasks_for(n_actions: int, parallelism: int, budget=None) -> tuple[int, int]:
    """(partitions, tasks in flight) for ``n_actions``: ``--max-concurrency`` caps the partitions, and at
    most ``TASKS_IN_FLIGHT`` of them run at once (results stream back one partition at a time)."""
    slices = max(1, min(n_actions, parallelism * 4, (n_actions + 49) // 50))
    if budget is not None and budget.max_concurrency is not None:
        slices = min(slices, budget.max_concurrency)
    return slices, min(slices, TASKS_IN_FLIGHT, max(1, parallelism))


def run_on_spark(
    sc,
    fileio: FileIO,
    root: str,
    external: Sequence[str],
    actions: Sequence[Action],
    *,
    on_batch: Callable[[list[tuple]], None],
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
    threads: int = DEFAULT_THREADS,
    budget=None,
    on_throttled: Callable[[int, float], None] | None = None,
    quarantine: QuarantineSpec | None = None,
) -> None:
    """Execute ``actions`` as Spark tasks, calling ``on_batch`` on the driver for every result batch and
    ``on_throttled(slowdowns, lowest_rate)`` for every batch the store throttled. ``budget`` (the apply's
    ``RequestBudget``) is shared evenly by the tasks in flight (``tasks_for``); ``quarantine``: as in
    ``execute_rows``."""
    if not actions:
        return
    slices, in_flight = tasks_for(len(actions), sc.defaultParallelism, budget)
    share = None if budget is None else budget.share(in_flight)
    external = list(external)
    kinds = kinds_of(actions)
    forward_credentials(sc)

    def task(it):
        return execute_rows(it, fileio, root, external, dry_run, batch, threads, kinds, share, quarantine)

    sc.setJobGroup("lakesweep-apply", f"lakesweep: {len(actions)} actions of phase {actions[0].phase}")
    for result_batch in task_rows(sc, actions, slices).mapPartitions(task).toLocalIterator(prefetchPartitions=True):
        results, throttled = results_and_throttling(result_batch)
        for slowdowns, rate in throttled:
            if on_throttled is not None:
                on_throttled(slowdowns, rate)
        on_batch(results)


def task_rows(sc, actions: Sequence[Action], slices: int):
    """The actions' ``task_row``s as an RDD of ``slices`` partitions, in the actions' order. ``parallelize``
    copies a list to the JVM; the rows are made and handed over in ``ROW_CHUNKS`` lists, one after another,
    so the driver holds a few partitions' rows at a time, not a million tuples beside the plan's actions."""
    bounds = [len(actions) * i // slices for i in range(slices + 1)]
    per_chunk = -(-slices // ROW_CHUNKS)
    parts = [sc.parallelize(task_rows_of(actions[bounds[i]:bounds[min(i + per_chunk, slices)]]),
                            min(per_chunk, slices - i))
             for i in range(0, slices, per_chunk)]
    return parts[0] if len(parts) == 1 else sc.union(parts)


def guarded(fn: Callable, item) -> tuple[bool, object]:
    """Executor side of a merge task: (True, ``fn(item)``), or (False, the error) when it raises, so one
    failing task is reported as a failure instead of failing the whole Spark job."""
    try:
        return True, fn(item)
    except Exception as e:  # reported to the driver, which journals it FAILED with this text
        return False, f"{type(e).__name__}: {e}"


def map_on_spark(sc, fn: Callable, items: Sequence, *, on_result: Callable[[int, bool, object], None]) -> None:
    """``fn(item)`` for each item as its own Spark task; ``on_result(index, ok, value)`` on the driver as the
    results arrive (``guarded``)."""
    if not items:
        return
    forward_credentials(sc)

    def task(pair):
        index, item = pair
        return (index, *guarded(fn, item))

    def one(pair):
        sc.setJobGroup("lakesweep-apply", f"lakesweep: merge task {pair[0] + 1} of {len(items)}")
        return sc.parallelize([pair], 1).map(task).collect()[0]

    # One job per item, as many at once as Spark has task slots: results come back as each item finishes
    # (``toLocalIterator`` would run the items' partitions one after another, one slot busy at a time).
    slots = max(1, min(len(items), sc.defaultParallelism))
    pool = ThreadPoolExecutor(slots, thread_name_prefix="lakesweep-merge")
    try:
        futures = [pool.submit(one, pair) for pair in enumerate(items)]
        for future in as_completed(futures):
            on_result(*future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
