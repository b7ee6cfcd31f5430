"""``lakesweep show PLAN --html FILE``: a plan as one self-contained HTML page.

The page draws what the plan file holds and nothing else. Where a chart needs data a plan does not keep
(a Paimon plan keeps snapshot ids, not their times; an Iceberg expiry lists only the snapshots it expires
and those refs hold), the page says what it leaves out instead of guessing.
"""

from __future__ import annotations

import re
from typing import Any

from lakesweep.cli.humanize import bytes_cell, option_value
from lakesweep.cli.html.svg import COLOURS, WIDTH, Svg, bar_chart, esc, human_bytes, legend, page, table, utc

SNAPSHOT_KINDS = {"snapshot", "expire-snapshot"}


def plan_html(plan) -> str:
    """The whole page for ``plan`` (a ``CleanupPlan``), whatever its kind and format."""
    from lakesweep.planner.kinds import describe_plan

    d = describe_plan(plan)
    missing: list[str] = []
    body = [f"<h1>lakesweep plan: {esc(plan.format)} {esc(plan.kind)}</h1>",
            f"<p class=\"meta\">Table <code>{esc(plan.table_location)}</code> (branch {esc(plan.branch)})</p>",
            f"<p class=\"meta\">Plan <code>{esc(plan.plan_id)}</code>, made as of {esc(utc(plan.now_ms))}; "
            f"{len(plan.actions)} action(s)</p>",
            f"<p><b>{esc(d.nothing_label if d.nothing_to_do else 'What it does')}:</b> {esc(d.scope)}</p>"]
    body += [f"<p class=\"meta\">{esc(n)}</p>" for n in (*d.remaining, *d.notes)]
    body += [f"<p class=\"warn\">warning: {esc(w)}</p>" for w in plan.stats.get("warnings", [])]
    chart = _CHARTS.get((plan.format, plan.kind))
    if chart is not None:
        body += chart(plan, missing)
    body += _by_partition(plan)
    body += _by_kind(plan)
    body += _options(plan)
    if missing:
        body.append("<h2>Not shown</h2><p class=\"note\">The plan file does not hold these, so the page does not "
                    "draw them:</p><ul>" + "".join(f"<li>{esc(m)}</li>" for m in missing) + "</ul>")
    return page(f"lakesweep plan {plan.plan_id}", body)


# -- snapshot timelines ----------------------------------------------------------------------------

def _requirement(plan, tag: str) -> dict:
    return next((r.to_json() for r in plan.requirements if r.TYPE == tag), {})


def _option(plan, key: str) -> Any:
    v = plan.options.get(key)
    return None if v is None else v.value


