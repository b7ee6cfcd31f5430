"""Conflict semantics against Iceberg 1.12's Spark actions: a commit lands between a maintenance operation's
start and its commit (tests/iceberg/conflicts.py says how, on each side), and both sides' tables are
judged: which commit wins, whether the maintenance committed, was refused or held part of its work back,
and whether any snapshot's rows changed or a file a retained snapshot needs was deleted.

lakesweep must do at least as well as Iceberg Java in every case: it never loses data, including where
Iceberg Java does (apache/iceberg#10312: an equality delete, then an append, committed during a compaction).
"""

from __future__ import annotations

import collections

import pytest

from tests.iceberg.conflicts import CHANGES, OPERATIONS, twin

pytestmark = [pytest.mark.java, pytest.mark.spark]

MANIFEST_GONE = "refused: ValidationException"  # "Deleted manifest ... could not be found in the latest snapshot"
KEPT = "committed, 4 SKIPPED_REFERENCED"  # the kept snapshot's expire action and the files only it holds
US_BIN = "committed, 4 DROPPED"  # the region=us bin (four inputs) left out, the eu bin compacted

# (operation, concurrent change) -> (Iceberg Java's outcome, lakesweep's outcome). Iceberg Java loses data in
# one case only (LOSES below); lakesweep in none.
EXPECTED = {
    # RemoveSnapshots re-applies its rule to the refreshed metadata: every snapshot older than the cut-off
    # but the head goes, the head the action started from included. lakesweep expires what it planned,
    # less what the live table keeps.
    ("expire", "append"): ("committed", "committed"),
    ("expire", "delete (copy-on-write)"): ("committed", "committed"),
    ("expire", "delete (merge-on-read)"): ("committed", "committed"),
    ("expire", "equality delete"): ("committed", "committed"),
    ("expire", "equality delete, then append"): ("committed", "committed"),
    ("expire", "tag on an expiring snapshot"): ("committed", KEPT),
    ("expire", "branch on an expiring snapshot"): ("committed", KEPT),
    ("expire", "rollback"): ("committed", KEPT),
    # BaseRewriteManifests refuses the whole rewrite when a manifest it replaces left the head (Java's own
    # commits drop the history's manifest of DELETED entries); lakesweep leaves that manifest out.
    ("rewrite-manifests", "append"): (MANIFEST_GONE, "committed, 1 DROPPED"),
    ("rewrite-manifests", "delete (copy-on-write)"): (MANIFEST_GONE, "committed, 2 DROPPED"),
    ("rewrite-manifests", "delete (merge-on-read)"): (MANIFEST_GONE, "committed, 1 DROPPED"),
    ("rewrite-manifests", "equality delete"): (MANIFEST_GONE, "committed, 1 DROPPED"),
    ("rewrite-manifests", "equality delete, then append"): (MANIFEST_GONE, "committed, 1 DROPPED"),
    ("rewrite-manifests", "tag on an expiring snapshot"): ("committed", "committed"),
    ("rewrite-manifests", "branch on an expiring snapshot"): ("committed", "committed"),
    ("rewrite-manifests", "rollback"): (MANIFEST_GONE, "committed, 3 DROPPED"),
    # RewriteDataFiles validates from its starting snapshot: a replaced file gone or a new position delete
    # naming one refuses the whole commit (both bins); equality deletes are not validated with
    # use-starting-sequence-number. lakesweep leaves out the bin a change touches and commits the other.
    ("compact", "append"): ("committed", "committed"),
    ("compact", "delete (copy-on-write)"): ("refused: ValidationException", US_BIN),
    ("compact", "delete (merge-on-read)"): ("refused: ValidationException", US_BIN),
    ("compact", "equality delete"): ("committed", US_BIN),
    ("compact", "equality delete, then append"): ("committed", US_BIN),
    ("compact", "tag on an expiring snapshot"): ("committed", "committed"),
    ("compact", "branch on an expiring snapshot"): ("committed", "committed"),
    ("compact", "rollback"): ("refused: ValidationException", US_BIN),
}
LOSES = {("compact", "equality delete, then append")}
JAVA_MESSAGES = {
    ("compact", "delete (copy-on-write)"): "Missing required files to delete: ",
    ("compact", "delete (merge-on-read)"): "Cannot commit, found new position delete for replaced data file: ",
    ("compact", "rollback"): "Cannot determine history between starting snapshot ",
}


