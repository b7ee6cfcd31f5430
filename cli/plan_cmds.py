"""``lakesweep inspect``, ``lakesweep plan KIND ...`` and ``lakesweep show``: reading a table, making a plan,
reviewing it. Nothing here deletes anything.

A ``plan`` command hands its kind's own options to ``make_plan``, which does what every kind shares (the
table, ``--out``, ``--now``, ``--option``, ``--branch``, progress, writing and showing the plan) through the
kind's entry (``planner.kinds.plan_kind``). Most commands are built from the options their entry declares
(``PlanKind.command``); only those that span formats or need the CLI (a Spark listing) are written here.
"""

from __future__ import annotations

import contextlib
import inspect as pyinspect
import os
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import typer
from typer.core import TyperGroup

from lakesweep.cli import render
from lakesweep.cli.app import (ConfOpt, JournalOpt, MasterOpt, OutputOpt, app, check_output_file, existing_journal,
                               handle_errors, key_values, name_metavars, refuse_inside_table)
from lakesweep.cli.output import OutputFormat, output_for
from lakesweep.cli.progress import progress_enabled


class PlanGroup(TyperGroup):
    """``lakesweep plan``: the commands written below, then one for each registry entry that declares its
    command (``PlanKind.command``). Those are built when ``plan`` is used: other commands do not import the
    planners."""

    def _add_declared(self) -> None:
        if getattr(self, "_declared_added", False):
            return
        self._declared_added = True
        from lakesweep.planner.kinds import all_kinds

        declared = typer.Typer(rich_markup_mode=None)
        for entry in all_kinds():
            if entry.command is not None and entry.name not in self.commands:
                declared.command(entry.name, short_help=entry.command.short_help,
                                 help=entry.command.help)(declared_command(entry))
        for name, command in typer.main.get_group(declared).commands.items():
            name_metavars(command)
            self.add_command(command, name)

    def list_commands(self, ctx):
        self._add_declared()
        return super().list_commands(ctx)

    def get_command(self, ctx, cmd_name):
        self._add_declared()
        return super().get_command(ctx, cmd_name)


plan_app = typer.Typer(help="Make a cleanup plan (nothing is deleted; review it with 'lakesweep show').",
                       short_help="Make a cleanup plan (nothing is deleted).",
                       no_args_is_help=True, cls=PlanGroup)
app.add_typer(plan_app, name="plan")

# Options every plan command has.
TableArg = typer.Argument(..., help="Table location: a local path, s3://bucket/path or "
                                   "hdfs://namenode:port/path.")
PlanOutOpt = typer.Option(..., "--out", help="Where to write the plan (a Parquet file).")
NowOpt = typer.Option(None, help="Plan as of this time: epoch ms or ISO-8601 (default: the current time).")
TableOptionOpt = typer.Option([], "--option", help="Override a table option, key=value (repeatable).")


def make_plan(kind: str, *, table: str, out: Path, now: Optional[str], option: List[str], branch: str,
              fmt: OutputFormat, planner=None, **flags) -> None:
    """Make a plan of ``kind`` for ``table`` (``branch``) as of ``now``, write it to ``out`` and show it.

    ``option`` holds the ``--option key=value`` overrides and ``flags`` the kind's own options as given
    (None: not given); both go to the kind's option resolver. Every input is checked before anything is
    written; while planning, a terminal shows the metadata files read (text output only).
    ``planner(table, *, now_ms, options)``: makes the plan instead of the kind's entry (``--spark``)."""
    from lakesweep.cli.progress import MetadataReadProgress, progress_enabled
    from lakesweep.engine.errors import PlanRejected
    from lakesweep.engine.paimon.table import open_table
    from lakesweep.engine.plan_io import write_plan
    from lakesweep.engine.timeutil import parse_time_ms
    from lakesweep.planner.kinds import plan_kind

    entry = plan_kind(kind, "paimon")
    output = output_for(fmt)
    now_ms = parse_time_ms(now) if now is not None else int(time.time() * 1000)
    check_output_file(out, "--out", PlanRejected)
    refuse_inside_table(out, table, "--out", PlanRejected)
    reads = MetadataReadProgress() if progress_enabled(output.draws_progress) else None
    t = open_table(table, branch=branch, on_read=reads)
    options = entry.resolve_options(t.options, overrides=key_values(option, "--option"), **flags)
    with reads if reads is not None else contextlib.nullcontext():
        plan = (entry.read_and_plan if planner is None else planner)(t, now_ms=now_ms, options=options)
    write_plan(plan, str(out))
    output.plan_written(plan, str(out))


