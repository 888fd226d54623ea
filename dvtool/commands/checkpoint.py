"""`dvtool checkpoint`: write a checkpoint of the latest version now, then clean up the log.

Readers rebuild a version from the newest checkpoint at or before it plus the commits after;
writers checkpoint every `delta.checkpointInterval` commits, but a table written by a tool
that never checkpoints (or a long run of commits) makes every read replay them all. This
writes the checkpoint of the latest version (classic name, V2 spec on v2Checkpoint tables,
`_last_checkpoint` moved to it; `dvtool.log.checkpoint_writer`), unless that version already
has a complete checkpoint, and then runs the log cleanup Delta runs after a checkpoint
(`dvtool.commands.log_cleanup`), unless `delta.enableExpiredLogCleanup` is false. A failed
cleanup is a warning: the checkpoint stands.

The checkpoint is of a version that exists, so a commit that lands meanwhile changes nothing:
it is simply newer than the checkpoint. A table feature dvtool cannot write is refused as for
`vacuum` (UnsupportedFeatureError), before anything is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from dvtool.commands.result import CommandResult
from dvtool.core.features import require_writable
from dvtool.core.log_files import complete_checkpoints
from dvtool.log.checkpoint_writer import CheckpointInfo, one_line, write_checkpoint
from dvtool.log.cleanup import LogCleanupResult, cleanup_after_checkpoint
from dvtool.log.reader import DeltaLog
from dvtool.log.snapshot import Snapshot


@dataclass(frozen=True)
class CheckpointResult(CommandResult):
    """The checkpoint of `version`: `written` is False when the version already had a
    complete checkpoint (`names` are then its files); `log_cleanup` is the cleanup after it
    (None when `delta.enableExpiredLogCleanup` is false or it failed: see `warnings`)."""

    version: int
    written: bool
    names: tuple[str, ...]
    info: CheckpointInfo | None = None
    log_cleanup: LogCleanupResult | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        info = self.info
        return {
            "operation": "CHECKPOINT",
            "version": self.version,
            "written": self.written,
            "files": list(self.names),
            "num_actions": info.size if info else None,
            "size_in_bytes": info.size_in_bytes if info else None,
            "num_add_files": info.num_add_files if info else None,
            "v2": info.v2 if info else None,
            "log_cleanup": self.log_cleanup.to_json() if self.log_cleanup else None,
            "warnings": list(self.warnings),
        }


def run_checkpoint(log: DeltaLog, now_ms: int | None = None) -> CheckpointResult:
    """Write a checkpoint of the latest version of `log`'s table (unless it has one), then
    clean up the log. `now_ms` is the time of the checkpoint's tombstone expiry and of the
    cleanup's retention (default: now)."""
    snapshot = log.snapshot()
    require_writable(snapshot.protocol, snapshot.metadata, "vacuum")
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    existing = complete_checkpoints(log.list_files(start_after=f"{snapshot.version:020d}"))
    version = snapshot.version
    if version in existing:
        names = tuple(f.name for f in existing[version])
        result = CheckpointResult(version, False, names)
    else:
        info = write_checkpoint(log, version, snapshot, now)
        result = CheckpointResult(version, True, (info.name,), info)
    return _clean_up(log, snapshot, now, result)


def _clean_up(
    log: DeltaLog, snapshot: Snapshot, now_ms: int, result: CheckpointResult
) -> CheckpointResult:
    """`result` with the log cleanup after the checkpoint, or its failure as a warning."""
    try:
        cleanup = cleanup_after_checkpoint(log, snapshot, now_ms)
    except Exception as e:  # the checkpoint stands whatever happens here
        warning = f"the log cleanup after the checkpoint failed: {one_line(e)}"
        return replace(result, warnings=[warning])
    warnings = [f"the log cleanup stopped: {cleanup.error}"] if cleanup and cleanup.error else []
    return replace(result, log_cleanup=cleanup, warnings=warnings)
