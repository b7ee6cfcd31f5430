"""The crash matrix: an apply of every plan kind killed (kill -9, ``LAKESWEEP_TEST_CRASH``) at every phase
boundary, right after every commit, and at seeded points inside every phase; then resumed. Each case ends as
an uninterrupted apply of the same plan on a twin of the table ends, with every action counted once, every
planned delete done and gone, and one commit per commit phase.

The killed apply runs in a subprocess on the driver (``tests.support.driver_apply``, no Spark), journaling
every result on its own, so a crash point counted in results can land between any two actions. Paimon's
twin is a copy of the table (its paths are relative); Iceberg's is a second table of the same catalog built
the same way (file names and snapshot ids differ, so the comparison is of shapes: rows of every snapshot by
sequence number, files by category, the metadata log's length) while the killed table's own files are
accounted for exactly: what is gone is what the plan deleted, and what is new the metadata needs.
"""

from __future__ import annotations

import collections
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

import pytest

from lakesweep.applier.apply import DriverExecutor, actions_by_phase, apply_plan, resume
from lakesweep.engine.plan import CleanupPlan, PhaseMode, commit_id
from lakesweep.engine.plan_io import write_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from lakesweep.journal.events import FileOutcome
from tests.applier.conftest import REPO
from tests.iceberg.conftest import lake  # noqa: F401  (a fixture: the Iceberg twins' catalog)

GONE = {FileOutcome.DELETED, FileOutcome.ALREADY_ABSENT}
COMMITTED = {FileOutcome.COMMITTED, FileOutcome.ALREADY_COMMITTED}


# ---- Paimon: a copy of the table is the twin ---------------------------------------------------------------


class PaimonSubject:
    """A Paimon table and its copy. ``rows(root)``: what an engine reads of every snapshot and tag."""

    def __init__(self, root: str, twin: str, make_plan: Callable[[str], CleanupPlan], rows: Callable[[str], object]):
        self.root, self.twin, self.make_plan, self.rows = root, twin, make_plan, rows
        self.before = {root: _all_files(root), twin: _all_files(twin)}

    def plans(self) -> tuple[CleanupPlan, CleanupPlan]:
        plan, same = self.make_plan(self.root), self.make_plan(self.twin)
        assert [a.path for a in plan.actions] == [a.path for a in same.actions]
        return plan, same

    def state(self, root: str) -> tuple:
        """The files (those written since the table was built named without the commit's random id, and
        kept as a list: a commit written twice shows) and what the engine reads."""
        files = _all_files(root)
        new = files - self.before[root]
        return sorted(files - new) + sorted(_UUID.sub("<uuid>", f) for f in new), self.rows(root)

    def target(self, root: str, path: str) -> str:
        return os.path.join(root, path)

    def commits(self, root: str, plan: CleanupPlan, phase: int) -> list[int]:
        """The snapshots committed under the plan's commit user (Paimon's partition drop commits one)."""
        from lakesweep.engine.paimon.table import open_table

        t = open_table(root)
        d = os.path.join(root, "snapshot")
        ids = sorted(int(n.split("-")[1]) for n in os.listdir(d) if n.startswith("snapshot-"))
        return [s for s in ids if t.snapshot(s).commit_user == f"lakesweep-{plan.plan_id}"]


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _all_files(root: str) -> set[str]:
    from tests.support.table_builder import all_files

    return all_files(root)


def pypaimon_rows(warehouse: str):
    """Every snapshot's rows (and every tag's snapshot) as pypaimon reads them, for table ``db.t``."""
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
    root = os.path.join(warehouse, "db.db", "t")
    out = {}
    for name in sorted(os.listdir(os.path.join(root, "snapshot"))):
        if name.startswith("snapshot-"):
            rb = table.copy({"scan.snapshot-id": name.split("-")[1]}).new_read_builder()
            data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
            out[name] = sorted(zip(*(data.column(c).to_pylist() for c in data.column_names)))
    return out


def engine_rows(root: str):
    """Every snapshot's live data files and every tag's snapshot, as lakesweep's Paimon reader sees them (the
    builder's data files are placeholders no engine can scan)."""
    from lakesweep.engine.paimon.table import open_table

    t = open_table(root)
    out = {}
    for name in sorted(os.listdir(os.path.join(root, "snapshot"))):
        if name.startswith("snapshot-"):
            snap = t.snapshot(int(name.split("-")[1]))
            out[name] = sorted((e.partition, e.bucket, e.file.file_name) for e in t.live_entries(snap))
    out["tags"] = sorted((tag.name, tag.snapshot.id) for tag in t.tags())
    return out


