"""A Paimon table's neighbourhood: the other tables of its warehouse, and any table found under its roots.

* the warehouse: every other table of a filesystem-catalog warehouse (``<warehouse>/<database>.db/<table>``),
  with its location and its ``data-file.external-paths``, read from its latest schema;
* under the roots: another Paimon table's ``schema/schema-<n>`` or an Iceberg ``*.metadata.json`` found under
  the table location or an external path (``nested_neighbour``), other than the table's own schema
  directories and its Iceberg-compatible ``metadata/`` directory (docs/design/listing.md#the-neighbourhood).

A neighbour that cannot be read raises, so nothing is deleted on a neighbourhood that could not be seen.
"""

from __future__ import annotations

import posixpath

from lakesweep.engine.fileio import FileIO
from lakesweep.engine.neighbours import Neighbour
from lakesweep.engine.paimon.paths import external_roots
from lakesweep.engine.paimon.table import BRANCH_PREFIX, PaimonTable, discover_tables, parse_versioned_id, SCHEMA_PREFIX
from lakesweep.engine.quarantine import quarantined


def table_roots(location: str, options) -> tuple[tuple[str, str], ...]:
    """(what sets it, root) of every root a Paimon table stores files under."""
    return (("location", location), *(("data-file.external-paths", r) for r in external_roots(options)))


def _own_schema_holder(table: PaimonTable, holder: str) -> bool:
    return holder == table.location or (posixpath.dirname(holder) == table.location + "/branch"
                                        and posixpath.basename(holder).startswith(BRANCH_PREFIX))


def _iceberg_compatible(table: PaimonTable, path: str) -> bool:
    """``path`` is in the ``metadata/`` directory where the table itself writes Iceberg-compatible metadata."""
    storage = str(table.options.get("metadata.iceberg.storage", "disabled")).strip().lower()
    return storage == "table-location" and posixpath.dirname(path) == table.location + "/metadata"


def nested_neighbour(table: PaimonTable, path: str) -> Neighbour | None:
    """The other table whose metadata file ``path`` (a full location under the table's roots) is: another
    Paimon table's ``schema/schema-<n>``, or an Iceberg ``*.metadata.json``; else ``None``. What apply put
    aside in a root's ``_lakesweep_quarantine`` is no other table."""
    if quarantined(path, (table.location, *external_roots(table.options))):
        return None
    name = posixpath.basename(path)
    parent = posixpath.dirname(path)
    if name.endswith(".metadata.json") and not _iceberg_compatible(table, path):
        return Neighbour(f"the Iceberg table whose metadata is {path}", (("metadata", parent),))
    if (posixpath.basename(parent) == "schema" and name.startswith(SCHEMA_PREFIX)
            and parse_versioned_id(name[len(SCHEMA_PREFIX):]) is not None):
        holder = posixpath.dirname(parent)
        if not _own_schema_holder(table, holder):
            return Neighbour(f"the Paimon table at {holder}", (("location", holder),))
    return None


def warehouse_neighbours(table: PaimonTable) -> list[Neighbour]:
    """The other tables of the warehouse ``table`` lies in (none when its parent is not a ``*.db``
    database directory)."""
    database = posixpath.dirname(table.location)
    if not posixpath.basename(database).endswith(".db"):
        return []
    out = []
    for db, name, location in discover_tables(posixpath.dirname(database), table.fileio):
        if location == table.location:
            continue
        other = PaimonTable(location, table.fileio)
        out.append(Neighbour(f"Paimon table {db}.{name}", table_roots(location, other.options)))
    return out


def nested_neighbours(table: PaimonTable, fileio: FileIO | None = None) -> list[Neighbour]:
    """The other tables found by listing every root of ``table`` recursively."""
    io = fileio or table.fileio
    out = []
    for _, root in table_roots(table.location, table.options):
        for page in io.list_pages(root, recursive=True):  # files only, a page at a time
            for f in page:
                n = nested_neighbour(table, f.path)
                if n is not None:
                    out.append(n)
    return out


def paimon_neighbours(table: PaimonTable, *, scan: bool = True) -> tuple[Neighbour, ...]:
    """The warehouse's other tables and, with ``scan``, those found under the table's roots (a listing
    already made, such as an inventory, can be checked path by path with ``nested_neighbour`` instead)."""
    return tuple(warehouse_neighbours(table) + (nested_neighbours(table) if scan else []))
