"""``lakesweep show`` reads a plan in batches: the same output as showing the whole plan, nothing shown of an
edited plan, and memory that does not grow with the plan."""

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console
from typer.testing import CliRunner

from lakesweep.applier.quarantine import quarantine_cost
from lakesweep.cli import plan_cmds, render
from lakesweep.cli.main import app
from lakesweep.engine.plan_io import read_plan
from lakesweep.engine.s3_bulk import BulkRequests, estimate_requests, plan_requests
from lakesweep.engine.s3_quarantine import plan_quarantine_requests
from tests.support import pypaimon_tables as pt
from tests.support.big_plan import write_big_plan
from tests.support.processes import LAKESWEEP

COMPAT = Path(__file__).parents[1] / "compat"
runner = CliRunner()


def _whole(plan_file, *, files: bool, fmt: str, delete_batch: int, rate=None) -> str:
    """What ``show`` printed when it read the whole plan (its code before plans were read in batches)."""
    plan = read_plan(str(plan_file))
    requests = None
    if plan.table_location.startswith("s3://"):
        by_kind = plan_requests(plan, batch=delete_batch)
        total = sum(by_kind.values())
        requests = {"by_kind": by_kind, "total": total, "rate": rate, "seconds": None if rate is None else total / rate}
        cost = plan_quarantine_requests(plan, batch=delete_batch)
    else:
        cost = quarantine_cost(plan)
    stdout = io.StringIO()
    if fmt == "json":
        doc = render.plan_document(plan, files=files)
        doc.update({k: v for k, v in (("requests", requests), ("quarantine_cost", cost)) if v is not None})
        with redirect_stdout(stdout):
            render.emit_json(doc)
        return stdout.getvalue()
    console = Console(file=stdout, width=80, highlight=False, soft_wrap=True)
    saved = render.out
    render.out = console
    try:
        render.render_plan(plan, files=files)
        if requests is not None:
            kinds = ", ".join(f"{n} {kind}" for kind, n in requests["by_kind"].items())
            pace = (f"{requests['seconds']:.1f} s at {rate:g} requests/s" if rate is not None
                    else "no request budget (apply --max-requests-per-second)")
            console.print(f"Requests to the store: {kinds}; {requests['total']} in all, {pace}")
        if cost is not None:
            render.render_quarantine_cost(cost)
    finally:
        render.out = saved
    return stdout.getvalue()


def _streamed(monkeypatch, plan_file, *, files: bool, fmt: str, delete_batch: int, rate=None) -> str:
    monkeypatch.setattr(plan_cmds, "SHOW_BATCH", 3)  # batches, and DeleteObjects batches, that straddle each other
    monkeypatch.setattr(render, "out", Console(file=io.StringIO(), width=80, highlight=False, soft_wrap=True))
    args = ["show", str(plan_file), "--output", fmt, "--delete-batch-size", str(delete_batch)]
    r = runner.invoke(app, args + (["--files"] if files else []) + ([] if rate is None else
                                                                     ["--max-requests-per-second", str(rate)]))
    assert r.exit_code == 0, r.output
    return r.stdout if fmt == "json" else render.out.file.getvalue()


@pytest.fixture(scope="module")
def real_plans(tmp_path_factory):
    """Plans of tables pypaimon wrote (expiry, orphans), the stored plans of Paimon and Iceberg tables
    (tests/compat), and a plan on S3."""
    tmp = tmp_path_factory.mktemp("plans")
    table = pt.write_append_table(str(tmp / "wh"))
    plans = {}
    stray = Path(table.path) / "bucket-0" / "data-stray.orc"
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"x" * 7)
    os.utime(stray, (1_000_000_000, 1_000_000_000))
    for kind, args in (("expire", ["--retain-min", "1", "--time-retained", "0 s", "--now", "2100-01-01T00:00:00Z"]),
                       ("orphans", ["--older-than", "1 d"])):
        plans[kind] = tmp / f"{kind}.parquet"
        r = runner.invoke(app, ["plan", kind, table.path, "--out", str(plans[kind]), *args])
        assert r.exit_code == 0, r.output
    for stored in sorted((COMPAT / "v2").glob("*.parquet")):
        plans[stored.stem] = stored
    plans["v1"] = COMPAT / "v1" / "plan-v1.parquet"
    plans["s3"] = tmp / "s3.parquet"
    write_big_plan(str(plans["s3"]), 200)
    return plans


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("files", [False, True])
def test_show_in_batches_prints_what_showing_the_whole_plan_printed(real_plans, monkeypatch, fmt, files):
    for name, plan_file in real_plans.items():
        for delete_batch, rate in ((2, None), (250, 4.0)):
            expected = _whole(plan_file, files=files, fmt=fmt, delete_batch=delete_batch, rate=rate)
            got = _streamed(monkeypatch, plan_file, files=files, fmt=fmt, delete_batch=delete_batch, rate=rate)
            assert got == expected, name


