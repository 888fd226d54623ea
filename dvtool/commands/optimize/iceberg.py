"""`dvtool optimize` on Iceberg tables: the delete compactions of the Iceberg design text.

- `--rewrite-deletes` (REWRITE) and `--convert-equality` (CONVERT) rewrite delete files only
  (`iceberg_deletes`);
- `--purge` (MERGE) and plain compaction rewrite data files (`iceberg_rewrites`,
  `iceberg_binpack`), on the engine `engine_for(bytes to rewrite)` chooses (arrow, or
  Spark's executors), as a Delta table's purge and compaction.

Each plans on the current snapshot and commits one snapshot through
`dvtool.iceberg.transaction` (re-planned when a concurrent commit invalidates it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from dvtool.commands.iceberg_layout import metrics_verdict, parse_predicate, stats_paths
from dvtool.commands.iceberg_partition_filter import partition_match
from dvtool.commands.optimize.iceberg_binpack import Sizes, plan_compaction, target_size
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
    first_bins,
    plan_purge,
    validate_rewrite,
    write_rewrites,
)
from dvtool.commands.result import CommandResult
from dvtool.errors import UsageError, WriteRefusedError
from dvtool.iceberg.live_files import live_files
from dvtool.iceberg.transaction import Outcome, Prepared, Written, commit_transaction
from dvtool.predicate import Match

if TYPE_CHECKING:
    from dvtool.commands.iceberg_partition_filter import PartitionMatch
    from dvtool.engines.base import Engine
    from dvtool.iceberg.live_files import LiveDataFile
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
    where: str | None = None
    """purge and compact: only data files whose column metrics say some row may match
    (Iceberg Spark's `rewrite_data_files(where => ...)`: any column, files judged by their
    metrics, every row of a chosen file rewritten); rewrite-deletes: only the delete files
    of partitions the filter's inclusive projection may match (Iceberg Spark's
    `rewrite_position_delete_files(where => ...)`)."""
    batch_size: int | None = None
    """purge and compact: commit every `batch_size` new files (bins), one snapshot each
    (Iceberg Spark's `partial-progress.enabled`); None: one snapshot."""


def optimize_request(
    flags: dict[str, bool],
    *,
    dry_run: bool = False,
    min_deleted_ratio: float | None = None,
    target_size: int | None = None,
    where: str | None = None,
    batch_size: int | None = None,
) -> IcebergOptimizeRequest:
    """The request for the operation `flags` name (`purge`, `rewrite-deletes`,
    `convert-equality`: at most one; none is compaction), as the CLI and API take them."""
    chosen = [name for name, on in flags.items() if on]
    if len(chosen) > 1:
        raise UsageError(
            "give at most one of --purge, --rewrite-deletes and --convert-equality",
            hint="Without any of them dvtool optimize compacts small files.",
        )
    operation = chosen[0] if chosen else "compact"
    return IcebergOptimizeRequest(
        operation, dry_run, min_deleted_ratio, target_size, where, batch_size
    )


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
    snapshot_ids: list[int] = field(default_factory=list)
    """Every snapshot committed (several with `batch_size`); `snapshot_id` is the last."""
    engine: str | None = None
    """purge and compact: the engine that wrote the new files (None: nothing written)."""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": "iceberg",
            "operation": self.operation,
            "snapshot_id": self.snapshot_id,
            "base_snapshot_id": self.base_snapshot_id,
            "format_version": self.format_version,
            "dry_run": self.dry_run,
            "metrics": dict(self.metrics),
            "snapshot_ids": list(self.snapshot_ids),
            "attempts": self.attempts,
            "retries": self.retries,
        }
        if self.bins is not None:
            doc["bins"] = list(self.bins)
        if self.engine is not None:
            doc["engine"] = self.engine
        return doc


