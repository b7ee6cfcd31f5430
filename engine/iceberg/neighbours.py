"""An Iceberg table's neighbourhood: every other table of its catalog, with the roots it stores files under.

A catalog may hold two tables at one location (pyiceberg's SQL catalog does not refuse it), or one whose
``write.data.path`` points into another's: orphan cleaning of either would delete the other's files. Every
table the catalog lists is read (its current metadata only); one that cannot be read raises
``CatalogError``, so nothing is deleted on a neighbourhood that could not be seen.
"""

from __future__ import annotations

from typing import Mapping

from lakesweep.engine.neighbours import Neighbour

# The table properties that say where Iceberg writes files outside the default layout.
WRITE_PATHS = ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path")


def storage_roots(location: str, properties: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(what sets it, root) of every root a table with this location and these properties writes under."""
    from lakesweep.engine.iceberg.table import canonical

    roots = [("location", canonical(location))]
    roots += [(key, canonical(properties[key])) for key in WRITE_PATHS if properties.get(key)]
    return tuple(roots)


def table_roots(table) -> tuple[tuple[str, str], ...]:
    """The roots of an ``IcebergTable`` view."""
    return storage_roots(table.location, table.options)


def neighbour_views(table) -> list:
    """An ``IcebergTable`` view of every other table of ``table``'s catalog, by identifier."""
    from lakesweep.engine.iceberg.table import IcebergTable, list_tables

    return [IcebergTable(table.catalog_name, identifier, catalog=table.catalog)
            for identifier in list_tables(table.catalog_name, table.catalog) if identifier != table.identifier]


def catalog_neighbours(table) -> tuple[Neighbour, ...]:
    """Every other table of ``table``'s catalog (an ``IcebergTable``), named by identifier, with its roots."""
    return tuple(Neighbour(f"Iceberg table {v.identifier}", table_roots(v)) for v in neighbour_views(table))
