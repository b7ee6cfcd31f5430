"""A listing of files as a value, made by listing the store or read from an inventory.

An inventory is one or more Parquet files, each in S3 Inventory's own form (``bucket``, ``key``, ``size``,
``last_modified_date``, optionally ``is_latest`` and ``is_delete_marker``) or in the plain form (``path``,
``size``, and ``mtime_ms`` or ``last_modified``). A missing or ill-typed column, a row without a location and
an ``mtime_ms`` before 2000 raise ``PlanRejected`` naming the file; a null size or modification time is
unknown (``None``). Only the rows under the given roots are kept. The forms, the types and why:
docs/design/listing.md.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

from lakesweep.engine.errors import InvalidLocation, PlanRejected
from lakesweep.engine.fileio import FileIO, fileio_for, normalize_location
from lakesweep.engine.quarantine import quarantined
from lakesweep.engine.timeutil import format_time_ms


@dataclass(frozen=True, slots=True)
class ListedFile:
    """One file as listed: its full location, size and modification time (``None`` where the listing did
    not say; a file without a modification time is never deleted)."""

    path: str
    size: int | None
    mtime_ms: int | None


S3_FORM = "s3-inventory"
PLAIN_FORM = "plain"
EARLIEST_MTIME_MS = 946_684_800_000  # 2000-01-01T00:00:00Z: an mtime_ms before it is taken to be in seconds
BATCH_ROWS = 65_536


@dataclass(frozen=True, slots=True)
class Inventory:
    """What inventory files list under the roots they were read for.

    ``files`` are the listed files under a root, in the files' order; ``rows`` counts every row read,
    ``outside`` those under no root, ``left_out`` the others that name no current file (by reason:
    ``noncurrent-version``, ``delete-marker``, ``folder-marker``, ``unaddressable`` for a location
    lakesweep cannot address, such as a key with an empty segment, ``quarantine`` for a file in a root's
    ``_lakesweep_quarantine``)."""

    locations: tuple[str, ...]
    forms: tuple[str, ...]  # each file's form, in ``locations`` order
    files: tuple[ListedFile, ...]
    rows: int
    outside: int
    left_out: Mapping[str, int] = field(default_factory=dict)

    def source(self) -> dict:
        """Where the listing came from, as a plan records it."""
        return _source(self.locations, self.forms, self.rows, len(self.files), self.outside, self.left_out)


class InventoryScan:
    """Inventory files being read, a batch at a time: ``files()`` yields the listed files under the roots
    once, holding one batch; the counts (``rows``, ``outside``, ``left_out``) are final when it is done.
    Every file's form is checked when the scan is made, before any row is read."""

    def __init__(self, locations: Sequence[str], *, roots: Sequence[str], fileio: FileIO | None = None,
                 batch_rows: int = BATCH_ROWS):
        if not locations:
            raise PlanRejected("no inventory file given")
        self.roots = tuple(normalize_location(r, relative_ok=False) for r in roots)
        self.locations = tuple(normalize_location(loc) for loc in locations)
        self.fileio, self.batch_rows = fileio, batch_rows
        self.forms = tuple(_form(loc, _open(loc, fileio).schema_arrow)[0] for loc in self.locations)
        self.rows = self.outside = self.under = 0
        self.left_out: dict[str, int] = {}

    def files(self) -> Iterator[ListedFile]:
        import pyarrow as pa

        for loc in self.locations:
            reader = _open(loc, self.fileio)
            form, columns = _form(loc, reader.schema_arrow)
            try:
                for batch in reader.iter_batches(batch_size=self.batch_rows, columns=columns, use_threads=False):
                    out: list[ListedFile] = []
                    self.outside += _read_batch(loc, form, batch, self.rows, self.roots, out, self.left_out)
                    self.rows += batch.num_rows
                    self.under += len(out)
                    yield from out
            except (pa.ArrowException, OSError) as e:
                raise PlanRejected(f"inventory {loc} cannot be read: {e}") from e

    def source(self) -> dict:
        """Where the listing came from, as a plan records it (once ``files()`` is done)."""
        return _source(self.locations, self.forms, self.rows, self.under, self.outside, self.left_out)


def _source(locations, forms, rows: int, under: int, outside: int, left_out: Mapping[str, int]) -> dict:
    return {"from": "inventory", "inventory": [{"file": loc, "form": form} for loc, form in zip(locations, forms)],
            "rows": rows, "under_table": under, "outside_table": outside, "left_out": dict(sorted(left_out.items()))}


