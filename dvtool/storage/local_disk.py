"""Crash-safe writes on local disk: temp file, fsync, then link or rename into place.

Object stores publish a PUT whole or not at all; a local filesystem does not, so `Storage`
writes local files the POSIX way. The bytes go to a temp file beside the target (named
`.tmp-<uuid>.dvtool`, which no reader takes for a Delta file) and are fsynced; then
`os.link` creates the final name only if it is absent (commits) or `os.replace` swaps it in
(other writes), and the directory is fsynced so the new entry survives a crash. The temp
file is removed on every path. Removing empty directories (vacuum) is here too: only local
disk has directories to remove.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Callable

from dvtool import faults
from dvtool.errors import StorageError
from dvtool.storage.failures import one_line

_NO_HARD_LINK_ERRNOS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def create_if_absent(path: str, data: bytes, refuse_unsafe: Callable[[str], None]) -> bool:
    """Temp file, fsync, hard link to the final name (fails if it exists), fsync dir.

    True if the file was created, False if it existed. On a filesystem without hard links
    `refuse_unsafe(problem)` is called: it raises unless unsafe single-writer commits are
    allowed, and then the file is created by an exists-check and a rename.
    """
    tmp = _temp_file(path, data)
    try:
        faults.reached("commit-temp-written")
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINK_ERRNOS:
                raise
            refuse_unsafe(f"no hard links on this filesystem ({exc})")
            return _unsafe_create(tmp, path)
        faults.reached("commit-linked")
        _fsync_dir(os.path.dirname(path))
        return True
    finally:
        _remove_quietly(tmp)


def replace_file(path: str, data: bytes) -> None:
    """Create or replace `path` atomically: temp file + fsync + os.replace + fsync of the dir.

    A Hadoop checksum file of the old bytes (`.<name>.crc`, left by Spark's local file
    system) is removed too: Hadoop readers would reject the new bytes with it.
    """
    tmp = _temp_file(path, data)
    try:
        os.replace(tmp, path)
        _fsync_dir(os.path.dirname(path))
    finally:
        _remove_quietly(tmp)
    head, name = os.path.split(path)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(head, f".{name}.crc"))


def remove_empty_dir(location: str, path: str, root_path: str) -> bool:
    """Remove the directory `path` if it is empty; True if it was removed.

    Never the root, a non-empty directory or a symbolic link (False).
    """
    if path.rstrip("/") == root_path.rstrip("/") or os.path.islink(path):
        return False
    try:
        os.rmdir(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise StorageError(f"cannot remove directory {location}: {one_line(exc)}") from exc
    return True


def _temp_file(path: str, data: bytes) -> str:
    """Write `data` to a new fsynced temp file beside `path`; returns the temp path."""
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{uuid.uuid4().hex}.dvtool")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _remove_quietly(tmp)
        raise
    return tmp


def _unsafe_create(tmp: str, path: str) -> bool:
    """Single-writer fallback without hard links: exists-check, then rename into place."""
    if os.path.lexists(path):
        return False
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(path))
    return True


def _fsync_dir(path: str) -> None:
    """Make a directory entry durable; filesystems that refuse directory fsync are skipped."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _remove_quietly(path: str) -> None:
    """Remove a file if it is there."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
