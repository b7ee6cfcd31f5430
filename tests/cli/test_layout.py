"""How the CLI is put together: command modules register on ``cli.app``; only the entry point imports
``cli.main``; each output implementation answers every kind of result."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakesweep.cli.output import JsonOutput, Output, OutputFormat, TextOutput, output_for

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "cli"


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_only_the_entry_point_imports_cli_main():
    importers = sorted(p.name for p in CLI.glob("*.py") if "lakesweep.cli.main" in _imported_modules(p))
    assert importers == ["__main__.py"]


def test_the_planner_does_not_import_cli():
    for p in (REPO / "planner").rglob("*.py"):
        assert not any(m == "cli" or m.startswith("cli.") for m in _imported_modules(p)), p


@pytest.mark.parametrize("module", ["app", "plan_cmds", "apply_cmds", "journal_cmds", "doctor", "demo", "output",
                                    "render"])
def test_each_cli_module_imports_first_in_a_new_interpreter(module):
    r = subprocess.run([sys.executable, "-c", f"import lakesweep.cli.{module}"], capture_output=True, text=True,
                       timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr


def test_output_for_picks_the_implementation_once():
    assert isinstance(output_for(OutputFormat.text), TextOutput)
    assert isinstance(output_for(OutputFormat.json), JsonOutput)
    assert output_for(OutputFormat.text).draws_progress and not output_for(OutputFormat.json).draws_progress


def test_both_outputs_answer_every_kind_of_result():
    assert not Output.__abstractmethods__ - set(vars(TextOutput))
    assert not Output.__abstractmethods__ - set(vars(JsonOutput))
