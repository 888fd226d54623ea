"""Read a table's `_delta_log` through the storage layer and build snapshots.

This is the one place that turns log files into actions: it lists `_delta_log` (starting at
the checkpoint `_last_checkpoint` points to, falling back to a full listing when that hint is
missing or stale), reads the chosen checkpoint (classic, multi-part or V2 with sidecars) with
column projection and the commits or log compactions after it, and hands them newest first to
the pure replay of `dvtool.delta.protocol.replay`.

A checkpoint that cannot be used (unreadable, truncated, a part or sidecar missing) is passed
over for an older one or the JSON commits, which rebuild the same state; a `_last_checkpoint`
that is no valid hint is not followed. Neither is silent: the snapshot records what was
passed over and why (`Snapshot.damaged_checkpoints`, `Snapshot.last_checkpoint_problem`,
`dvtool.delta.protocol.log_damage`), so `inspect` can show it and `checkpoint` can mend it.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.log_damage import (
    CHECKPOINT_SIDECAR_MISSING,
    CHECKPOINT_UNREADABLE,
    DamagedCheckpoint,
    LastCheckpointProblem,
    incomplete_checkpoints,
    invalid_last_checkpoint,
    last_checkpoint_problem,
    parse_last_checkpoint,
)
from dvtool.delta.protocol.log_files import (
    LogFile,
    LogFileKind,
    LogSegment,
    complete_checkpoints,
    monotonic_times,
    parse_log_name,
    plan_segment,
)
from dvtool.delta.protocol.log_json import (
    batch_from_actions,
    first_commit_info,
    gc_paused,
    parse_actions,
    parse_commit,
)
from dvtool.delta.protocol.replay import ActionBatch, replay
from dvtool.errors import (
    DvtoolError,
    FileMissingError,
    LogError,
    StorageError,
    TableNotFoundError,
    VersionNotFoundError,
)
from dvtool.io_pool import map_io
from dvtool.storage.table_storage import Storage


@dataclass(frozen=True)
class CommitRecord:
    """One commit of the history: its version, file time and commitInfo (if it has one)."""

    version: int
    modification_time_ms: int | None
    commit_info: dict[str, Any] | None

    @property
    def timestamp_ms(self) -> int | None:
        """In-commit timestamp when present, else the commit file's modification time."""
        if self.commit_info and isinstance(self.commit_info.get("inCommitTimestamp"), int):
            return int(self.commit_info["inCommitTimestamp"])
        return self.modification_time_ms


