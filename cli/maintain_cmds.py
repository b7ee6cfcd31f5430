"""``lakesweep maintain``: plan and apply the maintenance of every table in scope, and ``lakesweep journal
maintenance``: what maintain runs did."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import List, Optional

import typer

from lakesweep.cli import render
from lakesweep.cli.app import (ConfOpt, JournalOpt, MasterOpt, OutputOpt, SparkUiOpt, app, handle_errors, journal_path,
                               key_values, spark_ui)
from lakesweep.cli.humanize import elapsed
from lakesweep.cli.journal_cmds import _open_read, journal_app
from lakesweep.cli.output import OutputFormat
from lakesweep.engine.timeutil import iso_time_ms


@app.command("maintain", short_help="Plan and apply what every table in scope needs.")
@handle_errors
def maintain_cmd(
    catalog: Optional[str] = typer.Option(None, "--catalog", help="Maintain the Iceberg tables of this catalog "
                                          "(configured as pyiceberg configures catalogs)."),
    warehouse: Optional[str] = typer.Option(None, "--warehouse", help="Maintain the Paimon tables of this warehouse "
                                            "directory (<warehouse>/<database>.db/<table>)."),
    namespace_filter: Optional[str] = typer.Option(None, "--namespace-filter", help="Comma-separated wildcards "
                                                   "(* and ?) for namespaces (Paimon: databases); blank: all."),
    table_filter: Optional[str] = typer.Option(None, "--table-filter", help="Comma-separated wildcards for table "
                                               "names; blank: all."),
    operations: str = typer.Option("all", "--operations", help="all, or a comma list of compact, expire, orphans, "
                                   "rewrite-manifests, partitions (or expire_snapshots, remove_orphans, "
                                   "rewrite_manifests). They always run in the canonical order."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Write every plan and apply nothing."),
    every: Optional[str] = typer.Option(None, "--every", help="Run again at this interval ('1 h', '30 min') until "
                                        "stopped (SIGTERM or Ctrl-C end it after the operation at hand)."),
    plans_dir: Optional[Path] = typer.Option(None, "--plans-dir", help="Where plans are written (default: "
                                             "'lakesweep-plans' beside the journal)."),
    max_snapshots_to_keep: Optional[int] = typer.Option(None, "--retain-last", "--max-snapshots-to-keep",
                                                        help="Iceberg: ancestors of each branch kept (a table's "
                                                        "history.expire.min-snapshots-to-keep wins; default 1, "
                                                        "as plan expire)."),
    snapshot_retention_hours: Optional[int] = typer.Option(None, "--snapshot-retention-hours", help="Iceberg: expire "
                                                           "snapshots older than this many hours "
                                                           "(history.expire.max-snapshot-age-ms wins; default 120, "
                                                           "Iceberg's 5 days, as plan expire)."),
    orphan_older_than_hours: Optional[int] = typer.Option(None, "--orphan-older-than-hours", help="Orphans must be "
                                                          "at least this many hours old (default as plan orphans: "
                                                          "Iceberg 72, Paimon 24)."),
    min_manifests_to_rewrite: int = typer.Option(5, "--min-manifests-to-rewrite", help="Iceberg: rewrite manifests "
                                                 "from this many data manifests on."),
    max_commit_retries: int = typer.Option(5, "--max-commit-retries", help="Iceberg: commit retries."),
    target_file_size_mb: int = typer.Option(256, "--target-file-size-mb", help="Iceberg compaction: files below "
                                            "this are merged, into files up to this (a table's "
                                            "write.target-file-size-bytes wins)."),
    min_input_files: int = typer.Option(5, "--min-input-files", help="Iceberg compaction: the fewest small files "
                                        "a partition needs to be compacted."),
    apply_deletes: bool = typer.Option(True, "--apply-deletes/--no-apply-deletes", help="Iceberg compaction: apply "
                                       "position and equality deletes while merging (otherwise tables with delete "
                                       "files are skipped)."),
    quarantine: Optional[bool] = typer.Option(None, "--quarantine/--no-quarantine", help="Move the files each "
                                              "apply deletes into <table>/_lakesweep_quarantine/<plan id>/ instead "
                                              "('lakesweep restore' brings them back). Default: each table's "
                                              "lakesweep.quarantine option or property (absent: false)."),
    quarantine_retention: Optional[str] = typer.Option(None, "--quarantine-retention", help="How long quarantined "
                                                       "files are kept before they may be purged ('7 d'). Default: "
                                                       "each table's lakesweep.quarantine.retention, else 7 d."),
    log_file: Optional[Path] = typer.Option(None, "--log-file", help="Also append one JSON object per line to this "
                                            "file, flushed as it happens, for schedulers (systemd, Kubernetes): "
                                            "run_started, cycle_started, one 'operation' per table and operation "
                                            "(outcome, files, bytes, duration_ms), run_finished; 'time' in UTC."),
    journal: Optional[Path] = JournalOpt,
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    spark_ui_on: bool = SparkUiOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Maintain every table in scope: detect what each needs from its metadata, then plan, write and apply
    each operation in the canonical order (Iceberg: compact, expire, orphans, rewrite-manifests; Paimon:
    expire, orphans, partitions), journaling every apply and each operation's result. A failure is
    recorded and the run goes on; the exit code is 1 when any operation failed (partial success).

    Thresholds take SeaweedFS's maintenance worker's names; retention defaults are each engine's own, the
    same as 'lakesweep plan' uses, and a table's own properties win.

    A table whose option (Paimon) or property (Iceberg) lakesweep.quarantine is true has its files
    quarantined instead of deleted; --quarantine does so for every table, --no-quarantine for none."""
    from lakesweep.applier.quarantine import QuarantineChoice
    from lakesweep.maintain import Maintenance, Thresholds, check_plans_dir, parse_operations
    from lakesweep.engine.errors import PlanRejected
    from lakesweep.engine.timeutil import parse_duration_ms
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    if (catalog is None) == (warehouse is None):
        raise PlanRejected("give the tables to maintain: --catalog NAME (Iceberg) or --warehouse PATH (Paimon)")
    ops = parse_operations(operations)
    every_ms = parse_duration_ms(every) if every is not None else None
    choice = QuarantineChoice(quarantine, None if quarantine_retention is None
                              else parse_duration_ms(quarantine_retention), many_tables=True)
    if every_ms is not None and every_ms < 1000:
        raise PlanRejected(f"--every {every} is less than a second")
    for name, value in (("--retain-last", max_snapshots_to_keep), ("--min-manifests-to-rewrite",
                        min_manifests_to_rewrite), ("--target-file-size-mb", target_file_size_mb)):
        if value is not None and value < 1:
            raise PlanRejected(f"{name} must be at least 1, got {value}")
    for name, value in (("--snapshot-retention-hours", snapshot_retention_hours),
                        ("--orphan-older-than-hours", orphan_older_than_hours), ("--max-commit-retries", max_commit_retries)):
        if value is not None and value < 0:
            raise PlanRejected(f"{name} must be at least 0, got {value}")
    if min_input_files < 2:  # a bin of one file rewrites it as it is
        raise PlanRejected(f"--min-input-files must be at least 2, got {min_input_files}")
    path = journal_path(journal)
    plans = str(plans_dir) if plans_dir is not None else os.path.join(os.path.dirname(os.path.abspath(path)),
                                                                       "lakesweep-plans")
    check_plans_dir(plans)
    if warehouse is not None:
        from lakesweep.engine.paimon.table import check_warehouse

        check_warehouse(warehouse)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    text = fmt == OutputFormat.text
    spark_conf, on_ui = spark_ui(spark_ui_on, key_values(conf, "--conf"))
    with JsonLinesLog(log_file) as log, DuckDBRecorder(path) as recorder:
        run = Maintenance(recorder, plans, catalog=catalog, warehouse=warehouse, namespace_filter=namespace_filter,
                          table_filter=table_filter, operations=ops, dry_run=dry_run, master=master,
                          conf=spark_conf, on_spark_ui=on_ui, quarantine=choice,
                          thresholds=Thresholds(max_snapshots_to_keep, snapshot_retention_hours,
                                                orphan_older_than_hours, min_manifests_to_rewrite, max_commit_retries,
                                                target_file_size_mb, min_input_files, apply_deletes),
                          say=(lambda line: render.err.print(line, highlight=False, markup=False)) if text else
                          (lambda line: None), log=log.write)
        report = run.run(every_ms=every_ms, stop=stop)
    if text:
        render_summary(report)
    else:
        typer.echo(json.dumps(report.to_json(), sort_keys=True))
    if report.failed:
        raise typer.Exit(1)


