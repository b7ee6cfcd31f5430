"""A real HDFS for tests: Hadoop's MiniDFSCluster (``hadoop-client-minicluster`` from Maven Central) on loopback.

One NameNode and one DataNode in a JVM of their own, started in a new process group with a temporary base
directory; ``minicluster`` yields its ``hdfs://127.0.0.1:<port>`` URL and kills the whole group when it ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from tests.support.maven import java_class_path

MANAGER = "org.apache.hadoop.mapreduce.MiniHadoopClusterManager"


@contextmanager
def minicluster(workdir: str, *, timeout_s: float = 120):
    """Start HDFS (no MapReduce) on free loopback ports; yields its URL. Raises ``RuntimeError`` naming the log
    when it does not answer within ``timeout_s``."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("'java' (17+) was not found on PATH; the HDFS tests run Hadoop's MiniDFSCluster")
    cp = java_class_path("hdfs-minicluster")
    rpc, http = _free_port(), _free_port()
    while http == rpc:
        http = _free_port()
    os.makedirs(workdir, exist_ok=True)
    log_path = os.path.join(workdir, "minicluster.log")
    log = open(log_path, "wb")
    # the cluster keeps its data under <cwd>/target/test/data; -D settings reach its Configuration
    proc = subprocess.Popen(
        [java, "-Xmx512m", "-cp", cp, MANAGER, "-nomr", "-format", "-nnport", str(rpc), "-nnhttpport", str(http),
         "-D", "dfs.datanode.address=127.0.0.1:0", "-D", "dfs.datanode.http.address=127.0.0.1:0",
         "-D", "dfs.datanode.ipc.address=127.0.0.1:0"],
        cwd=workdir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    url = f"hdfs://127.0.0.1:{rpc}"
    try:
        _wait_until_writable(url, proc, log_path, timeout_s)
        yield url
    finally:
        _kill_group(proc)
        log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_writable(url: str, proc: subprocess.Popen, log_path: str, timeout_s: float) -> None:
    from hdfs_native import Client, WriteOptions

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the HDFS minicluster exited with {proc.returncode}; see {log_path}")
        try:
            client = Client(url)
            with client.create("/.probe", WriteOptions(overwrite=True)) as w:
                w.write(b"ok")  # a DataNode took the block: the cluster is out of safe mode and writable
            client.delete("/.probe", False)
            return
        except Exception as e:  # noqa: BLE001 - not up yet: connection refused, safe mode, no DataNode
            last = e
            time.sleep(0.5)
    raise RuntimeError(f"the HDFS minicluster did not answer on {url} within {timeout_s:.0f} s "
                       f"({str(last).splitlines()[0] if last else 'no attempt'}); see {log_path}")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def upload_tree(url: str, local_root: str, hdfs_root: str) -> None:
    """Copy a local directory tree to ``hdfs_root`` (a path on the cluster at ``url``)."""
    from hdfs_native import Client, WriteOptions

    client = Client(url)
    rels = [os.path.relpath(os.path.join(d, n), local_root) for d, _, files in os.walk(local_root) for n in files]

    def put(rel: str) -> None:
        with open(os.path.join(local_root, rel), "rb") as f, \
                client.create(f"{hdfs_root}/{rel}", WriteOptions(create_parent=True)) as w:
            w.write(f.read())

    # closing a file waits for the NameNode to hear of its block (often ~0.5 s here): upload side by side
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, rels))


def list_tree(url: str, hdfs_root: str) -> set[str]:
    """The files below ``hdfs_root``, relative to it."""
    from hdfs_native import Client

    try:
        found = Client(url).list_status(hdfs_root, True)
        return {s.path[len(hdfs_root) + 1:] for s in found if not s.isdir}
    except FileNotFoundError:
        return set()
