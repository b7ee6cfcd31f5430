"""Rendering results for people (rich) and for scripts (JSON). Diagnostics go to stderr."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lakesweep.cli.humanize import bytes_cell, fitted, option_value
from lakesweep.engine.plan import Verb
from lakesweep.engine.units import human_bytes

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def fmt_time(ms: int | None) -> str:
    if ms is None:
        return "-"
    from lakesweep.engine.timeutil import format_time_ms

    return format_time_ms(ms)


def render_iceberg_inspect(info: dict) -> None:
    """``inspect_iceberg``'s summary for people."""
    s = info["schema"]
    out.print(f"[bold]Iceberg table[/bold] {escape(info['identifier'])} (catalog {escape(info['catalog'])}, format "
              f"version {info['format_version']}) at {escape(info['location'])}")
    out.print(f"  schema {s['id']}: " + ", ".join(f"{f['name']} {f['type']}" for f in s["fields"]))
    out.print(f"  partition spec: {escape(', '.join(info['partition_spec']) or 'unpartitioned')}")
    if info["properties"]:
        out.print("  properties: " + ", ".join(f"{k}={escape(option_value(k, v))}" for k, v in info["properties"].items()),
                  soft_wrap=False)
    out.print(fitted("Snapshots", [("id", "right"), ("time (UTC)", "left"), ("operation", "left")],
                     [[str(x["id"]) + (" (current)" if x["id"] == info["current_snapshot_id"] else ""),
                       fmt_time(x["time_millis"]), x["operation"] or "-"] for x in info["snapshots"]], out.width))
    out.print("  branches: " + (", ".join(f"{b['name']}→{b['snapshot_id']}" for b in info["branches"]) or "none"))
    out.print("  tags: " + (", ".join(f"{t['name']}→{t['snapshot_id']}" for t in info["tags"]) or "none"))
    live, older = info["current_live"], info["older_only"]
    out.print(f"  read by the current snapshot: {live['files']} data and delete files, {human_bytes(live['bytes'])}")
    out.print(f"  reached only by older snapshots: {older['files']} files, {human_bytes(older['bytes'])}")


def render_inspect(info: dict) -> None:
    if "identifier" in info:
        render_iceberg_inspect(info)
        return
    s = info["schema"]
    out.print(f"[bold]Table[/bold] {info['location']} (branch {info['branch']})")
    fields = ", ".join(f"{f['name']} {f['type']}" for f in s["fields"])
    out.print(f"  schema {s['id']}: {fields}")
    out.print(f"  partition keys: {s['partition_keys'] or '-'}   primary keys: {s['primary_keys'] or '-'}")
    if s["options"]:
        out.print("  options: " + ", ".join(f"{k}={escape(option_value(k, v))}" for k, v in s["options"].items()))
    h = info["hints"]
    out.print(
        f"  snapshots: earliest {info['earliest']}, latest {info['latest']} "
        f"(hints: EARLIEST={h['EARLIEST'] if h['EARLIEST'] is not None else 'absent'}, "
        f"LATEST={h['LATEST'] if h['LATEST'] is not None else 'absent'})"
    )
    t = Table(title="Snapshots", show_lines=False)
    for col in ("id", "time (UTC)", "commit kind", "total records", "delta records"):
        t.add_column(col, justify="right" if col != "commit kind" else "left")
    for snap in info["snapshots"]:
        t.add_row(
            str(snap["id"]),
            fmt_time(snap["time_millis"]),
            snap["commit_kind"],
            str(snap["total_record_count"] if snap["total_record_count"] is not None else "-"),
            str(snap["delta_record_count"] if snap["delta_record_count"] is not None else "-"),
        )
    out.print(t)
    out.print("  tags: " + (", ".join(f"{x['name']}→{x['snapshot_id']}" for x in info["tags"]) or "none"))
    out.print(
        "  consumers: " + (", ".join(f"{c['id']} (next {c['next_snapshot']})" for c in info["consumers"]) or "none")
    )
    out.print("  branches: " + (", ".join(f"{b['name']} (latest {b['latest']})" for b in info["branches"]) or "none"))
    live, older = info["latest_live"], info["older_only"]
    out.print(f"  live in the latest snapshot: {live['files']} files, {human_bytes(live['bytes'])}")
    out.print(
        f"  held only by older snapshots: {older['files']} files, {human_bytes(older['bytes'])}"
        f" (of which held by tags: {older['held_by_tags']['files']} files, "
        f"{human_bytes(older['held_by_tags']['bytes'])})"
    )
    for p in info["problems"]:
        err.print(f"[yellow]warning:[/yellow] {p}")


