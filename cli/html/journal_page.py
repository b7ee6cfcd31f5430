"""``lakesweep journal report --html FILE``: what lakesweep did, from the journal's ``maintenance_history``
view, as one self-contained HTML page: outcomes per day, bytes reclaimed per table per day, every run on a
time line with its crash and resume, every failure with its error, and each ``maintain`` run as a matrix of
tables by operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from lakesweep.cli.html.svg import COLOURS, WIDTH, Svg, esc, human_bytes, legend, page, table, utc, utc_day

DAY_MS = 86_400_000
STATUSES = ("COMPLETED", "FAILED", "REFUSED", "INCOMPLETE", "PLANNED", "SKIPPED")
TABLE_COLOURS = ("#2b8cbe", "#e6550d", "#31a354", "#756bb1", "#636363", "#dd1c77", "#8c6d31", "#17becf")
RUNS_SHOWN = 60  # runs drawn on the time line; the history table below lists them all


@dataclass(frozen=True, slots=True)
class ReportInput:
    """What the page is made of: the history rows (``Recorder.maintenance_history``), the failed file
    records (``Recorder.file_rows``), and how they were chosen."""

    journal: str
    history: Sequence[dict[str, Any]]
    failed_files: Sequence[dict[str, Any]]
    since_ms: int | None = None
    table: str | None = None
    now_ms: int | None = None


def journal_html(r: ReportInput) -> str:
    chosen = ", ".join(x for x in (f"since {utc(r.since_ms)}" if r.since_ms is not None else "",
                                   f"table {r.table}" if r.table else "") if x) or "everything"
    counts = {s: sum(1 for h in r.history if h["status"] == s) for s in STATUSES}
    body = ["<h1>lakesweep journal report</h1>",
            f"<p class=\"meta\">Journal <code>{esc(r.journal)}</code>; {esc(chosen)}; made at {esc(utc(r.now_ms))}</p>",
            f"<p>{len(r.history)} operation run(s): "
            + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n) + "</p>"]
    if not r.history:
        return page("lakesweep journal report", body + ["<p class=\"note\">The journal holds no operation run"
                                                        " for this choice.</p>"])
    body += _outcomes_per_day(r.history)
    body += _reclaimed_per_table(r.history)
    body += _runs(r.history, r.now_ms)
    body += _failures(r.history, r.failed_files)
    body += _maintain(r.history)
    body += _history_table(r.history)
    return page("lakesweep journal report", body)


def _days(rows) -> list[int]:
    starts = [h["start_ms"] for h in rows if h["start_ms"] is not None]
    first, last = min(starts) // DAY_MS, max(starts) // DAY_MS
    return list(range(first, last + 1))


def _metric(h, key: str) -> int:
    v = (h.get("metrics") or {}).get(key)
    return int(v) if v is not None else 0


def _outcomes_per_day(history) -> list[str]:
    days = _days(history)
    per = {(d, s): 0 for d in days for s in STATUSES}
    for h in history:
        if h["start_ms"] is not None:
            per[(h["start_ms"] // DAY_MS, h["status"] if h["status"] in STATUSES else "FAILED")] += 1
    most = max(sum(per[(d, s)] for s in STATUSES) for d in days) or 1
    left, base, height = 70, 210, 180
    slot = (WIDTH - left - 30) / len(days)
    w = min(60.0, slot * 0.7)
    svg = Svg(height=base + 60, label="operation runs per day by outcome")
    for i, d in enumerate(days):
        x = left + i * slot + (slot - w) / 2
        y = base
        for s in STATUSES:
            n = per[(d, s)]
            if not n:
                continue
            h = height * n / most
            y -= h
            svg.rect(x, y, w, h, fill=COLOURS[s], stroke="#fff", cls="outcome-bar",
                     data={"day": utc_day(d * DAY_MS), "status": s, "count": n},
                     title=f"{utc_day(d * DAY_MS)}: {n} {s.lower()}")
            if h >= 14:
                svg.text(x + w / 2, y + h / 2 + 4, str(n), anchor="middle", size=11, cls="plain")
        if len(days) <= 16 or i % -(-len(days) // 16) == 0:
            svg.text(x + w / 2, base + 16, utc_day(d * DAY_MS), anchor="middle", size=11)
    svg.line(left - 4, base, WIDTH - 30, base, colour="#666")
    svg.line(left - 4, base - height, left - 4, base, colour="#666")
    for frac in (0, 0.5, 1):
        svg.text(left - 10, base - height * frac + 4, f"{most * frac:g}", anchor="end", size=11)
    svg.text(14, base - height / 2, "runs", rotate=-90, anchor="middle")
    svg.text(left + (WIDTH - left - 30) / 2, base + 36, "day (UTC)", anchor="middle")
    return ["<h2>Outcomes over time</h2>", str(svg),
            legend([(s, s.lower()) for s in STATUSES if any(per[(d, s)] for d in days)])]


def _table_key(h) -> str:
    return h.get("table_location") or h.get("table") or "?"


def _reclaimed_per_table(history) -> list[str]:
    days = _days(history)
    sums: dict[tuple[int, str], int] = {}
    for h in history:
        b = _metric(h, "bytes_reclaimed")
        if b and h["start_ms"] is not None:
            key = (h["start_ms"] // DAY_MS, _table_key(h))
            sums[key] = sums.get(key, 0) + b
    out = ["<h2>Bytes reclaimed per table per day</h2>"]
    if not sums:
        return out + ["<p class=\"note\">No run reclaimed any bytes (or none recorded sizes).</p>"]
    tables = sorted({t for _, t in sums})
    colour = {t: TABLE_COLOURS[i % len(TABLE_COLOURS)] for i, t in enumerate(tables)}
    most = max(sums.values())
    left, base, height = 90, 210, 180
    slot = (WIDTH - left - 30) / len(days)
    bw = min(40.0, slot * 0.8 / len(tables))
    svg = Svg(height=base + 60, label="bytes reclaimed per table per day")
    for i, d in enumerate(days):
        x0 = left + i * slot + (slot - bw * len(tables)) / 2
        for j, t in enumerate(tables):
            b = sums.get((d, t))
            if not b:
                continue
            h = max(1.0, height * b / most)
            svg.rect(x0 + j * bw, base - h, bw - 2, h, fill=colour[t], cls="reclaimed-bar",
                     data={"day": utc_day(d * DAY_MS), "table": t, "bytes": b},
                     title=f"{utc_day(d * DAY_MS)}, {t}: {human_bytes(b)}")
            svg.text(x0 + j * bw + bw / 2, base - h - 4, human_bytes(b), anchor="middle", size=10)
        if len(days) <= 16 or i % -(-len(days) // 16) == 0:
            svg.text(left + i * slot + slot / 2, base + 16, utc_day(d * DAY_MS), anchor="middle", size=11)
    svg.line(left - 4, base, WIDTH - 30, base, colour="#666")
    svg.line(left - 4, base - height, left - 4, base, colour="#666")
    for frac in (0, 0.5, 1):
        svg.text(left - 10, base - height * frac + 4, human_bytes(int(most * frac)), anchor="end", size=11)
    svg.text(14, base - height / 2, "bytes", rotate=-90, anchor="middle")
    svg.text(left + (WIDTH - left - 30) / 2, base + 36, "day (UTC)", anchor="middle")
    return out + [str(svg), legend([(colour[t], t) for t in tables])]


def _runs(history, now_ms: int | None) -> list[str]:
    runs = [h for h in history if h["source"] == "apply" and h["apply_id"] is not None][-RUNS_SHOWN:]
    out = ["<h2>Runs, crashes and resumes</h2>"]
    if not runs:
        return out + ["<p class=\"note\">No apply in this choice.</p>"]
    # an apply with no end is drawn up to the last time the journal knows, not to now: a months-old crash
    # would squash every other bar
    last = max(t for h in history for t in (h["start_ms"], h["end_ms"]) if t is not None)
    end_of = {h["apply_id"]: h["end_ms"] if h["end_ms"] is not None else max(last, h["start_ms"]) for h in runs}
    lo = min(h["start_ms"] for h in runs)
    hi = max(max(end_of.values()), lo + 1)
    left, right, row_h, top = 330, 30, 20, 10
    span = WIDTH - left - right
    svg = Svg(height=top + row_h * len(runs) + 64, label="applies on a time line")

    def x(t):
        return left + span * (t - lo) / (hi - lo)

    for i, h in enumerate(runs):
        y = top + i * row_h
        again = "↻ " if h.get("previous_apply_id") else ""
        name = f"{again}{h['operation']} {h['apply_id']} · {_short(_table_key(h), 24)}"
        svg.text(left - 6, y + 14, name, anchor="end", size=11)
        x1, x2 = x(h["start_ms"]), x(end_of[h["apply_id"]])
        svg.rect(x1, y + 4, max(x2 - x1, 4), row_h - 8, fill=COLOURS.get(h["status"], "#999"), cls="run",
                 data={"apply": h["apply_id"], "status": h["status"]},
                 title=f"{h['apply_id']}: {h['status'].lower()}, {utc(h['start_ms'])} to {utc(h['end_ms'])}")
        said = ("resumed after a crash" if _metric(h, "actions_recorded_twice") else
                "no end recorded" if h["status"] == "INCOMPLETE" else None)
        if said is not None:
            near_edge = x2 > WIDTH - right - 150
            svg.text(x2 - 6 if near_edge else x2 + 6, y + 14, said, size=11, fill="#8a4b00",
                     anchor="end" if near_edge else "start")
    base = top + row_h * len(runs) + 4
    svg.line(left, base, left + span, base, colour="#666")
    svg.text(left, base + 16, utc(lo), size=11)
    svg.text(left + span, base + 16, utc(hi), anchor="end", size=11)
    svg.text(left + span / 2, base + 34, "time (UTC)", anchor="middle")
    if any(h["end_ms"] is None for h in runs):
        svg.text(left + span, base + 52, "an apply with no end reaches the journal's last record", anchor="end", size=11)
    out += [str(svg), legend([(s, s.lower()) for s in ("COMPLETED", "FAILED", "REFUSED", "INCOMPLETE")])]
    if len(runs) == RUNS_SHOWN:
        out.append(f"<p class=\"note\">The last {RUNS_SHOWN} applies; the history table lists every run.</p>")
    rows = []
    status = {h["apply_id"]: h["status"] for h in history if h["apply_id"]}
    for h in history:
        if h["source"] != "apply" or h["apply_id"] is None:
            continue
        twice = _metric(h, "actions_recorded_twice")
        if h["status"] == "INCOMPLETE":
            rows.append((h["apply_id"], h["operation"], _table_key(h), utc(h["start_ms"]),
                         "started, no end recorded: killed, or still running",
                         f"lakesweep resume {h['plan_id']}"))
        elif twice:
            rows.append((h["apply_id"], h["operation"], _table_key(h), utc(h["start_ms"]),
                         f"{twice} action(s) recorded twice: interrupted and resumed under the same apply id",
                         f"{h['status'].lower()} at {utc(h['end_ms'])}"))
        if h.get("previous_apply_id") and status.get(h["previous_apply_id"]) in ("FAILED", "INCOMPLETE", "REFUSED"):
            rows.append((h["apply_id"], h["operation"], _table_key(h), utc(h["start_ms"]),
                         f"applies the plan again after apply {h['previous_apply_id']} "
                         f"({status[h['previous_apply_id']].lower()})", f"{h['status'].lower()} at {utc(h['end_ms'])}"))
    if rows:
        out.append(table(["apply", "operation", "table", "started", "what happened", "then"], rows, nowrap=(3,), wrap=(2, 5)))
    else:
        out.append("<p class=\"note\">No crash and no resume.</p>")
    out.append("<p class=\"note\">A resume goes on under the interrupted apply's id and the journal records no event "
               "for the restart itself: an interrupted apply shows as one whose actions were recorded twice, or as "
               "one with no end. ↻ marks an apply of a plan that was applied before.</p>")
    return out


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else "…" + text[-(n - 1):]


def _failures(history, failed_files) -> list[str]:
    runs = [h for h in history if h["status"] in ("FAILED", "REFUSED")]
    out = ["<h2>Failures</h2>"]
    if not runs and not failed_files:
        return out + ["<p class=\"note\">No failure.</p>"]
    if runs:
        out.append(table(["when", "status", "operation", "table", "error", "run"],
                         [(utc(h["end_ms"] or h["start_ms"]), h["status"].lower(), h["operation"], _table_key(h),
                           h["message"] or "-", h["apply_id"] or h["maintain_run_id"] or "-") for h in runs],
                         nowrap=(0,), wrap=(3,)))
    if failed_files:
        out.append(f"<p>{len(failed_files)} failed file record(s):</p>")
        out.append(table(["when", "apply", "kind", "path", "attempts", "error"],
                         [(utc(f["time_ms"]), f["apply_id"], f["kind"], f["path"], f["attempt"], f["error"])
                          for f in failed_files], numeric=(4,), nowrap=(0,), wrap=(3,)))
    return out


MAINTAIN_RUNS_SHOWN = 5


def _maintain(history) -> list[str]:
    by_run: dict[str, list[dict]] = {}
    for h in history:
        if h.get("maintain_run_id"):
            by_run.setdefault(h["maintain_run_id"], []).append(h)
    out = ["<h2>maintain runs</h2>"]
    if not by_run:
        return out + ["<p class=\"note\">No 'lakesweep maintain' run in this choice.</p>"]
    runs = list(by_run.items())[-MAINTAIN_RUNS_SHOWN:]
    for run_id, rows in reversed(runs):
        tables = list(dict.fromkeys(h["table"] for h in rows))
        ops = list(dict.fromkeys(h["operation"] for h in rows))
        cell = {(h["table"], h["operation"]): h for h in rows}
        head = "".join(f"<th>{esc(o)}</th>" for o in ops)
        lines = []
        for t in tables:
            cells = []
            for o in ops:
                h = cell.get((t, o))
                if h is None:
                    cells.append("<td>-</td>")
                    continue
                b = _metric(h, "bytes_reclaimed")
                status = h["status"]
                cells.append(f"<td class=\"maintain-cell\" data-status=\"{esc(status)}\" data-table=\"{esc(t)}\" "
                             f"data-operation=\"{esc(o)}\" style=\"background:{COLOURS.get(status, '#eee')}33;"
                             f"border-left:6px solid {COLOURS.get(status, '#999')}\"><b>{esc(status.lower())}</b>"
                             + (f" · {esc(human_bytes(b))}" if h["source"] == "apply" else "")
                             + f"<br><small>{esc(h['message'] or '')}</small></td>")
            lines.append(f"<tr><th>{esc(t)}</th>{''.join(cells)}</tr>")
        when = min(h["start_ms"] for h in rows)
        out.append(f"<h3>run {esc(run_id)} ({esc(utc(when))})</h3><table><tr><th>table</th>{head}</tr>"
                   + "".join(lines) + "</table>")
    out.append(legend([(s, s.lower()) for s in ("COMPLETED", "SKIPPED", "PLANNED", "FAILED")]))
    if len(by_run) > MAINTAIN_RUNS_SHOWN:
        out.append(f"<p class=\"note\">The last {MAINTAIN_RUNS_SHOWN} of {len(by_run)} maintain runs.</p>")
    return out


def _history_table(history) -> list[str]:
    rows = [(utc(h["start_ms"]), utc(h["end_ms"]), h["status"].lower(), h["operation"], _table_key(h),
             human_bytes(_metric(h, "bytes_reclaimed")) if h["source"] == "apply" else "-",
             h["apply_id"] or "-", h["plan_id"] or "-") for h in reversed(history)]
    return ["<h2>Every run (maintenance_history)</h2>",
            "<p class=\"note\">Newest first. Each apply's files: <code>lakesweep journal files --plan PLAN</code>, or "
            "<code>SELECT * FROM file_audit WHERE apply_id = '…'</code> with <code>lakesweep journal query</code>.</p>",
            table(["start", "end", "status", "operation", "table", "reclaimed", "apply", "plan"], rows, nowrap=(0, 1),
                  wrap=(4, 7))]
