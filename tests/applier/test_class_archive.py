"""The Spark driver's class archive (``applier.class_archive``): written once by the JVM of the first apply,
kept only whole, mapped by later starts, and never a reason for Spark not to start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from lakesweep.applier.class_archive import KEEP, STALE_S, SWITCH, ClassArchive, archive_dir, class_archive


def _env(tmp_path, **more) -> dict:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), **more}


def _written(archive: ClassArchive, size: int) -> None:
    archive.write.write_bytes(b"\1" * size)


def test_a_start_without_an_archive_writes_one_that_is_kept_under_its_size_once_the_jvm_exited(tmp_path):
    env = _env(tmp_path)
    assert class_archive(write=False, env=env) is None
    archive = class_archive(write=True, env=env)
    assert archive.use is None and archive.write.parent == archive_dir(env) == tmp_path / "cache" / "lakesweep" / \
        "spark-classes"
    assert archive.write.name.endswith(".partial")
    assert f"-XX:ArchiveClassesAtExit={archive.write} " in archive.java_options()
    _written(archive, 1234)
    final = archive.finish(0)
    assert final == archive_dir(env) / f"{archive.key}.1234.jsa" and final.read_bytes() == b"\1" * 1234
    assert not archive.write.exists()
    used = class_archive(write=True, env=env)
    assert (used.use, used.write) == (final, None)
    assert used.java_options().startswith(f"-XX:SharedArchiveFile={final} -XX:+VerifySharedSpaces ")


@pytest.mark.parametrize("exit_code, size", [(1, 1234), (None, 1234), (0, 0)])
def test_an_archive_from_a_jvm_that_failed_or_wrote_nothing_is_dropped(tmp_path, exit_code, size):
    env = _env(tmp_path)
    archive = class_archive(write=True, env=env)
    _written(archive, size)
    assert archive.finish(exit_code) is None
    assert list(archive_dir(env).iterdir()) == []


def test_an_archive_whose_size_is_not_the_one_it_was_written_with_is_deleted_not_mapped(tmp_path):
    env = _env(tmp_path)
    archive = class_archive(write=True, env=env)
    _written(archive, 1000)
    final = archive.finish(0)
    with open(final, "r+b") as f:  # truncated, as a full disk or a copy cut short leaves it
        f.truncate(600)
    assert class_archive(write=False, env=env) is None
    assert not final.exists()


def test_switched_off_nothing_is_mapped_or_written(tmp_path):
    assert class_archive(write=True, env=_env(tmp_path, **{SWITCH: "off"})) is None
    assert not (tmp_path / "cache").exists()


def test_partials_left_by_killed_processes_go_and_the_archives_mapped_last_stay(tmp_path):
    env = _env(tmp_path)
    directory = archive_dir(env)
    directory.mkdir(parents=True)
    key = class_archive(write=True, env=env).key
    stale, fresh = directory / f"{key}.1-a.partial", directory / f"{key}.2-b.partial"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (time.time() - STALE_S - 5,) * 2)
    others = []
    for i in range(KEEP + 2):  # archives of other venvs, the first the oldest
        other = directory / f"other{i}.3.jsa"
        other.write_bytes(b"abc")
        os.utime(other, (time.time() - 1000 + i,) * 2)
        others.append(other)
    archive = class_archive(write=True, env=env)
    assert not stale.exists() and fresh.exists()
    _written(archive, 10)
    final = archive.finish(0)
    assert sorted(p.name for p in directory.glob("*.jsa")) == sorted(
        [final.name] + [p.name for p in others[-(KEEP - 1):]])


class _Gateway:
    """A stand-in for pyspark's gateway whose process, like the JVM, writes the archive as its stdin closes."""

    def __init__(self, write_to, size):
        code = (f"import sys; sys.stdin.read(); open({str(write_to)!r}, 'wb').write(bytes({size}))" if size else
                "import sys; sys.stdin.read(); sys.exit(1)")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)


