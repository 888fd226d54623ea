"""Listings: what `Storage` reports about files, and the recursive walk vacuum uses.

Backends describe a file in their own words (fsspec entries with `mtime`, `LastModified`,
`updated`...; `os.scandir` entries on disk). These functions turn them into the two records
of the storage contract, `FileInfo` (`list_dir`, `info`) and `TreeEntry` (`walk`), and hold
the walk's rules: on disk links are reported and never followed and `descend` decides which
directories are listed; on object stores, where directories are implicit, it decides which
files are left out.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dvtool.storage.failures import backend_errors


@dataclass(frozen=True)
class FileInfo:
    """A file as `list_dir` and `info` report it."""

    location: str
    name: str
    size: int
    modification_time_ms: int | None


@dataclass(frozen=True)
class TreeEntry:
    """A file, directory or symbolic link found by `Storage.walk`.

    `relative_path` is `/`-separated and relative to the walked directory; `kind` is `file`,
    `dir` or `symlink`; `size` is 0 for directories and links; modification times are in
    epoch milliseconds (of the link itself for a link), None when the backend has none.
    """

    relative_path: str
    location: str
    kind: str
    size: int
    modification_time_ms: int | None


def is_child_file(entry: Mapping[str, Any], dir_path: str) -> bool:
    """Whether an fsspec listing entry is a file directly inside `dir_path`."""
    name = str(entry["name"]).rstrip("/")
    return entry.get("type") == "file" and name.rpartition("/")[0] == dir_path.rstrip("/")


def is_child_dir(entry: Mapping[str, Any], dir_path: str) -> bool:
    """Whether an fsspec listing entry is a directory (not a link to one) directly inside
    `dir_path`."""
    name = str(entry["name"]).rstrip("/")
    is_dir = entry.get("type") == "directory" and not entry.get("islink")
    return is_dir and name.rpartition("/")[0] == dir_path.rstrip("/")


def file_info(entry: Mapping[str, Any], dir_location: str) -> FileInfo:
    """A FileInfo from an fsspec entry in the directory at `dir_location`."""
    name = str(entry["name"]).rstrip("/").rpartition("/")[2]
    location = dir_location + name if dir_location.endswith("/") else f"{dir_location}/{name}"
    return FileInfo(location, name, int(entry.get("size") or 0), _mtime_ms(entry))


def walk_local(
    location: str, path: str, descend: Callable[[str], bool] | None
) -> Iterator[TreeEntry]:
    """Files, directories and links under the local directory `path` (at `location`).

    Links are never followed; a directory is yielded, then listed only if `descend(its
    relative path)` is true (default: all). A missing directory walks as empty.
    """
    stack: list[tuple[str, str]] = [(path, "")]
    while stack:
        directory, prefix = stack.pop()
        with backend_errors(location, "list"):
            try:
                with os.scandir(directory) as it:
                    found = [_tree_entry(e, prefix) for e in it]
            except (FileNotFoundError, NotADirectoryError):
                found = []
        for entry in found:
            if entry is None:
                continue
            yield entry
            if entry.kind == "dir" and (descend is None or descend(entry.relative_path)):
                stack.append((entry.location, entry.relative_path + "/"))


def remote_tree(
    entries: Mapping[str, Any],
    path: str,
    descend: Callable[[str], bool] | None,
    to_location: Callable[[str], str],
) -> Iterator[TreeEntry]:
    """The files of an fsspec `find` result under `path`, sorted by path.

    A file is left out when `descend` refuses one of the directories above it (each
    directory is asked once); `to_location` turns an fsspec path into a location.
    """
    allowed: dict[str, bool] = {}

    def listed(relative: str) -> bool:
        parts = relative.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            directory = "/".join(parts[:i])
            if directory not in allowed:
                allowed[directory] = descend is None or descend(directory)
            if not allowed[directory]:
                return False
        return True

    prefix = path.rstrip("/") + "/"
    for name, entry in sorted(entries.items()):
        name = str(name).rstrip("/")
        if entry.get("type") != "file" or not name.startswith(prefix):
            continue
        relative = name[len(prefix) :]
        if listed(relative):
            yield TreeEntry(
                relative,
                to_location(name),
                "file",
                int(entry.get("size") or 0),
                _mtime_ms(entry),
            )


def _tree_entry(entry: os.DirEntry[str], prefix: str) -> TreeEntry | None:
    """A TreeEntry for one `os.scandir` entry (links not followed); None for other kinds
    (sockets, fifos) and for entries that vanished meanwhile."""
    try:
        info = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None
    mtime = info.st_mtime_ns // 1_000_000
    relative = prefix + entry.name
    location = entry.path.replace(os.sep, "/")
    if stat.S_ISLNK(info.st_mode):
        return TreeEntry(relative, location, "symlink", 0, mtime)
    if stat.S_ISDIR(info.st_mode):
        return TreeEntry(relative, location, "dir", 0, mtime)
    if stat.S_ISREG(info.st_mode):
        return TreeEntry(relative, location, "file", info.st_size, mtime)
    return None


def _mtime_ms(entry: Mapping[str, Any]) -> int | None:
    """The modification time in ms from whichever key the backend uses."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = _to_ms(entry.get(key))
        if value is not None:
            return value
    return None


def _to_ms(value: object) -> int | None:
    """Milliseconds since the epoch from a datetime, seconds, or an ISO 8601 string."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1000)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    return None
