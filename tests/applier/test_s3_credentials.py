"""S3 credentials: where the driver and the executors find them, and that no artifact of a run holds one.

The store is SeaweedFS with one identity (tests/support/seaweed.py), so a request signed with any other key
is refused; its secret key is the string every artifact is searched for."""

import json
import os
import subprocess
import sys
import uuid

import pytest

from lakesweep.applier.local import apply_locally
from tests.applier.conftest import copy_table
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.seaweed import ACCESS_KEY, SECRET_KEY, list_tree, upload_tree
from tests.support.table_builder import all_files

pytestmark = pytest.mark.s3

SECRET = SECRET_KEY.encode()
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
            "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION", "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def cli(*args, env, cwd):
    """The CLI in its own process, with exactly the AWS variables of ``env`` and a private temp directory."""
    base = {k: v for k, v in os.environ.items()
            if k not in AWS_VARS and k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    tmp = os.path.join(cwd, "tmp")
    os.makedirs(tmp, exist_ok=True)
    base.update(SPARK_LOCAL_IP="127.0.0.1", TMPDIR=tmp, HOME=os.path.join(cwd, "home"),
                AWS_EC2_METADATA_DISABLED="true")
    return subprocess.run([sys.executable, "-m", "lakesweep.cli", *map(str, args)], cwd=cwd, env={**base, **env},
                          capture_output=True, timeout=600)


def table_on_s3(s3, tmp_path) -> tuple[set[str], str]:
    """The demo table uploaded to S3, and the files a local apply of the same plan leaves."""
    w = pt.write_demo_table(str(tmp_path / "source"))
    prefix = f"{s3['bucket']}/cred-{uuid.uuid4().hex[:8]}/orders"
    upload_tree(s3["fs"], w.path, prefix)
    reference = copy_table(w.path, str(tmp_path / "reference"))
    apply_locally(make_plan(reference, retain_min=3))
    return all_files(reference), prefix


def files_holding(root, needle: bytes) -> list[str]:
    found = []
    for d, _, names in os.walk(root):
        for n in names:
            path = os.path.join(d, n)
            with open(path, "rb") as f:
                if needle in f.read():
                    found.append(os.path.relpath(path, root))
    return sorted(found)


@pytest.mark.spark
@pytest.mark.slow
def test_no_artifact_of_a_plan_and_an_apply_holds_the_secret_key(s3, tmp_path):
    kept, prefix = table_on_s3(s3, tmp_path)
    run = tmp_path / "run"
    (run / "events").mkdir(parents=True)
    env = {k: s3[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
    location = f"s3://{prefix}"
    outputs = []

    plan = cli("plan", "expire", location, "--out", run / "plan.parquet", "--retain-min", "3", "--time-retained",
               "0 s", "-o", "json", env=env, cwd=run)
    outputs.append(plan)
    assert plan.returncode == 0, plan.stderr[-3000:]
    # Spark's event log, uncompressed so that it can be searched; Spark's scratch space inside the run too.
    spark_conf = [f"--conf={kv}" for kv in ("spark.eventLog.enabled=true", f"spark.eventLog.dir=file://{run / 'events'}",
                                            "spark.eventLog.compress=false", f"spark.local.dir={run / 'spark-local'}")]
    apply = cli("apply", run / "plan.parquet", "--journal", run / "j.duckdb", "--master", "local[1]", "-o", "json",
                *spark_conf, env=env, cwd=run)
    outputs.append(apply)
    assert apply.returncode == 0, apply.stderr[-3000:]
    assert json.loads(apply.stdout)["counts"]["DELETED"] == 14
    assert list_tree(s3["fs"], prefix) == kept

    # The error paths: a bucket that does not exist, and an apply whose table is gone.
    missing = cli("plan", "expire", f"s3://no-such-bucket-{uuid.uuid4().hex[:6]}/orders", "--out", run / "p2.parquet",
                  "--retain-min", "3", "-o", "json", env=env, cwd=run)
    outputs.append(missing)
    assert missing.returncode == 1, missing.stderr[-3000:]
    assert b"no-such-bucket" in missing.stderr
    s3["fs"].delete_dir(prefix)
    gone = cli("apply", run / "plan.parquet", "--journal", run / "j2.duckdb", "--master", "local[1]", "-o", "json",
               *spark_conf, env=env, cwd=run)
    outputs.append(gone)
    assert gone.returncode == 1, gone.stderr[-3000:]
    assert prefix.encode() in gone.stderr, gone.stderr[-3000:]

    logged = files_holding(run / "events", b"SparkListenerApplicationStart")
    assert len(logged) == 1, logged  # the apply's event log, searched below (the refused one ran no job)
    assert files_holding(run / "events", b"spark.eventLog.enabled") == logged
    assert files_holding(run, SECRET) == []
    assert [i for i, r in enumerate(outputs) if SECRET in r.stdout or SECRET in r.stderr] == []


def shared_files(aws) -> dict[str, str]:
    """AWS shared credentials and config files with a profile ``lake`` (the store's keys) and a profile
    ``wrong`` (a wrong secret); the variables that point at them."""
    aws.mkdir()
    (aws / "credentials").write_text(f"[wrong]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = nope\n\n"
                                     f"[lake]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    (aws / "config").write_text("[profile lake]\nregion = us-east-1\n")
    return {"AWS_SHARED_CREDENTIALS_FILE": str(aws / "credentials"), "AWS_CONFIG_FILE": str(aws / "config")}


def test_the_profile_named_by_aws_profile_signs_the_requests(s3, tmp_path):
    _, prefix = table_on_s3(s3, tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    env = {"AWS_ENDPOINT_URL": s3["AWS_ENDPOINT_URL"], **shared_files(tmp_path / "aws")}
    location = f"s3://{prefix}"
    refused = cli("plan", "expire", location, "--out", run / "p0.parquet", "--retain-min", "3", "--time-retained",
                  "0 s", "-o", "json", env={**env, "AWS_PROFILE": "wrong"}, cwd=run)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert b"The request signature we calculated does not match" in refused.stderr
    assert not (run / "p0.parquet").exists()
    plan = cli("plan", "expire", location, "--out", run / "plan.parquet", "--retain-min", "3", "--time-retained",
               "0 s", "-o", "json", env={**env, "AWS_PROFILE": "lake"}, cwd=run)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert json.loads(plan.stdout)["range"] == {"begin": 1, "end": 6}
    assert files_holding(run, SECRET) == []
