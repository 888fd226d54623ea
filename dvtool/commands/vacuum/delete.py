"""Deleting the files of a `dvtool vacuum` plan, and the directories they leave empty.

Files are deleted in parallel, in chunks (one bulk delete per chunk on object stores, file
by file if that fails), each checked again just before deletion to be really inside the
table root: a directory swapped for a symbolic link after the listing cannot lead outside.
A file that cannot be deleted is reported, not retried.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dvtool.commands.vacuum.layout import DELTA_LOG_DIR
from dvtool.commands.vacuum.plan import VacuumFile
from dvtool.errors import StorageError
from dvtool.io_pool import map_io
from dvtool.storage.table_storage import Storage

# `progress(total)` returns `advance(n)`, called as files are dealt with.
Progress = Callable[[int], Callable[[int], None]]

_DELETE_CHUNK = 100

_Outcome = tuple[VacuumFile, str | None]  # the file, and the error if it was not deleted


@dataclass(frozen=True)
class FailedDelete:
    """A file of the list that could not be deleted."""

    path: str
    error: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def delete_files(
    storage: Storage, files: Sequence[VacuumFile], progress: Progress | None
) -> tuple[list[VacuumFile], list[FailedDelete]]:
    """Delete the files in parallel; each is checked to be really inside the root first."""
    advance = progress(len(files)) if progress else None
    chunks = [files[i : i + _DELETE_CHUNK] for i in range(0, len(files), _DELETE_CHUNK)]

    def delete_chunk(chunk: Sequence[VacuumFile]) -> list[_Outcome]:
        outcomes = _delete_chunk(storage, chunk)
        if advance is not None:
            advance(len(chunk))
        return outcomes

    deleted: list[VacuumFile] = []
    failed: list[FailedDelete] = []
    for outcomes in map_io(delete_chunk, chunks):
        for f, error in outcomes:
            if error is None:
                deleted.append(f)
            else:
                failed.append(FailedDelete(f.path, error))
    return deleted, failed


def _delete_chunk(storage: Storage, chunk: Sequence[VacuumFile]) -> list[_Outcome]:
    """Delete the chunk's files that are still inside the root: in one bulk call, or one
    by one if it fails."""
    out: list[_Outcome] = []
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
    return out


def remove_checksum_sidecars(storage: Storage, deleted: Iterable[VacuumFile]) -> int:
    """Delete the Hadoop checksum file `.NAME.crc` beside each deleted file (local disk);
    returns how many there were.

    Spark writes local tables through Hadoop's checksummed local file system, which keeps a
    hidden `.NAME.crc` beside every file it writes and deletes it with the file, as Delta
    Spark's VACUUM does. Vacuum never deletes hidden files on its own, so without this they
    would outlive their files forever and keep their directories from being removed. A
    sidecar that cannot be deleted is left (it is no table data)."""
    if storage.protocol != "file":
        return 0
    removed = 0
    for f in deleted:
        head, name = posixpath.split(f.path)
        sidecar = posixpath.join(head, f".{name}.crc")
        location = storage.join(sidecar)
        if storage.real_relative_to_root(location) != sidecar or not storage.exists(location):
            continue
        with contextlib.suppress(StorageError):
            storage.delete(location)
            removed += 1
    return removed


def remove_empty_directories(
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
        if relative in ("", DELTA_LOG_DIR) or relative.startswith(DELTA_LOG_DIR + "/"):
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
