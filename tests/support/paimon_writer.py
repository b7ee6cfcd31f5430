"""A streaming writer for liveness tests: appends one row at a time to a Paimon table with pypaimon, as an
ingest job does, until a stop file appears.

    python -m tests.support.paimon_writer WAREHOUSE TABLE PARTITION START LOG STOP [MIN_S MAX_S]

Rows go to ``dt=PARTITION`` of an append table of ``tests.support.pypaimon_tables.APPEND_SCHEMA``. Each
committed row's id is written to LOG (one line per commit, flushed) only after its commit succeeded. A
failed commit is retried with a fresh table; the pauses between commits are drawn from [MIN_S, MAX_S].
"""

from __future__ import annotations

import os
import random
import sys
import time


def main(argv: list[str]) -> int:
    from pypaimon import CatalogFactory

    from tests.support.pypaimon_tables import APPEND_SCHEMA, _commit

    warehouse, ident, partition, start, log, stop = argv[:6]
    low, high = (float(argv[6]), float(argv[7])) if len(argv) >= 8 else (0.5, 2.0)
    catalog = CatalogFactory.create({"warehouse": warehouse})
    rng = random.Random(int(start))
    next_id = int(start)
    with open(log, "a") as out:
        while not os.path.exists(stop):
            row = {"id": next_id, "name": f"w{next_id}", "amount": 1.0, "dt": partition}
            for attempt in range(100):
                try:
                    _commit(catalog.get_table(ident), [row], APPEND_SCHEMA)
                    break
                except Exception as e:  # a lost commit race: read the table again and retry
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
