"""Tag expiry planned and applied: which tags are chosen (named, time retained, --older-than,
tag.num-retained-max), branch protection, and apply's own checks when the table moves between plan and apply
(a branch or a tag created on an expiring tag's snapshot, a tag written again, an edited plan)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.cli.main import app
from lakesweep.engine.errors import PlanRejected, StalePlan
from lakesweep.engine.paimon.kinds import TagKind
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import Action, canonical_actions
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.paimon.options import resolve_tag_options
from lakesweep.planner.paimon.tags import plan_tags, read_tags

pytestmark = pytest.mark.java

def plan(root, *, now=None, **flags):
    t = open_table(root)
    flags.setdefault("system_zone", "UTC")
    opts = resolve_tag_options(t.options, **flags)
    return plan_tags(t, now_ms=now or int(time.time() * 1000), options=opts, read=read_tags(t, options=opts))


@pytest.fixture(scope="module")
def tagged_once(paimon_java, tmp_path_factory):
    """``tagged``'s table, written by Paimon once per module; tests work on copies."""
    root = str(tmp_path_factory.mktemp("tagged") / "t")
    g = paimon_java.generate(root, seed=3, kind="append", steps=16, partitions=2, ops={"consumer": 0, "tag": 0,
                                                                                         "untag": 0})
    for sid in (2, 5, 8, 11):
        paimon_java.create_tag(root, f"t{sid:03d}", sid)
    paimon_java.expire(root, retain_min=3, retain_max=3, max_deletes=1000)
    assert open_table(root).earliest_latest()[0] > 11, g["snapshots"][-1]
    return root


@pytest.fixture
def tagged(tagged_once, tmp_path):
    """A Paimon table with tags t002, t005, t008, t011 of which the first snapshots are expired."""
    root = str(tmp_path / "t")
    shutil.copytree(tagged_once, root)
    return root


def apply(p, tmp_path):
    with DuckDBRecorder(tmp_path / "j.duckdb") as recorder:
        return apply_plan(p, recorder, executor=DriverExecutor())


def test_a_named_tag_goes_with_the_files_only_it_held(tagged, tmp_path):
    p = plan(tagged, names=["t005"])
    assert [t["tag"] for t in p.scope.tags] == ["t005"] and p.scope.snapshots_gone == [5]
    kinds = {str(a.kind) for a in p.actions}
    assert "tag-file" in kinds and "tag-manifest" in kinds
    report = apply(p, tmp_path)
    assert report.state == "COMPLETED" and report.whole
    assert sorted(t.name for t in open_table(tagged).tags()) == ["t002", "t008", "t011"]


def test_an_unknown_tag_is_refused(tagged):
    with pytest.raises(PlanRejected, match="branch 'main' has no tag named 'nope'"):
        plan(tagged, names=["nope"])


def test_a_tag_whose_snapshot_still_exists_goes_alone(paimon_java, tagged, tmp_path):
    latest = open_table(tagged).earliest_latest()[1]
    paimon_java.create_tag(tagged, "fresh", latest)
    p = plan(tagged, names=["fresh"])
    assert [str(a.kind) for a in p.actions] == ["tag-file"] and p.scope.snapshots_gone == []


def test_tags_past_their_time_retained_and_older_than_go(tagged, tmp_path):
    tag_dir = os.path.join(tagged, "tag")

    def stamp(name, created, retained_s=None):
        path = Path(tag_dir, f"tag-{name}")
        obj = json.loads(path.read_text())
        obj["tagCreateTime"] = list(created)
        if retained_s is not None:
            obj["tagTimeRetained"] = retained_s
        path.write_text(json.dumps(obj))

    stamp("t002", (2024, 1, 1, 0, 0, 0, 0), 3600.0)  # retained an hour: long past
    stamp("t005", (2099, 1, 1, 0, 0, 0, 0), 3600.0)  # not yet created, as far as the clock says
    stamp("t008", (2024, 1, 1, 0, 0, 0, 0))  # no time retained: judged by its file's time, written now
    aged = 1_717_200_000_000  # 2024-06-01 00:00:00 UTC
    os.utime(os.path.join(tag_dir, "tag-t011"), ns=(aged * 1_000_000, aged * 1_000_000))
    assert [t["tag"] for t in plan(tagged).scope.tags] == ["t002"]
    p = plan(tagged, older_than="2025-01-01T00:00:00Z")
    assert [t["tag"] for t in p.scope.tags] == ["t002", "t011"]
    assert p.scope.tags[1]["reason"] == ("created 2024-06-01 00:00:00 (its file's modification time), "
                                            "before --older-than 2025-01-01 00:00:00")


def test_num_retained_max_counts_automatically_created_tags_only(tmp_path):
    from tests.support.table_builder import ADD, E, TableBuilder

    b = TableBuilder(str(tmp_path / "t"), options={"tag.automatic-creation": "process-time"})
    for i in range(5):
        b.commit([E(ADD, f"f{i}")])
    for name, sid in (("2024-01-01", 1), ("2024-01-02", 2), ("manual", 3), ("2024-01-04", 4)):
        b.tag(name, sid)
    p = plan(b.root, num_retained_max=1)
    assert [t["tag"] for t in p.scope.tags] == ["2024-01-01", "2024-01-02"]
    with pytest.raises(PlanRejected, match="this table creates none"):
        TB = TableBuilder(str(tmp_path / "u"))
        TB.commit([E(ADD, "g")])
        plan(TB.root, num_retained_max=1)


