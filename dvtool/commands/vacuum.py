"""`dvtool vacuum`: delete the files a table no longer needs, as Delta's VACUUM does.

1. Retention. Files are protected for `--retain` (default: the table's
   `delta.deletedFileRetentionDuration`, "interval 1 weeks"); the cutoff is now - retention.
   A retention shorter than the table's is refused unless forced: readers of older versions
   (time travel, long queries, concurrent writers that have not committed yet) may still need
   the files.
2. What is kept. Every live add's data file and its DV file ('u': the path derived from the
   UUID and prefix; 'i': none; 'p': the named file, which vacuum never deletes); every remove
   (tombstone) whose `deletionTimestamp` is at or after the cutoff, with its DV file. DV files
   have no tombstones of their own: a DV file shared by several files lives while any live
   add or unexpired remove names it. Every path from the log is decoded once
   (`Storage.resolve`); paths that lie outside the table root (absolute paths elsewhere,
   other storage, `..` segments leading out) cannot be kept and are reported as ignored.
3. Candidates. Full vacuum lists the table directory (never following symbolic links)
   without `_delta_log` and hidden names (starting with `_` or `.`), except `_change_data`
   at the top and partition directories (`<partition column>=...`); every file there that is
   not kept and was last modified before the cutoff is deleted. `--lite` reads candidates
   from the log instead: the files of expired removes (and their DV files) and the change
   data files of the commits since the last vacuum, as Delta's VACUUM LITE.
4. Deleting. The list is computed once (a dry run prints exactly it), recorded in a
   `VACUUM START` commit, deleted in parallel, and a `VACUUM END` commit records the outcome;
   empty directories are removed afterwards on local disk. `_delta_log/_last_vacuum_info`
   (`{"latestCommitVersionOutsideOfRetentionWindow": v}`, Delta's file and key) records the
   newest commit whose removed files have been dealt with; the next `--lite` run reads the
   commits after it. Unlike Delta Spark, whose full VACUUM records no version, a full run
   records the newest commit older than the cutoff too, so `--lite` works after a full run
   on a table whose first commits were cleaned up.

Nothing is ever deleted outside the table root: candidates come only from the listing of the
root or, for `--lite`, from log paths that are free of `..` segments, lie inside the root, and
still do once symbolic links are resolved; each is checked again just before deletion.
"""

from __future__ import annotations

import contextlib
import json
import math
import posixpath
import re
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import unquote

from dvtool.core.actions import Metadata
from dvtool.core.checkpoint import parse_interval_ms, tombstone_retention_ms
from dvtool.core.conflicts import ReadSet
from dvtool.core.deletion_vector import DeletionVectorDescriptor
from dvtool.core.features import require_writable
from dvtool.core.log_files import LogFileKind
from dvtool.core.log_json import first_commit_info, parse_actions
from dvtool.core.schema import partition_physical_names
from dvtool.errors import (
    CommitConflictError,
    DvtoolError,
    FileMissingError,
    LogError,
    StorageError,
    UsageError,
    WriteRefusedError,
)
from dvtool.io_pool import map_io
from dvtool.log.reader import DeltaLog
from dvtool.log.snapshot import Snapshot
from dvtool.log.writer import CommitResult, LogWriter, snapshot_commit_info
from dvtool.storage import Storage, TreeEntry

Progress = Callable[[int], Callable[[int], None]]

ORPHAN_DATA = "orphan data file"
EXPIRED_TOMBSTONE = "expired tombstone"
ORPHAN_DV = "orphan DV file"
EXPIRED_CHANGE_DATA = "expired change data"
STALE_TEMP_FILE = "stale temp file"

LAST_VACUUM_INFO = "_delta_log/_last_vacuum_info"
LAST_VACUUM_KEY = "latestCommitVersionOutsideOfRetentionWindow"
CHANGE_DATA_DIR = "_change_data"
MAX_IGNORED_REPORTED = 100
_DELETE_CHUNK = 100
_END_ATTEMPTS = 5
_DV_FILE_NAME = re.compile(
    r"^deletion_vector_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.bin$"
)

# dvtool's own temp files (`Storage`, data file writes): a process killed mid-write leaves one.
_TEMP_FILE_NAME = re.compile(r"^\.tmp-[0-9a-f]{32}\.dvtool$")

