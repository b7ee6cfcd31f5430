"""Committing Iceberg plans through pyiceberg: a transaction whose requirements the catalog checks.

Expiry commits ``RemoveSnapshotsUpdate`` (and ``RemoveSnapshotRefUpdate``); manifest rewriting and compaction
commit a ``replace`` snapshot carrying ``lakesweep.commit-id``; each under ``AssertRefSnapshotId`` for every
ref. By default every attempt works from a fresh read of the table and the plan is the upper bound of what
it does (what no longer holds on the live table is left out and reported); ``strict`` refuses the plan
(``StalePlan``) on any change to the refs since planning. A commit the catalog refuses is retried after a
backoff, up to ``max_commit_retries`` times; pyiceberg's own retry is not used. A commit that writes
manifests keeps what an attempt read and wrote for the next (``attempts.AttemptWork``), so that it gets
through on a table being written. The rules and why: docs/design/iceberg.md#commits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from lakesweep.engine.errors import CorruptMetadata, LakesweepError, PlanRejected, StalePlan
from lakesweep.engine.iceberg.kinds import rules_of
from lakesweep.engine.iceberg.requirements import COMMIT_ID_PROPERTY
from lakesweep.engine.iceberg.scopes import removed_refs
from lakesweep.engine.plan import Action, CleanupPlan

DEFAULT_MAX_COMMIT_RETRIES = 5
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 5.0


def backoff_s(attempt: int) -> float:
    """The wait before retry ``attempt`` (1, 2, ...): 50 ms, doubling, at most 5 s."""
    return min(FIRST_BACKOFF_S * 2 ** (attempt - 1), MAX_BACKOFF_S)


class IcebergCommitter:
    """The ``applier.commit.Committer`` of Iceberg plans."""

    def __init__(self, plan: CleanupPlan, *, strict: bool = False, sleep: Callable[[float], None] = time.sleep):
        self.plan = plan
        self.strict = strict
        option = plan.options.get("max_commit_retries")
        self.max_retries = int(option.value) if option is not None else DEFAULT_MAX_COMMIT_RETRIES
        self.sleep = sleep
        self.attempts = 0  # commits tried by the last ``commit`` call
        self.left_out: dict[int, str] = {}  # actions the last commit left out (DROPPED), with why
        self.kept: dict[int, str] = {}  # expiry: planned snapshots the live table keeps (SKIPPED_REFERENCED)
        self.work = None  # what the running commit's attempts keep for the next (``attempts.AttemptWork``)
        # the plan kind's commit (``engine.iceberg.kinds.IcebergPlanKind``): what it carries, checks and makes
        self.rules = rules_of(plan)
        self.steps = self.rules.commit_steps() if self.rules.commit_steps is not None else None
        # what ``find`` and ``commit`` return: the new snapshot of a rewrite, the metadata version of an expiry
        self.version_label = self.rules.version_label

    def check(self, table, actions: Sequence[Action]) -> None:
        """Refuse a plan whose commit is not what its own rule allows, whatever the plan file says: an
        expiry names its snapshots in its scope too, never removes ``main``, and carries the options its
        rule needs; with ``strict`` it may expire only snapshots, and remove only refs, that Iceberg's
        retention rule (with the plan's now, cut-off, retain-last and max-ref-age) lets go on the live
        table. (By default the commit expires only those, and keeps the others.)"""
        expected = self.rules.commit_action
        for a in actions:
            if a.kind != expected:
                raise PlanRejected(f"action {a.action_id} ({a.kind}) is not what an Iceberg {self.plan.kind} plan "
                                   f"commits; the plan is refused")
        if self.steps is not None and self.steps.check is not None:
            self.steps.check(self, table, actions)

    def _check_compaction(self, table, actions: Sequence[Action]) -> None:
        """Every commit action names an input of its bin, and every input of a bin is named: what is
        replaced is exactly what the bin merges. Each bin's partition, inputs and deletes are the live
        table's (``compaction.check_bins``)."""
        from lakesweep.engine.iceberg.compact_apply import bins_from_scope
        from lakesweep.engine.iceberg.compaction import check_bins, resolve_location

        bins = bins_from_scope(self.plan.scope)
        named: dict[int, set[str]] = {}
        for a in actions:
            named.setdefault(a.bucket, set()).add(resolve_location(a.path, table.location))
        for group, paths in sorted(named.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            b = bins.get(group)
            if b is None or paths != {f.path for f in b.inputs}:
                raise PlanRejected(f"the plan's compact-replace actions of bin {group} are not the inputs its scope "
                                   f"lists; the plan is refused")
        seq = self.plan.scope.sequence_number
        check_bins(table, [bins[g] for g in sorted(named) if g in bins],
                   sequence_number=seq if isinstance(seq, int) else None)

    def _check_expiry(self, table, actions: Sequence[Action]) -> None:
        scope = self.plan.scope
        expired = scope.expired
        removed = scope.removed_refs
        if sorted(a.snapshot_id for a in actions) != sorted(expired):
            raise PlanRejected("the plan's expire-snapshot actions and its scope name different snapshots; "
                               "the plan is refused")
        if "main" in removed:
            raise PlanRejected("the plan removes the ref 'main', which Iceberg never expires; the plan is refused")
        heads = {sid: name for name, sid in scope.refs.items() if name not in removed}
        for sid in sorted(set(expired) & set(heads)):
            # the plan's own view: a ref it keeps pointed at the snapshot, so Iceberg's rule kept it then too
            raise PlanRejected(f"snapshot {sid} is the head of ref '{heads[sid]}', which the plan keeps, yet the plan "
                               f"expires it; the plan is refused")
        allowed, allowed_refs = self._rule(table)
        if not self.strict:
            return
        live = set(table.snapshots)
        keeps = sorted((set(expired) & live) - set(allowed))
        if keeps:
            raise PlanRejected(f"snapshot {keeps[0]} is one Iceberg's retention rule keeps on the live table "
                               f"(a ref or retain-last holds it); the plan is refused")
        refs = sorted((set(removed) & set(table.refs())) - set(allowed_refs))
        if refs:
            raise PlanRejected(f"ref '{refs[0]}' is not past its max-ref-age-ms; the plan is refused")

    def _rule(self, table) -> tuple[list[int], list[str]]:
        """(snapshots, refs) Iceberg's retention rule lets go on ``table``, with the plan's now and options."""
        from lakesweep.engine.iceberg.retention import expire_rule

        scope, options = self.plan.scope, self.plan.options
        try:
            return expire_rule(table, now_ms=self.plan.now_ms, cutoff_ms=scope.cutoff_ms,
                               retain_last=int(options["retain_last"].value),
                               max_ref_age_ms=int(options["max_ref_age_ms"].value))
        except (KeyError, TypeError, ValueError) as e:
            raise PlanRejected(f"the plan lacks what its retention rule needs ({e}); the plan is refused") from e

    def find(self, table, commit_id: str) -> int | None:
        if self.steps is not None and self.steps.find is not None:
            return self.steps.find(self, table, commit_id)
        for sid, snap in table.snapshots.items():
            props = snap.summary.additional_properties if snap.summary is not None else {}
            if props.get(COMMIT_ID_PROPERTY) == commit_id:
                return sid
        return None

    def commit(self, table, actions: Sequence[Action], commit_id: str, *, written=None) -> int:
        from pyiceberg.exceptions import CommitFailedException

        self.attempts, self.work = 0, None
        try:
            while True:
                self.attempts += 1
                self.left_out, self.kept = {}, {}
                try:  # each attempt reads the table anew and checks the plan's requirements first (_commit_once)
                    return self._commit_once(table, actions, commit_id, written)
                except CommitFailedException as e:
                    if self.attempts > self.max_retries:
                        raise LakesweepError(f"the catalog refused the commit {self.attempts} times; last: {e}. "
                                             f"Nothing was committed; apply again or re-plan") from e
                    self.sleep(backoff_s(self.attempts))
        finally:
            if self.work is not None:  # a commit settled its manifests: what is left, no snapshot lists
                self.work.abandon()
            self.work = None

    def _commit_once(self, table, actions: Sequence[Action], commit_id: str, written) -> int | None:
        # The catalog applies the updates to its metadata as it is at commit time, checking only the
        # requirements sent: a ref created since this read is in no AssertRefSnapshotId (and removing a
        # snapshot removes the refs pointing at it). So the commit is worked out on a fresh read and sent
        # under every ref as read; in-process catalogs check the whole set of refs inside the commit too.
        live = table.refreshed()
        stale = [p for r in self.plan.requirements if self.strict or not r.STRICT_ONLY for p in r.problems(live)]
        if stale:
            raise StalePlan(f"the plan {self.plan.plan_id} is stale: " + "; ".join(stale)
                            + f". Nothing was committed; re-run 'lakesweep plan {self.plan.kind}'")
        if self.steps is None:
            raise PlanRejected(f"Iceberg '{self.plan.kind}' plans commit nothing; the plan {self.plan.plan_id} is "
                               "refused")
        return self.steps.commit(self, live, actions, commit_id, written or {})

    def _find_expiry(self, table, commit_id: str) -> int | None:
        """An expiry carries no commit id: it is found done when its snapshots and refs are gone."""
        gone = not (set(self.plan.scope.expired) & set(table.snapshots))
        refs = table.refs()
        if gone and not any(r in refs for r in self.plan.scope.removed_refs):
            return metadata_version(table)
        return None

    def _commit_expiry(self, live, actions: Sequence[Action], commit_id: str, written) -> int:
        self.check(live, actions)
        return self._expire(live, actions)

    def _commit_rewrite(self, live, actions: Sequence[Action], commit_id: str, written) -> int | None:
        return self._rewrite(live, actions, commit_id)

    def _requirements(self, table):
        """pyiceberg requirements for a commit worked out on ``table``: the same table, and every ref where
        this read found it (``strict``: where the plan found it)."""
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

        reqs = [AssertTableUUID(uuid=table.metadata.table_uuid)]
        live, removed = table.refs(), set(removed_refs(self.plan.scope))
        expected = {}
        for name, sid in sorted((self.plan.scope.refs if self.strict else live).items()):
            if name in removed and name not in live:
                continue  # gone already: the plan removes it anyway
            reqs.append(AssertRefSnapshotId(ref=name, snapshot_id=sid))
            expected[name] = sid
        if isinstance(table.catalog, SqlCatalog):  # requirements checked in this process: all refs, exactly
            reqs.append(_assert_refs_exactly(expected))
        return tuple(reqs)

    def _expire(self, table, actions: Sequence[Action]) -> int:
        from pyiceberg.table.update import (RemovePartitionStatisticsUpdate, RemoveSnapshotRefUpdate,
                                            RemoveSnapshotsUpdate, RemoveStatisticsUpdate)

        allowed, allowed_refs = self._rule(table)
        present = sorted(set(self.plan.scope.expired) & set(table.snapshots))
        kept = set(present) - set(allowed)  # empty with strict: ``check`` refused such a plan
        present = [s for s in present if s not in kept]
        self.kept = {a.action_id: why_kept(table, a.snapshot_id) for a in actions if a.snapshot_id in kept}
        refs = table.refs()
        updates = [RemoveSnapshotRefUpdate(ref_name=r) for r in self.plan.scope.removed_refs
                   if r in refs and r in allowed_refs]
        if present:
            # The statistics of expired snapshots leave the metadata in the same commit (Java's RemoveSnapshots
            # does so; pyiceberg's RemoveSnapshotsUpdate keeps partition statistics), so no retained metadata
            # names a statistics file the plan deletes.
            gone = set(present)
            meta = table.metadata
            updates += [RemoveStatisticsUpdate(snapshot_id=s) for s in sorted({f.snapshot_id for f in meta.statistics} & gone)]
            updates += [RemovePartitionStatisticsUpdate(snapshot_id=s)
                        for s in sorted({f.snapshot_id for f in meta.partition_statistics} & gone)]
            updates.append(RemoveSnapshotsUpdate(snapshot_ids=present))
        if updates:
            tx = table.table.transaction()
            tx._apply(tuple(updates), self._requirements(table))
            tx.commit_transaction()
        return metadata_version(table.refreshed())

    def _rewrite(self, table, actions: Sequence[Action], commit_id: str) -> int | None:
        from pyiceberg.table.snapshots import Operation

        from lakesweep.engine.iceberg.attempts import AttemptWork
        from lakesweep.engine.iceberg.compaction import resolve_location
        from lakesweep.engine.iceberg.rewrite import RewriteManifests

        planned = {resolve_location(a.path, table.location): a for a in actions}
        if self.work is None:
            self.work = AttemptWork(table.io)
        tx = table.table.transaction()
        producer = RewriteManifests(Operation.REPLACE, tx, table.io, work=self.work,
                                    expected=self.plan.scope.snapshot_id if self.strict else None,
                                    rewrite=frozenset(planned),
                                    snapshot_properties={COMMIT_ID_PROPERTY: commit_id})
        gone = {path for path in planned if path not in producer.head_data_manifests()}
        self.left_out = {planned[p].action_id: f"manifest {planned[p].path} is no longer in the current snapshot"
                         for p in sorted(gone)}
        if len(gone) == len(planned):
            return None  # nothing of the plan is left to rewrite: no commit
        return self._commit_producer(table, tx, producer)

    def _compact(self, table, actions: Sequence[Action], commit_id: str, written) -> int:
        from lakesweep.engine.iceberg.compact_apply import bins_from_scope, output_data_file
        from lakesweep.engine.iceberg.compact_commit import ReplaceDataFiles, ReplaceWork
        from lakesweep.engine.iceberg.table import canonical

        bins = bins_from_scope(self.plan.scope)
        by_bin: dict[int, list[Action]] = {}
        for a in actions:
            by_bin.setdefault(a.bucket, []).append(a)
        if self.work is None:
            self.work = ReplaceWork(table.io, {f.path for g in by_bin for f in bins[g].inputs})
        work = self.work
        live = work.live_inputs(table)
        self.left_out = {}
        conflicts = new_deletes_since(table, self.plan.scope, [bins[g] for g in sorted(by_bin)], seen=work.deletes)
        replaced: set[str] = set()
        added = []
        for group in sorted(by_bin):
            b = bins[group]
            gone = sorted(f.path for f in b.inputs if f.path not in live)
            why = None
            if gone:
                why = f"bin {group}: input {gone[0]} is no longer a live data file; its output is an orphan"
            elif group in conflicts:
                why = f"bin {group}: {conflicts[group]}, committed since the plan; its output is an orphan"
            if why is not None:
                self.left_out.update({a.action_id: why for a in by_bin[group]})
                continue
            output = written.get(group)
            if output is None:
                raise LakesweepError(f"bin {group} of plan {self.plan.plan_id} has no output on record; nothing was "
                                     f"committed. Apply again: the merge phase writes it")
            if output["written"]:
                info = table.fileio.info(canonical(output["location"]))
                if info is None or info.size != output["bytes"]:
                    raise LakesweepError(f"the output of bin {group}, {output['location']}, is not in place with "
                                         f"its {output['bytes']} bytes; nothing was committed. Apply again")
                added.append(output_data_file(output, b))
            replaced |= {f.path for f in b.inputs}
        if not replaced:
            return None  # every bin left out: nothing to commit
        # A dropped delete manifest is safe to leave out only when every bin it served was compacted.
        whole = not self.left_out and set(by_bin) == set(bins)
        dropped = {m["path"] for m in self.plan.scope.delete_manifests if m["dropped"]} if whole else set()
        # The outputs' data sequence number is the plan snapshot's (Iceberg's use-starting-sequence-number):
        # no delete older than it applies to them, and any later equality delete still does.
        seq = self.plan.scope.sequence_number if table.metadata.format_version >= 2 else None
        tx = table.table.transaction()
        producer = ReplaceDataFiles(tx, table.io, work=work,
                                    expected=self.plan.scope.snapshot_id if self.strict else None,
                                    replaced=replaced, added=added, dropped_delete_manifests=dropped,
                                    data_sequence_number=seq, snapshot_properties={COMMIT_ID_PROPERTY: commit_id})
        return self._commit_producer(table, tx, producer)

    def _commit_producer(self, table, tx, producer) -> int:
        """Commit a snapshot producer's snapshot under the plan's requirements; the new snapshot's id. A
        commit the catalog refuses deletes the producer's manifest list (nothing names it) and raises; its
        manifests stay with ``producer.work`` for the next attempt."""
        from pyiceberg.exceptions import CommitFailedException

        updates, requirements = producer._commit()
        try:
            tx._apply(updates, requirements + self._requirements(table))
            tx.commit_transaction()
        except CommitFailedException:
            producer.discard()
            raise
        except BaseException:
            producer.work.in_doubt = True  # the commit may have landed: nothing it wrote is deleted
            raise
        producer.work.settle(producer.listed)
        return producer.snapshot_id


def why_kept(table, snapshot_id: int) -> str:
    """Why the live table keeps a snapshot an expiry planned: the refs pointing at it, else the branches
    whose retention keeps it (their min-snapshots-to-keep or max-snapshot-age-ms)."""
    from lakesweep.engine.iceberg.retention import ancestors

    at = sorted(name for name, sid in table.refs().items() if sid == snapshot_id)
    if at:
        return f"snapshot {snapshot_id} is kept: " + ", ".join(f"ref '{n}'" for n in at) + " points at it"
    branches = sorted(name for name, ref in table.metadata.refs.items()
                      if getattr(ref.snapshot_ref_type, "value", ref.snapshot_ref_type) == "branch"
                      and any(s.snapshot_id == snapshot_id for s in ancestors(table.snapshots, ref.snapshot_id)))
    if branches:
        return (f"snapshot {snapshot_id} is kept: branch " + ", ".join(f"'{b}'" for b in branches)
                + " retains it as an ancestor")
    return f"snapshot {snapshot_id} is kept by the retention rule on the live table"


def new_deletes_since(table, scope, bins, *, seen: dict | None = None) -> dict[int, str]:
    """The bins (by index) to which a delete committed since the plan's snapshot may apply, each with the
    first such delete: a live delete file whose data sequence number is above the plan snapshot's that is

    * a position delete (or deletion vector) naming one of the bin's inputs (``referenced_data_file``, else
      its ``file_path`` column), or
    * an equality delete of the bin's partition (same spec and partition values) or of an unpartitioned
      spec (it applies to every partition).

    A delete whose content cannot be read counts as applying (fail closed: the bin is left out). ``seen``
    keeps what each delete manifest means for ``bins`` (by path) across calls with the same ``bins``."""
    from lakesweep.engine.iceberg.compaction import _partition_key
    from lakesweep.engine.iceberg.table import canonical

    since = scope.sequence_number
    snapshot = table.table.current_snapshot()
    if snapshot is None or not bins:
        return {}
    if not isinstance(since, int):
        return {b.index: "a delete may have been" for b in bins}  # no sequence number to compare: fail closed
    specs = table.metadata.specs()
    inputs = {f.path: b.index for b in bins for f in b.inputs}
    by_partition: dict[tuple, list[int]] = {}
    for b in bins:
        by_partition.setdefault((b.spec_id, _partition_key(tuple(b.partition_values))), []).append(b.index)
    found: dict[int, str] = {}
    try:
        for m in snapshot.manifests(table.io):
            if int(m.content) != 1:
                continue
            pairs = seen.get(m.manifest_path) if seen is not None else None
            if pairs is None:
                pairs = _deletes_for_bins(table, m, since, bins, inputs, by_partition, specs)
                if seen is not None:
                    seen[m.manifest_path] = pairs
            for i, what in pairs:
                found.setdefault(i, what)
    except LakesweepError:
        raise
    except Exception as e:
        raise CorruptMetadata(canonical(snapshot.manifest_list),
                              f"delete manifests cannot be read: {type(e).__name__}: {e}") from e
    return found


def _deletes_for_bins(table, m, since: int, bins, inputs: dict, by_partition: dict,
                      specs) -> tuple[tuple[int, str], ...]:
    """(bin index, the delete) for each delete of manifest ``m`` newer than ``since`` that may apply to a bin,
    in the manifest's order (``new_deletes_since``'s rule)."""
    from lakesweep.engine.iceberg.compaction import _partition_key, resolve_location

    pairs: list[tuple[int, str]] = []
    for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
        seq = e.sequence_number if e.sequence_number is not None else 0
        if seq <= since:
            continue
        f = e.data_file
        location = resolve_location(f.file_path, table.location)
        if int(f.content) == 1:
            what = f"position delete {location}"
            try:
                named = ({resolve_location(f.referenced_data_file, table.location)}
                         if getattr(f, "referenced_data_file", None)
                         else _named_by_position_delete(table, location))
            except LakesweepError as err:
                named, what = set(inputs), f"position delete {location}, which cannot be read ({err})"
            hits = sorted({inputs[p] for p in named if p in inputs})
        else:
            spec = specs.get(int(m.partition_spec_id))
            if spec is None or spec.is_unpartitioned():
                hits = [b.index for b in bins]
            else:
                values = tuple(f.partition[i] for i in range(len(spec.fields)))
                hits = by_partition.get((spec.spec_id, _partition_key(values)), [])
            what = f"equality delete {location}"
        pairs += [(i, what) for i in hits]
    return tuple(pairs)


def _named_by_position_delete(table, location: str) -> frozenset[str]:
    """The data files a position delete file names; read through the table's FileIO."""
    from lakesweep.engine.iceberg.compaction import InputFile, _referenced_paths

    return _referenced_paths(table, InputFile(location=location, path=location, size=0, record_count=0,
                                              sequence_number=0, file_sequence_number=None, snapshot_id=None))


def metadata_version(table) -> int:
    """A number for the table's metadata version: the entries of its metadata log, plus the current one."""
    return len(table.metadata.metadata_log) + 1


def _assert_refs_exactly(refs: dict[str, int]):
    """A pyiceberg table requirement that the metadata's refs are exactly ``refs`` (name -> snapshot id),
    for catalogs that validate requirements in this process (the SQL catalog): no ref created, moved or
    dropped since the plan's check."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update import ValidatableTableRequirement

    class AssertRefsExactly(ValidatableTableRequirement):
        type: str = "lakesweep-assert-refs-exactly"
        refs: dict[str, int]

        def validate(self, base_metadata) -> None:
            found = {} if base_metadata is None else {n: r.snapshot_id for n, r in base_metadata.refs.items()}
            if found != self.refs:
                raise CommitFailedException(f"Requirement failed: refs are {found}, expected {self.refs}")

    return AssertRefsExactly(refs=refs)


@dataclass(frozen=True, slots=True)
class CommitSteps:
    """What one plan kind's commit does, as unbound ``IcebergCommitter`` methods: ``check`` (beyond the
    action kind; None: nothing more), ``find`` (None: the snapshot whose summary carries the commit id) and
    ``commit`` (one attempt on a fresh read). The plan kind's entry names them
    (``engine.iceberg.kinds.IcebergPlanKind.commit_steps``)."""

    commit: Callable
    check: Callable | None = None
    find: Callable | None = None


EXPIRE_STEPS = CommitSteps(IcebergCommitter._commit_expiry, check=IcebergCommitter._check_expiry,
                           find=IcebergCommitter._find_expiry)
REWRITE_STEPS = CommitSteps(IcebergCommitter._commit_rewrite)
COMPACT_STEPS = CommitSteps(IcebergCommitter._compact, check=IcebergCommitter._check_compaction)
