"""Committing Iceberg plans through pyiceberg: a transaction whose requirements the catalog checks.

* **Expiry** commits pyiceberg's ``RemoveSnapshotsUpdate`` for the planned snapshots (and
  ``RemoveSnapshotRefUpdate`` for the refs past their age), under ``AssertRefSnapshotId`` for every ref the
  plan relied on: a tag or branch created or moved since planning fails the commit in the catalog itself.
* **Manifest rewriting** commits a ``replace`` snapshot made by a pyiceberg snapshot producer
  (``_RewriteManifests``): one data manifest per partition spec with every live entry as EXISTING (its
  snapshot id and sequence numbers kept), the delete manifests carried over, under the same requirements.
  Its summary carries ``lakesweep.commit-id``, which is how a resumed apply finds it.

A commit the catalog refuses (``CommitFailedException``) is retried after a backoff of 50 ms, doubling, at
most 5 s, up to ``max_commit_retries`` times; before each retry the table is read again and the plan's
requirements are checked again, so a plan that went stale is refused (``StalePlan``), never rebased.
pyiceberg's own retry, which rebuilds a producer on the new head, is not used.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from engine.errors import LakesweepError, PlanRejected, StalePlan
from engine.iceberg.kinds import ExpireKind, RewriteKind
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
        # what ``find`` and ``commit`` return: the new snapshot of a rewrite, the metadata version of an expiry
        self.version_label = "metadata version" if plan.kind == "expire" else "snapshot"

    def check(self, table, actions: Sequence[Action]) -> None:
        """Refuse a plan whose commit is not what its own rule allows on the live table, whatever the plan
        file says: an expiry may expire only snapshots, and remove only refs, that Iceberg's retention rule
        (with the plan's now, cut-off, retain-last and max-ref-age) lets go now, never ``main``."""
        expected = ExpireKind.EXPIRE_SNAPSHOT if self.plan.kind == "expire" else RewriteKind.REWRITE_MANIFEST
        for a in actions:
            if a.kind != expected:
                raise PlanRejected(f"action {a.action_id} ({a.kind}) is not what an Iceberg {self.plan.kind} plan "
                                   f"commits; the plan is refused")
        if self.plan.kind == "expire":
            self._check_expiry(table, actions)

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

    def commit(self, table, actions: Sequence[Action], commit_id: str) -> int:
        from pyiceberg.exceptions import CommitFailedException

        live = table
        self.attempts = 0
        while True:
            self.attempts += 1
            try:
                return self._commit_once(live, actions, commit_id)
            except CommitFailedException as e:
                if self.attempts > self.max_retries:
                    raise LakesweepError(f"the catalog refused the commit {self.attempts} times; last: {e}. "
                                         f"Nothing was committed; apply again or re-plan") from e
                self.sleep(backoff_s(self.attempts))
                live = live.refreshed()
                stale = [p for r in self.plan.requirements for p in r.problems(live)]
                if stale:
                    raise StalePlan(f"the plan {self.plan.plan_id} went stale while committing: " + "; ".join(stale)
                                    + f". Nothing was committed; re-run 'lakesweep plan {self.plan.kind}'") from e

    def _commit_once(self, table, actions: Sequence[Action], commit_id: str) -> int:
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
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.table.snapshots import Operation

        from engine.iceberg.rewrite import RewriteManifests

        tx = table.table.transaction()
        producer = RewriteManifests(Operation.REPLACE, tx, table.io,
                                    expected=self.plan.scope["snapshot_id"],
                                    snapshot_properties={COMMIT_ID_PROPERTY: commit_id})
        updates, requirements = producer._commit()
        try:
            tx._apply(updates, requirements + self._requirements(table))
            tx.commit_transaction()
        except CommitFailedException:
            producer.discard()  # the catalog refused it: nothing names what this attempt wrote
            raise
        return producer.snapshot_id


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
