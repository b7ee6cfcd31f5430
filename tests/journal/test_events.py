"""Events as values: JSON round trips, upcasting of old payloads, validation; and the path glob."""

from __future__ import annotations

import fnmatch
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import JournalError
from engine.paimon.kinds import ActionKind

from journal.events import (
    EVENT_TYPES,
    ApplyCompleted,
    ApplyFailed,
    ApplyRefused,
    ApplyStarted,
    FileOutcome,
    FileRecord,
    HintWritten,
    PhaseCompleted,
    PlanRecorded,
    decode,
    upcast,
)
from journal.globs import glob_literal, glob_regex
from tests.journal.builders import make_plan

PLAN = make_plan()

EVENTS = [
    PlanRecorded(PLAN.plan_id, "/t", "schema:abc", "expire", 1, 10, 187, PLAN.header(), 5),
    ApplyStarted("a1", PLAN.plan_id, 10, 187, "spark://m:7077", False, 10),
    PhaseCompleted("a1", PLAN.plan_id, 1, 2, 1, 0, 0, 0, 30, 20),
    HintWritten("a1", PLAN.plan_id, 3, 25),
    ApplyCompleted("a1", PLAN.plan_id, 8, 0, 0, 2, 0, 187, 20, 30),
    ApplyFailed("a2", PLAN.plan_id, "executor lost", None, 40),
    ApplyRefused(PLAN.plan_id, "tag 'release-1' now points at snapshot 2", 50),
    ApplyRefused(PLAN.plan_id, "stale", 60, apply_id="a3"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.EVENT_TYPE)
def test_every_event_round_trips_through_json(event):
    payload = json.loads(json.dumps(event.to_payload()))
    assert decode(event.EVENT_TYPE, event.SCHEMA_VERSION, payload) == event
    assert type(event).from_payload(payload) == event
    assert EVENT_TYPES[event.EVENT_TYPE] is type(event)


def test_events_are_frozen():
    with pytest.raises(AttributeError):
        EVENTS[1].apply_id = "other"


def test_apply_started_v1_lacked_master_and_upcasts_with_none():
    v1 = {"apply_id": "a1", "plan_id": "p", "n_actions": 3, "bytes": 9, "dry_run": True, "started_ms": 7}
    assert upcast("ApplyStarted", 1, v1) == {**v1, "master": None}
    assert decode("ApplyStarted", 1, v1) == ApplyStarted("a1", "p", 3, 9, None, True, 7)
    assert upcast("ApplyStarted", 2, {**v1, "master": "local"}) == {**v1, "master": "local"}


@pytest.mark.parametrize("event_type, version, payload, message", [
    ("Bogus", 1, {}, "unknown event type 'Bogus' in the journal"),
    ("HintWritten", 2, {}, r"HintWritten v2 is newer than this lakesweep understands \(v1\); upgrade lakesweep"),
    ("HintWritten", 1, {"apply_id": "a", "plan_id": "p", "value": 1, "written_ms": 1, "extra": 1},
     r"HintWritten v1 payload does not fit: unknown fields \['extra'\], missing fields \[\]"),
    ("ApplyStarted", 2, {"apply_id": "a", "plan_id": "p"},
     r"missing fields \['bytes', 'dry_run', 'master', 'n_actions', 'started_ms'\]"),
    ("PhaseCompleted", 1, {**EVENTS[2].to_payload(), "phase": 9}, "PhaseCompleted payload is invalid: phase 9"),
])
def test_unreadable_payloads_fail_loudly(event_type, version, payload, message):
    with pytest.raises(JournalError, match=message):
        decode(event_type, version, payload)


@pytest.mark.parametrize("make, message", [
    (lambda: ApplyStarted("", "p", 1, 1, None, False, 1), "apply_id must be a non-empty string"),
    (lambda: ApplyCompleted("a", "p", -1, 0, 0, 0, 0, 0, 0, 1), "ApplyCompleted.deleted must be a non-negative int"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, FileOutcome.FAILED, None, 1, 1),
     "a FAILED record needs an error"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, FileOutcome.DELETED, "oops", 1, 1),
     "only a FAILED record has one"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 4, 1, FileOutcome.DELETED, None, 1, 1),
     "a data-file action runs in phase 1, not 4"),
    (lambda: FileRecord("a1", "p", 0, "x", ActionKind.DATA_FILE, 1, 1, FileOutcome.WRITTEN, None, 1, 1),
     "outcome WRITTEN does not fit a data-file action"),
    (lambda: FileRecord("a1", "p", 0, "x", "snapshot", 6, 1, "KEPT_NOT_EMPTY", None, 1, 1),
     "outcome KEPT_NOT_EMPTY does not fit a snapshot action"),
    (lambda: FileRecord("a1", "p", 0, "x", "snapshot", 6, 1, "DELETED", None, 0, 1), "attempt 0 >= 1"),
])
def test_invalid_values_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


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