_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "hr": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+)$")
_NEGATIVE = re.compile(r"(^|\s)-\s*\d")


def parse_duration(text: str) -> int:
    """Milliseconds of a `--retain` duration: `168h`, `7d`, `30m`, `90s`, `1w`, `500ms`, `0h`,
    or a Delta interval (`7 days`, `interval 1 weeks`). UsageError for anything else,
    negative durations included."""
    raw = text.strip().lower()
    if _NEGATIVE.search(raw):
        raise UsageError(
            f"--retain {text!r} is negative",
            hint="A retention is a duration of 0 or more, e.g. 168h or 7d.",
        )
    match = _DURATION.match(raw)
    if match is not None and match.group(2) in _UNIT_MS:
        ms = float(match.group(1)) * _UNIT_MS[match.group(2)]
        if not math.isfinite(ms):
            shown = text if len(text) <= 32 else f"{text[:29]}..."
            raise UsageError(f"--retain {shown!r} is too long to be a duration")
        return round(ms)
    if " " in raw:
        try:
            return parse_interval_ms(raw)
        except ValueError:
            pass
    raise UsageError(
        f"--retain {text!r} is not a duration",
        hint="Give a number and a unit: 168h, 7d, 30m, 90s, 1w, 500ms (or '7 days').",
    )


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
class VacuumFile:
    """One file to delete: its path under the table root (as on storage), size and reason."""

    path: str
    size: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IgnoredPath:
    """A path from the log that vacuum cannot keep: it does not lie inside the table root."""

    path: str
    action: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FailedDelete:
    """A file of the list that could not be deleted."""

    path: str
    error: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VacuumResult:
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
    default_ms = tombstone_retention_ms(snapshot.metadata.configuration)
    retention = _retention(request, default_ms, snapshot.metadata)
    cutoff = max(now - retention, 0)  # a retention reaching before 1970 keeps everything
    storage = log.storage
    layout = _Layout(_partition_directories(snapshot))
    paths = _PathResolver(storage)
    keep = _keep_set(snapshot, cutoff, paths)
    last_vacuum = read_last_vacuum_info(log)
    lite_range: tuple[int, int] | None = None
    empty_dirs: list[str] = []
    if request.lite:
        plan = _lite_plan(log, snapshot, cutoff, last_vacuum)
        lite_range = plan.commits
        files = _lite_candidates(log, plan, keep, layout, paths, cutoff)
        record = plan.record
    else:
        files, empty_dirs = _full_candidates(storage, keep, layout, cutoff)
        record = None
    files.sort(key=lambda f: f.path)
    result = VacuumResult(
        read_version=snapshot.version,
        dry_run=request.dry_run,
        lite=request.lite,
        retention_ms=retention,
        specified_retention_ms=request.retain_ms,
        default_retention_ms=default_ms,
        cutoff_ms=cutoff,
        files=files,
        lite_commits=lite_range,
        last_vacuum_version=last_vacuum,
        ignored_log_paths=paths.ignored,
        num_ignored_log_paths=paths.num_ignored,
    )
    if request.dry_run:
        return result
    if not request.lite:
        # Every file removed by a commit older than the cutoff is dealt with now.
        record = _latest_commit_before(log, cutoff, snapshot.version)
    return _execute(log, snapshot, request, result, empty_dirs, record, progress, default_ms)


# -- retention ----------------------------------------------------------------------------


def _retention(request: VacuumRequest, default_ms: int | None, metadata: Metadata) -> int:
    configured = metadata.configuration.get("delta.deletedFileRetentionDuration")
    if request.retain_ms is not None and request.retain_ms < 0:
        raise UsageError(f"the retention must not be negative ({request.retain_ms} ms)")
    if default_ms is None:
        if request.retain_ms is None:
            raise WriteRefusedError(
                f"delta.deletedFileRetentionDuration is {configured!r}, which is not a "
                "duration dvtool understands",
                hint="Fix the table property, or give --retain (with --force).",
            )
        if not request.force:
            raise WriteRefusedError(
                f"cannot check --retain against delta.deletedFileRetentionDuration "
                f"{configured!r}, which is not a duration dvtool understands",
                hint="Fix the table property, or add --force if no reader needs older files.",
            )
        return request.retain_ms
    if request.retain_ms is None:
        return default_ms
    if request.retain_ms < default_ms and not request.force:
        raise WriteRefusedError(
            f"--retain {format_duration(request.retain_ms)} is shorter than the table's "
            f"retention ({format_duration(default_ms)}, delta.deletedFileRetentionDuration): "
            "files that concurrent readers, writers that have not committed yet, or time "
            "travel to recent versions still need could be deleted",
            hint="Use a retention of at least the table's, or add --force if you are sure no "
            "reader or writer needs those files.",
        )
    return request.retain_ms


