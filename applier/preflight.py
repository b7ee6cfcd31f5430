"""Before a file is touched: one Spark task checks that the executors can run lakesweep's tasks.

Executors run Python workers with the interpreter Spark was told to use (``spark.pyspark.python``,
``PYSPARK_PYTHON``, else ``python3`` on their ``PATH``). Without a check, an executor whose Python lacks
pyarrow or lakesweep fails the first bulk phase with a ``ModuleNotFoundError`` buried in a Java stack
trace. The preflight imports, on an executor, every module lakesweep's tasks need and compares what it
finds with the driver: the same lakesweep code, the same pyarrow, the same Python minor version. Any
difference is an ``ExecutorEnvironmentError`` naming what is missing and how to provide it.
"""

from __future__ import annotations

import functools
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from lakesweep.engine.errors import ExecutorEnvironmentError

from lakesweep.applier.spark_exec import PythonChoice

# What a task of applier/spark_exec.py imports on an executor when it unpickles its function and the FileIO.
EXECUTOR_MODULES = (
    "pyarrow",
    "pyarrow.fs",
    "lakesweep.engine.errors",
    "lakesweep.engine.plan",
    "lakesweep.engine.fileio",
    "lakesweep.engine.paimon.kinds",  # the action kinds tasks get (applier.spark_exec.kinds_of)
    "lakesweep.engine.iceberg.kinds",
    "lakesweep.journal.events",
    "lakesweep.applier.actions",
    "lakesweep.applier.spark_exec",
    "lakesweep.applier.listing",  # plan orphans --spark: its tasks list directories
)
LAKESWEEP_PACKAGES = ("lakesweep",)  # the modules whose source the fingerprint hashes
DEFAULT_TIMEOUT_S = 300.0

HOW_TO_PROVIDE = (
    "Give the executors a Python that has lakesweep and its dependencies, with one of:\n"
    "  --conf spark.pyspark.python=/path/to/python\n"
    "    (an interpreter with lakesweep installed, at that path on every executor host);\n"
    "  --conf spark.archives=lakesweep-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python\n"
    "    (a conda or venv environment with lakesweep installed, packed with conda-pack or venv-pack);\n"
    "  --conf spark.submit.pyFiles=lakesweep.zip\n"
    "    (spark-submit's --py-files: lakesweep's own packages, when the executors' Python already has\n"
    "    pyarrow and lakesweep's other dependencies).\n"
    "Then check with 'lakesweep doctor' and the same --master and --conf options."
)


def _make_probe():
    def probe(modules, packages):
        # Runs on an executor. It is pickled by value (a nested function), so it deserializes and runs
        # even where lakesweep itself cannot be imported; it imports only the standard library up front.
        import hashlib
        import importlib
        import importlib.metadata
        import importlib.util
        import platform
        import socket
        import sys

        missing = []
        digest = hashlib.sha256()
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as e:  # a finding to report, with its type and text
                missing.append([name, f"{type(e).__name__}: {e}"])
                continue
            if name.split(".")[0] in packages:
                spec = importlib.util.find_spec(name)
                source = spec.loader.get_source(name) if spec is not None and spec.loader is not None else None
                digest.update(f"{name}\0{source or ''}\0".encode())
        try:
            dist_version = importlib.metadata.version("lakesweep")
        except importlib.metadata.PackageNotFoundError:
            dist_version = None
        pyarrow = sys.modules.get("pyarrow")
        return {
            "host": socket.gethostname(),
            "python": sys.executable,
            "python_version": platform.python_version(),
            "lakesweep": dist_version,
            "pyarrow": getattr(pyarrow, "__version__", None),
            "fingerprint": digest.hexdigest(),
            "missing": missing,
        }

    return probe


_probe = _make_probe()


@dataclass(frozen=True, slots=True)
class PythonEnvironment:
    """What one Python process can import: the driver's, or an executor's as the probe saw it.

    ``fingerprint`` hashes the source of lakesweep's executor-side modules, so two installs of the same
    version number with different code still differ; ``missing`` lists ``(module, error)`` pairs."""

    host: str
    python: str
    python_version: str
    lakesweep: str | None
    pyarrow: str | None
    fingerprint: str
    missing: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_probe(cls, found: Mapping[str, Any]) -> "PythonEnvironment":
        return cls(found["host"], found["python"], found["python_version"], found["lakesweep"], found["pyarrow"],
                   found["fingerprint"], tuple((m, e) for m, e in found["missing"]))

    @property
    def python_minor(self) -> str:
        return ".".join(self.python_version.split(".")[:2])


@dataclass(frozen=True, slots=True)
class PreflightReport:
    """A passed preflight: the master, the interpreter the executors were told to run, both environments."""

    master: str
    python_exec: str
    python_source: str
    driver: PythonEnvironment
    executor: PythonEnvironment
    duration_ms: int


@functools.lru_cache(maxsize=1)
def driver_environment() -> PythonEnvironment:
    """This process, probed exactly as an executor is."""
    return PythonEnvironment.from_probe(_probe(EXECUTOR_MODULES, LAKESWEEP_PACKAGES))


