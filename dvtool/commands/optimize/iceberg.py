"""`dvtool optimize` on Iceberg tables: the delete compactions of the Iceberg design text.

- `--rewrite-deletes` (REWRITE) and `--convert-equality` (CONVERT) rewrite delete files only
  (`iceberg_deletes`);
- `--purge` (MERGE) and plain compaction rewrite data files (`iceberg_rewrites`,
  `iceberg_binpack`).

Each plans on the current snapshot and commits one snapshot through
`dvtool.iceberg.transaction` (re-planned when a concurrent commit invalidates it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dvtool.commands.optimize.iceberg_binpack import plan_compaction, target_size
from dvtool.commands.optimize.iceberg_deletes import (
    DeletePlan,
    plan_convert,
    plan_rewrite,
    validate_delete_rewrite,
    write_plan,
)
from dvtool.commands.optimize.iceberg_rewrites import (
    RewritePlan,
    added_bytes,
    plan_purge,
    validate_rewrite,
    write_rewrites,
)
from dvtool.commands.result import CommandResult
from dvtool.errors import UsageError, WriteRefusedError
from dvtool.iceberg.live_files import live_files
from dvtool.iceberg.transaction import Prepared, Written, commit_transaction

if TYPE_CHECKING:
    from dvtool.iceberg.tables import IcebergTable

OPERATIONS = ("rewrite-deletes", "convert-equality", "purge", "compact")
DELETE_OPERATIONS = ("rewrite-deletes", "convert-equality")
MAX_PLANS = 5


@dataclass(frozen=True)
class IcebergOptimizeRequest:
    """What `dvtool optimize` was asked to do on an Iceberg table."""

    operation: str
    dry_run: bool = False
    min_deleted_ratio: float | None = None
    """purge: only files whose deleted ratio is at least this (0..1)."""
    target_size: int | None = None
    """compact: the target file size (default `write.target-file-size-bytes`)."""


@dataclass(frozen=True)
class IcebergOptimizeResult(CommandResult):
    """The outcome: the committed snapshot (None for a dry run or when there was nothing
    to do) and what changed."""

    operation: str
    base_snapshot_id: int | None
    format_version: int
    dry_run: bool
    metrics: dict[str, int]
    snapshot_id: int | None = None
    attempts: int = 1
    retries: int = 0
    bins: list[dict[str, Any]] | None = None
    """purge and compact: the planned new files (their inputs, bytes, rows)."""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": "iceberg",
            "operation": self.operation,
            "snapshot_id": self.snapshot_id,
            "base_snapshot_id": self.base_snapshot_id,
            "format_version": self.format_version,
            "dry_run": self.dry_run,
            "metrics": dict(self.metrics),
            "attempts": self.attempts,
            "retries": self.retries,
        }
        if self.bins is not None:
            doc["bins"] = list(self.bins)
        return doc


def run_optimize_iceberg(
    table: IcebergTable, request: IcebergOptimizeRequest
) -> IcebergOptimizeResult:
    """Run one delete compaction or data file rewrite (see the module docstring)."""
    if request.operation not in OPERATIONS:
        raise UsageError(f"unknown Iceberg optimize operation {request.operation!r}")
    if request.operation not in DELETE_OPERATIONS:
        return _run_rewrite(table, request)
    if table.metadata.format_version < 2:
        raise WriteRefusedError(
            "Iceberg v1 tables have no delete files to rewrite",
            hint="Nothing to do: v1 tables delete by rewriting data files.",
        )

    def prepare(base: IcebergTable, written: Written) -> Prepared[IcebergOptimizeResult]:
        started = time.monotonic()
        live = live_files(base)
        plan = (
            plan_rewrite(base, live)
            if request.operation == "rewrite-deletes"
            else (plan_convert(base, live))
        )
        result = _result(base, request, plan)
        if request.dry_run or plan.empty:
            return Prepared(result)
        changes = write_plan(base, plan, written)
        metrics = {
            **result.metrics,
            "addedDeleteFiles": len({a.data_file.file_path for a in changes.added}),
            "executionTimeMs": int((time.monotonic() - started) * 1000),
        }
        return Prepared(
            replace(result, metrics=metrics),
            changes,
            lambda concurrent: validate_delete_rewrite(plan, concurrent),
        )

    outcome = commit_transaction(table, prepare, plans=MAX_PLANS)
    return replace(
        outcome.value,
        snapshot_id=outcome.snapshot_id,
        attempts=outcome.plans,
        retries=outcome.retries,
    )


def _result(
    table: IcebergTable, request: IcebergOptimizeRequest, plan: DeletePlan
) -> IcebergOptimizeResult:
    snapshot = table.metadata.current_snapshot()
    removed_data = {f.path for f in plan.removed_data}
    metrics = {
        "dataFilesWithNewDeletes": len(plan.positions),
        "positionsWritten": sum(len(rows) for _, rows in plan.positions),
        "removedDataFiles": len(removed_data),
        "removedDeleteEntries": sum(1 for path, _ in plan.removed if path not in removed_data),
        "convertedRows": plan.rows_converted,
    }
    return IcebergOptimizeResult(
        request.operation,
        snapshot.snapshot_id if snapshot is not None else None,
        table.metadata.format_version,
        request.dry_run,
        metrics,
    )


# -- data file rewrites: purge (MERGE) and compact -------------------------------------------


def _run_rewrite(table: IcebergTable, request: IcebergOptimizeRequest) -> IcebergOptimizeResult:
    """MERGE or compaction, committed as one `replace` snapshot."""
    ratio = request.min_deleted_ratio
    if ratio is not None and not 0 <= ratio <= 1:
        raise UsageError(f"--min-deleted-ratio must be between 0 and 1, not {ratio}")
    if ratio is not None and request.operation != "purge":
        raise UsageError("--min-deleted-ratio applies to --purge only")
    if request.target_size is not None and request.operation != "compact":
        raise UsageError("--target-size applies to compaction only (no --purge)")
    if table.metadata.format_version < 2:
        raise WriteRefusedError(
            "dvtool rewrites data files of Iceberg tables of format version 2 and 3",
            hint="Upgrade the table: ALTER TABLE ... SET TBLPROPERTIES ('format-version'='2').",
        )
    sizes = target_size(table.metadata.properties, request.target_size)

    def prepare(base: IcebergTable, written: Written) -> Prepared[IcebergOptimizeResult]:
        started = time.monotonic()
        live = live_files(base)
        if request.operation == "purge":
            plan = plan_purge(base, live, ratio)
        else:
            plan = plan_compaction(base, live, sizes)
        result = _rewrite_result(base, request, plan)
        if request.dry_run or plan.empty:
            return Prepared(result)
        changes = write_rewrites(base, plan, written)
        metrics = {
            **result.metrics,
            "addedDataFiles": len(changes.added),
            "addedBytes": added_bytes(changes),
            "executionTimeMs": int((time.monotonic() - started) * 1000),
        }
        return Prepared(
            replace(result, metrics=metrics),
            changes,
            lambda concurrent: validate_rewrite(plan, concurrent),
        )

    outcome = commit_transaction(table, prepare, plans=MAX_PLANS)
    return replace(
        outcome.value,
        snapshot_id=outcome.snapshot_id,
        attempts=outcome.plans,
        retries=outcome.retries,
    )


def _rewrite_result(
    table: IcebergTable, request: IcebergOptimizeRequest, plan: RewritePlan
) -> IcebergOptimizeResult:
    snapshot = table.metadata.current_snapshot()
    inputs = plan.inputs
    metrics = {
        "rewrittenDataFiles": len(inputs),
        "rewrittenBytes": sum(i.file.entry.file_size_in_bytes for i in inputs),
        "plannedDataFiles": sum(1 for b in plan.bins if b.remaining_rows),
        "removedDeletedRows": sum(i.deleted_rows for i in inputs),
        "removedDeleteFiles": len(plan.removed_deletes),
        "rewrittenRows": sum(b.remaining_rows for b in plan.bins),
    }
    return IcebergOptimizeResult(
        request.operation,
        snapshot.snapshot_id if snapshot is not None else None,
        table.metadata.format_version,
        request.dry_run,
        metrics,
        bins=[b.to_json() for b in plan.bins],
    )