def format_duration(ms: int) -> str:
    """A duration in the largest unit that divides it: `7d`, `36h`, `90s`, `1500ms`."""
    if ms == 0:
        return "0h"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


# -- paths from the log ---------------------------------------------------------------------


class _PathResolver:
    """Decodes paths from the log once and places them under the root (or reports them)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.local = storage.protocol == "file"
        self.ignored: list[IgnoredPath] = []
        self.num_ignored = 0
        self._seen: set[str] = set()

    def relative(self, path_in_log: str, action: str, *, strict: bool = False) -> str | None:
        """The path under the root of a log path, or None (reported) if it is not inside.

        `..` segments are resolved lexically (keeping a file is always safe); with `strict`
        (deletion candidates) a path with `..` segments is refused instead.
        """
        if strict and ".." in unquote(path_in_log).split("/"):
            self._ignore(path_in_log, action, "has '..' segments")
            return None
        try:
            location = self.storage.resolve(path_in_log)
        except StorageError as e:
            self._ignore(path_in_log, action, e.message)
            return None
        relative = self.storage.relative_to_root(location)
        if relative is None and self.local:
            # The root may have been given through a symbolic link, the log's absolute paths
            # through its real path (or the other way round).
            relative = self.storage.real_relative_to_root(location)
        if relative is None:
            self._ignore(path_in_log, action, "outside the table root")
            return None
        if relative == "":
            self._ignore(path_in_log, action, "names the table root, not a file")
            return None
        return relative

    def dv_relative(
        self,
        dv: Mapping[str, Any],
        action: str,
        *,
        strict: bool = False,
        needed: str | None = None,
    ) -> tuple[str | None, bool]:
        """The DV file of a descriptor under the root (None: inline or outside), and whether
        it is an absolute-path ('p') DV, which vacuum never deletes.

        A malformed descriptor names no file we could keep: LogError when the DV is `needed`
        (by this data file: a live add or an unexpired tombstone), else it is reported and
        ignored.
        """
        try:
            descriptor = DeletionVectorDescriptor.from_json(dv)
        except DvtoolError as e:
            if needed is not None:
                raise LogError(
                    f"the {action} of {needed} has a malformed deletion vector descriptor "
                    f"({e.message}): vacuum cannot tell which DV file to keep",
                    hint="Repair the table first; vacuum refuses rather than risk deleting "
                    "a DV file that is still needed.",
                ) from e
            self._ignore(str(dv.get("pathOrInlineDv")), action, f"bad DV descriptor: {e}")
            return None, False
        if descriptor.is_relative:
            # The derived path is not percent-encoded: keep a '%' in a prefix literal.
            encoded = descriptor.relative_path().replace("%", "%25")
            return self.relative(encoded, f"{action} DV", strict=strict), False
        if descriptor.is_absolute_path:
            return self.relative(descriptor.path_or_inline_dv, f"{action} DV"), True
        return None, False

    def _ignore(self, path: str, action: str, reason: str) -> None:
        if path in self._seen:
            return
        self._seen.add(path)
        self.num_ignored += 1
        if len(self.ignored) < MAX_IGNORED_REPORTED:
            self.ignored.append(IgnoredPath(path, action, reason))


def _forms(path: str) -> tuple[str, ...]:
    """The path and its Unicode NFC/NFD forms (file systems may store either)."""
    nfc = unicodedata.normalize("NFC", path)
    nfd = unicodedata.normalize("NFD", path)
    return (path,) if path == nfc == nfd else (path, nfc, nfd)


@dataclass
class _Keep:
    """Relative paths vacuum must not delete, and what it knows about the others."""

    paths: set[str] = field(default_factory=set)
    tombstones: set[str] = field(default_factory=set)  # data files of expired removes
    dv_files: set[str] = field(default_factory=set)  # every DV file any action names

    def add(self, relative: str | None) -> None:
        if relative is not None:
            self.paths.update(_forms(relative))

    def kept(self, relative: str) -> bool:
        return any(form in self.paths for form in _forms(relative))


def _keep_set(snapshot: Snapshot, cutoff: int, paths: _PathResolver) -> _Keep:
    keep = _Keep()
    adds = snapshot.files.select(["path", "deletionVector"]).to_pylist()
    for row in adds:
        keep.add(paths.relative(row["path"], "add"))
        _keep_dv(keep, paths, row, "add", live=True)
    removes = snapshot.tombstones.select(["path", "deletionVector", "deletionTimestamp"])
    for row in removes.to_pylist():
        live = (row["deletionTimestamp"] or 0) >= cutoff
        relative = paths.relative(row["path"], "remove")
        if live:
            keep.add(relative)
        elif relative is not None:
            keep.tombstones.add(relative)
        _keep_dv(keep, paths, row, "remove", live=live)
    return keep


def _keep_dv(
    keep: _Keep, paths: _PathResolver, row: Mapping[str, Any], action: str, *, live: bool
) -> None:
    dv = row["deletionVector"]
    if dv is None:
        return
    needed = row["path"] if live else None
    relative, absolute = paths.dv_relative(dv, action, needed=needed)
    if relative is None:
        return
    keep.dv_files.update(_forms(relative))
    if live or absolute:
        keep.add(relative)


# -- which files are listed -------------------------------------------------------------------


def _partition_directories(snapshot: Snapshot) -> frozenset[str]:
    """Partition column names a directory may start with (`name=`): physical and logical."""
    names = set(snapshot.metadata.partition_columns)
    with contextlib.suppress(LogError):
        names.update(
            partition_physical_names(
                snapshot.schema, snapshot.metadata.partition_columns, snapshot.column_mapping_mode
            ).values()
        )
    return frozenset(f"{n}=" for n in names)


@dataclass(frozen=True)
class _Layout:
    """Which names vacuum looks at: Delta's hidden-file rules."""

    partition_prefixes: frozenset[str]

    def descend(self, relative_dir: str) -> bool:
        """Whether vacuum lists a directory (relative to the root)."""
        if relative_dir in ("_delta_log", CHANGE_DATA_DIR):
            return relative_dir == CHANGE_DATA_DIR
        name = relative_dir.rpartition("/")[2]
        if not _hidden(name):
            return True
        return any(name.startswith(p) for p in self.partition_prefixes)

    def listable(self, relative: str) -> bool:
        """Whether a file path (relative to the root) is one vacuum may delete."""
        parts = relative.split("/")
        if any(p in ("", ".", "..") for p in parts) or _hidden(parts[-1]):
            return False
        return all(self.descend("/".join(parts[: i + 1])) for i in range(len(parts) - 1))


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


