"""Where each kind of file of a Paimon table may live: what apply checks every planned path against,
whatever the plan says (a forged plan with a recomputed id once overwrote ``schema/schema-0`` through a
hint action). The orphan planner asks the same questions of every file it is given (``orphan_kind_of``),
so apply accepts exactly the directories orphan cleaning may list."""

from __future__ import annotations

from lakesweep.engine.errors import InvalidLocation, PlanRejected
from lakesweep.engine.fileio import normalize_location
from lakesweep.engine.paimon.kinds import (PLAN_KIND_OF, SHAPES, ActionKind, ChangelogKind, ConsumerKind, OrphanKind,
                                           TagKind)
from lakesweep.engine.paimon.partition import escape_path_name
from lakesweep.engine.paimon.paths import external_roots
from lakesweep.engine.paimon.table import (BRANCH_PREFIX, CHANGELOG_PREFIX, SNAPSHOT_PREFIX, PaimonTable,
                                           branch_name_problem)
from lakesweep.engine.plan import Action, CleanupPlan, Verb, kind_spec


class Layout:
    """Where each kind of file of this table may live, relative to the table root."""

    def __init__(self, table: PaimonTable):
        prefix = table.base[len(table.location):].strip("/")
        self.base = prefix + "/" if prefix else ""
        self.keys = [escape_path_name(k) for k in table.schema.partition_keys]
        self.path_directory = table.paths.path_directory
        self.index_in_data_dir = table.paths.index_in_data_dir
        self.external = external_roots(table.options)
        self._bucket_dirs: dict[str, bool] = {}  # a directory of data files -> is it a bucket directory

    def in_bucket_dir(self, path: str) -> bool:
        """``path`` is a plainly named file directly in a bucket directory (``bucket_dir``, once per
        directory)."""
        head, slash, name = path.rpartition("/")
        if not _plain_name(name):
            return False
        ok = self._bucket_dirs.get(head)
        if ok is None:
            ok = self._bucket_dirs[head] = self.bucket_dir(head.split("/") if slash else [])
        return ok

    def bucket_dir(self, segments: list[str], *, with_path_directory: bool = True) -> bool:
        """``[path-directory/]k1=v1/.../bucket-N`` (the partition levels only with ``bucket=False``)."""
        pd = self.path_directory.split("/") if (self.path_directory and with_path_directory) else []
        if segments[:len(pd)] != pd:
            return False
        rest = segments[len(pd):]
        if len(rest) != len(self.keys) + 1:
            return False
        if not all(seg.startswith(k + "=") for seg, k in zip(rest, self.keys)):
            return False
        bucket = rest[-1]
        return bucket.startswith("bucket-") and (bucket[7:] == "postpone" or _ascii_int(bucket[7:]))

    def partition_dir(self, segments: list[str]) -> bool:
        """``k1=v1[/k2=v2...]`` as empty-directory cleanup visits them (no path-directory)."""
        return 0 < len(segments) <= len(self.keys) and all(
            seg.startswith(k + "=") for seg, k in zip(segments, self.keys))

    def is_external(self, path: str) -> bool:
        """An absolute path or URI under a declared external root (never one under the table root)."""
        if not (path.startswith("/") or "://" in path or path.startswith("file:")):
            return False
        try:
            full = normalize_location(path, relative_ok=False)
        except InvalidLocation:
            return False
        return any(full.startswith(r + "/") for r in self.external)

    def in_external_bucket_dir(self, path: str) -> bool:
        """``<external root>/k1=v1/.../bucket-N/<name>``: where Paimon writes data files under an external
        root (no ``data-file.path-directory`` there)."""
        if not self.is_external(path):
            return False
        full = normalize_location(path, relative_ok=False)
        root = max((r for r in self.external if full.startswith(r + "/")), key=len)
        head, _, name = full[len(root) + 1:].rpartition("/")
        return _plain_name(name) and bool(head) and self.bucket_dir(head.split("/"), with_path_directory=False)


_HINTS = ("EARLIEST", "LATEST")
_STRAY_DIRS = {"snapshot": (OrphanKind.STRAY_SNAPSHOT_FILE, SNAPSHOT_PREFIX),
               "changelog": (OrphanKind.STRAY_CHANGELOG_FILE, CHANGELOG_PREFIX)}