def lake_subject(tmp_path, fill: Callable, make_plan: Callable[[str], CleanupPlan]) -> PaimonSubject:
    from tests.applier.test_safety import Lake

    lake = Lake(tmp_path / "wh")
    fill(lake)
    shutil.copytree(tmp_path / "wh", tmp_path / "twin")
    return PaimonSubject(lake.root, str(tmp_path / "twin" / "db.db" / "t"), make_plan,
                         lambda root: pypaimon_rows(os.path.dirname(os.path.dirname(root))))


def builder_subject(tmp_path, build: Callable[[str], object], make_plan) -> PaimonSubject:
    root = str(tmp_path / "t")
    build(root)
    shutil.copytree(root, tmp_path / "twin")
    return PaimonSubject(root, str(tmp_path / "twin"), make_plan, engine_rows)


def paimon_expire(tmp_path):
    from tests.applier.test_safety import plan_for

    def fill(lake):
        for dt in "ababc":
            lake.commit(dt)
        for dt in "abc":
            lake.commit(dt, overwrite=True)
        lake.commit("a")
        lake.commit("b", overwrite=True)

    return lake_subject(tmp_path, fill, lambda root: plan_for(root, retain_min=2))


def paimon_orphans(tmp_path):
    from tests.applier.test_orphans_apply import JUNK, KEPT
    from tests.planner.test_orphans import age, junk, plan

    extra = [f"dt=b/bucket-{b}/data-failed-{i}.parquet" for b in (0, 3) for i in range(3)]

    def fill(lake):
        lake.commit("a")
        lake.commit("b")
        lake.commit("a", overwrite=True)
        for rel in JUNK + KEPT + extra:
            junk(lake.root, rel)
        age(lake.root)

    return lake_subject(tmp_path, fill, lambda root: plan(root, empty_dirs=True))


def paimon_partitions(tmp_path):
    from tests.applier.test_partitions_apply import plan_drop

    def fill(lake):
        for dt in ("a", "b", "c", "a", "b", "a"):
            lake.commit(dt)
        time.sleep(0.01)  # the newest file strictly older than the plan's now

    now = int(time.time() * 1000) + 1000
    return lake_subject(tmp_path, fill, lambda root: plan_drop(root, max_expires=2, now_ms=now))


def paimon_tags(tmp_path):
    from tests.applier.test_kinds_resume import tags_plan, tags_table

    return builder_subject(tmp_path, tags_table, tags_plan)


def paimon_changelog(tmp_path):
    from tests.applier.test_kinds_resume import changelog_plan, changelog_table

    return builder_subject(tmp_path, changelog_table, changelog_plan)


def paimon_consumers(tmp_path):
    from tests.applier.test_kinds_resume import consumers_plan, consumers_table

    return builder_subject(tmp_path, consumers_table, consumers_plan)


# ---- Iceberg: a second table of the catalog, built the same way, is the twin --------------------------------


