"""What apply does before Spark, what a dry run looks at, and a plan applied once already."""

import os

import pytest

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from lakesweep.applier import apply as apply_module
from lakesweep.applier.apply import DriverExecutor, apply_plan, applied_before, dry_run_plan, spark_getting_ready
from lakesweep.cli.main import app
from lakesweep.engine.errors import JournalConflict, PlanRejected, StalePlan
from lakesweep.engine.plan import CleanupPlan
from lakesweep.engine.plan_io import read_plan, read_plan_header, write_plan
from lakesweep.journal.events import ApplyStarted
from tests.planner.conftest import make_plan
from tests.support.table_builder import ADD, DELETE, E, TableBuilder

T0 = 1_700_000_000_000  # 2023-11-14 22:13:20Z


class WatchedExecutor(DriverExecutor):
    """Runs bulk phases in this process and notes when it was asked to get Spark ready or to start it."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def prepare(self):
        self.calls.append("prepare")

    def start(self):
        self.calls.append("start")


@pytest.fixture
def table(tmp_path):
    b = TableBuilder(str(tmp_path / "t"), partition_keys=("dt",), partition_types=("STRING",))
    files = [E(ADD, f"f{i}", ("a",), size=10 + i) for i in range(6)]
    b.commit(files[:3])
    b.commit(files[3:], [E(DELETE, f.name, f.partition, size=f.size) for f in files[:3]])
    b.commit([E(ADD, "g", ("a",))])
    b.commit([E(ADD, "h", ("a",))])
    return b


def test_a_foreign_plan_is_refused_before_spark_is_asked_to_start(table, tmp_path, recorder):
    plan = make_plan(table.root, retain_min=1)
    other = TableBuilder(str(tmp_path / "other"))
    other.commit([E(ADD, "x")])
    foreign = CleanupPlan(**{**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, "table_location": other.root})
    executor = WatchedExecutor()
    with pytest.raises(PlanRejected, match="^the plan is for another table: it was made for "):
        apply_plan(foreign, recorder, executor=executor)
    assert executor.calls == []


def test_a_stale_plan_under_strict_is_refused_before_spark_is_asked_to_start(table, recorder):
    plan = make_plan(table.root, retain_min=1, now_ms=table.time_millis + 4)  # snapshot 4 is the latest
    table.commit([E(ADD, "later", ("a",))])  # snapshot 5, at time_millis + 5
    executor = WatchedExecutor()
    with pytest.raises(StalePlan, match=f"^the plan {plan.plan_id} is stale \\(--strict\\): snapshot 5 was "
                       "committed after the plan was made"):
        apply_plan(plan, recorder, executor=executor, strict=True)
    assert executor.calls == []


def test_spark_gets_ready_after_the_metadata_checks_pass(table, recorder):
    plan = make_plan(table.root, retain_min=1)
    executor = WatchedExecutor()
    assert apply_plan(plan, recorder, executor=executor).state == "COMPLETED"
    assert executor.calls == ["prepare", "start"]


def _first_deleted_data_file(table, plan):
    a = next(a for a in plan.actions if str(a.kind) == "data-file")
    return os.path.join(table.root, a.path)


def test_a_dry_run_reads_metadata_only_unless_asked_to_check_files(table):
    plan = make_plan(table.root, retain_min=1)
    os.remove(_first_deleted_data_file(table, plan))
    executor = WatchedExecutor()
    meta = dry_run_plan(plan, executor=executor, check_files=False)
    assert executor.calls == []
    assert (meta.state, meta.files_checked, meta.counts["ALREADY_ABSENT"]) == ("DRY_RUN", False, 0)
    assert meta.counts["DELETED"] == sum(1 for a in plan.actions if a.verb.deletes)
    looked = dry_run_plan(plan, executor=DriverExecutor(), check_files=True)
    assert (looked.files_checked, looked.counts["ALREADY_ABSENT"]) == (True, 1)
    assert looked.counts["DELETED"] == meta.counts["DELETED"] - 1


def test_a_completed_plan_is_not_applied_again_unless_asked(table, recorder):
    plan = make_plan(table.root, retain_min=1)
    first = apply_plan(plan, recorder, executor=DriverExecutor(), clock=lambda: T0)
    n_deleted = first.counts["DELETED"]
    executor = WatchedExecutor()
    again = apply_plan(plan, recorder, executor=executor, skip_if_applied=True)
    assert (again.state, again.apply_id) == ("ALREADY_APPLIED", first.apply_id)
    assert again.reason == (
        f"plan {plan.plan_id} was already applied: apply {first.apply_id} completed at 2023-11-14 22:13:20Z "
        f"(completed: deleted {n_deleted}, written 1; verified whole); nothing was done. To run it again (it "
        "deletes nothing already deleted), add --again")
    assert again.applied["finished_ms"] == T0 and again.applied["whole"] is True
    assert executor.calls == []
    assert [e.apply_id for e in recorder.events(plan_id=plan.plan_id) if isinstance(e, ApplyStarted)] == [
        first.apply_id]
    rerun = apply_plan(plan, recorder, executor=DriverExecutor(), skip_if_applied=False)
    assert rerun.state == "COMPLETED" and rerun.apply_id != first.apply_id
    assert rerun.counts["DELETED"] == 0


def test_a_failed_or_dry_run_apply_is_not_an_earlier_apply(table, recorder):
    plan = make_plan(table.root, retain_min=1)
    dry_run_plan(plan, executor=DriverExecutor())
    recorder.record_plan(plan, recorded_ms=T0)
    assert applied_before(recorder, plan.plan_id) is None
    assert apply_plan(plan, recorder, executor=DriverExecutor(), skip_if_applied=True).state == "COMPLETED"


def test_an_unfinished_apply_after_a_completed_one_is_named_not_hidden(table, recorder):
    plan = make_plan(table.root, retain_min=1)
    apply_plan(plan, recorder, executor=DriverExecutor())
    recorder.append([ApplyStarted(apply_id="crashed0000000ab", plan_id=plan.plan_id, n_actions=len(plan.actions),
                                  bytes=0, master="local[*]", dry_run=False, started_ms=T0)])
    with pytest.raises(JournalConflict, match=f"^plan {plan.plan_id} has an unfinished apply crashed0000000ab in this "
                       f"journal; finish it with 'lakesweep resume {plan.plan_id}'$"):
        apply_plan(plan, recorder, executor=DriverExecutor(), skip_if_applied=True)


class BootingExecutor(WatchedExecutor):
    """What ``spark_getting_ready`` makes instead of a ``SparkExecutor``: the calls, ``stop`` included."""

    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__()
        BootingExecutor.made.append(self)

    def stop(self):
        self.calls.append("stop")


@pytest.fixture
def booting(monkeypatch):
    BootingExecutor.made = []
    monkeypatch.setattr(apply_module, "SparkExecutor", BootingExecutor)
    return BootingExecutor.made


def _header(plan, tmp_path, name="plan.parquet"):
    location = str(tmp_path / name)
    write_plan(plan, location)
    return location, read_plan_header(location)


def test_spark_is_asked_to_start_from_a_sound_header_before_the_plan_is_read(table, tmp_path, recorder, booting):
    location, header = _header(make_plan(table.root, retain_min=1), tmp_path)
    with spark_getting_ready(header, recorder) as executor:
        assert executor is booting[0] and executor.calls == ["prepare"]
        report = apply_plan(read_plan(location), recorder, executor=executor)
        assert report.state == "COMPLETED" and executor.calls[-2:] == ["start", "stop"]
    assert executor.calls[-1] == "stop"


def test_a_foreign_or_stale_header_gets_no_spark(table, tmp_path, recorder, booting):
    plan = make_plan(table.root, retain_min=1, now_ms=table.time_millis + 4)
    other = TableBuilder(str(tmp_path / "other"))
    other.commit([E(ADD, "x")])
    foreign = CleanupPlan(**{**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, "table_location": other.root})
    _, foreign_header = _header(foreign, tmp_path, "foreign.parquet")
    _, header = _header(plan, tmp_path)
    table.commit([E(ADD, "later", ("a",))])  # committed after the plan was made
    with spark_getting_ready(foreign_header, recorder) as executor:
        assert executor is None
    with spark_getting_ready(header, recorder, strict=True) as executor:
        assert executor is None
    assert booting == []
    with spark_getting_ready(header, recorder) as executor:  # without --strict a later commit is no refusal
        assert executor.calls == ["prepare"]


def test_a_plan_applied_or_left_unfinished_in_the_journal_gets_no_spark(table, tmp_path, recorder, booting):
    plan = make_plan(table.root, retain_min=1)
    _, header = _header(plan, tmp_path)
    apply_plan(plan, recorder, executor=DriverExecutor())
    with spark_getting_ready(header, recorder, skip_if_applied=True) as executor:
        assert executor is None  # apply says it was applied, and does nothing
    with spark_getting_ready(header, recorder) as executor:  # --again
        assert executor.calls == ["prepare"]
    recorder.append([ApplyStarted(apply_id="crashed0000000ab", plan_id=plan.plan_id, n_actions=len(plan.actions),
                                  bytes=0, master="local[*]", dry_run=False, started_ms=T0)])
    with spark_getting_ready(header, recorder) as executor:
        assert executor is None  # apply refuses: finish it with resume
    assert len(booting) == 1


def test_a_plan_edited_after_its_header_is_refused_though_spark_was_asked_to_start(table, tmp_path, booting):
    plan = make_plan(table.root, retain_min=1)
    location, _ = _header(plan, tmp_path)
    data = pq.read_table(location)
    paths = data.column("path").to_pylist()
    paths[0] = paths[0] + ".elsewhere"
    pq.write_table(data.set_column(data.schema.get_field_index("path"), data.schema.field("path"),
                                   pa.array(paths, pa.string())), location)
    before = sorted(os.listdir(os.path.dirname(_first_deleted_data_file(table, plan))))
    r = CliRunner().invoke(app, ["apply", location, "--journal", str(tmp_path / "j.duckdb")])
    assert r.exit_code == 1 and "does not match its id" in r.stderr
    assert [e.calls for e in booting] == [["prepare", "stop"]]  # asked from the header, stopped, never started
    assert sorted(os.listdir(os.path.dirname(_first_deleted_data_file(table, plan)))) == before
