"""Current Apache Paimon's own maintenance (``paimon-bundle``, pinned in tests/support/maven.py): snapshot,
partition, tag, changelog and consumer expiry and orphan clean.

``tests/support/java/CurrentPaimon.java`` is compiled once against the bundle (plus the Hadoop client jars
that come with pyspark) into the test cache and run as one JVM per command. Each method has the signature
of the 0.9 harness's namesake, so a differential written against 0.9 runs against current Paimon by swapping
the object that does the maintenance. Paimon's failures raise ``HarnessError`` with its exception's message,
as the 0.9 harness's do. A missing JDK or ``mvn`` raises, as everywhere in the Java tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support import maven
from tests.support.paimon_java import (JVM_QUIET_OPTIONS, HarnessError, build_classpath, cache_dir, check_jdk,
                                       publish)

SOURCE = Path(__file__).resolve().parent / "java" / "CurrentPaimon.java"
TIMEOUT_S = 300
CLOCK_SLACK_MS = 5  # between the harness's last clock read and ExpireSnapshotsImpl#expire's first


def classpath() -> list[str]:
    check_jdk()
    jars = build_classpath(maven.java_reference("paimon-bundle"))
    digest = hashlib.sha256(SOURCE.read_bytes() + "\0".join(Path(j).name for j in jars).encode()).hexdigest()[:16]
    out = cache_dir() / "classes-current-paimon" / digest
    if not (out / ".complete").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f"{digest}.tmp-"))
        try:
            cmd = ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", os.pathsep.join(jars), "-d", str(tmp), str(SOURCE)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"javac failed for {SOURCE}:\n{proc.stdout}\n{proc.stderr}")
            (tmp / ".complete").write_text(digest)
            publish(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return [str(out), *jars]


def _snapshot_times(table: str) -> list[int]:
    snapshots = os.path.join(table, "snapshot")
    times = []
    for name in os.listdir(snapshots):
        if name.startswith("snapshot-"):
            with open(os.path.join(snapshots, name)) as f:
                times.append(json.load(f)["timeMillis"])
    return times


class CurrentPaimon:
    """Runs CurrentPaimon.java; ``version`` is the pinned paimon-bundle version."""

    def __init__(self) -> None:
        self.classpath = classpath()
        self.version = maven.JAVA_REFERENCES["paimon-bundle"].version

    def _run(self, *args: str) -> list[str]:
        cmd = ["java", "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *JVM_QUIET_OPTIONS,
               "-cp", os.pathsep.join(self.classpath), "CurrentPaimon", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=TIMEOUT_S)
        if proc.returncode != 0:
            errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR ")]
            message = errors[-1].split(": ", 1)[-1] if errors else f"Paimon {self.version} failed on {args[0]}"
            raise HarnessError(message, trace=proc.stderr[-4000:], command={"cmd": args[0], "args": args[1:]})
        return [line for line in proc.stdout.splitlines() if line]

    def _json(self, *args: str) -> dict:
        return json.loads(self._run(*args)[-1])

    def expire(self, table: str | os.PathLike[str], *, retain_min: int, retain_max: int, max_deletes: int,
               older_than_ms: int, attempts: int = 5) -> dict:
        """``ExpireSnapshotsImpl`` with these settings, every snapshot older than ``older_than_ms`` eligible.

        Paimon reads its own clock for the cut-off (now minus a retained duration, the duration taken just
        before the call), so the cut-off it used lies in ``[older_than_ms, older_than_ms + the set-up time
        + CLOCK_SLACK_MS]``. When a snapshot's time falls in that window, the table is put back as it was and
        the call made again (a busy machine), up to ``attempts`` times; then it raises."""
        table = os.fspath(table)
        times = _snapshot_times(table)
        with tempfile.TemporaryDirectory(prefix="paimon-expire-") as tmp:
            aside = os.path.join(tmp, "table")
            shutil.copytree(table, aside, copy_function=shutil.copy2)
            for _ in range(attempts):
                expired, took = map(int, self._run("expire", table, str(retain_min), str(retain_max),
                                                   str(max_deletes), str(older_than_ms))[-1].split())
                if not any(older_than_ms <= t <= older_than_ms + took + CLOCK_SLACK_MS for t in times):
                    return {"expired": expired}
                shutil.rmtree(table)
                shutil.copytree(aside, table, copy_function=shutil.copy2)
        raise RuntimeError(f"Paimon {self.version}'s expiry of {table} never ran clear of a snapshot time "
                           f"near its cut-off {older_than_ms} in {attempts} attempts")

    def orphan_clean(self, table: str | os.PathLike[str], *, older_than_ms: int) -> list[str]:
        """``LocalOrphanFilesClean`` as a dry run: the absolute paths it would delete, sorted."""
        return self._run("orphans", os.fspath(table), str(older_than_ms))

    def expire_partitions(self, table: str | os.PathLike[str], *, expiration_time: str, now: str,
                          strategy: str | None = None, max_expires: int | None = None,
                          timestamp_formatter: str | None = None, timestamp_pattern: str | None = None,
                          options: dict[str, str] | None = None) -> dict:
        """``PartitionExpire`` as the ``expire_partitions`` procedure builds it (its arguments as dynamic
        options over the table's ``partition.*`` ones, check interval 0), at the local date-time ``now``
        (ISO). Returns ``expired`` ({key: value} maps, in Paimon's order) and ``snapshots`` committed
        (id, commitKind, commitUser)."""
        given = {"partition.expiration-time": expiration_time, "partition.expiration-strategy": strategy,
                 "partition.expiration-max-num": max_expires, "partition.timestamp-formatter": timestamp_formatter,
                 "partition.timestamp-pattern": timestamp_pattern, **(options or {})}
        return self._json("expire_partitions", os.fspath(table), now,
                          *(f"{k}={v}" for k, v in given.items() if v is not None))

    def delete_tags(self, table: str | os.PathLike[str], names) -> list[str]:
        """``deleteTag`` (``TagManager#deleteTag`` with ``TagDeletion``) of each, in order; the tags left."""
        return self._json("delete_tags", os.fspath(table), *names)["left"]

    def expire_tags(self, table: str | os.PathLike[str], *, older_than: str | None = None) -> list[str]:
        """``TagTimeExpire`` at the current time, ``withOlderThanTime`` the local date-time ``older_than``
        (ISO) when given, as the ``expire_tags`` procedure runs it; the tag names left."""
        return self._json("expire_tags", os.fspath(table), *([older_than] if older_than else []))["left"]

    def auto_tag_create(self, table: str | os.PathLike[str], options: dict[str, str]) -> list[str]:
        """``TagAutoCreation#run`` with ``options`` over the table's; the tag names left."""
        return self._json("auto_tag_create", os.fspath(table), *(f"{k}={v}" for k, v in options.items()))["left"]

    def expire_changelog(self, table: str | os.PathLike[str], *, retain_min: int, retain_max: int,
                         time_retained_ms: int, max_deletes: int) -> dict:
        """``ExpireChangelogImpl`` (decoupled changelog expiry) with these settings; ``{"expired": n}``."""
        return self._json("expire_changelog", os.fspath(table), str(retain_min), str(retain_max),
                          str(time_retained_ms), str(max_deletes))

    def expire_consumers(self, table: str | os.PathLike[str], *, expire_date_time: str,
                         branch: str = "main") -> list[str]:
        """``ConsumerManager#expire`` on ``branch`` at the local date-time ``expire_date_time`` (ISO); the
        consumer ids left."""
        return self._json("expire_consumers", os.fspath(table), branch, expire_date_time)["left"]

    def rows(self, table: str) -> list[tuple[int, str]]:
        """The latest snapshot's rows of an append table of ``pypaimon_tables.APPEND_SCHEMA`` as (id, dt),
        sorted, read through the Paimon FileIO of the location's scheme (Hadoop's for ``hdfs://``)."""
        return sorted((int(i), dt) for i, dt in (line.split(" ", 1) for line in self._run("rows", table)))
