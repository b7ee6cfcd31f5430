"""Is this machine ready to plan and apply? The checks behind ``lakesweep doctor``.

Each check returns a ``Check`` value: what it found, and for a problem, what is wrong and the fix.
Nothing here prints, and nothing is changed: the journal check writes one temporary file beside the
journal and removes it, the table check lists the table's directory once and, on S3, puts a scratch key
outside the table twice and removes it (the conditional-write probe).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit, urlunsplit

JAVA_MIN = 17  # Spark 4 runs on Java 17 and 21
INSTALL_JAVA = (
    f"install Java {JAVA_MIN} or newer (Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless; "
    "macOS: brew install openjdk@17), then put its bin directory on PATH or set JAVA_HOME to it"
)
JOURNAL_FIX = "choose a journal in a writable directory: --journal PATH, or set LAKESWEEP_JOURNAL=PATH"
# The Avro codecs Paimon's manifest.compression can select, by their Avro names.
CODECS = ("null", "deflate", "snappy", "zstandard")
CODEC_LIBRARY = {
    "deflate": "zlib (part of Python; this Python was built without it: use another Python build)",
    "snappy": "cramjam: pip install cramjam",
    "zstandard": ("backports.zstd: pip install backports.zstd" if sys.version_info < (3, 14)
                  else "compression.zstd (part of Python 3.14; this Python was built without it)"),
}
_MASTER = re.compile(r"yarn|local(\[.*\])?|local-cluster\[.*\]|(spark|k8s)://.+")


@dataclass(frozen=True, slots=True)
class Check:
    """One check: ``found`` is what it saw, as ordered (label, value) pairs; a failed one has a
    ``problem`` and the ``fix``. Secrets are never among the values."""

    name: str
    ok: bool
    found: tuple[tuple[str, str], ...] = ()
    problem: str | None = None
    fix: str | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "status": "ok" if self.ok else "failed", "found": dict(self.found),
                "problem": self.problem, "fix": self.fix}


def run_doctor(*, master: str, conf: Mapping[str, str], journal: str, journal_source: str,
               table: str | None = None) -> list[Check]:
    """Every check, in the order they are shown: Java, Spark and its executors, Avro codecs, the
    journal, and the table's storage when ``table`` is given."""
    checks = [check_java(), check_spark(master, conf), check_codecs(), check_journal(journal, journal_source)]
    if table is not None:
        checks.append(check_table(table))
    return checks


def check_java(env: Mapping[str, str] | None = None) -> Check:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else the
    first ``java`` on PATH (pyspark/bin/spark-class); its version must be 17 or newer."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        java, source = os.path.join(home, "bin", "java"), "JAVA_HOME"
        if not os.access(java, os.X_OK):
            return Check("java", False, (("JAVA_HOME", home),), f"JAVA_HOME is {home}, which has no bin/java",
                         f"set JAVA_HOME to a Java {JAVA_MIN}+ installation (the directory holding bin/java), "
                         "or unset it to use java from PATH")
    else:
        java, source = shutil.which("java", path=env.get("PATH", os.defpath)), "PATH"
        if java is None:
            return Check("java", False, (("location", "none: JAVA_HOME is not set and no java is on PATH"),),
                         "Spark needs Java and none was found", INSTALL_JAVA)
    where = (("location", f"{os.path.realpath(java)} (from {source})"),)
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("java", False, where, f"{java} -version failed: {e}", INSTALL_JAVA)
    m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    if out.returncode != 0 or m is None:
        first = (out.stderr or out.stdout).strip().splitlines()[:1]
        return Check("java", False, where, f"{java} -version failed: {first[0] if first else out.returncode}",
                     INSTALL_JAVA)
    version = m.group(1)
    parts = version.split(".")
    major = int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(re.match(r"\d+", parts[0]).group())
    found = (("version", version), *where)
    if major < JAVA_MIN:
        return Check("java", False, found, f"Java {version} is too old: Spark 4 needs Java {JAVA_MIN} or newer",
                     INSTALL_JAVA)
    return Check("java", True, found)


