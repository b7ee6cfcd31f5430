"""Plans shown through the kind registry (planner/kinds.py): each kind describes its plans as plain data,
and one renderer shows any kind."""

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from lakesweep.cli import render
from lakesweep.cli.main import app
from lakesweep.engine.plan_io import read_plan
from lakesweep.planner.kinds import KINDS, PlanDescription, describe_plan, plan_kind
from tests.support import pypaimon_tables as pt

NOW = "2100-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return pt.write_append_table(str(tmp_path_factory.mktemp("kinds") / "wh"))


def make_plan(table, tmp_path, *args):
    out = tmp_path / "plan.parquet"
    r = CliRunner().invoke(app, ["plan", "expire", table.path, "--out", str(out), "--now", NOW, "-o", "json",
                                  *map(str, args)])
    assert r.exit_code == 0, r.output
    return read_plan(str(out))


def test_the_registry_names_every_kind_whose_actions_paimon_defines():
    from lakesweep.engine.paimon.kinds import PLAN_KINDS

    assert list(KINDS) == list(PLAN_KINDS) and {"expire", "orphans", "partitions"} <= set(KINDS)
    assert plan_kind("orphans", "paimon").name == "orphans"


def test_plan_orphans_with_nothing_old_says_so_in_json(table, tmp_path):
    out = tmp_path / "orphans.parquet"
    r = CliRunner().invoke(app, ["plan", "orphans", table.path, "--out", str(out), "--older-than",
                                 "2000-01-01 00:00:00", "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["plan_kind"], doc["nothing_to_do"], doc["older_than_ms"]) == ("orphans", True, 946684800000)
    assert describe_plan(read_plan(str(out))).nothing_label == "No orphan files"


@pytest.mark.parametrize("args, message", [
    (["--older-than", "2999-01-01T00:00:00Z"], "--older-than 2999-01-01T00:00:00Z is not before now"),
    (["--older-than", "30 min"], "--older-than 30 min keeps only files younger than 30 min"),
    (["--older-than", "soon"], "'soon' is neither epoch milliseconds nor an ISO-8601 time"),
])
def test_plan_orphans_refuses_a_bad_older_than_with_exit_code_1(table, tmp_path, args, message):
    out = tmp_path / "orphans.parquet"
    r = CliRunner().invoke(app, ["plan", "orphans", table.path, "--out", str(out), *args])
    assert r.exit_code == 1 and message in " ".join(r.output.split()), r.output
    assert not out.exists()


def test_an_expiry_describes_its_range_and_what_bounded_it(table, tmp_path):
    plan = make_plan(table, tmp_path, "--retain-min", 1, "--time-retained", "0 s")
    end = table.consumers["c1"]
    assert describe_plan(plan) == PlanDescription(
        nothing_to_do=False,
        scope=f"expires snapshots [1, {end}) — bounded by consumer; new EARLIEST hint {end}",
        nothing_label="Nothing to expire",
        notes=(f"protected: 0 candidate data files kept by tags; consumers hold the range at snapshot {end}",),
        document={"nothing_to_expire": False, "range": {"begin": 1, "end": end}, "earliest_hint": end,
                  "expirable_beyond_limit": 0},
    )


def test_an_expiry_with_nothing_to_expire_says_why(table, tmp_path):
    plan = make_plan(table, tmp_path, "--retain-min", 100)
    d = describe_plan(plan)
    assert d.nothing_to_do and d.document["nothing_to_expire"] is True
    assert d.document["range"] == {"begin": plan.begin, "end": plan.end}
    assert d.scope == f"the range is bounded by retain-min (earliest 1, latest {table.latest})."


def test_show_json_says_nothing_to_do_and_keeps_nothing_to_expire(table, tmp_path):
    make_plan(table, tmp_path, "--retain-min", 100)
    doc = json.loads(CliRunner().invoke(app, ["show", str(tmp_path / "plan.parquet"), "-o", "json"]).stdout)
    assert (doc["nothing_to_do"], doc["nothing_to_expire"]) == (True, True)
    make_plan(table, tmp_path, "--retain-min", 1, "--time-retained", "0 s")
    doc = json.loads(CliRunner().invoke(app, ["show", str(tmp_path / "plan.parquet"), "-o", "json"]).stdout)
    assert (doc["nothing_to_do"], doc["nothing_to_expire"]) == (False, False)


def test_a_plan_of_a_kind_without_an_entry_is_shown_by_its_actions(table, tmp_path, printed, monkeypatch):
    plan = make_plan(table, tmp_path, "--retain-min", 1, "--time-retained", "0 s")
    monkeypatch.delitem(KINDS, "expire")  # a plan's kind needs a scope type; its planner entry may be missing
    d = describe_plan(plan)
    assert (d.nothing_to_do, d.scope, d.notes, d.document) == (False, f"{len(plan.actions)} actions", (), {})
    render.render_plan(plan)
    out, _ = printed()
    assert "(expire)" in out.splitlines()[0]
    assert f"  {len(plan.actions)} actions" in out.splitlines() and "Actions by kind" in out
    assert render.plan_document(plan)["nothing_to_do"] is False
    assert "nothing_to_expire" not in render.plan_document(plan)


def test_a_description_is_printed_as_text_not_markup(table, tmp_path, printed, monkeypatch):
    plan = make_plan(table, tmp_path, "--retain-min", 100)
    described = PlanDescription(nothing_to_do=True, scope="[bold]kept[/bold] as written", nothing_label="[x]",
                                remaining=("[red]r[/red]",), notes=("[i]n[/i]",))
    monkeypatch.setitem(KINDS, "expire", dataclasses.replace(KINDS["expire"], describe=lambda p: described))
    render.render_plan(plan)
    out, _ = printed()
    assert "[x]: [bold]kept[/bold] as written" in out
    assert "  [red]r[/red]" in out and "  [i]n[/i]" in out


def test_make_plan_runs_any_registered_kind_with_its_own_options(table, tmp_path, monkeypatch, capsys):
    from lakesweep.cli.output import OutputFormat
    from lakesweep.cli.plan_cmds import make_plan
    from lakesweep.planner.kinds import PlanKind

    seen = {}
    expire = KINDS["expire"]

    def resolve(table_options, *, overrides, **flags):
        seen.update(flags, overrides=overrides)
        return expire.resolve_options(table_options, retain_min=1, time_retained="0 s")

    def plan(t, *, now_ms, options, read=None):
        seen["now_ms"] = now_ms
        return expire.plan(t, now_ms=now_ms, options=options)

    monkeypatch.setitem(KINDS, "sketch", PlanKind("sketch", resolve_options=resolve, plan=plan,
                                                  describe=expire.describe, format="paimon"))
    out = tmp_path / "sketch.parquet"
    make_plan("sketch", table=table.path, out=out, now="4102444800000", option=["snapshot.expire.limit=5"],
              branch="main", fmt=OutputFormat.json, older_than="1 d")
    assert seen == {"older_than": "1 d", "overrides": {"snapshot.expire.limit": "5"}, "now_ms": 4102444800000}
    doc = json.loads(capsys.readouterr().out)
    assert doc["out"] == str(out) and doc["plan_id"] == read_plan(str(out)).plan_id


def test_plan_partitions_shows_each_partition_and_apply_commits_it(tmp_path):
    from tests.applier.test_safety import Lake

    lake = Lake(tmp_path / "wh")
    for dt in ("a", "b", "a"):
        lake.commit(dt)
    out = tmp_path / "drop.parquet"
    runner = CliRunner()
    r = runner.invoke(app, ["plan", "partitions", lake.root, "--out", str(out), "--expiration-time", "1 ms",
                            "--strategy", "update-time", "--max-expires", "1", "--time-zone", "UTC"])
    assert r.exit_code == 0, r.output
    assert "drops 1 partition(s) of snapshot 3 expired by update-time" in r.output
    assert "dt=a: 2 files" in r.output and "apply commits one OVERWRITE snapshot" in r.output
    shown = json.loads(runner.invoke(app, ["show", str(out), "-o", "json"]).output)
    assert [p["partition"] for p in shown["partitions"]] == ["dt=a"] and shown["strategy"] == "update-time"
    r = runner.invoke(app, ["apply", str(out), "--journal", str(tmp_path / "j.duckdb")])
    assert r.exit_code == 0, r.output
    assert "committed: snapshot 4 (phase drop_partitions)" in r.output
    assert lake.rows() == [1]


def test_plan_partitions_without_an_expiration_time_is_refused_with_exit_code_1(table, tmp_path):
    r = CliRunner().invoke(app, ["plan", "partitions", table.path, "--out", str(tmp_path / "p.parquet")])
    assert r.exit_code == 1
    assert "no expiration time: pass --expiration-time" in r.output
    assert not (tmp_path / "p.parquet").exists()


def test_every_kind_of_the_registry_has_its_plan_command_and_the_declared_ones_are_built_from_their_entry():
    from typer.main import get_command
    from typer._click.core import Context

    from lakesweep.planner.kinds import all_kinds

    group = get_command(app).get_command(Context(get_command(app)), "plan")
    ctx = Context(group)
    assert group.list_commands(ctx) == ["expire", "orphans", "purge", "partitions", "consumers", "tags", "changelog",
                                        "rewrite-manifests", "compact"]
    assert {e.name for e in all_kinds()} == set(group.list_commands(ctx))
    consumers = group.get_command(ctx, "consumers")
    assert consumers.short_help == plan_kind("consumers", "paimon").command.short_help
    assert [p.name for p in consumers.params] == ["table", "out", "expiration_time", "branch", "now", "option", "fmt"]
    compact = group.get_command(ctx, "compact")
    assert [p.opts for p in compact.params if p.name == "apply_deletes"] == [["--apply-deletes"]]


def test_commands_other_than_plan_do_not_import_the_planners():
    import subprocess
    import sys

    code = "import sys, lakesweep.cli.main; print(sorted(m for m in sys.modules if m.startswith('lakesweep.planner')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "[]"), r.stderr


def test_the_journal_commands_do_not_import_pandas(tmp_path):
    """pyarrow imports pandas (half a second, where pypaimon installed it) the first time it converts Python
    values; the journal's commands are SQL and import what they need only, so they start without it."""
    import subprocess
    import sys

    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from tests.journal.builders import make_plan, record, started

    journal, plan = tmp_path / "j.duckdb", make_plan()
    with DuckDBRecorder(journal) as recorder:
        recorder.record_plan(plan, recorded_ms=1)
        recorder.append([started(plan)])
        recorder.record_files([record(plan, a) for a in plan.actions[:3]])
    code = ("import sys\nfrom lakesweep.cli.main import app\n"
            f"for args in ({['journal', 'plans']!r}, {['journal', 'files', '--path', '*dt=*']!r},\n"
            f"             {['journal', 'files', '--table', plan.table_location, '--output', 'json']!r}):\n"
            f"    try:\n        app(args + ['--journal', {str(journal)!r}])\n"
            f"    except SystemExit as e:\n        assert not e.code, (args, e.code)\n"
            "print('pandas' in sys.modules, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "dt=1/bucket-0" in r.stdout and r.stdout.count(plan.table_location) >= 3
    assert r.stderr.strip().splitlines()[-1] == "False"