class JsonLinesLog:
    """``--log-file``: each event as one JSON object on its own line, appended and flushed at once; its
    ``time_ms`` becomes ``time``, UTC ISO-8601 with milliseconds. Without a file, events are dropped."""

    def __init__(self, path: Optional[Path]):
        self.path = path
        self._file = None
        if path is not None:
            try:
                self._file = open(path, "a", encoding="utf-8")
            except OSError as e:
                from lakesweep.engine.errors import StorageError

                raise StorageError(str(path), f"cannot open the --log-file: {e.strerror or e}") from e

    def write(self, event: dict) -> None:
        if self._file is None:
            return
        fields = dict(event)
        line = {"time": iso_time_ms(fields.pop("time_ms")), **fields}
        try:
            self._file.write(json.dumps(line, sort_keys=False, default=str) + "\n")
            self._file.flush()
        except OSError as e:
            from lakesweep.engine.errors import StorageError

            raise StorageError(str(self.path), f"cannot write the --log-file: {e.strerror or e}") from e

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._file is not None:
            self._file.close()


def render_summary(report) -> None:
    """The text summary of a maintain run: one row per table and operation with its files, bytes and
    duration, then the totals."""
    rows = [{"table": r.table, "operation": r.operation, "outcome": r.outcome, "files": str(r.files),
             "bytes": render.human_bytes(r.bytes), "duration": elapsed(r.duration_ms), "message": r.message}
            for r in report.results]
    render.out.print(render.rows_table(rows, ["table", "operation", "outcome", "files", "bytes", "duration", "message"],
                                       f"maintain run {report.run_id}: {report.cycles} cycle(s)"))
    failed = report.failed
    files, size = sum(r.files for r in report.results), sum(r.bytes for r in report.results)
    took = sum(r.duration_ms for r in report.results)
    render.out.print(f"{len(report.results) - failed} of {len(report.results)} operation(s) done"
                     + (f"; {failed} failed (partial success)" if failed else "")
                     + f"; {files} file(s), {render.human_bytes(size)}, {elapsed(took)} in operations")


@journal_app.command("maintenance", short_help="What 'lakesweep maintain' did.")
@handle_errors
def journal_maintenance(run: Optional[str] = typer.Option(None, "--run", help="Only this maintain run."),
                        journal: Optional[Path] = JournalOpt, fmt: OutputFormat = OutputOpt):
    """What 'lakesweep maintain' did: one row per operation on one table, in order."""
    from lakesweep.journal.audit import list_maintenance

    with _open_read(journal) as recorder:
        rows = list_maintenance(recorder, run_id=run)
    if fmt == OutputFormat.text:
        render.out.print(render.rows_table(rows, ["run_id", "cycle", "table", "operation", "outcome", "message"],
                                           "maintenance"))
    else:
        typer.echo(json.dumps(rows, sort_keys=True))
