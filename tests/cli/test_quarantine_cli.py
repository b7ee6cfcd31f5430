"""apply --quarantine as a user runs it (the CLI as a process): flags over the table's own option, what dry
runs and reports say, what show says it costs, and a real apply whose files land in the quarantine."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from lakesweep.engine.plan import Verb
from lakesweep.engine.plan_io import read_plan
from lakesweep.engine.quarantine import DEFAULT_RETENTION_MS, QUARANTINE_DIR
from tests.support import pypaimon_tables as pt
from tests.support.processes import LAKESWEEP


def cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*LAKESWEEP, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def planned(tmp_path, options=None):
    table = pt.write_append_table(str(tmp_path / "wh"), options=options)
    out = tmp_path / "plan.parquet"
    r = cli("plan", "expire", table.path, "--out", out, "--retain-min", 1, "--time-retained", "0 s",
            "--now", "2100-01-01T00:00:00Z")
    assert r.returncode == 0, r.stderr
    plan = read_plan(str(out))
    files = [a for a in plan.actions if a.verb is Verb.DELETE_FILE]
    return table.path, out, plan, files


def test_dry_run_with_quarantine_says_what_it_would_put_aside_where_and_for_how_long(tmp_path):
    root, plan_file, plan, files = planned(tmp_path)
    doc = json.loads(cli("apply", plan_file, "--dry-run", "--quarantine", "--retention", "36 h", "-o", "json").stdout)
    directory = os.path.join(root, QUARANTINE_DIR, plan.plan_id)
    assert (doc["mode"], doc["counts"]["QUARANTINED"], doc["counts"]["DELETED"]) == ("quarantine", len(files), 0)
    assert doc["quarantine"] == {"plan_id": plan.plan_id, "retention_ms": 36 * 3600 * 1000, "root": None,
                                 "directory": directory}
    assert (doc["bytes_quarantined"], doc["bytes_reclaimed"]) == (sum(a.size or 0 for a in files), 0)
    text = cli("apply", plan_file, "--dry-run", "--quarantine", "--retention", "36 h")
    assert text.returncode == 0, text.stderr
    assert f"would quarantine {len(files)}" in text.stdout
    flat = " ".join(text.stdout.split())  # long lines wrap to the terminal, never inside a path or command
    assert (f"quarantine: would put {len(files)} file(s), " in flat
            and f"aside in {directory}, kept 1 d 12 h; not reclaimed until purged ('lakesweep plan purge'). "
                f"'lakesweep restore {plan.plan_id}' brings them back." in flat), text.stdout
    assert not os.path.exists(os.path.join(root, QUARANTINE_DIR))


@pytest.mark.slow
def test_the_table_option_makes_quarantine_the_default_and_the_flags_override_it(tmp_path):
    root, plan_file, plan, files = planned(tmp_path, {"lakesweep.quarantine": "true",
                                                      "lakesweep.quarantine.retention": "3 d"})
    by_default = json.loads(cli("apply", plan_file, "--dry-run", "-o", "json").stdout)
    assert (by_default["mode"], by_default["quarantine"]["retention_ms"]) == ("quarantine", 3 * 86_400_000)
    assert by_default["counts"]["QUARANTINED"] == len(files)
    longer = json.loads(cli("apply", plan_file, "--dry-run", "--retention", "10 d", "-o", "json").stdout)
    assert longer["quarantine"]["retention_ms"] == 10 * 86_400_000
    off = json.loads(cli("apply", plan_file, "--dry-run", "--no-quarantine", "-o", "json").stdout)
    assert (off["mode"], off["quarantine"], off["counts"]["DELETED"]) == ("delete", None, len(files))


def test_a_table_without_the_option_deletes_and_a_retention_alone_is_refused(tmp_path):
    _, plan_file, _, files = planned(tmp_path)
    plain = json.loads(cli("apply", plan_file, "--dry-run", "-o", "json").stdout)
    assert (plain["mode"], plain["counts"]["DELETED"], plain["bytes_quarantined"]) == ("delete", len(files), 0)
    alone = cli("apply", plan_file, "--dry-run", "--retention", "7 d")
    assert alone.returncode == 1
    assert ("a quarantine retention or root was given, but the apply deletes: add --quarantine (or set the table "
            "option 'lakesweep.quarantine' to true)") in alone.stderr


@pytest.mark.parametrize("options, message", [
    ({"lakesweep.quarantine": "yes"}, "the table option 'lakesweep.quarantine' is 'yes'; set it to true or false"),
    ({"lakesweep.quarantine": "true", "lakesweep.quarantine.retention": "a week"},
     "the table option 'lakesweep.quarantine.retention': 'a week' is not a duration"),
])
def test_a_table_option_that_cannot_be_read_refuses_the_apply(tmp_path, options, message):
    _, plan_file, _, _ = planned(tmp_path, options)
    r = cli("apply", plan_file, "--dry-run")
    assert r.returncode == 1 and message in r.stderr, r.stderr


def test_a_quarantine_root_inside_the_table_is_refused_and_one_outside_is_used(tmp_path):
    root, plan_file, plan, files = planned(tmp_path)
    inside = cli("apply", plan_file, "--dry-run", "--quarantine", "--quarantine-root", os.path.join(root, "q"))
    assert inside.returncode == 1
    assert f"the quarantine root {root}/q is inside the table {root}; its files would be taken for orphans" in \
        inside.stderr
    outside = tmp_path / "aside"
    doc = json.loads(cli("apply", plan_file, "--dry-run", "--quarantine", "--quarantine-root", outside,
                         "-o", "json").stdout)
    assert doc["quarantine"]["directory"] == f"{outside}/{plan.plan_id}"
    assert doc["quarantine"]["retention_ms"] == DEFAULT_RETENTION_MS


def test_show_says_what_quarantine_costs_on_local_files(tmp_path):
    root, plan_file, plan, files = planned(tmp_path)
    text = cli("show", plan_file)
    assert text.returncode == 0, text.stderr
    size = sum(a.size or 0 for a in files)
    assert f"With apply --quarantine (local files): {len(files)} rename(s), one per file, no byte copied; " in \
        " ".join(text.stdout.split())
    doc = json.loads(cli("show", plan_file, "-o", "json").stdout)
    assert doc["quarantine_cost"] == {"store": "local", "files": len(files), "bytes": size, "renames": len(files),
                                      "bytes_copied": 0, "directory": os.path.join(root, QUARANTINE_DIR,
                                                                                   plan.plan_id)}


@pytest.mark.slow
def test_apply_with_quarantine_moves_every_file_and_the_journal_says_where(tmp_path):
    root, plan_file, plan, files = planned(tmp_path)
    journal = tmp_path / "j.duckdb"
    r = cli("apply", plan_file, "--quarantine", "--journal", journal, "--master", "local[1]", "-o", "json",
            timeout=600)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["state"], doc["counts"]["QUARANTINED"], doc["counts"]["DELETED"]) == (
        "COMPLETED", len(files), sum(1 for a in plan.actions if a.verb is Verb.DELETE_EMPTY_DIR))
    directory = os.path.join(root, QUARANTINE_DIR, plan.plan_id)
    for a in files:
        assert not os.path.exists(os.path.join(root, a.path)) and os.path.isfile(os.path.join(directory, a.path))
    rows = json.loads(cli("journal", "files", "--journal", journal, "--plan", plan.plan_id, "--outcome",
                          "QUARANTINED", "-o", "json").stdout)
    assert sorted((row["path"], row["moved_to"]) for row in rows) == sorted(
        (a.path, os.path.join(directory, a.path)) for a in files)
    plans = cli("journal", "plans", "--journal", journal)
    assert plans.returncode == 0, plans.stderr
