"""Drive Apache Paimon 0.9's own Java core from Python tests.

The Java side is ``tests/support/java/PaimonHarness.java``: a single JVM that reads
JSON-lines commands on stdin and answers one JSON line per command on stdout.
It uses Paimon's core as shipped in the ``pypaimon==0.2.0`` source distribution
(``deps/jars/paimon-python-java-bridge-0.9.0.jar``) plus the Hadoop client jars
that come with pyspark.

Typical use::

    with ensure_harness() as h:
        info = h.generate(tmp / "t", seed=7, kind="pk", steps=30)
        live = h.live_files(tmp / "t")
        h.expire(tmp / "t", retain_min=2, retain_max=2, max_deletes=1000)

Nothing here ever skips silently: a missing/old JDK raises ``RuntimeError``.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

PYPAIMON_SDIST_VERSION = "0.2.0"
JAR_MEMBER = f"pypaimon-{PYPAIMON_SDIST_VERSION}/deps/jars/paimon-python-java-bridge-0.9.0.jar"
JAR_NAME = "paimon-python-java-bridge-0.9.0.jar"
JAR_SHA256 = "dc9048366715fc75d2b44e3f8ac1dbfab011b8c34aafc26ffa216500fb890b0e"
HARNESS_SOURCE = Path(__file__).resolve().parent / "java" / "PaimonHarness.java"
HARNESS_CLASS = "PaimonHarness"
MIN_JAVA = 17
# jars taken from pyspark's jars directory, in classpath order
PYSPARK_JAR_PATTERNS = (
    "slf4j-api-*.jar",
    "hadoop-client-api-*.jar",
    "hadoop-client-runtime-*.jar",
    # Avro's snappy codec (manifest_compression="snappy") calls org.xerial.snappy, which Paimon does not bundle
    "snappy-java-*.jar",
)
# Avro codec names the harness can write manifests with (Paimon's default is zstd)
MANIFEST_CODECS = ("zstd", "snappy", "deflate", "null")
DEFAULT_TIMEOUT_S = 300.0
JVM_OPTIONS = (
    "-Xmx1g",
    "-XX:+UseSerialGC",
    # commands are short; C1 alone roughly halves the first (cold) generate on 2 cores
    "-XX:TieredStopAtLevel=1",
    # JVM unified logging defaults to stdout, which is the protocol channel
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
    "-Dslf4j.internal.verbosity=ERROR",
)
JVM_OPTS_ENV = "LAKESWEEP_HARNESS_JVM_OPTS"  # extra JVM options, whitespace separated
# the options above that keep the protocol channel clean, kept when a caller replaces the tuning ones
JVM_QUIET_OPTIONS = tuple(o for o in JVM_OPTIONS if o.startswith(("-Xlog", "-Dslf4j")))
# Paimon 0.9 builds a new OrcFileFormat (two Hadoop Configuration objects, each parsing the
# 150 KB core-default.xml, and once mapred's JobConf is loaded also mapred-default.xml and
# yarn-default.xml) every time AbstractFileStore.pathFactory() is called, which made an ORC
# history ~5x slower than a Parquet one.  Neither Paimon's LocalFileIO nor its ORC/Parquet
# readers and writers depend on those Hadoop defaults, so by default the harness puts empty
# copies of these three files first on the classpath.  Set LAKESWEEP_HARNESS_HADOOP_DEFAULTS=1
# to keep Hadoop's real defaults.
HADOOP_DEFAULTS_ENV = "LAKESWEEP_HARNESS_HADOOP_DEFAULTS"
_SHADOWED_HADOOP_DEFAULTS = ("core-default.xml", "mapred-default.xml", "yarn-default.xml")
_EMPTY_HADOOP_DEFAULTS = """<?xml version="1.0"?>
<!-- lakesweep test harness: shadows hadoop-client-api's defaults (see paimon_java.py) -->
<configuration>
</configuration>
"""

_JDK_HINT = (
    "Paimon's Java core needs a JDK >= 17 (java and javac on PATH). "
    "Install it with: apt-get install -y openjdk-17-jdk-headless"
)


class HarnessError(RuntimeError):
    """Raised when the Java harness answers ``ok: false`` (or dies)."""

    def __init__(self, message: str, *, trace: str | None = None, command: dict | None = None):
        super().__init__(message)
        self.trace = trace
        self.command = command


# --------------------------------------------------------------------------- setup


def cache_dir() -> Path:
    base = os.environ.get("LAKESWEEP_TEST_CACHE")
    path = Path(base) if base else Path.home() / ".cache" / "lakesweep-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _java_major(tool: str) -> int:
    exe = shutil.which(tool)
    if exe is None:
        raise RuntimeError(f"'{tool}' was not found on PATH. {_JDK_HINT}")
    proc = subprocess.run([exe, "-version"], capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    # java: 'openjdk version "17.0.15" ...' / 'java version "1.8.0_392"'; javac: 'javac 17.0.15'
    m = re.search(r'(?:version "|javac )(\d+)(?:\.(\d+))?', text)
    if proc.returncode != 0 or m is None:
        raise RuntimeError(f"could not determine the version of '{exe}': {text.strip()!r}. {_JDK_HINT}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8" style
        major = int(m.group(2))
    return major


def check_jdk() -> None:
    for tool in ("java", "javac"):
        major = _java_major(tool)
        if major < MIN_JAVA:
            raise RuntimeError(f"'{tool}' is Java {major}, older than {MIN_JAVA}. {_JDK_HINT}")


def ensure_paimon_jar(cache: Path | None = None) -> Path:
    """Return the Paimon 0.9 bridge jar, downloading the pypaimon 0.2.0 sdist once if needed."""
    cache = cache or cache_dir()
    jar = cache / "jars" / JAR_NAME
    if jar.is_file() and jar.stat().st_size > 0:
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="download-") as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--disable-pip-version-check", f"pypaimon=={PYPAIMON_SDIST_VERSION}", "-d", tmp,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        sdists = glob.glob(os.path.join(tmp, f"pypaimon-{PYPAIMON_SDIST_VERSION}.tar.gz"))
        if proc.returncode != 0 or not sdists:
            raise RuntimeError(
                f"could not download pypaimon=={PYPAIMON_SDIST_VERSION} (needed for Paimon's Java core):\n"
                f"$ {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
            )
        with tarfile.open(sdists[0], "r:gz") as tar:
            member = tar.getmember(JAR_MEMBER)
            src = tar.extractfile(member)
            if src is None:
                raise RuntimeError(f"{JAR_MEMBER} is not a regular file in {sdists[0]}")
            part = jar.with_name(jar.name + f".part-{os.getpid()}")
            digest = hashlib.sha256()
            with src, open(part, "wb") as dst:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    dst.write(chunk)
        if digest.hexdigest() != JAR_SHA256:
            part.unlink()
            raise RuntimeError(
                f"{JAR_MEMBER} from {sdists[0]} has sha256 {digest.hexdigest()}, expected {JAR_SHA256}"
            )
        os.replace(part, jar)
    return jar


def pyspark_jars_dir() -> Path:
    try:
        import pyspark  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - pyspark is a project dependency
        raise RuntimeError("pyspark is needed for its Hadoop client jars (pip install pyspark)") from exc
    return Path(pyspark.__file__).resolve().parent / "jars"


def build_classpath(jar: Path) -> list[str]:
    jars_dir = pyspark_jars_dir()
    entries = []
    for pattern in PYSPARK_JAR_PATTERNS:
        found = sorted(jars_dir.glob(pattern))
        if not found:
            raise RuntimeError(f"no {pattern} in {jars_dir}; is pyspark installed completely?")
        entries.append(str(found[-1]))
    # slf4j-api first so Paimon's bundled (partial) slf4j 1.7 classes are shadowed
    return [entries[0], str(jar), *entries[1:]]


def light_hadoop_conf_dir(cache: Path | None = None) -> Path:
    """Directory holding the empty *-default.xml files that shadow Hadoop's."""
    cache = cache or cache_dir()
    conf_dir = cache / "hadoop-light-conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    for name in _SHADOWED_HADOOP_DEFAULTS:
        target = conf_dir / name
        if not target.is_file() or target.read_text() != _EMPTY_HADOOP_DEFAULTS:
            part = target.with_name(f"{name}.part-{os.getpid()}")
            part.write_text(_EMPTY_HADOOP_DEFAULTS)
            os.replace(part, target)
    return conf_dir


