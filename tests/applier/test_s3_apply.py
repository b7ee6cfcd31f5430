"""Plan and apply against a real S3-compatible store (SeaweedFS on loopback)."""

import json
import uuid

from typer.testing import CliRunner

from lakesweep.applier.apply import apply_plan
from lakesweep.applier.local import apply_locally
from lakesweep.cli.main import app
from lakesweep.engine.plan_io import read_plan
from tests.applier.conftest import copy_table
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.seaweed import list_tree, upload_tree
from tests.support.table_builder import all_files


def test_plan_and_apply_on_s3_match_a_local_apply(tmp_path, s3_env, spark, recorder):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    reference = copy_table(w.path, str(tmp_path / "ref"))
    apply_locally(make_plan(reference, retain_min=3))

    prefix = f"{s3_env['bucket']}/wh-{uuid.uuid4().hex[:8]}/orders"
    upload_tree(s3_env["fs"], w.path, prefix)
    location = f"s3://{prefix}"
    out = tmp_path / "plan.parquet"
    r = CliRunner().invoke(app, ["plan", "expire", location, "--out", str(out), "--retain-min", "3",
                                 "--time-retained", "0 s", "-o", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["range"] == {"begin": 1, "end": 6}

    report = apply_plan(read_plan(str(out)), recorder, spark=spark)
    assert report.state == "COMPLETED" and report.counts["DELETED"] == 14
    assert list_tree(s3_env["fs"], prefix) == all_files(reference)
    again = apply_plan(read_plan(str(out)), recorder, spark=spark)
    assert again.counts["DELETED"] == 0 and again.counts["ALREADY_ABSENT"] == 14
