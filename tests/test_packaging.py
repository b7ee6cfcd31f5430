"""The wheel's package list: every package of the six product folders installs under ``lakesweep.``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_bare_install import tomllib

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("engine", "planner", "journal", "applier", "maintain", "cli")


def test_pyproject_lists_every_package_of_the_tree_under_lakesweep():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    in_tree = sorted("lakesweep." + ".".join(init.parent.relative_to(ROOT).parts)
                     for layer in LAYERS for init in (ROOT / layer).rglob("__init__.py"))
    assert sorted(setuptools["packages"]) == in_tree
    assert setuptools["package-dir"] == {"lakesweep": "."}


def test_the_console_script_enters_through_the_namespace():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"lakesweep": "lakesweep.cli.main:main"}
