"""``lakesweep maintain``: the nightly run over a catalog or warehouse (``run``), and which tables and
operations it takes and what each table needs (``selection``). It reads the kind registry
(``planner.kinds``) and applies through ``applier``; only the CLI imports it."""

from lakesweep.maintain.report import RunReport, TableResult
from lakesweep.maintain.run import Maintenance, check_plans_dir
from lakesweep.maintain.selection import Thresholds, TableRef, discover, parse_operations

__all__ = ["Maintenance", "RunReport", "TableRef", "TableResult", "Thresholds", "check_plans_dir", "discover",
           "parse_operations"]
