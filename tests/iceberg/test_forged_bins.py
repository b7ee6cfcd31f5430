"""Compaction plans whose bins were edited: apply re-derives each bin's partition, inputs and deletes from the
live table and refuses a plan that disagrees, before anything is merged or committed. Without that, a bin
given one of its own inputs as an "equality delete" dropped rows, and a bin given another partition value
filed ``region=us`` rows under ``region=eu``."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.plan import CleanupPlan
from tests.iceberg.conftest import files_on_disk
from tests.iceberg.test_live_compaction import apply, bin_of, current_rows, data_files, partitioned, plan, \
    position_delete

pytest.importorskip("pyiceberg")


def forged(p: CleanupPlan, edit) -> CleanupPlan:
    """``p`` with its scope's bins edited by ``edit(bins)``, everything else as planned."""
    bins = copy.deepcopy(p.scope.bins)
    edit(bins)
    return dataclasses.replace(p, scope=dataclasses.replace(p.scope, bins=bins))


def planned_over_a_position_delete(lake) -> tuple[CleanupPlan, int]:
    """The partitioned table with a position delete on a ``us`` file, its plan, and the ``us`` bin."""
    partitioned(lake)
    t = lake.table()
    position_delete(t, data_files(t, "us")[0], [0])
    p = plan(lake.view())
    return p, bin_of(p, "us")


def refused(lake, tmp_path, bad: CleanupPlan, match: str) -> None:
    before, on_disk = current_rows(lake.table()), files_on_disk(lake.table())
    head = lake.table().current_snapshot().snapshot_id
    with pytest.raises(PlanRejected, match=match):
        apply(bad, tmp_path)
    after = lake.table()
    assert after.current_snapshot().snapshot_id == head and current_rows(after) == before
    assert files_on_disk(after) == on_disk  # no output written either


def test_a_bin_given_its_own_input_as_an_equality_delete_is_refused(lake, tmp_path):
    partitioned(lake)
    p = plan(lake.view())
    us = bin_of(p, "us")

    def edit(bins):
        b = bins[us]
        victim = b["inputs"][1]
        b["equality_deletes"].append({"location": victim["location"], "path": victim["path"], "content": 2,
                                      "sequence_number": victim["sequence_number"] + 10, "equality_ids": [1],
                                      "size": victim["size"], "record_count": victim["record_count"],
                                      "manifest": "metadata/none.avro"})

    refused(lake, tmp_path, forged(p, edit), rf"bin {us}: its deletes are not those the live table applies")


def test_a_bin_given_another_partition_value_is_refused(lake, tmp_path):
    partitioned(lake)
    p = plan(lake.view())
    us, eu = bin_of(p, "us"), bin_of(p, "eu")

    def edit(bins):
        bins[us]["partition"] = bins[eu]["partition"]
        bins[us]["partition_values"] = bins[eu]["partition_values"]
        bins[us]["identity_values"] = bins[eu]["identity_values"]

    refused(lake, tmp_path, forged(p, edit), rf"bin {us}: input .* is not what the live table says of it")


def test_a_bin_whose_input_sequence_number_was_raised_past_its_delete_is_refused(lake, tmp_path):
    """A raised data sequence number would make the position delete no longer apply: the row would return."""
    p, us = planned_over_a_position_delete(lake)
    assert len(p.scope.bins[us]["position_deletes"]) == 1

    def edit(bins):
        for f in bins[us]["inputs"]:
            f["sequence_number"] += 100

    refused(lake, tmp_path, forged(p, edit), rf"bin {us}: input .* is not what the live table says of it")


def test_a_bin_whose_position_delete_was_left_out_is_refused(lake, tmp_path):
    p, us = planned_over_a_position_delete(lake)

    def edit(bins):
        bins[us]["position_deletes"] = []

    refused(lake, tmp_path, forged(p, edit), rf"bin {us}: its deletes are not those the live table applies")
