"""A table's neighbourhood: the other tables that could store files where its orphan cleaning lists.

Any other table whose location, data path or metadata path lies in, contains or equals one of the table's
roots (its location and the write paths its properties name) refuses the plan, and apply refuses it again
(apache/iceberg#17213). Locations are compared by whole segments (apache/iceberg#17448), in the canonical
form of their format. Which tables are neighbours is read by each format (``engine.iceberg.neighbours``,
``engine.paimon.neighbours``); this module only compares values, so the planners can check them. Why:
docs/design/listing.md#the-neighbourhood.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from lakesweep.engine.errors import SharedStorage


def within(location: str, root: str) -> bool:
    """``location`` is ``root`` or lies under it, by whole path segments (``/ns/t_2`` is not in ``/ns/t``)."""
    root = root.rstrip("/")
    location = location.rstrip("/")
    return location == root or location.startswith(root + "/")


@dataclass(frozen=True, slots=True)
class Neighbour:
    """Another table, as its format names it (``Iceberg table ns.t2``), and where it stores files: each root
    with what sets it (``location``, ``write.data.path``, ``data-file.external-paths``, ``metadata``...)."""

    name: str
    roots: tuple[tuple[str, str], ...]


def _relation(theirs: str, ours: str) -> str | None:
    if theirs.rstrip("/") == ours.rstrip("/"):
        return "is also"
    if within(theirs, ours):
        return "lies in"
    if within(ours, theirs):
        return "contains"
    return None


def shared_roots(roots: Sequence[tuple[str, str]],
                 neighbours: Iterable[Neighbour]) -> list[tuple[Neighbour, str, str, str, str, str]]:
    """Every (neighbour, its key, its root, relation, our key, our root) where a root of a neighbour lies in,
    contains or equals one of ``roots`` (this table's, each with what sets it)."""
    found = []
    for n in neighbours:
        for their_key, theirs in n.roots:
            for our_key, ours in roots:
                relation = _relation(theirs, ours)
                if relation is not None:
                    found.append((n, their_key, theirs, relation, our_key, ours))
    return found


def refuse_shared_storage(table: str, roots: Sequence[tuple[str, str]], neighbours: Iterable[Neighbour], *,
                          outcome: str) -> None:
    """Refuse (``SharedStorage``, naming the first neighbour found) when another table stores files in one
    of ``table``'s ``roots``. ``outcome`` says what was not done ("Nothing was planned")."""
    found = shared_roots(roots, neighbours)
    if not found:
        return
    n, their_key, theirs, relation, our_key, ours = found[0]
    others = len({f[0].name for f in found}) - 1
    also = f" (and {others} other table(s))" if others else ""
    raise SharedStorage(n.name, (
        f"{n.name} stores files at {theirs} ({their_key}), which {relation} {ours}, the {our_key} of {table}"
        f"{also}: orphan cleaning of {table} would delete that table's files. {outcome}; give each table a "
        f"location of its own, with no write path inside another table's"))
