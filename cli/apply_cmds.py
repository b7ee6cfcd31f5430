"""``lakesweep apply`` and ``lakesweep resume``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from lakesweep.cli.app import (ConfOpt, JournalOpt, MasterOpt, OutputOpt, SparkUiOpt, app, existing_journal,
                               handle_errors, journal_path, key_values, refuse_inside_recorded_tables,
                               refuse_inside_table, spark_ui)
from lakesweep.cli.output import OutputFormat, output_for
from lakesweep.cli.progress import RichProgress


NoVerifyOpt = typer.Option(False, "--no-verify", help="Do not check the deleted files against the live table "
                           "after the last phase.")
StrictOpt = typer.Option(False, "--strict", help="Refuse the plan if anything was committed to the table since "
                         "planning. By default apply goes ahead on a table that is being written, doing only what "
                         "is still safe on the live table.")


MaxRpsOpt = typer.Option(None, "--max-requests-per-second", min=0.001, help="On an object store: at most this "
                         "many requests per second for the whole apply, divided evenly among the Spark tasks in "
                         "flight (at most 2). A 503 SlowDown halves a task's pace; each success adds one request "
                         "per second back.")
MaxConcurrencyOpt = typer.Option(None, "--max-concurrency", min=1, help="On an object store: at most this many "
                                 "requests in flight for the whole apply (caps the Spark tasks and their threads).")
QuarantineOpt = typer.Option(None, "--quarantine/--no-quarantine", help="Move each file the plan deletes into "
                             "<table>/_lakesweep_quarantine/<plan id>/ instead of deleting it, so that 'lakesweep "
                             "restore' can bring it back; 'lakesweep plan purge' deletes it after --retention. "
                             "Default: the table's option (Paimon) or property (Iceberg) lakesweep.quarantine "
                             "(true or false; absent: false).")
RetentionOpt = typer.Option(None, "--retention", help="With --quarantine: how long quarantined files are kept "
                            "before 'plan purge' may delete them ('7 d', '36 h'). Default: the table's "
                            "lakesweep.quarantine.retention, else 7 d.")
QuarantineRootOpt = typer.Option(None, "--quarantine-root", help="With --quarantine: put the table root's files "
                                 "under PATH/<plan id>/ instead, on the same file system as the table and outside "
                                 "it (files under an external root go to that root's _lakesweep_quarantine).")
DeleteBatchOpt = typer.Option(250, "--delete-batch-size", min=1, max=1000, help="On S3: keys per DeleteObjects "
                              "request (S3 allows 1,000).")


def _conf(values: List[str]) -> dict:
    return key_values(values, "--conf")


def _quarantine_choice(quarantine, retention, root):
    from lakesweep.applier.quarantine import QuarantineChoice
    from lakesweep.engine.fileio import normalize_location
    from lakesweep.engine.timeutil import parse_duration_ms

    return QuarantineChoice(quarantine, None if retention is None else parse_duration_ms(retention),
                            None if root is None else normalize_location(root))


def _budget(max_rps, max_concurrency, delete_batch):
    from lakesweep.engine.s3_bulk import RequestBudget

    return RequestBudget(max_requests_per_second=max_rps, max_concurrency=max_concurrency, delete_batch=delete_batch)


@app.command(short_help="Execute a reviewed plan on Spark, journaling every file.")
@handle_errors
def apply(
    plan: Path = typer.Argument(..., help="A plan written by 'lakesweep plan'."),
    journal: Optional[Path] = JournalOpt,
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate the plan against the live table's metadata "
                                 "and show what would be done, without starting Spark; delete nothing, journal "
                                 "nothing."),
    check_files: bool = typer.Option(False, "--check-files", help="With --dry-run: also look for every file the "
                                     "plan deletes (on Spark), counting those already gone."),
    again: bool = typer.Option(False, "--again", help="Apply a plan that an apply in the journal already "
                               "completed once more (it deletes nothing already deleted)."),
    no_verify: bool = NoVerifyOpt,
    strict: bool = StrictOpt,
    spark_ui_on: bool = SparkUiOpt,
    max_rps: Optional[float] = MaxRpsOpt,
    max_concurrency: Optional[int] = MaxConcurrencyOpt,
    delete_batch: int = DeleteBatchOpt,
    quarantine: Optional[bool] = QuarantineOpt,
    retention: Optional[str] = RetentionOpt,
    quarantine_root: Optional[str] = QuarantineRootOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Execute a reviewed plan on Spark, phase by phase, journaling every deletion.

    The plan is the upper bound of what happens. On a table that is being written, apply goes ahead with
    what is still safe on the live table: Iceberg commits land on top of concurrent commits, and what the
    live table now needs (a snapshot a new tag protects, a compaction bin a new delete touches) is skipped
    and journaled with why. With --strict, any commit since planning refuses the plan instead.

    The plan is refused (exit 1) if it was modified, is for another table, points outside the table, or
    a file it deletes is still needed in ways the plan cannot explain; exit 1 too when the live table left
    nothing of the plan safe to do. Applying twice changes nothing the second time. After a crash or a
    failed phase, 'lakesweep resume' finishes the job.

    When stderr is a terminal (and the output is text), each phase shows a bar: files, bytes, files/s
    and bytes/s.

    After the last phase the files the plan deleted are checked against the live table, as 'lakesweep
    verify' does (skip it with --no-verify): if a snapshot, tag, branch or changelog still needs one, or
    the hints disagree, the problems are shown and the exit code is 1.

    A plan that an apply in the journal already completed is not applied again: apply says when and by
    which apply, and exits 0; --again applies it once more.

    A dry run reads only metadata (no Spark): it counts every delete the live table allows as one it would
    do; --check-files also looks for each file, as an apply would find it.

    On S3, the files of a bulk phase go in DeleteObjects requests (--delete-batch-size keys each), after one
    LIST per directory of the batch: a file not listed is journaled as already absent. --max-requests-per-second
    and --max-concurrency set the apply's request budget; every 503 SlowDown is journaled. 'lakesweep show'
    tells how many requests a plan's apply sends.

    With --quarantine (or a table whose lakesweep.quarantine is true, unless --no-quarantine), nothing is
    deleted for good: each file the plan deletes is moved into <table>/_lakesweep_quarantine/<plan id>/ under
    its own relative path (local files and HDFS: one rename, no byte copied) and journaled QUARANTINED with
    where it went. 'lakesweep restore PLAN_ID' brings the files back; 'lakesweep plan purge' deletes them
    once --retention has passed. Empty directories, hints and commits are done as without it: restoring
    files does not undo a commit. A store that cannot move files is refused before anything is done."""
    from lakesweep.applier.apply import apply_plan, dry_run_plan, spark_getting_ready
    from lakesweep.engine.errors import JournalError
    from lakesweep.engine.plan_io import read_plan, read_plan_header
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    output = output_for(fmt)
    if check_files and not dry_run:
        raise typer.BadParameter("--check-files goes with --dry-run (an apply looks at every file anyway)",
                                 param_hint="--check-files")
    spark_conf, on_ui = spark_ui(spark_ui_on, _conf(conf))
    choice = _quarantine_choice(quarantine, retention, quarantine_root)
    if dry_run:
        report = dry_run_plan(read_plan(str(plan), as_columns=True), master=master, conf=spark_conf, strict=strict,
                              check_files=check_files, on_spark_ui=on_ui, quarantine=choice)
    else:
        header = read_plan_header(str(plan))
        path = journal_path(journal)
        refuse_inside_table(path, header.table_location, "--journal", JournalError)
        budget = _budget(max_rps, max_concurrency, delete_batch)
        with DuckDBRecorder(path) as recorder, RichProgress(output.draws_progress) as progress, \
                spark_getting_ready(header, recorder, master=master, conf=spark_conf, strict=strict,
                                    skip_if_applied=not again, on_spark_ui=on_ui, budget=budget) as executor:
            # Spark boots (when the header's checks pass) while the whole plan is read and checked
            p = read_plan(str(plan), as_columns=True)
            refuse_inside_table(path, p.table_location, "--journal", JournalError)  # the file as read whole
            report = apply_plan(p, recorder, master=master, conf=spark_conf, progress=progress,
                                verify=not no_verify, strict=strict, skip_if_applied=not again,
                                on_spark_ui=on_ui, budget=budget, quarantine=choice, executor=executor)
    output.apply_report(report)
    if report.state == "FAILED" or not report.whole or report.nothing_safe:
        raise typer.Exit(1)