CatalogOpt = typer.Option(None, "--catalog", help="Plan for an Iceberg table: the name of its catalog, configured "
                          "as pyiceberg configures catalogs (.pyiceberg.yaml, or PYICEBERG_CATALOG__<NAME>__URI and "
                          "friends). TABLE is then namespace.table.")
MaxCommitRetriesOpt = typer.Option(None, "--max-commit-retries", help="Iceberg: how often apply retries a commit the "
                                   "catalog refused, after 50 ms, doubling, at most 5 s, re-checking the plan each "
                                   "time (default 5).")


def make_iceberg_plan(kind: str, *, catalog: str, table: str, out: Path, now: Optional[str], fmt: OutputFormat,
                      paimon_only: dict, planner=None, **flags) -> None:
    """Make a plan of ``kind`` for the Iceberg table ``table`` (namespace.table) of ``catalog``, write it to
    ``out`` and show it. ``paimon_only``: the Paimon options given on the command line, refused here.
    ``planner(table, *, now_ms, options)``: makes the plan instead of the kind's entry (``--spark``)."""
    from lakesweep.engine.errors import PlanRejected
    from lakesweep.engine.iceberg.table import IcebergTable
    from lakesweep.engine.plan_io import write_plan
    from lakesweep.engine.timeutil import parse_time_ms
    from lakesweep.planner.kinds import plan_kind

    given = sorted(name for name, value in paimon_only.items() if value not in (None, False, [], "main"))
    if given:
        raise PlanRejected(f"{given[0]} is an option of Paimon tables; an Iceberg table (--catalog) does not take it")
    entry = plan_kind(kind, "iceberg")
    output = output_for(fmt)
    now_ms = parse_time_ms(now) if now is not None else int(time.time() * 1000)
    check_output_file(out, "--out", PlanRejected)
    from lakesweep.cli.progress import MetadataReadProgress

    reads = MetadataReadProgress() if progress_enabled(output.draws_progress) else None
    t = IcebergTable(catalog, table, on_read=reads)
    refuse_inside_table(out, t.location, "--out", PlanRejected)
    options = entry.resolve_options(t.options, **flags)
    with reads if reads is not None else contextlib.nullcontext():
        plan = (entry.read_and_plan if planner is None else planner)(t, now_ms=now_ms, options=options)
    write_plan(plan, str(out))
    output.plan_written(plan, str(out))


IcebergTableArg = typer.Argument(..., help="The Iceberg table, namespace.table.")
IcebergCatalogOpt = typer.Option(..., "--catalog", help="The table's Iceberg catalog, configured as pyiceberg "
                                 "configures catalogs (.pyiceberg.yaml, or PYICEBERG_CATALOG__<NAME>__URI and "
                                 "friends).")


def declared_command(entry):
    """The ``lakesweep plan`` command of ``entry`` (a ``PlanKind`` with a ``command``): the table, --out, its
    format's options and the kind's own flags, handed to ``make_plan`` or ``make_iceberg_plan``."""
    spec, iceberg = entry.command, entry.format == "iceberg"

    def param(name: str, default, annotation) -> pyinspect.Parameter:
        return pyinspect.Parameter(name, pyinspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)

    params = [param("table", IcebergTableArg if iceberg else TableArg, str), param("out", PlanOutOpt, Path)]
    if iceberg:
        params.append(param("catalog", IcebergCatalogOpt, str))
    for f in spec.flags:
        names = f.names or ("--" + f.name.replace("_", "-"),)
        if f.type is list:
            params.append(param(f.name, typer.Option([], *names, help=f.help), List[str]))
        else:
            annotation = bool if f.type is bool and f.default is not None else Optional[f.type]
            params.append(param(f.name, typer.Option(f.default, *names, help=f.help), annotation))
    if spec.branch is not None:
        params.append(param("branch", typer.Option("main", help=spec.branch), str))
    params.append(param("now", NowOpt, Optional[str]))
    if not iceberg:
        params.append(param("option", TableOptionOpt, List[str]))
    params.append(param("fmt", OutputOpt, OutputFormat))

    def command(**given) -> None:
        flags = {f.name: (given[f.name] or None) if f.type is list else given[f.name] for f in spec.flags}
        if spec.system_zone:
            from lakesweep.engine.timeutil import system_zone

            flags["system_zone"] = system_zone()
        common = {"table": given["table"], "out": given["out"], "now": given["now"], "fmt": given["fmt"]}
        if iceberg:
            make_iceberg_plan(entry.name, catalog=given["catalog"], paimon_only={}, **common, **flags)
        else:
            make_plan(entry.name, option=given["option"], branch=given.get("branch", "main"), **common, **flags)

    command.__signature__ = pyinspect.Signature(params)
    return handle_errors(command)


