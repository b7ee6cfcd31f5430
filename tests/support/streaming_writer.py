"""A streaming writer for liveness tests: commits one row at a time, as an ingest job does, until a stop file
appears; and ``WriterProcess``, which runs it beside the test.

    python -m tests.support.streaming_writer iceberg CATALOG URI WAREHOUSE TABLE  START LOG STOP MIN_S MAX_S
    python -m tests.support.streaming_writer paimon WAREHOUSE TABLE PARTITION     START LOG STOP MIN_S MAX_S

Iceberg: an append of ``(id, 'us')`` through pyiceberg's SQL catalog (CATALOG is the catalog's name, which
the SQL catalog keeps beside each table). Paimon: a pypaimon append of one row of
``pypaimon_tables.APPEND_SCHEMA`` into ``dt=PARTITION``. Each committed row's id is written to LOG (one line
per commit, flushed) only after its commit succeeded, so a test knows exactly which rows the table must
still read. A failed commit (a lost race, a locked catalog) is retried with a fresh read; the pauses between
commits are drawn from [MIN_S, MAX_S].
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from typing import Callable


def _iceberg(name: str, uri: str, warehouse: str, ident: str) -> Callable[[int], None]:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(name, uri=uri, warehouse=warehouse)
    return lambda i: catalog.load_table(ident).append(pa.table({"id": pa.array([i], pa.int64()), "region": ["us"]}))


def _paimon(warehouse: str, ident: str, partition: str) -> Callable[[int], None]:
    from pypaimon import CatalogFactory

    from tests.support.pypaimon_tables import APPEND_SCHEMA, _commit

    catalog = CatalogFactory.create({"warehouse": warehouse})
    return lambda i: _commit(catalog.get_table(ident), [{"id": i, "name": f"w{i}", "amount": 1.0, "dt": partition}],
                             APPEND_SCHEMA)


def main(argv: list[str]) -> int:
    fmt, rest = argv[0], argv[1:]
    commit = _iceberg(*rest[:4]) if fmt == "iceberg" else _paimon(*rest[:3])
    start, log, stop, low, high = rest[-5:]
    rng = random.Random(int(start))
    next_id = int(start)
    with open(log, "a") as out:
        while not os.path.exists(stop):
            for attempt in range(100):
                try:
                    commit(next_id)
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
            time.sleep(rng.uniform(float(low), float(high)))
    return 0


class WriterProcess:
    """The writer (``main``) as a process, started with ``args`` (format and its arguments, before START), and
    the ids it has committed so far."""

    def __init__(self, args: list[str], tmp_path, *, start: int, pause_s: tuple[float, float], repo: str):
        self.log, self.stop_file = tmp_path / "written.txt", tmp_path / "stop"
        self.log.touch()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.streaming_writer", *args, str(start), str(self.log),
             str(self.stop_file), *(str(s) for s in pause_s)],
            env=dict(os.environ, PYTHONPATH=repo), stderr=subprocess.PIPE, text=True)

    def written(self) -> list[int]:
        return [int(line) for line in self.log.read_text().split()]

    def wait_for(self, n: int, timeout: float = 30) -> None:
        """Until the writer has committed ``n`` rows."""
        deadline = time.time() + timeout
        while len(self.written()) < n:
            assert self.proc.poll() is None, self.proc.stderr.read()
            assert time.time() < deadline, f"the writer committed {len(self.written())} rows, not {n}"
            time.sleep(0.1)

    def stop(self) -> None:
        self.stop_file.touch()
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
