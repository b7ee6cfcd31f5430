"""What a compaction plan carries and what its apply hands between the driver and the executors, as plain
data: the bins in the plan's ``scope`` (``scope_bins`` / ``bins_from_scope``), one merge task per bin
(``BinTask``, run by ``run_bin`` in a Spark task), and an output as the journal keeps it
(``output_record`` / ``output_data_file``).

The scope is JSON: partition values are stored with their type, so the bins read back equal to those
``compaction.plan_bins`` found; an output's statistics are stored with their field ids as text and their
bounds as hex (docs/design/iceberg-compaction.md#the-plan-and-the-journal).
"""

from __future__ import annotations

import decimal
import uuid
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lakesweep.engine.errors import PlanRejected
from lakesweep.engine.fileio import FileIO
from lakesweep.engine.iceberg.compaction import CompactionBin, DeleteManifestFate, DeleteRef, InputFile
from lakesweep.engine.iceberg.compaction_merge import MergedFile, merge_bin
from lakesweep.engine.iceberg.scopes import CompactScope

# ---- the plan's scope ---------------------------------------------------------------------------------


def _value(v) -> list:
    if v is None:
        return ["null", None]
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", v]
    if isinstance(v, float):
        return ["float", v.hex()]
    if isinstance(v, str):
        return ["str", v]
    if isinstance(v, (bytes, bytearray)):
        return ["bytes", bytes(v).hex()]
    if isinstance(v, decimal.Decimal):
        return ["decimal", str(v)]
    if isinstance(v, uuid.UUID):
        return ["uuid", str(v)]
    raise PlanRejected(f"a partition value of type {type(v).__name__} ({v!r}) cannot be stored in a plan")


def _from_value(pair) -> Any:
    kind, v = pair
    return {"null": lambda x: None, "bool": bool, "int": int, "float": float.fromhex, "str": str,
            "bytes": bytes.fromhex, "decimal": decimal.Decimal, "uuid": uuid.UUID}[kind](v)


def _input(f: InputFile) -> dict:
    return {"location": f.location, "path": f.path, "size": f.size, "record_count": f.record_count,
            "sequence_number": f.sequence_number, "file_sequence_number": f.file_sequence_number,
            "snapshot_id": f.snapshot_id}


def _delete(d: DeleteRef) -> dict:
    return {"location": d.location, "path": d.path, "content": d.content, "sequence_number": d.sequence_number,
            "equality_ids": list(d.equality_ids), "size": d.size, "record_count": d.record_count,
            "manifest": d.manifest}


def scope_bins(bins: Sequence[CompactionBin]) -> list[dict]:
    """The bins as the plan's scope stores them."""
    return [{"index": b.index, "spec_id": b.spec_id, "partition": b.partition,
             "partition_values": [_value(v) for v in b.partition_values],
             "identity_values": [[fid, _value(v)] for fid, v in b.identity_values],
             "inputs": [_input(f) for f in b.inputs],
             "position_deletes": [_delete(d) for d in b.position_deletes],
             "equality_deletes": [_delete(d) for d in b.equality_deletes]} for b in bins]


def scope_delete_manifests(fates: Sequence[DeleteManifestFate]) -> list[dict]:
    return [{"path": m.path, "live_files": m.live_files, "dropped": m.dropped} for m in fates]


def bins_from_scope(scope: CompactScope) -> dict[int, CompactionBin]:
    """The plan's bins by index; a scope that does not hold them refuses the plan."""
    try:
        out = {}
        for b in scope.bins:
            out[int(b["index"])] = CompactionBin(
                index=int(b["index"]), spec_id=int(b["spec_id"]), partition=str(b["partition"]),
                partition_values=tuple(_from_value(v) for v in b["partition_values"]),
                identity_values=tuple((int(fid), _from_value(v)) for fid, v in b["identity_values"]),
                inputs=tuple(InputFile(**f) for f in b["inputs"]),
                position_deletes=tuple(DeleteRef(**{**d, "equality_ids": tuple(d["equality_ids"])})
                                       for d in b["position_deletes"]),
                equality_deletes=tuple(DeleteRef(**{**d, "equality_ids": tuple(d["equality_ids"])})
                                       for d in b["equality_deletes"]))
        return out
    except (KeyError, TypeError, ValueError) as e:
        raise PlanRejected(f"the plan's bins cannot be read ({type(e).__name__}: {e}); re-run "
                           f"'lakesweep plan compact'") from e


# ---- the merge task -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BinTask:
    """What one Spark task needs to merge one bin: picklable values only (no catalog, no table)."""

    bin: CompactionBin
    output_location: str
    fileio: FileIO
    schema: Any  # pyiceberg Schema
    table_location: str
    properties: Mapping[str, str]
    format_version: int


def run_bin(task: BinTask) -> dict:
    """Executor side: merge the task's bin (``compaction_merge.merge_bin``) and return its output record."""
    b = task.bin
    merged = merge_bin(b.inputs, b.position_deletes, b.equality_deletes, output_location=task.output_location,
                       fileio=task.fileio, schema=task.schema, table_location=task.table_location,
                       properties=dict(task.properties), format_version=task.format_version,
                       identity_values=b.identity_values)
    return output_record(merged)


# ---- an output as the journal keeps it ----------------------------------------------------------------

_MAPS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
_BOUNDS = ("lower_bounds", "upper_bounds")


def output_record(m: MergedFile) -> dict:
    """``m`` as JSON-ready data: location, written, record count, bytes, statistics."""
    stats: dict[str, Any] = {}
    for name, value in dict(m.statistics).items():
        if name in _MAPS:
            stats[name] = {str(k): int(v) for k, v in (value or {}).items()}
        elif name in _BOUNDS:
            stats[name] = {str(k): bytes(v).hex() for k, v in (value or {}).items()}
        elif name == "split_offsets":
            stats[name] = None if value is None else [int(x) for x in value]
        else:
            stats[name] = value
    return {"location": m.location, "written": m.written, "record_count": m.record_count,
            "bytes": m.file_size_in_bytes, "statistics": stats}


def _statistics(stats: Mapping[str, Any]) -> dict:
    out: dict[str, Any] = {}
    for name, value in stats.items():
        if name in _MAPS:
            out[name] = {int(k): int(v) for k, v in value.items()}
        elif name in _BOUNDS:
            out[name] = {int(k): bytes.fromhex(v) for k, v in value.items()}
        else:
            out[name] = value
    return out


def output_data_file(record: Mapping[str, Any], b: CompactionBin):
    """The pyiceberg ``DataFile`` that adds the output ``record`` (``output_record``) of bin ``b``."""
    merged = MergedFile(record["location"], bool(record["written"]), int(record["record_count"]),
                        int(record["bytes"]), 0, 0, 0, _statistics(record["statistics"]))
    return merged.data_file(spec_id=b.spec_id, partition_values=b.partition_values)
