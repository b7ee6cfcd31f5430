"""A streaming writer for liveness tests: appends one row at a time to an Iceberg table through pyiceberg's SQL
catalog, as an ingest job does, until a stop file appears.

    python -m tests.support.iceberg_writer CATALOG URI WAREHOUSE TABLE START LOG STOP [MIN_S MAX_S]

CATALOG is the catalog's name: pyiceberg's SQL catalog keeps it beside each table.

Each committed row's id is written to LOG (one line per commit, flushed) only after its commit succeeded, so
the test knows exactly which rows the table must still read. A commit the catalog refuses is retried; the
writer never gives up on a row. The pauses between commits are drawn from [MIN_S, MAX_S] (default 0.5-2 s).
"""

from __future__ import annotations

import os
import random
import sys
import time


def main(argv: list[str]) -> int:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    name, uri, warehouse, ident, start, log, stop = argv[:7]
    low, high = (float(argv[7]), float(argv[8])) if len(argv) >= 9 else (0.5, 2.0)
    catalog = SqlCatalog(name, uri=uri, warehouse=warehouse)
    rng = random.Random(int(start))
    next_id = int(start)
    with open(log, "a") as out:
        while not os.path.exists(stop):
            row = pa.table({"id": pa.array([next_id], pa.int64()), "region": ["us"]})
            for attempt in range(100):
                try:
                    catalog.load_table(ident).append(row)
                    break
                except Exception as e:  # a refused commit or a locked catalog: read the table again and retry
                    print(f"writer: retrying {next_id} after {type(e).__name__}: {e}", file=sys.stderr)
                    time.sleep(0.05 * (attempt + 1))
            else:
                print(f"writer: gave up on {next_id}", file=sys.stderr)
                return 1
            out.write(f"{next_id}\n")
            out.flush()
            next_id += 1
            time.sleep(rng.uniform(low, high))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