def check_executors(sc, *, master: str | None = None, choice: PythonChoice | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> PreflightReport:
    """Run one task on the executors; return what it found, or raise ``ExecutorEnvironmentError``.

    Refused when the task cannot run (no interpreter, a Python Spark refuses, no executor within
    ``timeout_s``), when a module lakesweep's tasks import is missing, or when the executors run other
    lakesweep code, another pyarrow or another Python minor version than the driver."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    master = master or sc.master
    told = sc.pythonExec
    if choice is None:
        source = "the running SparkContext"
    elif choice.python == told or (choice.python is None and told == "python3"):
        source = choice.source
    else:
        source = "a SparkContext that was already running"
    where = f"(master {master}; executors' Python '{told}', from {source})"
    driver = driver_environment()
    modules, packages, probe = EXECUTOR_MODULES, LAKESWEEP_PACKAGES, _probe

    group = f"lakesweep-preflight-{uuid.uuid4().hex[:12]}"
    timed_out = threading.Event()

    def cancel():
        timed_out.set()
        sc.cancelJobGroup(group)

    timer = threading.Timer(timeout_s, cancel)
    timer.daemon = True
    started = time.monotonic()
    # The executors' own failure is reported below in one line; Spark's ERROR logs of it would repeat
    # it as Java stack traces on stderr.
    sc.setLogLevel("OFF")
    sc.setJobGroup(group, "lakesweep: preflight (can the executors run lakesweep's tasks?)", interruptOnCancel=True)
    try:
        timer.start()
        found = sc.parallelize([0], 1).mapPartitions(lambda _: [probe(modules, packages)]).collect()
    except (Py4JError, PySparkException) as e:
        if timed_out.is_set():
            raise ExecutorEnvironmentError(
                f"no Spark executor ran lakesweep's preflight task within {timeout_s:.0f} s {where}: the "
                "cluster has no free executor, or the master is unreachable. Check the master and the "
                "cluster's free cores and memory (spark.executor.memory, spark.cores.max)."
            ) from e
        raise ExecutorEnvironmentError(
            f"the Spark executors cannot run a Python task {where}: {task_failure(e)}\n{HOW_TO_PROVIDE}"
        ) from e
    finally:
        timer.cancel()
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)
        sc.setLogLevel("ERROR")
    executor = PythonEnvironment.from_probe(found[0])
    problems = differences(driver, executor)
    if problems:
        raise ExecutorEnvironmentError(
            f"the Spark executors cannot run lakesweep's tasks {where}: on {executor.host}, "
            f"{executor.python} (Python {executor.python_version}) " + "; ".join(problems) + f".\n{HOW_TO_PROVIDE}"
        )
    return PreflightReport(master, told, source, driver, executor, int((time.monotonic() - started) * 1000))


def differences(driver: PythonEnvironment, executor: PythonEnvironment) -> list[str]:
    """Why ``executor`` cannot run the driver's tasks, one phrase per problem (empty: it can)."""
    if executor.missing:
        by_error: dict[str, list[str]] = {}
        for module, error in executor.missing:
            by_error.setdefault(error, []).append(module)
        return [f"cannot import {', '.join(mods)} ({error})" for error, mods in by_error.items()]
    problems = []
    if executor.python_minor != driver.python_minor:
        problems.append(f"is Python {executor.python_minor}, the driver Python {driver.python_minor}")
    if executor.pyarrow != driver.pyarrow:
        problems.append(f"has pyarrow {executor.pyarrow}, the driver pyarrow {driver.pyarrow}")
    if executor.fingerprint != driver.fingerprint:
        problems.append(
            f"has other lakesweep code (version {executor.lakesweep or 'unknown'}, fingerprint "
            f"{executor.fingerprint[:12]}) than the driver (version {driver.lakesweep or 'unknown'}, "
            f"fingerprint {driver.fingerprint[:12]})"
        )
    return problems


_LOST_TASK = re.compile(r"most recent failure: Lost task .*?\(TID \d+\) \([^)]*\): ")


def task_failure(e: BaseException) -> str:
    """The executor-side cause of a failed Spark job, in one line: the Python exception's last line, or
    the Java exception's first line, without the stack traces around it."""
    text = str(e)
    m = _LOST_TASK.search(text)
    body = text[m.end():] if m else text
    lines = body.splitlines()
    if body.startswith("org.apache.spark.api.python.PythonException"):
        # A Python traceback: indented frames, then the exception's own unindented lines, then Java frames.
        exception: list[str] = []
        for line in lines[1:]:
            if line.startswith("\tat "):
                break
            if line.startswith(" "):
                exception = []
            elif line.strip():
                exception.append(line.strip())
        if exception:
            return re.sub(r"^(?:\w+\.)+(?=\w+:)", "", " ".join(exception))
    for line in lines:
        line = line.strip().lstrip(": ").strip()
        if line and not line.startswith("An error occurred while calling"):
            return line
    return type(e).__name__