def publish(built: Path, out: Path) -> None:
    """Put the directory ``built`` (its ``.complete`` marker written last) at ``out`` in one rename. Another
    process (a second test worker, another session) may have published ``out`` first: its copy is complete
    and may be in use, so it stays and ``built`` is dropped. An ``out`` without its marker is left over from
    an interrupted run of older code, and is replaced."""
    if out.exists() and not (out / ".complete").is_file():
        shutil.rmtree(out, ignore_errors=True)
    try:
        os.replace(built, out)
    except OSError:
        if not (out / ".complete").is_file():
            raise
        shutil.rmtree(built, ignore_errors=True)


def compile_harness(classpath: list[str], cache: Path | None = None) -> Path:
    """Compile PaimonHarness.java into the cache (once per source/classpath hash)."""
    cache = cache or cache_dir()
    source = HARNESS_SOURCE.read_bytes()
    digest = hashlib.sha256(source + "\0".join(Path(p).name for p in classpath).encode()).hexdigest()[:16]
    out = cache / "classes" / digest
    marker = out / ".complete"
    if marker.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f"{digest}.tmp-"))
    try:
        cmd = ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", os.pathsep.join(classpath),
               "-d", str(tmp), str(HARNESS_SOURCE)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed for {HARNESS_SOURCE}:\n{proc.stdout}\n{proc.stderr}")
        (tmp / ".complete").write_text(digest)
        os.chmod(tmp, 0o755)
        publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    # drop builds of older harness sources (keep anything touched in the last hour: a
    # concurrent session may still be compiling or running it)
    for stale in out.parent.iterdir():
        if stale != out and time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    return out


