"""`dvtool delete --where`: soft-delete rows by writing deletion vectors, as Delta Spark does.

1. Plan: the predicate is parsed once and judged per live file from partition values and
   stats: no row can match (skip), every row matches (remove the file without reading it),
   or some might (scan).
2. Scan: the engine reads only the predicate's columns of the files to scan, with their
   current DVs applied, and returns the newly matching row indexes per file.
3. Write: per touched file, new DV = old DV | new matches, packed into as few new DV files
   as possible; the commit removes the old (path, DV) and re-adds the path with the new DV.
   A file whose rows are all deleted is only removed. Without `delta.enableDeletionVectors`
   (or with `--mode cow`) touched files are rewritten without the rows instead, with
   `_change_data` files when the change data feed is on. (`dvtool.commands.delete.write`:
   the files written and the commit's file actions.)
4. Commit through `dvtool.delta.log.transaction`: optimistic, put-if-absent; a concurrent commit
   that conflicts makes the delete re-plan from the new snapshot (the predicate is
   re-evaluated), up to a bound. Files written by an attempt that provably did not land are
   deleted again; the post-commit hooks run there too.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from pyroaring import BitMap64

from dvtool.commands.delete.write import Touched, write_files
from dvtool.commands.result import CommandResult
from dvtool.commands.table_damage import explain_damage
from dvtool.data_files import footer_row_count
from dvtool.delta.dvstore import DVStore, WrittenDVFile
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.table_root import require_inside_root
from dvtool.delta.log.transaction import Prepared, Written, commit_transaction
from dvtool.delta.log.writer import row_tracked, snapshot_commit_info
from dvtool.delta.protocol.actions import file_action_key
from dvtool.delta.protocol.conflicts import ReadSet
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.delta.protocol.features import deletion_vectors_supported, require_writable
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import Engine, ScanFile, TableLayout
from dvtool.errors import InvalidInputError, UsageError, WriteRefusedError
from dvtool.predicate import Match, Predicate

MODES = ("auto", "dv", "cow")
MAX_REPLANS = 10
Progress = Callable[[int], Callable[[int], None]]


@dataclass(frozen=True)
class DeleteRequest:
    """What `dvtool delete` was asked to do."""

    where: str
    mode: str = "auto"
    dry_run: bool = False
    now: datetime | None = None
    """What current_date()/current_timestamp() mean in `where`; None: when the command
    starts (fixed for every re-plan)."""


@dataclass(frozen=True)
class FileChange:
    """What the delete does to one live file."""

    path: str
    action: str  # "remove" (every row deleted), "dv" (new or updated DV), "rewrite" (cow)
    deleted_rows: int
    num_records: int | None
    had_dv: bool
    read: bool  # False when the plan removed the file from partition values or stats alone

    def to_json(self) -> dict[str, Any]:
        """As `dataclasses.asdict` (same keys, same order), without its deep copies."""
        return {
            "path": self.path,
            "action": self.action,
            "deleted_rows": self.deleted_rows,
            "num_records": self.num_records,
            "had_dv": self.had_dv,
            "read": self.read,
        }


@dataclass(frozen=True)
class DeleteResult(CommandResult):
    """The outcome: the committed version (None for a dry run or when nothing matched)."""

    version: int | None
    read_version: int
    dry_run: bool
    mode: str
    files_skipped: int
    files_scanned: int
    changes: list[FileChange]
    metrics: dict[str, int]
    attempts: int = 1
    checkpoint_warning: str | None = None
    manifest_warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields as `dataclasses.asdict` has them, `changes` last as `files`.

        Built field by field: `asdict` deep-copies every change, which a delete of thousands
        of files pays for twice (once here, once in `c.to_json()`)."""
        return {
            "version": self.version,
            "read_version": self.read_version,
            "dry_run": self.dry_run,
            "mode": self.mode,
            "files_skipped": self.files_skipped,
            "files_scanned": self.files_scanned,
            "metrics": dict(self.metrics),
            "attempts": self.attempts,
            "checkpoint_warning": self.checkpoint_warning,
            "manifest_warning": self.manifest_warning,
            "files": [c.to_json() for c in self.changes],
        }