def check_spark(master: str, conf: Mapping[str, str]) -> Check:
    """A Spark session starts on ``master`` with ``conf``, and its executors pass the preflight
    (applier/preflight.py): their Python imports lakesweep's executor modules, in the driver's versions."""
    try:
        from pyspark import SparkContext
    except ImportError:
        from lakesweep.applier.executors import PYSPARK_MISSING

        return Check("spark", False, (("pyspark", "not installed"),), PYSPARK_MISSING.split(", and")[0],
                     PYSPARK_MISSING.split(": ", 1)[1])

    from lakesweep.applier.preflight import check_executors, task_failure
    from lakesweep.applier.spark_exec import executor_python, spark_context
    from lakesweep.engine.errors import ExecutorEnvironmentError

    if not _MASTER.fullmatch(master.strip()):
        return Check("spark", False, (("master", master),), f"'{master}' is not a Spark master URL",
                     "pass --master local[*] (this machine), spark://HOST:7077 (a standalone cluster), yarn, "
                     "or k8s://https://HOST:PORT")
    created = SparkContext._active_spark_context is None
    started = time.monotonic()
    try:
        sc = spark_context(master, dict(conf), preflight=False)  # what apply starts
    except Exception as e:  # the session not starting is this check's finding, reported with its cause
        return Check("spark", False, (("master", master),), f"no Spark session started: {task_failure(e)}",
                     "check --master and every --conf (Spark's own message, if any, is printed above), and "
                     "that the java check passes")
    try:
        start_s = time.monotonic() - started
        actual = sc.master
        found = [("master", actual if created else f"{actual} (a session already running in this process)"),
                 ("session", f"started in {start_s:.1f} s"), ("class archive", _class_archive(sc, conf))]
        try:
            report = check_executors(sc, master=actual, choice=executor_python(master, conf))
        except ExecutorEnvironmentError as e:
            problem, _, fix = str(e).partition("\n")
            return Check("spark", False, tuple(found), problem, fix or None)
        ex = report.executor
        found += [
            ("executors' Python", f"{ex.python} (Python {ex.python_version}, on {ex.host})"),
            ("chosen by", report.python_source + ("" if report.python_exec == ex.python
                                                  else f": '{report.python_exec}'")),
            ("executors' imports", f"lakesweep {ex.lakesweep or 'unknown'}, pyarrow {ex.pyarrow}: "
                                   "the same code and versions as the driver"),
            ("preflight", f"{report.duration_ms} ms"),
        ]
        return Check("spark", True, tuple(found))
    finally:
        if created:
            sc.stop()


def _class_archive(sc, conf: Mapping[str, str]) -> str:
    """Whether the driver's JVM maps a class archive (``applier.class_archive``), and where."""
    from lakesweep.applier.class_archive import (DRIVER_OPTIONS, SWITCH, archive_dir, archive_in, switched_off,
                                                 user_options)

    found = archive_in(sc.getConf().get(DRIVER_OPTIONS) or "")
    if found is not None:
        return "{}: {}".format(*found)
    if user_options(conf):
        return f"none: --conf {DRIVER_OPTIONS} replaces lakesweep's JVM options"
    if switched_off():
        return f"none: {SWITCH}={os.environ[SWITCH]}"
    return f"none yet: the first apply writes one in {archive_dir()} (its Spark starts 2 to 3 s sooner after)"


def check_codecs() -> Check:
    """Each Avro codec Paimon can write manifests with round-trips a tiny in-memory Avro file."""
    import fastavro

    schema = fastavro.parse_schema({"type": "record", "name": "probe", "fields": [{"name": "n", "type": "long"}]})
    records = [{"n": i} for i in range(3)]
    found, missing = [], []
    for codec in CODECS:
        buf = io.BytesIO()
        try:
            fastavro.writer(buf, schema, records, codec=codec)
            buf.seek(0)
            back = list(fastavro.reader(buf))
            if back != records:
                raise ValueError(f"read back {back}, wrote {records}")
            found.append((codec, "decodes"))
        except Exception as e:  # a missing codec library surfaces as ValueError or ImportError
            found.append((codec, f"fails: {e}"))
            missing.append(codec)
    if missing:
        return Check("avro codecs", False, tuple(found),
                     f"fastavro cannot decode {', '.join(missing)}: tables whose manifests use it cannot be read",
                     "install " + "; ".join(CODEC_LIBRARY.get(c, c) for c in missing)
                     + " (reinstalling lakesweep installs them)")
    return Check("avro codecs", True, tuple(found))


