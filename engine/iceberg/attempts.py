"""What an Iceberg commit keeps across its attempts: the manifests it wrote, under one snapshot id.

A manifest file never changes once written, so what an attempt worked out from one (which files it lists,
its rewrite) still holds on the next attempt, whatever a writer committed in between; only the manifests
committed since need reading. Keeping that work is what lets a commit get through on a table written more
often than an attempt that starts over takes (Iceberg's ``ManifestFilterManager`` and ``RewriteManifests``
keep their written manifests across retries the same way). Why and what was measured:
docs/design/iceberg.md#commits.
"""

from __future__ import annotations

from typing import AbstractSet, Hashable, Sequence


class AttemptWork:
    """The manifests one commit wrote for ``key`` (what they were made from), kept across its attempts.

    They carry the commit's snapshot id (``snapshot``: the first attempt's, for every attempt). An attempt
    for another key deletes them and starts over (``start``); ``abandon`` deletes them when the commit fails
    with nothing committed, ``settle`` those the committed snapshot does not list. After a commit whose
    outcome is unknown (``in_doubt``) nothing is deleted: the catalog may name them."""

    def __init__(self, io):
        self.io = io
        self.snapshot_id: int | None = None
        self.key: Hashable = None
        self.written: list[str] = []  # manifests written for ``key``, none of them committed yet
        self.made = None  # what a producer made for ``key``, for the next attempt
        self.in_doubt = False

    def snapshot(self, proposed: int) -> int:
        """The commit's snapshot id: the first one proposed."""
        if self.snapshot_id is None:
            self.snapshot_id = proposed
        return self.snapshot_id

    def start(self, key: Hashable) -> None:
        """An attempt that makes its manifests from ``key``: another key's are deleted, and forgotten."""
        if key != self.key:
            self._delete(self.written)
            self.key, self.written, self.made = key, [], None
            self.forget()

    def forget(self) -> None:
        """Drop what was made for the previous key (subclasses keep more than ``made``)."""

    def settle(self, listed: AbstractSet[str]) -> None:
        """After a commit that lists the manifests ``listed``: delete those written that it does not list."""
        self._delete([p for p in self.written if p not in listed])
        self.written = []

    def abandon(self) -> None:
        """After a commit that failed with nothing committed: delete every manifest written for it."""
        if not self.in_doubt:
            self._delete(self.written)
            self.written = []

    def _delete(self, paths: Sequence[str]) -> None:
        for path in paths:
            try:
                self.io.delete(path)
            except OSError:
                pass  # nothing names it: an orphan at worst, which orphan cleanup removes


class KeepsWork:
    """A ``_SnapshotProducer`` mixin: the manifests it writes belong to ``self.work`` (an ``AttemptWork``),
    not to the producer, so that a refused attempt's ``discard`` deletes only its manifest list."""

    work: AttemptWork

    def new_manifest_output(self):
        output = super().new_manifest_output()
        self.work.written.append(self._written_manifests.pop())
        return output

    def discard(self) -> None:
        """Delete the manifest list this attempt wrote (the catalog refused it); its manifests stay with
        ``work`` for the next attempt."""
        self._clean_all_uncommitted()
