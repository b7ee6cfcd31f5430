"""What Iceberg's planners need from the store beyond the table's metadata: read by each kind's ``read`` step
(``planner.plan_kind.PlanKind.read``) before planning, and handed to the pure planner as a value.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from lakesweep.engine.fileio import FileInfo
from lakesweep.engine.iceberg.table import metadata_table_uuid
from lakesweep.engine.listing import InventoryScan


def list_table_files(table) -> list[FileInfo]:
    """Every file and directory under the table location and its write paths, listed recursively; a root
    that does not exist lists nothing."""
    listed: list[FileInfo] = []
    for root in [table.location, *table.external_roots()]:
        try:
            for page in table.fileio.list_pages(root, recursive=True):  # on S3, ListObjectsV2 by prefix
                listed += page
        except FileNotFoundError:
            continue
    return listed


class InventoryListing:
    """The files a plain inventory file (``engine.listing``) lists under ``roots``, as ``list_table_files``
    gives them, read from the file again each time this is iterated, a batch at a time: the listing is
    never held."""

    def __init__(self, location: str, roots: Sequence[str]):
        self.location, self.roots = location, tuple(roots)

    def __iter__(self) -> Iterator[FileInfo]:
        for f in InventoryScan([self.location], roots=self.roots).files():
            yield FileInfo(f.path, f.size, f.mtime_ms)


def metadata_owners(table, locations: Iterable[str]) -> dict[str, str | None]:
    """The ``table-uuid`` each metadata file at ``locations`` names (``metadata_table_uuid``)."""
    return {path: metadata_table_uuid(table.fileio, path) for path in locations}