class IcebergSubject:
    def __init__(self, lake, build: Callable, make_plan: Callable):
        self.lake, self.make_plan = lake, make_plan
        build(lake, "ns.t")
        build(lake, "ns.twin")
        self.root = self._location("ns.t")
        self.twin = self._location("ns.twin")
        self.before = {"ns.t": self._files("ns.t"), "ns.twin": self._files("ns.twin")}
        self._ident = {self.root: "ns.t", self.twin: "ns.twin"}

    def _location(self, ident: str) -> str:
        from lakesweep.engine.iceberg.table import canonical

        return canonical(self.lake.table(ident).metadata.location)

    def _files(self, ident: str) -> set[str]:
        from tests.iceberg.conftest import files_on_disk

        return files_on_disk(self.lake.table(ident))

    def plans(self) -> tuple[CleanupPlan, CleanupPlan]:
        plan, same = self.make_plan(self.lake.view("ns.t")), self.make_plan(self.lake.view("ns.twin"))
        assert len(plan.actions) == len(same.actions)
        assert [(a.phase, a.kind) for a in plan.actions] == [(a.phase, a.kind) for a in same.actions]
        return plan, same

    def state(self, root: str) -> dict:
        """The table's shape: every snapshot's rows by sequence number, the metadata log's length, and the
        files by category: on disk, gone and new since the table was built, on disk but not needed."""
        from tests.iceberg.conftest import needed_files, rows_by_snapshot

        ident = self._ident[root]
        table = self.lake.table(ident)
        rows = rows_by_snapshot(table)
        now = self._files(ident)
        before = self.before[ident]
        snaps = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)

        def kinds(paths):
            return collections.Counter(_category(root, p) for p in paths)

        return {"snapshots": [(s.sequence_number, s.summary.operation.value, rows[s.snapshot_id]) for s in snaps],
                "log": len(table.metadata.metadata_log), "files": kinds(now), "gone": kinds(before - now),
                "new": kinds(now - before), "unneeded": kinds(now - needed_files(table))}

    def target(self, root: str, path: str) -> str:
        from lakesweep.engine.iceberg.table import canonical

        return canonical(path) if "://" in path or path.startswith("/") else os.path.join(root, path)

    def commits(self, root: str, plan: CleanupPlan, phase: int) -> list[int | None]:
        """The snapshots carrying the phase's commit id. Expiry adds no snapshot: [None] when the expired
        snapshots are gone (that it took one metadata commit, the log's length in ``state`` shows)."""
        from lakesweep.engine.iceberg.requirements import COMMIT_ID_PROPERTY

        table = self.lake.table(self._ident[root])
        if plan.kind == "expire":
            return [] if set(plan.scope.expired) & {s.snapshot_id for s in table.metadata.snapshots} else [None]
        cid = commit_id(plan.plan_id, phase)
        return [s.snapshot_id for s in table.metadata.snapshots
                if s.summary.additional_properties.get(COMMIT_ID_PROPERTY) == cid]

    def exact(self, plan: CleanupPlan, deleted: set[str]) -> None:
        """The killed table's own files: gone is exactly what the plan deleted; every new file is needed."""
        from tests.iceberg.conftest import needed_files

        table = self.lake.table("ns.t")
        now = self._files("ns.t")
        assert self.before["ns.t"] - now == deleted
        assert now - self.before["ns.t"] <= needed_files(table)


def _category(root: str, path: str) -> str:
    rel = os.path.relpath(path, root)
    name = os.path.basename(rel)
    if rel.startswith("metadata/"):
        if name.endswith(".metadata.json"):
            return "metadata.json"
        return "manifest-list" if name.startswith("snap-") else "manifest" if name.endswith(".avro") else "metadata-other"
    if name.startswith("compact-"):
        return "compacted"
    return "data" if rel.startswith("data/") else "other"


def _now_ms() -> int:
    return int(time.time() * 1000)


def iceberg_expire(lake):
    from lakesweep.planner.iceberg.expire import plan_iceberg_expire, resolve_expire_options
    from tests.iceberg.conftest import write_history

    def make(view):
        return plan_iceberg_expire(view, now_ms=_now_ms(), options=resolve_expire_options(view.options, older_than="0 s"))

    return IcebergSubject(lake, lambda lk, ident: write_history(lk, ident), make)


def iceberg_orphans(lake):
    from lakesweep.planner.iceberg.orphans import resolve_orphan_options
    from lakesweep.planner.kinds import plan_kind
    from tests.iceberg.conftest import write_history
    from tests.iceberg.test_orphans import stray

    def build(lk, ident):
        t = write_history(lk, ident, appends=4)
        for i in range(4):
            stray(t, f"data/region=us/00000-dead-{i}.parquet")
            stray(t, f"metadata/failed-{i}.avro", days=4)
        stray(t, "leftover/tmp-0")

    def make(view):
        return plan_kind("orphans", "iceberg").read_and_plan(view, now_ms=_now_ms(), options=resolve_orphan_options(view.options))

    return IcebergSubject(lake, build, make)


def iceberg_rewrite(lake):
    from lakesweep.planner.iceberg.rewrite_manifests import plan_rewrite_manifests, resolve_rewrite_options
    from tests.iceberg.conftest import write_history

    def make(view):
        return plan_rewrite_manifests(view, now_ms=0, options=resolve_rewrite_options(view.options))

    return IcebergSubject(lake, lambda lk, ident: write_history(lk, ident, appends=6, churn=False), make)


def iceberg_compact(lake):
    from lakesweep.planner.iceberg.compact import plan_compact, resolve_compact_options
    from tests.iceberg.conftest import write_history

    def make(view):
        return plan_compact(view, now_ms=0, options=resolve_compact_options(view.options))

    return IcebergSubject(lake, lambda lk, ident: write_history(lk, ident, appends=6, churn=False), make)


