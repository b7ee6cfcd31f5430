"""apply --quarantine of a pypaimon table's expiry on SeaweedFS, in a versioned bucket (delete markers) and in one
without versioning (copies), then `restore`: the table is back whole, as pypaimon reads it."""

import json
import os
import uuid

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.applier.executors import SparkExecutor
from lakesweep.applier.restore import restore_plan
from lakesweep.cli.main import app
from lakesweep.engine.fileio import resolve_s3_settings
from lakesweep.engine.plan import PhaseMode, Verb
from lakesweep.engine.plan_io import read_plan
from lakesweep.engine.quarantine import QUARANTINE_DIR, QuarantineSpec, VersionedDelete
from lakesweep.engine.s3_bulk import estimate_requests
from lakesweep.engine.s3_client import s3_client
from lakesweep.engine.s3_quarantine import forget_probes as forget_copy_probes
from lakesweep.engine.units import human_bytes
from lakesweep.journal.events import FileOutcome
from tests.support import pypaimon_tables as pt
from tests.support.s3_proxy import faulty_s3
from tests.support.seaweed import VERSIONED_BUCKET, ensure_bucket, list_tree, upload_tree

pytestmark = pytest.mark.s3


def _download(s3fs, prefix: str, local: str) -> None:
    for rel in list_tree(s3fs, prefix):
        path = os.path.join(local, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with s3fs.open_input_stream(f"{prefix}/{rel}") as f, open(path, "wb") as out:
            out.write(f.read())


def _rows_by_snapshot(s3fs, warehouse: str, local: str) -> dict[int, list[tuple]]:
    """Every snapshot's rows as pypaimon reads them from a copy of what the store holds under ``warehouse``."""
    from pypaimon import CatalogFactory

    _download(s3fs, warehouse, local)
    table = CatalogFactory.create({"warehouse": local}).get_table(f"{pt.DATABASE}.demo_t")
    out = {}
    for name in sorted(os.listdir(os.path.join(local, f"{pt.DATABASE}.db", "demo_t", "snapshot"))):
        if name.startswith("snapshot-"):
            rb = table.copy({"scan.snapshot-id": name.split("-")[1]}).new_read_builder()
            data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
            out[int(name.split("-")[1])] = sorted(zip(*(data.column(c).to_pylist() for c in data.column_names)))
    return out


def test_show_prints_what_quarantine_sends_to_s3_in_each_mode(tmp_path, s3_env):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    prefix = f"{s3_env['bucket']}/wh-{uuid.uuid4().hex[:8]}/{pt.DATABASE}.db/demo_t"
    upload_tree(s3_env["fs"], w.path, prefix)
    out = tmp_path / "plan.parquet"
    r = CliRunner().invoke(app, ["plan", "expire", f"s3://{prefix}", "--out", str(out), "--retain-min", "3",
                                 "--time-retained", "0 s", "-o", "json"])
    assert r.exit_code == 0, r.output
    plan = read_plan(str(out))
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    bulk = [f"{plan.table_location}/{a.path}" for a in files if plan.phases[a.phase - 1].mode == PhaseMode.BULK]
    ordered = len(files) - len(bulk)
    writes = [a for a in plan.actions if a.verb is Verb.WRITE_FILE]
    gets = sum(a.source is not None for a in writes)
    est = estimate_requests(bulk, batch=3)
    size = sum(a.size or 0 for a in files)

    r = CliRunner().invoke(app, ["show", str(out), "--delete-batch-size", "3", "-o", "json"])
    assert r.exit_code == 0, r.output
    puts = {"PUT": len(writes)} | ({"GET": gets} if gets else {})
    assert json.loads(r.stdout)["quarantine_cost"] == {
        "store": "s3", "files": len(files), "bytes": size, "bytes_copied": size,
        "versioned": {"DELETE": est["DELETE"] + ordered, **puts, "LIST_VERSIONS": est["LIST"] + ordered},
        "copy": {"LIST": est["LIST"], "DELETE": est["DELETE"] + ordered, **puts, "COPY": len(files)}}
    text = " ".join(CliRunner().invoke(app, ["show", str(out), "--delete-batch-size", "3"]).stdout.split())
    versioned = est["DELETE"] + ordered + len(writes) + gets + est["LIST"] + ordered
    copy = est["LIST"] + est["DELETE"] + ordered + len(writes) + gets + len(files)
    assert (f"With apply --quarantine on S3, for {len(files)} file(s) ({human_bytes(size)}): on a versioned bucket "
            f"{est['DELETE'] + ordered} DELETE, ") in text
    assert f"{est['LIST'] + ordered} ListObjectVersions ({versioned} in all), nothing copied; on a bucket " in text
    assert (f"{len(files)} CopyObject ({copy} in all), and the store copies {human_bytes(size)}. 'lakesweep doctor "
            "--table' says which this bucket is.") in text


# versioned on the driver runs in the slow tier: the same requests and outcomes as on Spark tasks, which stays
@pytest.mark.parametrize("mode, on", [pytest.param("versioned", "driver", marks=pytest.mark.slow), ("copy", "driver"),
                                      pytest.param("versioned", "spark", marks=pytest.mark.spark)])
@pytest.mark.slow
def test_quarantined_expiry_on_s3_is_restored_whole(tmp_path, s3_env, recorder, mode, on, monkeypatch, request):
    bucket = ensure_bucket(VERSIONED_BUCKET, "Enabled") if mode == "versioned" else s3_env["bucket"]
    s3fs = s3_env["fs"]
    w = pt.write_demo_table(str(tmp_path / "wh"))
    warehouse = f"{bucket}/wh-{uuid.uuid4().hex[:8]}"
    prefix = f"{warehouse}/{pt.DATABASE}.db/demo_t"
    upload_tree(s3fs, w.path, prefix)
    out = tmp_path / "plan.parquet"
    r = CliRunner().invoke(app, ["plan", "expire", f"s3://{prefix}", "--out", str(out), "--retain-min", "3",
                                 "--time-retained", "0 s", "-o", "json"])
    assert r.exit_code == 0, r.output
    plan = read_plan(str(out))
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    before_files = list_tree(s3fs, prefix)
    before_rows = _rows_by_snapshot(s3fs, warehouse, str(tmp_path / "before"))
    assert sorted(before_rows) == list(range(1, 9)) and len(files) > 5

    forget_copy_probes()  # probed again through the proxy, whatever port it has
    with faulty_s3(s3_env) as proxy:  # counts the requests by kind
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        executor = DriverExecutor() if on == "driver" else SparkExecutor(request.getfixturevalue("spark"))
        report = apply_plan(plan, recorder, executor=executor, quarantine=QuarantineSpec(plan.plan_id))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_env["AWS_ENDPOINT_URL"])

    bulk = [a for a in files if plan.phases[a.phase - 1].mode == PhaseMode.BULK]
    assert bulk and len(bulk) < len(files)
    # the bulk phases' files go in one DeleteObjects per phase (fewer than 250 each), the others one by one
    assert proxy.sent["DELETE"] == len({a.phase for a in bulk})
    # copy mode: the conditional-copy probe puts a scratch key, copies it twice and deletes both
    probe = {"versioned": (0, 0), "copy": (3, 2)}[mode]
    assert proxy.sent["DELETE_ONE"] == len(files) - len(bulk) + probe[1]
    writes = sum(a.verb is Verb.WRITE_FILE for a in plan.actions)
    assert proxy.sent["PUT"] == writes + (len(files) if mode == "copy" else 0) + probe[0]  # CopyObject is a PUT
    assert (report.state, report.mode, report.counts["QUARANTINED"]) == ("COMPLETED", "quarantine", len(files))
    after = list_tree(s3fs, prefix)
    assert before_files - after == {a.path for a in files}
    quarantined = {f[len(f"{QUARANTINE_DIR}/{plan.plan_id}/"):] for f in after if f.startswith(QUARANTINE_DIR + "/")}
    records = {r.action_id: r.moved_to for r in recorder.file_records(plan_id=plan.plan_id)
               if r.outcome == FileOutcome.QUARANTINED}
    assert sorted(records) == [a.action_id for a in files]
    if mode == "versioned":
        assert quarantined == set() and all(VersionedDelete.parse(w) is not None for w in records.values())
    else:
        assert quarantined == {a.path for a in files}
        assert records == {a.action_id: f"s3://{prefix}/{QUARANTINE_DIR}/{plan.plan_id}/{a.path}" for a in files}
    assert 3 not in _rows_by_snapshot(s3fs, warehouse, str(tmp_path / "during"))  # expired, as the plan said

    restored = restore_plan(plan, recorder, executor=DriverExecutor())

    assert (restored.state, restored.restored, restored.refused, restored.failed) == ("COMPLETED", len(files), [], [])
    assert sorted(r.action_id for r in recorder.file_records(plan_id=plan.plan_id)
                  if r.outcome == FileOutcome.RESTORED) == sorted(records)

    # every file back, the quarantine folder empty; the expiry's EARLIEST hint is a write, not undone
    assert list_tree(s3fs, prefix) == before_files | {"snapshot/EARLIEST"}
    assert _rows_by_snapshot(s3fs, warehouse, str(tmp_path / "after")) == before_rows  # time travel works again


