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
   `_change_data` files when the change data feed is on.
4. Commit: optimistic, put-if-absent; a concurrent commit that conflicts makes the delete
   re-plan from the new snapshot (the predicate is re-evaluated), up to a bound. Files
   written by an abandoned attempt are deleted again.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
from pyroaring import BitMap64

from dvtool import faults
from dvtool.commands.manifest import refresh_manifests_after_commit
from dvtool.core import arrow_values
from dvtool.core.actions import file_action_key
from dvtool.core.commit import add_action_from_row, remove_for_add
from dvtool.core.conflicts import ReadSet
from dvtool.core.deletion_vector import DeletionVectorDescriptor, bitmap_rows
from dvtool.core.features import deletion_vectors_supported, require_writable
from dvtool.data_files import footer_row_count
from dvtool.dvstore import DVStore
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import Engine, RewriteBin, RewriteInput, ScanFile, TableLayout
from dvtool.engines.rewrite import write_change_data
from dvtool.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    UsageError,
    WriteRefusedError,
)
from dvtool.log.reader import DeltaLog
from dvtool.log.snapshot import Snapshot
from dvtool.log.table_root import require_inside_root
from dvtool.log.writer import LogWriter, row_tracked, snapshot_commit_info
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
        return asdict(self)


@dataclass(frozen=True)
class DeleteResult:
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
        out = {k: v for k, v in asdict(self).items() if k != "changes"}
        out["files"] = [c.to_json() for c in self.changes]
        return out


@dataclass
class _Plan:
    snapshot: Snapshot
    predicate: Predicate
    mode: str
    rows: list[dict[str, Any]]
    skipped: int = 0
    whole: list[int] = field(default_factory=list)
    scan: list[int] = field(default_factory=list)


@dataclass
class _Touched:
    index: int
    new_rows: BitMap64
    old_rows: BitMap64 | None
    num_records: int
    read: bool


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
    for attempt in range(1, MAX_REPLANS + 1):
        plan = _plan(log.snapshot(), request)
        if engine is None:
            scan_bytes = sum(plan.rows[i]["size"] for i in plan.scan)
            engine = engine_for(scan_bytes) if engine_for else ArrowEngine()
        try:
            result = _execute(log, plan, request, engine, progress)
        except CommitConflictError:
            if attempt == MAX_REPLANS:
                raise
            continue
        return _with_attempts(result, attempt)
    raise AssertionError("unreachable")


def _with_attempts(result: DeleteResult, attempts: int) -> DeleteResult:
    return DeleteResult(**{**asdict(result), "changes": result.changes, "attempts": attempts})


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
    )
    columns = ["path", "partitionValues", "size", "stats", "numRecords", "deletionVector"]
    rows = snapshot.files.select(columns).to_pylist()
    plan = _Plan(snapshot, predicate, mode, rows)
    for index, row in enumerate(rows):
        verdict = predicate.file_match(dict(row["partitionValues"] or []), _stats(row["stats"]))
        if verdict is Match.NONE:
            plan.skipped += 1
        elif verdict is Match.ALL:
            plan.whole.append(index)
        else:
            plan.scan.append(index)
    return plan


class _JsonNumber(str):
    """The text of a non-integral JSON number, written back verbatim by `_stats_json`."""


def _stats(text: str | None, *, verbatim: bool = False) -> dict[str, Any] | None:
    """The parsed `stats` of an add; None when missing or unreadable.

    For skipping (the default) non-integral numbers are floats: writers such as delta-rs
    store decimal statistics as rounded JSON doubles (12345678901234567.81 is written as
    1.2345678901234568e+16), and only floats are widened by the skipping code into sound
    bounds. `verbatim` keeps their text (`_JsonNumber`), to re-serialize the stats unchanged.
    """
    if not text:
        return None
    try:
        parsed = json.loads(text, parse_float=_JsonNumber) if verbatim else json.loads(text)
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
) -> DeleteResult:
    started = time.monotonic()
    plan.snapshot.require_paths_live_once("DELETE")
    require_inside_root(log.storage, (plan.rows[i] for i in plan.whole + plan.scan), "DELETE")
    store = DVStore(log.storage)
    touched = _whole_files(log, plan, store) + _scan(log, plan, store, engine, progress)
    scan_ms = int((time.monotonic() - started) * 1000)
    changes = [_change(plan, t) for t in touched]
    if request.dry_run or not changes:
        metrics = _metrics(plan, changes, scan_ms, 0, [], [])
        return DeleteResult(
            None,
            plan.snapshot.version,
            request.dry_run,
            plan.mode,
            plan.skipped,
            len(plan.scan),
            changes,
            metrics,
        )
    return _commit(log, plan, touched, changes, store, engine, scan_ms, started)


def _whole_files(log: DeltaLog, plan: _Plan, store: DVStore) -> list[_Touched]:
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
        out.append(_Touched(index, remaining, old, records, read=False))
    return out