def run_optimize_iceberg(
    table: IcebergTable,
    request: IcebergOptimizeRequest,
    engine_for: Callable[[int], Engine] | None = None,
) -> IcebergOptimizeResult:
    """Run one delete compaction or data file rewrite (see the module docstring); a data
    file rewrite runs on `engine_for(bytes to rewrite)` (default arrow)."""
    if request.operation not in OPERATIONS:
        raise UsageError(f"unknown Iceberg optimize operation {request.operation!r}")
    if request.operation not in DELETE_OPERATIONS:
        return _run_rewrite(table, request, _EngineChoice(engine_for))
    if request.batch_size is not None:
        raise UsageError("--batch-size applies to --purge and compaction on Iceberg tables")
    if request.where is not None and request.operation != "rewrite-deletes":
        raise UsageError(
            "--where applies to --purge, compaction and --rewrite-deletes on Iceberg tables"
        )
    where = _partition_selection(table, request.where)
    if table.metadata.format_version < 2:
        raise WriteRefusedError(
            "Iceberg v1 tables have no delete files to rewrite",
            hint="Nothing to do: v1 tables delete by rewriting data files.",
        )

    def prepare(base: IcebergTable, written: Written) -> Prepared[IcebergOptimizeResult]:
        started = time.monotonic()
        live = live_files(base)
        plan = (
            plan_rewrite(base, live, where)
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

    return _committed(commit_transaction(table, prepare, plans=MAX_PLANS))


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


class _EngineChoice:
    """The engine of a rewrite: `engine_for(bytes)` asked once, by the first plan that
    writes, with all the bytes it plans to rewrite (every batch's, as for Delta); None
    without `engine_for` (arrow)."""

    def __init__(self, engine_for: Callable[[int], Engine] | None) -> None:
        self._engine_for = engine_for
        self._chosen: Engine | None = None

    def __call__(self, plan: RewritePlan) -> Engine | None:
        if self._chosen is None and self._engine_for is not None:
            self._chosen = self._engine_for(sum(b.input_bytes for b in plan.bins))
        return self._chosen


def _run_rewrite(
    table: IcebergTable, request: IcebergOptimizeRequest, engines: _EngineChoice
) -> IcebergOptimizeResult:
    """MERGE or compaction, committed as one `replace` snapshot, or one per `batch_size`
    bins: each batch plans on the table the previous one committed, without the files
    earlier batches wrote (so compaction never packs its own output again)."""
    _check_rewrite(table, request)
    sizes = target_size(table.metadata.properties, request.target_size)
    now = datetime.now(timezone.utc)
    if request.where is not None:
        parse_predicate(table.metadata, request.where, now)  # a bad --where fails first
    written_by_us: set[str] = set()
    batches: list[IcebergOptimizeResult] = []
    current = table
    while True:
        added: set[str] = set()
        prepare = _rewrite_prepare(request, sizes, now, written_by_us, added, engines)
        outcome = commit_transaction(current, prepare, plans=MAX_PLANS)
        batches.append(_committed(outcome))
        if request.batch_size is None or outcome.table is None or request.dry_run:
            return _combined(batches)
        written_by_us |= added
        current = outcome.table


def _check_rewrite(table: IcebergTable, request: IcebergOptimizeRequest) -> None:
    ratio = request.min_deleted_ratio
    if ratio is not None and not 0 <= ratio <= 1:
        raise UsageError(f"--min-deleted-ratio must be between 0 and 1, not {ratio}")
    if ratio is not None and request.operation != "purge":
        raise UsageError("--min-deleted-ratio applies to --purge only")
    if request.target_size is not None and request.operation != "compact":
        raise UsageError("--target-size applies to compaction only (no --purge)")
    if request.batch_size is not None and request.batch_size <= 0:
        raise UsageError(f"--batch-size must be positive, not {request.batch_size}")
    if table.metadata.format_version < 2:
        raise WriteRefusedError(
            "dvtool rewrites data files of Iceberg tables of format version 2 and 3",
            hint="Upgrade the table: ALTER TABLE ... SET TBLPROPERTIES ('format-version'='2').",
        )


def _rewrite_prepare(
    request: IcebergOptimizeRequest,
    sizes: Sizes,
    now: datetime,
    excluded: set[str],
    added: set[str],
    engines: _EngineChoice,
) -> Callable[[IcebergTable, Written], Prepared[IcebergOptimizeResult]]:
    """One batch's plan and files: at most `batch_size` bins of the files `--where`
    chooses, never one in `excluded`, written on the engine `engines` chooses; the paths
    it writes go into `added`."""

    def prepare(base: IcebergTable, written: Written) -> Prepared[IcebergOptimizeResult]:
        started = time.monotonic()
        live = live_files(base)
        chosen = _selection(base, request.where, now)

        def selected(f: LiveDataFile) -> bool:
            return f.path not in excluded and (chosen is None or chosen(f))

        limit = None if request.dry_run else request.batch_size
        if request.operation == "purge":
            plan = plan_purge(base, live, request.min_deleted_ratio, selected, limit)
        else:
            plan = plan_compaction(base, live, sizes, selected, limit)
        engine = None if request.dry_run or plan.empty else engines(plan)
        if request.batch_size is not None and not request.dry_run:
            plan = first_bins(plan, live, request.batch_size, dangling=request.operation == "purge")
        result = _rewrite_result(base, request, plan)
        if request.dry_run or plan.empty:
            return Prepared(result)
        changes = write_rewrites(base, plan, written, engine=engine)
        added.clear()
        added.update(a.data_file.file_path for a in changes.added)
        metrics = {
            **result.metrics,
            "addedDataFiles": len(changes.added),
            "addedBytes": added_bytes(changes),
            "executionTimeMs": int((time.monotonic() - started) * 1000),
        }
        return Prepared(
            replace(result, metrics=metrics, engine=engine.name if engine else "arrow"),
            changes,
            lambda concurrent: validate_rewrite(plan, concurrent),
        )

    return prepare


def _combined(batches: list[IcebergOptimizeResult]) -> IcebergOptimizeResult:
    """One result for the batches: metrics and bins added up, the last batch's snapshot
    (a last batch with nothing left to do adds nothing)."""
    done = [b for b in batches if b.snapshot_id is not None] or batches[:1]
    if len(done) == 1:
        return done[0]
    metrics: dict[str, int] = {}
    for batch in done:
        for key, value in batch.metrics.items():
            metrics[key] = metrics.get(key, 0) + value
    return replace(
        done[-1],
        base_snapshot_id=done[0].base_snapshot_id,
        metrics=metrics,
        bins=[b for batch in done for b in batch.bins or []],
        snapshot_ids=[s for batch in done for s in batch.snapshot_ids],
        attempts=sum(b.attempts for b in done),
        retries=sum(b.retries for b in done),
    )


def _selection(
    table: IcebergTable, where: str | None, now: datetime
) -> Callable[[LiveDataFile], bool] | None:
    """The data files `where` chooses (None: every file): those whose column metrics do
    not rule out a matching row."""
    if where is None:
        return None
    predicate = parse_predicate(table.metadata, where, now)
    paths = stats_paths(table.metadata.schema(), predicate.columns)
    return lambda live: metrics_verdict(predicate, live, paths) is not Match.NONE


def _partition_selection(table: IcebergTable, where: str | None) -> PartitionMatch | None:
    """The partitions `where` may match (None: every one), as Iceberg Spark's
    `rewrite_position_delete_files` selects delete files: by an inclusive projection."""
    if where is None:
        return None
    return partition_match(table.metadata, parse_predicate(table.metadata, where, None))


def _rewrite_result(
    table: IcebergTable, request: IcebergOptimizeRequest, plan: RewritePlan
) -> IcebergOptimizeResult:
    snapshot = table.metadata.current_snapshot()
    inputs = plan.inputs
    metrics = {
        "rewrittenDataFiles": len(inputs),
        "rewrittenBytes": sum(i.file.entry.file_size_in_bytes for i in inputs),
        "plannedDataFiles": sum(1 for b in plan.bins for o in b.new_files() if b.kept_rows(o)),
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


def _committed(outcome: Outcome[IcebergOptimizeResult]) -> IcebergOptimizeResult:
    """The result with what the transaction did: its snapshot, plans and retries."""
    return replace(
        outcome.value,
        snapshot_id=outcome.snapshot_id,
        snapshot_ids=[outcome.snapshot_id] if outcome.snapshot_id is not None else [],
        attempts=outcome.plans,
        retries=outcome.retries,
    )
