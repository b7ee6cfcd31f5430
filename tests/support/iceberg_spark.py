"""Apache Iceberg's own Java implementation on Spark, as the reference for lakesweep's Iceberg maintenance.

``IcebergSpark`` runs one Spark session with Iceberg's Spark runtime and ``sqlite-jdbc`` on ``spark.jars``
(both from ``tests/support/maven.py``) in a child Python process, so that it never meets a Spark session of
the test process itself (a process has one SparkContext, and ``getOrCreate`` would hand back a session
without Iceberg). Commands go as JSON lines on the child's stdin; answers come back one JSON line each on
its stdout, where nothing else is written (the child points its own stdout, and so the JVM's, at stderr).

A pyiceberg SQL catalog on SQLite is opened by Iceberg's ``JdbcCatalog`` under the same catalog name
(``catalog_name`` is a column of pyiceberg's tables): ``register_catalog(name, catalog_db, warehouse)``.
The Spark catalog does not cache tables, so every statement reads the catalog as it is then.

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
            else:
                answer = {"ok": False, "error": f"unknown command {command['cmd']!r}"}
        except Exception as e:  # the test side raises it, with Spark's message
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        protocol.write(json.dumps(answer) + "\n")
    spark.stop()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