def _reason(relative: str, keep: _Keep) -> str:
    if relative.startswith(CHANGE_DATA_DIR + "/"):
        return EXPIRED_CHANGE_DATA
    if relative in keep.tombstones:
        return EXPIRED_TOMBSTONE
    name = relative.rpartition("/")[2]
    if relative in keep.dv_files or _DV_FILE_NAME.match(name):
        return ORPHAN_DV
    return ORPHAN_DATA


# -- full vacuum: list the table directory -------------------------------------------------


def _stale_log_temp_files(storage: Storage, cutoff: int) -> list[VacuumFile]:
    """dvtool temp files in `_delta_log` older than the cutoff: left by a commit or
    checkpoint whose process died mid-write; no reader takes them for log files."""
    return [
        VacuumFile(f"_delta_log/{info.name}", info.size, STALE_TEMP_FILE)
        for info in storage.list_dir(storage.join("_delta_log"))
        if _TEMP_FILE_NAME.match(info.name)
        and info.modification_time_ms is not None
        and info.modification_time_ms < cutoff
    ]


def _full_candidates(
    storage: Storage, keep: _Keep, layout: _Layout, cutoff: int
) -> tuple[list[VacuumFile], list[str]]:
    """The files to delete, and the listed directories that were empty and older than the
    cutoff (removed after the files, on local disk)."""
    files: list[VacuumFile] = []
    dirs: list[TreeEntry] = []
    parents: set[str] = set()
    for entry in storage.walk(storage.root, layout.descend):
        parents.add(posixpath.dirname(entry.relative_path))
        if entry.kind == "dir":
            if layout.descend(entry.relative_path):
                dirs.append(entry)
            continue
        if entry.kind != "file":
            continue
        mtime = entry.modification_time_ms
        if mtime is None or mtime >= cutoff:
            continue
        name = entry.relative_path.rpartition("/")[2]
        if _TEMP_FILE_NAME.match(name):
            files.append(VacuumFile(entry.relative_path, entry.size, STALE_TEMP_FILE))
        elif not _hidden(name) and not keep.kept(entry.relative_path):
            reason = _reason(entry.relative_path, keep)
            files.append(VacuumFile(entry.relative_path, entry.size, reason))
    files += _stale_log_temp_files(storage, cutoff)
    empty = [
        d.relative_path
        for d in dirs
        if d.relative_path not in parents
        and d.modification_time_ms is not None
        and d.modification_time_ms < cutoff
    ]
    return files, empty