def _scan(
    log: DeltaLog,
    plan: _Plan,
    store: DVStore,
    engine: Engine,
    progress: Progress | None,
) -> list[_Touched]:
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
        files.append(ScanFile(row["path"], location, dict(row["partitionValues"] or []), n, old))
        records.append(n)
        olds.append(old)
    if not files:
        return []
    layout = _layout(log, plan.snapshot)
    advance = progress(len(files)) if progress else None
    matches = engine.find_matches(layout, files, plan.predicate, advance)
    return [
        _Touched(index, new, old, n, read=True)
        for index, new, old, n in zip(plan.scan, matches, olds, records, strict=True)
        if len(new)
    ]


def _old_rows(store: DVStore, row: dict[str, Any], records: int) -> BitMap64 | None:
    dv = row["deletionVector"]
    if dv is None:
        return None
    descriptor = DeletionVectorDescriptor.from_json(dv)
    return store.load(descriptor, data_file=row["path"], num_records=records)


def _change(plan: _Plan, t: _Touched) -> FileChange:
    row = plan.rows[t.index]
    old = len(t.old_rows) if t.old_rows is not None else 0
    everything = old + len(t.new_rows) >= t.num_records
    action = "remove" if everything else ("dv" if plan.mode == "dv" else "rewrite")
    return FileChange(
        row["path"], action, len(t.new_rows), t.num_records, t.old_rows is not None, t.read
    )


# -- writing and committing ------------------------------------------------------------------


def _commit(
    log: DeltaLog,
    plan: _Plan,
    touched: Sequence[_Touched],
    changes: Sequence[FileChange],
    store: DVStore,
    engine: Engine,
    scan_ms: int,
    started: float,
) -> DeleteResult:
    snapshot = plan.snapshot
    now = int(time.time() * 1000)
    adds_table = snapshot.files
    written: list[str] = []
    actions: list[dict[str, Any]] = []
    rewrite_started = time.monotonic()
    dv_touched = [(t, c) for t, c in zip(touched, changes, strict=True) if c.action == "dv"]
    cow_touched = [(t, c) for t, c in zip(touched, changes, strict=True) if c.action == "rewrite"]
    try:
        prefix = _random_prefix_length(snapshot)
        bitmaps = [_merged(t) for t, _ in dv_touched]
        descriptors, dv_files = store.write(bitmaps, prefix_length=prefix) if bitmaps else ([], [])
        written += [f.location for f in dv_files]
        for (t, _), descriptor in zip(dv_touched, descriptors, strict=True):
            add_row = adds_table.slice(t.index, 1).to_pylist()[0]
            actions.append(remove_for_add(add_row, now))
            actions.append(_add_with_dv(add_row, descriptor, t.num_records))
        for t, c in zip(touched, changes, strict=True):
            if c.action == "remove":
                actions.append(remove_for_add(adds_table.slice(t.index, 1).to_pylist()[0], now))
        added_files, added_bytes, copied, change_files = _rewrite(
            log, plan, cow_touched, engine, actions, written, now
        )
        if change_files:
            change_files += _removed_change_data(log, plan, touched, changes, actions, written)
        rewrite_ms = int((time.monotonic() - rewrite_started) * 1000)
        metrics = _metrics(plan, changes, scan_ms, rewrite_ms, actions, dv_files)
        metrics.update(
            numAddedFiles=added_files,
            numAddedBytes=added_bytes,
            numCopiedRows=copied,
            numAddedChangeFiles=change_files,
        )
        metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
        txn = str(uuid.uuid4())
        info = snapshot_commit_info(
            snapshot,
            "DELETE",
            {"predicate": [plan.predicate.to_spark_sql()]},
            metrics,
            txn_id=txn,
            now_ms=now,
            copies_rows=bool(cow_touched),
        )
        commit_actions = [info, *actions]
        read_set = ReadSet.for_actions(
            snapshot.version,
            commit_actions,
            read_keys=[_key(plan.rows[t.index]) for t in touched],
            might_match=lambda add: _might_match(plan.predicate, add),
            root=snapshot.root,
        )
        result = LogWriter(log).try_commit(
            snapshot.version,
            row_tracked(snapshot, commit_actions),
            read_set,
            metadata=snapshot.metadata,
        )
    except CommitOutcomeUnknownError:
        raise  # the commit may have landed and name these files: they stay
    except BaseException:
        log.storage.delete_many(written)
        raise
    refresh = refresh_manifests_after_commit(
        log, result.version, result.actions, metadata=snapshot.metadata
    )
    return DeleteResult(
        result.version,
        snapshot.version,
        False,
        plan.mode,
        plan.skipped,
        len(plan.scan),
        list(changes),
        metrics,
        checkpoint_warning=result.checkpoint_warning,
        manifest_warning=refresh.warning if refresh else None,
    )


def _merged(t: _Touched) -> BitMap64:
    merged = BitMap64(t.new_rows)
    if t.old_rows is not None:
        merged |= t.old_rows
    return merged