@app.command(short_help="Finish unfinished applies recorded in the journal.")
@handle_errors
def resume(
    plan_id: Optional[str] = typer.Argument(None, help="Only this plan's unfinished apply (default: all)."),
    journal: Optional[Path] = JournalOpt,
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    no_verify: bool = NoVerifyOpt,
    strict: bool = StrictOpt,
    spark_ui_on: bool = SparkUiOpt,
    max_rps: Optional[float] = MaxRpsOpt,
    max_concurrency: Optional[int] = MaxConcurrencyOpt,
    delete_batch: int = DeleteBatchOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Finish unfinished applies recorded in the journal (after a crash, kill or failed phase).

    The plan is rebuilt from the journal; the plan file is not needed. Files deleted before the crash
    but not yet journaled are recorded as already absent. Progress is shown as for 'lakesweep apply'.
    An apply --quarantine goes on quarantining: files it moved before the crash are journaled QUARANTINED.

    A plan whose apply never started (killed before it began) is started only when named by its id;
    without an id it is listed as not started, with that command."""
    from lakesweep.applier.apply import resume as resume_applies
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    output = output_for(fmt)
    path = existing_journal(journal)
    refuse_inside_recorded_tables(path, "--journal", path)
    spark_conf, on_ui = spark_ui(spark_ui_on, _conf(conf))
    with DuckDBRecorder(path) as recorder, RichProgress(output.draws_progress) as progress:
        reports = resume_applies(recorder, plan_id, master=master, conf=spark_conf, progress=progress,
                                 verify=not no_verify, strict=strict, on_spark_ui=on_ui,
                                 budget=_budget(max_rps, max_concurrency, delete_batch))
    output.resume_reports(reports)
    if any(r.state in ("FAILED", "REFUSED") or not r.whole or r.nothing_safe for r in reports):
        raise typer.Exit(1)