# -- lite vacuum: candidates from the log ----------------------------------------------------


def read_last_vacuum_info(log: DeltaLog) -> int | None:
    """`latestCommitVersionOutsideOfRetentionWindow` of `_delta_log/_last_vacuum_info`, or
    None when the file is missing, unreadable, or holds no version (as Delta reads it)."""
    try:
        doc = json.loads(log.storage.read(log.storage.join(LAST_VACUUM_INFO)))
    except (FileMissingError, ValueError):
        return None
    value = doc.get(LAST_VACUUM_KEY) if isinstance(doc, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def last_vacuum_info_json(version: int) -> bytes:
    """The bytes of `_delta_log/_last_vacuum_info` as Delta Spark writes them."""
    return (json.dumps({LAST_VACUUM_KEY: version}, separators=(",", ":")) + "\n").encode()


@dataclass
class _LitePlan:
    """The commits `--lite` reads (inclusive range and file names), and the version to
    record in `_last_vacuum_info` once their files are dealt with."""

    commits: tuple[int, int] | None
    names: dict[int, str] = field(default_factory=dict)
    record: int | None = None


def _lite_plan(log: DeltaLog, snapshot: Snapshot, cutoff: int, last: int | None) -> _LitePlan:
    commits = {f.version: f.name for f in log.list_files() if f.kind == LogFileKind.COMMIT}
    end = _latest_commit_before(log, cutoff, snapshot.version)
    start = 0 if last is None else last + 1
    if end is None or start > end:
        return _LitePlan(None)
    missing = [v for v in range(start, end + 1) if v not in commits]
    if missing:
        earliest = min(commits) if commits else None
        since = (
            "no vacuum recorded in _delta_log/_last_vacuum_info, so the whole log from version 0"
            if last is None
            else f"the commits since the last vacuum (versions {start} to {end})"
        )
        where = f"the log now starts at version {earliest}" if earliest is not None else ""
        raise WriteRefusedError(
            f"vacuum --lite needs {since}, but version {missing[0]} is no longer in the log "
            f"({where or 'its commits were cleaned up'})",
            hint="Run a full vacuum (without --lite): it lists the table directory, and "
            "records where the next --lite run can start.",
        )
    return _LitePlan((start, end), {v: commits[v] for v in range(start, end + 1)})


def _lite_candidates(
    log: DeltaLog,
    plan: _LitePlan,
    keep: _Keep,
    layout: _Layout,
    paths: _PathResolver,
    cutoff: int,
) -> list[VacuumFile]:
    """Expired removes' files and DV files, and change data files, of the plan's commits;
    sets `plan.record`."""
    if plan.commits is None:
        return []
    start, end = plan.commits
    storage = log.storage

    def read(version: int) -> list[dict[str, Any]]:
        name = plan.names[version]
        return parse_actions(storage.read(storage.join(f"_delta_log/{name}")), name)

    versions = list(range(start, end + 1))
    wanted: dict[str, str] = {}
    record = end
    for version, actions in zip(versions, map_io(read, versions), strict=True):
        for action in actions:
            ((kind, body),) = action.items()
            if not isinstance(body, dict):
                continue
            if kind == "remove":
                if (body.get("deletionTimestamp") or 0) >= cutoff:
                    # Not expired yet: the next run must read this commit again.
                    record = min(record, version - 1)
                    continue
                _lite_remove(body, keep, paths, wanted)
            elif kind == "cdc" and isinstance(body.get("path"), str):
                relative = paths.relative(body["path"], "cdc", strict=True)
                if relative is not None:
                    wanted.setdefault(relative, EXPIRED_CHANGE_DATA)
    plan.record = record if record >= start else None
    safe = [
        (rel, reason)
        for rel, reason in sorted(wanted.items())
        if layout.listable(rel) and not keep.kept(rel)
    ]
    found = map_io(lambda item: _lite_file(storage, item[0], item[1], cutoff), safe)
    return [f for f in found if f is not None]


def _lite_remove(
    body: Mapping[str, Any], keep: _Keep, paths: _PathResolver, wanted: dict[str, str]
) -> None:
    path = body.get("path")
    if isinstance(path, str):
        relative = paths.relative(path, "remove", strict=True)
        if relative is not None:
            keep.tombstones.add(relative)
            wanted.setdefault(relative, EXPIRED_TOMBSTONE)
    dv = body.get("deletionVector")
    if isinstance(dv, Mapping):
        relative, absolute = paths.dv_relative(dv, "remove", strict=True)
        if relative is not None and not absolute:
            keep.dv_files.add(relative)
            wanted[relative] = ORPHAN_DV
        elif relative is not None:
            keep.add(relative)


def _lite_file(storage: Storage, relative: str, reason: str, cutoff: int) -> VacuumFile | None:
    """The candidate if it exists as a regular file really inside the root, old enough."""
    location = storage.join(relative)
    if storage.real_relative_to_root(location) != relative:
        return None  # reached through a symbolic link, or outside the root
    info = storage.info(location)
    if info is None or info.modification_time_ms is None or info.modification_time_ms >= cutoff:
        return None
    return VacuumFile(relative, info.size, reason)


def _latest_commit_before(log: DeltaLog, cutoff: int, latest: int) -> int | None:
    """The newest commit committed before `cutoff` (Delta's commit times), at most `latest`;
    None when every commit is newer."""
    try:
        version = log.version_at(cutoff - 1)
    except LogError:
        commits = sorted(
            (f for f in log.list_files() if f.kind == LogFileKind.COMMIT), key=lambda f: f.version
        )
        if not commits:
            return None
        first = commits[0]
        info = first_commit_info(log.storage.read(log.storage.join(f"_delta_log/{first.name}")))
        ict = (info or {}).get("inCommitTimestamp")
        first_time = ict if isinstance(ict, int) else (first.modification_time_ms or 0)
        if first_time >= cutoff:
            return None
        version = commits[-1].version
    return min(version, latest)


# -- deleting ---------------------------------------------------------------------------------


def _execute(
    log: DeltaLog,
    snapshot: Snapshot,
    request: VacuumRequest,
    result: VacuumResult,
    empty_dirs: Sequence[str],
    record: int | None,
    progress: Progress | None,
    default_ms: int | None,
) -> VacuumResult:
    storage = log.storage
    warnings: list[str] = []
    candidates = {f.path for f in result.files}
    start = _commit_start(log, snapshot, request, result, candidates, default_ms)
    if start.checkpoint_warning:
        warnings.append(start.checkpoint_warning)
    try:
        deleted, failed = _delete(storage, result.files, progress)
        directories = _remove_directories(storage, deleted, empty_dirs)
    except BaseException:
        try:
            _commit_end(log, "FAILED", {})
        except Exception as e:  # report the original error, not this one
            warnings.append(f"could not record VACUUM END: {e}")
        raise
    status = "COMPLETED" if not failed else "FAILED"
    metrics = {"numDeletedFiles": len(deleted), "numVacuumedDirectories": directories}
    end_version: int | None = None
    try:
        end = _commit_end(log, status, metrics)
        end_version = end.version
        if end.checkpoint_warning:
            warnings.append(end.checkpoint_warning)
    except DvtoolError as e:  # the deletes are done: report them whatever happens here
        warnings.append(f"the files were deleted, but VACUUM END could not be committed: {e}")
    last_vacuum = result.last_vacuum_version
    if record is not None and not failed and (last_vacuum is None or record > last_vacuum):
        try:
            storage.write_atomic_replace(
                storage.join(LAST_VACUUM_INFO), last_vacuum_info_json(record)
            )
            last_vacuum = record
        except StorageError as e:
            warnings.append(f"could not write {LAST_VACUUM_INFO}: {e.message}")
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


def _commit_start(
    log: DeltaLog,
    snapshot: Snapshot,
    request: VacuumRequest,
    result: VacuumResult,
    candidates: set[str],
    default_ms: int | None,
) -> CommitResult:
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
    return LogWriter(log).try_commit(snapshot.version, [info], read_set, metadata=snapshot.metadata)


def _commit_end(log: DeltaLog, status: str, metrics: Mapping[str, int]) -> CommitResult:
    """Commit VACUUM END on the latest version; other writers' commits never conflict."""
    for attempt in range(1, _END_ATTEMPTS + 1):
        snapshot = log.snapshot()
        info = snapshot_commit_info(
            snapshot,
            "VACUUM END",
            {"status": status},
            metrics,
            txn_id=str(uuid.uuid4()),
            now_ms=int(time.time() * 1000),
            is_blind_append=True,
        )
        read_set = ReadSet.for_actions(snapshot.version, [info])
        try:
            return LogWriter(log).try_commit(
                snapshot.version, [info], read_set, metadata=snapshot.metadata
            )
        except CommitConflictError:
            if attempt == _END_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _delete(
    storage: Storage, files: Sequence[VacuumFile], progress: Progress | None
) -> tuple[list[VacuumFile], list[FailedDelete]]:
    """Delete the files in parallel; each is checked to be really inside the root first."""
    advance = progress(len(files)) if progress else None
    chunks = [files[i : i + _DELETE_CHUNK] for i in range(0, len(files), _DELETE_CHUNK)]

    def delete_chunk(chunk: Sequence[VacuumFile]) -> list[tuple[VacuumFile, str | None]]:
        out: list[tuple[VacuumFile, str | None]] = []
        safe: list[VacuumFile] = []
        for f in chunk:
            location = storage.join(f.path)
            if storage.real_relative_to_root(location) != f.path:
                out.append((f, "not deleted: the path now leads outside the table root"))
            else:
                safe.append(f)
        try:
            storage.delete_many([storage.join(f.path) for f in safe])
            out += [(f, None) for f in safe]
        except StorageError:
            for f in safe:
                try:
                    storage.delete(storage.join(f.path))
                    out.append((f, None))
                except StorageError as e:
                    out.append((f, e.message))
        if advance is not None:
            advance(len(chunk))
        return out

    deleted: list[VacuumFile] = []
    failed: list[FailedDelete] = []
    for outcomes in map_io(delete_chunk, chunks):
        for f, error in outcomes:
            if error is None:
                deleted.append(f)
            else:
                failed.append(FailedDelete(f.path, error))
    return deleted, failed


def _remove_directories(
    storage: Storage, deleted: Iterable[VacuumFile], empty_dirs: Iterable[str]
) -> int:
    """Remove directories left empty (local disk): those above deleted files, and those that
    were empty when listed and older than the cutoff (and the ones above them), deepest
    first; a directory that is not empty stays. Returns how many were removed."""
    if storage.protocol != "file":
        return 0
    touched: set[str] = set(empty_dirs)
    for path in [f.path for f in deleted] + list(empty_dirs):
        touched.update(_ancestors(path))
    candidates = sorted(touched, key=lambda d: (-d.count("/"), d))
    removed = 0
    for relative in candidates:
        if relative in ("", "_delta_log") or relative.startswith("_delta_log/"):
            continue
        location = storage.join(relative)
        if storage.real_relative_to_root(location) != relative:
            continue
        if storage.remove_empty_dir(location):
            removed += 1
    return removed


def _ancestors(relative: str) -> list[str]:
    out = []
    head = posixpath.dirname(relative)
    while head:
        out.append(head)
        head = posixpath.dirname(head)
    return out
