"""`dvtool checkpoint`: write a checkpoint of the latest version now, then clean up the log.

Readers rebuild a version from the newest checkpoint at or before it plus the commits after;
writers checkpoint every `delta.checkpointInterval` commits, but a table written by a tool
that never checkpoints (or a long run of commits) makes every read replay them all. This
writes the checkpoint of the latest version (classic name, V2 spec on v2Checkpoint tables,
`_last_checkpoint` moved to it; `dvtool.delta.log.checkpoint_writer`), unless that version already
has a complete checkpoint, and then runs the log cleanup Delta runs after a checkpoint
(`dvtool.commands.log_cleanup`), unless `delta.enableExpiredLogCleanup` is false. A failed
cleanup is a warning: the checkpoint stands.

A checkpoint of the latest version that cannot be read (truncated, unreadable, a part or a
sidecar missing: the log reader passes over it, other readers fail on it) does not count: a
good one is written in its place (over the damaged file itself when it is UUID-named or
classic; beside an incomplete multi-part one, which readers ignore), atomically, so no reader
ever sees half a checkpoint or none. A `_last_checkpoint` that is not a valid hint, names a
version beyond the log or a checkpoint that does not exist is rewritten to name the
checkpoint written (also when the latest version's checkpoint was good: it is written again).
`repairs` says what was mended.

The checkpoint is of a version that exists, so a commit that lands meanwhile changes nothing:
it is simply newer than the checkpoint. A table feature dvtool cannot write is refused as for
`vacuum` (UnsupportedFeatureError), before anything is written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dvtool.commands.result import CommandResult
from dvtool.delta.log.checkpoint_writer import CheckpointInfo, one_line, write_checkpoint
from dvtool.delta.log.cleanup import LogCleanupResult, cleanup_after_checkpoint
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.features import require_writable
from dvtool.delta.protocol.log_damage import DamagedCheckpoint
from dvtool.delta.protocol.log_files import LogFileKind, complete_checkpoints, parse_log_name


@dataclass(frozen=True)
class CheckpointResult(CommandResult):
    """The checkpoint of `version`: `written` is False when the version already had a
    good checkpoint (`names` are then its files); `repairs` the damage the one written
    mends (a damaged checkpoint it replaces, a `_last_checkpoint` it rewrites), as
    sentences; `log_cleanup` is the cleanup after it (None when
    `delta.enableExpiredLogCleanup` is false or it failed: see `warnings`)."""

    version: int
    written: bool
    names: tuple[str, ...]
    info: CheckpointInfo | None = None
    log_cleanup: LogCleanupResult | None = None
    warnings: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)

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
            "repairs": list(self.repairs),
            "log_cleanup": self.log_cleanup.to_json() if self.log_cleanup else None,
            "warnings": list(self.warnings),
        }


def run_checkpoint(log: DeltaLog, now_ms: int | None = None) -> CheckpointResult:
    """Write a checkpoint of the latest version of `log`'s table (unless it has a good one
    and `_last_checkpoint` names a checkpoint), then clean up the log. `now_ms` is the time
    of the checkpoint's tombstone expiry and of the cleanup's retention (default: now)."""
    snapshot = log.snapshot()
    require_writable(snapshot.protocol, snapshot.metadata, "vacuum")
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    version = snapshot.version
    damaged = [d for d in snapshot.damaged_checkpoints if d.version == version]
    hint = snapshot.last_checkpoint_problem
    if snapshot.checkpoint_version == version and not damaged and hint is None:
        existing = complete_checkpoints(log.list_files(start_after=f"{version:020d}"))
        names = tuple(f.name for f in existing[version])
        result = CheckpointResult(version, False, names)
    else:
        info = write_checkpoint(log, version, snapshot, now, name=_replacing(damaged))
        repairs = [_repair(d, info.name) for d in damaged]
        if hint is not None:
            repairs.append(
                f"rewrote _delta_log/_last_checkpoint to name {info.name}: {hint.message}"
            )
        result = CheckpointResult(version, True, (info.name,), info, repairs=repairs)
    return _clean_up(log, snapshot, now, result)


def _replacing(damaged: Sequence[DamagedCheckpoint]) -> str | None:
    """The UUID-named checkpoint file to write over (readers prefer a UUID-named checkpoint
    to a classic one of the same version, so a classic one beside it would not be read);
    None: the classic name, which replaces a damaged classic checkpoint and is preferred to
    a multi-part one."""
    for d in damaged:
        f = parse_log_name(d.checkpoint[0])
        if f is not None and f.kind == LogFileKind.UUID_CHECKPOINT:
            return f.name
    return None


def _repair(damaged: DamagedCheckpoint, written: str) -> str:
    how = "replaced" if written in damaged.checkpoint else "superseded"
    return f"{how} the damaged checkpoint of version {damaged.version} with {written}: " + (
        damaged.message
    )


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