# ---- the matrix ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    setup: Callable
    iceberg: bool
    phases: tuple[int, ...]  # the phases the plan has actions in (the case list is built from them)
    commits: tuple[int, ...]  # its commit phases


KINDS = {k.name: k for k in (
    Kind("paimon-expire", paimon_expire, False, (1, 4, 6, 7), ()),
    Kind("paimon-orphans", paimon_orphans, False, (1, 2, 3), ()),
    Kind("paimon-partitions", paimon_partitions, False, (1,), (1,)),
    Kind("paimon-tags", paimon_tags, False, (1, 2, 3), ()),
    Kind("paimon-changelog", paimon_changelog, False, (1, 3, 4, 5), ()),
    Kind("paimon-consumers", paimon_consumers, False, (1,), ()),
    Kind("iceberg-expire", iceberg_expire, True, (1, 2, 3, 4), (1,)),
    Kind("iceberg-orphans", iceberg_orphans, True, (1,), ()),
    Kind("iceberg-rewrite-manifests", iceberg_rewrite, True, (1,), (1,)),
    Kind("iceberg-compact", iceberg_compact, True, (1, 2), (2,)),
)}
INSIDE = ("before-journal", "after-journal")


def crash_points(kind: Kind) -> list[tuple[str, int]]:
    """(stage, n): both boundaries of every phase with actions, after every commit, and a seeded point
    inside every phase, counted in results (``inside`` below turns (stage, phase) into a count)."""
    points = [(s, p) for p in kind.phases for s in ("phase-start", "phase-end")]
    points += [("after-commit", p) for p in kind.commits]
    points += [(s, p) for p in kind.phases for s in INSIDE]
    return points


def default_points(kind: Kind) -> list[tuple[str, int]]:
    """The default tier, one trial a kind: right after the first commit where there is one (a crash between
    the commit and its record), else the end of the first phase."""
    return [("after-commit", kind.commits[0])] if kind.commits else [("phase-end", kind.phases[0])]


def inside(kind: str, stage: str, plan: CleanupPlan, phase: int) -> int:
    """A seeded count of results inside ``phase``: the results of the phases before it, plus 1 to its size."""
    by_phase = actions_by_phase(plan.actions)
    before = sum(len(v) for p, v in by_phase.items() if p < phase)
    return before + random.Random(f"{kind}/{stage}/{phase}").randint(1, len(by_phase[phase]))


def cases(select) -> list:
    return [pytest.param(name, stage, n, id=f"{name}-{stage}-{'in-' if stage in INSIDE else ''}{n}")
            for name, kind in KINDS.items() for stage, n in select(kind)]


DEFAULT = cases(default_points)
SLOW = [c for c in cases(crash_points) if c not in DEFAULT]


@pytest.fixture
def subject_for(tmp_path, request):
    def make(kind: Kind):
        if kind.iceberg:
            return kind.setup(request.getfixturevalue("lake"))
        return kind.setup(tmp_path)

    return make


def outcomes(rec: DuckDBRecorder, plan: CleanupPlan) -> dict[int, FileOutcome]:
    """Each action's latest outcome (records come in journal order)."""
    latest = {}
    for r in rec.file_records(plan_id=plan.plan_id):
        latest[r.action_id] = r.outcome
    return latest


def same_outcome(o: FileOutcome) -> str:
    return "gone" if o in GONE else "committed" if o in COMMITTED else o.value