def plan_document(plan, *, files: bool = False) -> dict:
    """A plan as JSON-ready data: its id, header, what its kind says about it (``nothing_to_do``, and
    expiry's ``nothing_to_expire``) and, with ``files``, every action (``action_document``)."""
    from lakesweep.planner.kinds import describe_plan

    description = describe_plan(plan)
    doc = {"plan_id": plan.plan_id, **plan.header(), **description.document,
           "nothing_to_do": description.nothing_to_do}
    if files:
        doc["actions"] = [action_document(plan, a) for a in plan.actions]
    return doc


def action_document(plan, a) -> dict:
    """One action of ``plan`` as ``plan_document`` lists it."""
    return {"action_id": a.action_id, "phase": plan.phase_name(a.phase), "kind": str(a.kind), "path": a.path,
            "snapshot_id": a.snapshot_id, "partition": a.partition, "bucket": a.bucket, "size": a.size}


def emit_json_listing(doc: dict, key: str, items, *, chunk: int = 16_384) -> None:
    """``emit_json(doc | {key: list(items)})``, the same text, with the items written ``chunk`` at a time as
    they come: a listing of any length is never held whole (``doc`` has no ``key``; it is a top-level key)."""
    marker = f'\n  {json.dumps(key)}: []'
    text = json.dumps(doc | {key: []}, indent=2, sort_keys=True, default=str) + "\n"
    at = text.index(marker) + len(marker) - 1
    write, first, items = sys.stdout.write, True, iter(items)
    write(text[:at])
    while block := list(itertools.islice(items, chunk)):
        listed = json.dumps(block, indent=2, sort_keys=True, default=str)  # "[\n  {...},\n  {...}\n]"
        write(("\n  " if first else ",\n  ") + listed[2:-2].replace("\n", "\n  "))
        first = False
    write(("]" if first else "\n  ]") + text[at + 1:])
    sys.stdout.flush()


class ActionFigures:
    """What ``render_plan`` counts over a plan's actions beyond its summary, as a fold (``add`` a batch at a
    time): the kinds that delete, and the files deleted whose size is unknown."""

    def __init__(self):
        self.deleting_kinds: set[str] = set()
        self.unknown_size = 0

    def add(self, actions) -> None:
        from lakesweep.engine.plan_columns import ColumnActions

        if isinstance(actions, ColumnActions):
            self.deleting_kinds |= actions.deleting_kinds()
            self.unknown_size += actions.unknown_size_deletes()
            return
        for a in actions:
            if a.verb.deletes:
                self.deleting_kinds.add(str(a.kind))
                self.unknown_size += a.verb is Verb.DELETE_FILE and a.size is None


