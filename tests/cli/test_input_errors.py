"""Input errors: every one exits 1 with one line on stderr, before anything is written; an unexpected
exception exits 2 with one line and a hint. Tables are written by pypaimon."""

import json
import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from lakesweep.cli.app import handle_errors
from lakesweep.cli.main import app
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.support import pypaimon_tables as pt

runner = CliRunner()
BUG_HINT = "this is a bug in lakesweep; run again with LAKESWEEP_DEBUG=1 to see the traceback and report it"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args, **env):
    return runner.invoke(app, [str(a) for a in args], env=env or None)


def lakesweep(*args, timeout=120, **env):
    """The command as a user runs it: a new interpreter, ``python -m cli``."""
    return subprocess.run([sys.executable, "-m", "lakesweep.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, **env})


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def tree(path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, files in os.walk(path) for f in files)


@pytest.fixture
def table(tmp_path):
    return pt.write_append_table(str(tmp_path / "wh"))


@pytest.fixture
def plan_file(table, tmp_path):
    out = tmp_path / "plan.parquet"
    r = run("plan", "expire", table.path, "--out", out, "--retain-min", 1, "--time-retained", "0 s",
            "--now", "2100-01-01T00:00:00Z")
    assert r.exit_code == 0, r.output
    return out


# -- output paths inside the table ----------------------------------------------------------------


def test_a_plan_is_never_written_as_the_tables_next_snapshot(table, tmp_path):
    before = tree(table.path)
    target = os.path.join(table.path, "snapshot", f"snapshot-{table.latest + 1}")
    r = run("plan", "expire", table.path, "--out", target, "--retain-min", 1)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == (f"error: --out {target} is inside the table {table.path}; "
                                        "write it outside the table directory")
    assert tree(table.path) == before


def test_an_out_path_reaching_the_table_through_a_symlink_is_refused(table, tmp_path):
    os.symlink(table.path, tmp_path / "alias")
    target = tmp_path / "alias" / "plan.parquet"
    r = run("plan", "expire", table.path, "--out", target)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == (f"error: --out {target} is inside the table {table.path}; "
                                        "write it outside the table directory")
    assert not os.path.exists(os.path.join(table.path, "plan.parquet"))


def test_a_journal_inside_the_plans_table_is_refused_before_it_is_created(table, plan_file):
    journal = os.path.join(table.path, "journal.duckdb")
    r = run("apply", plan_file, "--journal", journal)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == (f"error: --journal {journal} is inside the table {table.path}; "
                                        "write it outside the table directory")
    assert not os.path.exists(journal)


def test_resume_refuses_a_journal_inside_a_table_it_applied_to(table, plan_file):
    from lakesweep.engine.plan_io import read_plan

    journal = os.path.join(table.path, "journal.duckdb")
    with DuckDBRecorder(journal) as recorder:  # as an older lakesweep could have left it
        recorder.record_plan(read_plan(str(plan_file)), recorded_ms=1)
    r = run("resume", "--journal", journal)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == (f"error: --journal {journal} is inside the table {table.path}; "
                                        "write it outside the table directory")


def test_an_export_inside_a_journaled_table_is_refused(table, plan_file, tmp_path):
    from lakesweep.engine.plan_io import read_plan

    journal = tmp_path / "j.duckdb"
    with DuckDBRecorder(journal) as recorder:
        recorder.record_plan(read_plan(str(plan_file)), recorded_ms=1)
    target = os.path.join(table.path, "manifest", "audit.parquet")
    r = run("journal", "export", "--out", target, "--journal", journal)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == (f"error: --out {target} is inside the table {table.path}; "
                                        "write it outside the table directory")
    assert not os.path.exists(target)
    ok = run("journal", "export", "--out", tmp_path / "audit.parquet", "--journal", journal)
    assert ok.exit_code == 0, ok.output


# -- usage errors and internal errors -------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["plan", "expire", "T", "--out", "p", "--retain-min", "abc"],
         "error: Invalid value for '--retain-min': Input should be a valid integer, unable to parse string as an "
         "integer (see 'lakesweep plan expire --help')"),
        (["plan", "expire", "T"], "error: Missing option '--out'. (see 'lakesweep plan expire --help')"),
        (["show"], "error: Missing argument 'PLAN'. (see 'lakesweep show --help')"),
        (["inspect", "T", "--output", "yaml"],
         "error: Invalid value for '--output' / '-o': Value error, 'yaml' is not one of 'text', 'json'. "
         "(see 'lakesweep inspect --help')"),
        (["vacuum"], "error: No such command 'vacuum'. (see 'lakesweep --help')"),
        (["plan", "expire", "T", "--out", "p", "--bogus"],
         "error: No such option: --bogus (Possible options: --out) (see 'lakesweep plan expire --help')"),
        (["apply", "p", "--conf", "novalue"],
         "error: Invalid value for --conf: 'novalue' is not key=value (see 'lakesweep apply --help')"),
    ],
)
def test_usage_errors_exit_1_with_one_line(args, message):
    r = run(*args)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == message
    assert r.stdout == ""


