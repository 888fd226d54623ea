"""`dvtool delete --where` on Iceberg tables: merge-on-read deletes, as Iceberg Spark writes them.

The plan and scan are `iceberg_plan`'s. Then, per touched data file:

- every row gone (new matches with what was deleted before): the data file is removed,
  with the delete files that apply to it alone (its DV; position delete files that name
  only it);
- v2 tables: the new positions go into position delete files, one per partition
  (`iceberg.delete_files`), sorted by (file_path, pos), with `file_path` bounds and
  `referenced_data_file` when a file holds deletes of one data file;
- v3 tables: one Puffin file with a deletion vector per data file; each DV merges the file's
  old DV, the positions of the position delete files that applied to it and the new ones;
  the old DV entry and the position delete files naming only that file are removed in the
  same snapshot (the spec allows one DV per data file).

The commit goes through `dvtool.iceberg.transaction`: a snapshot whose operation is Iceberg
Java's for the change (`delete` when only deletes are added or files removed), validated
against what landed meanwhile (`_validate`): a data file the plan touched or read that was
removed, a data file added (it may hold matching rows: the serializable isolation Iceberg
Spark's DELETE uses), or on v3 a delete file added for a file the plan writes a DV for
makes the command plan again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from dvtool.commands.delete.command import MODES, DeleteRequest, FileChange
from dvtool.commands.delete.iceberg_cow import cow_changes, write_cow
from dvtool.commands.delete.iceberg_plan import (
    Plan,
    Touched,
    parse_predicate,
    plan_delete,
    scan_files,
    whole_files,
)
from dvtool.commands.result import CommandResult
from dvtool.errors import CommitConflictError, UsageError, WriteRefusedError
from dvtool.iceberg.delete_files import FileNamer
from dvtool.iceberg.live_files import DeletedBefore
from dvtool.iceberg.row_deletes import EntryKey, file_scoped, write_dvs, write_position_files
from dvtool.iceberg.snapshot_producer import SnapshotChanges
from dvtool.iceberg.transaction import Prepared, Written, commit_transaction

if TYPE_CHECKING:
    from dvtool.engines.base import Engine, Progress
    from dvtool.iceberg.concurrent_changes import ConcurrentChanges
    from dvtool.iceberg.tables import IcebergTable
    from dvtool.storage.data_file_storage import DataFileStorage

MAX_PLANS = 10
DELETE_MODE_PROPERTY = "write.delete.mode"
MERGE_ON_READ = "merge-on-read"


@dataclass(frozen=True)
class IcebergDeleteResult(CommandResult):
    """The outcome: the committed snapshot (None for a dry run or when nothing matched)."""

    snapshot_id: int | None
    base_snapshot_id: int | None
    format_version: int
    dry_run: bool
    mode: str
    files_skipped: int
    files_scanned: int
    changes: list[FileChange]
    metrics: dict[str, int]
    attempts: int = 1
    retries: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "iceberg",
            "snapshot_id": self.snapshot_id,
            "base_snapshot_id": self.base_snapshot_id,
            "format_version": self.format_version,
            "dry_run": self.dry_run,
            "mode": self.mode,
            "files_skipped": self.files_skipped,
            "files_scanned": self.files_scanned,
            "metrics": dict(self.metrics),
            "attempts": self.attempts,
            "retries": self.retries,
            "files": [c.to_json() for c in self.changes],
        }


@dataclass
class _Attempt:
    """One plan's scan result and what it writes."""

    plan: Plan
    touched: list[Touched]
    changes: list[FileChange] = field(default_factory=list)
    removed: set[EntryKey] = field(default_factory=set)