def test_the_counts_are_the_same_whatever_the_batches(real_plans):
    plan = read_plan(str(real_plans["s3"]))
    paths = [f"{plan.table_location}/{a.path}" for a in plan.actions]
    fold = BulkRequests(7)
    for start in range(0, len(paths), 5):
        fold.add(paths[start:start + 5])
    # 28 DeleteObjects of 7 data files, each in its own directory, then the manifests, snapshot and hint (2)
    assert fold.counts() == estimate_requests(paths, batch=7) == {"LIST": 198, "DELETE": 29}
    batches = [plan.actions[start:start + 11] for start in range(0, len(plan.actions), 11)]
    # 196 data files and 2 manifests in bulk (66 DeleteObjects, the last with a data file and both manifests),
    # a snapshot deleted in order (HEAD, DELETE), the hint written (PUT)
    assert plan_requests(plan, batch=3, batches=batches) == plan_requests(plan, batch=3) == {
        "LIST": 197, "DELETE": 67, "HEAD": 1, "GET": 0, "PUT": 1}
    assert plan_quarantine_requests(plan, batch=3, batches=batches) == plan_quarantine_requests(plan, batch=3)


def _edited(plan_file, out) -> None:
    table = pq.read_table(str(plan_file))
    paths = table.column("path").to_pylist()
    paths[-5] = paths[-5] + ".elsewhere"
    index = table.schema.get_field_index("path")
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(paths, pa.string())), str(out))


@pytest.mark.parametrize("args", [["--files"], ["--files", "--output", "json"], ["--output", "json"], []])
def test_an_edited_plan_is_refused_before_anything_is_shown(real_plans, tmp_path, monkeypatch, args):
    edited = tmp_path / "edited.parquet"
    _edited(real_plans["s3"], edited)
    monkeypatch.setattr(plan_cmds, "SHOW_BATCH", 4)
    r = runner.invoke(app, ["show", str(edited), *args])
    stored = pq.read_schema(str(edited)).metadata[b"lakesweep.plan.id"].decode()
    assert r.exit_code == 1
    if "json" in args:  # the error alone, as every command reports one to scripts
        error = json.loads(r.stdout)["error"]
        assert (error["exit_code"], error["type"]) == (1, "PlanRejected")
        message = error["message"]
    else:
        assert r.stdout == ""
        assert r.stderr.startswith("error: ")
        message = " ".join(r.stderr.removeprefix("error: ").split())
    head, tail = message.split(" (content hash ")
    assert head == f"{edited}: the plan's content does not match its id {stored}"
    assert tail[32:] == "): the file was modified after it was written; re-run 'lakesweep plan'"


def _peak_kib(*command: str) -> int:
    """The peak RSS of ``command`` run alone, its output thrown away."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    return int(subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True,
                              check=True).stdout)


@pytest.mark.slow
def test_showing_a_million_actions_holds_one_batch(tmp_path):
    plan_file = str(tmp_path / "big.parquet")
    write_big_plan(plan_file, 1_000_000)
    whole = _peak_kib(sys.executable, "-c", f"from lakesweep.engine.plan_io import read_plan; read_plan({plan_file!r})")
    summary = _peak_kib(*LAKESWEEP, "show", plan_file, "--output", "json")
    listing = _peak_kib(*LAKESWEEP, "show", plan_file, "--files")
    # read_plan holds every action (about 800 MiB here); show holds the imports and one batch (about 180 MiB)
    assert whole > 600 * 1024
    assert summary < whole / 3 and listing < whole / 3, (whole, summary, listing)


def test_the_listing_printed_a_thousand_lines_at_a_time_is_what_a_print_per_line_gave(tmp_path):
    """Paths with markup brackets, backslashes, wide characters and more than a terminal's width."""
    from lakesweep.engine.paimon.kinds import ActionKind
    from lakesweep.engine.plan import Action, CleanupPlan, canonical_actions

    odd = ["[bold]x[/bold]", "a\\", "\\[not markup]", "\u4e2d\u6587/\U0001f600", "d/" + "x" * 200, "e [f] \\\\g"]
    actions = canonical_actions([Action(ActionKind.DATA_FILE if i % 3 else ActionKind.MANIFEST,
                                        f"p{i}/{odd[i % len(odd)]}", snapshot_id=i % 7 or None,
                                        size=None if i % 5 == 0 else i) for i in range(2_345)])
    write_big_plan(str(tmp_path / "p.parquet"), 10)
    plan = read_plan(str(tmp_path / "p.parquet"))
    plan = CleanupPlan(**{**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, "actions": actions})
    for width in (80, 200):
        console = Console(file=io.StringIO(), width=width, highlight=False, soft_wrap=True)
        expected = Console(file=io.StringIO(), width=width, highlight=False, soft_wrap=True)
        old, render.out = render.out, console
        try:
            render.render_actions(plan)
            render.out = expected
            render.out.print(f"[bold]Actions[/bold] ({len(actions)}; paths relative to "
                             f"{render.escape(plan.table_location)})")
            phase = None
            width_id = len(str(len(actions) - 1))
            for a in actions:  # one print per line, as the listing was printed
                if a.phase != phase:
                    phase = a.phase
                    render.out.print(f"  phase {render.escape(plan.phase_name(a.phase))}")
                size = (render.human_bytes(a.size) if a.size is not None else "size unknown") if a.verb.deletes \
                    else None
                fields = [str(a.action_id).rjust(width_id), render.escape(str(a.kind)), size,
                          f"snapshot {a.snapshot_id}" if a.snapshot_id is not None else None, render.escape(a.path)]
                render.out.print("    " + "  ".join(f for f in fields if f is not None))
        finally:
            render.out = old
        assert console.file.getvalue() == expected.file.getvalue()
        assert console.file.getvalue().count("\n") == len(actions) + 3