@dataclass
class _Plan:
    snapshot: Snapshot
    predicate: Predicate
    mode: str
    rows: list[dict[str, Any]]
    skipped: int = 0
    whole: list[int] = field(default_factory=list)
    scan: list[int] = field(default_factory=list)
    stats_checked: set[int] = field(default_factory=set)  # see ScanFile.stats_checked


def run_delete(
    log: DeltaLog,
    request: DeleteRequest,
    engine: Engine | None = None,
    progress: Progress | None = None,
    engine_for: Callable[[int], Engine] | None = None,
) -> DeleteResult:
    """Delete the rows matching `request.where`; re-plans on conflicting concurrent commits.

    The scan runs on `engine`, else on `engine_for(bytes of the files to scan)`, else arrow.
    """
    if request.mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, not {request.mode!r}")
    if request.now is None:
        request = replace(request, now=datetime.now(timezone.utc))
    chosen = engine

    def prepare(snapshot: Snapshot, written: Written) -> Prepared[DeleteResult]:
        nonlocal chosen
        plan = _plan(snapshot, request)
        if chosen is None:
            scan_bytes = sum(plan.rows[i]["size"] for i in plan.scan)
            chosen = engine_for(scan_bytes) if engine_for else ArrowEngine()
        return _execute(log, plan, request, chosen, progress, written)

    with explain_damage(log.storage.root):
        outcome = commit_transaction(log, prepare, plans=MAX_REPLANS)
    result = replace(outcome.value, attempts=outcome.plans)
    if outcome.commit is None:
        return result
    return replace(
        result,
        version=outcome.commit.version,
        checkpoint_warning=outcome.commit.checkpoint_warning,
        manifest_warning=outcome.commit.manifest_warning,
    )


# -- planning --------------------------------------------------------------------------------


def _plan(snapshot: Snapshot, request: DeleteRequest) -> _Plan:
    mode = _choose_mode(snapshot, request.mode)
    command = "delete dv" if mode == "dv" else "delete cow"
    require_writable(snapshot.protocol, snapshot.metadata, command, snapshot.schema)
    predicate = Predicate.parse(
        request.where,
        snapshot.schema,
        snapshot.metadata.partition_columns,
        snapshot.column_mapping_mode,
        now=request.now,
    )
    columns = ["path", "partitionValues", "size", "stats", "numRecords", "deletionVector"]
    rows = snapshot.files.select(columns).to_pylist()
    plan = _Plan(snapshot, predicate, mode, rows)
    for index, row in enumerate(rows):
        stats = _stats(row["stats"])
        try:
            verdict = predicate.file_match(dict(row["partitionValues"] or []), stats)
        except InvalidInputError as e:  # a partition value a cast of --where cannot read
            raise e.located(row["path"]) from None
        if verdict is Match.NONE:
            plan.skipped += 1
        elif verdict is Match.ALL:
            plan.whole.append(index)
        else:
            plan.scan.append(index)
            if predicate.stats_complete(stats):
                plan.stats_checked.add(index)
    return plan


def _stats(text: str | None) -> dict[str, Any] | None:
    """The parsed `stats` of an add, for skipping; None when missing or unreadable.

    Non-integral numbers are floats: writers such as delta-rs store decimal statistics as
    rounded JSON doubles (12345678901234567.81 is written as 1.2345678901234568e+16), and only
    floats are widened by the skipping code into sound bounds. (The stats the delete writes
    keep their text: `delete_write.widened_stats`.)
    """
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _choose_mode(snapshot: Snapshot, requested: str) -> str:
    """`dv` where the table has deletion vectors enabled (unless `--mode cow`), else `cow`."""
    enabled = snapshot.metadata.configuration.get("delta.enableDeletionVectors", "")
    dv_ok = deletion_vectors_supported(snapshot.protocol) and enabled.lower() == "true"
    if requested == "cow":
        return "cow"
    if requested == "dv" and not dv_ok:
        raise WriteRefusedError(
            "deletion vectors are not enabled on this table (--mode dv)",
            hint="Run `dvtool enable TABLE` first, or use --mode cow to rewrite files.",
        )
    return "dv" if dv_ok else "cow"


