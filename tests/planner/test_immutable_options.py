"""Options that describe how a table was written cannot be overridden with --option: the planner reads the
table's files through them. The same value is accepted."""

import pytest

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.paimon.kinds import ActionKind
from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import resolve_expire_options
from tests.support import pypaimon_tables as pt

# A changelog lifecycle longer than the snapshots' (decoupled), as in the issue: snapshot expiry then
# writes changelog-N files and keeps what retained changelogs need, which depends on the producer.
DECOUPLED = {"changelog.num-retained.min": "50", "changelog.num-retained.max": "100"}
REFUSAL = "; an option that describes how a table was written cannot be overridden (drop it, or pass the table's own value)"


@pytest.fixture
def decoupled_pk_table(tmp_path):
    return pt.write_pk_table(str(tmp_path / "wh"), commits=6, options={"changelog-producer": "none", **DECOUPLED})


def test_changelog_producer_cannot_be_overridden_on_a_decoupled_table(decoupled_pk_table):
    t = open_table(decoupled_pk_table.path)
    with pytest.raises(PlanRejected) as e:
        resolve_expire_options(t.options, retain_min=1, time_retained=0, overrides={"changelog-producer": "input"})
    assert str(e.value) == "--option changelog-producer=input: the table was written with changelog-producer=none" + REFUSAL


def test_the_tables_own_changelog_producer_is_accepted(decoupled_pk_table):
    t = open_table(decoupled_pk_table.path)
    opts = resolve_expire_options(t.options, retain_min=1, time_retained=0, overrides={"changelog-producer": "NONE"})
    assert opts.changelog_producer == "none" and opts.changelog_decoupled
    plan = plan_expire(t, now_ms=10**15, options=opts)
    # The decoupled 'none' table keeps what its retained changelogs need and writes their changelog files.
    kinds = {a.kind for a in plan.actions}
    assert ActionKind.WRITE_CHANGELOG in kinds and ActionKind.MANIFEST_LIST not in kinds


def test_changelog_producer_defaults_to_none_when_the_table_does_not_set_it(tmp_path):
    w = pt.write_pk_table(str(tmp_path / "wh"), options=DECOUPLED)
    t = open_table(w.path)
    assert "changelog-producer" not in t.options
    with pytest.raises(PlanRejected) as e:
        resolve_expire_options(t.options, overrides={"changelog-producer": "lookup"})
    assert str(e.value) == ("--option changelog-producer=lookup: the table was written with changelog-producer=none "
                            "(Paimon's default; the table does not set it)" + REFUSAL)


@pytest.mark.parametrize(
    "key, value, was",
    [
        ("bucket", "3", "the table was written with bucket=2"),
        ("bucket", "-1", "the table was written with bucket=2"),
        ("bucket-key", "id", "the table was written without bucket-key"),
        ("partition.legacy-name", "false",
         "the table was written with partition.legacy-name=true (Paimon's default; the table does not set it)"),
        ("partition.default-name", "NULL_PART", "the table was written with partition.default-name="
         "__DEFAULT_PARTITION__ (Paimon's default; the table does not set it)"),
        ("data-file.path-directory", "data", "the table was written without data-file.path-directory"),
        ("data-file.external-paths", "file:///tmp/ext", "the table was written without data-file.external-paths"),
        ("index-file-in-data-file-dir", "true", "the table was written with index-file-in-data-file-dir=false "
         "(Paimon's default; the table does not set it)"),
        ("global-index.external-path", "file:///tmp/gi", "the table was written without global-index.external-path"),
    ],
)
def test_bucket_and_path_layout_options_cannot_be_overridden(decoupled_pk_table, key, value, was):
    t = open_table(decoupled_pk_table.path)
    with pytest.raises(PlanRejected) as e:
        resolve_expire_options(t.options, overrides={key: value})
    assert str(e.value) == f"--option {key}={value}: {was}" + REFUSAL


@pytest.mark.parametrize("key, value", [("bucket", "2"), ("bucket", "+2"), ("partition.legacy-name", "TRUE"),
                                        ("partition.default-name", "__DEFAULT_PARTITION__"),
                                        ("index-file-in-data-file-dir", "false")])
def test_the_tables_own_layout_values_are_accepted(decoupled_pk_table, key, value):
    t = open_table(decoupled_pk_table.path)
    plain = resolve_expire_options(t.options, retain_min=2)
    same = resolve_expire_options(t.options, retain_min=2, overrides={key: value})
    assert same == plain


def test_other_unknown_options_are_still_refused(decoupled_pk_table):
    t = open_table(decoupled_pk_table.path)
    with pytest.raises(PlanRejected, match="^--option file.format is not an expire option"):
        resolve_expire_options(t.options, overrides={"file.format": "orc"})