class DeltaLog:
    """The `_delta_log` of one table."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.log_dir = storage.join("_delta_log")

    # -- listing ---------------------------------------------------------------------------

    def list_files(self, start_after: str | None = None) -> list[LogFile]:
        """Recognised `_delta_log` files, sorted by name; TableNotFoundError when none."""
        infos = self.storage.list_dir(self.log_dir, start_after=start_after)
        files = [
            f
            for info in infos
            if (f := parse_log_name(info.name, info.size, info.modification_time_ms)) is not None
        ]
        if not files and start_after is None:
            raise TableNotFoundError(
                f"no Delta table at {self.storage.root}: {self._why_no_table()}",
                hint="Check the table path (it must be the directory that holds _delta_log).",
            )
        return files

    def _why_no_table(self) -> str:
        """Why the root holds no table: it is a file, it is not there, or its `_delta_log`
        has no commits. Asked only once the listing found nothing, so it costs nothing on a
        table; whatever storage answers, the error stays "no table" (exit 5)."""
        root = self.storage.root
        try:
            if self.storage.info(root) is not None:  # a file; a directory has no info
                return "it is a file, not a directory"
            if not self.storage.is_dir(root):
                return "no such directory"
        except DvtoolError:
            pass  # the listing said "nothing there"; that stays the answer
        return "_delta_log has no commits"

    def last_checkpoint_hint(self) -> int | None:
        """The version in `_last_checkpoint`, or None if it is absent or no valid hint."""
        return self.read_last_checkpoint()[0]

    def read_last_checkpoint(self) -> tuple[int | None, LastCheckpointProblem | None]:
        """The version `_last_checkpoint` names (None when absent or invalid) and, when it
        is not valid JSON of the hint's shape, that problem."""
        try:
            data = self.storage.read(self.storage.join("_delta_log/_last_checkpoint"))
        except FileMissingError:
            return None, None
        try:
            return parse_last_checkpoint(data), None
        except ValueError as e:
            return None, invalid_last_checkpoint(str(e))

    def last_checkpoint_problem(self) -> LastCheckpointProblem | None:
        """What is wrong with `_last_checkpoint` (None: absent, or it names a checkpoint that
        exists): invalid, naming a version beyond the log, or a checkpoint that is not there."""
        hint, problem = self.read_last_checkpoint()
        if hint is None:
            return problem
        if hint in complete_checkpoints(self.list_files(start_after=f"{hint:020d}")):
            return None
        return last_checkpoint_problem(hint, self.list_files())

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The table state at `version` (latest when None).

        An unreadable checkpoint is skipped in favour of an older one (or replay from 0), as a
        reader must tolerate a checkpoint that a crashed writer left incomplete; the snapshot
        records each checkpoint passed over, and (for the latest version) what is wrong with
        `_last_checkpoint`.
        """
        files, complete, hint_problem = self._files_for(version)
        damaged: list[DamagedCheckpoint] = []
        skipped: set[str] = set()
        unreadable: LogError | None = None
        while True:
            try:
                segment = plan_segment([f for f in files if f.name not in skipped], version)
            except LogError as e:
                if unreadable is None:
                    raise
                # The fallback failed too: report the unreadable checkpoint, the root cause.
                raise LogError(
                    f"{unreadable.message}; no older checkpoint or complete run of commits "
                    f"to fall back to ({e.message})",
                    hint="Restore the checkpoint or the commits before it.",
                ) from None
            try:
                snapshot = self._load(segment, files)
            except _UnreadableCheckpoint as e:
                if segment.checkpoint_version is None:
                    raise e.error from None
                unreadable = unreadable or e.error
                damaged.append(e.damage)
                skipped.update(p.name for p in segment.checkpoint)
                if not complete:
                    files, complete = self.list_files(), True
                continue
            damaged += incomplete_checkpoints(files, segment.checkpoint_version, segment.version)
            damaged.sort(key=lambda d: d.version, reverse=True)
            return replace(
                snapshot, damaged_checkpoints=tuple(damaged), last_checkpoint_problem=hint_problem
            )

    def _files_for(
        self, version: int | None
    ) -> tuple[list[LogFile], bool, LastCheckpointProblem | None]:
        """Log files from the `_last_checkpoint` hint on when it is usable, else all of them;
        whether that is all of them; for the latest version, what is wrong with the hint."""
        if version is not None:
            return self.list_files(), True, None
        hint, problem = self.read_last_checkpoint()
        if hint is not None:
            files = self.list_files(start_after=f"{hint:020d}")
            if hint in complete_checkpoints(files):
                return files, False, None
        files = self.list_files()
        if hint is not None:
            problem = last_checkpoint_problem(hint, files)
        return files, True, problem

    def _load(self, segment: LogSegment, files: Sequence[LogFile]) -> Snapshot:
        texts = map_io(lambda f: self.storage.read(self._location(f.name)), segment.deltas)
        checkpoint_batches = self._read_checkpoint(segment.checkpoint)
        with gc_paused():
            delta_batches = [
                parse_commit(text, f.version, f.name, single_version=f.kind == LogFileKind.COMMIT)
                for f, text in zip(segment.deltas, texts, strict=True)
            ]
            batches = [*reversed(delta_batches), *checkpoint_batches]
            state = replay(batches, segment.version, self.storage.root)
        # The commit of the snapshot version itself: for a version that has a checkpoint, it is
        # not part of the segment, but its time and commitInfo are still the snapshot's.
        last_commit = next(
            (
                f
                for f in itertools.chain(segment.commits, files)
                if f.kind == LogFileKind.COMMIT and f.version == segment.version
            ),
            None,
        )
        info = self._snapshot_commit_info(segment, delta_batches, last_commit)
        record = CommitRecord(
            segment.version, last_commit.modification_time_ms if last_commit else None, info
        )
        return Snapshot(self.storage.root, state, record, segment.checkpoint_version)

    def _snapshot_commit_info(
        self, segment: LogSegment, batches: Sequence[ActionBatch], last: LogFile | None
    ) -> dict[str, Any] | None:
        if segment.deltas and segment.deltas[-1].kind == LogFileKind.COMMIT:
            info = batches[-1].commit_info
            return dict(info) if info else None
        if last is None:
            return None
        return first_commit_info(self.storage.read(self._location(last.name)))

    def _read_checkpoint(self, parts: Sequence[LogFile]) -> list[ActionBatch]:
        if not parts:
            return []
        version, names = parts[0].version, tuple(p.name for p in parts)

        def part(f: LogFile) -> ActionBatch:
            read = functools.partial(self._read_checkpoint_file, f)
            return _guarded(version, names, f.name, read)

        def sidecar(s: Mapping[str, Any]) -> ActionBatch:
            read = functools.partial(self._read_sidecar, s, version)
            return _guarded(version, names, _sidecar_name(s), read, sidecar=True)

        batches = map_io(part, parts)
        sidecars = [s for b in batches for s in b.sidecars]
        if sidecars:
            batches += map_io(sidecar, sidecars)
        return batches

    def _read_checkpoint_file(self, f: LogFile) -> ActionBatch:
        location = self._location(f.name)
        if f.name.endswith(".json"):
            actions = parse_actions(self.storage.read(location), f.name)
            return batch_from_actions(actions, f.version, f.name)
        return self._read_parquet_actions(location, f.version, f.name)

    def _read_sidecar(self, sidecar: Mapping[str, Any], version: int) -> ActionBatch:
        path = str(sidecar.get("path", ""))
        if "://" in path or path.startswith("/"):
            location = self.storage.resolve(path)
        else:
            location = self.storage.join(f"_delta_log/_sidecars/{path}")
        return self._read_parquet_actions(location, version, path)

    def _read_parquet_actions(self, location: str, version: int, name: str) -> ActionBatch:
        # Local imports: only tables with a parquet checkpoint need them (start-up time).
        import pyarrow.parquet as pq

        from dvtool.delta.protocol.checkpoint import batch_from_checkpoint, checkpoint_columns

        with self.storage.open_parquet(location) as source:
            parquet = pq.ParquetFile(source)
            table = parquet.read(columns=checkpoint_columns(parquet.schema_arrow), use_threads=True)
        return batch_from_checkpoint(table, version, name)

    def _location(self, name: str) -> str:
        return self.storage.join(f"_delta_log/{name}")

    # -- history and time travel ----------------------------------------------------------

    def history(self, limit: int | None = None) -> list[CommitRecord]:
        """The newest `limit` commits still in the log (newest first), with their commitInfo."""
        commits = [f for f in self.list_files() if f.kind == LogFileKind.COMMIT]
        commits.sort(key=lambda f: f.version, reverse=True)
        if limit is not None:
            commits = commits[:limit]
        return map_io(self._commit_record, commits)

    def _commit_record(self, f: LogFile) -> CommitRecord:
        info = first_commit_info(self.storage.read(self._location(f.name)))
        return CommitRecord(f.version, f.modification_time_ms, info)

    def version_at(self, timestamp_ms: int) -> int:
        """The latest version committed at or before `timestamp_ms` (Delta's time travel).

        Commits carry in-commit timestamps once the table enables them; before that, the
        commit file's modification time is the commit time, as in Delta.
        """
        commits = sorted(
            (f for f in self.list_files() if f.kind == LogFileKind.COMMIT), key=lambda f: f.version
        )
        if not commits:
            raise LogError("the log has no commit files left to resolve a timestamp against")
        times = _CommitTimes(self, commits)
        if timestamp_ms < times.at(0):
            raise VersionNotFoundError(
                f"timestamp {_iso(timestamp_ms)} is before the earliest available version "
                f"{commits[0].version} ({_iso(times.at(0))})"
            )
        last = len(commits) - 1
        if timestamp_ms > times.at(last):
            raise VersionNotFoundError(
                f"timestamp {_iso(timestamp_ms)} is after the latest version "
                f"{commits[last].version} ({_iso(times.at(last))})",
                hint="Use --version, or omit --timestamp to read the latest version.",
            )
        lo, hi = 0, last
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if times.at(mid) <= timestamp_ms:
                lo = mid
            else:
                hi = mid - 1
        return commits[lo].version


class _CommitTimes:
    """Commit times by index, as Delta's time travel sees them.

    File modification times are made strictly increasing first (a commit whose time is not
    after its predecessor's counts as predecessor + 1 ms), so the binary search is sound; an
    in-commit timestamp, read only for the commits the search probes, takes precedence.
    """

    def __init__(self, log: DeltaLog, commits: list[LogFile]) -> None:
        self.log = log
        self.commits = commits
        self.file_times = monotonic_times(f.modification_time_ms for f in commits)
        self.cache: dict[int, int] = {}

    def at(self, index: int) -> int:
        if index not in self.cache:
            info = self.log._commit_record(self.commits[index]).commit_info or {}
            ict = info.get("inCommitTimestamp")
            self.cache[index] = ict if isinstance(ict, int) else self.file_times[index]
        return self.cache[index]


class _UnreadableCheckpoint(Exception):
    def __init__(self, error: LogError, damage: DamagedCheckpoint) -> None:
        super().__init__(str(error))
        self.error = error
        self.damage = damage


def _guarded(
    version: int,
    checkpoint: tuple[str, ...],
    name: str,
    read: Callable[[], ActionBatch],
    *,
    sidecar: bool = False,
) -> ActionBatch:
    """`read()` of one file of a checkpoint (`name`: a part, or a sidecar); a failure to read
    it (a log, storage or pyarrow error) as `_UnreadableCheckpoint` naming the file."""
    try:
        return read()
    except Exception as e:
        if not isinstance(e, (LogError, StorageError)) and not _is_arrow_error(e):
            raise
        missing = isinstance(e, FileMissingError)
        kind = CHECKPOINT_SIDECAR_MISSING if sidecar and missing else CHECKPOINT_UNREADABLE
        reason = "missing" if missing else " ".join(str(e).split()).rstrip(".")
        damage = DamagedCheckpoint(version, kind, checkpoint, (name,), reason)
        error = LogError(f"checkpoint {', '.join(checkpoint)} cannot be read: {name}: {reason}")
        raise _UnreadableCheckpoint(error, damage) from None


def _sidecar_name(sidecar: Mapping[str, Any]) -> str:
    """A sidecar as messages name it: `_sidecars/NAME` under `_delta_log`, or its URI."""
    path = str(sidecar.get("path", ""))
    return path if "://" in path or path.startswith("/") else f"_sidecars/{path}"


def _is_arrow_error(error: Exception) -> bool:
    """Whether pyarrow raised `error` (reading a parquet checkpoint or sidecar).

    pyarrow is imported only when a parquet file is read; if it was not, it raised nothing.
    """
    pyarrow = sys.modules.get("pyarrow")
    return pyarrow is not None and isinstance(error, pyarrow.ArrowException)


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def open_log(uri: str, storage_options: dict[str, str] | None = None) -> DeltaLog:
    """The log of the table at `uri` (local path or fsspec URI)."""
    return DeltaLog(Storage.for_table(uri, storage_options))