def check_journal(path: str, source: str) -> Check:
    """The journal file is writable, or can be created: a temporary file beside it (or in its nearest
    existing ancestor, when the first apply still has to create its directory) is made and removed."""
    journal = Path(path).expanduser().absolute()
    found = [("path", f"{journal} ({source})")]
    if journal.exists():
        if not journal.is_file():
            return Check("journal", False, tuple(found), f"{journal} exists and is not a file", JOURNAL_FIX)
        if not os.access(journal, os.W_OK):
            return Check("journal", False, tuple(found), f"{journal} is not writable",
                         f"make it writable (chmod u+w {journal}), or {JOURNAL_FIX}")
        found.append(("state", f"exists ({journal.stat().st_size} bytes)"))
        where = journal.parent
    else:
        where = journal.parent
        while not where.exists() and where != where.parent:
            where = where.parent
        if not where.is_dir():
            return Check("journal", False, tuple(found),
                         f"{where} is a file, so the journal {journal} cannot be created under it", JOURNAL_FIX)
        found.append(("state", "absent; the first apply creates it" +
                      ("" if where == journal.parent else f" and its directory {journal.parent}")))
    try:
        fd, probe = tempfile.mkstemp(prefix=".lakesweep-doctor-", dir=where)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return Check("journal", False, tuple(found), f"cannot write in {where}: {e.strerror or e}",
                     f"make {where} writable, or {JOURNAL_FIX}")
    found.append(("writable", f"yes (a file was created and removed in {where})"))
    return Check("journal", True, tuple(found))


def check_table(location: str, env: Mapping[str, str] | None = None) -> Check:
    """The table's storage answers: for ``s3://``, the endpoint and credentials found (never their
    values) and one authenticated listing of the table's directory; for a local path, the same listing.
    The directory must hold ``schema/``, as every Paimon table does. Then whether commits can be applied
    there: on S3, the conditional-write probe (``engine.s3_conditional``), outside the table; and how
    ``apply --quarantine`` works on the table's bucket (``engine.s3_quarantine``)."""
    from lakesweep.engine.errors import StorageError
    from lakesweep.engine.fileio import fileio_for, normalize_location

    env = os.environ if env is None else env
    try:
        loc = normalize_location(location)
    except ValueError as e:
        return Check("table", False, (("location", location),), str(e),
                     "give a local path, s3://bucket/path/to/table or hdfs://namenode:port/path/to/table")
    found = [("location", loc)]
    if loc.startswith("s3://"):
        s3_found, problem = _s3_settings(env)
        found += s3_found
        if problem:
            return Check("table", False, tuple(found), problem,
                         "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither (the AWS default "
                         "chain: AWS_PROFILE, ~/.aws/credentials, instance metadata)")
    try:
        entries = fileio_for(loc).list(loc)
    except (StorageError, OSError) as e:
        return Check("table", False, tuple(found), f"listing {loc} failed: {e}", _storage_fix(loc, str(e)))
    names = sorted(e.path.rstrip("/").rsplit("/", 1)[-1] + ("/" if e.is_dir else "") for e in entries)
    found.append(("request", f"listed {loc}: {', '.join(names) if names else 'nothing'}"))
    if not entries:
        return Check("table", False, tuple(found), f"there is nothing at {loc}",
                     "check the table location: the directory holding the table's schema/ and snapshot/")
    if "schema/" not in names:
        return Check("table", False, tuple(found), f"{loc} is not a Paimon table: it has no schema/ directory",
                     "give the table's own directory (warehouse/DB.db/TABLE), which holds schema/ and snapshot/")
    found.append(("commits", _commits(fileio_for(loc), loc)))
    if loc.startswith("s3://"):
        found.append(("quarantine", _quarantine(fileio_for(loc), loc)))
    return Check("table", True, tuple(found))


