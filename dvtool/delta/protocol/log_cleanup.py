"""Metadata cleanup (PROTOCOL.md "Metadata Cleanup"): which `_delta_log` entries have expired.

The log keeps growing with commits, checkpoints and checksums; a writer may delete the ones no
retained version needs. The rules, for a table's `delta.logRetentionDuration` (default 30 days):

1. `cutOffTimestamp` is midnight UTC of the day of now - retention. The `cutoffCommit` is the
   newest commit not newer than it (a commit exactly at midnight will do). Commit times are
   in-commit timestamps from the version that enabled them on (`CommitTimeline`), the commit
   files' modification times before, made strictly increasing as Delta does.
2. The `cutOffCheckpoint` is the newest complete checkpoint not newer than the cutoffCommit
   (and, like Delta and delta-rs, not newer than the version `_last_checkpoint` names, so a
   reader that trusts that hint never finds the commits after it gone). It, the commit file of
   its version and everything after them stay: every version from the cutoffCommit on can
   still be rebuilt. Without such a checkpoint nothing is deleted.
3. Deleted: commits, checkpoints (every part, any format) and checksum files before it,
   together with their hidden Hadoop `.X.crc` files; log compactions starting at or before it;
   staged commits (`_staged_commits/`) at or before it (`expired_entries`).
4. Sidecars (`_sidecars/`) no remaining checkpoint references, written before the
   cutOffTimestamp and at least a day ago as of midnight UTC, so that a checkpoint being
   written keeps its own (`expired_sidecars`, `sidecar_cutoff`).

`checkpointProtection` (a writer feature, delta-io/delta's checkpoint protection RFC): the
metadata before `delta.requireCheckpointProtectionBeforeVersion` may be removed only all at
once, so a cleanup whose cutOffCheckpoint lies before that version deletes nothing at all.

Everything here is pure: the caller lists the log, reads in-commit timestamps on demand
(`CommitTimeline` asks for the few a binary search probes) and deletes the files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from dvtool.delta.protocol.actions import Metadata, Protocol
from dvtool.delta.protocol.commit import in_commit_timestamps_enabled
from dvtool.delta.protocol.features import writer_features
from dvtool.delta.protocol.log_files import (
    LogFile,
    LogFileKind,
    complete_checkpoints,
    monotonic_times,
    parse_log_name,
)
from dvtool.delta.protocol.retention import parse_interval_ms
from dvtool.errors import WriteRefusedError

DAY_MS = 86_400_000
DEFAULT_LOG_RETENTION_MS = 30 * DAY_MS
LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
ENABLE_PROPERTY = "delta.enableExpiredLogCleanup"
PROTECTION_FEATURE = "checkpointProtection"
PROTECTION_PROPERTY = "delta.requireCheckpointProtectionBeforeVersion"
ICT_ENABLEMENT_VERSION_PROPERTY = "delta.inCommitTimestampEnablementVersion"
SIDECAR_DIR = "_sidecars"
STAGED_COMMITS_DIR = "_staged_commits"

_CHECKSUM = re.compile(r"^(\d{20})\.crc$")
_HIDDEN_CRC = re.compile(r"^\.(.+)\.crc$")
_STAGED_COMMIT = re.compile(r"^(\d{20})\.[0-9a-fA-F-]{36}\.json$")
# Deletion order within one version: the commit before its checksum and its checkpoint, so
# that a cleanup stopped half-way leaves each version it reached readable as long as possible.
_RANK = {
    LogFileKind.COMMIT: 0,
    LogFileKind.COMPACTION: 0,
    LogFileKind.CLASSIC_CHECKPOINT: 2,
    LogFileKind.MULTIPART_CHECKPOINT: 2,
    LogFileKind.UUID_CHECKPOINT: 2,
}


@dataclass(frozen=True)
class LogEntry:
    """A file under `_delta_log`: `name` relative to it (`_sidecars/x.parquet` for one in a
    subdirectory), size and modification time (None when the store reports none)."""

    name: str
    size: int
    modification_time_ms: int | None


@dataclass(frozen=True)
class ExpiredFile:
    """A log entry the cleanup deletes; `version` orders the deletion (None for sidecars,
    which belong to no single version and go last)."""

    name: str
    size: int
    version: int | None


# -- the table's settings ---------------------------------------------------------------------


@dataclass(frozen=True)
class CleanupPolicy:
    """What the table's properties say about cleanup.

    `enabled`: `delta.enableExpiredLogCleanup` is not false; `retention_ms`:
    `delta.logRetentionDuration`; `protected_before`: the checkpointProtection version (0
    without the feature); `ict_from`: the first version with in-commit timestamps (None when
    the table does not have them enabled).
    """

    enabled: bool
    retention_ms: int
    protected_before: int = 0
    ict_from: int | None = None


def cleanup_policy(protocol: Protocol, metadata: Metadata) -> CleanupPolicy:
    """The cleanup settings of a table; WriteRefusedError naming a property whose value
    cannot be read, as nothing may be deleted on a guess."""
    config = metadata.configuration
    enabled = _boolean(config, ENABLE_PROPERTY, default=True)
    retention_text = config.get(LOG_RETENTION_PROPERTY)
    retention = DEFAULT_LOG_RETENTION_MS
    if retention_text is not None:
        try:
            retention = parse_interval_ms(str(retention_text))
        except ValueError:
            raise _bad_property(LOG_RETENTION_PROPERTY, retention_text, "an interval") from None
    protected = 0
    if PROTECTION_FEATURE in writer_features(protocol):
        protected = _version(config, PROTECTION_PROPERTY, default=0)
    ict_from = None
    if in_commit_timestamps_enabled(protocol, metadata):
        ict_from = _version(config, ICT_ENABLEMENT_VERSION_PROPERTY, default=0)
    return CleanupPolicy(enabled, retention, protected, ict_from)


def _boolean(config: Mapping[str, str], key: str, default: bool) -> bool:
    value = config.get(key)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise _bad_property(key, value, "true or false")
    return text == "true"


def _version(config: Mapping[str, str], key: str, default: int) -> int:
    value = config.get(key)
    if value is None:
        return default
    text = str(value).strip()
    if not text.isdigit():
        raise _bad_property(key, value, "a version number")
    return int(text)


def _bad_property(key: str, value: object, expected: str) -> WriteRefusedError:
    shown = str(value) if len(str(value)) <= 60 else f"{str(value)[:57]}..."
    return WriteRefusedError(
        f"log cleanup refused: the table property {key} is {shown!r}, not {expected}",
        hint=f"dvtool does not change table properties: the table's owner must fix {key} "
        "with their engine (Spark, delta-rs), then run the cleanup again.",
    )


# -- when -------------------------------------------------------------------------------------


def midnight_utc(ms: int) -> int:
    """The start of the UTC day that holds `ms` (epoch milliseconds)."""
    return ms - ms % DAY_MS


def cutoff_timestamp(now_ms: int, retention_ms: int) -> int:
    """`cutOffTimestamp`: midnight UTC of the day of now - retention."""
    return midnight_utc(now_ms - retention_ms)


def sidecar_cutoff(now_ms: int, cutoff_ms: int) -> int:
    """Sidecars written at or after this time stay whoever references them: a day before
    now as of midnight UTC (an in-progress checkpoint's), or the log cutoff if older."""
    return min(cutoff_ms, midnight_utc(now_ms - DAY_MS))


class CommitTimeline:
    """Commit times as Delta sees them: file modification times, each made at least 1 ms
    after its predecessor's, before `ict_from`; in-commit timestamps from it on (read through
    `in_commit_timestamp` only for the commits a search probes; a commit without one falls
    back to its file time)."""

    def __init__(
        self,
        commits: Sequence[LogFile],
        ict_from: int | None,
        in_commit_timestamp: Callable[[LogFile], int | None],
    ) -> None:
        self.commits = sorted(commits, key=lambda f: f.version)
        self.file_times = monotonic_times(f.modification_time_ms for f in self.commits)
        self._read = in_commit_timestamp
        self._ict: dict[int, int | None] = {}
        first_ict = len(self.commits)
        if ict_from is not None:
            first_ict = next(
                (i for i, f in enumerate(self.commits) if f.version >= ict_from), first_ict
            )
        self.first_ict = first_ict

    def time_at(self, index: int) -> int:
        """The time of the `index`-th commit (oldest first)."""
        if index < self.first_ict:
            return self.file_times[index]
        if index not in self._ict:
            self._ict[index] = self._read(self.commits[index])
        ict = self._ict[index]
        return ict if ict is not None else self.file_times[index]

    def newest_at_or_before(self, moment_ms: int) -> int | None:
        """The version of the newest commit whose time is at or before `moment_ms`."""
        n = len(self.commits)
        if self.first_ict < n and self.time_at(self.first_ict) <= moment_ms:
            index = _last_at_or_before(self.time_at, self.first_ict, n, moment_ms)
        else:
            index = _last_at_or_before(self.time_at, 0, self.first_ict, moment_ms)
        return None if index is None else self.commits[index].version


def _last_at_or_before(
    time_at: Callable[[int], int], lo: int, hi: int, moment_ms: int
) -> int | None:
    """The last index in [lo, hi) whose (non-decreasing) time is at or before `moment_ms`."""
    if lo >= hi or time_at(lo) > moment_ms:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if time_at(mid) <= moment_ms:
            lo = mid
        else:
            hi = mid
    return lo


# -- what -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cutoff:
    """The cutoffCommit and cutOffCheckpoint (its parts) of a cleanup, or why there are none."""

    cutoff_commit: int | None
    checkpoint: tuple[LogFile, ...] = ()
    reason: str | None = None

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint[0].version if self.checkpoint else None


def find_cutoff(
    files: Sequence[LogFile],
    timeline: CommitTimeline,
    cutoff_ms: int,
    protected_before: int = 0,
    last_checkpoint_hint: int | None = None,
) -> Cutoff:
    """The cutoffCommit and the cutOffCheckpoint for `cutoff_ms`, or the reason nothing
    expires: no commit that old, no complete checkpoint at or before it (and at or before
    `_last_checkpoint`), or a checkpointProtection version the cleanup cannot reach."""
    commit = timeline.newest_at_or_before(cutoff_ms)
    if commit is None:
        return Cutoff(None, reason="no commit is older than the cutoff")
    bound = commit if last_checkpoint_hint is None else min(commit, last_checkpoint_hint)
    usable = [v for v in complete_checkpoints(files) if v <= bound]
    if not usable:
        where = f"version {commit}" if bound == commit else f"version {bound} (_last_checkpoint)"
        return Cutoff(commit, reason=f"no complete checkpoint at or before {where}")
    version = max(usable)
    checkpoint = complete_checkpoints(files)[version]
    if version < protected_before:
        return Cutoff(
            commit,
            checkpoint,
            reason=f"checkpointProtection: the metadata before version {protected_before} "
            f"({PROTECTION_PROPERTY}) may only be removed all at once, and the newest "
            f"checkpoint old enough is at version {version}",
        )
    return Cutoff(commit, checkpoint)


def expired_entries(entries: Sequence[LogEntry], boundary: int) -> list[ExpiredFile]:
    """The entries of `_delta_log` (and `_staged_commits/`) a cleanup up to the checkpoint at
    `boundary` deletes, oldest version first: commits, checkpoints and checksums before it,
    log compactions starting at or before it, staged commits at or before it, and the hidden
    `.X.crc` file of each (also when X itself is already gone)."""
    keyed: list[tuple[tuple[int, int, str, int], ExpiredFile]] = []
    for entry in entries:
        directory, slash, base = entry.name.rpartition("/")
        hidden = _HIDDEN_CRC.match(base)
        key = _expiry_key(directory + slash + hidden[1] if hidden else entry.name, boundary)
        if key is not None:
            version, rank, name = key
            keyed.append(((version, rank, name, 1 if hidden else 0), _expired(entry, version)))
    return [e for _, e in sorted(keyed, key=lambda item: item[0])]


def _expiry_key(name: str, boundary: int) -> tuple[int, int, str] | None:
    """(version, rank, name) ordering the deletion of log file `name`, or None if it stays."""
    directory, _, base = name.rpartition("/")
    if directory:
        staged = _STAGED_COMMIT.match(base) if directory == STAGED_COMMITS_DIR else None
        if staged and int(staged[1]) <= boundary:
            return int(staged[1]), 3, name
        return None
    parsed = parse_log_name(name)
    if parsed is not None:
        if parsed.kind == LogFileKind.COMPACTION:
            start = parsed.start_version
            return (start, _RANK[parsed.kind], name) if start <= boundary else None
        return (parsed.version, _RANK[parsed.kind], name) if parsed.version < boundary else None
    checksum = _CHECKSUM.match(name)
    if checksum and int(checksum[1]) < boundary:
        return int(checksum[1]), 1, name
    return None


def _expired(entry: LogEntry, version: int | None) -> ExpiredFile:
    return ExpiredFile(entry.name, entry.size, version)


def expired_sidecars(
    sidecars: Sequence[LogEntry], referenced: Collection[str], cutoff_ms: int
) -> list[ExpiredFile]:
    """The sidecars (names `_sidecars/...`) to delete: referenced by no remaining checkpoint
    (`referenced` holds bare file names) and last modified before `cutoff_ms` (a sidecar of
    unknown age stays), each with its hidden `.crc` file."""
    times = {e.name: e.modification_time_ms for e in sidecars}
    out: list[ExpiredFile] = []
    for entry in sorted(sidecars, key=lambda e: e.name):
        base = entry.name.rpartition("/")[2]
        hidden = _HIDDEN_CRC.match(base)
        target = hidden[1] if hidden else base
        written = times.get(f"{SIDECAR_DIR}/{target}", entry.modification_time_ms)
        if target not in referenced and written is not None and written < cutoff_ms:
            out.append(_expired(entry, None))
    return out


def sidecar_holders(files: Sequence[LogFile], boundary: int) -> list[LogFile]:
    """The checkpoints that stay after a cleanup up to `boundary` and may reference sidecars
    (V2 spec: UUID-named, or classic-named on a v2Checkpoint table; multi-part never do)."""
    return [
        f
        for f in files
        if f.version >= boundary
        and f.kind in (LogFileKind.UUID_CHECKPOINT, LogFileKind.CLASSIC_CHECKPOINT)
    ]
