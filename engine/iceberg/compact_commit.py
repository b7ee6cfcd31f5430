"""A pyiceberg snapshot producer that replaces data files by compacted ones (``replace``), as Iceberg's
``RewriteFiles`` commits a compaction: each manifest that lists a replaced file is rewritten with it DELETED,
the outputs are ADDED with the data sequence number of the snapshot the plan compacted (Iceberg's
``use-starting-sequence-number``), and a delete manifest the plan drops is left out; every other manifest is
carried over unchanged. The rows a scan of the new snapshot returns are those of the head it replaces.
The entries in detail: docs/design/iceberg-compaction.md#the-commit.
"""

from __future__ import annotations

from typing import AbstractSet, Sequence

from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries
from pyiceberg.table.update.snapshot import _SnapshotProducer

from lakesweep.engine.errors import StalePlan
from lakesweep.engine.iceberg.table import canonical


class ReplaceDataFiles(_SnapshotProducer["ReplaceDataFiles"]):
    """``expected``: the head snapshot the plan compacted, when another head must be refused (``StalePlan``;
    None: the live head); ``replaced``: canonical paths of the input files; ``added``: the outputs'
    ``DataFile``s (each with its ``spec_id``); ``dropped_delete_manifests``: canonical paths of the delete
    manifests left out; ``data_sequence_number``: the outputs' (None: inherited from the new snapshot)."""

    def __init__(self, transaction, io, *, expected: int | None, replaced: AbstractSet[str],
                 added: Sequence[DataFile], dropped_delete_manifests: AbstractSet[str],
                 data_sequence_number: int | None = None, snapshot_properties: dict[str, str]):
        super().__init__(Operation.REPLACE, transaction, io, snapshot_properties=snapshot_properties)
        self.data_sequence_number = data_sequence_number
        if expected is not None and self._parent_snapshot_id != expected:
            raise StalePlan(f"the table's head is snapshot {self._parent_snapshot_id}, not {expected} whose files "
                            f"the plan compacts; re-run 'lakesweep plan compact'")
        self.replaced = frozenset(replaced)
        self.added = list(added)
        self.dropped = frozenset(dropped_delete_manifests)
        self.removed_files: list[DataFile] = []  # replaced data files and the delete files left out
        self.found: set[str] = set()

    def _validate_concurrency(self) -> None:
        """Nothing to validate: the commit requires the head to be unchanged."""

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []

    def _existing_manifests(self) -> list[ManifestFile]:
        return []  # ``_manifests`` writes every manifest itself

    def _manifests(self) -> list[ManifestFile]:
        head = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
        out: list[ManifestFile] = []
        by_spec: dict[int, list[DataFile]] = {}
        for f in self.added:
            by_spec.setdefault(f.spec_id, []).append(f)
        for spec_id in sorted(by_spec):
            with self.new_manifest_writer(self.spec(spec_id)) as writer:
                for f in by_spec[spec_id]:
                    writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id,
                                                       sequence_number=self.data_sequence_number,
                                                       file_sequence_number=None, data_file=f))
            out.append(writer.to_manifest_file())
        for m in head.manifests(io=self._io):
            if m.content == ManifestContent.DELETES:
                if canonical(m.manifest_path) in self.dropped:
                    self.removed_files += [e.data_file for e in m.fetch_manifest_entry(io=self._io, discard_deleted=True)]
                else:
                    out.append(m)
                continue
            entries = m.fetch_manifest_entry(io=self._io, discard_deleted=True)
            hits = [e for e in entries if canonical(e.data_file.file_path) in self.replaced]
            if not hits:
                out.append(m)
                continue
            with self.new_manifest_writer(self.spec(m.partition_spec_id)) as writer:
                for e in entries:
                    if canonical(e.data_file.file_path) in self.replaced:
                        writer.delete(e)
                        self.removed_files.append(e.data_file)
                        self.found.add(canonical(e.data_file.file_path))
                    else:
                        writer.existing(e)
            out.append(writer.to_manifest_file())
        missing = sorted(self.replaced - self.found)
        if missing:
            self._clean_all_uncommitted()
            raise StalePlan(f"{missing[0]} is no longer a live data file of snapshot {self._parent_snapshot_id}; "
                            f"re-run 'lakesweep plan compact'")
        return out

    def _summary(self, snapshot_properties=None) -> Summary:
        """pyiceberg's summary of what was added and removed (each file under its own spec), the totals
        carried from the head; pyiceberg's summary builder knows no ``replace``, so the totals are worked
        out as for an overwrite and the operation set after."""
        meta = self._transaction.table_metadata
        schema, specs = meta.schema(), meta.specs()
        ssc = SnapshotSummaryCollector()
        for f in self.added:
            ssc.add_file(f, schema=schema, partition_spec=specs[f.spec_id])
        for f in self.removed_files:
            ssc.remove_file(f, schema=schema, partition_spec=specs[f.spec_id])
        head = meta.snapshot_by_id(self._parent_snapshot_id)
        totals = update_snapshot_summaries(Summary(operation=Operation.OVERWRITE, **ssc.build()),
                                           previous_summary=head.summary if head is not None else None)
        return Summary(operation=Operation.REPLACE, **totals.additional_properties, **dict(snapshot_properties or {}))

    def discard(self) -> None:
        """Delete the manifests and list this producer wrote (a commit the catalog refused)."""
        self._clean_all_uncommitted()