def run_delete_iceberg(
    table: IcebergTable,
    request: DeleteRequest,
    storage: DataFileStorage,
    engine: Engine | None = None,
    progress: Callable[[int], Progress] | None = None,
    engine_for: Callable[[int], Engine] | None = None,
) -> IcebergDeleteResult:
    """Delete the rows matching `request.where` (see the module docstring); `storage` reads
    the data files. The scan (and a copy-on-write delete's rewrite) runs on `engine`, else
    on `engine_for(bytes to scan)`, chosen by the first plan, else arrow."""
    mode = _choose_mode(table, request.mode)
    if request.now is None:
        request = replace(request, now=datetime.now(timezone.utc))
    chosen = engine

    def prepare(base: IcebergTable, written: Written) -> Prepared[IcebergDeleteResult]:
        nonlocal chosen
        started = time.monotonic()
        predicate = parse_predicate(base, request.where, request.now)
        plan = plan_delete(base, predicate)
        chosen = chosen or _engine(plan, engine_for)
        attempt = _scan(plan, storage, chosen, progress)
        if mode == "cow":
            attempt.changes = cow_changes(attempt.changes)
        scan_ms = int((time.monotonic() - started) * 1000)
        if request.dry_run or not attempt.touched:
            return Prepared(_result(attempt, mode, request.dry_run, {"scanTimeMs": scan_ms}))
        if mode == "cow":
            cow = write_cow(plan, attempt.touched, written, chosen)
            changes, metrics, validate = cow.changes, cow.metrics, cow.validate
        else:
            changes, metrics = _write(attempt, written)
            validate = lambda c: _validate(attempt, c)  # noqa: E731
        metrics.update(scanTimeMs=scan_ms, executionTimeMs=int((time.monotonic() - started) * 1000))
        return Prepared(_result(attempt, mode, False, metrics), changes, validate)

    outcome = commit_transaction(table, prepare, plans=MAX_PLANS)
    return replace(
        outcome.value,
        snapshot_id=outcome.snapshot_id,
        attempts=outcome.plans,
        retries=outcome.retries,
    )


def scan_storage(table: IcebergTable, storage_options: dict[str, str]) -> DataFileStorage:
    """The storage the engines read the table's data files with: the table folder's for a
    path table, else one for the table's location with the storage options."""
    if table.storage is not None:
        return table.storage
    from dvtool.storage.table_storage import Storage

    return Storage.for_table(table.location, storage_options)


def _engine(plan: Plan, engine_for: Callable[[int], Engine] | None) -> Engine:
    """`engine_for(bytes to scan)` (`--engine`, `--spark-threshold`: as for a Delta table),
    else arrow."""
    from dvtool.engines.arrow import ArrowEngine

    if engine_for is None:
        return ArrowEngine()
    return engine_for(sum(live.entry.file_size_in_bytes for live in plan.scan))


def _choose_mode(table: IcebergTable, requested: str) -> str:
    """Merge-on-read (`dv`: position deletes on v2, DVs on v3) when asked for, or with
    `auto` when `write.delete.mode` is merge-on-read; else copy-on-write (`cow`,
    `iceberg_cow`), Iceberg's default."""
    if requested not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, not {requested!r}")
    version = table.metadata.format_version
    configured = table.metadata.properties.get(DELETE_MODE_PROPERTY, "copy-on-write")
    cow = requested == "cow" or (requested == "auto" and configured != MERGE_ON_READ)
    if version < 2:
        raise WriteRefusedError(
            "dvtool writes Iceberg tables of format version 2 and 3; this one is version 1",
            hint="Upgrade the table: ALTER TABLE ... SET TBLPROPERTIES ('format-version'='2').",
        )
    return "cow" if cow else "dv"


def _scan(
    plan: Plan,
    storage: DataFileStorage,
    engine: Engine,
    progress: Callable[[int], Progress] | None,
) -> _Attempt:
    deleted = DeletedBefore(plan.table.io, plan.live.index)
    advance = progress(len(plan.scan)) if progress and plan.scan else None
    touched = whole_files(plan, deleted) + scan_files(plan, deleted, storage, engine, advance)
    attempt = _Attempt(plan, [t for t in touched if len(t.new_rows) or t.everything])
    attempt.changes = [_change(t) for t in attempt.touched]
    return attempt


