"""Branch names follow Paimon's own rules (BranchManager.validateBranch), and never name a path."""

import os
import shutil

import pytest

from lakesweep.engine.errors import CorruptMetadata, PlanRejected
import lakesweep.engine.paimon.table
from lakesweep.engine.paimon.table import PaimonTable, open_table


def _make_branch(table_path: str, name: str) -> str:
    """What Paimon's createBranch(name) leaves on disk: the latest schema copied into branch/branch-<name>."""
    d = os.path.join(table_path, "branch", "branch-" + name)
    os.makedirs(os.path.join(d, "schema"))
    shutil.copy(os.path.join(table_path, "schema", "schema-0"), os.path.join(d, "schema", "schema-0"))
    return d


@pytest.mark.parametrize(
    "name, problem",
    [
        ("main", "'main' is the default branch"),
        ("", "it is blank"),
        ("  \t", "it is blank"),
        ("123", "it is purely numeric (Paimon would read it as a snapshot id)"),
        ("\uff11\uff12", "it is purely numeric (Paimon would read it as a snapshot id)"),
        ("..", "it is '..'"),
        (".", "it is '.'"),
        ("../../..", "it contains '/'"),
        ("a/b", "it contains '/'"),
        ("a\\b", "it contains '\\'"),
        ("a\x00b", "it contains a NUL character"),
    ],
)
def test_names_paimon_or_the_file_system_would_misread_are_refused(name, problem):
    assert lakesweep.engine.paimon.table.branch_name_problem(name) == problem


@pytest.mark.parametrize("name", ["b1", "dev-2024", "x.y", "1a", "release 1", "\u00fcber", "..a"])
def test_ordinary_names_are_branches(name):
    assert lakesweep.engine.paimon.table.branch_name_problem(name) is None


@pytest.mark.parametrize("name, problem", [("../../..", "it contains '/'"), ("..", "it is '..'"),
                                           ("42", "it is purely numeric (Paimon would read it as a snapshot id)")])
def test_opening_a_table_on_an_invalid_branch_is_refused(append_table, name, problem):
    with pytest.raises(PlanRejected) as e:
        open_table(append_table.path, branch=name)
    assert str(e.value) == f"branch name {name!r} is not a valid Paimon branch name: {problem}"
    with pytest.raises(PlanRejected):
        PaimonTable(append_table.path, branch=name)


def test_a_branch_created_as_paimon_does_is_listed_and_opened(append_table):
    _make_branch(append_table.path, "b1")
    t = open_table(append_table.path)
    assert t.branch_names() == ["b1"]
    b = t.branch_table("b1")
    assert b.base == os.path.join(append_table.path, "branch", "branch-b1")
    assert b.schema.partition_keys == ("dt",)


@pytest.mark.parametrize("name, problem", [
    ("123", "it is purely numeric (Paimon would read it as a snapshot id)"),
    ("main", "'main' is the default branch"),
    ("", "it is blank"),
])
def test_a_branch_directory_paimon_would_not_create_stops_listing(append_table, name, problem):
    # Paimon lists every branch-* directory as a branch; ignoring one would leave its files unprotected.
    _make_branch(append_table.path, "b1")
    d = _make_branch(append_table.path, name)
    with pytest.raises(CorruptMetadata) as e:
        open_table(append_table.path).branch_names()
    assert str(e.value) == (f"{d}: branch directory for {name!r}, a name Paimon does not allow ({problem}); "
                            "lakesweep cannot open it as a branch and protect its files: rename or remove it")


def test_a_plain_file_named_like_a_branch_is_not_a_branch(append_table):
    os.makedirs(os.path.join(append_table.path, "branch"))
    open(os.path.join(append_table.path, "branch", "branch-123"), "w").close()
    assert open_table(append_table.path).branch_names() == []
