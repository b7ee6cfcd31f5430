"""Committing Iceberg plans through pyiceberg: a transaction whose requirements the catalog checks.

* **Expiry** commits pyiceberg's ``RemoveSnapshotsUpdate`` for the planned snapshots (and
  ``RemoveSnapshotRefUpdate`` for the refs past their age), under ``AssertRefSnapshotId`` for every ref the
  plan relied on: a tag or branch created or moved since planning fails the commit in the catalog itself.
* **Manifest rewriting** commits a ``replace`` snapshot made by a pyiceberg snapshot producer
  (``_RewriteManifests``): one data manifest per partition spec with every live entry as EXISTING (its
  snapshot id and sequence numbers kept), the delete manifests carried over, under the same requirements.
  Its summary carries ``lakesweep.commit-id``, which is how a resumed apply finds it.
* **Compaction** commits a ``replace`` snapshot (``compact_commit.ReplaceDataFiles``): each bin's inputs
  DELETED, its output ADDED (as the merge phase journaled it), the delete manifests the plan drops left
  out, under the same requirements and with the same commit id. Before each attempt the inputs are read
  again from the live head: a bin with an input no longer live is left out (its actions DROPPED, its
  output an orphan), and then every delete manifest is carried over.

A commit the catalog refuses (``CommitFailedException``) is retried after a backoff of 50 ms, doubling, at
most 5 s, up to ``max_commit_retries`` times; before each retry the table is read again and the plan's
requirements are checked again, so a plan that went stale is refused (``StalePlan``), never rebased.
pyiceberg's own retry, which rebuilds a producer on the new head, is not used.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from engine.errors import LakesweepError, PlanRejected, StalePlan
from engine.iceberg.kinds import CompactKind, ExpireKind, RewriteKind
from engine.iceberg.requirements import COMMIT_ID_PROPERTY
from engine.plan import Action, CleanupPlan

DEFAULT_MAX_COMMIT_RETRIES = 5
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 5.0


def backoff_s(attempt: int) -> float:
    """The wait before retry ``attempt`` (1, 2, ...): 50 ms, doubling, at most 5 s."""
    return min(FIRST_BACKOFF_S * 2 ** (attempt - 1), MAX_BACKOFF_S)


class IcebergCommitter:
    """The ``applier.commit.Committer`` of Iceberg plans."""

    def __init__(self, plan: CleanupPlan, *, sleep: Callable[[float], None] = time.sleep):
        self.plan = plan
        option = plan.options.get("max_commit_retries")
        self.max_retries = int(option.value) if option is not None else DEFAULT_MAX_COMMIT_RETRIES
        self.sleep = sleep
        self.attempts = 0  # commits tried by the last ``commit`` call (tests read it)
        self.left_out: dict[int, str] = {}  # compaction: actions the last commit left out, with why
        # what ``find`` and ``commit`` return: the new snapshot of a rewrite, the metadata version of an expiry
        self.version_label = "metadata version" if plan.kind == "expire" else "snapshot"

    def check(self, table, actions: Sequence[Action]) -> None:
        """Refuse a plan whose commit is not what its own rule allows on the live table, whatever the plan
        file says: an expiry may expire only snapshots, and remove only refs, that Iceberg's retention rule
        (with the plan's now, cut-off, retain-last and max-ref-age) lets go now, never ``main``."""
        expected = {"expire": ExpireKind.EXPIRE_SNAPSHOT, "rewrite-manifests": RewriteKind.REWRITE_MANIFEST,
                    "compact": CompactKind.COMPACT_REPLACE}.get(self.plan.kind)
        for a in actions:
            if a.kind != expected:
                raise PlanRejected(f"action {a.action_id} ({a.kind}) is not what an Iceberg {self.plan.kind} plan "
                                   f"commits; the plan is refused")
        if self.plan.kind == "expire":
            self._check_expiry(table, actions)
        if self.plan.kind == "compact":
            self._check_compaction(table, actions)

    def _check_compaction(self, table, actions: Sequence[Action]) -> None:
        """Every commit action names an input of its bin, and every input of a bin is named: what is
        replaced is exactly what the bin merges."""
        from engine.iceberg.compact_apply import bins_from_scope
        from engine.iceberg.compaction import resolve_location

        bins = bins_from_scope(self.plan.scope)
        named: dict[int, set[str]] = {}
        for a in actions:
            named.setdefault(a.bucket, set()).add(resolve_location(a.path, table.location))
        for group, paths in sorted(named.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            b = bins.get(group)
            if b is None or paths != {f.path for f in b.inputs}:
                raise PlanRejected(f"the plan's compact-replace actions of bin {group} are not the inputs its scope "
                                   f"lists; the plan is refused")

    def _check_expiry(self, table, actions: Sequence[Action]) -> None:
        from engine.iceberg.retention import expire_rule

        scope, options = self.plan.scope, self.plan.options
        expired = scope.get("expired", [])
        removed = scope.get("removed_refs", [])
        if sorted(a.snapshot_id for a in actions) != sorted(expired):
            raise PlanRejected("the plan's expire-snapshot actions and its scope name different snapshots; "
                               "the plan is refused")
        if "main" in removed:
            raise PlanRejected("the plan removes the ref 'main', which Iceberg never expires; the plan is refused")
        try:
            allowed, allowed_refs = expire_rule(table, now_ms=self.plan.now_ms, cutoff_ms=int(scope["cutoff_ms"]),
                                                retain_last=int(options["retain_last"].value),
                                                max_ref_age_ms=int(options["max_ref_age_ms"].value))
        except (KeyError, TypeError, ValueError) as e:
            raise PlanRejected(f"the plan lacks what its retention rule needs ({e}); the plan is refused") from e
        live = set(table.snapshots)
        keeps = sorted((set(expired) & live) - set(allowed))
        if keeps:
            raise PlanRejected(f"snapshot {keeps[0]} is one Iceberg's retention rule keeps on the live table "
                               f"(a ref or retain-last holds it); the plan is refused")
        refs = sorted((set(removed) & set(table.refs())) - set(allowed_refs))
        if refs:
            raise PlanRejected(f"ref '{refs[0]}' is not past its max-ref-age-ms; the plan is refused")

    def find(self, table, commit_id: str) -> int | None:
        if self.plan.kind == "expire":
            gone = not (set(self.plan.scope.get("expired", ())) & set(table.snapshots))
            refs = table.refs()
            if gone and not any(r in refs for r in self.plan.scope.get("removed_refs", ())):
                return metadata_version(table)
            return None
        for sid, snap in table.snapshots.items():
            props = snap.summary.additional_properties if snap.summary is not None else {}
            if props.get(COMMIT_ID_PROPERTY) == commit_id:
                return sid
        return None

    def commit(self, table, actions: Sequence[Action], commit_id: str, *, written=None) -> int:
        from pyiceberg.exceptions import CommitFailedException

        self.attempts = 0
        self.left_out = {}
        while True:
            self.attempts += 1
            try:  # each attempt reads the table anew and checks the plan's requirements first (_commit_once)
                return self._commit_once(table, actions, commit_id, written)
            except CommitFailedException as e:
                if self.attempts > self.max_retries:
                    raise LakesweepError(f"the catalog refused the commit {self.attempts} times; last: {e}. "
                                         f"Nothing was committed; apply again or re-plan") from e
                self.sleep(backoff_s(self.attempts))

    def _commit_once(self, table, actions: Sequence[Action], commit_id: str, written) -> int:
        # The catalog applies the updates to its metadata as it is at commit time, checking only the
        # requirements sent: a ref created since planning is in no AssertRefSnapshotId (and removing a
        # snapshot removes the refs pointing at it). So the plan is checked on a fresh read right before
        # the commit, and in-process catalogs check the whole set of refs inside the commit as well.
        live = table.refreshed()
        stale = [p for r in self.plan.requirements for p in r.problems(live)]
        if stale:
            raise StalePlan(f"the plan {self.plan.plan_id} is stale: " + "; ".join(stale)
                            + f". Nothing was committed; re-run 'lakesweep plan {self.plan.kind}'")
        if self.plan.kind == "expire":
            self.check(live, actions)
            return self._expire(live)
        if self.plan.kind == "compact":
            return self._compact(live, actions, commit_id, written or {})
        return self._rewrite(live, actions, commit_id)

    def _requirements(self, table):
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

        reqs = [AssertTableUUID(uuid=table.metadata.table_uuid)]
        live, removed = table.refs(), set(self.plan.scope.get("removed_refs", ()))
        expected = {}
        for name, sid in sorted(self.plan.scope.get("refs", {}).items()):
            if name in removed and name not in live:
                continue  # gone already: the plan removes it anyway
            reqs.append(AssertRefSnapshotId(ref=name, snapshot_id=sid))
            expected[name] = sid
        if isinstance(table.catalog, SqlCatalog):  # requirements checked in this process: all refs, exactly
            reqs.append(_assert_refs_exactly(expected))
        return tuple(reqs)

    def _expire(self, table) -> int:
        from pyiceberg.table.update import (RemovePartitionStatisticsUpdate, RemoveSnapshotRefUpdate,
                                            RemoveSnapshotsUpdate, RemoveStatisticsUpdate)

        present = sorted(set(self.plan.scope.get("expired", ())) & set(table.snapshots))
        refs = table.refs()
        updates = [RemoveSnapshotRefUpdate(ref_name=r) for r in self.plan.scope.get("removed_refs", ()) if r in refs]
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

    def _rewrite(self, table, actions: Sequence[Action], commit_id: str) -> int:
        from pyiceberg.table.snapshots import Operation

        from engine.iceberg.rewrite import RewriteManifests

        tx = table.table.transaction()
        producer = RewriteManifests(Operation.REPLACE, tx, table.io,
                                    expected=self.plan.scope["snapshot_id"],
                                    snapshot_properties={COMMIT_ID_PROPERTY: commit_id})
        return self._commit_producer(table, tx, producer)

    def _compact(self, table, actions: Sequence[Action], commit_id: str, written) -> int:
        from engine.iceberg.compact_apply import bins_from_scope, output_data_file
        from engine.iceberg.compact_commit import ReplaceDataFiles
        from engine.iceberg.table import canonical

        bins = bins_from_scope(self.plan.scope)
        live = _live_data_files(table)
        by_bin: dict[int, list[Action]] = {}
        for a in actions:
            by_bin.setdefault(a.bucket, []).append(a)
        self.left_out = {}
        replaced: set[str] = set()
        added = []
        for group in sorted(by_bin):
            b = bins[group]
            gone = sorted(f.path for f in b.inputs if f.path not in live)
            if gone:
                why = f"bin {group}: input {gone[0]} is no longer a live data file; its output is an orphan"
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
            return table.current_snapshot_id  # every bin left out: nothing to commit
        # A dropped delete manifest is safe to leave out only when every bin it served was compacted.
        whole = not self.left_out and set(by_bin) == set(bins)
        dropped = {m["path"] for m in self.plan.scope.get("delete_manifests", ()) if m["dropped"]} if whole else set()
        tx = table.table.transaction()
        producer = ReplaceDataFiles(tx, table.io, expected=table.current_snapshot_id, replaced=replaced,
                                    added=added, dropped_delete_manifests=dropped,
                                    snapshot_properties={COMMIT_ID_PROPERTY: commit_id})
        return self._commit_producer(table, tx, producer)

    def _commit_producer(self, table, tx, producer) -> int:
        """Commit a snapshot producer's snapshot under the plan's requirements; the new snapshot's id. A
        commit the catalog refuses deletes what the producer wrote (nothing names it) and raises."""
        from pyiceberg.exceptions import CommitFailedException

        updates, requirements = producer._commit()
        try:
            tx._apply(updates, requirements + self._requirements(table))
            tx.commit_transaction()
        except CommitFailedException:
            producer.discard()
            raise
        return producer.snapshot_id


def _live_data_files(table) -> set[str]:
    """Canonical paths of the live data files of the table's current snapshot."""
    from engine.errors import CorruptMetadata
    from engine.iceberg.table import canonical

    snapshot = table.table.current_snapshot()
    if snapshot is None:
        return set()
    try:
        return {canonical(e.data_file.file_path) for m in snapshot.manifests(table.io) if int(m.content) == 0
                for e in m.fetch_manifest_entry(table.io, discard_deleted=True)}
    except Exception as e:
        raise CorruptMetadata(canonical(snapshot.manifest_list), f"manifests cannot be read: {type(e).__name__}: {e}") from e


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
