"""Which plan a command's PLAN_ID names: an id, or a prefix of exactly one id, as 'journal plans' shows them."""

import pytest

from lakesweep.engine.errors import JournalError
from lakesweep.journal.queries import resolve_plan_id

IDS = ["d0904deda56a62ff", "d0914aa0b1c2d3e4", "77aa00bb11cc22dd"]


@pytest.mark.parametrize("given, plan", [("d0904deda56a62ff", "d0904deda56a62ff"), ("d090", "d0904deda56a62ff"),
                                         ("7", "77aa00bb11cc22dd")])
def test_an_id_or_a_unique_prefix_names_its_plan(given, plan):
    assert resolve_plan_id(IDS, given) == plan


@pytest.mark.parametrize("given, message", [
    ("d09", "plan d09 is ambiguous: it starts 2 plans' ids (d0904deda56a62ff, d0914aa0b1c2d3e4); give more"),
    ("zz", "plan zz is not in the journal; 'lakesweep journal plans' lists them"),
    ("", "plan  is not in the journal"),
])
def test_an_ambiguous_or_unknown_plan_is_refused_naming_the_candidates(given, message):
    with pytest.raises(JournalError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_plan_id(IDS, given)
