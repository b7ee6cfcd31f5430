"""A pyiceberg snapshot producer that rewrites the data manifests of a branch head (``replace``).

pyiceberg 0.12 has no ``rewrite_manifests``; this is its ``_SnapshotProducer`` with the manifests chosen
as Iceberg's ``RewriteManifests`` chooses them: every live entry (ADDED or EXISTING) of the head's data
manifests that the plan rewrites, written as EXISTING with its snapshot id and sequence numbers, one
manifest per partition spec; DELETED entries are dropped (they say what an older snapshot removed). Every
other manifest of the head (delete manifests, and data manifests committed since planning) is carried
over unchanged. The rows a scan of the new snapshot returns are those of the head it replaces. The merged
manifests are kept across the commit's attempts (``attempts.AttemptWork``): docs/design/iceberg.md#commits.
"""

from __future__ import annotations

from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import _SnapshotProducer

from lakesweep.engine.errors import StalePlan
from lakesweep.engine.iceberg.attempts import AttemptWork, KeepsWork
from lakesweep.engine.iceberg.table import canonical


class RewriteManifests(KeepsWork, _SnapshotProducer["RewriteManifests"]):
    """``work``: what the commit's earlier attempts wrote (``AttemptWork``); ``rewrite``: canonical paths of
    the data manifests to rewrite (None: every data manifest of the head); ``expected``: the head snapshot
    the plan rewrote, when another head must be refused (``StalePlan``; None: the live head, whatever it
    is)."""

    def __init__(self, operation, transaction, io, *, work: AttemptWork, expected: int | None,
                 rewrite: frozenset[str] | None = None, snapshot_properties: dict[str, str]):
        super().__init__(operation, transaction, io, snapshot_properties=snapshot_properties)
        if expected is not None and self._parent_snapshot_id != expected:
            raise StalePlan(f"the table's head is snapshot {self._parent_snapshot_id}, not {expected} whose "
                            f"manifests the plan rewrites; re-run 'lakesweep plan rewrite-manifests'")
        self.work = work
        self._snapshot_id = work.snapshot(self._snapshot_id)
        self.rewrite = rewrite
        self.listed: set[str] = set()  # the manifests the new snapshot lists
        self.entries_written = 0
        self.replaced = self.created = self.kept = 0

    def _summary(self, snapshot_properties=None) -> Summary:
        """Java's ``RewriteManifests`` summary: the head's totals carried over (no file is added or
        removed) and what was rewritten; pyiceberg's summary builder knows no ``replace``."""
        head = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
        previous = head.summary.additional_properties if head is not None and head.summary is not None else {}
        totals = {k: v for k, v in previous.items() if k.startswith("total-")}
        return Summary(operation=Operation.REPLACE, **totals, **{
            "manifests-created": str(self.created), "manifests-kept": str(self.kept),
            "manifests-replaced": str(self.replaced), "entries-processed": str(self.entries_written)},
            **dict(snapshot_properties or {}))

    def _validate_concurrency(self) -> None:
        """Nothing to validate: the commit requires the head to be unchanged."""

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []

    def _head_manifests(self) -> list[ManifestFile]:
        head = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
        return [] if head is None else list(head.manifests(io=self._io))

    def head_data_manifests(self) -> frozenset[str]:
        """Canonical paths of the head's data manifests."""
        return frozenset(canonical(m.manifest_path) for m in self._head_manifests() if m.content == ManifestContent.DATA)

    def _rewrites(self, m: ManifestFile) -> bool:
        return m.content == ManifestContent.DATA and (self.rewrite is None or canonical(m.manifest_path) in self.rewrite)

    def _existing_manifests(self) -> list[ManifestFile]:
        manifests = self._head_manifests()
        chosen = [m for m in manifests if self._rewrites(m)]
        self.work.start(tuple(m.manifest_path for m in chosen))
        if self.work.made is None:
            self.work.made = self._merge(chosen)
        written, self.entries_written = self.work.made
        self.replaced, self.created = len(chosen), len(written)
        carried = [m for m in manifests if not self._rewrites(m)]
        self.kept = len(carried)
        self.listed = {m.manifest_path for m in written + carried}
        return written + carried

    def _merge(self, chosen: list[ManifestFile]) -> tuple[list[ManifestFile], int]:
        """The live entries of ``chosen`` as EXISTING, one manifest per partition spec; and their number."""
        by_spec: dict[int, list[ManifestEntry]] = {}
        for m in chosen:
            for entry in m.fetch_manifest_entry(io=self._io, discard_deleted=True):
                by_spec.setdefault(m.partition_spec_id, []).append(entry)
        written, entries = [], 0
        for spec_id in sorted(by_spec):
            with self.new_manifest_writer(self.spec(spec_id)) as writer:
                for entry in by_spec[spec_id]:
                    writer.existing(entry)
                    entries += 1
            written.append(writer.to_manifest_file())
        return written, entries