def render_plan(plan, *, files: bool = False, location: str | None = None,
                figures: ActionFigures | None = None) -> None:
    """A plan for people, whatever its kind: id, table, time, options and their sources, the kind's
    description (``planner.kinds``), actions by kind and partition with totals, warnings (stderr) and,
    with ``files``, every action. ``figures``: the plan's ``ActionFigures`` when already counted."""
    from lakesweep.planner.kinds import describe_plan

    if figures is None:
        figures = ActionFigures()
        figures.add(plan.actions)

    description = describe_plan(plan)
    summary = plan.stats.get("summary", {})
    out.print(f"[bold]Plan[/bold] {plan.plan_id} ({plan.kind}) for {plan.table_location}")
    if location:
        out.print(f"  written to {location}")
    out.print(f"  made at now={fmt_time(plan.now_ms)}")
    options = ", ".join(f"{k}={option_value(k, v.value)} ({v.source})" for k, v in sorted(plan.options.items()))
    out.print(escape(textwrap.fill(options, width=max(40, out.width), initial_indent="  options: ",
                                   subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)))
    if description.nothing_to_do:
        out.print(f"[green]{escape(description.nothing_label)}[/green]: {escape(description.scope)}")
        for line in description.remaining:
            out.print(f"  {escape(line)}")
    else:
        out.print(f"  {escape(description.scope)}")
        t = Table(title="Actions by kind")
        t.add_column("kind")
        t.add_column("count", justify="right")
        t.add_column("bytes", justify="right")
        deleting = figures.deleting_kinds
        for kind, v in summary.get("by_kind", {}).items():
            t.add_row(kind, str(v["count"]), bytes_cell(v["bytes"], v["unknown_size"]) if kind in deleting else "-")
        out.print(t)
        if summary.get("by_partition"):
            pt = Table(title="Data and changelog files by partition")
            pt.add_column("partition")
            pt.add_column("files", justify="right")
            pt.add_column("bytes", justify="right")
            for part, v in summary["by_partition"].items():
                pt.add_row(part or "(unpartitioned)", str(v["count"]), human_bytes(v["bytes"]))
            out.print(pt)
        unknown = figures.unknown_size
        out.print(f"  total: {summary.get('files', 0)} files, {reclaimed_bytes(summary.get('bytes', 0), unknown)}")
    for line in description.notes:
        out.print(f"  {escape(line)}")
    for w in plan.stats.get("warnings", []):
        err.print(f"[yellow]warning:[/yellow] {w}")
    if files:
        render_actions(plan)


def render_actions(plan) -> None:
    """Every action of ``plan``, by phase, one a line, its path whole and last (a long one wraps, never cut)."""
    phase = None
    width = len(str(len(plan.actions) - 1)) if plan.actions else 1
    out.print(f"[bold]Actions[/bold] ({len(plan.actions)}; paths relative to {escape(plan.table_location)})")
    lines: list[str] = []  # printed a thousand at a time: one print per line costs most of a long listing
    for a in plan.actions:
        if a.phase != phase:
            phase = a.phase
            lines.append(f"  phase {escape(plan.phase_name(a.phase))}")
        size = (human_bytes(a.size) if a.size is not None else "size unknown") if a.verb.deletes else None
        fields = [str(a.action_id).rjust(width), escape(str(a.kind)), size,
                  f"snapshot {a.snapshot_id}" if a.snapshot_id is not None else None, escape(a.path)]
        lines.append("    " + "  ".join(f for f in fields if f is not None))
        if len(lines) >= 1000:
            out.print("\n".join(lines))
            lines.clear()
    if lines:
        out.print("\n".join(lines))


# How each outcome is told: a short, distinct column header, and the words of the summary line. A dry run
# speaks of what would happen (DRY_RUN_*). Any other outcome is shown under its own name.
OUTCOME_HEADERS = {"DELETED": "deleted", "ALREADY_ABSENT": "absent", "WRITTEN": "written", "KEPT_NOT_EMPTY": "kept",
                   "SKIPPED_REFERENCED": "skipped", "COMMITTED": "committed", "ALREADY_COMMITTED": "found",
                   "DROPPED": "dropped", "QUARANTINED": "quarantined", "FAILED": "failed"}
DRY_RUN_HEADERS = {"DELETED": "to delete", "WRITTEN": "to write", "COMMITTED": "to commit",
                   "QUARANTINED": "to quarantine"}
OUTCOME_LABELS = {"DELETED": "deleted", "ALREADY_ABSENT": "already absent", "WRITTEN": "written",
                  "KEPT_NOT_EMPTY": "kept (not empty)", "SKIPPED_REFERENCED": "skipped (still needed)",
                  "COMMITTED": "committed", "ALREADY_COMMITTED": "found committed", "DROPPED": "dropped",
                  "QUARANTINED": "quarantined", "FAILED": "failed"}
