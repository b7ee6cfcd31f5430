"""Apache Iceberg's own Java implementation on Spark, as the reference for lakesweep's Iceberg maintenance.

``IcebergSpark`` runs one Spark session with Iceberg's Spark runtime and ``sqlite-jdbc`` on ``spark.jars``
(both from ``tests/support/maven.py``) in a child Python process, so that it never meets a Spark session of
the test process itself (a process has one SparkContext, and ``getOrCreate`` would hand back a session
without Iceberg). Commands go as JSON lines on the child's stdin; answers come back one JSON line each on
its stdout, where nothing else is written (the child points its own stdout, and so the JVM's, at stderr).

A pyiceberg SQL catalog on SQLite is opened by Iceberg's ``JdbcCatalog`` under the same catalog name
(``catalog_name`` is a column of pyiceberg's tables): ``register_catalog(name, catalog_db, warehouse)``.
The Spark catalog does not cache tables, so every statement reads the catalog as it is then.

Besides SQL, the child runs Iceberg's Spark actions through its Java API on a table object held from
earlier (``hold`` then ``action``): the action plans from the table as it was when held, and commits
against the catalog as it is then, which is how a concurrent commit is put between an action's start and
its commit. ``equality_delete`` commits an equality delete file (written by the caller) as a row delta.

Typical use::

    with IcebergSpark.start() as ice:
        ice.register_catalog("lsice", root / "catalog.db", root / "wh")
        ice.sql("CALL lsice.system.expire_snapshots(table => 'ns.t', older_than => TIMESTAMP '...')")
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support import maven

REPO = Path(__file__).resolve().parents[2]
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{REPO}/applier/log4j2.properties "
                                     "-XX:+UseSerialGC",
}
START_TIMEOUT_S = 300.0


def catalog_conf(name: str, catalog_db: str | os.PathLike[str], warehouse: str | os.PathLike[str]) -> dict[str, str]:
    """The Spark settings of Iceberg's ``JdbcCatalog`` on the SQLite file ``catalog_db`` as catalog ``name``."""
    prefix = f"spark.sql.catalog.{name}"
    return {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "jdbc",
            f"{prefix}.uri": f"jdbc:sqlite:{os.fspath(catalog_db)}",
            f"{prefix}.warehouse": Path(warehouse).as_uri(), f"{prefix}.cache-enabled": "false"}


class IcebergSparkError(RuntimeError):
    """A statement Iceberg on Spark refused (``error`` is the Java/Spark message), or the child died."""