def _change(t: Touched) -> FileChange:
    applied = t.before.applied
    had = applied.deletion_vector is not None or bool(applied.position or applied.equality)
    action = "remove" if t.everything else "dv"
    entry = t.file.entry
    return FileChange(entry.path, action, len(t.new_rows), entry.record_count, had, t.read)


def _result(
    attempt: _Attempt, mode: str, dry_run: bool, metrics: dict[str, int]
) -> IcebergDeleteResult:
    snapshot = attempt.plan.table.metadata.current_snapshot()
    base_metrics = {
        "numDeletedRows": sum(c.deleted_rows for c in attempt.changes),
        "numRemovedFiles": sum(1 for c in attempt.changes if c.action == "remove"),
        "numFilesSkipped": attempt.plan.skipped,
        "numFilesScanned": len(attempt.plan.scan),
    }
    return IcebergDeleteResult(
        None,
        snapshot.snapshot_id if snapshot is not None else None,
        attempt.plan.table.metadata.format_version,
        dry_run,
        mode,
        attempt.plan.skipped,
        len(attempt.plan.scan),
        attempt.changes,
        {**base_metrics, **metrics},
    )


# -- writing ---------------------------------------------------------------------------------


def _write(attempt: _Attempt, written: Written) -> tuple[SnapshotChanges, dict[str, int]]:
    """Write the delete files; the snapshot's changes and the write metrics."""
    table = attempt.plan.table
    metadata = table.metadata
    namer = FileNamer.for_table(table.location, metadata.properties)
    removed = [t for t in attempt.touched if t.everything]
    kept = [t for t in attempt.touched if not t.everything]
    removals: set[EntryKey] = set()
    for t in removed:
        removals.add((t.file.path, None))
        removals |= file_scoped(t.before.applied, t.file.path)
    started = time.monotonic()
    if metadata.format_version >= 3:
        merged = [(t.file, t.new_rows | t.before.positional) for t in kept]
        added = write_dvs(written.io, namer, merged, written)
        for t in kept:
            removals |= file_scoped(t.before.applied, t.file.path)
    else:
        new = [(t.file, t.new_rows) for t in kept]
        added = write_position_files(written.io, namer, metadata, new, written)
    attempt.removed = removals
    metrics = {
        "numAddedDeleteFiles": len({a.data_file.file_path for a in added}),
        "numDeletionVectors": len(added) if metadata.format_version >= 3 else 0,
        "numRemovedDeleteEntries": len(removals) - len(removed),
        "writeTimeMs": int((time.monotonic() - started) * 1000),
    }
    return SnapshotChanges("delete", tuple(added), frozenset(removals)), metrics


# -- validation ------------------------------------------------------------------------------


def _validate(attempt: _Attempt, changes: ConcurrentChanges) -> None:
    """CommitConflictError when what landed since the plan's snapshot invalidates it."""
    read = {live.path for live in attempt.plan.whole + attempt.plan.scan}
    gone = read & changes.removed_data_paths()
    if gone:
        raise CommitConflictError(
            f"{len(gone)} data file(s) this delete read were removed by a concurrent commit"
        )
    if changes.added_data:
        raise CommitConflictError(
            f"{len(changes.added_data)} data file(s) were added concurrently; they may hold "
            "matching rows"
        )
    removed_deletes = {(d.path, d.content_offset) for d in changes.removed_deletes}
    if removed_deletes & attempt.removed:
        raise CommitConflictError("a delete file this delete replaces was removed concurrently")
    if attempt.plan.table.metadata.format_version >= 3:
        touched = {t.file.path for t in attempt.touched}
        if changes.position_deletes_on(touched):
            raise CommitConflictError(
                "a concurrent commit added deletes to a data file this delete writes a "
                "deletion vector for"
            )
