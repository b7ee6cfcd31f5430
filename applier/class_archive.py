"""A class-data archive for the Spark driver's JVM (Java's CDS): the classes Spark loads as it starts, stored
once by the JVM itself (``-XX:ArchiveClassesAtExit``) and mapped by every later start (``-XX:SharedArchiveFile``).
A local SparkContext with its first task is up in 7.2 to 7.6 s instead of 9.3 to 11.1 s on 2 cores.

The first apply without one writes it, to a file of its own, as its JVM exits; apply's stop waits for that,
then renames it to a name carrying its size. A start maps an archive only at the size in its name (a truncated
one crashes Java 17 as it maps it), with ``-XX:+VerifySharedSpaces`` (a damaged one is ignored); a JVM that
dies while mapping one is started again without it, the archive deleted. The JVM checks the rest itself (an
archive of another JDK or classpath is ignored). Archives live in ``$XDG_CACHE_HOME/lakesweep/spark-classes``
(``~/.cache`` without it); ``LAKESWEEP_SPARK_CLASS_ARCHIVE=off``, or the user's own
``spark.driver.extraJavaOptions``, go without. See docs/cluster.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

SWITCH = "LAKESWEEP_SPARK_CLASS_ARCHIVE"  # "off": no archive is mapped or written
WRITE_WAIT_S = 120  # how long stop waits for the JVM to write the archive and exit
STALE_S = 3600  # a partial archive this old was left by a process killed while its JVM wrote it
KEEP = 4  # archives kept (the ones mapped last); each is some 60 MB, and every venv or JDK gets its own
# The JVM's messages about its archive (classes it cannot store, an archive it ignores) go to its stdout,
# which is lakesweep's: off, and the checksums checked.
_QUIET = "-XX:+VerifySharedSpaces -Xlog:cds=off -Xlog:cds+dynamic=off"
_MAP, _WRITE = "-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit="  # what a start maps, or writes at exit
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"  # the driver JVM's options, where the archive's flags go


def user_options(conf) -> bool:
    """Whether the user's Spark ``conf`` gives the driver JVM's options: they replace lakesweep's, the
    archive's included, and the driver goes without one."""
    return DRIVER_OPTIONS in conf


def switched_off(env=None) -> bool:
    value = (os.environ if env is None else env).get(SWITCH, "")
    return value.strip().lower() in ("off", "0", "false", "no")


def archive_in(java_options: str) -> tuple[str, str] | None:
    """The archive a JVM started with ``java_options`` maps (``("mapped", path)``) or writes as it exits
    (``("being written", path)``); None when it does neither."""
    for flag, state in ((_MAP, "mapped"), (_WRITE, "being written")):
        if flag in java_options:
            return state, java_options.split(flag, 1)[1].split()[0]
    return None


def archive_dir(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "lakesweep" / \
        "spark-classes"


def _key(env) -> str:
    """What an archive is for: this Spark (its package and version), and the JDK Spark starts (``JAVA_HOME``,
    else ``java`` on the path, as Spark's launcher finds it; its binary's place and time)."""
    import pyspark

    java = os.path.join(env["JAVA_HOME"], "bin", "java") if env.get("JAVA_HOME") else shutil.which("java") or ""
    java = os.path.realpath(java) if java else ""
    stamp = os.stat(java).st_mtime_ns if java and os.path.exists(java) else 0
    parts = (pyspark.__version__, os.path.dirname(os.path.abspath(pyspark.__file__)), env.get("SPARK_HOME", ""),
             java, str(stamp))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ClassArchive:
    """For one JVM start: the archive it maps (``use``), or where it writes one as it exits (``write``, a
    partial name ``finish`` renames to ``final``)."""

    use: Path | None = None
    write: Path | None = None
    directory: Path | None = None
    key: str = ""

    def java_options(self) -> str:
        if self.use is not None:
            return f"{_MAP}{self.use} {_QUIET}"
        return f"{_WRITE}{self.write} {_QUIET}"

    def finish(self, exit_code: int | None) -> Path | None:
        """After the writing JVM exited (``exit_code``; None: it did not exit in time): the archive renamed to
        its final name, or removed when the JVM failed or wrote nothing. Returns the final path, or None."""
        if self.write is None:
            return None
        try:
            size = self.write.stat().st_size if exit_code == 0 else 0
            if size == 0:
                self.write.unlink(missing_ok=True)
                return None
            final = self.directory / f"{self.key}.{size}.jsa"
            os.replace(self.write, final)
            # archives of other venvs and JDKs, but the ones mapped last (a start touches what it maps)
            others = sorted(self.directory.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in [p for p in others if p != final][KEEP - 1:]:
                old.unlink(missing_ok=True)
            return final
        except OSError:
            return None  # a cache, not a result: the next start writes another

    def discard(self) -> None:
        """The archive in use could not start a JVM: removed, so that no start maps it again."""
        if self.use is not None:
            try:
                self.use.unlink(missing_ok=True)
            except OSError:
                pass


def class_archive(*, write: bool, env: dict | None = None) -> ClassArchive | None:
    """The archive a JVM started now maps, if a complete one is there; else, with ``write``, where it writes
    one (the caller then calls ``finish`` once the JVM exited); else None (also when switched off, or when the
    cache cannot be made)."""
    env = os.environ if env is None else env
    if switched_off(env):
        return None
    directory = archive_dir(env)
    try:
        key = _key(env)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for path in directory.glob(f"{key}.*.jsa"):
            size = path.name[len(key) + 1:-len(".jsa")]
            if size.isdigit() and path.stat().st_size == int(size) > 0:
                os.utime(path)  # mapped now: kept over those of venvs gone (``finish``)
                return ClassArchive(use=path, directory=directory, key=key)
            path.unlink(missing_ok=True)  # not the size it was written with: never mapped
        if not write:
            return None
        now = time.time()
        for path in directory.glob(f"{key}.*.partial"):
            if now - path.stat().st_mtime > STALE_S:
                path.unlink(missing_ok=True)
    except (OSError, ImportError):
        return None
    return ClassArchive(write=directory / f"{key}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial",
                        directory=directory, key=key)
