"""Events as values: JSON round trips, upcasting of old payloads, validation; and the path glob."""

from __future__ import annotations

import fnmatch
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.errors import JournalError
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.plan import Verb

from lakesweep.journal.events import (EVENT_TYPES, ApplyCompleted, ApplyFailed, ApplyRefused, ApplyStarted, FileOutcome,
                                      FileRecord, Committed, MaintenanceResult, MetadataWritten, OutputOrphaned,
                                      OutputWritten, PhaseCompleted, PlanRecorded, RequestsThrottled, allowed_outcomes,
                                      decode, run_stream, upcast, Verified)
from lakesweep.journal.globs import glob_literal, glob_regex
from tests.journal.builders import make_plan

PLAN = make_plan()

EVENTS = [
    PlanRecorded(PLAN.plan_id, "/t", "schema:abc", "expire", 1, 10, 187, PLAN.header(), 5),
    ApplyStarted("a1", PLAN.plan_id, 10, 187, "spark://m:7077", False, 10),
    PhaseCompleted("a1", PLAN.plan_id, 1, {"DELETED": 2, "ALREADY_ABSENT": 1}, 30, 20),
    MetadataWritten("a1", PLAN.plan_id, "write-earliest-hint", "snapshot/EARLIEST", 3, 25),
    OutputWritten("a1", PLAN.plan_id, 1, 0, "s3://b/t/data/compact-x-0.parquet", True, 53, 1042,
                  {"lower_bounds": {"1": "00"}, "split_offsets": [4]}, 25),
    OutputOrphaned("a1", PLAN.plan_id, 1, "s3://b/t/data/compact-x-1.parquet", "bin 1: an input is gone", 26),
    Committed("a1", PLAN.plan_id, 8, "lakesweep-x-8", 12, False, 26),
    Verified("a1", PLAN.plan_id, False, 9, 1, 27, [{"kind": "missing", "path": "/t/dt=a/bucket-0/f",
                                                     "detail": "file does not exist", "needed_by": "tag 't1'"}]),
    ApplyCompleted("a1", PLAN.plan_id, {"DELETED": 8, "WRITTEN": 2}, 187, 20, 30),
    ApplyFailed("a2", PLAN.plan_id, "executor lost", None, 40),
    ApplyRefused(PLAN.plan_id, "tag 'release-1' now points at snapshot 2", 50),
    ApplyRefused(PLAN.plan_id, "stale", 60, apply_id="a3"),
    RequestsThrottled("a1", PLAN.plan_id, 1, 3, 12.5, 29),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.EVENT_TYPE)
def test_every_event_round_trips_through_json(event):
    payload = json.loads(json.dumps(event.to_payload()))
    assert decode(event.EVENT_TYPE, event.SCHEMA_VERSION, payload) == event
    assert type(event).from_payload(payload) == event
    assert EVENT_TYPES[event.EVENT_TYPE] is type(event)


def test_throttling_event_v1_is_read_and_a_newer_version_is_refused():
    v1 = {"apply_id": "a1", "plan_id": "p", "phase": 2, "slowdowns": 3, "lowest_rate": 12.5, "recorded_ms": 9}
    assert decode("RequestsThrottled", 1, v1) == RequestsThrottled("a1", "p", 2, 3, 12.5, 9)
    with pytest.raises(JournalError, match=r"RequestsThrottled v2 is newer than this lakesweep understands \(v1\)"):
        decode("RequestsThrottled", 2, {**v1, "region": "x"})


def test_events_are_frozen():
    with pytest.raises(AttributeError):
        EVENTS[1].apply_id = "other"


def test_apply_started_v1_lacked_master_and_upcasts_with_none():
    v1 = {"apply_id": "a1", "plan_id": "p", "n_actions": 3, "bytes": 9, "dry_run": True, "started_ms": 7}
    assert upcast("ApplyStarted", 1, v1) == {**v1, "master": None, "mode": "delete", "quarantine": None}
    assert decode("ApplyStarted", 1, v1) == ApplyStarted("a1", "p", 3, 9, None, True, 7)
    assert upcast("ApplyStarted", 3, {**v1, "master": "local", "mode": "delete", "quarantine": None}) == {
        **v1, "master": "local", "mode": "delete", "quarantine": None}


