"""``lakesweep demo``: the whole story on a small real Paimon table written by pypaimon (write, inspect,
plan, show, apply on local Spark, audit the DuckDB journal), then on an Iceberg table written by pyiceberg
through its SQL catalog on SQLite (expire snapshots, rewrite manifests)."""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

import typer

from lakesweep.cli import render
from lakesweep.cli.app import OutputOpt, app, handle_errors
from lakesweep.cli.output import Output, OutputFormat, output_for
from lakesweep.engine.errors import ForeignDirectory

# A demo directory holds this file from the moment the demo starts writing into it; a later demo may
# replace what the demo writes (DEMO_OUTPUTS) only in a directory that has it.
DEMO_MARKER = ".lakesweep-demo"
DEMO_WAREHOUSE = "warehouse"
DEMO_PLAN = "expire-plan.parquet"
DEMO_JOURNAL = "journal.duckdb"
DEMO_ICEBERG = "iceberg"  # the Iceberg chapter's SQLite catalog and warehouse
DEMO_ICEBERG_PLANS = ("iceberg-expire-plan.parquet", "iceberg-rewrite-plan.parquet")
DEMO_OUTPUTS = (DEMO_WAREHOUSE, DEMO_PLAN, DEMO_JOURNAL, DEMO_JOURNAL + ".wal", DEMO_JOURNAL + ".lock",
                DEMO_JOURNAL + ".readers", DEMO_ICEBERG, *DEMO_ICEBERG_PLANS)
DEMO_CATALOG = "lakesweepdemo"
DEMO_PARTITIONS = ("2024-01-01", "2024-01-02", "2024-01-03")
# (partitions written, overwrite?) per commit: snapshot 5 overwrites 2024-01-01.
DEMO_COMMITS = (
    (DEMO_PARTITIONS, False),
    (("2024-01-02",), False),
    (("2024-01-01", "2024-01-03"), False),
    (("2024-01-02",), False),
    (("2024-01-01",), True),
    (("2024-01-03",), False),
    (("2024-01-02",), False),
    (("2024-01-01",), False),
)
DEMO_TAG = ("release-1", 2)


def iceberg_catalog_env(root: Path) -> dict[str, str]:
    """The pyiceberg settings of the demo's SQL catalog (what a user exports to reach it)."""
    prefix = f"PYICEBERG_CATALOG__{DEMO_CATALOG.upper()}__"
    return {prefix + "TYPE": "sql", prefix + "URI": f"sqlite:///{root}/catalog.db",
            prefix + "WAREHOUSE": f"file://{root}/warehouse"}