DRY_RUN_LABELS = {"DELETED": "would delete", "WRITTEN": "would write", "COMMITTED": "would commit",
                  "KEPT_NOT_EMPTY": "would keep (not empty)", "SKIPPED_REFERENCED": "would skip (still needed)",
                  "DROPPED": "would drop", "QUARANTINED": "would quarantine"}
# Outcomes counted in the table only: the summary line tells what happened to the files the plan removes.
TABLE_ONLY_OUTCOMES = frozenset({"WRITTEN", "KEPT_NOT_EMPTY"})
# Outcomes the summary line counts even when none happened (it leaves out the other outcomes that did not).
SUMMARY_ALWAYS = ("DELETED", "ALREADY_ABSENT", "FAILED")
# Outcomes whose column is shown even when no phase has one.
ALWAYS_SHOWN = ("DELETED", "FAILED")
REPORT_TITLES = {"COMPLETED": "[green]Apply completed[/green]", "FAILED": "[red]Apply failed[/red]",
                 "DRY_RUN": "[cyan]Dry run[/cyan] (nothing was deleted)"}


def reclaimed_bytes(known: int, unknown: int) -> str:
    """Bytes reclaimed, with the files whose size is unknown told apart: never summed as 0 B."""
    if not unknown:
        return human_bytes(known)
    files = f"{unknown} file{'s' if unknown != 1 else ''} of unknown size"
    return f"{human_bytes(known)} (+{files})" if known else f"an unknown number of bytes ({files})"


def render_report(report) -> None:
    """An apply's (or dry run's) report: one row per phase (``{"phase", "actions", <outcome>: n, ...,
    "bytes", "unknown_size"}``) with a column for each outcome some phase has (deleted and failed always),
    then a summary line of every outcome in ``report.counts``. A dry run speaks in the conditional. A table
    wider than the terminal is shown as one block per phase."""
    from lakesweep.cli.humanize import fitted

    if report.state == "REFUSED":
        err.print(f"[red]Refused[/red]: plan {report.plan_id}: {report.reason}")
        return
    if report.state == "NOT_STARTED":
        out.print(f"[yellow]Not started[/yellow]: {escape(report.reason)}")
        return
    if report.state == "ALREADY_APPLIED":
        out.print(f"[yellow]Already applied[/yellow]: {escape(report.reason)}")
        return
    headers = OUTCOME_HEADERS | (DRY_RUN_HEADERS if report.dry_run else {})
    labels = OUTCOME_LABELS | (DRY_RUN_LABELS if report.dry_run else {})
    shown = [o for o in report.counts if o in ALWAYS_SHOWN or any(p.get(o, 0) for p in report.phases)]
    out.print(f"{REPORT_TITLES.get(report.state, escape(report.state))}: plan {report.plan_id}"
              + (f", apply {report.apply_id}" if report.apply_id else "") + (" (resumed)" if report.resumed else ""))
    columns = [("phase", "left"), ("actions", "right"), *((headers.get(o, o), "right") for o in shown),
               ("to reclaim" if report.dry_run else "bytes", "right")]
    rows = [[p["phase"], str(p["actions"]), *(str(p.get(o, 0)) for o in shown),
             bytes_cell(p["bytes"], p.get("unknown_size", 0))]
            for p in report.phases]
    out.print(fitted(None, columns, rows, out.width))
    verb = "would reclaim" if report.dry_run else "reclaimed"
    counted = ", ".join(f"{labels.get(o, o)} {n}" for o, n in report.counts.items()
                        if o not in TABLE_ONLY_OUTCOMES and (n or o in SUMMARY_ALWAYS))
    out.print(f"  {counted + '; ' if counted else ''}{verb} "
              f"{reclaimed_bytes(report.bytes_reclaimed, getattr(report, 'unknown_size', 0))} in "
              f"{report.duration_ms / 1000:.1f} s")
    if getattr(report, "quarantine", None) is not None:
        _render_quarantined(report)
    if report.dry_run and getattr(report, "files_checked", None) is not None:
        out.print("  checked: the table's metadata and every file" if report.files_checked else
                  "  checked: the table's metadata, not each file (--check-files looks)")
    if report.state == "FAILED":
        err.print(f"[red]error:[/red] {report.reason}")
        err.print(f"Fix the cause, then run: lakesweep resume {report.plan_id}")
    for c in report.commits:
        done = "found already committed" if c["already"] else ("would commit" if report.dry_run else "committed")
        tries = f", after {c['attempts']} attempts" if c.get("attempts", 1) > 1 else ""
        out.print(f"  {done}: {c.get('label', 'snapshot')} {c['version']} (phase {c['phase']}{tries})")
    if getattr(report, "nothing_safe", False):
        err.print("[red]error:[/red] nothing was done: the live table has made every action of the plan unsafe. "
                  f"First: {escape(report.held_reason)}")
        err.print(f"Run 'lakesweep journal files --plan {report.plan_id}' for each action and why")
    elif getattr(report, "held_reason", None) and not report.dry_run:
        err.print(f"  left alone, as the live table still needs them: see 'lakesweep journal files --plan "
                  f"{report.plan_id}'. First: {escape(report.held_reason)}")
    v = report.verify
    if v is not None and v["whole"] and report.commits:
        out.print(f"  verified: the {v['only']} file(s) it marked or deleted are in place wherever the table "
                  "still needs them")
    elif v is not None and v["whole"]:
        done = "put aside" if getattr(report, "quarantine", None) else "deleted"
        out.print(f"  verified: none of the {v['only']} location(s) it {done} is needed by the table")
    elif v is not None:
        err.print(f"[red]error:[/red] the table is not whole after the apply: {len(v['problems'])} problem(s)")
        for p in v["problems"]:
            needed = f" (needed by {p['needed_by']})" if p["needed_by"] else ""
            err.print(f"  {p['kind']}: {escape(p['path'])}{escape(needed)}: {escape(p['detail'])}")
        err.print("Run 'lakesweep verify TABLE' for the whole table, and 'lakesweep journal files' for what "
                  "this apply deleted")