def test_usage_errors_exit_1_from_the_console_entry_point(tmp_path):
    r = lakesweep("plan", "expire", tmp_path, "--out", tmp_path / "p.parquet", "--retain-min", "abc")
    assert r.returncode == 1, r.stderr
    assert one_error_line(r.stderr).startswith("error: Invalid value for '--retain-min': ")
    assert not (tmp_path / "p.parquet").exists()


def test_help_still_exits_0():
    r = lakesweep("--help")
    assert r.returncode == 0 and "Usage:" in r.stdout and r.stderr == ""
    r = run("plan", "expire", "--help")
    assert r.exit_code == 0 and "--retain-min" in r.stdout
    r = run()  # no command: the help
    assert r.exit_code == 0 and "Usage: lakesweep" in r.stdout and r.stderr == ""


def test_version_prints_the_installed_distribution_s_version():
    from importlib.metadata import version

    r = lakesweep("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"lakesweep {version('lakesweep')}\n", "")


def test_an_unexpected_exception_is_an_internal_error_with_a_hint(table, monkeypatch):
    import lakesweep.engine.paimon.inspect
    def broken(t):
        raise RuntimeError("the summary went\nwrong")

    monkeypatch.setattr(lakesweep.engine.paimon.inspect, "inspect_table", broken)
    r = run("inspect", table.path)
    assert r.exit_code == 2
    assert one_error_line(r.stderr) == f"internal error: RuntimeError: the summary went wrong; {BUG_HINT}"
    debug = run("inspect", table.path, LAKESWEEP_DEBUG="1")
    assert debug.exit_code == 2
    assert "Traceback (most recent call last):" in debug.stderr and 'in broken' in debug.stderr
    assert debug.stderr.splitlines()[-1] == f"internal error: RuntimeError: the summary went wrong; {BUG_HINT}"


def test_handle_errors_lets_typer_exit_through():
    @handle_errors
    def command():
        raise typer.Exit(3)

    with pytest.raises(typer.Exit) as e:
        command()
    assert e.value.exit_code == 3


def test_error_messages_are_not_read_as_markup(tmp_path):
    table = tmp_path / "[red]t"
    table.mkdir()
    r = run("inspect", table)
    assert r.exit_code == 1
    assert one_error_line(r.stderr) == f"error: {table}/schema: schema (is this a Paimon table?) not found"


# -- values: times, counts, locations -------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (["--now", "99999999999999999999"],
         "error: '99999999999999999999' is outside the times lakesweep handles (the years 1 to 9999, UTC)"),
        (["--now", "-99999999999999999999"],
         "error: '-99999999999999999999' is outside the times lakesweep handles (the years 1 to 9999, UTC)"),
        (["--now", "253402300800000"],
         "error: '253402300800000' is outside the times lakesweep handles (the years 1 to 9999, UTC)"),
        (["--retain-min", "99999999999999999999"],
         "error: option 'snapshot.num-retained.min' is 99999999999999999999, outside the range of a Java int "
         "(at most 2147483647)"),
        (["--max-deletes", "2147483648"],
         "error: option 'snapshot.expire.limit' is 2147483648, outside the range of a Java int (at most 2147483647)"),
        (["--time-retained", "99999999999999 d"],
         "error: '99999999999999 d' is too long a duration (at most 9223372036854775807 ms, as in Paimon)"),
    ],
)
def test_out_of_range_values_are_refused_before_the_plan_is_written(table, tmp_path, args, message):
    out = tmp_path / "p.parquet"
    r = run("plan", "expire", table.path, "--out", out, *args)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == message
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--expiration-time", "99999999 d", "--now", "2024-01-01T00:00:00Z"],
         "error: now 2024-01-01 00:00:00 (UTC) minus the expiration time 99999999 d is before the year 1, the "
         "earliest time lakesweep handles: give a shorter expiration time or a later --now"),
        (["--expiration-time", "1 d", "--now", "0001-01-01T00:00:00Z"],
         "error: now 0001-01-01 00:00:00 (UTC) minus the expiration time 1 d is before the year 1, the "
         "earliest time lakesweep handles: give a shorter expiration time or a later --now"),
    ],
)
def test_a_partition_cutoff_before_the_year_1_is_refused(table, tmp_path, args, message):
    out = tmp_path / "p.parquet"
    r = run("plan", "partitions", table.path, "--out", out, "--time-zone", "UTC", *args)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == message
    assert not out.exists()