def test_apply_started_v2_lacked_a_mode_and_upcasts_as_a_delete():
    v2 = {"apply_id": "a1", "plan_id": "p", "n_actions": 3, "bytes": 9, "master": "local", "dry_run": False,
          "started_ms": 7}
    assert decode("ApplyStarted", 2, v2) == ApplyStarted("a1", "p", 3, 9, "local", False, 7, mode="delete",
                                                         quarantine=None)


@pytest.mark.parametrize("mode, quarantine, message", [
    ("quarantine", None, "in quarantine mode, and only one, says how it quarantines"),
    ("delete", {"plan_id": "p", "retention_ms": 1, "root": None}, "in quarantine mode, and only one"),
    ("shred", None, "mode must be one of"),
])
def test_apply_started_mode_and_quarantine_go_together(mode, quarantine, message):
    with pytest.raises(ValueError, match=message):
        ApplyStarted("a1", "p", 3, 9, None, False, 7, mode=mode, quarantine=quarantine)


def test_v1_counters_upcast_to_count_maps():
    v1 = {"apply_id": "a1", "plan_id": "p", "phase": 6, "deleted": 5, "already_absent": 1, "failed": 0,
          "written": 0, "kept": 2, "bytes": 9, "finished_ms": 7}
    assert decode("PhaseCompleted", 1, v1) == PhaseCompleted(
        "a1", "p", 6, {"DELETED": 5, "ALREADY_ABSENT": 1, "WRITTEN": 0, "KEPT_NOT_EMPTY": 2, "FAILED": 0}, 9, 7)
    v1 = {"apply_id": "a1", "plan_id": "p", "deleted": 5, "already_absent": 1, "failed": 0, "written": 1,
          "kept": 0, "bytes_reclaimed": 9, "duration_ms": 3, "finished_ms": 7}
    done = decode("ApplyCompleted", 1, v1)
    assert done.counts == {"DELETED": 5, "ALREADY_ABSENT": 1, "WRITTEN": 1, "KEPT_NOT_EMPTY": 0, "FAILED": 0}
    assert (done.bytes_reclaimed, done.duration_ms, done.finished_ms) == (9, 3, 7)


def test_a_v1_hint_written_is_read_as_metadata_written():
    v1 = {"apply_id": "a1", "plan_id": "p", "value": 6, "written_ms": 7}
    assert decode("HintWritten", 1, v1) == MetadataWritten("a1", "p", "write-earliest-hint", None, 6, 7)


def test_a_maintenance_result_is_in_its_runs_stream_and_names_its_plan_apart():
    applied = MaintenanceResult("r1", 1, "paimon:/t", "expire", "applied", "expired 3 snapshot(s)", 9,
                                plan_id=PLAN.plan_id, plan_file="/plans/p.parquet", applied_by="a1")
    skipped = MaintenanceResult("r1", 1, "paimon:/t", "orphans", "skipped", "no orphan files to remove", 10)
    assert applied.stream_id == skipped.stream_id == run_stream("r1") == "maintain:r1"
    assert [e.stream_id for e in EVENTS] == [PLAN.plan_id] * len(EVENTS)
    assert (applied.plan_id, skipped.plan_id) == (PLAN.plan_id, None)
    for event in (applied, skipped):
        assert decode("MaintenanceResult", 2, json.loads(json.dumps(event.to_payload()))) == event
    with pytest.raises(ValueError, match="plan_id 'maintain:r1' names a run's stream, not a plan"):
        MaintenanceResult("r1", 1, "paimon:/t", "orphans", "skipped", "m", 10, plan_id="maintain:r1")


def test_a_v1_maintenance_result_reads_with_its_plan_or_none_for_the_runs_stand_in():
    v1 = {"run_id": "r1", "cycle": 1, "table": "paimon:/t", "operation": "orphans", "outcome": "skipped",
          "message": "no orphan files to remove", "plan_id": "maintain:r1", "recorded_ms": 10, "plan_file": None,
          "applied_by": None}
    assert upcast("MaintenanceResult", 1, v1) == {**v1, "plan_id": None}
    assert decode("MaintenanceResult", 1, v1) == MaintenanceResult("r1", 1, "paimon:/t", "orphans", "skipped",
                                                                   "no orphan files to remove", 10)
    applied = {**v1, "operation": "expire", "outcome": "applied", "plan_id": PLAN.plan_id, "applied_by": "a1"}
    assert decode("MaintenanceResult", 1, applied).plan_id == PLAN.plan_id