_ORPHAN_DIRS = {"manifest": OrphanKind.ORPHAN_MANIFEST, "index": OrphanKind.ORPHAN_INDEX_FILE,
                "statistics": OrphanKind.ORPHAN_STATISTICS}


def orphan_kind_of(layout: Layout, path: str) -> OrphanKind | None:
    """What orphan cleaning may delete at ``path`` (table-relative, or a full location under an external
    root), or ``None`` where it never deletes anything.

    * ``[branch/branch-<b>/]snapshot/<name>`` and ``.../changelog/<name>``: a stray file, unless the name
      starts with ``snapshot-`` (``changelog-``) or is a hint; Java leaves those.
    * ``manifest/``, ``index/``, ``statistics/``: any file directly inside.
    * a bucket directory (``[path-directory/]k1=v1/.../bucket-N``, the partition keys in order), under
      the table root or an external root: any file directly inside. Nothing beside the partitions
      (``tmp/``, ``_upload/``), nothing deeper in a bucket directory, no directory.
    """
    if layout.is_external(path):
        return OrphanKind.ORPHAN_DATA_FILE if layout.in_external_bucket_dir(path) else None
    if path.startswith("/") or "://" in path or path.startswith("file:"):
        return None
    segments = path.split("/")
    name = segments[-1]
    if not _plain_name(name) or any(not _plain_name(s) for s in segments[:-1]):
        return None
    if len(segments) == 2 and segments[0] in _ORPHAN_DIRS:
        return _ORPHAN_DIRS[segments[0]]
    meta = segments[:-1]
    if len(meta) == 3 and meta[0] == "branch" and meta[1].startswith(BRANCH_PREFIX) \
            and branch_name_problem(meta[1][len(BRANCH_PREFIX):]) is None:
        meta = meta[2:]
    if len(meta) == 1 and meta[0] in _STRAY_DIRS:
        kind, prefix = _STRAY_DIRS[meta[0]]
        return None if name.startswith(prefix) or name in _HINTS else kind
    if layout.in_bucket_dir(path):
        return OrphanKind.ORPHAN_DATA_FILE
    return None


def orphan_dir_segments(layout: Layout, path: str) -> list[str] | None:
    """The segments of ``path`` (table-relative, or a full location under an external root) below its data
    root (the table root with its ``data-file.path-directory``, or the external root); ``None`` when it is
    not under one."""
    if layout.is_external(path):
        full = normalize_location(path, relative_ok=False)
        root = max((r for r in layout.external if full.startswith(r + "/")), key=len)
        return full[len(root) + 1:].split("/")
    if path.startswith("/") or "://" in path or path.startswith("file:"):
        return None
    segments = path.split("/")
    pd = layout.path_directory.split("/") if layout.path_directory else []
    if segments[:len(pd)] != pd or any(not _plain_name(s) for s in segments):
        return None
    return segments[len(pd):]


def is_orphan_empty_dir(layout: Layout, path: str) -> bool:
    """A directory orphan cleaning may remove once empty: a bucket directory, or a partition directory of
    one to all the partition levels, under a data root. Never a data root itself."""
    rest = orphan_dir_segments(layout, path)
    return bool(rest) and (layout.bucket_dir(rest, with_path_directory=False) or layout.partition_dir(rest))


def _ascii_int(text: str) -> bool:
    return bool(text) and text.isascii() and text.isdigit()


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


_KINDS = (ActionKind, OrphanKind, ConsumerKind, TagKind, ChangelogKind)
_IN_BUCKET_DIRS = (ActionKind.DATA_FILE, ActionKind.EXTRA_FILE, ActionKind.CHANGELOG_FILE)


def _bucket_file_shapes() -> dict:
    """The kinds ``check_action_kind`` holds to ``Layout.in_bucket_dir`` (or an external root), each with its
    (verb, phase): those of the data-file branch, directly or through their ``place``, and of no branch before it."""
    out = {}
    for kind in (k for family in _KINDS for k in family):
        shape = SHAPES.get(kind)
        if shape is None or shape[0] is Verb.COMMIT or kind in (
                OrphanKind.EMPTY_DIR, ConsumerKind.CONSUMER_FILE, TagKind.TAG_FILE, ChangelogKind.CHANGELOG_META,
                ChangelogKind.WRITE_EARLIEST_HINT):
            continue
        place = kind_spec(kind).place
        if (ActionKind(place) if place is not None else kind) in _IN_BUCKET_DIRS:
            out[kind] = shape
    return out


