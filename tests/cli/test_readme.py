"""The README's command block, run for real in order (placeholders replaced), so the README cannot rot."""

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from tests.support import pypaimon_tables as pt

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> list[list[str]]:
    text = README.read_text()
    block = text.split("## Using it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        line = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).strip()  # drop optional [parts]
        if line.startswith("lakesweep "):
            commands.append(shlex.split(line)[1:])
    return commands


def test_readme_quick_start_is_the_two_commands():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [c.split("#", 1)[0].strip() for c in quick.strip().splitlines()]
    assert commands == ["./quickstart demo", "./quickstart test"]
    # CI runs the README's test command, with the fresh-machine stand-ins first on PATH
    assert 'PATH="$stand_ins:$PATH" ./quickstart test' in (README.parent / ".ci" / "run").read_text()


def test_every_readme_command_runs(tmp_path, monkeypatch):
    from tests.support import iceberg_tables as it

    w = pt.write_demo_table(str(tmp_path / "wh"))
    for key, value in it.catalog_env(tmp_path / "ice", "local").items():  # the README's Iceberg catalog "local": ns.t
        monkeypatch.setenv(key, value)
    catalog = it.sql_catalog(tmp_path / "ice", "local")
    catalog.create_namespace("ns")
    it.many_appends(catalog, "ns.t", n=6)
    subst = {"TABLE": w.path, "plan.parquet": str(tmp_path / "plan.parquet"), "j.duckdb": str(tmp_path / "j.duckdb"),
             "audit.parquet": str(tmp_path / "audit.parquet"), "orphans.parquet": str(tmp_path / "orphans.parquet"),
             "drop.parquet": str(tmp_path / "drop.parquet"), "consumers.parquet": str(tmp_path / "consumers.parquet"),
             "tags.parquet": str(tmp_path / "tags.parquet"), "changelog.parquet": str(tmp_path / "changelog.parquet"),
             "p.parquet": str(tmp_path / "p.parquet"), "report.html": str(tmp_path / "report.html")}
    commands = readme_commands()
    assert [c[0] for c in commands][:4] == ["inspect", "plan", "show", "apply"]
    runner = CliRunner()
    for args in commands:
        args = [subst.get(a, a) for a in args]
        if args[:2] == ["plan", "expire"] and "--catalog" not in args:
            i = args.index("--time-retained")
            args[i + 1] = "0 s"  # the demo table is seconds old
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)
    assert Path(subst["audit.parquet"]).exists() and Path(subst["orphans.parquet"]).exists()
    assert Path(subst["drop.parquet"]).exists() and Path(subst["p.parquet"]).exists()
    assert "<h1>lakesweep journal report</h1>" in Path(subst["report.html"]).read_text()
    assert sum("--catalog" in c for c in commands) == 5
    assert re.search(r"\| `--retain-min N` \| `snapshot.num-retained.min` \| 10", README.read_text())
