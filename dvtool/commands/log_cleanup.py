"""`dvtool vacuum --log`: delete the expired entries of `_delta_log` (PROTOCOL.md "Metadata
Cleanup") by the properties of the table's latest version.

The rules are the pure planner's (`dvtool.delta.protocol.log_cleanup`); listing, checking and
deleting
are the log layer's (`dvtool.delta.log.cleanup`, which the checkpoint writer runs after every
checkpoint too). This module is the command: the request, the feature check and the clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dvtool.delta.log.cleanup import LogCleanupResult, clean_up_log
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.protocol.features import require_writable
from dvtool.delta.protocol.log_cleanup import cleanup_policy

__all__ = ["LogCleanupRequest", "LogCleanupResult", "run_log_cleanup"]


@dataclass(frozen=True)
class LogCleanupRequest:
    """What the log cleanup was asked to do: `dry_run` plans and deletes nothing; `now_ms`
    is the time the retention counts back from (default: now)."""

    dry_run: bool = False
    now_ms: int | None = None


def run_log_cleanup(log: DeltaLog, request: LogCleanupRequest) -> LogCleanupResult:
    """Delete the expired log entries of `log`'s table (or plan it under `dry_run`), by the
    properties of its latest version. UnsupportedFeatureError / WriteRefusedError when a
    table feature or an unreadable property forbids it."""
    snapshot = log.snapshot()
    require_writable(snapshot.protocol, snapshot.metadata, "vacuum")
    policy = cleanup_policy(snapshot.protocol, snapshot.metadata)
    now_ms = request.now_ms if request.now_ms is not None else int(time.time() * 1000)
    return clean_up_log(log, snapshot.version, policy, now_ms, request.dry_run)
