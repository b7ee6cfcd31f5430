import pytest

from lakesweep.applier.local import apply_locally
from lakesweep.engine.paimon.paths import external_roots
from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import resolve_expire_options

FAR_FUTURE = 10**15


def make_plan(root, *, now_ms=FAR_FUTURE, **flags):
    t = open_table(root)
    flags.setdefault("time_retained", 0)
    opts = resolve_expire_options(t.options, **flags)
    return plan_expire(t, now_ms=now_ms, options=opts)


def expire(root, **flags):
    """Plan and apply (in-process, sequential); returns the plan."""
    plan = make_plan(root, **flags)
    results = apply_locally(plan, external=external_roots(open_table(root).options))
    assert all(r.outcome != "FAILED" for r in results), [r for r in results if r.outcome == "FAILED"]
    return plan


@pytest.fixture
def builder(tmp_path):
    from tests.support.table_builder import TableBuilder

    def make(**kw):
        return TableBuilder(str(tmp_path / "t"), **kw)

    return make
