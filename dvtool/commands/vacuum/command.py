"""`dvtool vacuum`: delete the files a table no longer needs, as Delta's VACUUM does.

1. Retention (`retention`). Files are protected for `--retain` (default: the table's
   `delta.deletedFileRetentionDuration`); the cutoff is now - retention. A retention
   shorter than the table's is refused unless forced.
2. What is kept (`keep`, `log_paths`). Every live add's data file and DV file,
   every remove (tombstone) not older than the cutoff with its DV file. Every path from the
   log is decoded once; paths outside the table root cannot be kept and are reported as
   ignored.
3. Candidates. Full vacuum (`listing`) lists the table directory by Delta's
   hidden-file rules (`layout`: no `_delta_log`, no names starting with `_` or `.`
   except `_change_data` and partition directories, no `metadata/` of a UniForm Iceberg
   table); every file there that is not kept and was last modified before the cutoff goes.
   `--lite` (`lite`) reads candidates from the log instead: the files of expired
   removes and the change data files of the commits since the last vacuum.
4. Deleting (here and `delete`). The list (`plan`) is computed once (a dry run
   prints exactly it), recorded in a `VACUUM START` commit, deleted in parallel, and a
   `VACUUM END` commit records the outcome; on local disk the Hadoop checksum files
   (`.NAME.crc`) of the deleted files go with them, as with Delta Spark, and empty
   directories are removed afterwards. `_delta_log/_last_vacuum_info` (`last_info`)
   records the newest commit whose removed files have been dealt with, where the next
   `--lite` run starts.

Nothing is ever deleted outside the table root: candidates come only from the listing of the
root or, for `--lite`, from log paths that are free of `..` segments, lie inside the root, and
still do once symbolic links are resolved; each is checked again just before deletion.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dvtool import interrupts
from dvtool.commands.result import CommandResult
from dvtool.commands.vacuum.delete import (
    FailedDelete,
    Progress,
    remove_checksum_sidecars,
    remove_empty_directories,
)
from dvtool.commands.vacuum.delete import delete_files as _delete
from dvtool.commands.vacuum.keep import KeepSet, referenced_files
from dvtool.commands.vacuum.last_info import (
    LAST_VACUUM_INFO,
    LAST_VACUUM_KEY,
    last_vacuum_info_json,
    latest_commit_outside_retention,
    read_last_vacuum_info,
)
from dvtool.commands.vacuum.layout import (
    CHANGE_DATA_DIR,
    ICEBERG_METADATA_DIR,
    VacuumLayout,
    vacuum_layout,
)
from dvtool.commands.vacuum.listing import full_candidates
from dvtool.commands.vacuum.lite import lite_candidates, lite_plan
from dvtool.commands.vacuum.log_paths import MAX_IGNORED_REPORTED, IgnoredPath, LogPathResolver
from dvtool.commands.vacuum.plan import (
    EXPIRED_CHANGE_DATA,
    EXPIRED_TOMBSTONE,
    ORPHAN_DATA,
    ORPHAN_DV,
    STALE_TEMP_FILE,
    VacuumFile,
)
from dvtool.commands.vacuum.retention import (
    RetentionWindow,
    format_duration,
    parse_duration,
    retention_window,
)
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.log.transaction import Prepared, Written, commit_transaction
from dvtool.delta.log.writer import CommitResult, snapshot_commit_info
from dvtool.delta.protocol.conflicts import ReadSet
from dvtool.delta.protocol.features import require_writable
from dvtool.errors import DvtoolError, StorageError
from dvtool.storage.table_storage import Storage

__all__ = [
    "CHANGE_DATA_DIR",
    "EXPIRED_CHANGE_DATA",
    "EXPIRED_TOMBSTONE",
    "ICEBERG_METADATA_DIR",
    "LAST_VACUUM_INFO",
    "LAST_VACUUM_KEY",
    "MAX_IGNORED_REPORTED",
    "ORPHAN_DATA",
    "ORPHAN_DV",
    "STALE_TEMP_FILE",
    "FailedDelete",
    "IgnoredPath",
    "Progress",
    "VacuumFile",
    "VacuumRequest",
    "VacuumResult",
    "format_duration",
    "last_vacuum_info_json",
    "parse_duration",
    "read_last_vacuum_info",
    "run_vacuum",
]

_END_ATTEMPTS = 5


@dataclass(frozen=True)
class VacuumRequest:
    """What `dvtool vacuum` was asked to do.

    `retain_ms`: the retention (None: the table's). `force`: allow a retention shorter than
    the table's (dangerous: concurrent readers and time travel may lose files they need).
    `lite`: take candidates from the log instead of listing the table directory.
    """

    retain_ms: int | None = None
    dry_run: bool = False
    lite: bool = False
    force: bool = False


@dataclass(frozen=True)
class VacuumResult(CommandResult):
    """The outcome. `files` is the list to delete (a dry run stops there)."""

    read_version: int
    dry_run: bool
    lite: bool
    retention_ms: int
    specified_retention_ms: int | None
    default_retention_ms: int | None
    cutoff_ms: int
    files: list[VacuumFile]
    deleted_files: int = 0
    deleted_bytes: int = 0
    deleted_directories: int = 0
    failed: list[FailedDelete] = field(default_factory=list)
    start_version: int | None = None
    end_version: int | None = None
    lite_commits: tuple[int, int] | None = None
    last_vacuum_version: int | None = None
    ignored_log_paths: list[IgnoredPath] = field(default_factory=list)
    num_ignored_log_paths: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def num_files(self) -> int:
        return len(self.files)

    @property
    def num_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "read_version": self.read_version,
            "dry_run": self.dry_run,
            "lite": self.lite,
            "retention_ms": self.retention_ms,
            "specified_retention_ms": self.specified_retention_ms,
            "default_retention_ms": self.default_retention_ms,
            "cutoff_ms": self.cutoff_ms,
            "num_files": self.num_files,
            "num_bytes": self.num_bytes,
            "files": [f.to_json() for f in self.files],
            "deleted_files": self.deleted_files,
            "deleted_bytes": self.deleted_bytes,
            "deleted_directories": self.deleted_directories,
            "failed": [f.to_json() for f in self.failed],
            "start_version": self.start_version,
            "end_version": self.end_version,
            "lite_commits": list(self.lite_commits) if self.lite_commits else None,
            "last_vacuum_version": self.last_vacuum_version,
            "num_ignored_log_paths": self.num_ignored_log_paths,
            "ignored_log_paths": [p.to_json() for p in self.ignored_log_paths],
            "warnings": list(self.warnings),
        }


def run_vacuum(
    log: DeltaLog,
    request: VacuumRequest,
    progress: Progress | None = None,
    now_ms: int | None = None,
) -> VacuumResult:
    """List (or, with `dry_run`, only list) and delete the files the table no longer needs.

    `now_ms` (default: the clock) sets the cutoff `now - retention`.
    """
    snapshot = log.snapshot()
    require_writable(snapshot.protocol, snapshot.metadata, "VACUUM")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    window = retention_window(snapshot.metadata, request.retain_ms, request.force, now)
    layout = vacuum_layout(log.storage, snapshot)
    paths = LogPathResolver(log.storage)
    keep = referenced_files(snapshot, window.cutoff_ms, paths)
    last_vacuum = read_last_vacuum_info(log)
    found = _find_candidates(
        log, snapshot, request, window.cutoff_ms, keep, layout, paths, last_vacuum
    )
    found.files.sort(key=lambda f: f.path)
    result = VacuumResult(
        read_version=snapshot.version,
        dry_run=request.dry_run,
        lite=request.lite,
        retention_ms=window.retention_ms,
        specified_retention_ms=request.retain_ms,
        default_retention_ms=window.default_ms,
        cutoff_ms=window.cutoff_ms,
        files=found.files,
        lite_commits=found.lite_commits,
        last_vacuum_version=last_vacuum,
        ignored_log_paths=paths.ignored,
        num_ignored_log_paths=paths.num_ignored,
    )
    if request.dry_run:
        return result
    record = found.record
    if not request.lite:
        # Every file removed by a commit older than the cutoff is dealt with now.
        record = latest_commit_outside_retention(log, window.cutoff_ms, snapshot.version)
    return _execute(log, snapshot, request, result, found.empty_dirs, record, progress, window)


@dataclass
class _Candidates:
    """What a run found to delete: the files, the directories that were empty (full
    vacuum), the commits read (`--lite`) and the version `--lite` may record."""

    files: list[VacuumFile]
    empty_dirs: list[str] = field(default_factory=list)
    lite_commits: tuple[int, int] | None = None
    record: int | None = None


def _find_candidates(
    log: DeltaLog,
    snapshot: Snapshot,
    request: VacuumRequest,
    cutoff: int,
    keep: KeepSet,
    layout: VacuumLayout,
    paths: LogPathResolver,
    last_vacuum: int | None,
) -> _Candidates:
    """The candidates of a full or `--lite` run (from the commits after `last_vacuum`),
    none of them in `keep`."""
    if not request.lite:
        files, empty_dirs = full_candidates(log.storage, keep, layout, cutoff)
        return _Candidates(files, empty_dirs)
    plan = lite_plan(log, snapshot, cutoff, last_vacuum)
    files = lite_candidates(log, plan, keep, layout, paths, cutoff)
    return _Candidates(files, lite_commits=plan.commits, record=plan.record)


# -- deleting ---------------------------------------------------------------------------------
#
# `_execute` looks `_commit_start` and `_delete` up in this module when it runs: the tests
# replace them to fail or race between the steps.


def _execute(
    log: DeltaLog,
    snapshot: Snapshot,
    request: VacuumRequest,
    result: VacuumResult,
    empty_dirs: Sequence[str],
    record: int | None,
    progress: Progress | None,
    window: RetentionWindow,
) -> VacuumResult:
    """Commit VACUUM START, delete the files and the directories left empty, commit VACUUM
    END (FAILED if a file could not be deleted or deleting crashed), and record the run in
    `_last_vacuum_info` when every file was deleted."""
    storage = log.storage
    warnings: list[str] = []
    candidates = {f.path for f in result.files}
    start = _commit_start(log, snapshot, request, result, candidates, window.default_ms)
    if start.checkpoint_warning:
        warnings.append(start.checkpoint_warning)
    try:
        with interrupts.interruptible():
            deleted, failed = _delete(storage, result.files, progress)
            remove_checksum_sidecars(storage, deleted)
            directories = remove_empty_directories(storage, deleted, empty_dirs)
    except BaseException:
        try:
            _commit_end(log, "FAILED", {})
        except Exception as e:  # report the original error, not this one
            warnings.append(f"could not record VACUUM END: {e}")
        raise
    status = "COMPLETED" if not failed else "FAILED"
    metrics = {"numDeletedFiles": len(deleted), "numVacuumedDirectories": directories}
    end_version = _commit_end_reporting(log, status, metrics, warnings)
    last_vacuum = result.last_vacuum_version
    if not failed:
        last_vacuum = _record_last_vacuum(storage, record, last_vacuum, warnings)
    return replace(
        result,
        deleted_files=len(deleted),
        deleted_bytes=sum(f.size for f in deleted),
        deleted_directories=directories,
        failed=failed,
        start_version=start.version,
        end_version=end_version,
        last_vacuum_version=last_vacuum,
        warnings=warnings,
    )


def _record_last_vacuum(
    storage: Storage, record: int | None, last_vacuum: int | None, warnings: list[str]
) -> int | None:
    """Write `record` to `_last_vacuum_info` if it is newer than `last_vacuum`; the version
    recorded afterwards (a write that fails is warned about)."""
    if record is None or (last_vacuum is not None and record <= last_vacuum):
        return last_vacuum
    try:
        storage.write_atomic_replace(storage.join(LAST_VACUUM_INFO), last_vacuum_info_json(record))
    except StorageError as e:
        warnings.append(f"could not write {LAST_VACUUM_INFO}: {e.message}")
        return last_vacuum
    return record


def _commit_start(
    log: DeltaLog,
    snapshot: Snapshot,
    request: VacuumRequest,
    result: VacuumResult,
    candidates: set[str],
    default_ms: int | None,
) -> CommitResult:
    """Commit VACUUM START on the snapshot's version, with the list's size as metrics.

    It conflicts with a concurrent commit that made a file of the list live again (a
    RESTORE); other commits do not matter to the list.
    """
    parameters: dict[str, Any] = {
        "retentionCheckEnabled": not request.force,
        "defaultRetentionMillis": default_ms if default_ms is not None else result.retention_ms,
    }
    if request.retain_ms is not None:
        parameters["specifiedRetentionMillis"] = request.retain_ms
    metrics = {"numFilesToDelete": result.num_files, "sizeOfDataToDelete": result.num_bytes}
    info = snapshot_commit_info(
        snapshot,
        "VACUUM START",
        parameters,
        metrics,
        txn_id=str(uuid.uuid4()),
        now_ms=int(time.time() * 1000),
        is_blind_append=True,
    )
    storage = log.storage

    def re_adds_candidate(add: Mapping[str, Any]) -> bool:
        """A concurrent commit (a RESTORE) made a file of our list live again."""
        path = add.get("path")
        if not isinstance(path, str):
            return False
        try:
            relative = storage.relative_to_root(storage.resolve(path))
        except StorageError:
            return False
        return relative is not None and relative in candidates

    read_set = ReadSet.for_actions(snapshot.version, [info], might_match=re_adds_candidate)
    outcome = commit_transaction(
        log, lambda _s, _w: Prepared(None, [info], read_set), snapshot=snapshot, plans=1
    )
    assert outcome.commit is not None
    return outcome.commit


def _commit_end_reporting(
    log: DeltaLog, status: str, metrics: Mapping[str, int], warnings: list[str]
) -> int | None:
    """Commit VACUUM END once the deletes are done; its version, or None (warned) if it
    could not be committed: the deletes are reported whatever happens here."""
    try:
        end = _commit_end(log, status, metrics)
    except DvtoolError as e:
        warnings.append(f"the files were deleted, but VACUUM END could not be committed: {e}")
        return None
    if end.checkpoint_warning:
        warnings.append(end.checkpoint_warning)
    return end.version


def _commit_end(log: DeltaLog, status: str, metrics: Mapping[str, int]) -> CommitResult:
    """Commit VACUUM END on the latest version; other writers' commits never conflict."""

    def prepare(snapshot: Snapshot, _: Written) -> Prepared[None]:
        info = snapshot_commit_info(
            snapshot,
            "VACUUM END",
            {"status": status},
            metrics,
            txn_id=str(uuid.uuid4()),
            now_ms=int(time.time() * 1000),
            is_blind_append=True,
        )
        return Prepared(None, [info], ReadSet.for_actions(snapshot.version, [info]))

    outcome = commit_transaction(log, prepare, plans=_END_ATTEMPTS)
    assert outcome.commit is not None
    return outcome.commit