def read_inventory(locations: Sequence[str], *, roots: Sequence[str], fileio: FileIO | None = None,
                   batch_rows: int = BATCH_ROWS) -> Inventory:
    """The files the inventory ``locations`` list under ``roots`` (full locations), all read. Raises
    ``PlanRejected`` for a file that is missing, not Parquet, or not an inventory (see the module)."""
    scan = InventoryScan(locations, roots=roots, fileio=fileio, batch_rows=batch_rows)
    files = tuple(scan.files())
    return Inventory(scan.locations, scan.forms, files, scan.rows, scan.outside, scan.left_out)


def _open(loc: str, fileio: FileIO | None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    if fileio is None and "://" not in loc:
        try:
            st = os.stat(loc)
        except FileNotFoundError as e:
            raise PlanRejected(f"inventory {loc} does not exist") from e
        except OSError as e:
            raise PlanRejected(f"inventory {loc} cannot be read: {e.strerror or e}") from e
        if not stat.S_ISREG(st.st_mode):
            raise PlanRejected(f"inventory {loc} is not a regular file")
    try:
        source = (fileio or fileio_for(loc)).open_input(loc)
    except FileNotFoundError as e:
        raise PlanRejected(f"inventory {loc} does not exist") from e
    try:
        return pq.ParquetFile(source)
    except (pa.ArrowException, OSError) as e:
        raise PlanRejected(f"inventory {loc} is not a readable Parquet file: {e}") from e


def _form(loc: str, schema) -> tuple[str, list[str]]:
    """The file's form and the columns to read, every column's type checked."""
    import pyarrow as pa

    names = set(schema.names)

    def need(name: str, test, what: str) -> str:
        if name not in names:
            raise PlanRejected(f"inventory {loc} has no column '{name}' ({_FORMS})")
        return check(name, test, what)

    def check(name: str, test, what: str) -> str:
        t = schema.field(name).type
        if not test(t):
            raise PlanRejected(f"inventory {loc}: column '{name}' is {t}, not {what}")
        return name

    def is_string(t) -> bool:
        return pa.types.is_string(t) or pa.types.is_large_string(t)

    s3 = names & {"bucket", "key"}
    if s3 and "path" in names:
        raise PlanRejected(f"inventory {loc} has both 'path' and S3 Inventory's '{sorted(s3)[0]}': use one form "
                           f"({_FORMS})")
    if s3:
        columns = [need("bucket", is_string, "a string"), need("key", is_string, "a string"),
                   need("size", pa.types.is_integer, "an integer"),
                   need("last_modified_date", pa.types.is_timestamp, "a timestamp")]
        columns += [check(c, pa.types.is_boolean, "a boolean") for c in ("is_latest", "is_delete_marker")
                    if c in names]
        return S3_FORM, columns
    if "path" not in names:
        raise PlanRejected(f"inventory {loc} has neither a 'path' column nor S3 Inventory's 'bucket' and 'key' "
                           f"({_FORMS})")
    columns = [need("path", is_string, "a string"), need("size", pa.types.is_integer, "an integer")]
    times = [c for c in ("mtime_ms", "last_modified") if c in names]
    if len(times) != 1:
        raise PlanRejected(f"inventory {loc} must have exactly one of 'mtime_ms' and 'last_modified', not "
                           f"{' and '.join(times) or 'neither'} ({_FORMS})")
    if times[0] == "mtime_ms":
        columns.append(check("mtime_ms", pa.types.is_integer, "an integer (epoch milliseconds)"))
    else:
        columns.append(check("last_modified", pa.types.is_timestamp, "a timestamp"))
    return PLAIN_FORM, columns


_FORMS = ("S3 Inventory's columns are bucket, key, size, last_modified_date; the plain form's are path, size, "
          "and mtime_ms or last_modified")


def _read_batch(loc: str, form: str, batch, first_row: int, roots: tuple[str, ...], out: list[ListedFile],
                left_out: dict[str, int]) -> int:
    """Append the batch's files under ``roots`` to ``out``; return how many rows lie under none."""
    import pyarrow.compute as pc

    cols = dict(zip(batch.schema.names, batch.columns))
    if form == S3_FORM:
        near = _s3_near(cols["bucket"], cols["key"], roots)
        location_cols = ("bucket", "key")
        time_col = "last_modified_date"
    else:
        near = _plain_near(cols["path"], roots)
        location_cols = ("path",)
        time_col = "mtime_ms" if "mtime_ms" in cols else "last_modified"
    for name in location_cols:
        nulls = cols[name].is_null()
        if pc.any(nulls).as_py():
            row = first_row + pc.index(nulls, True).as_py() + 1
            raise PlanRejected(f"inventory {loc}: row {row} has no {name}")
    times = cols[time_col]
    if time_col == "mtime_ms":
        low = pc.min(times).as_py()
        if low is not None and low < EARLIEST_MTIME_MS:
            row = first_row + pc.index(times, low).as_py() + 1
            raise PlanRejected(f"inventory {loc}: row {row} has mtime_ms {low}, before 2000-01-01: mtime_ms must be "
                               "epoch milliseconds (are these seconds?)")
    else:
        times = times.cast(_ms(times.type), safe=False).cast("int64")
    indices = pc.indices_nonzero(near).to_pylist()
    outside = batch.num_rows - len(indices)
    if not indices:
        return outside
    taken = {name: cols[name].take(indices).to_pylist() for name in cols}
    sizes = taken["size"]
    mtimes = times.take(indices).to_pylist()
    latest = taken.get("is_latest")
    markers = taken.get("is_delete_marker")
    for i, location in enumerate(_locations(form, taken)):
        why = None
        if latest is not None and latest[i] is not True:
            why = "noncurrent-version"
        elif markers is not None and markers[i] is True:
            why = "delete-marker"
        elif location.endswith("/"):
            why = "folder-marker"
        else:
            try:
                location = normalize_location(location, relative_ok=False)
            except InvalidLocation:
                why = "unaddressable"
        if why is None and quarantined(location, roots):
            why = "quarantine"  # put aside by apply --quarantine: never the table's
        if why is not None:
            left_out[why] = left_out.get(why, 0) + 1
        elif location.startswith(tuple(r + "/" for r in roots)):
            out.append(ListedFile(location, sizes[i], mtimes[i]))
        else:
            outside += 1
    return outside


def _locations(form: str, taken: dict) -> Iterator[str]:
    if form == S3_FORM:
        return (f"s3://{b}/{k}" for b, k in zip(taken["bucket"], taken["key"]))
    return iter(taken["path"])


def _ms(t):
    import pyarrow as pa

    return pa.timestamp("ms", tz=t.tz)


def _s3_near(buckets, keys, roots: tuple[str, ...]):
    """Rows that may lie under an ``s3://`` root: its bucket, and its key prefix (checked exactly later)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    near = pa.array([False] * len(keys))
    for root in roots:
        if not root.startswith("s3://"):
            continue
        bucket, _, prefix = root[len("s3://"):].partition("/")
        here = pc.equal(buckets, bucket)
        if prefix:
            here = pc.and_(here, pc.starts_with(keys, prefix + "/"))
        near = pc.or_(near, pc.fill_null(here, False))
    return near


def _plain_near(paths, roots: tuple[str, ...]):
    """Rows whose path may lie under a root in any spelling (``/a/t/x``, ``file:///a/t/x``, ``s3a://b/t/x``):
    it holds the root without its scheme (checked exactly later)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    near = pa.array([False] * len(paths))
    for root in roots:
        needle = "://" + root[len("s3://"):] + "/" if root.startswith("s3://") else root.rstrip("/") + "/"
        near = pc.or_(near, pc.fill_null(pc.match_substring(paths, needle), False))
    return near


def check_listing_complete(table, unseen: Iterable[tuple[str, str]], *, threshold_ms: int) -> None:
    """Refuse (``PlanRejected``) an orphan listing that misses a file the table references and that was
    there when it was made: a truncated page, a store that lists inconsistently, an inventory of other
    paths. What else it misses cannot be told, so nothing it shows can be trusted to be
    unused. ``unseen`` holds ``(location, what references it)`` of the referenced files the
    listing did not show. One that is now absent, has no modification time, or was modified at or after
    ``threshold_ms`` (it may have been written after the listing) does not count. ``table``: the table view
    (either format's), whose store is asked; the planners of both formats call this, never the store."""
    for path, holder in unseen:
        info = table.fileio.info(path)
        if info is not None and info.mtime_ms is not None and info.mtime_ms < threshold_ms:
            raise PlanRejected(
                f"the listing is incomplete: it misses {path}, which {holder} references and which was last "
                f"modified {format_time_ms(info.mtime_ms)}, before the cut-off {format_time_ms(threshold_ms)}: a "
                "listing made since should show it. Files the listing misses cannot be told from files it shows, "
                "so nothing was planned. Re-run 'lakesweep plan orphans'; with an inventory, use one made after "
                "the cut-off")
