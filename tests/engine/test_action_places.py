"""Apply's check of where each kind of Paimon file may be (``check_action_kind``) takes a short way for the
kinds that are most of a plan (data, extra and changelog files, in a bucket directory or under an external
root). Whatever the action, plan and layout, it must answer as the full check does: the same refusal, or none."""

from __future__ import annotations

import itertools
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon import layout as layout_module
from lakesweep.engine.paimon.kinds import PLAN_KIND_OF, SHAPES, ActionKind, ChangelogKind, ConsumerKind, OrphanKind, TagKind
from lakesweep.engine.paimon.layout import Layout, check_action_kind
from lakesweep.engine.paimon.table import open_table
from lakesweep.engine.plan import Action, Verb
from tests.support import pypaimon_tables as pt

KINDS = [k for family in (ActionKind, OrphanKind, ConsumerKind, TagKind, ChangelogKind) for k in family if k in SHAPES]
KINDS += [k.value for k in KINDS]  # a kind's label as plain text is no kind: refused either way
PATHS = [
    "dt=2024-01-01/bucket-0/data-x-0.parquet", "dt=2024-01-01/bucket-0/..", "dt=2024-01-01/bucket-0/.",
    "dt=2024-01-01/bucket-0/", "dt=2024-01-01/bucket-x/f", "dt=2024-01-01/bucket-0/sub/f", "bucket-0/f",
    "other=1/bucket-0/f", "dt=2024-01-01/f", "dt=2024-01-01/bucket-0/a\\b", "/ext/dt=2024-01-01/bucket-0/f",
    "/ext/f", "/ext/../etc/passwd", "/extra/f", "file:///ext/dt=1/bucket-0/f", "s3://b/ext/f", "/etc/passwd",
    "manifest/manifest-x-0", "snapshot/snapshot-3", "snapshot/EARLIEST", "changelog/changelog-3",
    "changelog/EARLIEST", "tag/tag-t1", "consumer/consumer-c1", "index/index-x-0", "statistics/stat-0",
    "schema/schema-0", "dt=2024-01-01/bucket-0/data-x-0.parquet/..",
]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    written = pt.write_append_table(str(tmp_path_factory.mktemp("wh")))
    plain = Layout(open_table(written.path))
    external = Layout(open_table(written.path))
    external.external = ["/ext", "file:/ext2"]
    return plain, external


def answer(plan, a, layout) -> str | None:
    try:
        check_action_kind(plan, a, layout)
    except PlanRejected as e:
        return str(e)
    return None


def both_ways(plan, a, layout) -> tuple[str | None, str | None]:
    """``check_action_kind``'s answer, and the full check's (the short way switched off)."""
    short = answer(plan, a, layout)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(layout_module, "_BUCKET_FILE_SHAPES", {})
        return short, answer(plan, a, layout)


def test_the_short_way_answers_as_the_full_check_for_every_kind_place_and_one_thing_wrong(layouts):
    """Every kind at every place, with its own verb, phase and plan kind, and with each one of them wrong
    in every way: a short way that forgot one of its checks would accept what the full check refuses."""
    plan_kinds = sorted(set(PLAN_KIND_OF.values()))
    accepted = 0
    for kind in KINDS:
        (verb, phase), plan_kind = SHAPES[kind], PLAN_KIND_OF[kind]
        shapes = [(verb, phase, plan_kind)] + [(v, phase, plan_kind) for v in Verb if v is not verb] + \
            [(verb, p, plan_kind) for p in range(1, 10) if p != phase] + \
            [(verb, phase, k) for k in plan_kinds if k != plan_kind]
        for (v, p, k), path, layout in itertools.product(shapes, PATHS, layouts):
            plan = types.SimpleNamespace(kind=k, begin=1, end=10, earliest_hint=10, plan_id="p")
            a = Action(kind, path, snapshot_id=3, verb=v, phase=p, action_id=7)
            short, full = both_ways(plan, a, layout)
            assert short == full, (kind, v, p, k, path, layout.external)
            accepted += short is None
    assert accepted > 100  # the short way is taken, not only refused around


@given(kind=st.sampled_from(KINDS), path=st.text(alphabet="dt=/.bucket-0x\\:e", min_size=1, max_size=24),
       snapshot_id=st.one_of(st.none(), st.integers(0, 12)), external=st.booleans())
def test_the_short_way_answers_as_the_full_check_for_any_path(layouts, kind, path, snapshot_id, external):
    (verb, phase), plan_kind = SHAPES[kind], PLAN_KIND_OF[kind]
    plan = types.SimpleNamespace(kind=plan_kind, begin=1, end=10, earliest_hint=10, plan_id="p")
    a = Action(kind, path, snapshot_id=snapshot_id, verb=verb, phase=phase, action_id=7)
    short, full = both_ways(plan, a, layouts[external])
    assert short == full


def test_the_short_way_is_taken_by_the_kinds_most_of_a_plan_is():
    shapes = layout_module._BUCKET_FILE_SHAPES
    assert {ActionKind.DATA_FILE, ActionKind.EXTRA_FILE, ActionKind.CHANGELOG_FILE, TagKind.TAG_DATA_FILE} <= set(shapes)
    assert not {ActionKind.MANIFEST, ActionKind.SNAPSHOT, ActionKind.EMPTY_DIR, OrphanKind.ORPHAN_DATA_FILE} & set(shapes)
