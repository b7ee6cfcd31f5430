"""Where bulk phases run: Spark tasks (``SparkExecutor``, what ``apply`` and ``resume`` use) or this process
(``DriverExecutor``, for tests and measurements), behind one ``BulkExecutor`` interface."""

from __future__ import annotations

import functools
import re
import threading
from typing import Callable, Protocol, Sequence

from lakesweep.engine.errors import LakesweepError, SparkUnavailable
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.plan import Action



# The master URLs Spark's own SparkSubmit accepts (local, local-cluster, standalone, YARN, Kubernetes).
_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]|"
                     r"spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*|yarn|k8s://\S+)$")


PYSPARK_MISSING = ("pyspark is not installed, and this runs on Spark: install it with  pip install "
                   "'lakesweep[spark]'  (plan, show, verify, inspect and journal work without it)")


def require_pyspark(consequence: str) -> None:
    """Refuse (``SparkUnavailable``) before anything is done when pyspark is not installed (it is the
    ``spark`` extra)."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        raise SparkUnavailable(f"{PYSPARK_MISSING}. {consequence[0].upper()}{consequence[1:]}.") from e


def start_session(master: str, conf: dict[str, str] | None, *, consequence: str,
                  on_ui: Callable[[str], None] | None = None):
    """``spark_session(master, conf)`` (for DataFrame jobs), refused as ``start_context`` says."""
    from lakesweep.applier.spark_exec import spark_session

    return _started(spark_session, master, conf, consequence=consequence, on_ui=on_ui)


def start_context(master: str, conf: dict[str, str] | None, *, consequence: str,
                  on_ui: Callable[[str], None] | None = None):
    """``spark_context(master, conf)``, what apply runs its tasks on; a master that is not a Spark master
    URL, a standalone master that does not answer (``check_master_reachable``: seconds, not Spark's 80), or
    a context that cannot start (py4j and pyspark raise many types: all mean "no Spark") raises
    ``SparkUnavailable`` with the first line of Spark's error and ``consequence`` (what was not done),
    instead of a Java stack trace."""
    from lakesweep.applier.spark_exec import spark_context

    return _started(functools.partial(spark_context, write_class_archive=True), master, conf,
                    consequence=consequence, on_ui=on_ui)


def _started(start: Callable, master: str, conf: dict[str, str] | None, *, consequence: str,
             on_ui: Callable[[str], None] | None):
    if not _MASTER.match(master):
        raise SparkUnavailable(f"{master!r} is not a Spark master URL: use local[*], local[N], spark://host:7077, "
                               f"yarn or k8s://https://host:port. {consequence[0].upper()}{consequence[1:]}.")
    require_pyspark(consequence)
    from lakesweep.applier.spark_exec import check_master_reachable

    check_master_reachable(master, consequence=consequence)
    try:
        return start(master, conf, on_ui=on_ui)
    except LakesweepError:
        raise
    except Exception as e:  # noqa: BLE001
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:400].rstrip(".")
        raise SparkUnavailable(f"Spark could not start with master {master!r}: {first}. Check --master and --conf; "
                               f"{consequence}.") from e


class PlanningSession:
    """The Spark session a plan is made on: started on first use (``get``, with the executor preflight) and
    stopped by ``stop`` unless it was already running in this process. ``consequence``: what was not done
    when it cannot start."""

    def __init__(self, master: str, conf: dict[str, str] | None, *,
                 consequence: str = "nothing was listed and no plan was written"):
        self.master, self.conf, self.consequence, self.spark, self.owned = master, conf, consequence, None, False

    def get(self):
        if self.spark is None:
            require_pyspark(self.consequence)
            from pyspark import SparkContext

            self.owned = SparkContext._active_spark_context is None
            self.spark = start_session(self.master, self.conf, consequence=self.consequence)
        return self.spark

    def stop(self) -> None:
        if self.owned and self.spark is not None:
            self.spark.stop()
        self.spark = None


class _SparkContext:
    """The SparkContext of one apply: that of the caller's session, or one started here on first use and
    stopped at the end.

    A context that cannot start raises ``SparkUnavailable`` (exit 1) with the first line of Spark's error
    instead of a Java stack trace.
    """

    def __init__(self, spark, master: str, conf: dict[str, str] | None, on_ui: Callable[[str], None] | None = None):
        """``spark``: the caller's SparkSession, or ``None``."""
        self.sc = None if spark is None else spark.sparkContext
        self.master, self.conf, self.owned, self.on_ui = master, conf, False, on_ui

    def get(self):
        if self.sc is None:
            require_pyspark("nothing was deleted and no apply was started")
            from pyspark import SparkContext

            self.owned = SparkContext._active_spark_context is None  # never stop someone else's context
            self.sc = start_context(self.master, self.conf, on_ui=self.on_ui,
                                    consequence="nothing was deleted and no apply was started")
        return self.sc

    def stop(self) -> None:
        if self.owned and self.sc is not None:
            from lakesweep.applier.spark_exec import stop_context

            stop_context(self.sc)
            self.sc = None


class BulkExecutor(Protocol):
    """Runs the actions of the bulk phases (data, changelog and metadata files) and hands their results
    back, in batches of rows ``(action_id, outcome, attempts, error, finished_ms, moved_to)``, to ``on_batch``
    on the driver. ``prepare`` may begin getting ready while the plan is
    checked (it must not fail); ``start`` is called before the apply is journaled as started, when bulk
    work remains, and raises if the executor cannot run; ``stop`` at the end, always."""

    def prepare(self) -> None: ...

    def start(self) -> None: ...

    def run(self, fileio: FileIO, root: str, external: Sequence[str], actions: Sequence[Action], *,
            on_batch: Callable[[list[tuple]], None], dry_run: bool = False,
            on_throttled: Callable[[int, float], None] | None = None, quarantine=None) -> None:
        """``on_throttled(slowdowns, lowest_rate)``: the store throttled a batch (``503 SlowDown``);
        ``quarantine`` (an ``engine.quarantine.QuarantineSpec``): files to delete are put aside as it says."""

    def map(self, fn: Callable, items: Sequence, *, on_result: Callable[[int, bool, object], None]) -> None:
        """Merge phases: ``fn(item)`` for each item, one task per item, in any order; ``on_result(index, ok,
        value)`` on the driver for each, ``value`` being what ``fn`` returned, or the error's text when it
        raised (``ok`` false). ``fn`` and the items must pickle."""

    def stop(self) -> None: ...


class SparkExecutor:
    """Bulk phases as Spark tasks (``applier.spark_exec.run_on_spark``): what ``apply`` and ``resume`` use."""

    def __init__(self, spark=None, master: str = "local[*]", conf: dict[str, str] | None = None,
                 on_ui: Callable[[str], None] | None = None, budget=None):
        """``on_ui``: given the Spark UI's URL when a session started here has one (``spark.ui.enabled``);
        ``budget``: the apply's ``RequestBudget``, shared by its tasks."""
        self.context = _SparkContext(spark, master, conf, on_ui)
        self.budget = budget
        self._starting: threading.Thread | None = None
        self._error: BaseException | None = None

    def prepare(self) -> None:
        """Start Spark on a thread while the driver checks the plan: the JVM boots in its own
        process, so the seconds it takes overlap the checks. An error is kept for ``start`` to raise."""
        if self._starting is not None or self.context.sc is not None:
            return
        require_pyspark("nothing was deleted and no apply was started")
        from pyspark import SparkContext

        if SparkContext._active_spark_context is not None:
            return  # this process runs Spark already: get() decides, in the caller's thread, whose it is

        def boot() -> None:
            try:
                self.context.get()
            except BaseException as e:  # raised again by start(), in the caller's thread
                self._error = e

        self._starting = threading.Thread(target=boot, name="lakesweep-spark-start", daemon=True)
        self._starting.start()

    def _joined(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None

    def start(self) -> None:
        self._joined()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        self.context.get()

    def run(self, fileio, root, external, actions, *, on_batch, dry_run=False, on_throttled=None,
            quarantine=None) -> None:
        from lakesweep.applier.spark_exec import run_on_spark

        run_on_spark(self.context.get(), fileio, root, external, actions, on_batch=on_batch, dry_run=dry_run,
                     budget=self.budget, on_throttled=on_throttled, quarantine=quarantine)

    def map(self, fn, items, *, on_result) -> None:
        from lakesweep.applier.spark_exec import map_on_spark

        map_on_spark(self.context.get(), fn, items, on_result=on_result)

    def stop(self) -> None:
        self._joined()
        self.context.stop()


class DriverExecutor:
    """Bulk phases in this process, one action after another, through the very code a Spark task runs
    (``applier.spark_exec.execute_rows``, rows encoded as they are for Spark). For tests and measurements:
    no Spark session, no parallelism."""

    def __init__(self, batch: int | None = None, budget=None):
        self.batch = batch
        self.budget = budget

    def prepare(self) -> None:
        pass

    def start(self) -> None:
        pass

    def run(self, fileio, root, external, actions, *, on_batch, dry_run=False, on_throttled=None,
            quarantine=None) -> None:
        from lakesweep.applier.spark_exec import DEFAULT_BATCH, execute_rows, kinds_of, results_and_throttling, task_row

        for rows in execute_rows(map(task_row, actions), fileio, root, list(external), dry_run,
                                 self.batch or DEFAULT_BATCH, kinds=kinds_of(actions), budget=self.budget,
                                 quarantine=quarantine):
            results, throttled = results_and_throttling(rows)
            for slowdowns, rate in throttled:
                if on_throttled is not None:
                    on_throttled(slowdowns, rate)
            on_batch(results)

    def map(self, fn, items, *, on_result) -> None:
        from lakesweep.applier.spark_exec import guarded

        for i, item in enumerate(items):
            on_result(i, *guarded(fn, item))

    def stop(self) -> None:
        pass