def _commits(fileio, location: str) -> str:
    """Whether commits (partition drops) can be applied here: they need create-if-absent, which on S3 is a
    conditional PUT the store may ignore. Not a failure when they cannot: every other plan still applies."""
    from lakesweep.engine.errors import AtomicCreateUnsupported, StorageError

    try:
        return f"possible: {fileio.check_create_if_absent(location)}"
    except AtomicCreateUnsupported as e:
        return (f"refused: {e.reason or 'this store cannot create a file only if it is absent'}; partition drops "
                f"cannot be applied here: {AtomicCreateUnsupported.ALTERNATIVES}")
    except StorageError as e:
        return f"unknown, so refused: {e}"


def _quarantine(fileio, location: str) -> str:
    """What ``apply --quarantine`` does on this bucket (versioned: delete markers; else copies); not a failure
    when it cannot: applies without --quarantine still delete."""
    from lakesweep.engine.errors import QuarantineUnsupported, StorageError

    try:
        return f"possible: {fileio.check_quarantine(location)}"
    except QuarantineUnsupported as e:
        return f"refused: {e}"
    except StorageError as e:
        return f"unknown, so refused: {e}"


def _s3_settings(env: Mapping[str, str]) -> tuple[list[tuple[str, str]], str | None]:
    """What engine/fileio.py will use to reach S3, as (label, value) pairs with secrets named, never shown."""
    from lakesweep.engine.fileio import profile_region

    found = []
    endpoint_var = next((v for v in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL") if env.get(v)), None)
    if endpoint_var:
        found.append(("endpoint", f"{_without_userinfo(env[endpoint_var])} (from {endpoint_var})"))
    else:
        found.append(("endpoint", "AWS's own for the region (AWS_ENDPOINT_URL is not set)"))
    region_var = next((v for v in ("AWS_REGION", "AWS_DEFAULT_REGION") if env.get(v)), None)
    profile = env.get("AWS_PROFILE") or "default"
    in_profile = None if region_var else profile_region(env)
    if region_var:
        found.append(("region", f"{env[region_var]} (from {region_var})"))
    elif in_profile:
        config = env.get("AWS_CONFIG_FILE") or "~/.aws/config"
        found.append(("region", f"{in_profile} (from profile {profile!r} in {config})"))
    else:
        found.append(("region", "us-east-1 (the default)"))
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        found.append(("access key", "found (from AWS_ACCESS_KEY_ID)"))
        found.append(("secret key", "found (from AWS_SECRET_ACCESS_KEY)"))
        if env.get("AWS_SESSION_TOKEN"):
            found.append(("session token", "found (from AWS_SESSION_TOKEN)"))
        return found, None
    if key or secret:
        have, lack = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if key else ("AWS_SECRET_ACCESS_KEY",
                                                                                 "AWS_ACCESS_KEY_ID")
        found.append(("credentials", f"only {have} is set"))
        return found, f"{have} is set but {lack} is not, so neither is used"
    if env.get("AWS_PROFILE"):
        files = env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"
        found.append(("credentials", f"profile {env['AWS_PROFILE']!r} (from AWS_PROFILE), in {files} or "
                                     f"{env.get('AWS_CONFIG_FILE') or '~/.aws/config'}"))
        return found, None
    found.append(("credentials", "not in the environment: the AWS default chain (AWS_PROFILE, "
                                 "~/.aws/credentials, instance metadata)"))
    return found, None


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))


def _storage_fix(location: str, error: str) -> str:
    text = error.lower()
    if location.startswith("hdfs://"):
        return ("check that the NameNode (hdfs://host:port, its RPC port, not the web port) is reachable from this "
                "machine, that the path exists and that this user may read it")
    if not location.startswith("s3://"):
        return "check that the path exists and that this user may read it"
    if any(s in text for s in ("access_denied", "accessdenied", "invalidaccesskeyid", "signaturedoesnotmatch",
                               "forbidden", "403")):
        return ("check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) and that they "
                "may list this bucket")
    if "nosuchbucket" in text or "bucket does not exist" in text:
        return "check the bucket name in the location"
    return ("check the endpoint (AWS_ENDPOINT_URL: scheme, host and port) and the region (AWS_REGION), and that "
            "the endpoint is reachable from this machine")
