"""Full `dvtool vacuum`: the candidates found by listing the table directory.

The table directory is walked (never following symbolic links) as `VacuumLayout` allows;
every file there that is not kept and was last modified before the cutoff is deleted, and
so are dvtool's own temp files left by writers that died, in the table and in `_delta_log`.
Directories that were empty when listed and older than the cutoff are returned too: they
are removed after the files, on local disk.
"""

from __future__ import annotations

import posixpath

from dvtool.commands.vacuum.keep import KeepSet
from dvtool.commands.vacuum.layout import CHANGE_DATA_DIR, DELTA_LOG_DIR, VacuumLayout, hidden
from dvtool.commands.vacuum.plan import (
    DV_FILE_NAME,
    EXPIRED_CHANGE_DATA,
    EXPIRED_TOMBSTONE,
    ORPHAN_DATA,
    ORPHAN_DV,
    STALE_TEMP_FILE,
    TEMP_FILE_NAME,
    VacuumFile,
)
from dvtool.storage.listing import TreeEntry
from dvtool.storage.table_storage import Storage


def full_candidates(
    storage: Storage, keep: KeepSet, layout: VacuumLayout, cutoff: int
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
        if entry.kind == "file":
            candidate = _candidate(entry, keep, cutoff)
            if candidate is not None:
                files.append(candidate)
    files += _stale_log_temp_files(storage, cutoff)
    empty = [
        d.relative_path
        for d in dirs
        if d.relative_path not in parents
        and d.modification_time_ms is not None
        and d.modification_time_ms < cutoff
    ]
    return files, empty


def _candidate(entry: TreeEntry, keep: KeepSet, cutoff: int) -> VacuumFile | None:
    """The listed file as a candidate: a stale temp file, or a visible file not kept; None
    when it is newer than the cutoff (or its time is unknown), hidden, or kept."""
    mtime = entry.modification_time_ms
    if mtime is None or mtime >= cutoff:
        return None
    name = entry.relative_path.rpartition("/")[2]
    if TEMP_FILE_NAME.match(name):
        return VacuumFile(entry.relative_path, entry.size, STALE_TEMP_FILE)
    if hidden(name) or keep.kept(entry.relative_path):
        return None
    return VacuumFile(entry.relative_path, entry.size, _reason(entry.relative_path, keep))


def _reason(relative: str, keep: KeepSet) -> str:
    """Why a listed file that is not kept goes: what the log said about it, if anything."""
    if relative.startswith(CHANGE_DATA_DIR + "/"):
        return EXPIRED_CHANGE_DATA
    if relative in keep.tombstones:
        return EXPIRED_TOMBSTONE
    name = relative.rpartition("/")[2]
    if relative in keep.dv_files or DV_FILE_NAME.match(name):
        return ORPHAN_DV
    return ORPHAN_DATA


def _stale_log_temp_files(storage: Storage, cutoff: int) -> list[VacuumFile]:
    """dvtool temp files in `_delta_log` older than the cutoff: left by a commit or
    checkpoint whose process died mid-write; no reader takes them for log files."""
    return [
        VacuumFile(f"{DELTA_LOG_DIR}/{info.name}", info.size, STALE_TEMP_FILE)
        for info in storage.list_dir(storage.join(DELTA_LOG_DIR))
        if TEMP_FILE_NAME.match(info.name)
        and info.modification_time_ms is not None
        and info.modification_time_ms < cutoff
    ]