def test_an_equality_delete_then_an_append_during_a_compaction_is_undone_by_iceberg_java_but_not_by_lakesweep(
        ice, lake, tmp_path):
    """apache/iceberg#10312 on Iceberg 1.12: ``rewrite_data_files`` (use-starting-sequence-number) commits,
    its outputs at the starting snapshot's data sequence number, and drops the concurrent equality delete
    as if it applied to nothing: ``MergingSnapshotProducer`` drops deletes older than the smallest data
    sequence number of the data manifests it carries over (here the append's), not counting its own
    outputs. Row 10 reads again. lakesweep leaves the region=us bin out (its output an orphan), compacts
    region=eu, and the equality delete stays live."""
    java, ours, _ = twin(ice, lake, tmp_path, "compact", "equality delete, then append")
    deleted = collections.Counter({(10, "us"): 1})
    start = java.last_sequence_number - 2  # the history's head, before the delete and the append
    assert (java.outcome, java.lost, java.changed, java.missing) == ("committed", True, {}, frozenset())
    assert java.head_after - java.head_before == deleted  # the deleted row is back
    [(_, (parent, compacted))] = java.wrong_commits.items()
    assert compacted - parent == deleted and parent == java.head_before
    assert java.deletes == [] and java.us_files == [start, java.last_sequence_number]  # output, then the append
    assert (ours.outcome, ours.lost) == (US_BIN, False)
    assert ours.head_after == ours.head_before and (10, "us") not in ours.head_after
    assert ours.deletes == [("EQUALITY_DELETES", start + 1)]
    assert "equality delete" in ours.detail
    assert ours.detail.endswith(", committed since the plan; its output is an orphan")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["equality delete, then append", "delete (merge-on-read)", "rollback"])
def test_a_change_committed_while_lakesweep_merges_the_bins_holds_the_touched_bin_back(ice, lake, tmp_path, kind):
    """lakesweep's side with the change committed later still: after its apply merged the first bin, before
    the commit. The commit reads the table again and leaves the region=us bin out, as when the change
    came before the apply."""
    java, ours, _ = twin(ice, lake, tmp_path, "compact", kind, during_merge=True)
    assert java.outcome == EXPECTED["compact", kind][0]
    assert (ours.outcome, ours.lost) == (US_BIN, False)


PARTIAL_PROGRESS = {
    # the eu group commits on its own; the us group's commit fails validation and is logged, not raised
    "delete (copy-on-write)": (4, 1, []),
    "delete (merge-on-read)": (4, 1, [("POSITION_DELETES", 6)]),
    # each group commits on its own: the second commit carries the first one's outputs over, at the
    # starting sequence number, so the equality delete is not dropped and nothing is lost
    "equality delete, then append": (8, 2, [("EQUALITY_DELETES", 6)]),
    "rollback": (0, 0, []),  # every group's commit fails validation: nothing is rewritten
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(PARTIAL_PROGRESS))
def test_with_partial_progress_iceberg_java_commits_per_file_group_and_loses_nothing(ice, lake, tmp_path, kind):
    """``partial-progress.enabled``: one commit per file group, a group whose commit fails is left out, as
    lakesweep leaves out a bin. The #10312 race then loses nothing on this table, either."""
    java, ours, _ = twin(ice, lake, tmp_path, "compact", kind, {"partial-progress.enabled": "true"})
    rewritten, added, deletes = PARTIAL_PROGRESS[kind]
    assert java.outcome == "committed" and not java.lost
    assert (java.counts["rewritten_data_files"], java.counts["added_data_files"], java.deletes) == (rewritten, added,
                                                                                                    deletes)
    assert (ours.outcome, ours.lost) == (US_BIN, False)


@pytest.mark.slow
def test_without_use_starting_sequence_number_iceberg_java_refuses_the_compaction_and_loses_nothing(ice, lake,
                                                                                                  tmp_path):
    """The same race with ``use-starting-sequence-number=false``: the equality delete is validated, the whole
    compaction refused. lakesweep still compacts the bin the delete does not touch."""
    java, ours, _ = twin(ice, lake, tmp_path, "compact", "equality delete, then append",
                         java_options={"use-starting-sequence-number": "false"})
    assert (java.outcome, java.lost) == ("refused: ValidationException", False)
    assert java.detail.startswith("Cannot commit, found new delete for replaced data file: ")
    assert (ours.outcome, ours.lost) == (US_BIN, False)


@pytest.mark.slow
@pytest.mark.parametrize("kind", CHANGES)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_concurrent_commit_during_maintenance_loses_data_on_neither_side_but_where_iceberg_java_does(
        ice, lake, tmp_path, operation, kind):
    java, ours, _ = twin(ice, lake, tmp_path, operation, kind)
    assert (java.outcome, ours.outcome) == EXPECTED[operation, kind], (java.detail, ours.detail)
    assert java.lost == ((operation, kind) in LOSES)
    assert not ours.lost, ours
    assert not java.missing and not ours.missing  # neither deletes a file a retained snapshot or ref needs
    if (operation, kind) in JAVA_MESSAGES:
        assert java.detail.startswith(JAVA_MESSAGES[operation, kind])
    if operation == "rewrite-manifests" and java.outcome == MANIFEST_GONE:
        assert java.detail.startswith("Deleted manifest ")
        assert "could not be found in the latest snapshot" in java.detail
    if operation == "expire":
        # lakesweep keeps every snapshot Iceberg Java keeps (more where the rule moved since planning), and
        # the same refs; a ref made concurrently keeps its snapshot on both sides
        assert len(ours.snapshots) >= len(java.snapshots) and ours.refs.keys() == java.refs.keys()
        if "expiring" in kind or kind == "rollback":
            assert java.snapshots <= ours.snapshots and java.refs == ours.refs