def test_a_tag_a_branch_was_created_from_is_kept(paimon_java, tagged, tmp_path):
    latest = open_table(tagged).earliest_latest()[1]
    paimon_java.create_tag(tagged, "fresh", latest)
    paimon_java.create_branch(tagged, "b1", tag="fresh")  # Paimon 0.9 branches only from a live snapshot
    p = plan(tagged, names=["fresh", "t008"])
    assert [t["tag"] for t in p.scope.tags] == ["t008"]
    assert p.stats["notes"] == ["tag 'fresh' is kept: branch 'b1' was created from it"]


def branch_from_tag(root: str, branch: str, tag: str) -> None:
    """A branch created from a tag as Paimon since 1.x creates it, also when the tag's snapshot is expired:
    the tag, a snapshot file made from it and the schema, under branch/branch-<name>/."""
    base = Path(root, "branch", f"branch-{branch}")
    data = Path(root, "tag", f"tag-{tag}").read_text()
    sid = json.loads(data)["id"]
    for d in ("tag", "snapshot", "schema"):
        (base / d).mkdir(parents=True)
    (base / "tag" / f"tag-{tag}").write_text(data)
    (base / "snapshot" / f"snapshot-{sid}").write_text(data)
    (base / "snapshot" / "LATEST").write_text(str(sid))
    for schema in Path(root, "schema").iterdir():
        (base / "schema" / schema.name).write_text(schema.read_text())


def test_a_branch_created_from_the_tag_between_plan_and_apply_refuses_the_plan(tagged, tmp_path):
    p = plan(tagged, names=["t005"])
    assert p.scope.snapshots_gone == [5]
    branch_from_tag(tagged, "late", "t005")
    with pytest.raises(StalePlan, match="tag 't005' is the tag branch 'late' was created from"):
        apply(p, tmp_path)
    assert os.path.exists(os.path.join(tagged, "tag", "tag-t005"))


def test_another_tag_on_the_snapshot_between_plan_and_apply_refuses_the_plan(tagged, tmp_path):
    p = plan(tagged, names=["t005"])
    src = Path(tagged, "tag", "tag-t005")
    Path(tagged, "tag", "tag-copy").write_text(src.read_text())
    with pytest.raises(StalePlan, match="tag 'copy'"):
        apply(p, tmp_path)
    assert os.path.exists(src)


def test_a_tag_written_again_makes_the_plan_stale(tagged, tmp_path):
    p = plan(tagged, names=["t005"])
    path = Path(tagged, "tag", "tag-t005")
    obj = json.loads(path.read_text())
    obj["tagCreateTime"] = [2024, 1, 1, 0, 0, 0, 0]
    path.write_text(json.dumps(obj))
    with pytest.raises(StalePlan, match="tag 't005' is not the tag the plan read"):
        apply(p, tmp_path)


def test_an_edited_plan_cannot_delete_a_tag_file_elsewhere(tagged, tmp_path):
    p = plan(tagged, names=["t005"])
    forged = dataclasses.replace(p, actions=canonical_actions(
        [dataclasses.replace(a, action_id=-1) for a in p.actions] + [Action(TagKind.TAG_FILE, "schema/schema-0")]))
    with pytest.raises(PlanRejected, match="tag expiry deletes tag files only as tag/tag-<name>"):
        apply(forged, tmp_path)


def test_plan_tags_command_shows_dry_runs_applies_and_journals(tagged, tmp_path):
    out, journal = tmp_path / "tags.parquet", str(tmp_path / "j.duckdb")
    runner = CliRunner()

    def run(*args):
        r = runner.invoke(app, [str(a) for a in args])
        assert r.exit_code == 0, r.output
        return r

    r = run("plan", "tags", tagged, "--out", out, "--tag", "t002", "--tag", "t011")
    assert "deletes 2 tag(s) of branch 'main', then" in r.output and "tag 't002' (snapshot 2): named" in r.output
    shown = json.loads(run("show", out, "--files", "-o", "json").stdout)
    assert (shown["plan_kind"], [t["tag"] for t in shown["tags"]]) == ("tags", ["t002", "t011"])
    files = [a["path"] for a in shown["actions"] if a["kind"] != "tag-file"]
    assert files and all(os.path.exists(os.path.join(tagged, f)) for f in files)
    dry = json.loads(run("apply", out, "--dry-run", "-o", "json").stdout)
    assert (dry["state"], dry["counts"]["DELETED"]) == ("DRY_RUN", len(shown["actions"]))
    assert sorted(t.name for t in open_table(tagged).tags()) == ["t002", "t005", "t008", "t011"]
    done = json.loads(run("apply", out, "--journal", journal, "-o", "json").stdout)
    assert (done["state"], done["verify"]["whole"], done["bytes_reclaimed"] > 0) == ("COMPLETED", True, True)
    assert sorted(t.name for t in open_table(tagged).tags()) == ["t005", "t008"]
    assert not any(os.path.exists(os.path.join(tagged, f)) for f in files)
    [row] = json.loads(run("journal", "plans", "--journal", journal, "-o", "json").stdout)
    assert (row["kind"], row["state"], row["whole"], row["deleted"]) == ("tags", "APPLIED", True, len(shown["actions"]))
    assert json.loads(run("resume", "--journal", journal, "-o", "json").stdout) == []