def write_demo_iceberg_table(root: Path) -> str:
    """Create ``demo.orders`` with pyiceberg in a SQL catalog on SQLite under ``root``: 8 appends over three
    regions and a delete. Returns the table's name."""
    try:
        import pyarrow as pa
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.types import LongType, NestedField, StringType
    except ImportError as e:
        raise typer.BadParameter(
            "the demo writes its Iceberg table with pyiceberg: install it with  pip install 'lakesweep[demo]'"
        ) from e
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(DEMO_CATALOG, uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("demo")
    schema = Schema(NestedField(1, "order_id", LongType(), required=False),
                    NestedField(2, "region", StringType(), required=False))
    table = catalog.create_table("demo.orders", schema=schema,
                                 partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region")))
    regions = ("eu", "us", "ap")
    for i in range(8):
        ids = list(range(i * 10, i * 10 + 6))
        table.append(pa.table({"order_id": pa.array(ids, pa.int64()), "region": [regions[x % 3] for x in ids]}))
    table.delete("order_id < 20")
    return "demo.orders"


def run_iceberg_chapter(directory: Path, journal_path: Path, *, output: Output) -> dict:
    """Steps 7 to 9: an Iceberg table, its snapshots expired and its manifests rewritten, in the same journal."""
    import os

    from lakesweep.applier.apply import apply_plan
    from lakesweep.cli.progress import RichProgress
    from lakesweep.engine.iceberg.table import IcebergTable
    from lakesweep.engine.plan_io import read_plan, write_plan
    from lakesweep.journal.duckdb_store import DuckDBRecorder
    from lakesweep.planner.kinds import plan_kind

    say = output.demo_step
    root = directory / DEMO_ICEBERG
    env = iceberg_catalog_env(root)
    os.environ.update(env)  # lakesweep reaches the catalog by name, configured as pyiceberg configures it
    say(f"\n[bold]7. Writing an Iceberg table with pyiceberg[/bold] (SQL catalog on SQLite) under {root}")
    name = write_demo_iceberg_table(root)
    doc: dict = {"catalog": DEMO_CATALOG, "table": name, "catalog_env": env}
    steps = (("expire", DEMO_ICEBERG_PLANS[0], {"older_than": "0 s", "retain_last": 3},
              "8. lakesweep plan expire demo.orders --catalog lakesweepdemo --older-than '0 s' --retain-last 3"),
             ("rewrite-manifests", DEMO_ICEBERG_PLANS[1], {"min_manifests": 2},
              "9. lakesweep plan rewrite-manifests demo.orders --catalog lakesweepdemo --min-manifests 2"))
    for kind, file, flags, title in steps:
        say(f"\n[bold]{title}[/bold], then apply")
        entry = plan_kind(kind, "iceberg")
        table = IcebergTable(DEMO_CATALOG, name)
        plan = entry.read_and_plan(table, now_ms=int(time.time() * 1000), options=entry.resolve_options(table.options, **flags))
        write_plan(plan, str(directory / file))
        reread = read_plan(str(directory / file))
        output.demo_plan(reread)
        with DuckDBRecorder(str(journal_path)) as recorder:
            with RichProgress(output.draws_progress) as progress:
                report = apply_plan(reread, recorder, master="local[*]", progress=progress)
        output.demo_report(report)
        doc[kind] = {"plan_file": str(directory / file), "plan": render.plan_document(reread), "apply": report.to_json()}
    after = IcebergTable(DEMO_CATALOG, name)
    head = after.snapshots[after.current_snapshot_id]
    say(f"\nThe Iceberg table now keeps {len(after.snapshots)} snapshots; its current one reads "
        f"{len(after.manifest_list(head))} manifest(s).")
    doc["after"] = {"snapshots": len(after.snapshots), "manifests": len(after.manifest_list(head))}
    return doc


def write_demo_table(warehouse: Path) -> str:
    """Create ``demo.db/orders`` with pypaimon: 8 commits, one partition overwrite, one tag. Returns its path."""
    try:
        import pyarrow as pa
        from pypaimon import CatalogFactory, Schema
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise SystemExit(
            "the demo writes its table with pypaimon: install it with  pip install 'lakesweep[demo]'"
        ) from e

    schema = pa.schema([("dt", pa.string()), ("order_id", pa.int64()), ("amount", pa.float64())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("demo", True)
    catalog.create_table("demo.orders", Schema.from_pyarrow_schema(schema, partition_keys=["dt"]), False)
    table = catalog.get_table("demo.orders")
    next_id = 0
    for partitions, overwrite in DEMO_COMMITS:
        rows = []
        for dt in partitions:
            for _ in range(3):
                rows.append({"dt": dt, "order_id": next_id, "amount": round(10 + next_id * 1.25, 2)})
                next_id += 1
        builder = table.new_batch_write_builder()
        if overwrite:
            builder = builder.overwrite({"dt": partitions[0]})
        write, commit = builder.new_write(), builder.new_commit()
        try:
            write.write_arrow(pa.Table.from_pylist(rows, schema=schema))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
    table.create_tag(DEMO_TAG[0], snapshot_id=DEMO_TAG[1])
    return str(warehouse / "demo.db" / "orders")


def prepare_demo_dir(directory: Path) -> None:
    """Make ``directory`` ready for a demo run, never deleting anything the demo did not write.

    A missing or empty directory is created and marked. A previous demo's directory (it holds
    ``DEMO_MARKER``) keeps everything except the demo's own outputs, which are removed. Anything
    else raises ``ForeignDirectory`` and leaves the directory untouched."""
    if directory.exists() and not directory.is_dir():
        raise ForeignDirectory(str(directory), "not a directory; pass --dir with a new or empty directory")
    if directory.is_dir() and any(directory.iterdir()):
        if not (directory / DEMO_MARKER).is_file():
            raise ForeignDirectory(
                str(directory),
                f"not empty and not made by 'lakesweep demo' (it has no {DEMO_MARKER} file); nothing was "
                "removed. Pass --dir with a new or empty directory",
            )
        for name in DEMO_OUTPUTS:
            path = directory / name
            if path.is_symlink() or (path.exists() and path.is_dir() != (name in (DEMO_WAREHOUSE, DEMO_ICEBERG))):
                raise ForeignDirectory(
                    str(directory), f"{name} in it was not written by 'lakesweep demo'; nothing was removed"
                )
        for name in DEMO_OUTPUTS:
            path = directory / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / DEMO_MARKER
    if not marker.is_file():
        marker.write_text(
            "Written by 'lakesweep demo'. A later demo with this --dir replaces only "
            + ", ".join(DEMO_OUTPUTS) + " here.\n"
        )


def run_demo(directory: Path, *, output: Output) -> dict:
    """Write the demo table in ``directory`` and run the whole story on it, telling each step through
    ``output``; returns everything it did as data (what ``--output json`` prints)."""
    from lakesweep.cli.progress import MetadataReadProgress, progress_enabled
    from lakesweep.engine.paimon.inspect import inspect_table
    from lakesweep.engine.plan_io import read_plan, write_plan
    from lakesweep.engine.paimon.table import open_table
    from lakesweep.planner.paimon.expire import plan_expire
    from lakesweep.planner.paimon.options import resolve_expire_options

    directory = directory.resolve()
    prepare_demo_dir(directory)
    say = output.demo_step

    say(f"[bold]1. Writing a Paimon table with pypaimon[/bold] under {directory}")
    location = write_demo_table(directory / DEMO_WAREHOUSE)
    table = open_table(location)
    info = inspect_table(table)
    say("\n[bold]2. lakesweep inspect[/bold]")
    output.demo_inspect(info)

    plan_path = directory / DEMO_PLAN
    say("\n[bold]3. lakesweep plan expire --retain-min 3 --time-retained '0 s'[/bold]")
    opts = resolve_expire_options(table.options, retain_min=3, time_retained="0 s")
    reads = MetadataReadProgress() if progress_enabled(output.draws_progress) else None
    with reads if reads is not None else contextlib.nullcontext():
        plan = plan_expire(open_table(location, on_read=reads), now_ms=int(time.time() * 1000), options=opts)
    write_plan(plan, str(plan_path))
    say(f"\n[bold]4. lakesweep show {plan_path}[/bold]")
    reread = read_plan(str(plan_path))
    output.demo_plan(reread)
    from lakesweep.applier.apply import apply_plan
    from lakesweep.cli.progress import RichProgress
    from lakesweep.journal.audit import list_files, list_plans
    from lakesweep.journal.duckdb_store import DuckDBRecorder

    journal_path = directory / DEMO_JOURNAL
    say(f"\n[bold]5. lakesweep apply {plan_path} --journal {journal_path}[/bold]  (local Spark)")
    with DuckDBRecorder(str(journal_path)) as recorder:
        with RichProgress(output.draws_progress) as progress:
            report = apply_plan(reread, recorder, master="local[*]", progress=progress)
        output.demo_report(report)
        say("\n[bold]6. lakesweep journal files --kind data-file[/bold]  (what was deleted, when, and why)")
        files = list_files(recorder, plan_id=reread.plan_id, kind="data-file")
        plans = list_plans(recorder)
    for row in files:
        say(f"  {render.fmt_time(row['time_ms'])}  {row['outcome']:<14} {row['path']}  "
            f"(deleted by snapshot {row['snapshot_id']}'s expiry, plan {row['plan_id'][:12]})")
    after = inspect_table(open_table(location))
    say(f"\nThe table now starts at snapshot {after['earliest']} (EARLIEST hint {after['hints']['EARLIEST']}); "
        f"the tag '{DEMO_TAG[0]}' still reads snapshot {DEMO_TAG[1]}.")
    doc = {
        "table": location, "inspect": info, "plan_file": str(plan_path), "plan": render.plan_document(reread),
        "apply": report.to_json(), "journal": str(journal_path), "journal_plans": plans, "deleted_files": files,
        "after": {"earliest": after["earliest"], "latest": after["latest"]},
    }
    doc["iceberg"] = run_iceberg_chapter(directory, journal_path, output=output)
    exports = "".join(f"  export {k}={v}\n" for k, v in doc["iceberg"]["catalog_env"].items())
    say(f"\nTry it yourself:\n  lakesweep inspect {location}\n  lakesweep show {plan_path} --files\n"
        f"  lakesweep journal plans --journal {journal_path}\n"
        f"  lakesweep journal query \"SELECT kind, outcome, count(*) FROM file_records GROUP BY ALL\" "
        f"--journal {journal_path}\n{exports}"
        f"  lakesweep plan orphans demo.orders --catalog {DEMO_CATALOG} --out orphans.parquet")
    output.demo_finished(doc)
    return doc


@app.command("demo", short_help="Run the whole story on Paimon and Iceberg demo tables.")
@handle_errors
def demo_cmd(
    directory: Path = typer.Option(Path("lakesweep-demo"), "--dir", help="Work directory for the demo table, "
                                   "plan and journal: a new or empty directory, or one a previous demo made (the "
                                   "demo then replaces only its own files there)."),
    fmt: OutputFormat = OutputOpt,
):
    """The whole story on a demo table: write it with pypaimon, inspect, plan expire, show, apply on
    local Spark with a DuckDB journal, and audit what was deleted; then expire the snapshots of an Iceberg
    table pyiceberg wrote through its SQL catalog on SQLite, and rewrite its manifests."""
    run_demo(directory, output=output_for(fmt))