def _add_with_dv(
    row: dict[str, Any], descriptor: DeletionVectorDescriptor, num_records: int
) -> dict[str, Any]:
    """The re-added file: the original add with the new DV and widened stats."""
    action = add_action_from_row(row, data_change=True)
    body = action["add"]
    body["deletionVector"] = descriptor.to_json()
    stats = _stats(body.get("stats"), verbatim=True) or {}
    stats["numRecords"] = num_records
    stats["tightBounds"] = False
    body["stats"] = _stats_json(
        {"numRecords": num_records, **{k: v for k, v in stats.items() if k != "numRecords"}}
    )
    return action


def _stats_json(value: object) -> str:
    """Compact JSON in which numbers parsed as `_JsonNumber` keep their exact text.

    Converting them to float or Decimal and back would change them: a float rounds exact
    decimal bounds (12345678901234567.81 becomes 12345678901234568), and a Decimal turns a
    rounded double such as 1.2345678901234568e+16 into an integer that readers then take
    as exact. Either way a min rounded up or a max rounded down makes readers (and later
    deletes) skip files that hold matching rows, or remove whole files wrongly.
    """
    if isinstance(value, _JsonNumber):
        return str(value)
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}:{_stats_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_stats_json(v) for v in value) + "]"
    return json.dumps(value)


def _rewrite(
    log: DeltaLog,
    plan: _Plan,
    touched: Sequence[tuple[_Touched, FileChange]],
    engine: Engine,
    actions: list[dict[str, Any]],
    written: list[str],
    now: int,
) -> tuple[int, int, int, int]:
    """Copy-on-write: the engine rewrites each touched file without its deleted rows.

    With the change data feed on, the deleted rows also go to `_change_data` files (written
    in-process: they are the few rows the delete matched).
    """
    if not touched:
        return 0, 0, 0, 0
    snapshot = plan.snapshot
    layout = _layout(log, snapshot)
    config = snapshot.metadata.configuration
    cdf = config.get("delta.enableChangeDataFeed", "").lower() == "true"
    rows = arrow_values.array([t.index for t, _ in touched], pa.int64())
    add_rows = snapshot.files.take(rows).to_pylist()
    bins = [
        _rewrite_bin(log, add_row, _merged(t))
        for (t, _), add_row in zip(touched, add_rows, strict=True)
    ]
    outputs = engine.rewrite(layout, config, bins)
    written.extend(out.location for out in outputs if out is not None)
    faults.reached("data-files-written")
    added = added_bytes = copied = change_files = 0
    for (t, _), add_row, out in zip(touched, add_rows, outputs, strict=True):
        actions.append(remove_for_add(add_row, now))
        if out is not None:
            # No `clusteringProvider`: PROTOCOL.md sets it only "when a clustering
            # implementation clusters files", and Delta Spark's DELETE rewrites (plain file
            # writes) claim none; it used to be copied from the input here.
            actions.append(out.add_action(dict(add_row["partitionValues"] or []), data_change=True))
            added += 1
            added_bytes += out.size
            copied += out.num_records
        if cdf and len(t.new_rows):
            cdc_action, location = write_change_data(layout, add_row, bitmap_rows(t.new_rows))
            written.append(location)
            actions.append(cdc_action)
            change_files += 1
    return added, added_bytes, copied, change_files


def _rewrite_bin(log: DeltaLog, add_row: dict[str, Any], drop: BitMap64) -> RewriteBin:
    location = log.storage.resolve(add_row["path"])
    relative = log.storage.relative_to_root(location) or ""
    directory = relative.rsplit("/", 1)[0] if "/" in relative else ""
    partitions = dict(add_row["partitionValues"] or [])
    source = RewriteInput(
        add_row["path"],
        location,
        bitmap_rows(drop),
        add_row.get("baseRowId"),
        add_row.get("defaultRowCommitVersion"),
    )
    return RewriteBin((source,), directory, partitions)


def _removed_change_data(
    log: DeltaLog,
    plan: _Plan,
    touched: Sequence[_Touched],
    changes: Sequence[FileChange],
    actions: list[dict[str, Any]],
    written: list[str],
) -> int:
    """Change data for the files removed whole, when the commit carries change data anyway.

    A change data feed reader takes the `cdc` files of a commit that has any as its whole
    change set, so the rows of files removed without a rewrite must be written there too.
    (A commit without `cdc` files needs none: readers derive the deleted rows from its
    removed files and their DVs.)
    """
    layout = _layout(log, plan.snapshot)
    count = 0
    for t, c in zip(touched, changes, strict=True):
        if c.action != "remove" or not len(t.new_rows):
            continue
        add_row = plan.snapshot.files.slice(t.index, 1).to_pylist()[0]
        action, location = write_change_data(layout, add_row, bitmap_rows(t.new_rows))
        written.append(location)
        actions.append(action)
        count += 1
    return count


def _layout(log: DeltaLog, snapshot: Snapshot) -> TableLayout:
    return TableLayout.of(log.storage, snapshot)


def _random_prefix_length(snapshot: Snapshot) -> int:
    config = snapshot.metadata.configuration
    if config.get("delta.randomizeFilePrefixes", "").lower() != "true":
        return 0
    try:
        return max(1, int(config.get("delta.randomPrefixLength", "2")))
    except ValueError:
        return 2


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
    dv_files: Sequence[Any],
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
