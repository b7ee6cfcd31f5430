"""Decoupled changelog expiry applied, and refused when the table moved between plan and apply or the plan
was edited: a tag inside the range (written by hand, or by Paimon), a consumer reading inside it, a
changelog written again or expired by Paimon, actions the plan's kind may not take, a file only the
earliest snapshot holds. Paimon's own snapshot expiry in between is no reason to refuse. The whole command
flow: plan, show, dry run, apply, apply again, journal, resume, verify."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.paimon.kinds import ChangelogKind
from lakesweep.engine.paimon.table import PaimonTable, open_table
from lakesweep.engine.paimon.verify import verify_table
from lakesweep.engine.plan import Action, canonical_actions
from lakesweep.engine.plan_io import read_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.changelog import plan_changelog, read_changelog
from lakesweep.planner.kinds import plan_kind
from tests.planner.conftest import FAR_FUTURE, expire
from tests.support.table_builder import ADD, DELETE, E, TableBuilder

P = dict(partition_keys=("dt",), partition_types=("STRING",))


@pytest.fixture
def decoupled(tmp_path):
    b = TableBuilder(str(tmp_path / "t"), options={"changelog.num-retained.max": "100"}, **P)
    for i in range(8):
        b.commit([E(ADD, f"f{i}", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    return b


def plan(root):
    t = open_table(root)
    opts = plan_kind("changelog", "paimon").resolve_options(t.options, retain_min=1, retain_max=1, time_retained="0 s")
    return plan_changelog(t, now_ms=FAR_FUTURE, options=opts, read=read_changelog(t, now_ms=FAR_FUTURE, options=opts))


def apply(p, tmp_path):
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        return apply_plan(p, recorder, executor=DriverExecutor())


def test_apply_expires_the_range_and_moves_the_hint(decoupled, tmp_path):
    p = plan(decoupled.root)
    assert (p.begin, p.end) == (1, 7)
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole and report.hint == 7
    t = PaimonTable(decoupled.root)
    assert t.list_changelog_ids() == [7] and t.read_hint("EARLIEST", t.changelog_dir) == 7


def test_a_tag_inside_the_range_between_plan_and_apply_refuses_the_plan(decoupled, tmp_path):
    p = plan(decoupled.root)
    src = Path(decoupled.root, "changelog", "changelog-4")
    Path(decoupled.root, "tag").mkdir(exist_ok=True)
    Path(decoupled.root, "tag", "tag-late").write_text(src.read_text())
    with pytest.raises(StalePlan, match="tag 'late' was added at snapshot 4"):
        apply(p, tmp_path)
    assert src.exists()


def test_a_consumer_reading_inside_the_range_refuses_the_plan(decoupled, tmp_path):
    p = plan(decoupled.root)
    decoupled.consumer("job", 2)
    with pytest.raises(StalePlan, match="consumer 'job' now reads from snapshot 2"):
        apply(p, tmp_path)


def test_a_changelog_written_again_refuses_the_plan(decoupled, tmp_path):
    p = plan(decoupled.root)
    path = Path(decoupled.root, "changelog", "changelog-2")
    path.write_text(path.read_text().replace('"commitUser": "test"', '"commitUser": "other"'))
    with pytest.raises(StalePlan, match="changelog 2 is not the changelog the plan read"):
        apply(p, tmp_path)


def test_an_edited_plan_cannot_delete_a_changelog_outside_its_range(decoupled, tmp_path):
    p = plan(decoupled.root)
    forged = dataclasses.replace(p, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in p.actions]
        + [Action(ChangelogKind.CHANGELOG_META, "changelog/changelog-7", snapshot_id=7)]))
    with pytest.raises(PlanRejected, match=r"changelog/changelog-<id> with its id in the plan's range \[1, 7\)"):
        apply(forged, tmp_path)
    assert os.path.exists(os.path.join(decoupled.root, "changelog", "changelog-7"))


def forge(p, *extra: Action):
    """``p`` with ``extra`` actions added, as an edited plan file would hold them."""
    return dataclasses.replace(p, actions=canonical_actions([dataclasses.replace(a, action_id=-1) for a in p.actions]
                                                            + list(extra)))


def test_an_edited_hint_is_refused(decoupled, tmp_path):
    p = plan(decoupled.root)
    actions = [dataclasses.replace(a, action_id=-1, snapshot_id=8) if a.kind is ChangelogKind.WRITE_EARLIEST_HINT
               else dataclasses.replace(a, action_id=-1) for a in p.actions]
    with pytest.raises(PlanRejected, match=r"may only write changelog/EARLIEST with the plan's value 7"):
        apply(dataclasses.replace(p, actions=canonical_actions(actions)), tmp_path)
    assert PaimonTable(decoupled.root).list_changelog_ids() == list(range(1, 8))


def test_an_edited_plan_cannot_delete_a_snapshot_as_a_changelog(decoupled, tmp_path):
    p = plan(decoupled.root)
    with pytest.raises(PlanRejected, match=r"a changelog action must be changelog/changelog-<id>"):
        apply(forge(p, Action(ChangelogKind.CHANGELOG_META, "snapshot/snapshot-8", snapshot_id=5)), tmp_path)
    assert os.path.exists(os.path.join(decoupled.root, "snapshot", "snapshot-8"))


def test_an_edited_plan_cannot_delete_a_file_only_the_earliest_snapshot_holds(tmp_path):
    """g is live in snapshot 7, the earliest kept, and deleted (compacted) by 8, the latest: neither the latest
    snapshot, a tag nor a changelog holds it. The gate keeps the live earliest snapshot as well."""
    b = TableBuilder(str(tmp_path / "t"), options={"changelog.num-retained.max": "100"}, **P)
    for i in range(6):
        b.commit([E(ADD, f"f{i}", ("x",))])
    g = E(ADD, "g", ("x",), file_source=1)
    b.commit([g])
    b.commit([E(DELETE, "g", ("x",), file_source=1)])
    expire(b.root, retain_min=2, retain_max=2)
    assert PaimonTable(b.root).earliest_latest() == (7, 8)
    p = plan(b.root)
    assert (p.begin, p.end) == (1, 6)
    forged = forge(p, Action(ChangelogKind.DATA_FILE, "dt=x/bucket-0/g", snapshot_id=2, partition="dt=x", bucket=0))
    with pytest.raises(StalePlan, match="dt=x/bucket-0/g is still used by the retained snapshot 7"):
        apply(forged, tmp_path)
    assert os.path.exists(b.data_path(g))


def test_applying_twice_changes_nothing_more(decoupled, tmp_path):
    p = plan(decoupled.root)
    assert apply(p, tmp_path).state == "COMPLETED"
    again = apply(p, tmp_path)
    assert again.state == "COMPLETED" and again.whole
    assert PaimonTable(decoupled.root).list_changelog_ids() == [7]


@pytest.mark.spark
def test_plan_changelog_command_shows_dry_runs_applies_journals_and_verifies(decoupled, tmp_path):
    out, journal = tmp_path / "cl.parquet", str(tmp_path / "j.duckdb")
    runner = CliRunner()

    def run(*args, code=0):
        r = runner.invoke(app, [str(a) for a in args])
        assert r.exit_code == code, r.output
        return r

    r = run("plan", "changelog", decoupled.root, "--out", out, "--retain-min", "1", "--retain-max", "1",
            "--time-retained", "0 s")
    assert "expires changelogs [1, 7) of branch 'main', then sets the changelog EARLIEST hint to 7" in r.output
    assert "bounded by the newest changelog" in run("show", out).output
    shown = json.loads(run("show", out, "--files", "-o", "json").stdout)
    assert shown["range"] == {"begin": 1, "end": 7} and shown["bound"] == "the newest changelog"
    paths = [a["path"] for a in shown["actions"]]
    assert [x for x in paths if x.startswith("changelog/")] == [f"changelog/changelog-{i}" for i in range(1, 7)] \
        + ["changelog/EARLIEST"]
    dry = json.loads(run("apply", out, "--dry-run", "-o", "json").stdout)
    assert dry["state"] == "DRY_RUN" and dry["counts"]["DELETED"] == len(paths) - 1
    assert PaimonTable(decoupled.root).list_changelog_ids() == list(range(1, 8))
    done = json.loads(run("apply", out, "--journal", journal, "-o", "json").stdout)
    assert (done["state"], done["verify"]["whole"]) == ("COMPLETED", True)
    assert done["counts"]["DELETED"] == len(paths) - 1
    assert PaimonTable(decoupled.root).list_changelog_ids() == [7]
    run("apply", out, "--journal", journal)  # applied before: nothing more happens
    [row] = json.loads(run("journal", "plans", "--journal", journal, "-o", "json").stdout)
    assert (row["kind"], row["state"], row["whole"]) == ("changelog", "APPLIED", True)
    assert json.loads(run("resume", "--journal", journal, "-o", "json").stdout) == []
    assert json.loads(run("verify", decoupled.root, "-o", "json").stdout)["whole"] is True
    r = run("plan", "changelog", decoupled.root, "--out", tmp_path / "again.parquet", "--retain-min", "1",
            "--retain-max", "1", "--time-retained", "0 s")
    assert "No changelogs to expire" in r.output


@pytest.mark.spark
def test_plan_changelog_skip_unreadable_names_what_it_kept(tmp_path):
    b = TableBuilder(str(tmp_path / "t"), options={"changelog-producer": "input", "changelog.num-retained.max": "100"},
                     **P)
    for i in range(4):
        b.commit([E(ADD, f"data-{i}", ("x",))], changelog=[E(ADD, f"changelog-{i}", ("x",))])
    expire(b.root, retain_min=1, retain_max=1)
    gone = os.path.join(b.root, "manifest", b.snapshots[2]["changelogManifestList"])
    os.remove(gone)
    args = ["plan", "changelog", b.root, "--out", str(tmp_path / "p.parquet"), "--retain-min", "1", "--retain-max",
            "1", "--time-retained", "0 s"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 1 and "manifest list not found" in r.output and os.path.basename(gone) in r.output
    r = CliRunner().invoke(app, args + ["--skip-unreadable", "-o", "json"])
    assert r.exit_code == 0, r.output
    [warning, _] = read_plan(str(tmp_path / "p.parquet")).stats["warnings"]
    assert warning == f"{gone}: manifest list not found -> the changelog files of changelog 2 are kept"


# ---------------------------------------------------------------- Paimon between plan and apply


def paimon_decoupled(paimon_java, root, seed=7, **ops):
    paimon_java.generate(root, seed=seed, kind="pk", steps=24, partitions=2, options={"changelog-producer": "input"},
                         ops={"consumer": 0, **ops})
    paimon_java.expire(root, retain_min=3, retain_max=3, max_deletes=1000, changelog_retain_min=30,
                       changelog_retain_max=30)


def plan_now(root, retain):
    t = open_table(root)
    opts = plan_kind("changelog", "paimon").resolve_options(t.options, retain_min=retain, retain_max=retain,
                                                  time_retained="0 s", max_deletes=1000)
    now = int(time.time() * 1000)
    return plan_changelog(t, now_ms=now, options=opts, read=read_changelog(t, now_ms=now, options=opts))


@pytest.mark.java
@pytest.mark.slow
def test_paimons_snapshot_expiry_between_plan_and_apply_is_no_reason_to_refuse(paimon_java, tmp_path):
    root = str(tmp_path / "t")
    paimon_decoupled(paimon_java, root, tag=0, untag=0)
    p = plan_now(root, 12)
    assert p.actions
    before = open_table(root).earliest_latest()
    paimon_java.expire(root, retain_min=1, retain_max=1, max_deletes=1000, changelog_retain_min=30,
                       changelog_retain_max=30)
    t = open_table(root)
    assert t.earliest_latest()[0] > before[0] and before[0] in t.list_changelog_ids()
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole
    t = open_table(root)
    assert t.list_changelog_ids() == list(range(p.end, t.earliest_latest()[0]))
    assert verify_table(t).whole


@pytest.mark.java
def test_paimons_changelog_expiry_between_plan_and_apply_refuses_the_plan(paimon_java, tmp_path):
    root = str(tmp_path / "t")
    paimon_decoupled(paimon_java, root, tag=0, untag=0)
    p = plan_now(root, 12)
    paimon_java.expire_changelog(root, retain_min=16, retain_max=16, time_retained_ms=0, max_deletes=1000)
    gone = [i for i in range(p.begin, p.end) if not os.path.exists(os.path.join(root, "changelog", f"changelog-{i}"))]
    assert gone
    with pytest.raises(StalePlan, match=re.escape(f"changelog(s) {gone} of the plan's range are gone")):
        apply(p, tmp_path)
    assert verify_table(open_table(root)).whole


@pytest.mark.java
def test_a_tag_paimon_creates_on_an_expiring_changelogs_snapshot_refuses_the_plan(paimon_java, tmp_path):
    """Paimon 0.9 creates a tag on an expired snapshot when a tag already holds it (findSnapshot reads
    tags): one made that way between plan and apply, inside the plan's range, refuses the plan."""
    root = str(tmp_path / "t")
    for seed in range(20):
        shutil.rmtree(root, ignore_errors=True)
        paimon_decoupled(paimon_java, root, seed=seed)
        p = plan_now(root, 6)
        inside = sorted(t.snapshot.id for t in open_table(root).tags() if p.begin <= t.snapshot.id < p.end)
        if inside:
            break
    assert inside, "no history left a tag inside the range"
    paimon_java.create_tag(root, "late", inside[-1])
    before = {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}
    with pytest.raises(StalePlan, match=f"tag 'late' was added at snapshot {inside[-1]}"):
        apply(p, tmp_path)
    assert {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs} == before