class _Timeline:
    """Dots on one lane, x by position; markers (tags, consumers, refs) above and below; boundaries as
    dashed vertical lines between two positions."""

    LEFT, RIGHT, LANE = 110, 40, 120

    def __init__(self, n: int, label: str, *, above: int, below: int):
        self.n = n
        self.step = (WIDTH - self.LEFT - self.RIGHT) / max(n - 1, 1)
        self.r = max(1.5, min(7.0, self.step / 2.6))
        self.svg = Svg(height=self.LANE + 90 + 16 * below, label=label)
        self.lane = self.LANE
        self._rows: dict[str, list[float]] = {"above": [], "below": []}

    def x(self, i: float) -> float:
        return self.LEFT + (i * self.step if self.n > 1 else (WIDTH - self.LEFT - self.RIGHT) / 2)

    def dot(self, i: int, *, expired: bool, sid, title: str, held: bool = False) -> None:
        self.svg.circle(self.x(i), self.lane, self.r, fill=COLOURS["expired" if expired else "kept"],
                        cls="snapshot " + ("expired" if expired else "kept"), data={"snapshot": sid},
                        title=title, stroke="#222" if held else None)

    def marker(self, i: int, text: str, *, side: str, colour: str) -> None:
        """A label above or below dot ``i``, in the first row where it does not overlap another."""
        x = self.x(i)
        rows = self._rows[side]
        width = 7 * len(text) + 10
        flip = x + width > WIDTH  # near the right edge the label reads leftwards
        start = x - width if flip else x
        row = next((k for k, end in enumerate(rows) if end < start), len(rows))
        if row == len(rows):
            rows.append(0)
        rows[row] = start + width
        if side == "above":
            y = self.lane - 22 - 16 * row
            self.svg.line(x, y + 3, x, self.lane - self.r, colour=colour)
        else:
            y = self.lane + 50 + 16 * row  # under the axis labels
            self.svg.line(x, self.lane + self.r, x, y - 11, colour=colour, dash="2,2")
        self.svg.text(x - 3 if flip else x + 3, y, text, fill=colour, size=12, anchor="end" if flip else "start")

    def boundary(self, between: float, text: str, row: int) -> None:
        x = self.x(between)
        self.svg.line(x, 8, x, self.lane + 14, colour=COLOURS["boundary"], width=1.5, dash="5,3", cls="boundary")
        right_half = x > WIDTH / 2  # the label reads away from the edge
        self.svg.text(x - 4 if right_half else x + 4, 16 + 16 * row, text, size=12, weight="bold",
                      anchor="end" if right_half else "start")

    def axis(self, labels: list[tuple[int, str]], caption: str) -> None:
        y = self.lane + 14
        self.svg.line(self.LEFT - 10, y, WIDTH - self.RIGHT + 10, y, colour="#666")
        for i, text in labels:
            self.svg.line(self.x(i), y, self.x(i), y + 4, colour="#666")
            self.svg.text(self.x(i), y + 17, text, anchor="middle", size=11)
        self.svg.text(8, y + 17, caption, size=11)