@pytest.mark.parametrize("launched, size", [(True, 4321), (True, 0), (False, 0)])
def test_a_start_that_fails_while_its_jvm_was_to_write_the_archive_ends_that_jvm_and_leaves_no_partial(
        tmp_path, monkeypatch, launched, size):
    from pyspark import SparkContext

    from lakesweep.applier import spark_exec

    env = _env(tmp_path)
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.setattr(SparkContext, "_jvm", None)
    started = []

    def failing_start(master, conf):  # the JVM up (or not), then the context refused, as a bad --conf is
        [write_to] = [o.split("=", 1)[1] for o in conf["spark.driver.extraJavaOptions"].split()
                      if o.startswith("-XX:ArchiveClassesAtExit=")]
        if launched:
            SparkContext._gateway = _Gateway(write_to, size)
            started.append(SparkContext._gateway.proc)
        else:
            open(write_to, "wb").close()  # a JVM that died at once may leave an empty file
        raise RuntimeError("Could not parse Master URL: 'bogus'")

    monkeypatch.setattr(spark_exec, "_start_quiet_context", failing_start)
    with pytest.raises(RuntimeError, match="Master URL"):
        spark_exec._start_jvm("bogus", {}, options_given=False, write_archive=True)
    assert SparkContext._gateway is None and spark_exec._WRITING is None
    assert all(proc.poll() is not None for proc in started)  # ended, not left to write after lakesweep exits
    names = sorted(p.name for p in archive_dir(env).iterdir())
    assert names == ([f"{class_archive(write=False, env=env).key}.{size}.jsa"] if size else [])


_START = """
import json, sys
from pyspark import SparkContext
from lakesweep.applier.executors import _SparkContext
context = _SparkContext(None, "local[1]", None)
sc = context.get()
total = sc.parallelize(range(10), 2).map(lambda x: x * 2).sum()
options = sc.getConf().get("spark.driver.extraJavaOptions")
context.stop()
print(json.dumps({"total": total, "options": options, "gateway": SparkContext._gateway is not None}))
"""


def _start(env, cwd=None) -> dict:
    r = subprocess.run([sys.executable, "-c", _START], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    if cwd is not None:  # a JVM that crashed printed its report first
        return json.loads(r.stdout.splitlines()[-1])
    return json.loads(r.stdout)  # nothing of the JVM's on stdout: the archive's messages are off


@pytest.mark.spark
@pytest.mark.slow  # five Spark JVMs one after another, some 55 s
def test_the_first_apply_context_writes_the_archive_later_ones_map_it_and_a_damaged_one_is_not_in_the_way(tmp_path):
    env = _env(tmp_path)
    directory = archive_dir(env)
    first = _start(env)
    assert first["total"] == 90 and "-XX:ArchiveClassesAtExit=" in first["options"]
    assert not first["gateway"]  # the JVM was told to exit, and waited for, to write the archive
    [final] = directory.iterdir()  # written whole and renamed: no partial left
    assert final.name.endswith(f".{final.stat().st_size}.jsa") and final.stat().st_size > 10_000_000

    second = _start(env)
    assert second["total"] == 90 and f"-XX:SharedArchiveFile={final} " in second["options"]
    assert second["gateway"]  # mapping writes nothing: the JVM goes when Python does, as before
    assert list(directory.iterdir()) == [final]

    good = final.read_bytes()
    os.chmod(final, 0o644)

    # Cut short under a name that claims the size it has now: the JVM dies mapping it (SIGBUS in Java 17),
    # the archive is deleted and the JVM started again without it.
    with open(final, "r+b") as f:
        f.truncate(len(good) // 2)
    claimed = final.with_name(f"{final.name.split('.')[0]}.{len(good) // 2}.jsa")
    final.rename(claimed)
    crashed = _start(env, cwd=tmp_path)
    assert crashed["total"] == 90 and "SharedArchiveFile" not in crashed["options"]
    assert list(directory.iterdir()) == []

    # Bytes changed inside its regions, the size as written: the JVM finds the checksums wrong and starts
    # without it.
    damaged = bytearray(good)
    for offset in range(100_000, len(good) - 64, 1_000_003):
        damaged[offset:offset + 64] = bytes(b ^ 0x5A for b in damaged[offset:offset + 64])
    final.write_bytes(damaged)
    started = _start(env)
    assert started["total"] == 90 and f"-XX:SharedArchiveFile={final} " in started["options"]