_ORPHAN_PLACES = {
    OrphanKind.STRAY_SNAPSHOT_FILE: "directly in a snapshot directory, named neither snapshot-* nor a hint",
    OrphanKind.STRAY_CHANGELOG_FILE: "directly in a changelog directory, named neither changelog-* nor a hint",
    OrphanKind.ORPHAN_MANIFEST: "directly in manifest/",
    OrphanKind.ORPHAN_INDEX_FILE: "directly in index/",
    OrphanKind.ORPHAN_STATISTICS: "directly in statistics/",
    OrphanKind.ORPHAN_DATA_FILE: "directly in a partition's bucket directory, under the table root or an "
                                 "external root",
}


def in_its_bucket_dir(plan_kind: str, kind, verb: Verb, phase: int, path: str, layout: Layout) -> bool:
    """Whether an action of these fields is a file of a bucket directory (or an external root) whose kind,
    verb and phase are those of such files in ``plan_kind`` plans: the bulk of a plan, which
    ``check_action_kind`` passes without its other steps."""
    shape = _BUCKET_FILE_SHAPES.get(kind) if type(kind) in _KINDS else None
    return (shape is not None and verb is shape[0] and phase == shape[1] and PLAN_KIND_OF[kind] == plan_kind
            and (layout.is_external(path) or layout.in_bucket_dir(path)))