# -- execution -------------------------------------------------------------------------------


def _execute(
    log: DeltaLog,
    plan: _Plan,
    request: DeleteRequest,
    engine: Engine,
    progress: Progress | None,
    written: Written,
) -> Prepared[DeleteResult]:
    """Scan, then (unless a dry run or nothing matched) write the DVs or rewritten files and
    build the commit."""
    started = time.monotonic()
    plan.snapshot.require_paths_live_once("DELETE")
    require_inside_root(log.storage, (plan.rows[i] for i in plan.whole + plan.scan), "DELETE")
    store = DVStore(log.storage)
    touched = _whole_files(log, plan, store) + _scan(log, plan, store, engine, progress)
    scan_ms = int((time.monotonic() - started) * 1000)
    changes = [_change(plan, t) for t in touched]
    if request.dry_run or not changes:
        metrics = _metrics(plan, changes, scan_ms, 0, [], [])
        return Prepared(_result(plan, request.dry_run, changes, metrics))
    return _prepare_commit(log, plan, touched, changes, store, engine, scan_ms, started, written)


def _result(
    plan: _Plan, dry_run: bool, changes: list[FileChange], metrics: dict[str, int]
) -> DeleteResult:
    """The result before the commit (its version is set once it lands)."""
    return DeleteResult(
        None,
        plan.snapshot.version,
        dry_run,
        plan.mode,
        plan.skipped,
        len(plan.scan),
        changes,
        metrics,
    )


def _whole_files(log: DeltaLog, plan: _Plan, store: DVStore) -> list[Touched]:
    out = []
    for index in plan.whole:
        row = plan.rows[index]
        records = row["numRecords"]
        if records is None:
            records = footer_row_count(log.storage, log.storage.resolve(row["path"]))
        old = _old_rows(store, row, records)
        remaining = BitMap64()
        remaining.add_range(0, records)
        if old is not None:
            remaining -= old
        out.append(Touched(index, remaining, old, records, read=False))
    return out


def _scan(
    log: DeltaLog,
    plan: _Plan,
    store: DVStore,
    engine: Engine,
    progress: Progress | None,
) -> list[Touched]:
    files: list[ScanFile] = []
    records: list[int] = []
    olds: list[BitMap64 | None] = []
    for index in plan.scan:
        row = plan.rows[index]
        location = log.storage.resolve(row["path"])
        n = row["numRecords"]
        if n is None:
            n = footer_row_count(log.storage, location)
        old = _old_rows(store, row, n)
        values = dict(row["partitionValues"] or [])
        checked = index in plan.stats_checked
        files.append(ScanFile(row["path"], location, values, n, old, stats_checked=checked))
        records.append(n)
        olds.append(old)
    if not files:
        return []
    layout = TableLayout.of(log.storage, plan.snapshot)
    advance = progress(len(files)) if progress else None
    matches = engine.find_matches(layout, files, plan.predicate, advance)
    return [
        Touched(index, new, old, n, read=True)
        for index, new, old, n in zip(plan.scan, matches, olds, records, strict=True)
        if len(new)
    ]


def _old_rows(store: DVStore, row: dict[str, Any], records: int) -> BitMap64 | None:
    dv = row["deletionVector"]
    if dv is None:
        return None
    descriptor = DeletionVectorDescriptor.from_json(dv)
    return store.load(descriptor, data_file=row["path"], num_records=records)


def _change(plan: _Plan, t: Touched) -> FileChange:
    row = plan.rows[t.index]
    old = len(t.old_rows) if t.old_rows is not None else 0
    everything = old + len(t.new_rows) >= t.num_records
    action = "remove" if everything else ("dv" if plan.mode == "dv" else "rewrite")
    return FileChange(
        row["path"], action, len(t.new_rows), t.num_records, t.old_rows is not None, t.read
    )


# -- writing and committing ------------------------------------------------------------------