def _ticks(n: int, most: int = 12) -> list[int]:
    if n <= most:
        return list(range(n))
    step = -(-n // most)
    return sorted(set(range(0, n, step)) | {n - 1})


def _paimon_timeline(plan, missing: list[str]) -> list[str]:
    stats = plan.stats
    earliest, latest = stats.get("earliest"), stats.get("latest")
    out = ["<h2>Snapshots</h2>"]
    if earliest is None or latest is None:
        return out + ["<p class=\"note\">The table has no snapshots.</p>"]
    expired = {a.snapshot_id for a in plan.actions if str(a.kind) == "snapshot"}
    tags: dict = _requirement(plan, "paimon.tags-below").get("tags") or {}
    consumers: dict = _requirement(plan, "paimon.consumers-outside").get("consumers") or {}
    branches = _requirement(plan, "paimon.branches").get("branches") or []
    ids = list(range(earliest, latest + 1))
    tl = _Timeline(len(ids), f"snapshots {earliest} to {latest}: expired and kept", above=4,
                   below=max(2, len(consumers)))
    bounds: list[tuple[int, str]] = []
    retain_min, retain_max = _option(plan, "snapshot.num-retained.min"), _option(plan, "snapshot.num-retained.max")
    if isinstance(retain_min, int) and earliest <= latest - retain_min + 1 <= latest:
        bounds.append((latest - retain_min + 1, f"retain-min {retain_min}"))
    if isinstance(retain_max, int) and earliest < latest - retain_max + 1 <= latest:
        bounds.append((latest - retain_max + 1, f"retain-max {retain_max}"))
    bound, end = stats.get("bound"), plan.end
    if end is not None and earliest < end <= latest + 1 and bound not in ("retain-min", None):
        bounds.append((end, f"{bound} (first kept: {end})"))
    # the boundaries first, so that dots and labels are drawn over their lines
    for row, (sid, text) in enumerate(sorted(bounds)):
        tl.boundary(sid - earliest - 0.5, text, row)
    held = set(tags.values())
    for i, sid in enumerate(ids):
        state = "expired" if sid in expired else "kept"
        tl.dot(i, expired=sid in expired, sid=sid, held=sid in held,
               title=f"snapshot {sid}: {state}" + "".join(f", tag {t}" for t, s in tags.items() if s == sid))
    for name, sid in sorted(tags.items(), key=lambda t: (t[1], t[0])):
        if earliest <= sid <= latest:
            tl.marker(sid - earliest, f"tag {name}", side="above", colour="#6a3d9a")
    for name, nxt in sorted(consumers.items(), key=lambda t: (t[1], t[0])):
        if earliest <= nxt <= latest:
            tl.marker(nxt - earliest, f"consumer {name} (next {nxt})", side="below", colour="#b15928")
    tl.axis([(i, str(ids[i])) for i in _ticks(len(ids))], "snapshot id")
    if bound != "time-retained":
        tr = _option(plan, "snapshot.time-retained")
        missing.append(f"the time-retained boundary ({option_value('snapshot.time-retained', tr)}): a Paimon plan keeps snapshot ids, not their "
                       "times, so the line is drawn only when time-retained bounded the range")
    if branches:
        missing.append(f"the snapshots of the branches {', '.join(map(str, branches))}: the plan keeps only their "
                       "names (each branch has snapshots of its own)")
    out += [str(tl.svg),
            legend([("expired", f"expired ({len(expired)})"), ("kept", f"kept ({len(ids) - len(expired)})")])
            + "<p class=\"note\">One dot per snapshot of the branch; a dark ring marks a snapshot a tag holds; "
              "dashed lines are the boundaries the options draw.</p>"]
    return out


def _iceberg_timeline(plan, missing: list[str]) -> list[str]:
    scope = plan.scope
    expired = sorted(scope.expired)
    refs = scope.refs
    kept = sorted({sid for sid in refs.values() if sid not in set(expired)})
    others = max(0, int(plan.stats.get("retained_snapshots", 0)) - len(kept))
    out = ["<h2>Snapshots</h2>"]
    shown = expired + kept
    if not shown:
        return out + ["<p class=\"note\">The plan lists no snapshot.</p>"]
    gap = 1 if expired and kept else 0
    extra = 3 if others else 0  # room for a box that counts the kept snapshots the plan does not list
    tl = _Timeline(len(shown) + gap + extra, "Iceberg snapshots: expired and kept by refs", above=3, below=2)
    pos = {}
    for i, sid in enumerate(expired):
        pos[sid] = i
        tl.dot(i, expired=True, sid=sid, title=f"snapshot {sid}: expired")
    for j, sid in enumerate(kept):
        pos[sid] = len(expired) + gap + j
        names = sorted(n for n, s in refs.items() if s == sid)
        tl.dot(pos[sid], expired=False, sid=sid, held=True, title=f"snapshot {sid}: kept by {', '.join(names)}")
    for name, sid in sorted(refs.items(), key=lambda t: (pos.get(t[1], 0), t[0])):
        if sid in pos:
            tl.marker(pos[sid], f"{'branch' if name == 'main' else 'ref'} {name}", side="above", colour="#6a3d9a")
    if expired and kept:
        tl.boundary(len(expired) - 0.5 + gap / 2, f"retain-last {_option(plan, 'retain_last')}, older than "
                    f"{utc(scope.cutoff_ms)}", 0)
    if others:
        x1, x2 = tl.x(len(shown) + gap + 0.5), tl.x(len(shown) + gap + extra - 0.5)
        tl.svg.rect(x1, tl.lane - 12, x2 - x1, 24, fill="#eeeeee", stroke="#999", cls="unlisted",
                    data={"count": others}, title=f"{others} kept snapshot(s) no ref holds: not listed in the plan")
        tl.svg.text((x1 + x2) / 2, tl.lane + 4, f"+{others} kept, not listed", anchor="middle", size=11)
    tl.axis([(pos[s], f"…{str(s)[-5:]}") for s in shown if pos[s] in _ticks(len(shown) + gap, 14)],
            "snapshot")
    out += [str(tl.svg), legend([("expired", f"expired ({len(expired)})"),
                                 ("kept", f"kept, held by a ref ({len(kept)})")]),
            "<p class=\"note\">Expired snapshots first, by id, then those a ref holds; Iceberg snapshot ids are not "
            "ordered by time. Labels show the last five digits (hover for the whole id).</p>"]
    if others:
        out.append(f"<p class=\"meta\">Also kept: {others} snapshot(s) no ref points at (not listed in the plan).</p>")
        missing.append(f"{others} kept snapshot(s) that no ref holds: an Iceberg expiry plan keeps only their count")
    missing.append("snapshot times: the older-than and retain-last boundaries are drawn between expired and kept, "
                   "not on a time axis")
    missing.append("whether a ref other than main is a tag or a branch: the plan keeps each ref's snapshot only")
    return out


# -- kind-specific charts --------------------------------------------------------------------------

def _orphan_ages(plan, missing: list[str]) -> list[str]:
    stats = plan.stats
    if plan.format == "iceberg":
        kept = stats.get("kept", {})
        young, unknown, cutoff = kept.get("young", 0), kept.get("unknown_age", 0), plan.scope.cutoff_ms
        used = stats.get("used", 0)
    else:
        young, unknown, cutoff = (stats.get("kept_young", 0), stats.get("kept_unknown_time", 0),
                                  plan.scope.older_than_ms)
        used = stats.get("kept_used", 0)
    candidates = sum(1 for a in plan.actions if "empty-dir" not in str(a.kind))
    rows = [("older than --older-than: candidates", candidates, "candidate"),
            ("modified since: kept", young, "young"), ("no modification time: kept", unknown, "unknown"),
            ("used by the table: kept", used, "used")]
    svg = Svg(height=190, label="orphan candidates by age against --older-than")
    most = max(n for _, n, _ in rows) or 1
    base, left, w = 150, 110, 180
    for i, (name, n, colour) in enumerate(rows):
        h = 120 * n / most
        x = left + i * (w + 45)
        svg.rect(x, base - h, w, h, fill=COLOURS[colour], cls="age-bin", data={"bin": name, "count": n},
                 title=f"{name}: {n} file(s)")
        svg.text(x + w / 2, base - h - 4, f"{n} file(s)", anchor="middle")
        svg.text(x + w / 2, base + 16, name, anchor="middle")
    svg.line(left - 10, base, WIDTH - 40, base, colour="#666")
    svg.line(left + w + 22, 10, left + w + 22, base + 4, colour=COLOURS["boundary"], width=1.5, dash="5,3",
             cls="boundary")
    svg.text(left + w + 26, 20, f"--older-than {utc(cutoff)}", weight="bold")
    svg.text(left - 14, base - 60, "files", anchor="end")
    missing.append("each candidate's modification time: the plan keeps how many files fall on each side of "
                   "--older-than, so the histogram has these bins only")
    return ["<h2>Listed files by age</h2>", str(svg),
            legend([("candidate", "deleted by the plan"), ("young", "kept: younger"), ("unknown", "kept: no time"),
                    ("used", "kept: used")])]


_UNPARSEABLE = re.compile(r"^partition (.+?) (?:is skipped, never expired|has no file creation time)")


def _partition_times(plan, missing: list[str]) -> list[str]:
    import datetime as _dt

    scope, stats = plan.scope, plan.stats
    parts = scope.partitions
    unparseable = [m.group(1) for w in stats.get("warnings", []) if (m := _UNPARSEABLE.match(w))]
    considered = int(stats.get("partitions_considered", 0))
    left = int(stats.get("partitions_left_by_max", 0))
    kept = max(0, considered - len(parts) - left - len(unparseable))
    out = ["<h2>Partition times</h2>"]

    def when(text):
        try:
            return _dt.datetime.fromisoformat(str(text))
        except ValueError:
            return None

    cutoff = when(scope.cutoff)
    points = [(p, when(p.get("time"))) for p in parts]
    times = [t for _, t in points if t is not None] + ([cutoff] if cutoff else [])
    svg = Svg(height=170 + 16 * min(len(unparseable), 6), label="partition times against the cut-off")
    lo, hi = (min(times), max(times)) if times else (None, None)
    x0, x1, lane = 70, WIDTH - 80, 80

    def x(t):
        if lo is None or hi == lo:
            return (x0 + x1) / 2
        return x0 + (x1 - x0) * (t - lo).total_seconds() / (hi - lo).total_seconds()

    svg.line(x0 - 10, lane + 16, x1 + 10, lane + 16, colour="#666")
    for i, (p, t) in enumerate(points):
        if t is None:
            continue
        svg.circle(x(t), lane, 7, fill=COLOURS["dropped"], cls="partition dropped", data={"partition": p["partition"]},
                   title=f"{p['partition']}: {p.get('time')} ({human_bytes(p.get('bytes'))}, {p.get('files')} files)")
        svg.text(x(t), lane - 14 - 14 * (i % 3), p["partition"], anchor="middle", size=11)
    if cutoff is not None:
        svg.line(x(cutoff), 10, x(cutoff), lane + 20, colour=COLOURS["boundary"], width=1.5, dash="5,3",
                 cls="boundary")
        svg.text(x(cutoff) - 4, 22, f"cut-off {cutoff.isoformat(sep=' ', timespec='seconds')}", anchor="end",
                 weight="bold")
    if lo is not None:
        svg.text(x0, lane + 34, lo.isoformat(sep=" ", timespec="seconds"), size=11)
        svg.text(x1, lane + 34, hi.isoformat(sep=" ", timespec="seconds"), anchor="end", size=11)
    svg.text((x0 + x1) / 2, lane + 50, f"partition time ({scope.time_zone} local time)", anchor="middle")
    for i, name in enumerate(unparseable[:6]):
        svg.rect(x0, lane + 62 + 16 * i, 10, 10, fill=COLOURS["unparseable"], cls="partition unparseable",
                 data={"partition": name})
        svg.text(x0 + 16, lane + 71 + 16 * i, f"{name}: its value cannot be read as a time (kept)", size=11)
    out += [str(svg), legend([("dropped", f"dropped ({len(parts)})"), ("kept", f"kept ({kept})"),
                              ("unparseable", f"unparseable, kept ({len(unparseable)})")])]
    if len(unparseable) > 6:
        out.append(f"<p class=\"meta\">… and {len(unparseable) - 6} more unparseable partition(s) (see the "
                   "warnings above).</p>")
    if left:
        out.append(f"<p class=\"meta\">{left} more expired partition(s) are left for a later plan (--max-expires).</p>")
    if kept:
        missing.append(f"the times of the {kept} kept partition(s): the plan keeps only the partitions it drops "
                       "and the count of those it considered")
    return out


def _bins(plan, missing: list[str]) -> list[str]:
    scope = plan.scope
    bins = scope.bins
    out = ["<h2>Compaction bins: before and after</h2>"]
    if not bins:
        return out + [f"<p class=\"note\">No bin: {esc(scope.skipped or 'nothing to compact')}</p>"]
    target = scope.target_bytes
    largest = max(sum(f["size"] for f in b["inputs"]) for b in bins)
    # the scale is the largest bin's: a target far above it would squash every bar to a sliver
    on_scale = bool(target) and target <= 2 * largest
    most = max(largest, target if on_scale else 0) or 1
    left, right, row_h = 250, 150, 44
    svg = Svg(height=20 + row_h * len(bins) + 40, label="compaction bins before and after")
    span = WIDTH - left - right
    for i, b in enumerate(bins):
        y = 14 + i * row_h
        name = f"bin {b['index']}: {b['partition'] or 'unpartitioned'}"
        svg.text(left - 6, y + 20, name if len(name) <= 36 else "…" + name[-35:], anchor="end")
        x = left
        total = 0
        for f in b["inputs"]:
            w = span * f["size"] / most
            svg.rect(x, y, w, 16, fill=COLOURS["before"], stroke="#fff", cls="compact-input",
                     data={"bin": b["index"]}, title=f"{f['path']}: {human_bytes(f['size'])}, {f['record_count']} rows")
            x += w
            total += f["size"]
        svg.text(x + 6, y + 13, f"before: {len(b['inputs'])} files, {human_bytes(total)}", size=11)
        svg.rect(left, y + 20, span * total / most, 16, fill=COLOURS["after"], cls="compact-output",
                 data={"bin": b["index"]}, title=f"after: 1 file of at most {human_bytes(total)}")
        svg.text(left + span * total / most + 6, y + 33, f"after: 1 file, ≤ {human_bytes(total)}", size=11)
    base = 14 + row_h * len(bins)
    svg.line(left, base, left + span, base, colour="#666")
    if not on_scale and target:
        svg.text(left + span, base + 14, f"target {human_bytes(target)} (off the scale)", anchor="end", weight="bold")
    if on_scale:
        tx = left + span * target / most
        svg.line(tx, 6, tx, base, colour=COLOURS["boundary"], dash="5,3", width=1.5, cls="boundary")
        svg.text(tx - 4, base + 14, f"target {human_bytes(target)}", anchor="end", weight="bold")
    svg.text(left, base + 14, "0 B", anchor="start", size=11)
    svg.text(left + span / 2, base + 30, "bytes per bin", anchor="middle")
    out += [str(svg), legend([("before", "input files (one segment each)"), ("after", "merged output")]),
            f"<p class=\"meta\">{len(bins)} bin(s) merge {sum(len(b['inputs']) for b in bins)} of "
            f"{scope.data_files} data files of snapshot {esc(scope.snapshot_id)}.</p>"]
    missing.append("the merged files' sizes: apply writes them; the bars show the inputs' total, which deleted rows "
                   "and compression make smaller")
    return out


# -- tables ----------------------------------------------------------------------------------------

def _by_partition(plan) -> list[str]:
    parts: dict[str, list[int]] = {}
    seen: set[str] = set()  # a file two actions name (compaction's input and its replacement) counts once
    for a in plan.actions:
        if a.partition is None or a.path in seen:
            continue
        seen.add(a.path)
        p = parts.setdefault(a.partition or "(unpartitioned)", [0, 0])
        p[0] += a.size or 0
        p[1] += 1
    out = ["<h2>Bytes and files per partition</h2>"]
    if not parts:
        return out + ["<p class=\"note\">No action of this plan names a partition (it removes metadata or files "
                      "outside partition directories only).</p>"]
    rows = sorted(((k, v[0], v[1]) for k, v in parts.items()), key=lambda r: (-r[1], -r[2], r[0]))
    return out + [bar_chart(rows, label="bytes per partition, largest first", cls="partition-bar"),
                  "<p class=\"note\">One bar per partition, largest first; files of unknown size count 0 bytes.</p>"]


def _by_kind(plan) -> list[str]:
    """The text output's table: bytes for the kinds that delete files, ``-`` for the others (commits, hints)."""
    summary = plan.stats.get("summary", {})
    deleting = {str(a.kind) for a in plan.actions if a.verb.deletes}
    rows = [(k, v["count"], bytes_cell(v["bytes"], v.get("unknown_size", 0)) if k in deleting else "-")
            for k, v in summary.get("by_kind", {}).items()]
    return ["<h2>Actions by kind</h2>", table(["kind", "count", "bytes"], rows, numeric=(1, 2))] if rows else []


def _options(plan) -> list[str]:
    rows = [(k, _option_text(k, v.value), v.source) for k, v in sorted(plan.options.items())]
    return ["<h2>Options</h2>", table(["option", "value", "source"], rows)]


def _option_text(key: str, value) -> str:
    """An option's value as the text output gives it (``cli.humanize.option_value``), a list joined."""
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return option_value(key, value)


# The chart drawn for a (format, plan kind), between the description and the tables every plan gets; a kind
# without one gets those tables only.
_CHARTS = {("paimon", "expire"): _paimon_timeline, ("iceberg", "expire"): _iceberg_timeline,
           ("paimon", "orphans"): _orphan_ages, ("iceberg", "orphans"): _orphan_ages,
           ("paimon", "partitions"): _partition_times, ("iceberg", "compact"): _bins}
