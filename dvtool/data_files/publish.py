"""Putting a new data file in place: whole or not at all, and durable before a commit names it.

The parquet bytes are first written to a local file (`dvtool.data_files.writing`); then

- on local disk, that file is a temp file beside the target (`.tmp-<uuid>.dvtool`, which no
  reader or vacuum takes for a data file), renamed into place once complete: nobody sees a
  partial file under a data file name, and a failed write leaves nothing behind;
- elsewhere it is a local temp file, sent with one `write` (up to 64 MiB) or a streamed
  upload. Object stores publish a PUT whole or not at all, and durably once acknowledged,
  so nothing more is needed there.

Durability on local disk. The commit that references a new file is its publish point
(PROTOCOL.md: a commit must only name files that exist), so the file's bytes and its
directory entry, and the entries of any directory created for it, must be fsynced before
that commit is written; until then a crash leaves at most an unreferenced file, which
vacuum removes. Two ways to get there:

- `sync=None`: the writer fsyncs the temp file, renames it, fsyncs the directories, and
  returns a durable file. Spark executors write this way (their files may be on another
  host's mount, where an fsync from the driver would prove nothing), as do single writes
  such as change data files.
- a `BackgroundSync`: the writer renames the file unsynced and hands it over; background
  threads fsync it and its directories while the writers go on with the next files (an
  fsync waits on the disk, not the CPU, so it no longer stalls a writer thread), and the
  engine calls `BackgroundSync.wait` before it returns the files to the command that
  commits them. A SIGKILL or a crash before that leaves only unreferenced files, as before.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import IO, TYPE_CHECKING

from dvtool.errors import StorageError
from dvtool.storage.failures import storage_error

if TYPE_CHECKING:
    from dvtool.storage.data_file_storage import DataFileStorage

__all__ = ["WHOLE_WRITE_LIMIT", "BackgroundSync", "publish_local", "publish_remote"]

# Remote files up to this size are written with one `write`; larger ones are
# streamed from a local temp file (memory stays bounded either way).
WHOLE_WRITE_LIMIT = 64 * 2**20
_COPY_CHUNK = 8 * 2**20
# Filesystems that cannot fsync a directory (as `dvtool.storage.local_disk` treats them).
_NO_DIR_FSYNC_ERRNOS = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EBADF})

WriteFile = Callable[[str], int]  # writes the parquet file at a local path; returns its rows


class BackgroundSync:
    """fsyncs of new local data files and their directories, on background threads.

    `add` is called by the writers (from any thread) once a file is renamed into place;
    `wait` returns when every file added so far is durable, or raises `StorageError` for
    the first that is not (the caller must then not commit, and deletes its files). Use it
    as a context manager, or call `close`: syncs not started yet are then dropped, as for an
    abandoned rewrite whose files are deleted anyway.

    Each job fsyncs its file, then its directories. With one directory per file, as in a
    table of small partitions, a directory fsync right after its file's is nearly free (the
    journal commit that made the file durable carried the new entry too); deferring the
    directory fsyncs to one pass at the end measured slower.
    """

    def __init__(self, threads: int = 2) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # started by the first file
        self._jobs: list[tuple[str, Future[None]]] = []
        self._failed: StorageError | None = None  # sticky: none of these files may commit
        self._closed = False

    def add(self, path: str, directories: Sequence[str]) -> None:
        """Make the local file `path` durable, then the `directories` whose entries changed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("BackgroundSync.add after close")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="dvtool-fsync")
            self._jobs.append((path, self._pool.submit(sync_entry, path, tuple(directories))))

    def wait(self) -> None:
        """Block until every file added so far, and its directories, is durable; once an
        fsync has failed, every call raises."""
        with self._lock:
            jobs, self._jobs = self._jobs, []
        for path, job in jobs:
            try:
                job.result()
            except OSError as e:
                if self._failed is None:
                    what = f"cannot make the data file {path} durable (fsync)"
                    self._failed = storage_error("fsync", path, e, what)
        if self._failed is not None:
            raise self._failed

    def close(self) -> None:
        """Stop the threads, dropping syncs that have not started."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            self._jobs = []
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BackgroundSync:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def publish_local(location: str, write: WriteFile, sync: BackgroundSync | None = None) -> int:
    """Write a local data file with `write` into a temp file beside `location`, rename it
    into place and make it durable now (`sync=None`: fsync of the file before the rename,
    of its directories after) or through `sync`; returns the rows written."""
    directory = os.path.dirname(location)
    directories = [directory, *make_directories(directory)]
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}.dvtool")
    # Created exclusively here; the descriptor stays open to fsync what Arrow writes.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    placed = False
    try:
        rows = write(tmp)
        if sync is None:
            os.fsync(fd)
        os.replace(tmp, location)
        placed = True
    finally:
        os.close(fd)
        if not placed:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
    try:
        if sync is not None:
            sync.add(location, directories)
            return rows
        for path in directories:
            fsync_directory(path)
    except BaseException:
        with contextlib.suppress(OSError):  # not durable: not a file anyone may commit
            os.remove(location)
        raise
    return rows


def make_directories(directory: str) -> list[str]:
    """Create `directory` and its missing parents; returns the directories whose listing
    gained an entry (the parent of each directory created), innermost first.

    A directory another writer creates at the same moment counts as created here too, so
    that every writer of a file in it syncs the parent's entry before its file is committed.
    """
    missing = []
    current = directory
    while current and not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
    return [os.path.dirname(path) for path in missing]


def sync_entry(path: str, directories: Sequence[str]) -> None:
    """fsync the local file `path`, then each of `directories`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for directory in directories:
        fsync_directory(directory)


def fsync_directory(path: str) -> None:
    """Make a directory's entries durable; filesystems that refuse directory fsync are skipped."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _NO_DIR_FSYNC_ERRNOS:
            raise
    finally:
        os.close(fd)


def publish_remote(storage: DataFileStorage, location: str, write: WriteFile) -> int:
    """Write the data file with `write` into a local temp file, then store it at `location`
    with one whole-file write or a streamed upload; returns the rows written."""
    fd, tmp = tempfile.mkstemp(prefix="dvtool-", suffix=".parquet")
    os.close(fd)
    try:
        rows = write(tmp)
        with open(tmp, "rb") as f:
            if os.fstat(f.fileno()).st_size <= WHOLE_WRITE_LIMIT:
                storage.write(location, f.read())
            else:
                _upload(storage, location, f)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    return rows


def _upload(storage: DataFileStorage, location: str, source: IO[bytes]) -> None:
    """Stream a local file to `location`; a failed upload leaves no file behind."""
    fs, path = storage.arrow_filesystem(location)
    try:
        with fs.open_output_stream(path) as out:
            while chunk := source.read(_COPY_CHUNK):
                out.write(chunk)
    except BaseException:
        with contextlib.suppress(Exception):
            storage.delete(location)
        raise