def check_action_kind(plan: CleanupPlan, a: Action, layout: Layout) -> None:
    """Refuse an action whose path is not where its kind of file lives (issue: a forged plan with a
    recomputed id once overwrote ``schema/schema-0`` through a hint action).

    Snapshot actions are ``snapshot/snapshot-<id>`` with ``begin <= id < end``; the hint is only
    ``snapshot/EARLIEST`` with the plan's value; manifests, lists and index manifests live in
    ``manifest/``, statistics in ``statistics/``, index files in ``index/`` (or their bucket directory);
    data, extra and changelog files in a partition's bucket directory or under a declared external root;
    empty directories are bucket or partition directories.
    """
    path, kind = a.path, a.kind
    if in_its_bucket_dir(plan.kind, kind, a.verb, a.phase, path, layout):
        return  # the bulk of a plan, checked as below without the steps that cannot apply to it
    if a.verb is Verb.COMMIT:
        return  # a commit's shape is its committer's to check (``applier.commit.Committer.check``)

    def refuse(why: str):
        raise PlanRejected(f"action {a.action_id} ({kind} {path!r}) is refused: {why}; the plan is refused")

    shape = SHAPES.get(kind) if isinstance(kind, (ActionKind, OrphanKind, ConsumerKind, TagKind, ChangelogKind)) \
        else None
    if shape is None:
        refuse("unknown kind")
    if PLAN_KIND_OF[kind] != plan.kind:
        refuse(f"{kind} actions belong in '{PLAN_KIND_OF[kind]}' plans, not in '{plan.kind}' plans")
    if a.verb is not shape[0] or a.phase != shape[1]:
        refuse(f"a {kind} action is a {shape[0]} in phase {shape[1]}, not a {a.verb} in phase {a.phase}")
    if kind is OrphanKind.EMPTY_DIR:
        if not is_orphan_empty_dir(layout, path):
            refuse("orphan cleaning removes only bucket and partition directories, never a data root")
        return
    if kind is ConsumerKind.CONSUMER_FILE:
        head = layout.base + "consumer/consumer-"
        if not path.startswith(head) or not _plain_name(path[len(layout.base + "consumer/"):]) or \
                len(path) == len(head):
            refuse(f"consumer expiry deletes only {layout.base}consumer/consumer-<id> files")
        return
    if kind is TagKind.TAG_FILE:
        head = layout.base + "tag/tag-"
        if not path.startswith(head) or len(path) == len(head) or not _plain_name(path[len(layout.base + "tag/"):]):
            refuse(f"tag expiry deletes tag files only as {layout.base}tag/tag-<name>")
        return
    if kind is ChangelogKind.CHANGELOG_META:
        if (path != f"{layout.base}changelog/changelog-{a.snapshot_id}" or plan.begin is None or plan.end is None
                or not plan.begin <= (a.snapshot_id or -1) < plan.end):
            refuse(f"a changelog action must be {layout.base}changelog/changelog-<id> with its id in the plan's "
                   f"range [{plan.begin}, {plan.end})")
        return
    if kind is ChangelogKind.WRITE_EARLIEST_HINT:
        if path != layout.base + "changelog/EARLIEST" or a.snapshot_id != plan.earliest_hint:
            refuse(f"the hint action may only write {layout.base}changelog/EARLIEST with the plan's value "
                   f"{plan.earliest_hint}")
        return
    place = kind_spec(kind).place
    if place is not None:  # a tag's or a changelog's file lives where the expiry kind of the same file does
        kind = ActionKind(place)
    elif isinstance(kind, OrphanKind):
        if orphan_kind_of(layout, path) is not kind:
            refuse(f"orphan cleaning deletes {kind} files only {_ORPHAN_PLACES[kind]}")
        return

    def in_range(sid) -> bool:
        return (sid is not None and plan.begin is not None and plan.end is not None
                and plan.begin <= sid < plan.end)

    def one_file(directory: str) -> str | None:
        head = layout.base + directory + "/" if directory in ("snapshot", "changelog") else directory + "/"
        if not path.startswith(head):
            return None
        name = path[len(head):]
        return name if _plain_name(name) else None

    if kind == ActionKind.SNAPSHOT:
        if one_file("snapshot") != f"snapshot-{a.snapshot_id}" or not in_range(a.snapshot_id):
            refuse(f"a snapshot action must be {layout.base}snapshot/snapshot-<id> with its id in the plan's "
                   f"range [{plan.begin}, {plan.end})")
    elif kind == ActionKind.WRITE_EARLIEST_HINT:
        if path != layout.base + "snapshot/EARLIEST" or a.snapshot_id != plan.earliest_hint:
            refuse(f"the hint action may only write {layout.base}snapshot/EARLIEST with the plan's value "
                   f"{plan.earliest_hint}")
    elif kind == ActionKind.WRITE_CHANGELOG:
        sid = a.snapshot_id
        if (one_file("changelog") != f"changelog-{sid}" or a.source != f"{layout.base}snapshot/snapshot-{sid}"
                or not in_range(sid)):
            refuse(f"a changelog action must copy {layout.base}snapshot/snapshot-<id> to "
                   f"{layout.base}changelog/changelog-<id> for an id in the plan's range")
    elif kind in (ActionKind.MANIFEST, ActionKind.MANIFEST_LIST, ActionKind.INDEX_MANIFEST):
        if one_file("manifest") is None:
            refuse("manifests, manifest lists and index manifests live in manifest/")
    elif kind == ActionKind.STATISTICS:
        if one_file("statistics") is None:
            refuse("statistics files live in statistics/")
    elif kind == ActionKind.INDEX_FILE:
        ok = (one_file("index") is not None
              or (layout.index_in_data_dir and layout.in_bucket_dir(path))
              or layout.is_external(path))
        if not ok:
            refuse("index files live in index/, in their bucket directory, or under an external root")
    elif kind in (ActionKind.DATA_FILE, ActionKind.EXTRA_FILE, ActionKind.CHANGELOG_FILE):
        if not (layout.is_external(path) or layout.in_bucket_dir(path)):
            refuse("data, extra and changelog files live in a partition's bucket directory "
                   f"({'/'.join(layout.keys + ['bucket-N']) if layout.keys else 'bucket-N'}) "
                   "or under a declared external root")
    elif kind == ActionKind.EMPTY_DIR:
        segments = path.split("/")
        if not (layout.bucket_dir(segments) or layout.partition_dir(segments)):
            refuse("only bucket and partition directories are cleaned up")
    else:
        refuse("unknown kind")


_BUCKET_FILE_SHAPES = _bucket_file_shapes()