def _render_quarantined(report) -> None:
    """Where an apply --quarantine put the files, for how long, and how they come back."""
    from lakesweep.cli.humanize import duration

    q = report.quarantine
    n = report.counts.get("QUARANTINED", 0)
    verb = "would put" if report.dry_run else "put"
    print_wrapped(f"  quarantine: {verb} {n} file(s), {human_bytes(report.bytes_quarantined)}, aside in "
                  f"{q['directory']}, kept {duration(q['retention_ms'])}; not reclaimed until purged "
                  f"('lakesweep plan purge'). 'lakesweep restore {report.plan_id}' brings them back.")


def print_wrapped(text: str, indent: str = "    ") -> None:
    """A long line of plain text (no markup), wrapped to the terminal at word boundaries: paths and
    commands are never broken."""
    out.print(escape(textwrap.fill(text, width=max(40, out.width), subsequent_indent=indent,
                                   break_on_hyphens=False, break_long_words=False)))


def render_quarantine_cost(cost: dict) -> None:
    """``show``: what ``apply --quarantine`` of the plan costs on a store that renames (local, HDFS), or on S3
    in each of its modes."""
    if cost["store"] == "s3":
        _render_s3_quarantine_cost(cost)
        return
    store = {"local": "local files", "hdfs": "HDFS"}[cost["store"]]
    print_wrapped(f"With apply --quarantine ({store}): {cost['renames']} rename(s), one per file, no byte "
                  f"copied; the {cost['files']} file(s) ({human_bytes(cost['bytes'])}) stay in {cost['directory']} "
                  "until purged.", indent="  ")


_S3_KINDS = {"LIST_VERSIONS": "ListObjectVersions", "COPY": "CopyObject"}


