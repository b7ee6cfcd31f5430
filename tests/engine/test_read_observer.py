"""A table view tells an observer what it reads (the progress of 'lakesweep plan expire'), and the
observer changes nothing about what is read or planned."""

import os

from lakesweep.engine.paimon.table import open_table
from lakesweep.planner.paimon.expire import plan_expire
from lakesweep.planner.paimon.options import resolve_expire_options

MANIFEST_FILES = ("manifest list", "manifest", "index manifest")
NOW = 4102444800000  # 2100-01-01


class Recorder:
    """Every call, in order: ("read", path, what, nbytes) or ("named", names)."""

    def __init__(self):
        self.calls = []

    def read(self, path, what, nbytes):
        self.calls.append(("read", path, what, nbytes))

    def named(self, names):
        self.calls.append(("named", tuple(names)))

    def reads(self, kinds=None):
        return [c for c in self.calls if c[0] == "read" and (kinds is None or c[2] in kinds)]


def plan_with(path, observer):
    t = open_table(path, on_read=observer)
    opts = resolve_expire_options(t.options, retain_min=1, time_retained="0 s")
    return t, plan_expire(t, now_ms=NOW, options=opts)


def test_every_metadata_read_is_reported_once_with_its_size(append_table):
    rec = Recorder()
    plan_with(append_table.path, rec)
    reads = rec.reads()
    kinds = {what for _, _, what, _ in reads}
    assert {"schema", "snapshot", "tag", "consumer", "manifest list", "manifest"} <= kinds
    for _, path, what, nbytes in reads:
        assert nbytes == os.path.getsize(path), (what, path)
    manifest_paths = [path for _, path, _, _ in rec.reads(MANIFEST_FILES)]
    assert len(manifest_paths) == len(set(manifest_paths)), "a cached manifest file was reported again"
    assert all(os.path.dirname(p) == os.path.join(append_table.path, "manifest") for p in manifest_paths)


def test_every_manifest_file_read_was_named_before(append_table):
    rec = Recorder()
    plan_with(append_table.path, rec)
    named = set()
    for call in rec.calls:
        if call[0] == "named":
            named.update(call[1])
        elif call[2] in MANIFEST_FILES:
            assert os.path.basename(call[1]) in named, f"{call[2]} {call[1]} was read before anything named it"
    assert rec.reads(MANIFEST_FILES)


def test_the_observer_changes_nothing_in_the_plan(append_table):
    _, observed = plan_with(append_table.path, Recorder())
    _, plain = plan_with(append_table.path, None)
    assert observed.plan_id == plain.plan_id
    assert observed.actions == plain.actions


def test_refreshed_views_report_to_the_same_observer_and_share_what_was_read(append_table):
    rec = Recorder()
    t = open_table(append_table.path, on_read=rec)
    latest = t.snapshot(append_table.latest)
    t.live_entries(latest)
    before = len(rec.reads())
    view = t.refreshed()
    again = view.snapshot(append_table.latest)
    view.data_manifests(again)
    for meta in view.manifest_list(again.delta_manifest_list):
        view.manifest(meta.file_name)
    new = rec.reads()[before:]
    # Snapshots and schemas are read anew by a refreshed view; manifest lists and manifests never change
    # and are shared.
    assert [(what, os.path.relpath(path, append_table.path)) for _, path, what, _ in new] == [
        ("snapshot", f"snapshot/snapshot-{append_table.latest}"), ("schema", "schema/schema-0"),
    ]
