"""`dvtool optimize` on Iceberg tables: the delete compactions of the Iceberg design text.

- `--rewrite-deletes` (REWRITE) and `--convert-equality` (CONVERT) rewrite delete files only
  (`iceberg_deletes`);
- `--purge` (MERGE) and plain compaction rewrite data files (`iceberg_rewrites`).

Each plans on the current snapshot and commits one snapshot through
`dvtool.iceberg.transaction` (re-planned when a concurrent commit invalidates it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dvtool.commands.optimize.iceberg_deletes import (
    DeletePlan,
    plan_convert,
    plan_rewrite,
    validate_delete_rewrite,
    write_plan,
)
from dvtool.commands.result import CommandResult
from dvtool.errors import UsageError, WriteRefusedError
from dvtool.iceberg.live_files import live_files
from dvtool.iceberg.transaction import Prepared, Written, commit_transaction

if TYPE_CHECKING:
    from dvtool.iceberg.tables import IcebergTable

OPERATIONS = ("rewrite-deletes", "convert-equality")
MAX_PLANS = 5


@dataclass(frozen=True)
class IcebergOptimizeRequest:
    """What `dvtool optimize` was asked to do on an Iceberg table."""

    operation: str
    dry_run: bool = False


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

    def to_json(self) -> dict[str, Any]:
        return {
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


def run_optimize_iceberg(
    table: IcebergTable, request: IcebergOptimizeRequest
) -> IcebergOptimizeResult:
    """Run one delete compaction (see the module docstring)."""
    if request.operation not in OPERATIONS:
        raise UsageError(f"unknown Iceberg optimize operation {request.operation!r}")
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
