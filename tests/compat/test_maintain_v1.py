"""A journal of ``lakesweep maintain`` runs written before maintenance results had a stream of their own
(``tests/compat/maintain_v1/``, made by ``make.py``): a dry run, a nightly run over three Iceberg tables
(applied, skipped by detection, skipped by its plan, failed) and a run over a Paimon warehouse.

Later lakesweep versions must show it as it was shown then (``expected.json``): ``journal maintenance``,
the ``maintenance_history`` rows and the HTML report drawn from them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.compat.maintain_v1.outputs import outputs

HERE = Path(__file__).parent / "maintain_v1"


def test_an_old_journal_of_maintain_runs_is_shown_as_it_was():
    expected = json.loads((HERE / "expected.json").read_text())
    got = outputs(HERE / "journal.duckdb")
    assert len(got["maintenance"]) == 19 and len(got["history"]) == 19
    assert got["maintenance"] == expected["maintenance"]
    assert got["history"] == expected["history"]
    assert got["html"] == expected["html"]
