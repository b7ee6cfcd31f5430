"""Random sequences of writes (appends, position deletes, equality deletes), compaction plans, honest and
edited applies on a pyiceberg table. The invariant, after every step: the rows the table reads (the files read
by the spec's rules, equality deletes included) are those the last write left. A compaction, whatever its plan
file says and whatever was committed since it was planned, changes no row; an edited plan (a forged bin, a
header cut down) is refused or does no harm."""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lakesweep.applier.apply import DriverExecutor, apply_plan
from lakesweep.engine.errors import LakesweepError
from lakesweep.engine.iceberg.table import IcebergTable
from lakesweep.engine.plan import CleanupPlan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.planner.iceberg.compact import plan_compact, resolve_compact_options
from tests.iceberg.conftest import SCHEMA, SPEC
from tests.support import iceberg_files

pytest.importorskip("pyiceberg")

CATALOG = "lsmachine"
REGIONS = ("us", "eu")


class CompactionMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        from pyiceberg.catalog.sql import SqlCatalog

        self.root = tempfile.mkdtemp(prefix="lakesweep-machine-")
        os.makedirs(self.root + "/wh")
        self.env = {f"PYICEBERG_CATALOG__{CATALOG.upper()}__{k}": v for k, v in
                    {"TYPE": "sql", "URI": f"sqlite:///{self.root}/c.db", "WAREHOUSE": f"file://{self.root}/wh"}.items()}
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        self.catalog = SqlCatalog(CATALOG, uri=self.env[f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI"],
                                  warehouse=f"file://{self.root}/wh")
        self.catalog.create_namespace("ns")
        self.catalog.create_table("ns.t", schema=SCHEMA, partition_spec=SPEC)
        self.next_id = 0
        self.plan: CleanupPlan | None = None
        self.applies = 0
        for region in REGIONS:  # a small file in each partition to start from
            self._append(region, 2)
        self.rows = self._read()

    def teardown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.root, ignore_errors=True)

    def _table(self):
        return self.catalog.load_table("ns.t")

    def _read(self):
        t = self._table()
        return iceberg_files.rows_from_files(t, t.current_snapshot().snapshot_id)

    def _append(self, region: str, n: int) -> None:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        self._table().append(pa.table({"id": pa.array(ids, pa.int64()), "region": [region] * n}))

    def _data_files(self):
        t = self._table()
        return [e.data_file for m in t.current_snapshot().manifests(t.io) if m.content == 0
                for e in m.fetch_manifest_entry(t.io, discard_deleted=True)]

    # ---- writes: the rows they leave are the new truth ----------------------------------------------------

    @rule(region=st.sampled_from(REGIONS), n=st.integers(1, 3))
    def append(self, region, n):
        self._append(region, n)
        self.rows = self._read()

    @rule(pick=st.integers(0, 1000))
    def position_delete(self, pick):
        files = self._data_files()
        f = files[pick % len(files)]
        t = self._table()
        iceberg_files.commit_delete_files(t, [iceberg_files.write_position_delete_file(t, f, [0])])
        self.rows = self._read()

    @precondition(lambda self: self.rows)
    @rule(pick=st.integers(0, 1000))
    def equality_delete(self, pick):
        from pyiceberg.typedef import Record

        row_id, region = sorted(self.rows)[pick % len(self.rows)]
        t = self._table()
        f = iceberg_files.write_equality_delete_file(t, partition=Record(region), spec_id=t.spec().spec_id,
                                                     rows=[{"id": row_id}])
        iceberg_files.commit_delete_files(t, [f])
        self.rows = self._read()

    # ---- compaction: plans, honest and edited applies ----------------------------------------------------

    @rule()
    def plan_compaction(self):
        view = IcebergTable(CATALOG, "ns.t")
        self.plan = plan_compact(view, now_ms=0, options=resolve_compact_options(view.options, min_input_files=2))

    def _apply(self, p: CleanupPlan) -> None:
        self.applies += 1
        with DuckDBRecorder(os.path.join(self.root, f"j{self.applies}.duckdb")) as rec:
            try:
                apply_plan(p, rec, executor=DriverExecutor())
            except LakesweepError:
                pass  # refused: the invariant says whether anything changed

    @precondition(lambda self: self.plan is not None)
    @rule()
    def apply_plan(self):
        self._apply(self.plan)
        self.plan = None

    @precondition(lambda self: self.plan is not None and self.plan.scope.bins)
    @rule(edit=st.sampled_from(["partition", "input-as-delete", "sequence", "no-deletes", "record-count"]),
          pick=st.integers(0, 1000))
    def apply_forged_bin(self, edit, pick):
        bins = copy.deepcopy(self.plan.scope.bins)
        b = bins[pick % len(bins)]
        other = bins[(pick + 1) % len(bins)]
        victim = b["inputs"][pick % len(b["inputs"])]
        if edit == "partition":
            b["partition_values"] = [["str", "eu" if b["partition"] == "region=us" else "us"]]
            b["partition"] = "region=" + b["partition_values"][0][1]
            b["identity_values"] = [[2, b["partition_values"][0]]] if b["identity_values"] else []
            del other
        elif edit == "input-as-delete":
            b["equality_deletes"].append({**{k: victim[k] for k in ("location", "path", "size", "record_count")},
                                          "content": 2, "sequence_number": victim["sequence_number"] + 1,
                                          "equality_ids": [1], "manifest": "metadata/forged.avro"})
        elif edit == "sequence":
            for f in b["inputs"]:
                f["sequence_number"] += 100
        elif edit == "no-deletes":
            b["position_deletes"], b["equality_deletes"] = [], []
        else:
            victim["record_count"] += 1
        self._apply(dataclasses.replace(self.plan, scope=dataclasses.replace(self.plan.scope, bins=bins)))

    @precondition(lambda self: self.plan is not None)
    @rule()
    def apply_with_the_header_cut_down(self):
        """Every requirement but the table's identity edited out of the header."""
        kept = tuple(r for r in self.plan.requirements if r.TYPE == "iceberg.table-uuid")
        self._apply(dataclasses.replace(self.plan, requirements=kept))

    @invariant()
    def the_rows_are_those_the_last_write_left(self):
        assert self._read() == self.rows


def test_compaction_state_machine():
    runner = CompactionMachine.TestCase
    runner.settings = settings(max_examples=6, stateful_step_count=10, deadline=None,
                               suppress_health_check=list(HealthCheck))
    runner().runTest()


@pytest.mark.slow
def test_compaction_state_machine_long():
    runner = CompactionMachine.TestCase
    runner.settings = settings(max_examples=60, stateful_step_count=20, deadline=None,
                               suppress_health_check=list(HealthCheck))
    runner().runTest()
