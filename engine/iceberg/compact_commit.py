"""A pyiceberg snapshot producer that replaces data files by compacted ones (``replace``), as Iceberg's
``RewriteFiles`` commits a compaction: each manifest that lists a replaced file is rewritten with it DELETED,
the outputs are ADDED with the data sequence number of the snapshot the plan compacted (Iceberg's
``use-starting-sequence-number``), and a delete manifest the plan drops is left out; every other manifest is
carried over unchanged. The rows a scan of the new snapshot returns are those of the head it replaces.
The entries in detail: docs/design/iceberg-compaction.md#the-commit.

``ReplaceWork`` keeps what one commit worked out across its attempts (``attempts.AttemptWork``), so that an
attempt on a head that a writer moved reads only the manifests new since and writes only a manifest list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Sequence

from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries
from pyiceberg.table.update.snapshot import _SnapshotProducer

from lakesweep.engine.errors import CorruptMetadata, StalePlan
from lakesweep.engine.iceberg.attempts import AttemptWork, KeepsWork
from lakesweep.engine.iceberg.table import canonical


@dataclass(frozen=True, slots=True)
class _Rewrite:
    """A head manifest rewritten with the replaced files it lists DELETED."""

    manifest: ManifestFile
    removed: tuple[DataFile, ...]


class ReplaceWork(AttemptWork):
    """A compaction's ``AttemptWork``: besides its manifests, by manifest path, which of the plan's
    ``inputs`` (canonical paths) each data manifest lists live, the files of each delete manifest and what
    each delete manifest means for the bins (``deletes``, filled by ``commit.new_deletes_since``); these
    hold for every key. The key is the set of replaced files, outputs and dropped delete manifests; for it
    the outputs' manifests (``added``) and each rewrite of a manifest (``rewrites``)."""

    def __init__(self, io, inputs: AbstractSet[str]):
        super().__init__(io)
        self.inputs = frozenset(inputs)
        self.holds: dict[str, frozenset[str]] = {}
        self.deletes: dict[str, tuple[tuple[int, str], ...]] = {}
        self.delete_files: dict[str, tuple[DataFile, ...]] = {}
        self.added: list[ManifestFile] | None = None
        self.rewrites: dict[str, _Rewrite] = {}

    def forget(self) -> None:
        self.added, self.rewrites = None, {}

    def live_inputs(self, table) -> set[str]:
        """The plan's inputs that are live data files of ``table``'s current snapshot."""
        snapshot = table.table.current_snapshot()
        if snapshot is None:
            return set()
        try:
            return set().union(*(self.held(m) for m in snapshot.manifests(table.io)
                                 if m.content == ManifestContent.DATA))
        except Exception as e:
            raise CorruptMetadata(canonical(snapshot.manifest_list),
                                  f"manifests cannot be read: {type(e).__name__}: {e}") from e

    def held(self, manifest: ManifestFile) -> frozenset[str]:
        """The plan's inputs a data manifest lists live, read once."""
        found = self.holds.get(manifest.manifest_path)
        if found is None:
            found = frozenset(p for e in manifest.fetch_manifest_entry(io=self.io, discard_deleted=True)
                              if (p := canonical(e.data_file.file_path)) in self.inputs)
            self.holds[manifest.manifest_path] = found
        return found

    def files_of(self, manifest: ManifestFile) -> tuple[DataFile, ...]:
        """The live delete files of a delete manifest, read once."""
        found = self.delete_files.get(manifest.manifest_path)
        if found is None:
            found = tuple(e.data_file for e in manifest.fetch_manifest_entry(io=self.io, discard_deleted=True))
            self.delete_files[manifest.manifest_path] = found
        return found


class ReplaceDataFiles(KeepsWork, _SnapshotProducer["ReplaceDataFiles"]):
    """``work``: what the commit's earlier attempts worked out (``ReplaceWork``); ``expected``: the head
    snapshot the plan compacted, when another head must be refused (``StalePlan``; None: the live head);
    ``replaced``: canonical paths of the input files, all among ``work.inputs``; ``added``: the outputs'
    ``DataFile``s (each with its ``spec_id``); ``dropped_delete_manifests``: canonical paths of the delete
    manifests left out; ``data_sequence_number``: the outputs' (None: inherited from the new snapshot)."""

    def __init__(self, transaction, io, *, work: ReplaceWork, expected: int | None, replaced: AbstractSet[str],
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
        self.work = work
        self._snapshot_id = work.snapshot(self._snapshot_id)
        work.start((self.replaced, tuple(f.file_path for f in self.added), self.dropped, data_sequence_number))
        self.removed_files: list[DataFile] = []  # replaced data files and the delete files left out
        self.listed: set[str] = set()  # the manifests the new snapshot lists

    def _validate_concurrency(self) -> None:
        """Nothing to validate: the commit requires the head to be unchanged."""

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []

    def _existing_manifests(self) -> list[ManifestFile]:
        return []  # ``_manifests`` writes every manifest itself

    def _manifests(self) -> list[ManifestFile]:
        head = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
        work = self.work
        if work.added is None:
            work.added = self._write_added()
        out: list[ManifestFile] = list(work.added)
        found: set[str] = set()
        for m in head.manifests(io=self._io):
            if m.content == ManifestContent.DELETES:
                if canonical(m.manifest_path) in self.dropped:
                    self.removed_files += work.files_of(m)
                else:
                    out.append(m)
                continue
            if not work.held(m) & self.replaced:
                out.append(m)
                continue
            rewrite = work.rewrites.get(m.manifest_path)
            if rewrite is None:
                rewrite = work.rewrites[m.manifest_path] = self._rewrite(m)
            out.append(rewrite.manifest)
            self.removed_files += rewrite.removed
            found |= work.held(m) & self.replaced
        missing = sorted(self.replaced - found)
        if missing:
            raise StalePlan(f"{missing[0]} is no longer a live data file of snapshot {self._parent_snapshot_id}; "
                            f"re-run 'lakesweep plan compact'")
        self.listed = {m.manifest_path for m in out}
        return out

    def _write_added(self) -> list[ManifestFile]:
        """The outputs as ADDED entries, one manifest per partition spec."""
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
        return out

    def _rewrite(self, m: ManifestFile) -> _Rewrite:
        """``m`` with the replaced files it lists DELETED and every other live entry EXISTING."""
        removed: list[DataFile] = []
        with self.new_manifest_writer(self.spec(m.partition_spec_id)) as writer:
            for e in m.fetch_manifest_entry(io=self._io, discard_deleted=True):
                if canonical(e.data_file.file_path) in self.replaced:
                    writer.delete(e)
                    removed.append(e.data_file)
                else:
                    writer.existing(e)
        return _Rewrite(writer.to_manifest_file(), tuple(removed))

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
