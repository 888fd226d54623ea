"""The table history as `dvtool downgrade --truncate-history` sees it: which commits use
deletion vectors, where history can start so that none is left, when that start was
committed, and how long history must be kept before it may be deleted.

A commit uses deletion vectors when it adds or removes a file with a DV or enables them
(Delta's `actionUsesFeature`). History may start at a checkpoint after the last such commit
(the history boundary); deleting what lies before it waits for
`delta.dropFeatureTruncateHistory.retentionDuration` (default 24 hours) after the boundary was
committed, because transactions still running may need that history.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

from dvtool.commands.downgrade.protocol import (
    ENABLE_PROPERTY,
    dv_file_count,
    dvs_enabled,
    is_true,
)
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.log_files import LogFile, LogFileKind, commit_name, complete_checkpoints
from dvtool.delta.protocol.log_json import first_commit_info
from dvtool.delta.protocol.retention import parse_interval_ms
from dvtool.errors import CommitConflictError, LogError
from dvtool.io_pool import map_io

RETENTION_PROPERTY = "delta.dropFeatureTruncateHistory.retentionDuration"
DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000


def uses_dvs(data: bytes) -> bool:
    """Whether a commit adds or removes a file with a DV or enables DVs (Delta's
    `actionUsesFeature` for deletion vectors)."""
    if b"deletionVector" not in data and ENABLE_PROPERTY.encode() not in data:
        return False
    for line in data.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if not isinstance(action, dict):
            continue
        for kind, body in action.items():
            if not isinstance(body, dict):
                continue
            if kind in ("add", "remove", "cdc") and body.get("deletionVector"):
                return True
            if kind == "metaData" and is_true(
                (body.get("configuration") or {}).get(ENABLE_PROPERTY)
            ):
                return True
    return False


def last_dv_use(log: DeltaLog, commits: Sequence[LogFile]) -> int | None:
    """The newest of `commits` that uses deletion vectors, or None."""
    storage = log.storage
    flags = map_io(lambda f: uses_dvs(storage.read(storage.join(f"_delta_log/{f.name}"))), commits)
    used = [f.version for f, flag in zip(commits, flags, strict=True) if flag]
    return max(used) if used else None


def find_boundary(log: DeltaLog, protected_before: int) -> int | None:
    """The oldest version history can start at so that no version left uses deletion
    vectors: a checkpoint (or version 0 while the log still starts there) after the last
    commit that uses DVs, at or after the protected version, with its commit file present and
    a state without DVs. None when there is none yet."""
    files = log.list_files()
    commits = sorted((f for f in files if f.kind == LogFileKind.COMMIT), key=lambda f: f.version)
    last_use = last_dv_use(log, commits)
    have_commit = {f.version for f in commits}
    candidates = set(complete_checkpoints(files)) | ({0} if 0 in have_commit else set())
    for version in sorted(candidates):
        if last_use is not None and version <= last_use:
            continue
        if version < protected_before or version not in have_commit:
            continue
        snapshot = log.snapshot(version)
        if not dvs_enabled(snapshot) and not dv_file_count(snapshot):
            return version
    return None


def check_history_clean(log: DeltaLog, boundary: int) -> None:
    """After the truncation: the log starts at `boundary` and no version left in it uses
    deletion vectors (LogError or CommitConflictError otherwise)."""
    files = [f for f in log.list_files() if f.kind == LogFileKind.COMMIT]
    if not files or min(f.version for f in files) < boundary:
        raise LogError(
            f"after truncating the history, the log should start at version {boundary}",
            hint="Another process changed _delta_log concurrently; run the downgrade again.",
        )
    used = last_dv_use(log, files)
    if used is not None:
        raise CommitConflictError(
            f"version {used} uses deletion vectors although it was committed after the "
            "purge: another writer added them concurrently; the feature is not dropped",
            hint=f"Stop writers that ignore {ENABLE_PROPERTY}=false, then run the downgrade again.",
        )


def commit_time(log: DeltaLog, version: int) -> int:
    """The commit's time as Delta's metadata cleanup sees it: its in-commit timestamp, else
    the commit file's modification time."""
    location = log.storage.join(f"_delta_log/{commit_name(version)}")
    info = first_commit_info(log.storage.read(location)) or {}
    ict = info.get("inCommitTimestamp")
    if isinstance(ict, int):
        return ict
    found = log.storage.info(location)
    if found is None or found.modification_time_ms is None:
        raise LogError(f"cannot tell when version {version} was committed")
    return found.modification_time_ms


def retention_ms(snapshot: Snapshot) -> int:
    """How long history before the boundary must be kept, from the table property (the
    default 24 hours when unset or unreadable)."""
    text = snapshot.metadata.configuration.get(RETENTION_PROPERTY)
    if not text:
        return DEFAULT_RETENTION_MS
    try:
        return parse_interval_ms(str(text))
    except ValueError:
        return DEFAULT_RETENTION_MS


def retention_text(snapshot: Snapshot) -> str:
    """The retention as the table states it, for messages."""
    text = snapshot.metadata.configuration.get(RETENTION_PROPERTY)
    return str(text) if text else "24 hours"


def iso_time(ms: int) -> str:
    """A UTC timestamp in milliseconds as ISO 8601 to the second, e.g. 2024-01-02T03:04:05Z."""
    moment = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