class IcebergSpark:
    """One child process holding a Spark session with Iceberg Java; not thread-safe."""

    def __init__(self, proc, stderr) -> None:
        self._proc = proc
        self._stderr = stderr

    @classmethod
    def start(cls, *, master: str = "local[2]") -> "IcebergSpark":
        import subprocess

        jars = maven.java_references("iceberg-spark", "sqlite-jdbc")
        stderr = tempfile.TemporaryFile(prefix="iceberg-spark-", suffix=".log")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                   SPARK_LOCAL_IP="127.0.0.1")
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.iceberg_spark", master,
                                 ",".join(map(str, jars))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr, cwd=REPO, env=env)
        ice = cls(proc, stderr)
        try:
            ice.call({"cmd": "ping"})
        except BaseException:
            ice.close()
            raise
        return ice

    def __enter__(self) -> "IcebergSpark":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stderr_tail(self, limit: int = 6000) -> str:
        self._stderr.flush()
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def call(self, command: dict[str, Any]) -> dict[str, Any]:
        if self._proc is None:
            raise IcebergSparkError("the Iceberg Spark session is closed")
        try:
            self._proc.stdin.write(json.dumps(command).encode() + b"\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            raise IcebergSparkError(f"the Iceberg Spark child died: {e!r}; stderr:\n{self.stderr_tail()}") from e
        if not line:
            raise IcebergSparkError(f"the Iceberg Spark child died (exit {self._proc.poll()}); "
                                    f"stderr:\n{self.stderr_tail()}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise IcebergSparkError(answer["error"])
        return answer

    def sql(self, statement: str) -> list[list[Any]]:
        """The rows of ``statement``, each a list of JSON values (other values as their ``str``)."""
        return self.call({"cmd": "sql", "sql": statement})["rows"]

    def register_catalog(self, name: str, catalog_db: str | os.PathLike[str],
                         warehouse: str | os.PathLike[str]) -> None:
        """Iceberg's ``JdbcCatalog`` on the SQLite file ``catalog_db``, as Spark catalog ``name``."""
        self.call({"cmd": "conf", "conf": catalog_conf(name, catalog_db, warehouse)})

    def hold(self, key: str, table: str) -> int | None:
        """Load ``table`` (``catalog.ns.name``) and keep the object under ``key``; its current snapshot id."""
        return self.call({"cmd": "hold", "key": key, "table": table})["snapshot_id"]

    def action(self, key: str, action: str, **options: Any) -> dict[str, Any]:
        """Run Iceberg's Spark action ``action`` (``expire_snapshots``, ``rewrite_manifests`` or
        ``rewrite_data_files``) on the table held under ``key``; its result's counts. ``options``:
        ``older_than_ms`` and ``retain_last`` (expiry), string options of the rewrite (``rewrite_data_files``)."""
        return self.call({"cmd": "action", "key": key, "action": action, "options": options})["result"]

    def equality_delete(self, table: str, *, path: str, size: int, records: int, field_ids: list[int],
                        partition_path: str | None) -> int:
        """Commit the parquet equality delete file at ``path`` to ``table`` as a row delta (Iceberg's
        ``RowDelta``), in partition ``partition_path`` of the current spec; the new snapshot id."""
        return self.call({"cmd": "equality_delete", "table": table, "path": path, "size": size, "records": records,
                          "field_ids": field_ids, "partition_path": partition_path})["snapshot_id"]

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=60)
        except Exception:
            proc.kill()
            proc.wait()
        finally:
            proc.stdout.close()
            self._stderr.close()


# --------------------------------------------------------------------------- the child


def _serve(master: str, jars: str) -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the JVM and anything printing write to stderr, never into the protocol
    sys.stdout = sys.stderr
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("iceberg-reference").master(master).config("spark.jars", jars)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    held: dict[str, Any] = {}
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if command["cmd"] == "ping":
                answer: dict[str, Any] = {"ok": True}
            elif command["cmd"] == "conf":
                for key, value in command["conf"].items():
                    spark.conf.set(key, value)
                answer = {"ok": True}
            elif command["cmd"] == "sql":
                rows = [list(r) for r in spark.sql(command["sql"]).collect()]
                answer = {"ok": True, "rows": json.loads(json.dumps(rows, default=str))}
            elif command["cmd"] in _JAVA_API:
                answer = {"ok": True, **_JAVA_API[command["cmd"]](spark, held, command)}
            else:
                answer = {"ok": False, "error": f"unknown command {command['cmd']!r}"}
        except Exception as e:  # the test side raises it, with Spark's message
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        protocol.write(json.dumps(answer) + "\n")
    spark.stop()


def _load(spark, name: str):
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)


def _snapshot_id(table) -> int | None:
    snapshot = table.currentSnapshot()
    return None if snapshot is None else snapshot.snapshotId()


def _hold(spark, held: dict, command: dict) -> dict:
    held[command["key"]] = table = _load(spark, command["table"])
    return {"snapshot_id": _snapshot_id(table)}


def _action(spark, held: dict, command: dict) -> dict:
    actions = spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    table, options = held[command["key"]], dict(command["options"])
    if command["action"] == "expire_snapshots":
        r = (actions.expireSnapshots(table).expireOlderThan(options["older_than_ms"])
             .retainLast(options.get("retain_last", 1)).execute())
        result = {"deleted_data_files": r.deletedDataFilesCount(), "deleted_manifests": r.deletedManifestsCount(),
                  "deleted_manifest_lists": r.deletedManifestListsCount()}
    elif command["action"] == "rewrite_manifests":
        r = actions.rewriteManifests(table).execute()
        result = {"rewritten_manifests": len(list(r.rewrittenManifests())),
                  "added_manifests": len(list(r.addedManifests()))}
    elif command["action"] == "rewrite_data_files":
        action = actions.rewriteDataFiles(table)
        for key, value in options.items():
            action = action.option(key, str(value))
        r = action.execute()
        result = {"rewritten_data_files": r.rewrittenDataFilesCount(), "added_data_files": r.addedDataFilesCount(),
                  "failed_data_files": r.failedDataFilesCount()}
    else:
        raise ValueError(f"unknown action {command['action']!r}")
    return {"result": result}


def _equality_delete(spark, held: dict, command: dict) -> dict:
    jvm = spark._jvm
    table = _load(spark, command["table"])
    ids = spark.sparkContext._gateway.new_array(jvm.int, len(command["field_ids"]))
    for i, field_id in enumerate(command["field_ids"]):
        ids[i] = field_id
    builder = (jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec()).ofEqualityDeletes(ids)
               .withPath(command["path"]).withFormat("parquet").withFileSizeInBytes(command["size"])
               .withRecordCount(command["records"]))
    if command["partition_path"]:
        builder = builder.withPartitionPath(command["partition_path"])
    table.newRowDelta().addDeletes(builder.build()).commit()
    table.refresh()
    return {"snapshot_id": _snapshot_id(table)}


_JAVA_API = {"hold": _hold, "action": _action, "equality_delete": _equality_delete}


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