def test_each_verb_has_its_outcomes():
    assert {v: sorted(allowed_outcomes(v)) for v in Verb} == {
        Verb.DELETE_FILE: ["ALREADY_ABSENT", "DELETED", "FAILED", "QUARANTINED", "RESTORED", "SKIPPED_REFERENCED"],
        Verb.DELETE_EMPTY_DIR: ["ALREADY_ABSENT", "DELETED", "FAILED", "KEPT_NOT_EMPTY"],
        Verb.WRITE_FILE: ["FAILED", "WRITTEN"],
        Verb.COMMIT: ["ALREADY_COMMITTED", "COMMITTED", "DROPPED", "FAILED", "SKIPPED_REFERENCED"],
        Verb.MERGE: ["FAILED", "WRITTEN"],
        Verb.PURGE_VERSION: ["ALREADY_ABSENT", "DELETED", "FAILED"],
    }


@pytest.mark.parametrize("event_type, version, payload, message", [
    ("Bogus", 1, {}, "unknown event type 'Bogus' in the journal"),
    ("HintWritten", 2, {}, r"HintWritten v2 is newer than this lakesweep understands \(v1\); upgrade lakesweep"),
    ("HintWritten", 1, {"apply_id": "a", "plan_id": "p", "value": 1, "written_ms": 1, "extra": 1},
     r"MetadataWritten v1 payload does not fit: unknown fields \['extra'\], missing fields \[\]"),
    ("PhaseCompleted", 2, {**EVENTS[2].to_payload(), "counts": {"GONE": 1}},
     "PhaseCompleted payload is invalid: PhaseCompleted.counts names 'GONE', which is not an outcome"),
    ("ApplyStarted", 2, {"apply_id": "a", "plan_id": "p"},
     r"missing fields \['bytes', 'dry_run', 'master', 'n_actions', 'started_ms'\]"),
    ("PhaseCompleted", 2, {**EVENTS[2].to_payload(), "phase": 0},
     r"PhaseCompleted payload is invalid: phase 0 is not a phase number \(1, 2, ...\)"),
])
def test_unreadable_payloads_fail_loudly(event_type, version, payload, message):
    with pytest.raises(JournalError, match=message):
        decode(event_type, version, payload)


@pytest.mark.parametrize("make, message", [
    (lambda: ApplyStarted("", "p", 1, 1, None, False, 1), "apply_id must be a non-empty string"),
    (lambda: ApplyCompleted("a", "p", {"DELETED": -1}, 0, 0, 1),
     r"ApplyCompleted.counts\[DELETED\] must be a non-negative int"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, FileOutcome.FAILED, None, 1, 1),
     "a FAILED record needs an error"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, FileOutcome.DELETED, "oops", 1, 1),
     "only a FAILED record has an error"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 0, 1, FileOutcome.DELETED, None, 1, 1),
     "phase 0 >= 1"),
    (lambda: FileRecord("a1", "p", 0, "x", "snapshot", 6, 1, "DELETED", None, 0, 1), "attempt 0 >= 1"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, FileOutcome.QUARANTINED, None, 1, 1),
     "a QUARANTINED or RESTORED record, and only one, says where"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, FileOutcome.DELETED, None, 1, 1, "/q/x"),
     "a QUARANTINED or RESTORED record, and only one, says where"),
])
def test_invalid_values_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_skipped_and_dropped_records_carry_their_reason():
    for outcome in (FileOutcome.SKIPPED_REFERENCED, FileOutcome.DROPPED):
        r = FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, outcome, "a tag holds it", 1, 1)
        assert r.error == "a tag holds it"


def test_file_record_takes_strings_for_enums():
    r = FileRecord("a1", "p", 3, "dt=3", "empty-dir", 3, None, "KEPT_NOT_EMPTY", None, 1, 1)
    assert (r.kind, r.outcome) == (ActionKind.EMPTY_DIR, FileOutcome.KEPT_NOT_EMPTY)


_GLOB_CHARS = st.sampled_from(list("ab/.-*?[]!^\\$(|+{"))


@given(pattern=st.text(_GLOB_CHARS, max_size=8), path=st.text(st.sampled_from(list("ab/.-*?[]!^\\$(|+{")), max_size=8))
def test_glob_regex_matches_like_fnmatch(pattern, path):
    try:
        regex = glob_regex(pattern)
    except ValueError as e:
        assert "is reversed" in str(e)
        return
    assert bool(re.fullmatch(regex, path)) == fnmatch.fnmatchcase(path, pattern)
    if fnmatch.fnmatchcase(path, pattern):  # the prefilter never drops a match
        assert glob_literal(pattern) in path