def _render_s3_quarantine_cost(cost: dict) -> None:
    def sent(by_kind: dict) -> str:
        kinds = ", ".join(f"{n} {_S3_KINDS.get(kind, kind)}" for kind, n in by_kind.items())
        return f"{kinds} ({sum(by_kind.values())} in all)"

    out.print(f"With apply --quarantine on S3, for {cost['files']} file(s) ({human_bytes(cost['bytes'])}): on a "
              f"versioned bucket {sent(cost['versioned'])}, nothing copied; on a bucket without versioning "
              f"{sent(cost['copy'])}, and the store copies {human_bytes(cost['bytes_copied'])}. 'lakesweep doctor "
              "--table' says which this bucket is.")


def rows_table(rows: list[dict], columns: list[str], title: str):
    """Journal rows as a table whose headers are the columns' names in words (``run_id``: run), times in
    UTC, absent values as '-'; one block a row when the table is wider than the terminal."""
    headers = [c.removesuffix("_ms").removesuffix("_id").replace("_", " ") for c in columns]
    cells = [[fmt_time(r[c]) if c.endswith("_ms") and r[c] is not None else ("-" if r[c] is None else str(r[c]))
              for c in columns] for r in rows]
    return fitted(title, [(h, "left") for h in headers], cells, out.width)


def render_journal_plans(rows: list[dict]) -> None:
    """``journal plans`` for people: the plans of each table under its location, each by a unique prefix of
    its id, with sizes and times humanized (``--output json`` has every field and the full ids)."""
    from lakesweep.cli.humanize import fitted, short_ids

    if not rows:
        out.print("No plans in the journal.")
        return
    ids = short_ids(r["plan_id"] for r in rows)
    columns = [("plan", "left"), ("kind", "left"), ("state", "left"), ("actions", "right"), ("reclaimed", "right"),
               ("finished", "left")]
    tables: dict[str, list[dict]] = {}
    for r in rows:
        tables.setdefault(r["table"] or "(table not recorded)", []).append(r)
    for table, plans in tables.items():
        cells = [[ids[r["plan_id"]], r["kind"] or "-", r["state"], "-" if r["n_actions"] is None else str(r["n_actions"]),
                  bytes_cell(r["bytes_reclaimed"], r.get("unknown_size_files", 0)), fmt_time(r["finished_ms"])]
                 for r in plans]
        out.print(f"[bold]{escape(table)}[/bold]")
        out.print(fitted(None, columns, cells, out.width))
        for r in plans:
            if r.get("quarantined") or r.get("restored"):
                print_wrapped(f"  plan {ids[r['plan_id']]}: {r['quarantined']} file(s) in quarantine "
                              f"({human_bytes(r['quarantined_bytes'])}), {r['restored']} restored "
                              f"({human_bytes(r['restored_bytes'])})" + (
                                  f"; 'lakesweep restore {r['plan_id']}' brings them back" if r["quarantined"] else ""))
            if r.get("whole") is False:
                out.print(f"  [red]plan {ids[r['plan_id']]}[/red]: the check after its apply found the table "
                          "damaged; run 'lakesweep verify' on it")
    out.print(f"{len(rows)} plan(s); 'lakesweep journal files --plan ID' lists a plan's files")


def render_journal_files(rows: list[dict], *, more: int = 0) -> None:
    """``journal files`` for people: one record a line, its path whole (never cut to fit), then how many
    more records the filters select beyond the limit."""
    from lakesweep.cli.humanize import short_ids

    ids = short_ids(r["plan_id"] for r in rows)
    kind_width = max((len(r["kind"]) for r in rows), default=0)
    for r in rows:
        why = [f"plan {ids[r['plan_id']]}"] + ([f"snapshot {r['snapshot_id']}"] if r["snapshot_id"] is not None
                                                 else []) + ([f"attempt {r['attempt']}"] if r["attempt"] > 1 else [])
        out.print(f"{fmt_time(r['time_ms'])}  {r['outcome']:<14} {r['kind']:<{kind_width}}  {escape(r['path'])}  "
                  f"({', '.join(why)})")
        if r["error"]:
            out.print(f"    {escape(one_line(r['error']))}")
    shown = f"{len(rows)} file record(s)"
    out.print(f"{shown}; … {more} more: use --limit N or --all" if more else shown)


