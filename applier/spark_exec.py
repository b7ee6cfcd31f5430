"""Running bulk phases as Spark tasks: FileIO on the executors, results streamed back per batch.

The driver parallelizes compact action rows, each task executes its actions (with retries) and yields
its results in batches; the driver consumes them with ``toLocalIterator`` so it never holds more than
a few batches, and journals each batch as it arrives.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator, Sequence

from engine.fileio import FileIO
from engine.plan import Action, ActionKind

from applier.actions import ActionResult, Outcome, execute_with_retry, resolve_action_path

DEFAULT_BATCH = 500
LOG4J = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None):
    """A Spark session for applying plans (quiet: no UI, warnings only)."""
    from pyspark.sql import SparkSession

    # Bind to loopback: Spark otherwise picks the first non-loopback interface for a local session.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName("lakesweep-apply").master(master)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.python.worker.reuse": "true",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
    }
    if os.environ.get("PYTHONPATH"):
        defaults["spark.executorEnv.PYTHONPATH"] = os.environ["PYTHONPATH"]
    for k, v in {**defaults, **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _row(a: Action) -> tuple:
    return (a.action_id, a.kind.value, a.path, a.snapshot_id, a.source)


def _action(row: tuple) -> Action:
    action_id, kind, path, snapshot_id, source = row
    return Action(ActionKind(kind), path, snapshot_id=snapshot_id, source=source, action_id=action_id)


def execute_rows(
    rows: Iterator[tuple], fileio: FileIO, root: str, external: Sequence[str], dry_run: bool, batch: int
) -> Iterator[list[tuple]]:
    """Executor side: run each action and yield result batches ``[(action_id, outcome, attempts, error, ms)]``."""
    out: list[tuple] = []
    for row in rows:
        action = _action(row)
        if dry_run:
            target = resolve_action_path(root, action.path, external)
            exists = fileio.exists(target)
            res = ActionResult(action.action_id, Outcome.DELETED if exists else Outcome.ALREADY_ABSENT, 0)
        else:
            res = execute_with_retry(fileio, root, action, external_roots=external)
        out.append((res.action_id, res.outcome.value, res.attempts, res.error, res.finished_ms))
        if len(out) >= batch:
            yield out
            out = []
    if out:
        yield out


def run_on_spark(
    spark,
    fileio: FileIO,
    root: str,
    external: Sequence[str],
    actions: Sequence[Action],
    *,
    on_batch: Callable[[list[ActionResult]], None],
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
) -> None:
    """Execute ``actions`` as Spark tasks, calling ``on_batch`` on the driver for every result batch."""
    if not actions:
        return
    sc = spark.sparkContext
    slices = max(1, min(len(actions), sc.defaultParallelism * 4, (len(actions) + 49) // 50))
    rows = [_row(a) for a in actions]
    external = list(external)

    def task(it):
        return execute_rows(it, fileio, root, external, dry_run, batch)

    sc.setJobGroup("lakesweep-apply", f"lakesweep: {len(actions)} {actions[0].phase.name.lower()} actions")
    for result_batch in sc.parallelize(rows, slices).mapPartitions(task).toLocalIterator(prefetchPartitions=True):
        on_batch([ActionResult(i, Outcome(o), att, err, ms) for (i, o, att, err, ms) in result_batch])
