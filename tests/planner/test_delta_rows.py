"""The files a delta deletes, found from its manifests' rows without building an entry: an ADD passed over
must be one that cancels nothing. Checked against the loop over every entry that Paimon's
``planDeletedInDeltaManifest`` runs, on rows whose names and external paths collide on purpose."""

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from lakesweep.engine.paimon.manifests import entry_rows, manifest_entries, row_entry
from lakesweep.engine.paimon.model import DataFileMeta, FileKind, ManifestEntry
from lakesweep.engine.paimon.paths import PathFactory
from lakesweep.planner.paimon.expire import _Notes, _Planner
from tests.support.binary_row import encode_binary_row

ROOT = "/t"
PATHS = PathFactory(ROOT, (), (), {})
UNPARTITIONED = encode_binary_row([], [])
NAMES = ("a", "b", "c")
# external paths that land on another entry's file inside the table, or share its last name elsewhere
EXTERNAL = (None, None, "file:/t/bucket-0/a", "file:/t/bucket-1/b", "file:/ext/a", "file:/ext/c", "file:///ext/b")

entries = st.builds(
    lambda kind, name, bucket, level, external: ManifestEntry(
        kind, UNPARTITIONED, bucket, DataFileMeta(name, 10, level, external_path=external)),
    st.sampled_from(FileKind), st.sampled_from(NAMES), st.integers(0, 1), st.integers(0, 2),
    st.sampled_from(EXTERNAL))


def every_entry(manifests: list[list[ManifestEntry]]) -> list[tuple[str, ManifestEntry]]:
    to_delete: dict[str, ManifestEntry] = {}
    for manifest in manifests:
        for e in manifest:
            path = PATHS.data_file(e.partition, e.bucket, e.file)
            if e.kind == FileKind.ADD:
                to_delete.pop(path, None)
            else:
                to_delete[path] = e
    return list(to_delete.items())


@given(st.lists(st.lists(entries, max_size=8), max_size=3))
def test_a_deltas_deletes_from_its_rows_are_those_of_every_entry_in_order(manifests):
    planner = _Planner(SimpleNamespace(paths=PATHS), None, _Notes(strict=True))
    rows = [entry_rows(m) for m in manifests]
    found = planner._deleted_in(rows)
    assert [(path, row_entry(row)) for path, row in found.items()] == every_entry(manifests)
    assert all(type(row) is tuple for row in found.values())  # the rows as they came, no entry built


def test_rows_and_entries_are_one_another_undone():
    e = ManifestEntry(FileKind.DELETE, b"\x00\x01", 3, DataFileMeta("f", 7, 2, ("f.idx",), 11, b"i", 1, "file:/x/f"))
    (row,) = entry_rows([e])
    assert row_entry(row) == e
    assert manifest_entries([row]) == [e]