def one_line(text) -> str:
    """``text`` on one line (DuckDB and Arrow messages span several)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def render_query(columns, rows) -> None:
    t = Table()
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*["-" if v is None else str(v) for v in r])
    out.print(t)


def render_doctor(checks) -> None:
    failed = [c for c in checks if not c.ok]
    t = Table(title="lakesweep doctor", show_lines=True)
    t.add_column("check", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("found", overflow="fold")
    for c in checks:
        status = "[green]ok[/green]" if c.ok else "[red]FAILED[/red]"
        t.add_row(c.name, status, escape("\n".join(f"{label}: {value}" for label, value in c.found)))
    out.print(t)
    for c in failed:
        out.print(f"[red]{c.name}:[/red] {escape(c.problem or '')}")
        if c.fix:
            out.print(f"  fix: {escape(c.fix)}")
    out.print(f"{len(failed)} of {len(checks)} checks failed." if failed else f"All {len(checks)} checks passed.")


def _under(location: str, path: str) -> str:
    """``path`` relative to the table ``location`` when it lies below it."""
    prefix = location.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def render_verify(report, *, files: bool = False) -> None:
    """``lakesweep verify``'s report: whether the table is whole, each problem with what needs the file,
    the notes, and what nothing references (counted; listed with ``files``)."""
    h = report.holders
    if set(h) == {"snapshots"}:  # an Iceberg table: its snapshots hold every branch's and tag's files
        walked = f"{h['snapshots']} snapshot(s) and the metadata log"
    else:
        walked = (f"{h['snapshots']} snapshot(s), {h['tags']} tag(s), {h['changelogs']} changelog(s) "
                  f"of {1 + h['branches']} branch(es)")
    scope = f", limited to {report.only} location(s)" if report.only is not None else ""
    if report.whole:
        out.print(f"[green]Whole[/green]: {escape(report.location)}: {report.files} referenced file(s) of "
                  f"{walked} exist with their recorded sizes{scope}")
    else:
        out.print(f"[red]Not whole[/red]: {escape(report.location)}: {len(report.problems)} problem(s) in "
                  f"{report.files} referenced file(s) of {walked}{scope}")
        t = Table()
        for col in ("problem", "file", "needed by", "detail"):
            t.add_column(col, overflow="fold")
        for p in report.problems:
            needed = "-" if p.needed_by is None else p.needed_by + (
                f" (+{p.holders - 1} more)" if p.holders > 1 else "")
            t.add_row(p.kind, escape(_under(report.location, p.path)), escape(needed), escape(p.detail))
        out.print(t)
    for n in report.notes:
        out.print(f"  note: {escape(n)}")
    if report.quarantined:
        plans = {}
        for f in report.quarantined:
            plans[f["plan_id"]] = plans.get(f["plan_id"], 0) + 1
        for (plan_id, n), command in zip(plans.items(), report.restore_commands):
            out.print(f"  In quarantine: {n} of the missing file(s), put aside by plan {escape(plan_id)}; bring them "
                      f"back with: {escape(command)}")
    unref = report.unreferenced
    if unref is None:
        return
    if not unref:
        out.print("  Unreferenced: none")
        return
    out.print(f"  Unreferenced: {len(unref)} file(s), {human_bytes(sum(f.size or 0 for f in unref))}, that no snapshot, "
              "tag or changelog of any branch names; 'lakesweep plan orphans' plans those older than its "
              "--older-than" + ("" if files else " (--files lists them)"))
    if files:
        t = Table()
        for col in ("file", "bytes", "modified (UTC)"):
            t.add_column(col, overflow="fold")
        for f in unref:
            t.add_row(escape(_under(report.location, f.path)), str(f.size), fmt_time(f.mtime_ms))
        out.print(t)