def run_case(tmp_path, subject, kind: Kind, stage: str, n: int) -> None:
    plan, same = subject.plans()
    by_phase = actions_by_phase(plan.actions)
    assert tuple(sorted(by_phase)) == kind.phases, "the table no longer gives the phases this case list was built for"
    assert tuple(p for p in kind.phases if plan.phases[p - 1].mode == PhaseMode.COMMIT) == kind.commits
    crash = f"{stage}:{inside(kind.name, stage, plan, n) if stage in INSIDE else n}"

    # The twin, applied without a crash.
    with DuckDBRecorder(tmp_path / "ref.duckdb") as rec:
        ref = apply_plan(same, rec, executor=DriverExecutor())
        assert (ref.state, ref.whole) == ("COMPLETED", True)
        ref_outcomes = outcomes(rec, same)
        ref_versions = {e.phase: e.version for e in rec.events(plan_id=same.plan_id) if e.EVENT_TYPE == "Committed"}

    plan_file = str(tmp_path / "plan.parquet")
    write_plan(plan, plan_file)
    journal = str(tmp_path / "j.duckdb")
    env = dict(os.environ, LAKESWEEP_TEST_CRASH=crash, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "tests.support.driver_apply", plan_file, journal], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, f"{crash} was not reached: {proc.stdout}{proc.stderr[-2000:]}"

    with DuckDBRecorder(journal) as rec:
        at = int(crash.split(":")[1])
        records = rec.file_records(plan_id=plan.plan_id)
        ended = {e.phase for e in rec.events(plan_id=plan.plan_id) if e.EVENT_TYPE == "PhaseCompleted"}
        if stage in INSIDE:  # killed before, or after, the journal batch that reached the count
            assert len(records) < at if stage == "before-journal" else len(records) >= at
        else:  # killed in phase n: the phases before it ended, no later one started
            assert ended == {p for p in kind.phases if p < n}
            assert {r.phase for r in records} <= {p for p in kind.phases if p <= n}
            assert {r.action_id for r in records if r.phase == n} == (
                {a.action_id for a in by_phase[n]} if stage == "phase-end" else set())
        [report] = resume(rec, executor=DriverExecutor())
        assert (report.state, report.resumed, report.whole) == ("COMPLETED", True, True), report.reason
        latest = outcomes(rec, plan)
        events = rec.events(plan_id=plan.plan_id)
        [started] = [e for e in events if e.EVENT_TYPE == "ApplyStarted"]
        [completed] = [e for e in events if e.EVENT_TYPE == "ApplyCompleted"]
        totals = rec.apply_totals(started.apply_id)

    # Zero double counting: one latest outcome per action, and every count counts each action once.
    assert sorted(latest) == list(range(len(plan.actions)))
    assert FileOutcome.FAILED not in latest.values()
    assert sum(completed.counts.values()) == len(plan.actions) == sum(report.counts.values())
    assert completed.counts == report.counts
    assert {o: n for o, (n, _) in totals.items() if n} == {o: n for o, n in collections.Counter(latest.values()).items()}
    ended = collections.Counter(e.phase for e in events if e.EVENT_TYPE == "PhaseCompleted")
    assert ended == dict.fromkeys(kind.phases, 1)
    assert collections.Counter(same_outcome(o) for o in latest.values()) == \
        collections.Counter(same_outcome(o) for o in ref_outcomes.values())

    # Zero missed deletes: every planned delete done (or found done) and its file gone.
    deleted = set()
    for a in plan.actions:
        if a.verb.deletes:
            assert latest[a.action_id] in GONE | {FileOutcome.KEPT_NOT_EMPTY}, (a.path, latest[a.action_id])
            target = subject.target(subject.root, a.path)
            if latest[a.action_id] != FileOutcome.KEPT_NOT_EMPTY:
                assert not os.path.exists(target), target
                deleted.add(target)

    # One commit per commit phase, journaled once, naming the version the table holds (the twin's, where
    # versions are not random: Paimon's snapshot ids, Iceberg's metadata versions).
    committed = collections.Counter(e.phase for e in events if e.EVENT_TYPE == "Committed")
    assert committed == dict.fromkeys(kind.commits, 1)
    versions = {e.phase: e.version for e in events if e.EVENT_TYPE == "Committed"}
    for p in kind.commits:
        [version] = subject.commits(subject.root, plan, p)
        assert len(subject.commits(subject.twin, same, p)) == 1
        assert versions[p] == (ref_versions[p] if version is None else version)
        if not kind.iceberg:
            assert versions[p] == ref_versions[p]

    # The table ends as the twin does.
    assert subject.state(subject.root) == subject.state(subject.twin)
    if kind.iceberg:
        subject.exact(plan, deleted)


@pytest.mark.parametrize("name, stage, n", DEFAULT)
def test_a_killed_apply_resumes_to_the_uninterrupted_end(tmp_path, subject_for, name, stage, n):
    kind = KINDS[name]
    run_case(tmp_path, subject_for(kind), kind, stage, n)


@pytest.mark.slow
@pytest.mark.parametrize("name, stage, n", SLOW)
def test_the_crash_matrix(tmp_path, subject_for, name, stage, n):
    kind = KINDS[name]
    run_case(tmp_path, subject_for(kind), kind, stage, n)

