"""A relative action path is joined to the table root only when every segment is plain: no empty, '.' or '..'
segment, however they are spelled together; anything else refuses the plan."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.formats import Targets
from lakesweep.engine.paths import PathResolver


@given(st.text(alphabet="a./", min_size=0, max_size=12).filter(lambda p: not p.startswith("/")))
def test_a_relative_path_is_joined_exactly_when_no_segment_is_empty_dot_or_dot_dot(path):
    resolver = PathResolver("/t/root")
    segments = path.split("/")
    if "" in segments or "." in segments or ".." in segments:
        with pytest.raises(PlanRejected, match="'.', '..' or empty segments"):
            resolver.full(path)
    else:
        assert resolver.full(path) == "/t/root/" + path


@given(st.lists(st.tuples(st.sampled_from(["/t/root/", "/t/rootx/", "/t/", "s3://b/"]),
                          st.text(alphabet="ab/", min_size=1, max_size=6), st.booleans()), max_size=12))
def test_targets_read_back_every_location_they_were_given(entries):
    targets = Targets("/t/root")
    expected = []
    for head, rest, own in entries:
        full = head + rest
        targets.append(full, rest if own else None)
        expected.append(full)
    assert list(targets) == expected and [targets[i] for i in range(len(expected))] == expected
    # a location under the root holds the action's own path string when that path is the rest
    for (head, rest, own), (under, held) in zip(entries, targets.entries()):
        assert under == (head == "/t/root/") and (not under or held == rest) and (under or held == head + rest)
        if under and own:
            assert held is rest