def _prepare_commit(
    log: DeltaLog,
    plan: _Plan,
    touched: Sequence[Touched],
    changes: list[FileChange],
    store: DVStore,
    engine: Engine,
    scan_ms: int,
    started: float,
    written: Written,
) -> Prepared[DeleteResult]:
    """Write the new DV files (or rewritten files) and build the commit's actions."""
    snapshot = plan.snapshot
    now = int(time.time() * 1000)
    rewrite_started = time.monotonic()
    by_action = _by_action(touched, changes)
    actions, dv_files, rewritten = write_files(
        log.storage, snapshot, by_action, store, engine, written.locations, now
    )
    rewrite_ms = int((time.monotonic() - rewrite_started) * 1000)
    metrics = _metrics(plan, changes, scan_ms, rewrite_ms, actions, dv_files)
    metrics.update(
        numAddedFiles=rewritten.added_files,
        numAddedBytes=rewritten.added_bytes,
        numCopiedRows=rewritten.copied_rows,
        numAddedChangeFiles=rewritten.change_files,
        executionTimeMs=int((time.monotonic() - started) * 1000),
    )
    info = snapshot_commit_info(
        snapshot,
        "DELETE",
        {"predicate": [plan.predicate.to_spark_sql()]},
        metrics,
        txn_id=str(uuid.uuid4()),
        now_ms=now,
        copies_rows=any(c.action == "rewrite" for c in changes),
    )
    commit_actions = [info, *actions]
    read_set = ReadSet.for_actions(
        snapshot.version,
        commit_actions,
        read_keys=[_key(plan.rows[t.index]) for t in touched],
        might_match=lambda add: _might_match(plan.predicate, add),
        root=snapshot.root,
    )
    return Prepared(
        _result(plan, False, changes, metrics), row_tracked(snapshot, commit_actions), read_set
    )


def _by_action(
    touched: Sequence[Touched], changes: Sequence[FileChange]
) -> dict[str, list[Touched]]:
    """The touched files by what the delete does to them (`FileChange.action`), in order."""
    by_action: dict[str, list[Touched]] = {"dv": [], "remove": [], "rewrite": []}
    for t, c in zip(touched, changes, strict=True):
        by_action[c.action].append(t)
    return by_action


def _key(row: dict[str, Any]) -> tuple[str, str | None]:
    return file_action_key(row["path"], row["deletionVector"])


def _might_match(predicate: Predicate, add: Mapping[str, Any]) -> bool:
    values = dict(add.get("partitionValues") or {})
    return predicate.file_match(values, _stats(add.get("stats"))) is not Match.NONE


def _metrics(
    plan: _Plan,
    changes: Sequence[FileChange],
    scan_ms: int,
    rewrite_ms: int,
    actions: Sequence[dict[str, Any]],
    dv_files: Sequence[WrittenDVFile],
) -> dict[str, int]:
    """Delta's DELETE metrics (operationMetrics of the commit)."""
    removed = [c for c in changes if c.action in ("remove", "rewrite")]
    with_dv = [c for c in changes if c.action == "dv"]
    removed_bytes = sum(a["remove"].get("size") or 0 for a in actions if "remove" in a)
    return {
        "numDeletedRows": sum(c.deleted_rows for c in changes),
        "numRemovedFiles": len(removed),
        "numAddedFiles": 0,
        "numCopiedRows": 0,
        "numDeletionVectorsAdded": sum(1 for c in with_dv if not c.had_dv),
        "numDeletionVectorsUpdated": sum(1 for c in with_dv if c.had_dv),
        "numDeletionVectorsRemoved": sum(1 for c in removed if c.had_dv),
        "numAddedChangeFiles": 0,
        "numRemovedBytes": removed_bytes,
        "numAddedBytes": 0,
        "numDeletionVectorFiles": len(dv_files),
        "numFilesSkipped": plan.skipped,
        "numFilesScanned": len(plan.scan),
        "scanTimeMs": scan_ms,
        "rewriteTimeMs": rewrite_ms,
        "executionTimeMs": 0,
    }