def harness_classpath() -> list[str]:
    """The JVM classpath of the harness: compiled classes (cached), light Hadoop defaults, jars."""
    check_jdk()
    cache = cache_dir()
    jar = ensure_paimon_jar(cache)
    classpath = build_classpath(jar)
    classes = compile_harness(classpath, cache)
    prefix = [str(classes)]
    if os.environ.get(HADOOP_DEFAULTS_ENV, "") in ("", "0"):
        prefix.append(str(light_hadoop_conf_dir(cache)))
    return [*prefix, *classpath]


def ensure_harness(*, timeout_s: float = DEFAULT_TIMEOUT_S, jvm_options: Iterable[str] | None = None) -> "Harness":
    """Prepare jar + compiled harness (cached) and start one JVM.

    ``jvm_options`` replaces the tuning part of ``JVM_OPTIONS`` (heap, GC, JIT) for this JVM, e.g.
    ``[]`` for the JVM's own defaults; the options that keep stdout clean stay."""
    return Harness(harness_classpath(), timeout_s=timeout_s, jvm_options=jvm_options)


# --------------------------------------------------------------------------- the JVM


class Harness:
    """One long-lived JVM running PaimonHarness; not thread-safe."""

    def __init__(self, classpath: Iterable[str], *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 jvm_options: Iterable[str] | None = None):
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self.stray_output: list[str] = []  # non-protocol lines seen on the JVM's stdout
        self._stderr = tempfile.TemporaryFile(prefix="paimon-harness-", suffix=".log")
        self._tmpdir = tempfile.mkdtemp(prefix="paimon-harness-io-")
        cmd = [
            "java",
            *(JVM_OPTIONS if jvm_options is None else (*JVM_QUIET_OPTIONS, *jvm_options)),
            *os.environ.get(JVM_OPTS_ENV, "").split(),
            f"-Djava.io.tmpdir={self._tmpdir}",
            "-cp",
            os.pathsep.join(classpath),
            HARNESS_CLASS,
        ]
        try:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
            self.call({"cmd": "ping"}, timeout=120)
        except BaseException:
            self.close()
            raise

    # -- plumbing

    @property
    def pid(self) -> int | None:
        """The JVM's process id (None once closed)."""
        return None if self._proc is None else self._proc.pid

    def stderr_tail(self, limit: int = 4000) -> str:
        self._stderr.flush()
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def _read_line(self, timeout: float) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def call(self, command: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """Send one command, return the decoded answer; raise HarnessError unless ok."""
        if self._proc is None:
            raise HarnessError("harness is closed", command=command)
        assert self._proc.stdin is not None
        deadline = time.monotonic() + (self.timeout_s if timeout is None else timeout)
        try:
            self._proc.stdin.write(json.dumps(command).encode() + b"\n")
            self._proc.stdin.flush()
            answer = None
            while answer is None:  # skip anything that is not a protocol line
                answer = self._decode(self._read_line(deadline - time.monotonic()))
        except TimeoutError:
            self._kill()
            raise HarnessError(
                f"Paimon harness timed out on {command.get('cmd')!r}; stderr:\n{self.stderr_tail()}",
                command=command,
            ) from None
        except (EOFError, BrokenPipeError, OSError) as exc:
            try:
                code = self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            tail = self.stderr_tail()
            self._kill()
            raise HarnessError(
                f"Paimon harness JVM died (exit {code}) during {command.get('cmd')!r}: {exc!r}; stderr:\n{tail}",
                command=command,
            ) from None
        if not answer.get("ok"):
            raise HarnessError(answer.get("error", "unknown error"), trace=answer.get("trace"), command=command)
        return answer

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "ok" in answer:
            return answer
        self.stray_output.append(line.decode("utf-8", "replace"))
        return None

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def close(self) -> None:
        proc = self._proc
        if proc is not None:
            self._proc = None
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=30)
            except (subprocess.TimeoutExpired, OSError):
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if not self._stderr.closed:
            self._stderr.close()
        shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # best effort; tests should call close()
        if hasattr(self, "_tmpdir"):
            try:
                self.close()
            except Exception:
                pass

    # -- commands

    def generate(
        self,
        table: str | os.PathLike[str],
        *,
        seed: int,
        kind: str,
        steps: int,
        options: dict[str, Any] | None = None,
        ops: dict[str, int] | None = None,
        manifest_compression: str | None = None,
        partitions: int | None = None,
        rows_per_write: int | None = None,
        bucket_dirs: bool = True,
        partitioned: bool = True,
    ) -> dict[str, Any]:
        """Create a Paimon table at ``table`` and commit a seeded random history.

        ``options`` overrides/extends the table options (a ``None`` value removes one);
        ``ops`` overrides the weights of the random operations
        (write, delete, compact, overwrite, tag, untag, consumer), e.g. ``{"consumer": 0}``.
        ``manifest_compression`` (one of ``MANIFEST_CODECS``, Avro's codec names) makes Paimon write
        manifests, manifest lists and index manifests with that Avro codec: it sets
        ``manifest.compression`` and, since Paimon 0.9 reaches codecs other than zstd only through
        it, ``avro.codec`` (which Avro data files use too).  ``None`` keeps Paimon's default, zstd.
        ``partitions`` fixes the number of ``dt`` partitions (default 2 or 3, from the seed) and
        ``rows_per_write`` the rows of every write (default 3..22 per write): with many partitions,
        buckets and rows, every commit writes many files.  ``bucket_dirs=False`` leaves
        ``bucketDirs`` out of the answer (it scans every snapshot, which is slow on large tables).
        ``partitioned=False`` makes ``dt`` an ordinary column: the table has no partition key and its
        bucket directories sit at the root (an overwrite then replaces the whole table).

        Returns ``snapshots`` (list of dicts with id, timeMillis, commitKind, baseManifestList,
        deltaManifestList, changelogManifestList, indexManifest, totalRecordCount, schemaId),
        ``tags`` {name: snapshot id}, ``consumers`` {id: next snapshot}, ``options`` (as
        persisted in schema-0), ``kind``, ``bucket``, ``partitions``, ``bucketDirs`` and ``ops``
        (a log of what each step did).
        """
        cmd: dict[str, Any] = {"cmd": "generate", "table": os.fspath(table), "seed": seed,
                               "kind": kind, "steps": steps}
        if options:
            cmd["options"] = {k: (None if v is None else str(v)) for k, v in options.items()}
        if ops:
            cmd["ops"] = dict(ops)
        if manifest_compression is not None:
            if manifest_compression not in MANIFEST_CODECS:
                raise ValueError(
                    f"manifest_compression must be one of {MANIFEST_CODECS}, got {manifest_compression!r}"
                )
            cmd["manifestCompression"] = manifest_compression
        if partitions is not None:
            cmd["partitions"] = partitions
        if rows_per_write is not None:
            cmd["rowsPerWrite"] = rows_per_write
        if not bucket_dirs:
            cmd["bucketDirs"] = False
        if not partitioned:
            cmd["partitioned"] = False
        return self.call(cmd)

    def expire(
        self,
        table: str | os.PathLike[str],
        *,
        retain_min: int,
        retain_max: int,
        time_retained_ms: int | None = None,
        older_than_ms: int | None = None,
        max_deletes: int,
        changelog_retain_min: int | None = None,
        changelog_retain_max: int | None = None,
    ) -> dict[str, Any]:
        """Run Paimon's ExpireSnapshotsImpl with an explicit ExpireConfig; returns ``{"expired": n}``.

        ``older_than_ms`` (absolute epoch ms) is turned into ``timeRetained = now - older_than_ms``
        right before ``expire()``, which recomputes ``now - timeRetained``: the effective cut-off
        can drift later by the (sub-millisecond) time in between.  With neither given, time does
        not limit retention (Paimon's builder default).  Consumers always bound expiry.
        ``changelog_retain_min`` / ``changelog_retain_max`` above the snapshot ones decouple changelogs:
        the expired snapshots still needed are kept as ``changelog/changelog-N`` files.
        """
        if time_retained_ms is not None and older_than_ms is not None:
            raise ValueError("pass time_retained_ms or older_than_ms, not both")
        cmd: dict[str, Any] = {"cmd": "expire", "table": os.fspath(table), "retainMin": retain_min,
                               "retainMax": retain_max, "maxDeletes": max_deletes}
        if time_retained_ms is not None:
            cmd["timeRetainedMs"] = time_retained_ms
        if older_than_ms is not None:
            cmd["olderThanMs"] = older_than_ms
        if changelog_retain_min is not None:
            cmd["changelogRetainMin"] = changelog_retain_min
        if changelog_retain_max is not None:
            cmd["changelogRetainMax"] = changelog_retain_max
        return self.call(cmd)

    def live_files(self, table: str | os.PathLike[str]) -> dict[str, Any]:
        """Files per snapshot and tag, from Paimon's own scan API, relative to the table root.

        ``snapshots`` / ``tags``: data files (+ extra files + deletion-vector index files) that
        ``newSnapshotReader().withSnapshot(..).read()`` returns (all levels, ScanMode.ALL);
        ``changelogs``: changelog files (only snapshots with a changelog manifest list);
        ``indexFiles`` / ``tagIndexFiles``: every file in the index manifest (also empty DV
        index files no data file points at); ``tagSnapshots``: tag -> snapshot id.
        """
        return self.call({"cmd": "live_files", "table": os.fspath(table)})

    def read_rows(
        self,
        table: str | os.PathLike[str],
        *,
        snapshot: int | None = None,
        tag: str | None = None,
    ) -> list[dict[str, Any]]:
        """All rows of a snapshot / tag (latest when neither is given), canonically sorted."""
        cmd: dict[str, Any] = {"cmd": "read_rows", "table": os.fspath(table)}
        if snapshot is not None:
            cmd["snapshot"] = snapshot
        if tag is not None:
            cmd["tag"] = tag
        return self.call(cmd)["rows"]

    def create_branch(self, table: str | os.PathLike[str], branch: str, *, tag: str | None = None) -> None:
        """Create ``branch`` from ``tag`` (Paimon copies the tag, its snapshot and schema into
        ``branch/branch-<name>/``), or an empty branch without ``tag``."""
        cmd: dict[str, Any] = {"cmd": "create_branch", "table": os.fspath(table), "branch": branch}
        if tag is not None:
            cmd["tag"] = tag
        self.call(cmd)

    def write(
        self,
        table: str | os.PathLike[str],
        *,
        seed: int,
        commits: int,
        branch: str = "main",
        partitions: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Commit ``commits`` random writes to ``branch``, as ``generate``'s write op does (``dt``
        drawn from ``partitions``, default generate's first two). Returns ``latest`` (the branch's
        latest snapshot id) and ``ops``."""
        cmd: dict[str, Any] = {"cmd": "write", "table": os.fspath(table), "branch": branch, "seed": seed,
                               "commits": commits}
        if partitions is not None:
            cmd["partitions"] = list(partitions)
        return self.call(cmd)

    def delete_branch(self, table: str | os.PathLike[str], branch: str) -> None:
        """Drop ``branch`` as Paimon does: its directory goes; the files it wrote stay."""
        self.call({"cmd": "delete_branch", "table": os.fspath(table), "branch": branch})

    def orphan_clean(self, table: str | os.PathLike[str], *, older_than_ms: int) -> dict[str, bool]:
        """Paimon 0.9's ``OrphanFilesClean`` as a dry run with its threshold set to exactly
        ``older_than_ms``: every path it would delete (absolute) -> whether it is a directory, which
        0.9 deletes recursively. Nothing on disk changes."""
        answer = self.call({"cmd": "orphan_clean", "table": os.fspath(table), "olderThanMillis": older_than_ms})
        return {c["path"]: c["dir"] for c in answer["cleaned"]}

    def partition_time(self, keys: list[str], values: list[list[str | None]], *, pattern: str | None = None,
                       formatter: str | None = None) -> list[dict[str, str]]:
        """Paimon 0.9's ``PartitionTimeExtractor(pattern, formatter)`` on each row of string ``values``:
        ``{"time": ISO LocalDateTime}`` or ``{"error": exception class}`` per row."""
        answer = self.call({"cmd": "partition_time", "keys": list(keys), "values": [list(v) for v in values],
                            "pattern": pattern, "formatter": formatter})
        return answer["results"]

    def expire_partitions(self, table: str | os.PathLike[str], *, expiration_time: str | int,
                          now: str | Sequence[str], strategy: str | None = None,
                          timestamp_formatter: str | None = None, timestamp_pattern: str | None = None,
                          via: str = "procedure", check_interval: str | None = None,
                          last_check: str | None = None) -> dict[str, Any]:
        """Paimon 0.9's own ``PartitionExpire`` at the local date-time ``now`` (ISO, e.g. ``2023-01-08T00:00:00``;
        0.9 itself reads ``LocalDateTime.now()``), run through its package-private ``expire(now, id)`` with
        ``Long.MAX_VALUE`` as the procedures pass it. A list of nows runs one instance once per now, in order.

        ``expiration_time``: a Paimon duration (``"2 d"``) or milliseconds. ``via="procedure"`` builds it as
        0.9's ``expire_partitions`` procedures do: check interval 0, commit user ``""``, and options made of
        the three arguments alone (``strategy``: ``values-time``, the default, or ``update-time``; formatter;
        pattern), so the table's own ``partition.*`` options are not read (master reads them first).
        ``via="table"`` is a writer's ``FileStore#newPartitionExpire("")`` on the table with these as dynamic
        options over its own; ``check_interval`` (default the table's, 1 h) and ``last_check`` (ISO; set
        before the first run, as ``PartitionExpireTest`` does) apply to it only.

        0.9 has neither ``partition.expiration-max-num`` (``max_expires``, 1.0) nor
        ``partition.expiration-batch-size``: it drops every expired partition in one OVERWRITE commit
        (the Java side refuses ``maxExpires`` / ``batchSize``). Its expired partitions come in scan order (a
        ``ConcurrentHashMap`` of partitions), not sorted. A null partition value it would expire, or the
        first value under values-time without a pattern, is a ``NullPointerException`` (a ``HarnessError``
        here) and nothing is committed; so is a TIMESTAMP partition under update-time
        (``DateTimeParseException``: its spec string does not cast back).

        Returns ``runs`` (per now: ``now``, ``expired`` as {key: value} maps in Paimon's order, or None when
        the check interval had not passed, and ``snapshots`` committed: id, commitKind, timeMillis,
        commitUser, commitIdentifier, totalRecordCount) and ``expired`` / ``snapshots`` over all runs."""
        cmd: dict[str, Any] = {"cmd": "expire_partitions", "table": os.fspath(table),
                               "expirationTime": str(expiration_time),
                               "now": now if isinstance(now, str) else list(now), "strategy": strategy,
                               "timestampFormatter": timestamp_formatter, "timestampPattern": timestamp_pattern,
                               "via": via}
        if check_interval is not None:
            cmd["checkInterval"] = check_interval
        if last_check is not None:
            cmd["lastCheck"] = last_check
        return self.call(cmd)

    def expire_consumers(self, table: str | os.PathLike[str], *, expire_date_time: str,
                         branch: str = "main") -> list[str]:
        """Paimon 0.9's ``ConsumerManager#expire`` on ``branch`` with the local date-time
        ``expire_date_time`` (ISO): consumer files modified before it are deleted. Returns the ids left."""
        return self.call({"cmd": "expire_consumers", "table": os.fspath(table), "branch": branch,
                          "expireDateTime": expire_date_time})["left"]

    def create_tag(self, table: str | os.PathLike[str], name: str, snapshot: int, *,
                   time_retained_ms: int | None = None) -> None:
        """Paimon's ``createTag`` (with a time retained, the tag records its creation time too)."""
        self.call({"cmd": "create_tag", "table": os.fspath(table), "name": name, "snapshot": snapshot,
                   "timeRetainedMs": time_retained_ms})

    def delete_tags(self, table: str | os.PathLike[str], names: Iterable[str]) -> None:
        """Paimon 0.9's ``deleteTag`` (``TagManager#deleteTag`` with ``TagDeletion``) of each, in order."""
        self.call({"cmd": "delete_tags", "table": os.fspath(table), "names": list(names)})

    def expire_tags(self, table: str | os.PathLike[str]) -> list[str]:
        """Paimon 0.9's ``TagTimeExpire`` at the current time; the tag names left."""
        return self.call({"cmd": "expire_tags", "table": os.fspath(table)})["left"]

    def expire_changelog(self, table: str | os.PathLike[str], *, retain_min: int, retain_max: int,
                         time_retained_ms: int, max_deletes: int) -> dict[str, Any]:
        """Paimon 0.9's ``ExpireChangelogImpl`` (decoupled changelog expiry) with these changelog settings;
        returns ``{"expired": n}``."""
        return self.call({"cmd": "expire_changelog", "table": os.fspath(table), "changelogRetainMin": retain_min,
                          "changelogRetainMax": retain_max, "changelogTimeRetainedMs": time_retained_ms,
                          "maxDeletes": max_deletes})

    def auto_tag_create(self, table: str | os.PathLike[str], options: dict[str, str]) -> list[str]:
        """Paimon 0.9's ``TagAutoCreation#run`` with ``options`` added to the table's (the previous period's
        tag, then the oldest automatically created tags beyond ``tag.num-retained-max`` deleted); the tag
        names left."""
        return self.call({"cmd": "auto_tag_create", "table": os.fspath(table), "options": dict(options)})["left"]

    def write_partitions(
        self,
        table: str | os.PathLike[str],
        *,
        partitions: Iterable[Sequence[str | None]],
        kind: str | None = None,
        partition_keys: Iterable[tuple[str, str]] | None = None,
        options: dict[str, Any] | None = None,
        commits: int = 1,
        rows_per_partition: int = 1,
        first_id: int = 0,
        seed: int = 0,
        creation_times: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Write rows into chosen partitions through Paimon 0.9's own writer, creating the table first when
        ``table`` has none.

        Creating needs ``partition_keys``: (name, type) pairs in Paimon's SQL spelling (``STRING``, ``INT``,
        ``DATE``, ``TIMESTAMP(3)``...); the columns are the keys then ``id INT, v INT, s STRING``; ``kind``
        ``"append"`` (default) or ``"pk"`` (primary key: the partition keys and ``id``, which Paimon makes NOT
        NULL, so null partition values need an append table); ``options`` are the table options (Paimon's
        defaults otherwise: ``bucket`` -1, Parquet). On an existing table the call appends: ``kind`` and
        ``partition_keys`` must be None or match it, ``options`` must be None.

        ``partitions``: one row of values per partition, each a string or None, cast to the key's type as
        Paimon casts partition specs (DATE ``"2023-01-01"``, TIMESTAMP ``"2023-01-01 10:00:00"``); ``""`` and
        non-dates such as ``"abcd"`` are ordinary values. Each of ``commits`` commits writes
        ``rows_per_partition`` rows into every partition (row j of commit c: ``id = first_id +
        c * rows_per_partition + j``, ``v`` from ``seed``, ``s = "c<c>-r<j>"``) as one APPEND snapshot
        (write-only: nothing compacts or expires), then waits until the clock is 10 ms past it.
        ``creation_times`` (ISO local date-times, one per commit) replaces the ``_CREATION_TIME`` Paimon's
        writer gave that commit's files, the time update-time expiry reads; snapshot times are the clock's.

        Returns ``snapshots`` (every snapshot: id, commitKind, timeMillis, commitUser, commitIdentifier,
        totalRecordCount), ``committed`` (the ids this call made) and ``partitions`` as
        :meth:`partitions` returns them."""
        cmd: dict[str, Any] = {"cmd": "write_partitions", "table": os.fspath(table),
                               "partitions": [list(p) for p in partitions], "commits": commits,
                               "rowsPerPartition": rows_per_partition, "firstId": first_id, "seed": seed}
        if kind is not None:
            cmd["kind"] = kind
        if partition_keys is not None:
            cmd["partitionKeys"] = [{"name": name, "type": type_} for name, type_ in partition_keys]
        if options is not None:
            cmd["options"] = {k: str(v) for k, v in options.items()}
        if creation_times is not None:
            cmd["creationTimes"] = list(creation_times)
        return self.call(cmd)

    def partitions(self, table: str | os.PathLike[str], *, snapshot: int | None = None) -> list[dict[str, Any]]:
        """The live partitions of ``snapshot`` (latest when None), sorted by path then spec, each with
        ``spec`` ({key: value} as 0.9's ``expire_partitions`` names partitions: the internal value's string,
        so DATE is epoch days and TIMESTAMP ``2023-01-01T10:00``; None for null), ``path`` (the partition
        directory, relative; null and ``""`` share ``partition.default-name``), ``files`` (live data files,
        relative to the root) and Paimon's own ``PartitionEntry`` figures ``fileCount``, ``recordCount`` and
        ``lastFileCreationTime`` (epoch ms: the newest ``_CREATION_TIME`` of the partition's ADD and DELETE
        entries, read as a local date-time in the JVM's zone, as update-time expiry compares it)."""
        cmd: dict[str, Any] = {"cmd": "partitions", "table": os.fspath(table)}
        if snapshot is not None:
            cmd["snapshot"] = snapshot
        return self.call(cmd)["partitions"]
