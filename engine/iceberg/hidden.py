"""Iceberg's hidden paths: what its orphan listing never lists (``PartitionAwareHiddenPathFilter`` over
Hadoop's ``HiddenPathFilter``). A path is hidden when its name, or one of its directories below the listing
root, starts with ``_`` or ``.``, unless that directory is a partition of a field whose own name starts so."""

from __future__ import annotations

from typing import Sequence


def hidden_partition_prefixes(table) -> tuple[str, ...]:
    """``name=`` of every partition field, in any of ``table``'s specs, whose name starts with ``_`` or ``.``:
    directories that look hidden but hold data."""
    return tuple(sorted({f"{f.name}=" for spec in table.partition_specs() for f in spec.fields
                         if f.name.startswith(("_", "."))}))


def is_hidden(below_root: str, partition_prefixes: Sequence[str] = ()) -> bool:
    """Whether a path, relative to its listing root, is hidden."""
    return any(part.startswith(("_", ".")) and not part.startswith(tuple(partition_prefixes))
               for part in below_root.split("/"))


def below_root(path: str, roots: Sequence[str]) -> str | None:
    """``path`` relative to the first of ``roots`` it lies under; None when under none."""
    for root in roots:
        if path.startswith(root + "/"):
            return path[len(root) + 1:]
    return None
