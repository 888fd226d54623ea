"""`dvtool vacuum --lite`: the candidates read from the log instead of a directory listing.

As Delta's VACUUM LITE, the candidates are the files of expired removes (and their DV
files) and the change data files of the commits since the last vacuum (recorded in
`_delta_log/_last_vacuum_info`) up to the newest commit older than the cutoff. Only log
paths free of `..` segments, inside the root, listable by the table's layout, and still
inside the root once symbolic links are resolved become candidates. If a commit of the
range was cleaned up from the log, `--lite` refuses: a full vacuum must list the directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dvtool.commands.vacuum.keep import KeepSet
from dvtool.commands.vacuum.last_info import latest_commit_outside_retention
from dvtool.commands.vacuum.layout import VacuumLayout
from dvtool.commands.vacuum.log_paths import LogPathResolver
from dvtool.commands.vacuum.plan import (
    EXPIRED_CHANGE_DATA,
    EXPIRED_TOMBSTONE,
    ORPHAN_DV,
    VacuumFile,
)
from dvtool.delta.log.reader import DeltaLog
from dvtool.delta.log.snapshot import Snapshot
from dvtool.delta.protocol.log_files import LogFileKind
from dvtool.delta.protocol.log_json import parse_actions
from dvtool.errors import WriteRefusedError
from dvtool.io_pool import map_io
from dvtool.storage.table_storage import Storage


@dataclass
class LitePlan:
    """The commits `--lite` reads (inclusive range and file names), and the version to
    record in `_last_vacuum_info` once their files are dealt with."""

    commits: tuple[int, int] | None
    names: dict[int, str] = field(default_factory=dict)
    record: int | None = None


def lite_plan(log: DeltaLog, snapshot: Snapshot, cutoff: int, last: int | None) -> LitePlan:
    """The commits after the last vacuum (`last`) up to the newest one older than the
    cutoff; WriteRefusedError if one of them is no longer in the log."""
    commits = {f.version: f.name for f in log.list_files() if f.kind == LogFileKind.COMMIT}
    end = latest_commit_outside_retention(log, cutoff, snapshot.version)
    start = 0 if last is None else last + 1
    if end is None or start > end:
        return LitePlan(None)
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
    return LitePlan((start, end), {v: commits[v] for v in range(start, end + 1)})


def lite_candidates(
    log: DeltaLog,
    plan: LitePlan,
    keep: KeepSet,
    layout: VacuumLayout,
    paths: LogPathResolver,
    cutoff: int,
) -> list[VacuumFile]:
    """Expired removes' files and DV files, and change data files, of the plan's commits;
    sets `plan.record`."""
    if plan.commits is None:
        return []
    storage = log.storage
    wanted = _expired_files(storage, plan, plan.commits, keep, paths, cutoff)
    safe = [
        (rel, reason)
        for rel, reason in sorted(wanted.items())
        if layout.listable(rel) and not keep.kept(rel)
    ]
    found = map_io(lambda item: _lite_file(storage, item[0], item[1], cutoff), safe)
    return [f for f in found if f is not None]


def _expired_files(
    storage: Storage,
    plan: LitePlan,
    commits: tuple[int, int],
    keep: KeepSet,
    paths: LogPathResolver,
    cutoff: int,
) -> dict[str, str]:
    """The files the commits name that may go, with their reasons; sets `plan.record` to
    the newest commit before the first one with a remove that has not expired yet."""
    start, end = commits

    def read(version: int) -> list[dict[str, Any]]:
        name = plan.names[version]
        return parse_actions(storage.read(storage.join(f"_delta_log/{name}")), name)

    versions = list(range(start, end + 1))
    wanted: dict[str, str] = {}
    record = end
    for version, actions in zip(versions, map_io(read, versions), strict=True):
        if not _collect_commit(actions, keep, paths, cutoff, wanted):
            # Not expired yet: the next run must read this commit again.
            record = min(record, version - 1)
    plan.record = record if record >= start else None
    return wanted


def _collect_commit(
    actions: Sequence[Mapping[str, Any]],
    keep: KeepSet,
    paths: LogPathResolver,
    cutoff: int,
    wanted: dict[str, str],
) -> bool:
    """Add the files of a commit's expired removes and change data to `wanted`; False if
    the commit has a remove that has not expired yet."""
    all_expired = True
    for action in actions:
        ((kind, body),) = action.items()
        if not isinstance(body, dict):
            continue
        if kind == "remove":
            if (body.get("deletionTimestamp") or 0) >= cutoff:
                all_expired = False
                continue
            _lite_remove(body, keep, paths, wanted)
        elif kind == "cdc" and isinstance(body.get("path"), str):
            relative = paths.relative(body["path"], "cdc", strict=True)
            if relative is not None:
                wanted.setdefault(relative, EXPIRED_CHANGE_DATA)
    return all_expired


def _lite_remove(
    body: Mapping[str, Any], keep: KeepSet, paths: LogPathResolver, wanted: dict[str, str]
) -> None:
    """An expired remove: its data file and its relative DV file are candidates; an
    absolute-path DV file is kept."""
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