def test_the_largest_time_lakesweep_handles_plans_and_shows(table, tmp_path):
    out = tmp_path / "p.parquet"
    r = run("plan", "expire", table.path, "--out", out, "--now", "253402300799999", "--output", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["now_ms"] == 253402300799999
    assert run("show", out).exit_code == 0


@pytest.mark.parametrize("location", ["http://example.com/t", "file://host/t"])
def test_unsupported_table_locations_exit_1_naming_the_location(location, tmp_path):
    for args in (["inspect", location], ["plan", "expire", location, "--out", tmp_path / "p.parquet"]):
        r = run(*args)
        assert r.exit_code == 1, r.output
        line = one_error_line(r.stderr)
        assert line.startswith("error: ") and location in line
    assert not (tmp_path / "p.parquet").exists()


@pytest.mark.parametrize("spark_args, message", [
    (["--master", "bogus[*]"],
     "error: 'bogus[*]' is not a Spark master URL: use local[*], local[N], spark://host:7077, yarn or "
     "k8s://https://host:port. Nothing was listed and no plan was written."),
    (["--master", "local[1]", "--conf", "spark.driver.memory=lots"],
     "error: Spark could not start with master 'local[1]': [JAVA_GATEWAY_EXITED] Java gateway process exited before "
     "sending its port number. Check --master and --conf; nothing was listed and no plan was written."),
])
def test_plan_orphans_on_a_spark_that_cannot_start_is_refused(table, tmp_path, spark_args, message):
    out = tmp_path / "p.parquet"
    r = lakesweep("plan", "orphans", table.path, "--out", out, "--spark", *spark_args)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-1] == message  # (the JVM may say why it exited before)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert not out.exists()


# -- metadata, branches and options, as the command reports them ----------------------------------


def test_a_snapshot_with_another_snapshots_id_stops_planning(table, tmp_path):
    path = os.path.join(table.path, "snapshot", "snapshot-3")
    with open(path) as f:
        obj = json.load(f)
    obj["id"] = table.latest
    with open(path, "w") as f:
        json.dump(obj, f)
    out = tmp_path / "p.parquet"
    r = run("plan", "expire", table.path, "--out", out, "--retain-min", 1, "--time-retained", "0 s")
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == (f"error: {path}: the snapshot JSON holds id {table.latest}, but its file "
                                        "name says 3; lakesweep will not guess which snapshot this is")
    assert not out.exists()