def _hours(value: Optional[int], flag: str) -> Optional[str]:
    """A SeaweedFS-style whole-hours option as a duration."""
    if value is None:
        return None
    if value < 0:
        from lakesweep.engine.errors import PlanRejected

        raise PlanRejected(f"{flag} must be at least 0, got {value}")
    return f"{value} h"


@app.command(short_help="Show what lakesweep sees in a table.")
@handle_errors
def inspect(
    table: str = typer.Argument(..., help="A Paimon table's location (a local path, s3://bucket/path or "
                                "hdfs://namenode:port/path), or with "
                                "--catalog an Iceberg table's namespace.table."),
    branch: str = typer.Option("main", help="Paimon: the branch to inspect."),
    catalog: Optional[str] = CatalogOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Show what lakesweep sees in a table.

    Paimon: schema, snapshots, hints, tags, consumers, branches, live files and the files only older
    snapshots hold (what expiry could reclaim).

    Iceberg (--catalog, TABLE is namespace.table): format version, schema, partition spec, properties,
    snapshots, branches and tags, and the files only older snapshots reach."""
    output = output_for(fmt)
    if catalog is not None:
        from lakesweep.engine.iceberg.inspect import inspect_iceberg
        from lakesweep.engine.iceberg.table import IcebergTable

        if branch != "main":
            from lakesweep.engine.errors import PlanRejected

            raise PlanRejected("--branch is an option of Paimon tables; an Iceberg table (--catalog) shows every "
                               "branch")
        output.inspect(inspect_iceberg(IcebergTable(catalog, table)))
        return
    from lakesweep.engine.paimon.inspect import inspect_table
    from lakesweep.engine.paimon.table import open_table

    output.inspect(inspect_table(open_table(table, branch=branch)))


@plan_app.command("expire", short_help="Snapshot expiry (Paimon, Iceberg).")
@handle_errors
def plan_expire_cmd(
    table: str = TableArg,
    out: Path = PlanOutOpt,
    retain_min: Optional[int] = typer.Option(None, help="Keep at least this many newest snapshots "
                                             "(table: snapshot.num-retained.min, default 10)."),
    retain_max: Optional[int] = typer.Option(None, help="Keep at most this many snapshots "
                                             "(snapshot.num-retained.max, default unlimited)."),
    time_retained: Optional[str] = typer.Option(None, help="Keep snapshots younger than this, e.g. '1 h', "
                                                "'30 min', '7 d', '0 s' (snapshot.time-retained, default 1 h)."),
    max_deletes: Optional[int] = typer.Option(None, help="Expire at most this many snapshot ids in one plan "
                                              "(snapshot.expire.limit, default 50)."),
    now: Optional[str] = NowOpt,
    option: List[str] = TableOptionOpt,
    time_rule: str = typer.Option("successor", help="'successor' (Paimon 2.0+: a snapshot expires when its "
                                  "successor is older than time-retained) or 'own' (Paimon < 2.0: when it is "
                                  "itself older)."),
    skip_unreadable: bool = typer.Option(False, "--skip-unreadable", help="Do as Paimon does with unreadable "
                                         "metadata: keep what depends on it and plan the rest (warnings list "
                                         "it). Without it, planning stops and names the file."),
    branch: str = typer.Option("main", help="Branch to expire."),
    catalog: Optional[str] = CatalogOpt,
    retain_last: Optional[int] = typer.Option(None, "--retain-last", "--max-snapshots-to-keep",
                                              help="Iceberg: keep at least this many ancestors of each branch head "
                                              "(history.expire.min-snapshots-to-keep, default 1)."),
    older_than: Optional[str] = typer.Option(None, "--older-than", help="Expire snapshots older than this: a "
                                             "duration back from --now ('5 d', '36 h') or a time. Iceberg: "
                                             "history.expire.max-snapshot-age-ms, default 5 d. Paimon: as its "
                                             "expire_snapshots procedure, time-retained = now - this."),
    retention_hours: Optional[int] = typer.Option(None, "--snapshot-retention-hours", help="Iceberg: "
                                                  "--older-than in whole hours (SeaweedFS's name)."),
    max_commit_retries: Optional[int] = MaxCommitRetriesOpt,
    spark: bool = typer.Option(False, "--spark", help="Plan on Spark, for tables too large for one machine: the "
                               "driver reads the snapshots, tags and manifest lists, executors decode the manifests "
                               "(a task per group) and a Spark job keeps the files only expired snapshots reach "
                               "(Paimon: the files their deltas delete, and their changelog files); only those come "
                               "back. The plan is the one planning without --spark makes, byte for byte (--master, "
                               "--conf)."),
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Plan a snapshot expiration exactly as Apache Paimon or Apache Iceberg would run it, and save the plan.

    Paimon: TABLE is the table's location. Iceberg (--catalog): TABLE is namespace.table; Iceberg's rule
    keeps the newest --retain-last ancestors of each branch, every snapshot a branch or tag references
    (honouring their max-ref-age-ms, min-snapshots-to-keep and max-snapshot-age-ms), and expires the rest
    older than --older-than; apply commits that, then deletes what only the expired snapshots reached.

    Nothing is deleted. Review the plan with 'lakesweep show PLAN'.

    When stderr is a terminal (and the output is text), a bar shows the manifest files read out of
    those found so far (the total grows as planning finds the snapshots in range), with every metadata
    file read, their bytes, files/s and bytes/s."""
    if catalog is not None:
        if older_than is not None and retention_hours is not None:
            from lakesweep.engine.errors import PlanRejected

            raise PlanRejected("--older-than and --snapshot-retention-hours say the same thing: give one of them")
        make_iceberg_plan("expire", catalog=catalog, table=table, out=out, now=now, fmt=fmt,
                          paimon_only={"--retain-min": retain_min, "--retain-max": retain_max,
                                       "--time-retained": time_retained, "--max-deletes": max_deletes,
                                       "--option": option, "--skip-unreadable": skip_unreadable,
                                       "--branch": branch, "--time-rule": None if time_rule == "successor" else time_rule},
                          retain_last=retain_last, older_than=older_than or _hours(retention_hours,
                                                                                   "--snapshot-retention-hours"),
                          max_commit_retries=max_commit_retries,
                          planner=_spark_expirer(master, key_values(conf, "--conf"), output_for(fmt))
                          if spark else None)
        return
    iceberg_only = {"--retain-last": retain_last, "--snapshot-retention-hours": retention_hours,
                    "--max-commit-retries": max_commit_retries}
    _refuse_iceberg_only(iceberg_only)
    if older_than is not None:
        now, time_retained = _paimon_older_than(older_than, now, time_retained)
    make_plan("expire", table=table, out=out, now=now, option=option, branch=branch, fmt=fmt,
              retain_min=retain_min, retain_max=retain_max, time_retained=time_retained, max_deletes=max_deletes,
              time_rule=time_rule, skip_unreadable=skip_unreadable,
              planner=_spark_expirer(master, key_values(conf, "--conf"), output_for(fmt), paimon=True)
              if spark else None)


def _paimon_older_than(older_than: str, now: Optional[str], time_retained: Optional[str]) -> tuple[str, str]:
    """Paimon's expire_snapshots procedure reads ``older_than`` as ``snapshot.time-retained = now - older_than``:
    (the plan's now, fixed here so that both agree, and that time-retained)."""
    from lakesweep.engine.errors import PlanRejected
    from lakesweep.engine.timeutil import parse_duration_ms, parse_time_ms
    from lakesweep.planner.paimon.options import _UNIT_DURATION

    if time_retained is not None:
        raise PlanRejected("--older-than and --time-retained say the same thing: give one of them")
    now_ms = parse_time_ms(now) if now is not None else int(time.time() * 1000)
    text = older_than.strip()
    if _UNIT_DURATION.match(text):
        return str(now_ms), f"{parse_duration_ms(text)} ms"
    at = parse_time_ms(text)
    if at > now_ms:
        raise PlanRejected(f"--older-than {older_than} is after the plan's now: nothing could be older; give a "
                           "time in the past or a duration such as '7 d'")
    return str(now_ms), f"{now_ms - at} ms"


@plan_app.command("orphans", short_help="Remove orphan files (Paimon, Iceberg).")
@handle_errors
def plan_orphans_cmd(
    table: str = TableArg,
    out: Path = PlanOutOpt,
    older_than: Optional[str] = typer.Option(None, help="Only files modified before this are candidates: a "
                                             "duration back from --now ('1 d', '36 h') or a time (ISO-8601 such "
                                             "as '2026-11-01 12:00:00', read as UTC, or epoch ms). Default 1 d. "
                                             "It must be longer than any writer takes from writing a file to "
                                             "committing it."),
    now: Optional[str] = NowOpt,
    force: bool = typer.Option(False, "--force", help="Allow an --older-than less than 1 hour back (only when "
                               "no writer is running)."),
    inventory: List[str] = typer.Option([], "--inventory", help="Read the listing from this Parquet inventory "
                                        "instead of listing the store: S3 Inventory's own Parquet files (bucket, "
                                        "key, size, last_modified_date) or path, size and mtime_ms (or "
                                        "last_modified). Repeat it for an inventory in several files."),
    empty_dirs: bool = typer.Option(False, "--empty-dirs", help="Also remove the bucket and partition "
                                    "directories the plan's deletes leave empty: deepest first, each only if it is "
                                    "empty when apply gets to it (never recursively), never the table root."),
    spark: bool = typer.Option(False, "--spark", help="Plan on Spark, for large tables (--master, --conf): "
                               "list the table, a task for each bucket and metadata directory (Iceberg: the "
                               "metadata directory, each partition directory of the data directory's first level, "
                               "and each other directory), into a temporary Parquet file; then decode the "
                               "manifests on executors, a group of manifests per task, and join the listing with "
                               "the files they name, so that only the listed files nothing uses come back. The "
                               "plan is the one the same listing plans without Spark, byte for byte."),
    master: str = MasterOpt,
    conf: List[str] = ConfOpt,
    catalog: Optional[str] = CatalogOpt,
    orphan_hours: Optional[int] = typer.Option(None, "--orphan-older-than-hours", help="Iceberg: --older-than in "
                                               "whole hours (SeaweedFS's name)."),
    fmt: OutputFormat = OutputOpt,
):
    """Plan the removal of orphan files as Apache Paimon's remove_orphan_files would, and save the plan.

    Lists the data, manifest, index and statistics directories and every branch's snapshot and changelog
    directories first (or reads that listing from --inventory), then reads what every snapshot, tag and
    changelog of every branch uses. Plans files older than --older-than that nothing uses, and stray files
    of the snapshot and changelog directories; with --empty-dirs, the directories that leaves empty.
    Never a directory recursively, nothing outside Paimon's directories.
    Apply checks every candidate again.

    Iceberg (--catalog, TABLE is namespace.table): files under the table location that no metadata
    reaches (metadata files, manifest lists, manifests, data and delete files, statistics files), older
    than --older-than (default 3 d); a file of unknown age is kept. The table location and the write
    paths its properties name are listed recursively (on S3, ListObjectsV2 by prefix), or with --spark
    split into prefixes that Spark tasks list; either plans the same.

    Nothing is deleted. Review the plan with 'lakesweep show PLAN'."""
    if catalog is not None:
        if older_than is not None and orphan_hours is not None:
            from lakesweep.engine.errors import PlanRejected

            raise PlanRejected("--older-than and --orphan-older-than-hours say the same thing: give one of them")
        with tempfile.TemporaryDirectory(prefix="lakesweep-listing-") as scratch, \
                _spark_lister(master, key_values(conf, "--conf"), scratch, output_for(fmt), iceberg=True) as on_spark:
            lister, used_reader = on_spark if spark else (None, None)
            make_iceberg_plan("orphans", catalog=catalog, table=table, out=out, now=now, fmt=fmt,
                              paimon_only={"--inventory": inventory, "--empty-dirs": empty_dirs},
                              older_than=older_than or _hours(orphan_hours, "--orphan-older-than-hours"), force=force,
                              spark=master if spark else None, lister=lister, used_reader=used_reader)
        return
    _refuse_iceberg_only({"--orphan-older-than-hours": orphan_hours})
    with tempfile.TemporaryDirectory(prefix="lakesweep-listing-") as scratch, \
            _spark_lister(master, key_values(conf, "--conf"), scratch, output_for(fmt)) as on_spark:
        lister, used_reader = on_spark if spark else (None, None)
        make_plan("orphans", table=table, out=out, now=now, option=[], branch="main", fmt=fmt,
                  older_than=older_than, force=force, inventory=inventory or None, empty_dirs=empty_dirs,
                  spark=master if spark else None, lister=lister, used_reader=used_reader)


@plan_app.command("purge", short_help="Delete quarantined files past their retention (Paimon, Iceberg).")
@handle_errors
def plan_purge_cmd(
    table: str = TableArg,
    out: Path = PlanOutOpt,
    journal: Optional[Path] = JournalOpt,
    now: Optional[str] = NowOpt,
    catalog: Optional[str] = CatalogOpt,
    fmt: OutputFormat = OutputOpt,
):
    """Plan deleting for good the files 'apply --quarantine' put aside for TABLE, once their retention has
    passed (quarantined at + retention <= --now), as the journal records them: the moved files in the table's
    _lakesweep_quarantine/<plan id>/ folders (and those folders once empty), or on a versioned S3 bucket the
    versions the deletes hid. A restored file is never purged. Apply checks each file in its journal again.

    Nothing is deleted. Review the plan with 'lakesweep show PLAN'."""
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.journal.quarantined import quarantine_records

    path = existing_journal(journal)
    with DuckDBRecorder(path, read_only=True) as recorder:
        records = quarantine_records(recorder)
    if catalog is not None:
        make_iceberg_plan("purge", catalog=catalog, table=table, out=out, now=now, fmt=fmt, paimon_only={},
                          journal=path, records=records)
        return
    make_plan("purge", table=table, out=out, now=now, option=[], branch="main", fmt=fmt, journal=path,
              records=records)


def _spark_expirer(master: str, conf: dict, output, *, paimon: bool = False):
    """The planner of ``plan expire --spark`` (``--catalog C`` unless ``paimon``): the expiry planned on
    ``master``."""

    def planner(table, *, now_ms: int, options):
        if paimon:
            from lakesweep.applier.paimon_expire import plan_expire_with_session
        else:
            from lakesweep.applier.iceberg_expire import plan_expire_with_session

        with contextlib.ExitStack() as stack:
            if progress_enabled(output.draws_progress):
                stack.enter_context(render.err.status("planning on Spark"))
            return plan_expire_with_session(table, now_ms=now_ms, options=options, master=master, conf=conf)

    return planner


@contextlib.contextmanager
def _spark_lister(master: str, conf: dict, scratch: str, output, *, iceberg: bool = False):
    """The listing and the used-set reader of ``plan orphans --spark``, on one session on ``master`` started
    when first used and stopped on leaving: the table listed, a directory (Iceberg: a prefix) per task, into
    a Parquet file in ``scratch`` and kept on the executors; then its manifests decoded and the kept listing
    joined with what they name."""
    from lakesweep.applier.orphans_used import PlanningSession, iceberg_used_reader, paimon_used_reader

    session = PlanningSession(master, conf)
    kept: list = []  # the listing, kept on the executors

    def lister(table):
        from lakesweep.applier.iceberg_listing import list_iceberg_on_spark
        from lakesweep.applier.listing import list_on_spark

        path = os.path.join(scratch, "listing.parquet")
        with contextlib.ExitStack() as stack:
            status = (stack.enter_context(render.err.status("listing on Spark"))
                      if progress_enabled(output.draws_progress) else None)
            listing = (list_iceberg_on_spark if iceberg else list_on_spark)(
                table, path, spark=session.get(), master=master, keep=kept,
                on_files=None if status is None else lambda n: status.update(f"listing on Spark: {n} files"))
        return listing.path, listing.source()

    def used_reader(listing: str):
        reader = (iceberg_used_reader if iceberg else paimon_used_reader)(session, kept[-1])

        def read(table):
            with contextlib.ExitStack() as stack:
                if progress_enabled(output.draws_progress):
                    stack.enter_context(render.err.status("reading what the table uses on Spark"))
                return reader(table)

        return read

    try:
        yield lister, used_reader
    finally:
        for listing in kept:
            listing.unpersist()
        session.stop()


# Actions decoded at a time by show: a batch of 16,384 holds about 25 MiB at its peak, four times that
# costs more memory and saves no time.
SHOW_BATCH = 16_384


@app.command(short_help="Show a saved plan.")
@handle_errors
def show(
    plan: Path = typer.Argument(..., help="A plan written by 'lakesweep plan'."),
    files: bool = typer.Option(False, "--files", help="List every action."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write the plan as one self-contained HTML page "
                                        "(inline SVG charts, no script, nothing loaded from the network)."),
    max_rps: Optional[float] = typer.Option(None, "--max-requests-per-second", min=0.001, help="For a plan on "
                                            "S3: the apply's request budget, to show how long its requests take."),
    delete_batch: int = typer.Option(250, "--delete-batch-size", min=1, max=1000, help="For a plan on S3: the "
                                     "keys per DeleteObjects request the apply will send."),
    fmt: OutputFormat = OutputOpt,
):
    """Show a saved plan: the range, counts and bytes per kind and partition, what tags and consumers
    protected, and whether there is anything to do. For a plan on S3, also the requests its apply sends
    (LIST, DELETE, HEAD, GET, PUT) and, with --max-requests-per-second, how long they take at that budget.
    On local files and HDFS, also what 'apply --quarantine' costs: one rename per file, no byte copied. On S3,
    its requests on a versioned bucket (ListObjectVersions, then the deletes) and on one without versioning (a
    CopyObject per file, then the deletes, and the bytes copied); 'lakesweep doctor --table' says which."""
    from lakesweep.engine.plan_io import open_plan_stream

    with open_plan_stream(str(plan), batch_size=SHOW_BATCH) as stream:
        read = stream.plan
        figures, requests, cost = _shown_figures(stream, delete_batch=delete_batch, max_rps=max_rps)
        if html is not None:
            from lakesweep.cli.html.plan_page import plan_html
            from lakesweep.engine.errors import PlanRejected
            from lakesweep.engine.plan_io import read_plan

            check_output_file(html, "--html", PlanRejected)
            refuse_inside_table(html, read.table_location, "--html", PlanRejected)
            html.write_text(plan_html(read_plan(str(plan))), encoding="utf-8")
        output_for(fmt).plan_shown(read, files=files, requests=requests, quarantine=cost, figures=figures)


def _shown_figures(stream, *, delete_batch: int, max_rps: Optional[float]):
    """What ``show`` counts over a plan's actions, in one pass that also verifies the plan (nothing is shown
    of a plan whose content does not match its id): ``(render.ActionFigures, requests, quarantine cost)``;
    the requests (``plan_shown``'s ``requests``) only for a plan on S3. ``--files`` then lists the actions in
    a second pass over the same open file."""
    from lakesweep.applier.quarantine import QuarantineCost
    from lakesweep.engine.s3_bulk import PlanRequests, seconds_at
    from lakesweep.engine.s3_quarantine import quarantine_requests

    plan = stream.plan
    s3 = plan.table_location.startswith("s3://")
    figures = render.ActionFigures()
    counted = PlanRequests(plan.table_location, plan.phases, batch=delete_batch) if s3 else None
    local = None if s3 else QuarantineCost(plan.table_location, plan.plan_id)
    for batch in stream.batches():
        figures.add(batch)
        (counted or local).add(batch)
    if not s3:
        return figures, None, local.cost()
    by_kind = counted.counts()
    total = sum(by_kind.values())
    requests = {"by_kind": by_kind, "total": total, "rate": max_rps, "seconds": seconds_at(total, max_rps)}
    return figures, requests, quarantine_requests(counted)


def _refuse_iceberg_only(given: dict) -> None:
    from lakesweep.engine.errors import PlanRejected

    named = sorted(name for name, value in given.items() if value is not None)
    if named:
        raise PlanRejected(f"{named[0]} is an option of Iceberg tables: give the table's catalog with --catalog")
