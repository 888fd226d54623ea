"""The log's side of metadata cleanup (PROTOCOL.md "Metadata Cleanup"): delete the expired
entries of `_delta_log`, for `dvtool vacuum --log` (`dvtool.commands.log_cleanup`) and after
every checkpoint dvtool writes (`dvtool.delta.log.checkpoint_writer`).

The rules (which commit and checkpoint are the cutoff, what goes) are the pure planner's,
`dvtool.delta.protocol.log_cleanup`; this module lists the log, reads the in-commit timestamps and
checkpoints the plan needs, and deletes:

- nothing when `delta.enableExpiredLogCleanup` is false (the result says so), nor when a
  property the rules need cannot be read (WriteRefusedError, exit 7);
- the cutoff checkpoint is read (each part's parquet footer, or its JSON, and the sidecars
  it references must exist) before anything older is deleted: a log never starts at a
  checkpoint no reader can open;
- right before deleting, the cutoff checkpoint's parts are checked again (a concurrent
  cleanup may have moved on); then the files go oldest version first (commit, checksum,
  checkpoint of each version, sidecars last), in batches, so that a cleanup killed at any
  point leaves a log whose every version from the cutoff checkpoint on reads as before;
- `_last_checkpoint` is never deleted (its version bounds the cutoff checkpoint instead), and
  nothing at or after the cutoff checkpoint's version is ever touched.

A storage error stops the deletion; the result names what was deleted and the error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.log_cleanup import (
    SIDECAR_DIR,
    STAGED_COMMITS_DIR,
    CleanupPolicy,
    CommitTimeline,
    Cutoff,
    ExpiredFile,
    LogEntry,
    cleanup_policy,
    cutoff_timestamp,
    expired_entries,
    expired_sidecars,
    find_cutoff,
    sidecar_cutoff,
    sidecar_holders,
)
from dvtool.delta.protocol.log_files import LogFile, LogFileKind, parse_log_name
from dvtool.delta.protocol.log_json import first_commit_info
from dvtool.errors import DvtoolError, FileMissingError, StorageError

DISABLED_REASON = "delta.enableExpiredLogCleanup is false: the table keeps its whole log"
# Files per delete request: object stores take up to 1000 keys in one bulk delete.
_BATCH = 256


@dataclass(frozen=True)
class LogCleanupResult:
    """What the log cleanup deleted, or would delete under `dry_run`.

    `version` is the table version whose properties governed it; `cutoff_timestamp_ms` is
    the cutOffTimestamp (midnight UTC of now - `retention_ms`); `cutoff_commit` and
    `cutoff_checkpoint` are the protocol's cutoffCommit and cutOffCheckpoint (None when there
    is none). `files` are the deleted (planned) log entries, oldest first, and
    `deleted_files`/`deleted_bytes` their count and size. `reason` says why nothing was
    deleted, `error` why deleting stopped early.
    """

    version: int
    dry_run: bool
    enabled: bool
    retention_ms: int
    cutoff_timestamp_ms: int
    cutoff_commit: int | None = None
    cutoff_checkpoint: int | None = None
    files: tuple[ExpiredFile, ...] = ()
    deleted_files: int = 0
    deleted_bytes: int = 0
    reason: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "LOG CLEANUP",
            "version": self.version,
            "dry_run": self.dry_run,
            "enabled": self.enabled,
            "retention_ms": self.retention_ms,
            "cutoff_timestamp_ms": self.cutoff_timestamp_ms,
            "cutoff_commit": self.cutoff_commit,
            "cutoff_checkpoint": self.cutoff_checkpoint,
            "deleted_files": self.deleted_files,
            "deleted_bytes": self.deleted_bytes,
            "files": [{"name": f.name, "size": f.size, "version": f.version} for f in self.files],
            "reason": self.reason,
            "error": self.error,
        }

    def to_dict(self) -> dict[str, Any]:
        """The dict `dvtool vacuum --log --json` prints for this result (a command result,
        like those of `dvtool.commands`, defined here because checkpoints return it too)."""
        return self.to_json()


def cleanup_after_checkpoint(
    log: DeltaLog, snapshot: Snapshot, now_ms: int
) -> LogCleanupResult | None:
    """The cleanup Delta runs after writing a checkpoint (of `snapshot`'s version): None when
    `delta.enableExpiredLogCleanup` is false. Raises what `cleanup_policy` and the storage
    raise; the caller's commit stands regardless."""
    policy = cleanup_policy(snapshot.protocol, snapshot.metadata)
    if not policy.enabled:
        return None
    return clean_up_log(log, snapshot.version, policy, now_ms, dry_run=False)


def clean_up_log(
    log: DeltaLog, version: int, policy: CleanupPolicy, now_ms: int, dry_run: bool
) -> LogCleanupResult:
    """Plan the cleanup for `policy` at `now_ms` and, unless `dry_run`, delete."""
    cutoff_ms = cutoff_timestamp(now_ms, policy.retention_ms)
    base = LogCleanupResult(version, dry_run, policy.enabled, policy.retention_ms, cutoff_ms)
    if not policy.enabled:
        return _replace(base, reason=DISABLED_REASON)
    cutoff, files, reason = _plan(log, policy, now_ms, cutoff_ms)
    result = _replace(
        base,
        cutoff_commit=cutoff.cutoff_commit,
        cutoff_checkpoint=cutoff.checkpoint_version if cutoff.reason is None else None,
        reason=reason,
    )
    if reason is not None or dry_run:
        return _replace(result, files=tuple(files))
    gone = _missing_part(log, cutoff)
    if gone is not None:
        return _replace(result, reason=gone)
    deleted, error = delete_log_entries(log, files)
    return _replace(result, files=tuple(files[:deleted]), error=error)


def _replace(result: LogCleanupResult, **changes: Any) -> LogCleanupResult:
    """`result` with `changes`, the counts following `files`."""
    changed = replace(result, **changes)
    size = sum(f.size for f in changed.files)
    return replace(changed, deleted_files=len(changed.files), deleted_bytes=size)


# -- planning ---------------------------------------------------------------------------------


def _plan(
    log: DeltaLog, policy: CleanupPolicy, now_ms: int, cutoff_ms: int
) -> tuple[Cutoff, list[ExpiredFile], str | None]:
    """The cutoff, the files to delete in order, and why nothing goes (or None)."""
    entries = list_log_entries(log)
    files = [f for e in entries if (f := _log_file(e)) is not None]
    commits = [f for f in files if f.kind == LogFileKind.COMMIT]
    timeline = CommitTimeline(commits, policy.ict_from, _ict_reader(log))
    hint = log.last_checkpoint_hint()
    cutoff = find_cutoff(files, timeline, cutoff_ms, policy.protected_before, hint)
    if cutoff.reason is not None or cutoff.checkpoint_version is None:
        return cutoff, [], cutoff.reason
    boundary = cutoff.checkpoint_version
    expired = expired_entries(entries + list_log_entries(log, STAGED_COMMITS_DIR), boundary)
    sidecars = list_log_entries(log, SIDECAR_DIR)
    written_before = sidecar_cutoff(now_ms, cutoff_ms)
    old_sidecars = expired_sidecars(sidecars, (), written_before)
    nothing = f"nothing before the cutoff checkpoint (version {boundary}) to delete"
    if not expired and not old_sidecars:
        return cutoff, [], nothing
    problem = _unreadable(log, cutoff.checkpoint, sidecars)
    if problem is not None:
        return cutoff, [], problem
    if old_sidecars:  # reading the remaining checkpoints is needed only then
        referenced = referenced_sidecars(log, sidecar_holders(files, boundary))
        expired += expired_sidecars(sidecars, referenced, written_before)
    return (cutoff, expired, None) if expired else (cutoff, [], nothing)


def _log_file(entry: LogEntry) -> LogFile | None:
    return parse_log_name(entry.name, entry.size, entry.modification_time_ms)


def _ict_reader(log: DeltaLog) -> Callable[[LogFile], int | None]:
    """Reads a commit's in-commit timestamp (None when it has none or is gone)."""
    storage = log.storage

    def read(f: LogFile) -> int | None:
        try:
            info = first_commit_info(storage.read(storage.join(f"_delta_log/{f.name}"))) or {}
        except FileMissingError:
            return None
        ict = info.get("inCommitTimestamp")
        return ict if type(ict) is int else None

    return read


def _unreadable(
    log: DeltaLog, checkpoint: Sequence[LogFile], sidecars: Sequence[LogEntry]
) -> str | None:
    """Why the cutoff checkpoint cannot be the log's new start, or None: a part that does not
    open, or a sidecar it references that is missing."""
    names = ", ".join(p.name for p in checkpoint)
    try:
        needed = referenced_sidecars(log, checkpoint)
    except (DvtoolError, ValueError, OSError) as e:
        return f"the cutoff checkpoint {names} cannot be read ({e}); nothing was deleted"
    present = {e.name.rpartition("/")[2] for e in sidecars}
    missing = sorted(needed - present)
    if missing:
        return (
            f"the cutoff checkpoint {names} references missing sidecar(s) "
            f"{', '.join(missing[:3])}; nothing was deleted"
        )
    return None


# -- the log's files ------------------------------------------------------------------------


def list_log_entries(log: DeltaLog, subdirectory: str | None = None) -> list[LogEntry]:
    """The files directly in `_delta_log` (or its `subdirectory`), names relative to it."""
    storage = log.storage
    prefix = f"{subdirectory}/" if subdirectory else ""
    location = storage.join(f"_delta_log/{subdirectory}") if subdirectory else log.log_dir
    return [
        LogEntry(prefix + info.name, info.size, info.modification_time_ms)
        for info in storage.list_dir(location)
    ]


def referenced_sidecars(log: DeltaLog, checkpoints: Iterable[LogFile]) -> set[str]:
    """File names of the sidecars the given checkpoints reference (reading each checkpoint's
    `sidecar` actions: the JSON lines, or the parquet column when the file has one)."""
    import pyarrow.parquet as pq  # local: only cleanups with a cutoff checkpoint need it

    storage = log.storage
    out: set[str] = set()
    for f in checkpoints:
        location = storage.join(f"_delta_log/{f.name}")
        if f.name.endswith(".json"):
            for line in storage.read(location).splitlines():
                if b'"sidecar"' in line:
                    action = json.loads(line)
                    body = action.get("sidecar") if isinstance(action, dict) else None
                    if isinstance(body, dict):
                        out.add(str(body.get("path", "")).rsplit("/", 1)[-1])
            continue
        with storage.open_parquet(location) as source:
            parquet = pq.ParquetFile(source)
            if "sidecar" not in parquet.schema_arrow.names:
                continue
            column = parquet.read(columns=["sidecar"]).column("sidecar")
        for row in column.to_pylist():
            if row and row.get("path"):
                out.add(str(row["path"]).rsplit("/", 1)[-1])
    return out


def delete_log_entries(log: DeltaLog, files: Sequence[ExpiredFile]) -> tuple[int, str | None]:
    """Delete `files` (names under `_delta_log`) in their order, in batches; (how many were
    deleted, the error that stopped it or None). Files already gone count as deleted."""
    storage = log.storage
    done = 0
    for start in range(0, len(files), _BATCH):
        batch = files[start : start + _BATCH]
        try:
            storage.delete_many(storage.join(f"_delta_log/{f.name}") for f in batch)
        except StorageError as e:
            return done, f"deleting stopped after {done} of {len(files)} files: {e.message}"
        done += len(batch)
    return done, None


def _missing_part(log: DeltaLog, cutoff: Cutoff) -> str | None:
    """Why the cleanup must not start after all, checked right before deleting: a part of
    the cutoff checkpoint is gone (another cleanup moved on, or someone deleted it)."""
    storage = log.storage
    for part in cutoff.checkpoint:
        if not storage.exists(storage.join(f"_delta_log/{part.name}")):
            return (
                f"the cutoff checkpoint {part.name} disappeared before the cleanup started; "
                "nothing was deleted"
            )
    return None
