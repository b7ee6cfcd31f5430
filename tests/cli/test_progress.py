"""Progress on stderr: drawn for people at a terminal, never with --output json or in a pipe.

Each command runs as a user runs it, the ``lakesweep`` console script in a subprocess, with its stderr
on a pseudo-terminal (or on a pipe) and its stdout on a pipe."""

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading

import pytest

from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.engine.timeutil import parse_time_ms
from lakesweep.planner.paimon.options import resolve_expire_options
from tests.support import pypaimon_tables as pt

LAKESWEEP = os.path.join(os.path.dirname(sys.executable), "lakesweep")
NOW = "2100-01-01T00:00:00Z"
PLAN_ARGS = ("--retain-min", "3", "--time-retained", "0 s", "--now", NOW)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# What any of lakesweep's progress displays draws; none of it may reach a pipe or a JSON run.
PROGRESS_MARKS = ("manifests", "files/s", "B/s", "\x1b[?25l")


def _env():
    env = dict(os.environ, TERM="xterm-256color")
    for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS", "LINES", "LAKESWEEP_TEST_CRASH"):
        env.pop(k, None)
    return env


def run_on_terminal(*args, extra_env=None, timeout=300):
    """Run lakesweep with stderr on a 200-column pseudo-terminal: (exit code, stdout, stderr as drawn)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    chunks = []

    def pump():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal's other end has closed it
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen([LAKESWEEP, *map(str, args)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=slave, env=_env() | (extra_env or {}))
    finally:
        os.close(slave)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        reader.join(timeout=30)
        os.close(master)
    return proc.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


def run_in_pipes(*args, extra_env=None, timeout=300):
    proc = subprocess.run([LAKESWEEP, *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=_env() | (extra_env or {}), timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def drawn_lines(drawn: str) -> list[str]:
    """The lines drawn, without colours and cursor moves: of a line redrawn after a carriage return, its
    last text; a block redrawn by moving the cursor up appears once per redraw."""
    text = ANSI.sub("", drawn).replace("\r\n", "\n")  # the terminal sends each newline as CR LF
    return [line.rsplit("\r", 1)[-1].strip() for line in text.split("\n") if line.rsplit("\r", 1)[-1].strip()]


def assert_no_progress(stderr: str) -> None:
    for mark in PROGRESS_MARKS:
        assert mark not in stderr, f"progress ({mark!r}) drawn: {stderr[-2000:]!r}"


@pytest.fixture
def table(tmp_path):
    return pt.write_demo_table(str(tmp_path / "wh"))


class Counter:
    """What the plan reads, counted as the progress display counts it."""

    def __init__(self):
        self.manifests = self.files = self.bytes = 0

    def read(self, path, what, nbytes):
        self.files += 1
        self.bytes += nbytes
        self.manifests += what in ("manifest list", "manifest", "index manifest")

    def named(self, names):
        pass


def test_plan_on_a_terminal_shows_the_manifests_it_read(table, tmp_path):
    from lakesweep.cli.render import human_bytes

    counted = Counter()
    t = open_table(table.path, on_read=counted)
    plan = plan_expire(t, now_ms=parse_time_ms(NOW),
                       options=resolve_expire_options(t.options, retain_min=3, time_retained="0 s"))
    code, out, err = run_on_terminal("plan", "expire", table.path, "--out", tmp_path / "p.parquet", *PLAN_ARGS)
    assert code == 0, err
    assert f"Plan {plan.plan_id}" in out
    assert "reading metadata" in ANSI.sub("", err)
    final = drawn_lines(err)[-1]
    n = counted.manifests
    assert n > 0
    assert re.fullmatch(
        rf"read metadata ━+ {n}/{n} manifests {counted.files} files {re.escape(human_bytes(counted.bytes))} "
        r"[0-9,.]+ files/s [0-9.]+ (B|KiB|MiB|GiB)/s \d+:\d\d:\d\d", final), final
    assert_no_progress(out)


def test_plan_with_json_on_a_terminal_prints_only_json(table, tmp_path):
    code, out, err = run_on_terminal("plan", "expire", table.path, "--out", tmp_path / "p.parquet", *PLAN_ARGS,
                                     "--output", "json")
    assert code == 0, err
    assert json.loads(out)["range"] == {"begin": 1, "end": 6}
    assert err == ""


def test_plan_in_a_pipe_prints_no_progress(table, tmp_path):
    code, out, err = run_in_pipes("plan", "expire", table.path, "--out", tmp_path / "p.parquet", *PLAN_ARGS)
    assert code == 0, err
    assert "expires snapshots [1, 6)" in out
    assert err == ""


def _planned(table, tmp_path) -> str:
    plan_file = str(tmp_path / "p.parquet")
    code, out, err = run_in_pipes("plan", "expire", table.path, "--out", plan_file, *PLAN_ARGS, "--output", "json")
    assert code == 0, err
    assert json.loads(out)["stats"]["summary"]["by_kind"]["data-file"]["count"] == 1
    return plan_file


PHASE_LINE = r"{phase} +━+ {n}/{n} files \S+ \S+ / \S+ \S+ +[0-9,.]+ files/s +[0-9.]+ (B|KiB|MiB)/s +\d+:\d\d:\d\d"


def assert_phases_drawn(err: str, phases: dict) -> None:
    lines = drawn_lines(err)
    for phase, n in phases.items():
        assert any(re.fullmatch(PHASE_LINE.format(phase=phase, n=n), line) for line in lines), (phase, lines[-8:])


@pytest.mark.spark
def test_apply_on_a_terminal_shows_each_phase_with_rates(table, tmp_path):
    plan_file = _planned(table, tmp_path)
    code, out, err = run_on_terminal("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]")
    assert code == 0, err
    assert "Apply completed" in out
    assert_phases_drawn(err, {"data files": 1, "metadata": 8, "snapshots": 5, "hint": 1})
    assert_no_progress(out)


@pytest.mark.spark
@pytest.mark.slow
def test_apply_with_json_on_a_terminal_prints_only_json(table, tmp_path):
    plan_file = _planned(table, tmp_path)
    code, out, err = run_on_terminal("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]",
                                     "--output", "json")
    assert code == 0, err
    assert json.loads(out)["state"] == "COMPLETED"
    assert_no_progress(err)


@pytest.mark.spark
@pytest.mark.slow
def test_apply_in_a_pipe_prints_no_progress(table, tmp_path):
    plan_file = _planned(table, tmp_path)
    code, out, err = run_in_pipes("apply", plan_file, "--journal", tmp_path / "j.duckdb", "--master", "local[1]")
    assert code == 0, err
    assert "Apply completed" in out
    assert_no_progress(err)


def _crashed_apply(table, tmp_path) -> str:
    """An apply killed (kill -9) right after journaling the data files phase: resume has the rest to do."""
    plan_file = _planned(table, tmp_path)
    journal = str(tmp_path / "j.duckdb")
    code, out, err = run_in_pipes("apply", plan_file, "--journal", journal, "--master", "local[1]", "--output", "json",
                                  extra_env={"LAKESWEEP_TEST_CRASH": "after-journal:1"})
    assert code == -9, err
    assert out == ""
    return journal


@pytest.mark.spark
@pytest.mark.slow
def test_resume_on_a_terminal_shows_each_phase_with_rates(table, tmp_path):
    journal = _crashed_apply(table, tmp_path)
    code, out, err = run_on_terminal("resume", "--journal", journal, "--master", "local[1]")
    assert code == 0, err
    assert "Apply completed" in out and "(resumed)" in out
    assert_phases_drawn(err, {"metadata": 8, "snapshots": 5, "hint": 1})


@pytest.mark.spark
@pytest.mark.slow
def test_resume_with_json_on_a_terminal_prints_only_json(table, tmp_path):
    journal = _crashed_apply(table, tmp_path)
    code, out, err = run_on_terminal("resume", "--journal", journal, "--master", "local[1]", "--output", "json")
    assert code == 0, err
    assert [(r["state"], r["resumed"]) for r in json.loads(out)] == [("COMPLETED", True)]
    assert_no_progress(err)


def test_the_plan_total_grows_with_what_is_named_and_ends_at_what_was_read():
    from lakesweep.cli.progress import MetadataReadProgress

    reads = MetadataReadProgress()
    task = reads.bar.tasks[0]
    reads.read("/t/snapshot/snapshot-1", "snapshot", 100)
    assert (task.completed, task.total, task.fields["files"]) == (0, None, 1)
    reads.named(["list-a", "list-b"])
    reads.read("/t/manifest/list-a", "manifest list", 10)
    reads.named(["manifest-1", "manifest-2"])
    assert (task.completed, task.total) == (1, 4)
    reads.named(["manifest-1", "list-b"])  # named again: the total stays
    reads.read("/t/manifest/manifest-1", "manifest", 1000)
    assert (task.completed, task.total, task.fields["files"], task.fields["size"]) == (2, 4, 3, "1.1 KiB")
    with reads:
        pass
    assert (task.description, task.completed, task.total) == ("read metadata", 2, 2)


def test_rate_columns_average_over_the_elapsed_time():
    from rich.progress import Progress

    from lakesweep.cli.progress import RateColumn

    bar = Progress()
    task_id = bar.add_task("x", total=10, files=300, bytes=3 * 1024 * 1024)
    task = bar.tasks[0]
    task.start_time, task.stop_time = 100.0, 102.0
    assert str(RateColumn("files").render(task)) == "150 files/s"
    assert str(RateColumn("bytes").render(task)) == "1.5 MiB/s"
    bar.update(task_id, files=3)
    assert str(RateColumn("files").render(task)) == "1.5 files/s"
    with pytest.raises(ValueError):
        RateColumn("rows")

