"""The local disk as the filesystem object `Storage` calls, on `os` alone (no fsspec).

`Storage` reaches every backend through an fsspec-shaped filesystem object. For a local
table that object used to be fsspec's `LocalFileSystem`, and importing fsspec (with asyncio
and its registry of implementations) cost 25-35 ms of every command's start-up, more than
reading a small table. `LocalFiles` is the part of that filesystem dvtool calls (`ls` with
details, `info`, `cat_file`, `open` for reading, `rm_file`, `invalidate_cache`), written on
`os`, answering as fsspec's does (tests/storage/test_local_files.py compares the two):

- entries are dicts with fsspec's keys (`name`, `size`, `type` = `file`, `directory` or
  `other`, `created`, `islink`, `mode`, `uid`, `gid`, `mtime`, `ino`, `nlink`, and
  `destination` for a link), `name` the entry's absolute POSIX path;
- `info` follows a symbolic link (a link to a file is a `file` of the target's size); `ls`
  does not: in a listing a link is `other`, with the target's size (0 when dangling) and
  the link's own times;
- `ls` of a file lists that file; of a missing path it raises FileNotFoundError, of a path
  through a file NotADirectoryError (the `os` exceptions, unchanged);
- `cat_file(path, start, end)` reads through `open`, seeking to `start` and reading up to
  `end` (negative values count from the end of the file, as in slices), a short result when
  the file ends first.

Paths are the absolute POSIX paths `Storage` makes (`locations.local_abspath`); trailing
slashes are ignored. Writes, commits and walks on disk do not come here: they are
`local_disk`'s and `listing`'s, on `os` too. With storage options a local table still opens
fsspec's `LocalFileSystem` (see `backends`), which takes them.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import stat
from typing import Any, BinaryIO

__all__ = ["LocalFiles"]


class LocalFiles:
    """The local filesystem with the fsspec methods `Storage` calls on it; see the module."""

    def invalidate_cache(self, path: str | None = None) -> None:
        """Nothing to do: every call asks the disk (fsspec's local filesystem caches nothing)."""

    def info(self, path: str) -> dict[str, Any]:
        """The entry of `path`, symbolic links followed; FileNotFoundError if it is missing."""
        path = _normalized(path)
        status = os.stat(path, follow_symlinks=False)
        link = stat.S_ISLNK(status.st_mode)
        if link:
            status = os.stat(path)
        return _entry(path, status, status.st_size, link)

    def ls(self, path: str, detail: bool = True) -> list[dict[str, Any]]:
        """The entries of the directory `path` (links not followed), or `[info(path)]` when
        `path` is not a directory. Only the detailed form (`detail=True`) is offered."""
        if not detail:
            raise NotImplementedError("LocalFiles.ls lists entries with details only")
        path = _normalized(path)
        found = self.info(path)
        if found["type"] != "directory":
            return [found]
        entries = []
        with os.scandir(path) as directory:
            for item in directory:
                with contextlib.suppress(FileNotFoundError):  # removed while we listed
                    entries.append(_listed_entry(item))
        return entries

    def open(self, path: str, mode: str = "rb") -> BinaryIO:
        """The file opened for reading bytes (the only mode dvtool reads local files in)."""
        if mode != "rb":
            raise ValueError(f"LocalFiles opens files for reading ('rb') only, not {mode!r}")
        return builtins.open(_normalized(path), "rb")  # `open` here is this method

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """The bytes of the file from `start` up to `end` (default: all of it)."""
        with self.open(path) as f:
            if start is not None:
                f.seek(start if start >= 0 else max(0, _size(f) + start))
            if end is not None:
                if end < 0:
                    end = _size(f) + end
                return f.read(end - f.tell())
            return f.read()

    def rm_file(self, path: str) -> None:
        """Remove the file; FileNotFoundError if it is missing (the caller decides)."""
        os.remove(_normalized(path))


def _normalized(path: str) -> str:
    """`path` without trailing slashes (`/` stays `/`), as fsspec strips them."""
    return path.rstrip("/") or "/"


def _listed_entry(item: os.DirEntry[str]) -> dict[str, Any]:
    """The entry of one `os.scandir` item: the link itself, with its target's size."""
    status = item.stat(follow_symlinks=False)
    link = stat.S_ISLNK(status.st_mode)
    size = status.st_size
    if link:
        try:
            size = item.stat().st_size
        except OSError:
            size = 0  # dangling link
    return _entry(item.path.replace(os.sep, "/"), status, size, link)


def _entry(path: str, status: os.stat_result, size: int, link: bool) -> dict[str, Any]:
    """fsspec's entry dict for `path` with stat result `status`."""
    mode = status.st_mode
    kind = "directory" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"
    entry: dict[str, Any] = {
        "name": path,
        "size": size,
        "type": kind,
        "created": getattr(status, "st_birthtime", status.st_ctime),
        "islink": link,
        "mode": mode,
        "uid": status.st_uid,
        "gid": status.st_gid,
        "mtime": status.st_mtime,
        "ino": status.st_ino,
        "nlink": status.st_nlink,
    }
    if link:
        entry["destination"] = os.readlink(path)
    return entry


def _size(f: BinaryIO) -> int:
    """The size of an open file."""
    return os.fstat(f.fileno()).st_size
