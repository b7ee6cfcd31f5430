"""``lakesweep doctor``: every check on this machine, text and JSON, failures with their fix, S3 without secrets."""

import json
import os
import re
import socket
import subprocess
import sys
import uuid

import pytest
from typer.testing import CliRunner

from lakesweep.applier.doctor import JOURNAL_FIX, check_java, check_table
from lakesweep.cli.main import app
from lakesweep.engine.s3_conditional import forget_probes
from lakesweep.engine.s3_quarantine import forget_probes as forget_copy_probes
from tests.applier.test_preflight import lakesweep, stand_in_path, words
from tests.support import pypaimon_tables as pt
from tests.support.s3_proxy import header_dropping_proxy
from tests.support.seaweed import VERSIONED_BUCKET, ensure_bucket, list_tree, upload_tree
from tests.support.table_builder import all_files

runner = CliRunner()


def doctor(*args):
    return runner.invoke(app, ["doctor", *map(str, args)])


def java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return re.search(r'version "([^"]+)"', out.stderr).group(1)


@pytest.mark.spark
def test_doctor_json_reports_java_spark_codecs_and_journal(tmp_path):
    r = doctor("--master", "local[1]", "--journal", tmp_path / "j" / "journal.duckdb", "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["ok"] is True
    checks = {c["name"]: c for c in doc["checks"]}
    assert list(checks) == ["java", "spark", "avro codecs", "journal"]
    assert all(c["status"] == "ok" and c["problem"] is None and c["fix"] is None for c in checks.values())
    java = checks["java"]["found"]
    assert java["version"] == java_version()
    source = "JAVA_HOME" if os.environ.get("JAVA_HOME") else "PATH"
    assert java["location"].endswith(f"bin/java (from {source})")
    spark = checks["spark"]["found"]
    assert spark["executors' Python"].startswith(f"{sys.executable} (Python {sys.version.split()[0]}, on ")
    assert spark["class archive"].startswith(("mapped: ", "being written: ", "none yet: the first apply writes one"))
    assert spark["executors' imports"] == "lakesweep 0.1.0, pyarrow " + __import__("pyarrow").__version__ + \
        ": the same code and versions as the driver"
    assert checks["avro codecs"]["found"] == {c: "decodes" for c in ("null", "deflate", "snappy", "zstandard")}
    assert checks["journal"]["found"] == {
        "path": f"{tmp_path / 'j' / 'journal.duckdb'} (from --journal)",
        "state": f"absent; the first apply creates it and its directory {tmp_path / 'j'}",
        "writable": f"yes (a file was created and removed in {tmp_path})",
    }
    assert sorted(os.listdir(tmp_path)) == []  # nothing left behind, no directory created


@pytest.mark.spark
def test_doctor_text_shows_a_table_and_the_verdict(tmp_path):
    (tmp_path / "journal.duckdb").write_bytes(b"")
    r = doctor("--master", "local[1]", "--journal", tmp_path / "journal.duckdb")
    assert r.exit_code == 0, r.output
    for name in ("java", "spark", "avro codecs", "journal"):
        assert re.search(rf"│ {re.escape(name)} +│ ok +│", r.stdout), name
    assert r.stdout.rstrip().endswith("All 4 checks passed.")
    assert sorted(os.listdir(tmp_path)) == ["journal.duckdb"]


@pytest.mark.spark
def test_a_bad_master_and_a_journal_under_a_file_fail_with_their_fixes(tmp_path):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a directory")
    r = doctor("--master", "nonsense", "--journal", blocker / "j.duckdb")
    assert r.exit_code == 1, r.output
    out = words(r.stdout)
    assert ("spark: 'nonsense' is not a Spark master URL fix: pass --master local[*] (this machine), "
            "spark://HOST:7077 (a standalone cluster), yarn, or k8s://https://HOST:PORT") in out
    assert (f"journal: {blocker} is a file, so the journal {blocker / 'j.duckdb'} cannot be created under it "
            f"fix: {JOURNAL_FIX}") in out
    assert out.endswith("2 of 4 checks failed.")
    assert re.search(r"│ journal +│ FAILED +│", r.stdout) and re.search(r"│ java +│ ok +│", r.stdout)

    doc = json.loads(doctor("--master", "nonsense", "--journal", blocker / "j.duckdb", "-o", "json").stdout)
    assert doc["ok"] is False
    assert [(c["name"], c["status"]) for c in doc["checks"]] == [
        ("java", "ok"), ("spark", "failed"), ("avro codecs", "ok"), ("journal", "failed")]
    journal = doc["checks"][3]
    assert journal["fix"] == JOURNAL_FIX
    assert blocker.read_text() == "a file, not a directory"


def test_java_home_without_java_is_a_failure_with_its_fix(tmp_path):
    c = check_java({"JAVA_HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    assert not c.ok
    assert c.problem == f"JAVA_HOME is {tmp_path}, which has no bin/java"
    assert c.fix == ("set JAVA_HOME to a Java 17+ installation (the directory holding bin/java), "
                     "or unset it to use java from PATH")
    c = check_java({"PATH": str(tmp_path)})
    assert (c.ok, c.problem) == (False, "Spark needs Java and none was found")
    assert c.fix.startswith("install Java 17 or newer")


@pytest.mark.spark
def test_s3_table_check_passes_against_a_real_endpoint_and_never_prints_the_secret(tmp_path, s3_env):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    prefix = f"{s3_env['bucket']}/doctor-{uuid.uuid4().hex[:8]}/orders"
    upload_tree(s3_env["fs"], w.path, prefix)
    args = ("--master", "local[1]", "--journal", tmp_path / "j.duckdb", "--table", f"s3://{prefix}")
    r = doctor(*args, "-o", "json")
    assert r.exit_code == 0, r.output
    table = json.loads(r.stdout)["checks"][-1]
    assert table["name"] == "table" and table["status"] == "ok"
    # the probe ran once per endpoint and bucket in this process: here, or earlier at another test's location
    assert re.fullmatch(rf"possible: PutObject with If-None-Match: \* on s3://lake at {s3_env['AWS_ENDPOINT_URL']}: "
                        r"a second PutObject of s3://lake/(\S+/)?\.lakesweep-conditional-put-probe-[0-9a-f]{32} with "
                        r"If-None-Match: \* was answered 412 PreconditionFailed", table["found"].pop("commits"))
    assert re.fullmatch(r"possible: no versioning: --quarantine copies each file under _lakesweep_quarantine "
                        r"\(CopyObject, If-None-Match: \*\) before deleting it; restore copies it back; a second "
                        r"CopyObject to s3://lake/\S+-dst with If-None-Match: \* was answered 412 PreconditionFailed",
                        table["found"].pop("quarantine"))
    assert table["found"] == {
        "location": f"s3://{prefix}",
        "endpoint": f"{s3_env['AWS_ENDPOINT_URL']} (from AWS_ENDPOINT_URL)",
        "region": "us-east-1 (from AWS_REGION)",
        "access key": "found (from AWS_ACCESS_KEY_ID)",
        "secret key": "found (from AWS_SECRET_ACCESS_KEY)",
        "request": f"listed s3://{prefix}: " + ", ".join(sorted(
            n + "/" if os.path.isdir(os.path.join(w.path, n)) else n for n in os.listdir(w.path))),
    }
    text = doctor(*args)
    assert text.exit_code == 0, text.output
    assert "found (from AWS_SECRET_ACCESS_KEY)" in words(text.stdout)
    for output in (r.output, text.output):
        assert s3_env["AWS_SECRET_ACCESS_KEY"] not in output


def test_s3_table_check_names_the_endpoint_when_it_does_not_answer(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
           "AWS_REGION": "us-east-1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    c = check_table("s3://lake/t", env)
    assert not c.ok
    assert c.problem.startswith("listing s3://lake/t failed: ")
    assert c.fix == ("check the endpoint (AWS_ENDPOINT_URL: scheme, host and port) and the region (AWS_REGION), "
                     "and that the endpoint is reachable from this machine")
    assert "s3cr3t" not in repr(c)


def test_half_set_credentials_are_refused_before_any_request(monkeypatch):
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_SECRET_ACCESS_KEY": "s3cr3t"}
    c = check_table("s3://lake/t", env)
    assert (c.ok, c.problem) == (False, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not, so neither is used")
    assert dict(c.found)["credentials"] == "only AWS_SECRET_ACCESS_KEY is set" and "s3cr3t" not in repr(c)


def test_s3_table_check_says_commits_are_refused_where_the_store_ignores_if_none_match(tmp_path, s3_env,
                                                                                       monkeypatch):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    warehouse = f"{s3_env['bucket']}/doctor-{uuid.uuid4().hex[:8]}"
    upload_tree(s3_env["fs"], w.path, f"{warehouse}/default.db/orders")
    forget_probes()  # a proxy on a port an earlier one had must be probed again
    forget_copy_probes()
    with header_dropping_proxy(s3_env["AWS_ENDPOINT_URL"],
                               (s3_env["AWS_ACCESS_KEY_ID"], s3_env["AWS_SECRET_ACCESS_KEY"])) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        c = check_table(f"s3://{warehouse}/default.db/orders")
    forget_copy_probes()
    assert c.ok  # every plan but a partition drop still applies there
    quarantine = dict(c.found)["quarantine"]
    assert quarantine.startswith(f"refused: s3://{warehouse}/default.db/orders: s3://lake at {endpoint} cannot "
                                 f"quarantine files (a copy could replace an object: a second CopyObject to "
                                 f"s3://{warehouse}/.lakesweep-conditional-copy-probe-")
    commits = dict(c.found)["commits"]
    assert commits.startswith(f"refused: a second PutObject of s3://{warehouse}/.lakesweep-conditional-put-probe-")
    assert commits.endswith(" with If-None-Match: * succeeded and replaced the object: the header is ignored; "
                            "partition drops cannot be applied here: commit on a store that honours conditional "
                            "writes (PutObject with If-None-Match: *, as AWS S3 does), on HDFS or a local file "
                            "system, or with Paimon's own commit under a catalog lock (a Hive or JDBC catalog with "
                            "lock.enabled)")
    assert list_tree(s3_env["fs"], warehouse) == {f"default.db/orders/{n}" for n in all_files(w.path)}


def test_local_table_check_wants_a_paimon_table_directory(tmp_path):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    c = check_table(w.path)
    assert c.ok and dict(c.found)["commits"] == (
        "possible: link(2) of a complete temporary file: the name appears only if it is free")
    c = check_table(str(tmp_path / "wh"))
    assert not c.ok and c.problem == f"{tmp_path / 'wh'} is not a Paimon table: it has no schema/ directory"
    c = check_table(str(tmp_path / "nowhere"))
    assert not c.ok and c.problem == f"there is nothing at {tmp_path / 'nowhere'}"


@pytest.mark.spark
@pytest.mark.slow
def test_doctor_on_a_fresh_machine_path_reports_lakesweeps_interpreter_on_the_executors(tmp_path):
    path = stand_in_path(tmp_path / "stand-ins")
    r = lakesweep("doctor", "--master", "local[1]", "--journal", tmp_path / "j.duckdb", "-o", "json",
                  cwd=tmp_path, path=path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    spark = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["spark"]["found"]
    assert spark["executors' Python"].startswith(f"{sys.executable} (Python ")
    assert spark["chosen by"] == "lakesweep's own interpreter (the master runs on this machine)"


def test_an_unreachable_namenode_fails_the_table_check_with_what_to_check():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = check_table(f"hdfs://127.0.0.1:{port}/wh/t")
    assert not c.ok
    assert c.problem.startswith(f"listing hdfs://127.0.0.1:{port}/wh/t failed: hdfs://127.0.0.1:{port}/wh/t: "
                                "cannot list: Connection refused")
    assert c.fix == ("check that the NameNode (hdfs://host:port, its RPC port, not the web port) is reachable from "
                     "this machine, that the path exists and that this user may read it")


def test_s3_table_check_names_the_quarantine_mode_of_a_versioned_bucket(tmp_path, s3_env):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    location = f"{ensure_bucket(VERSIONED_BUCKET, 'Enabled')}/doctor-{uuid.uuid4().hex[:8]}/default.db/orders"
    upload_tree(s3_env["fs"], w.path, location)
    c = check_table(f"s3://{location}")
    assert c.ok and dict(c.found)["quarantine"] == (
        "possible: versioned bucket: --quarantine deletes as usual and journals each object's version id; restore "
        "removes the delete marker")


class _Conf:
    def __init__(self, options):
        self.options = options

    def get(self, key):
        return self.options if key == "spark.driver.extraJavaOptions" else None


class _Context:
    def __init__(self, options=None):
        self.conf = _Conf(options)

    def getConf(self):
        return self.conf


def test_doctor_says_whether_the_drivers_jvm_maps_a_class_archive_and_where(tmp_path, monkeypatch):
    from lakesweep.applier.doctor import _class_archive

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("LAKESWEEP_SPARK_CLASS_ARCHIVE", raising=False)
    base = "-Dlog4j2.configurationFile=file:/x -XX:+UseSerialGC"
    assert _class_archive(_Context(f"{base} -XX:SharedArchiveFile=/c/k.9.jsa -XX:+VerifySharedSpaces"), {}) == \
        "mapped: /c/k.9.jsa"
    assert _class_archive(_Context(f"{base} -XX:ArchiveClassesAtExit=/c/k.1-a.partial -Xlog:cds=off"), {}) == \
        "being written: /c/k.1-a.partial"
    assert _class_archive(_Context("-Xmx2g"), {"spark.driver.extraJavaOptions": "-Xmx2g"}) == \
        "none: --conf spark.driver.extraJavaOptions replaces lakesweep's JVM options"
    assert _class_archive(_Context(base), {}) == (
        f"none yet: the first apply writes one in {tmp_path / 'lakesweep' / 'spark-classes'} (its Spark starts 2 "
        "to 3 s sooner after)")
    monkeypatch.setenv("LAKESWEEP_SPARK_CLASS_ARCHIVE", "off")
    assert _class_archive(_Context(base), {}) == "none: LAKESWEEP_SPARK_CLASS_ARCHIVE=off"