@pytest.mark.parametrize("mode", ["versioned", pytest.param("copy", marks=pytest.mark.slow)])
def test_purge_after_the_retention_deletes_exactly_the_quarantined_files_on_s3(tmp_path, s3_env, mode):
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    bucket = ensure_bucket(VERSIONED_BUCKET, "Enabled") if mode == "versioned" else s3_env["bucket"]
    s3fs = s3_env["fs"]
    w = pt.write_demo_table(str(tmp_path / "wh"))
    warehouse = f"{bucket}/wh-{uuid.uuid4().hex[:8]}"
    prefix = f"{warehouse}/{pt.DATABASE}.db/demo_t"
    upload_tree(s3fs, w.path, prefix)
    out, purge, journal = tmp_path / "plan.parquet", tmp_path / "purge.parquet", tmp_path / "j.duckdb"
    r = CliRunner().invoke(app, ["plan", "expire", f"s3://{prefix}", "--out", str(out), "--retain-min", "3",
                                 "--time-retained", "0 s", "-o", "json"])
    assert r.exit_code == 0, r.output
    plan = read_plan(str(out))
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    live = _rows_by_snapshot(s3fs, warehouse, str(tmp_path / "before"))
    with DuckDBRecorder(str(journal)) as rec:
        assert apply_plan(plan, rec, executor=DriverExecutor(),
                          quarantine=QuarantineSpec(plan.plan_id, retention_ms=0)).state == "COMPLETED"
    table_files = {f for f in list_tree(s3fs, prefix) if not f.startswith(QUARANTINE_DIR + "/")}

    r = CliRunner().invoke(app, ["plan", "purge", f"s3://{prefix}", "--journal", str(journal), "--out", str(purge),
                                 "-o", "json"])
    assert r.exit_code == 0, r.output
    with DuckDBRecorder(str(journal)) as rec:
        report = apply_plan(read_plan(str(purge)), rec, executor=DriverExecutor())
    assert (report.state, report.counts["DELETED"]) == ("COMPLETED", len(files)), report.counts
    assert list_tree(s3fs, prefix) == table_files  # the table untouched, the quarantine folder gone
    key = prefix.partition("/")[2]
    client = s3_client(resolve_s3_settings({}), max_attempts=1)
    for a in files:  # no version, no marker, no copy left of any quarantined file
        page = client.list_object_versions(Bucket=bucket, Prefix=f"{key}/{a.path}")
        assert [v["Key"] for v in page.get("Versions", []) + page.get("DeleteMarkers", [])] == []
    now = _rows_by_snapshot(s3fs, warehouse, str(tmp_path / "after"))
    assert now == {s: rows for s, rows in live.items() if s >= 6}  # the retained snapshots read as before
