"""The reads `dvtool restore` plans from: the version to restore, whether the files it needs
still exist, and whether a vacuum is running.

- **Target version**: `--version N`, or the version as of `--timestamp` (Delta's time travel,
  in-commit timestamps where the table has them: `DeltaLog.version_at`). It must be older
  than the current version and still rebuildable from the log: a version whose commits were
  cleaned up before the oldest checkpoint is reported as gone, naming the oldest version
  that can be restored.
- **Missing files**: every data file and DV file (path-based DVs) a restore re-adds must
  exist, or the restore would commit a table no reader can read. They are checked in bulk:
  a directory that holds many of them is listed once (one listing, not one request per
  file), the others are looked up one by one, in parallel.
- **A running vacuum**: vacuum deletes the files its `VACUUM START` commit planned on after
  that commit. A restore that re-adds files while one runs could re-add files it is about
  to delete, so a `VACUUM START` among the newest commits without a `VACUUM END` after it
  refuses the restore (a conflict: run it again once the vacuum has finished).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

from dvtool.delta.dvstore import DVStore
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.delta.protocol.log_files import LogFileKind, commit_name, complete_checkpoints
from dvtool.delta.protocol.log_json import first_commit_info
from dvtool.errors import (
    CommitConflictError,
    FileMissingError,
    UsageError,
    VersionNotFoundError,
)
from dvtool.io_pool import map_io
from dvtool.storage.table_storage import Storage

# A directory holding at least this many of the files to check is listed once; fewer are
# looked up one by one (a listing of a large directory costs more than a few lookups).
LIST_DIRECTORY_AT = 16
# Missing files named in the refusal (an error stays a line or two); the message then says
# how many more there are.
MISSING_NAMED = 3
# How many of the newest commits are searched for a VACUUM START without its VACUUM END.
VACUUM_LOOKBACK = 20


# -- the target version ---------------------------------------------------------------------


def target_version(
    log: DeltaLog, current: Snapshot, version: int | None, timestamp_ms: int | None
) -> int:
    """The version to restore: `version`, or the latest committed at or before
    `timestamp_ms`. UsageError unless exactly one is given or when it is the current
    version; VersionNotFoundError when it is newer than the current version or before the
    first commit."""
    if (version is None) == (timestamp_ms is None):
        raise UsageError(
            "restore needs exactly one of --version and --timestamp",
            hint="e.g. dvtool restore TABLE --version 12 (dvtool inspect TABLE --history lists "
            "the versions)",
        )
    if timestamp_ms is not None:
        version = _version_at(log, current, timestamp_ms)
    assert version is not None
    if version > current.version:
        raise VersionNotFoundError(
            f"version {version} does not exist; the latest version is {current.version}",
            hint="Pass an older --version (dvtool inspect TABLE --history lists the versions).",
        )
    if version == current.version:
        asked = f"--version {version}" if timestamp_ms is None else "--timestamp"
        raise UsageError(
            f"nothing to restore: {asked} names version {version}, the current version",
            hint="Pass an older version (dvtool inspect TABLE --history lists the versions).",
        )
    return version


def _version_at(log: DeltaLog, current: Snapshot, timestamp_ms: int) -> int:
    """`log.version_at`, with a timestamp after the last commit reported as nothing to do."""
    try:
        return log.version_at(timestamp_ms)
    except VersionNotFoundError:
        latest = current.commit.timestamp_ms
        if latest is not None and timestamp_ms >= latest:
            raise UsageError(
                f"nothing to restore: the table has not changed since {_iso(timestamp_ms)} "
                f"(version {current.version}, the current version, was committed at "
                f"{_iso(latest)})",
                hint="Pass an earlier --timestamp or a --version.",
            ) from None
        raise


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def load_target(log: DeltaLog, version: int) -> Snapshot:
    """The snapshot of `version`; VersionNotFoundError, naming the oldest version that can
    be restored, when the log no longer holds what rebuilds it (commits cleaned up)."""
    files = log.list_files()
    oldest = _oldest_version(files)
    if oldest is not None and version < oldest:
        raise VersionNotFoundError(
            f"version {version} can no longer be restored: the log's commits before version "
            f"{oldest} were cleaned up (delta.logRetentionDuration)",
            hint=f"The oldest version that can be restored is {oldest}.",
        )
    return log.snapshot(version)


def _oldest_version(files: Sequence[Any]) -> int | None:
    """The oldest version the log can rebuild: 0 while commit 0 exists, else the oldest
    complete checkpoint (None when there is neither, which the snapshot then reports)."""
    if any(f.kind == LogFileKind.COMMIT and f.version == 0 for f in files):
        return 0
    checkpoints = complete_checkpoints(files)
    return min(checkpoints) if checkpoints else None


# -- files that must exist ------------------------------------------------------------------


def require_files_exist(storage: Storage, to_add: pa.Table, version: int) -> None:
    """FileMissingError listing the data and DV files of `to_add` (the files a restore to
    `version` re-adds) that no longer exist: vacuumed, or deleted by hand."""
    missing = missing_files(storage, needed_locations(storage, to_add))
    if not missing:
        return
    shown = [_display(storage, location) for location in missing[:MISSING_NAMED]]
    more = len(missing) - len(shown)
    listed = ", ".join(shown) + (f" and {more} more" if more else "")
    error = FileMissingError(
        missing[0],
        f"restore to version {version} refused: {len(missing)} file(s) it needs no longer "
        f"exist (vacuumed or deleted): {listed}",
    )
    error.hint = (
        "Nothing was committed. Restore a later version whose files still exist (dvtool "
        "inspect TABLE --history), or put the files back from a backup first."
    )
    raise error


def _display(storage: Storage, location: str) -> str:
    relative = storage.relative_to_root(location)
    return relative if relative else location


def needed_locations(storage: Storage, files: pa.Table) -> list[str]:
    """The locations of the data files of `files` and of their DV files (inline DVs have
    none), each once, in order."""
    store = DVStore(storage)
    out: dict[str, None] = {}
    paths = files.column("path").to_pylist()
    dvs = files.column("deletionVector").to_pylist()
    for path, dv in zip(paths, dvs, strict=True):
        out.setdefault(storage.resolve(path))
        if dv is not None:
            location = store.location(DeletionVectorDescriptor.from_json(dv))
            if location is not None:
                out.setdefault(location)
    return list(out)


def missing_files(storage: Storage, locations: Iterable[str]) -> list[str]:
    """The `locations` where no file exists, in their order.

    Grouped by directory: a directory with at least LIST_DIRECTORY_AT of them is listed
    once, each other location is looked up alone; all of it in parallel.
    """
    wanted = list(locations)
    by_directory: dict[str, list[str]] = defaultdict(list)
    for location in wanted:
        by_directory[location.rpartition("/")[0]].append(location)
    checks: list[Callable[[], set[str]]] = []
    for directory, members in by_directory.items():
        if len(members) >= LIST_DIRECTORY_AT:
            checks.append(_listed(storage, directory, members))
        else:
            checks += [_looked_up(storage, location) for location in members]
    found = set().union(*map_io(lambda check: check(), checks))
    return [location for location in wanted if location not in found]


def _listed(storage: Storage, directory: str, members: list[str]) -> Callable[[], set[str]]:
    def check() -> set[str]:
        names = {info.name for info in storage.list_dir(directory)}
        return {m for m in members if m.rpartition("/")[2] in names}

    return check


def _looked_up(storage: Storage, location: str) -> Callable[[], set[str]]:
    return lambda: {location} if storage.exists(location) else set()


# -- a running vacuum -----------------------------------------------------------------------


def require_no_running_vacuum(log: DeltaLog, version: int) -> None:
    """CommitConflictError when, among the VACUUM_LOOKBACK commits up to `version`, the
    newest VACUUM commit is a `VACUUM START` (its vacuum may still be deleting files)."""
    started = running_vacuum(log, version)
    if started is None:
        return
    raise CommitConflictError(
        f"restore refused: the vacuum that committed VACUUM START at version {started} has "
        "not committed VACUUM END; it may still be deleting files this restore re-adds",
        hint="Run the restore again when the vacuum has finished (if it was interrupted, run "
        "dvtool vacuum again to completion first). Nothing was committed.",
    )


def running_vacuum(log: DeltaLog, version: int) -> int | None:
    """The version of a VACUUM START not followed by a VACUUM END among the newest
    VACUUM_LOOKBACK commits up to `version`, or None."""
    versions = list(range(version, max(-1, version - VACUUM_LOOKBACK), -1))
    for v, operation in zip(versions, map_io(lambda v: _operation(log, v), versions), strict=True):
        if operation == "VACUUM END":
            return None
        if operation == "VACUUM START":
            return v
    return None


def _operation(log: DeltaLog, version: int) -> str | None:
    storage = log.storage
    try:
        data = storage.read(storage.join(f"_delta_log/{commit_name(version)}"))
    except FileMissingError:
        return None  # cleaned up (or compacted away): no vacuum that old is still running
    info = first_commit_info(data) or {}
    operation = info.get("operation")
    return operation if isinstance(operation, str) else None
