"""The journal while apply runs: ``lakesweep apply`` of a plan of tens of thousands of orphan files, as a whole
process, with another process reading the journal in a loop meanwhile and the journal commands run as whole
processes too. Every read succeeds and sees one state of the journal, the count of files done never goes
down, and a second apply on the same journal is still refused at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from lakesweep.journal.audit import list_plans
from lakesweep.journal.duckdb_store import DuckDBRecorder, writer_pid
from tests.applier.conftest import REPO
from tests.support.table_builder import all_files
from tests.support.processes import LAKESWEEP

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ORPHANS = 30_000

READER = """
import json, os, sys, time
from lakesweep.journal.audit import list_plans
from lakesweep.journal.duckdb_store import DuckDBRecorder
journal, stop = sys.argv[1], sys.argv[2]
seen, failures = [], []
while not os.path.exists(stop):
    try:
        with DuckDBRecorder(journal, read_only=True) as r:
            plans = list_plans(r)
            records = len(r.file_records())
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
        continue
    if plans:
        p = plans[0]
        seen.append([p["state"], p["deleted"] + p["already_absent"] + p["failed"], records])
    time.sleep(0.01)
print(json.dumps({"seen": seen, "failures": failures}))
"""


def lakesweep(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([*LAKESWEEP, *map(str, args)], env=dict(os.environ, PYTHONPATH=REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def run_cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([*LAKESWEEP, *map(str, args)], env=dict(os.environ, PYTHONPATH=REPO),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def orphan_plan(tmp_path):
    """A Paimon table with ``ORPHANS`` orphan data files three days old, and the plan that deletes them."""
    from tests.applier.test_safety import Lake

    lake = Lake(tmp_path / "wh")
    lake.commit("a")
    old = time.time() - 3 * 86400
    for i in range(ORPHANS):
        d = os.path.join(lake.root, "dt=a", f"bucket-{i % 4}")
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"data-orphan-{i:06d}.parquet")
        with open(p, "w") as f:
            f.write("x")
        os.utime(p, (old, old))
    plan = tmp_path / "orphans.plan"
    done = run_cli("plan", "orphans", lake.root, "--out", plan)
    assert done.returncode == 0, done.stderr
    return lake, plan


def test_the_journal_is_read_while_apply_writes_it_and_a_second_apply_is_refused(orphan_plan, tmp_path):
    lake, plan = orphan_plan
    journal, stop = tmp_path / "journal.duckdb", tmp_path / "stop"
    apply = lakesweep("apply", plan, "--journal", journal, "--master", "local[1]", "--no-verify", "-o", "json")
    reader = None
    try:
        deadline = time.monotonic() + 120
        while writer_pid(journal) != apply.pid:  # the journal exists and the apply holds its writer lock
            assert apply.poll() is None and time.monotonic() < deadline, apply.stderr.read()
            time.sleep(0.05)
        reader = subprocess.Popen([sys.executable, "-c", READER, str(journal), str(stop)], stdout=subprocess.PIPE,
                                  env=dict(os.environ, PYTHONPATH=REPO), text=True)

        second = run_cli("apply", plan, "--journal", journal, "--master", "local[1]")
        assert second.returncode == 1
        assert second.stderr.strip() == (f"error: journal {journal} is in use by another lakesweep process "
                                         f"(pid {apply.pid}); wait for it to finish, or point --journal / "
                                         f"$LAKESWEEP_JOURNAL at another file")

        commands = []  # the journal commands, as whole processes, while the apply runs
        while apply.poll() is None:
            for args in (("plans",), ("files", "--limit", "3"), ("query", "SELECT count(*) AS n FROM file_records")):
                done = run_cli("journal", *args, "--journal", journal, "-o", "json")
                commands.append((args[0], done.returncode, done.stderr.strip(), apply.poll() is None))
        out, err = apply.communicate(timeout=300)
        assert apply.returncode == 0, err[-3000:]
        assert json.loads(out)["counts"]["DELETED"] == ORPHANS
    finally:
        stop.touch()
        if apply.poll() is None:
            apply.kill()
            apply.communicate()
        if reader is not None:
            reader_out = reader.communicate(timeout=120)[0]
    got = json.loads(reader_out)
    assert got["failures"] == []
    seen = got["seen"]
    done = [n for _, n, _ in seen]
    assert done == sorted(done), "a read saw fewer files done than an earlier one"
    assert all(n == records for _, n, records in seen), "a read saw counts and records from different states"
    assert any(0 < n < ORPHANS for n in done), f"no read during the apply: {seen[:3]} ... {seen[-3:]}"
    assert all(state == "APPLYING" for state, n, _ in seen if 0 < n < ORPHANS)
    assert {state for state, n, _ in seen if n == 0} <= {"RECORDED", "APPLYING"}  # before its first batch
    assert [c for c in commands if c[1] != 0] == []
    assert sum(during for *_, during in commands) >= 3, commands
    with DuckDBRecorder(journal, read_only=True) as r:
        (row,) = list_plans(r)
    assert (row["state"], row["deleted"]) == ("APPLIED", ORPHANS)
    assert not [f for f in all_files(lake.root) if "data-orphan-" in f]
