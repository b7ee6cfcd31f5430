"""The import contract: engine <- planner, journal <- applier <- maintain <- cli, pyspark only in applier,
pyiceberg only in engine/iceberg, and no product module imports the tests. Read from the source with ``ast``,
imports inside functions included, so a lazy import cannot slip past."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("engine", "planner", "journal", "applier", "maintain", "cli")

# What each layer may import of the others.
ALLOWED = {
    "engine": set(),
    "planner": {"engine"},
    "journal": {"engine"},
    "applier": {"engine", "planner", "journal"},
    "maintain": {"engine", "planner", "journal", "applier"},
    "cli": {"engine", "planner", "journal", "applier", "maintain"},
}

# The demo writes its sample tables with the engines' own writers, pypaimon and pyiceberg, as a user would;
# it reads and maintains them through engine/ like any other table.
PYICEBERG_OUTSIDE_ENGINE = {"cli/demo.py"}


def imports(path: Path) -> list[tuple[int, str]]:
    """Every absolute module ``path`` imports, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def product_modules(root: Path = ROOT) -> list[tuple[str, Path]]:
    return [(layer, path) for layer in LAYERS for path in sorted((root / layer).rglob("*.py"))]


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for layer, path in product_modules(root):
        where = path.relative_to(root).as_posix()
        for line, module in imports(path):
            top = module.split(".")[0]
            if top in LAYERS:
                found.append(f"{where}:{line} imports {module}: lakesweep's packages are imported as lakesweep.{top}")
                continue
            if top == "lakesweep":
                top = module.split(".")[1] if "." in module else ""
            if top in LAYERS and top != layer and top not in ALLOWED[layer]:
                found.append(f"{where}:{line} imports {module}: {layer} may import only {sorted(ALLOWED[layer])}")
            elif top == "pyspark" and layer != "applier":
                found.append(f"{where}:{line} imports {module}: only applier/ imports pyspark")
            elif top == "pyiceberg" and not where.startswith("engine/iceberg/") and where not in PYICEBERG_OUTSIDE_ENGINE:
                found.append(f"{where}:{line} imports {module}: only engine/iceberg/ imports pyiceberg")
            elif top == "tests":
                found.append(f"{where}:{line} imports {module}: product code never imports the tests")
    return found


def test_every_layer_imports_only_what_it_may():
    assert violations() == []


def test_the_contract_sees_every_layer_and_lazy_imports(tmp_path):
    assert {layer for layer, _ in product_modules()} == set(LAYERS)
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    import pyspark.sql\n    from lakesweep.applier.apply import apply_plan\n")
    assert imports(lazy) == [(2, "pyspark.sql"), (3, "lakesweep.applier.apply")]


@pytest.mark.parametrize("module", ["pyspark", "pyiceberg"])
def test_the_heavy_libraries_are_used_where_the_contract_expects(module):
    users = {path.relative_to(ROOT).parts[0] for _, path in product_modules()
             if any(m.split(".")[0] == module for _, m in imports(path))}
    assert users == ({"applier"} if module == "pyspark" else {"engine", "cli"})