@pytest.mark.parametrize("command", ["inspect", "plan"])
def test_a_branch_name_that_is_a_path_is_refused(table, tmp_path, command):
    # '../../..' from branch/branch-<name> is the table root: lakesweep would plan main as if on a branch.
    os.makedirs(os.path.join(table.path, "branch", "branch-.."))
    out = tmp_path / "p.parquet"
    args = ["inspect", table.path] if command == "inspect" else ["plan", "expire", table.path, "--out", out]
    r = run(*args, "--branch", "../../..")
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == "error: branch name '../../..' is not a valid Paimon branch name: it contains '/'"
    assert not out.exists()


def test_changelog_producer_cannot_be_overridden_on_a_decoupled_table(tmp_path):
    w = pt.write_pk_table(str(tmp_path / "wh"), commits=6, options={
        "changelog-producer": "none", "changelog.num-retained.min": "50", "changelog.num-retained.max": "100"})
    out = tmp_path / "p.parquet"
    r = run("plan", "expire", w.path, "--out", out, "--retain-min", 1, "--time-retained", "0 s",
            "--option", "changelog-producer=input")
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == (
        "error: --option changelog-producer=input: the table was written with changelog-producer=none; an option "
        "that describes how a table was written cannot be overridden (drop it, or pass the table's own value)")
    assert not out.exists()
    same = run("plan", "expire", w.path, "--out", out, "--retain-min", 1, "--time-retained", "0 s",
               "--option", "changelog-producer=none", "--output", "json")
    assert same.exit_code == 0, same.output
    assert json.loads(same.stdout)["options"]["changelog-producer"] == {"source": "flag", "value": "none"}


# -- plan files that are not regular files --------------------------------------------------------


def test_show_and_apply_refuse_a_fifo_instead_of_hanging(tmp_path):
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    for command in ("show", "apply"):
        r = lakesweep(command, fifo, "--journal", tmp_path / "j.duckdb", timeout=60) if command == "apply" \
            else lakesweep(command, fifo, timeout=60)
        assert r.returncode == 1, r.stderr
        assert one_error_line(r.stderr) == f"error: plan file {fifo} is not a regular file"
    assert not (tmp_path / "j.duckdb").exists()


@pytest.mark.parametrize("path", ["/dev/null", "DIR"])
def test_show_and_apply_refuse_devices_and_directories(tmp_path, path):
    path = str(tmp_path) if path == "DIR" else path
    for args in (["show", path], ["apply", path, "--dry-run"]):
        r = run(*args)
        assert r.exit_code == 1, r.output
        assert one_error_line(r.stderr) == f"error: plan file {path} is not a regular file"


# -- journals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["resume"], ["journal", "plans"], ["journal", "files"],
                                     ["journal", "query", "SELECT 1"], ["journal", "export", "--out", "OUT"]])
def test_a_journal_that_does_not_exist_is_refused_not_created(tmp_path, command):
    journal = tmp_path / "typo.duckdb"
    args = [str(tmp_path / "x.parquet") if a == "OUT" else a for a in command]
    r = run(*args, "--journal", journal)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == f"error: journal {journal} does not exist (nothing has been applied with it yet)"
    assert not journal.exists()
    assert not (tmp_path / "x.parquet").exists()


def test_resume_over_a_journal_without_lakesweeps_tables_finds_nothing_to_resume(tmp_path):
    import duckdb

    journal = tmp_path / "j.duckdb"
    duckdb.connect(str(journal)).close()  # a kill while the journal was created: the file, no tables
    r = run("resume", "--journal", journal)
    assert r.exit_code == 0, r.output
    assert r.stdout == "Nothing to resume: every apply in the journal has finished.\n"
    assert r.stderr == ""


def test_a_journal_under_a_regular_file_is_one_clear_error(plan_file, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    journal = blocker / "j.duckdb"
    r = run("apply", plan_file, "--journal", journal)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == f"error: cannot create the journal {journal}: {blocker} is a file, not a directory"


def test_an_export_under_a_regular_file_is_one_clear_error(plan_file, tmp_path):
    from lakesweep.engine.plan_io import read_plan

    journal = tmp_path / "j.duckdb"
    with DuckDBRecorder(journal) as recorder:
        recorder.record_plan(read_plan(str(plan_file)), recorded_ms=1)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = blocker / "sub" / "audit.parquet"
    r = run("journal", "export", "--out", out, "--journal", journal)
    assert r.exit_code == 1, r.output
    assert one_error_line(r.stderr) == f"error: cannot create the export {out}: {blocker} is a file, not a directory"


def test_a_journal_whose_schema_version_is_not_a_number_names_the_file(plan_file, tmp_path):
    import duckdb

    journal = tmp_path / "j.duckdb"
    with DuckDBRecorder(journal):
        pass
    con = duckdb.connect(str(journal))
    con.execute("UPDATE meta SET value = 'one' WHERE key = 'schema_version'")
    con.close()
    for args in (["journal", "plans"], ["apply", plan_file]):
        r = run(*args, "--journal", journal)
        assert r.exit_code == 1, r.output
        assert one_error_line(r.stderr) == (f"error: journal {journal} has schema version 'one', which is not a "
                                            "number: the file is not a lakesweep journal, or it was damaged")


@pytest.mark.parametrize("target", ["DIR", "FIFO"])
def test_a_plan_out_path_that_is_not_a_file_is_refused(table, tmp_path, target):
    # (No device here: should the check ever regress, the atomic write would replace the device node.)
    if target == "DIR":
        target = str(tmp_path)
    elif target == "FIFO":
        target = str(tmp_path / "out.fifo")
        os.mkfifo(target)
    r = lakesweep("plan", "expire", table.path, "--out", target, timeout=60)
    assert r.returncode == 1, r.stderr
    assert one_error_line(r.stderr) == (f"error: --out {target} exists and is not a regular file; "
                                        "give the path of a file to write")
    assert [f for f in os.listdir(os.path.dirname(target)) if f.endswith(".tmp")] == []


def test_a_journal_or_export_that_is_a_fifo_is_refused_instead_of_hanging(plan_file, tmp_path):
    fifo = tmp_path / "j.fifo"
    os.mkfifo(fifo)
    for args in (["journal", "plans", "--journal", fifo], ["apply", plan_file, "--journal", fifo]):
        r = lakesweep(*args, timeout=60)
        assert r.returncode == 1, r.stderr
        assert one_error_line(r.stderr) == f"error: journal {fifo} is not a regular file"
    from lakesweep.engine.plan_io import read_plan

    journal = tmp_path / "j.duckdb"
    with DuckDBRecorder(journal) as recorder:
        recorder.record_plan(read_plan(str(plan_file)), recorded_ms=1)
    r = lakesweep("journal", "export", "--out", fifo, "--journal", journal, timeout=60)
    assert r.returncode == 1, r.stderr
    assert one_error_line(r.stderr) == f"error: cannot write the export {fifo}: it exists and is not a regular file"


def test_an_output_inside_an_hdfs_table_is_refused_and_one_outside_it_is_not(tmp_path):
    from lakesweep.cli.app import refuse_inside_table
    from lakesweep.engine.errors import PlanRejected

    table = "hdfs://nn:8020/wh/db.db/t"
    with pytest.raises(PlanRejected) as e:
        refuse_inside_table("hdfs://nn:8020/wh/db.db/t/plan.parquet", table, "--out", PlanRejected)
    assert str(e.value) == (f"--out hdfs://nn:8020/wh/db.db/t/plan.parquet is inside the table {table}; "
                            "write it outside the table directory")
    refuse_inside_table("hdfs://nn:8020/wh/db.db/t2/plan.parquet", table, "--out", PlanRejected)
    refuse_inside_table(str(tmp_path / "hdfs:" / "nn:8020" / "wh" / "db.db" / "t" / "p"), table, "--out", PlanRejected)
