"""The one storage layer of dvtool: every read, listing and write goes through `Storage`.

`Storage` wraps an fsspec filesystem and the table root. Its contract, which the rest of
dvtool relies on and tests check point by point:

- Locations. The table root may be a local path (relative or absolute), a `file://` URI, or
  an `s3://` (also `s3a://`), `gs://`/`gcs://`, `abfs://`/`abfss://`/`az://` or `memory://`
  URI. Public methods take and return *locations*: absolute strings as a user writes them,
  an absolute POSIX path on local disk and `scheme://bucket/key` elsewhere (the scheme and
  bucket spelling of the root are kept). fsspec's own path form stays inside this module.
  `options` (the CLI's `--storage-option KEY=VALUE`) go to fsspec unchanged, except that
  the values `true` and `false` become booleans; environment variables are read by the
  backends as usual. A backend package that is not installed (s3fs, gcsfs, adlfs) or an
  unknown scheme is a `StorageError` saying what to install or which schemes work.
- Path decoding. Paths in the Delta log are RFC 2396 URIs and are percent-decoded exactly
  once: a relative path is joined to the root, an absolute URI (`s3://...`) is kept as a
  location (`file:` URIs become local paths), an absolute POSIX path is kept. A literal `%25`
  in the log is the character `%` on storage, never decoded a second time.
  `encode_for_log` encodes like Delta Spark (Hadoop `Path.toUri`), so that
  `resolve(encode_for_log(p)) == join(p)`.
- Sorted listing. `list_dir` returns the files (not subdirectories) of a directory sorted by
  name, lexicographically, as the Delta log's zero-padded names require; a missing directory
  lists as empty. `start_after` keeps only names after it (filtered after listing: fsspec
  has no start-after listing, so object stores still list the whole prefix).
- Ranged reads for DVs. `read_range` asks the backend for exactly the bytes wanted (a ranged
  GET on object stores, seek + read on disk), never the whole file, and a short read is a
  `StorageError` naming the location and the byte range.
- Errors. A missing file is `FileMissingError(location)`; any other backend failure
  (permissions, network, throttling) is a `StorageError` with the location and the
  backend's message on one line.
- Put-if-absent for commits. `put_if_absent` creates a file only if it does not exist,
  atomically: exactly one of several racing writers gets True and its bytes are the file's.
  Local disk: a temp file in the same directory (named `.tmp-<uuid>.dvtool`, which no
  reader takes for a Delta file), fsync, `os.link` to the final name (fails if it exists),
  fsync of the directory; the temp file is removed on every path. memory://: fsspec's
  create mode under a process-wide lock. s3, gs, abfs: fsspec's create mode, which the
  backends turn into a conditional PUT (`If-None-Match: *`, `ifGenerationMatch=0`,
  `overwrite=False`). Because a conditional PUT can succeed while its response is lost and
  be retried, a create that finds an object with exactly our bytes counts as ours. A backend
  that cannot do this (an old backend package, a local filesystem without hard links) is a
  `StorageError` saying the table cannot be committed to safely, unless the Storage was made
  with `unsafe_single_writer=True`: then an exists-check followed by a plain write is used,
  which is only correct while no other process writes the table.
- Whole-file writes. `write` (new, uniquely named files) and `write_atomic_replace` (files
  that are replaced, such as `_last_checkpoint`) never let a reader see half a file: temp
  file + fsync + `os.replace` on disk, a single PUT on object stores. A replaced local file
  loses its stale Hadoop checksum file (`.<name>.crc`). Local writes create
  missing parent directories.
- Idempotent delete. `delete` of a missing file is not an error; `delete_many` deletes in
  bulk where the backend can.
- Recursive listing (for vacuum). `walk` yields everything under a directory with paths
  relative to it (`TreeEntry`): on local disk files, directories and symbolic links, the
  links never followed (a link to a directory elsewhere is reported, not listed), and a
  directory is listed only when `descend(relative_dir)` allows it; on object stores only
  files (directories are implicit), those under a directory `descend` refuses left out. A
  missing directory walks as empty. `real_relative_to_root` is `relative_to_root` with
  symbolic links resolved on local disk (the root's own too): None for anything that is not
  really inside the root. `remove_empty_dir` removes an empty local directory (never the
  root, never a non-empty one, never a link); object stores have none to remove.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import importlib.metadata
import os
import re
import stat
import string
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import quote, unquote, urlsplit

import fsspec
import fsspec.core
import pyarrow.fs as pafs

from dvtool import faults
from dvtool.errors import DvtoolError, FileMissingError, StorageError

__all__ = ["FileInfo", "ReadableFile", "Storage", "TreeEntry"]

# scheme -> (canonical fsspec protocol, backend package or None, dvtool extra)
_SCHEMES: dict[str, tuple[str, str | None, str | None]] = {
    "file": ("file", None, None),
    "memory": ("memory", None, None),
    "s3": ("s3", "s3fs", "s3"),
    "s3a": ("s3", "s3fs", "s3"),
    "gs": ("gs", "gcsfs", "gcs"),
    "gcs": ("gs", "gcsfs", "gcs"),
    "abfs": ("abfs", "adlfs", "azure"),
    "abfss": ("abfs", "adlfs", "azure"),
    "az": ("abfs", "adlfs", "azure"),
}

# Oldest package versions whose fsspec create mode is a server-side conditional write.
_CREATE_ONLY_REQUIRES: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = {
    "s3": (("s3fs", (2024, 12, 0)), ("botocore", (1, 35, 21))),
    "gs": (("gcsfs", (2024, 12, 0)),),
    "abfs": (("adlfs", (2025, 8, 0)),),
}

# Exceptions from these packages are backend failures, not dvtool bugs.
_BACKEND_PACKAGES = frozenset(
    {"botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "google", "adlfs", "azure"}
    | {"fsspec", "pyarrow", "requests", "urllib3"}
)

# What Hadoop's Path.toUri leaves unencoded in a path (java.net.URI's legal path chars).
_LOG_SAFE = frozenset(string.ascii_letters + string.digits + "-_.!~*'()" + ",;:$&+=" + "/@")
_LOG_QUOTED_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cs"})

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
# Characters fsspec's bulk `rm` reads as a glob pattern (it expands them before deleting).
_GLOB_CHARS = re.compile(r"[*?\[]")
_NO_HARD_LINK_ERRNOS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})
_PARQUET_BLOCK_SIZE = 4 * 2**20
_ATTEMPTS = 4
_RETRY_DELAY_S = 0.05
# OSError numbers of failures worth retrying: the store was busy (S3 409 conflicting
# conditional write, 503 SlowDown: EBUSY in s3fs), a 5xx (EREMOTEIO), a timeout or a reset.
_RETRYABLE_ERRNOS = frozenset(
    {errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET, errno.EREMOTEIO}
)
T = TypeVar("T")
_MEMORY_LOCK = threading.Lock()


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


class ReadableFile(Protocol):
    """A seekable binary file pyarrow can read; close it (or use `with`) when done."""

    def read(self, nbytes: int = ..., /) -> bytes: ...

    def seek(self, offset: int, whence: int = ..., /) -> int: ...

    def tell(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> ReadableFile: ...

    def __exit__(self, *exc: object) -> None: ...


class Storage:
    """A table root and the fsspec filesystem it lives on; see the module docstring."""

    def __init__(
        self,
        fs: Any,
        root_path: str,
        *,
        scheme: str,
        authority: str = "",
        unsafe_single_writer: bool = False,
    ) -> None:
        """Use `Storage.for_table`; this takes fsspec's form of the root."""
        self._fs = fs
        self._root_path = root_path
        self._scheme = scheme
        self.options: dict[str, str] = {}
        """The options `for_table` was given, so another process can open the same storage."""
        self.protocol: str = _SCHEMES[scheme][0]
        self._local = self.protocol == "file"
        self._bucket = root_path.lstrip("/").partition("/")[0]
        self._authority = authority or self._bucket
        self.unsafe_single_writer = unsafe_single_writer
        self.retries = 0  # backend calls retried after a retryable failure
        self.root: str = self._to_location(root_path)
        self._arrow_fs: pafs.FileSystem | None = None

    @classmethod
    def for_table(
        cls,
        uri: str,
        options: Mapping[str, str] | None = None,
        *,
        unsafe_single_writer: bool = False,
    ) -> Storage:
        """The storage of the table at `uri` (a local path or a URI), with fsspec options."""
        scheme = _scheme_of(uri) or "file"
        if scheme not in _SCHEMES:
            known = ", ".join(f"{s}://" for s in _SCHEMES)
            raise StorageError(f"unsupported storage scheme {scheme}:// in {uri}; use {known}")
        kwargs = _fsspec_options(options or {})
        if scheme == "file":
            root = _local_abspath(_file_uri_to_path(uri) if _scheme_of(uri) else uri)
            fs = _make_fs(uri, lambda: fsspec.filesystem("file", **kwargs))
            storage = cls(fs, root, scheme="file", unsafe_single_writer=unsafe_single_writer)
            storage.options = dict(options or {})
            return storage
        _require_backend(uri, scheme)
        fs, path = _make_fs(uri, lambda: fsspec.core.url_to_fs(uri, **kwargs))
        if not path.strip("/"):
            raise StorageError(f"{uri} names no bucket or container; give scheme://bucket/path")
        authority = urlsplit(uri).netloc
        storage = cls(
            fs,
            path.rstrip("/") or "/",
            scheme=scheme,
            authority=authority,
            unsafe_single_writer=unsafe_single_writer,
        )
        storage.options = dict(options or {})
        return storage

    def __repr__(self) -> str:
        return f"Storage({self.root!r})"

    # Locations

    def join(self, relative: str) -> str:
        """The location of `relative` (a `/`-separated path) under the table root."""
        relative = relative.lstrip("/")
        if not relative:
            return self.root
        return self.root + relative if self.root.endswith("/") else f"{self.root}/{relative}"

    def relative_to_root(self, location: str) -> str | None:
        """The `/`-separated path of `location` under the root, or None if not under it."""
        try:
            path = self._fs_path(location)
        except StorageError:
            return None
        if path == self._root_path:
            return ""
        prefix = self._root_path.rstrip("/") + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None

    def resolve(self, path_in_log: str) -> str:
        """The location of a path from the Delta log: a URI, percent-decoded exactly once.

        Relative paths are joined to the root; absolute URIs are kept (`file:` URIs become
        local paths); absolute POSIX paths are kept.
        """
        scheme = _scheme_of(path_in_log)
        if scheme == "file":
            return _file_uri_to_path(path_in_log)
        decoded = unquote(path_in_log)
        if scheme is not None or decoded.startswith("/"):
            return decoded
        return self.join(decoded)

    @staticmethod
    def encode_for_log(relative: str) -> str:
        """`relative` percent-encoded for the Delta log the way Delta Spark writes paths.

        Characters java.net.URI allows in a path stay (letters, digits, `-_.!~*'()`,
        `,;:$&+=`, `/`, `@`, and non-ASCII letters); everything else, `%` and space included,
        becomes UTF-8 `%XX`. A `:` before the first `/` is encoded too, so the result never
        reads as a URI scheme.
        """
        head, sep, tail = relative.partition("/")
        return _encode_segment(head).replace(":", "%3A") + sep + _encode_segment(tail)

    # Reading

    def list_dir(self, location: str, start_after: str | None = None) -> list[FileInfo]:
        """The files directly in a directory, sorted by name; [] if it does not exist.

        With `start_after`, only names greater than it (filtered after listing).
        """
        path = self._fs_path(location)
        base = self._to_location(path)

        def listing() -> list[dict[str, Any]]:
            self._fs.invalidate_cache(path)
            try:
                return list(self._fs.ls(path, detail=True))
            except (FileNotFoundError, NotADirectoryError):
                return []

        entries = self._call(location, "list", listing)
        infos = [_file_info(e, base) for e in entries if _is_child_file(e, path)]
        if start_after is not None:
            infos = [i for i in infos if i.name > start_after]
        return sorted(infos, key=lambda i: i.name)

    def read(self, location: str) -> bytes:
        """The whole file; FileMissingError if it does not exist."""
        path = self._fs_path(location)
        return self._call(location, "read", lambda: bytes(self._fs.cat_file(path)))

    def read_range(self, location: str, offset: int, size: int) -> bytes:
        """Exactly `size` bytes at `offset`, read without fetching the rest of the file."""
        if offset < 0 or size < 0:
            raise ValueError(f"bad byte range: offset {offset}, size {size}")
        path = self._fs_path(location)
        if size == 0:
            self.size(location)
            return b""
        data = self._call(
            location,
            "read",
            lambda: bytes(self._fs.cat_file(path, start=offset, end=offset + size)),
        )
        if len(data) != size:
            raise StorageError(
                f"short read from {location}: wanted bytes {offset}..{offset + size} "
                f"({size} bytes), got {len(data)}"
            )
        return data

    def info(self, location: str) -> FileInfo | None:
        """The file's size and modification time, or None if no file is there."""
        path = self._fs_path(location)

        def stat() -> dict[str, Any] | None:
            self._fs.invalidate_cache(path)
            try:
                return dict(self._fs.info(path))
            except FileNotFoundError:
                return None

        entry = self._call(location, "stat", stat)
        if entry is None or entry.get("type") != "file":
            return None
        normalized = self._to_location(path)
        parent, _, name = normalized.rpartition("/")
        return _file_info({**entry, "name": name}, parent)

    def size(self, location: str) -> int:
        """The file's length in bytes; FileMissingError if it does not exist."""
        found = self.info(location)
        if found is None:
            raise FileMissingError(location)
        return found.size

    def exists(self, location: str) -> bool:
        """Whether a file (not a directory) exists at `location`."""
        return self.info(location) is not None

    def open_parquet(self, location: str) -> ReadableFile:
        """A seekable file for `pyarrow.parquet.ParquetFile`; the caller closes it.

        Local files open as pyarrow native files; others as fsspec files with a
        read-ahead cache of modest blocks (footer first, then column chunks).
        """
        path = self._fs_path(location)
        with _backend_errors(location, "open"):
            if self._local:
                return pafs.LocalFileSystem().open_input_file(path)  # type: ignore[no-any-return]
            return self._fs.open(  # type: ignore[no-any-return]
                path, "rb", block_size=_PARQUET_BLOCK_SIZE, cache_type="readahead"
            )

    def arrow_filesystem(self, location: str | None = None) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem and the path on it of `location` (default: the root)."""
        path = self._fs_path(location) if location is not None else self._root_path
        if self._arrow_fs is None:
            self._arrow_fs = (
                pafs.LocalFileSystem()
                if self._local
                else pafs.PyFileSystem(pafs.FSSpecHandler(self._fs))
            )
        return self._arrow_fs, path

    # Writing

    def put_if_absent(self, location: str, data: bytes) -> bool:
        """Create the file atomically if absent: True if we created it, False if it existed.

        Raises StorageError if the backend cannot create files exclusively (unless
        `unsafe_single_writer`, see the module docstring).
        """
        path = self._fs_path(location)
        create = self._exclusive_create(location, path)
        half = (lambda: faults.half_temp_file(path, data)) if self._local else None
        attempts = 0

        def once() -> bool:
            nonlocal attempts
            attempts += 1
            if faults.storage_call("commit", lambda: create(data), half):
                return True
            # On disk, a retry after a lost reply finds the file that reply was about: still
            # ours. (Object stores' conditional PUT checks that itself, on every attempt.)
            return attempts > 1 and self._local and self._holds_exactly(location, path, data)

        return self._call(location, "create", once, missing=False)

    def write(self, location: str, data: bytes) -> None:
        """Write a new, uniquely named file (data or DV file); no reader sees half of it."""
        self.write_atomic_replace(location, data)

    def write_atomic_replace(self, location: str, data: bytes) -> None:
        """Create or replace a file so that readers see the old or the new bytes, never a mix.

        On local disk a Hadoop checksum file of the old bytes (`.<name>.crc`, left by Spark's
        local file system) is removed too: Hadoop readers would reject the new bytes with it.
        """
        path = self._fs_path(location)

        def replace() -> None:
            if self._local:
                _local_replace(path, data)
                head, name = os.path.split(path)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(head, f".{name}.crc"))
            else:
                self._fs.pipe_file(path, data)

        half = (lambda: faults.half_temp_file(path, data)) if self._local else None
        step = _write_step(location)
        self._call(
            location, "write", lambda: faults.storage_call(step, replace, half), missing=False
        )

    def delete(self, location: str) -> None:
        """Delete a file; a file that is already gone is not an error."""
        path = self._fs_path(location)

        def remove() -> None:
            with contextlib.suppress(FileNotFoundError):
                self._fs.rm_file(path)

        self._call(location, "delete", lambda: faults.storage_call("delete", remove), missing=False)

    def delete_many(self, locations: Iterable[str]) -> None:
        """Delete files (in bulk requests on object stores); missing ones are skipped.

        A path with a glob character (`*`, `?`, `[`) is deleted on its own, by name: fsspec's
        bulk delete would expand it as a pattern.
        """
        locations = list(locations)
        if self._local or self.protocol == "memory":
            for location in locations:
                self.delete(location)
            return
        by_bucket: dict[str, list[str]] = {}
        for location in locations:
            if _GLOB_CHARS.search(location):
                # fsspec's rm would delete what the pattern matches (say another table's
                # files under `t1/` for `t[12]/`), not this file: delete it by name.
                self.delete(location)
                continue
            path = self._fs_path(location)
            by_bucket.setdefault(path.partition("/")[0], []).append(path)
        for bucket, paths in by_bucket.items():
            self._call(
                f"{self._scheme}://{bucket}",
                "delete files in",
                functools.partial(
                    faults.storage_call, "delete", functools.partial(self._fs.rm, paths)
                ),
                missing=False,
            )

    # Recursive listing and cleanup (vacuum)

    def walk(
        self, location: str, descend: Callable[[str], bool] | None = None
    ) -> Iterator[TreeEntry]:
        """Everything under the directory `location`, recursively; nothing if it is missing.

        Local disk: files, directories and symbolic links (never followed); a directory is
        yielded, then listed only if `descend(its relative path)` is true (default: all).
        Object stores: files only; a file is left out when `descend` refuses one of the
        directories above it. The order is unspecified.
        """
        path = self._fs_path(location).rstrip("/") or "/"
        if self._local:
            yield from self._walk_local(location, path, descend)
        else:
            yield from self._walk_remote(location, path, descend)

    def real_relative_to_root(self, location: str) -> str | None:
        """`relative_to_root` with symbolic links resolved on local disk, the root's too.

        None when the location, links resolved, is not inside the root's real directory tree
        (for example a path through a link that points elsewhere, or a link itself pointing
        elsewhere). On object stores, which have no links, the same as `relative_to_root`.
        """
        if not self._local:
            return self.relative_to_root(location)
        try:
            path = self._fs_path(location)
        except StorageError:
            return None
        real = os.path.realpath(path).replace(os.sep, "/")
        root = os.path.realpath(self._root_path).replace(os.sep, "/")
        if real == root:
            return ""
        prefix = root.rstrip("/") + "/"
        return real[len(prefix) :] if real.startswith(prefix) else None

    def remove_empty_dir(self, location: str) -> bool:
        """Remove a local directory if it is empty; True if it was removed.

        Never the root, a non-empty directory or a symbolic link (False). Object stores have
        no directories to remove: always False.
        """
        if not self._local:
            return False
        path = self._fs_path(location)
        if path.rstrip("/") == self._root_path.rstrip("/") or os.path.islink(path):
            return False
        try:
            os.rmdir(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return False
            raise StorageError(f"cannot remove directory {location}: {_one_line(exc)}") from exc
        return True

    def _walk_local(
        self, location: str, path: str, descend: Callable[[str], bool] | None
    ) -> Iterator[TreeEntry]:
        stack: list[tuple[str, str]] = [(path, "")]
        while stack:
            directory, prefix = stack.pop()
            with _backend_errors(location, "list"):
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

    def _walk_remote(
        self, location: str, path: str, descend: Callable[[str], bool] | None
    ) -> Iterator[TreeEntry]:

        def find() -> dict[str, Any]:
            self._fs.invalidate_cache(path)
            try:
                return dict(self._fs.find(path, detail=True))
            except FileNotFoundError:
                return {}

        entries = self._call(location, "list", find)
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
                    self._to_location(name),
                    "file",
                    int(entry.get("size") or 0),
                    _mtime_ms(entry),
                )

    # Internals

    def _fs_path(self, location: str) -> str:
        """fsspec's path for a location on this storage; StorageError if it is elsewhere."""
        scheme = _scheme_of(location)
        if self._local:
            if scheme == "file":
                return _file_uri_to_path(location)
            if scheme is None:
                return _local_abspath(location)
        elif scheme is not None and _SCHEMES.get(scheme, ("",))[0] == self.protocol:
            return str(self._fs._strip_protocol(location))
        raise StorageError(f"{location} is not on the table's storage ({self.root})")

    def _to_location(self, path: str) -> str:
        """The location of an fsspec path on this storage."""
        if self._local:
            return path
        head, sep, rest = path.lstrip("/").partition("/")
        if head == self._bucket:
            head = self._authority
        return f"{self._scheme}://{head}{sep}{rest}"

    def _create_only(self, path: str, data: bytes) -> bool:
        """fsspec's exclusive create; True if created, False if the file exists."""
        try:
            self._fs.pipe_file(path, data, mode="create")
        except FileExistsError:
            return False
        return True

    def _exclusive_create(self, location: str, path: str) -> Callable[[bytes], bool]:
        """This backend's create-if-absent: True if it created the file, False if it existed."""
        if self._local:
            return functools.partial(self._local_put_if_absent, location, path)
        if self.protocol == "memory":

            def create_in_memory(data: bytes) -> bool:
                with _MEMORY_LOCK:
                    return self._create_only(path, data)

            return create_in_memory
        problem = _create_only_problem(self.protocol)
        if problem is not None:
            self._refuse_unsafe(location, problem)
            return functools.partial(self._unsafe_put_if_absent, location, path)

        def conditional_put(data: bytes) -> bool:
            # The backend may retry a PUT whose reply it lost and then find our own object.
            return self._create_only(path, data) or self._holds_exactly(location, path, data)

        return conditional_put

    def _call(
        self, location: str, action: str, call: Callable[[], T], *, missing: bool = True
    ) -> T:
        """Run a backend call with its errors translated (see `_backend_errors`).

        Failures worth retrying (timeouts, resets, a busy store, 5xx) are retried with
        exponential backoff, up to `_ATTEMPTS` calls in all; `retries` counts them.
        """
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with _backend_errors(location, action, missing=missing):
                    return call()
            except StorageError as exc:
                if attempt == _ATTEMPTS or not _is_retryable(exc.__cause__):
                    raise
                self.retries += 1
                time.sleep(_RETRY_DELAY_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    def _holds_exactly(self, location: str, path: str, data: bytes) -> bool:
        """Whether the existing file has exactly `data` (our own write, its reply lost)."""
        found = self.info(location)
        if found is None or found.size != len(data):
            return False
        return bytes(self._fs.cat_file(path)) == data

    def _local_put_if_absent(self, location: str, path: str, data: bytes) -> bool:
        """Temp file, fsync, hard link to the final name (fails if it exists), fsync dir."""
        tmp = _local_temp(path, data)
        try:
            faults.reached("commit-temp-written")
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in _NO_HARD_LINK_ERRNOS:
                    raise
                self._refuse_unsafe(location, f"no hard links on this filesystem ({exc})")
                return _local_unsafe_create(tmp, path)
            faults.reached("commit-linked")
            _fsync_dir(os.path.dirname(path))
            return True
        finally:
            _remove_quietly(tmp)

    def _unsafe_put_if_absent(self, location: str, path: str, data: bytes) -> bool:
        """Exists-check then write: correct only while no one else writes the table."""
        if self._fs.exists(path):
            return False
        self._fs.pipe_file(path, data)
        return True

    def _refuse_unsafe(self, location: str, problem: str) -> None:
        """Raise unless the user accepted unsafe single-writer commits."""
        if not self.unsafe_single_writer:
            raise StorageError(
                f"cannot commit safely to {location}: the backend cannot create files "
                f"exclusively ({problem})",
                hint="Upgrade the backend package, or allow unsafe single-writer commits "
                "if no other process writes this table.",
            )


def _scheme_of(text: str) -> str | None:
    """The lower-cased URI scheme of `text`, or None (a one-letter drive is no scheme)."""
    match = _SCHEME_RE.match(text)
    if match is None or len(match.group(1)) < 2:
        return None
    return match.group(1).lower()


def _file_uri_to_path(uri: str) -> str:
    """The local absolute path of a `file:` URI (`file:/x`, `file:///x`, `file://localhost/x`)."""
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            raise StorageError(f"{uri}: file URIs with a host ({host}) are not supported")
        rest = slash + path
    if not rest.startswith("/"):
        raise StorageError(f"{uri}: a file URI needs an absolute path")
    return _local_abspath(unquote(rest))


def _local_abspath(path: str) -> str:
    """An absolute, normalized POSIX path (no symlinks resolved)."""
    return os.path.abspath(os.path.expanduser(path)).replace(os.sep, "/")


def _fsspec_options(options: Mapping[str, str]) -> dict[str, Any]:
    """CLI storage options for fsspec: `true`/`false` become booleans."""
    flags = {"true": True, "false": False}
    return {k: flags.get(v.lower(), v) if isinstance(v, str) else v for k, v in options.items()}


def _require_backend(uri: str, scheme: str) -> None:
    """Import the backend package of `scheme`, or say how to install it."""
    _, package, extra = _SCHEMES[scheme]
    if package is None:
        return
    try:
        importlib.import_module(package)
    except ImportError as exc:
        raise StorageError(
            f"{uri}: {scheme}:// tables need the {package} package, which is not installed "
            f"({_one_line(exc)})",
            hint=f"Install it: pip install {package}  (or: pip install 'dvtool[{extra}]')",
        ) from exc


def _make_fs(uri: str, make: Callable[[], Any]) -> Any:
    """Call `make()`, turning a failure to set up the filesystem into a StorageError."""
    try:
        return make()
    except DvtoolError:
        raise
    except Exception as exc:
        raise StorageError(f"cannot open storage for {uri}: {_one_line(exc)}") from exc


def _create_only_problem(protocol: str) -> str | None:
    """Why the installed backend cannot create files exclusively, or None if it can."""
    for package, minimum in _CREATE_ONLY_REQUIRES.get(protocol, ()):
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return f"{package} is not installed"
        if _version_tuple(installed) < minimum:
            wanted = ".".join(map(str, minimum))
            return f"{package} {installed} is older than {wanted}"
    return None


def _version_tuple(version: str) -> tuple[int, ...]:
    """The leading numeric parts of a version string: '2024.12.0.post1' -> (2024, 12, 0)."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _encode_segment(text: str) -> str:
    """Percent-encode what java.net.URI would quote in a path."""
    return "".join(ch if _log_safe(ch) else quote(ch, safe="") for ch in text)


def _log_safe(ch: str) -> bool:
    """Whether Hadoop's Path.toUri leaves `ch` as is."""
    if ch in _LOG_SAFE:
        return True
    return ord(ch) > 127 and unicodedata.category(ch) not in _LOG_QUOTED_CATEGORIES


def _is_child_file(entry: Mapping[str, Any], dir_path: str) -> bool:
    """Whether an fsspec listing entry is a file directly inside `dir_path`."""
    name = str(entry["name"]).rstrip("/")
    return entry.get("type") == "file" and name.rpartition("/")[0] == dir_path.rstrip("/")


def _file_info(entry: Mapping[str, Any], dir_location: str) -> FileInfo:
    """A FileInfo from an fsspec entry in the directory at `dir_location`."""
    name = str(entry["name"]).rstrip("/").rpartition("/")[2]
    location = dir_location + name if dir_location.endswith("/") else f"{dir_location}/{name}"
    return FileInfo(location, name, int(entry.get("size") or 0), _mtime_ms(entry))


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


def _local_temp(path: str, data: bytes) -> str:
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


def _local_replace(path: str, data: bytes) -> None:
    """Temp file + fsync + os.replace + fsync of the directory."""
    tmp = _local_temp(path, data)
    try:
        os.replace(tmp, path)
        _fsync_dir(os.path.dirname(path))
    finally:
        _remove_quietly(tmp)


def _local_unsafe_create(tmp: str, path: str) -> bool:
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


@contextlib.contextmanager
def _backend_errors(location: str, action: str, *, missing: bool = True) -> Iterator[None]:
    """Translate backend exceptions: missing file -> FileMissingError, others -> StorageError.

    With `missing=False` a FileNotFoundError (a missing bucket or parent) is a StorageError.
    Exceptions that do not come from a backend (bugs) pass through unchanged.
    """
    try:
        yield
    except DvtoolError:
        raise
    except FileNotFoundError as exc:
        if missing:
            raise FileMissingError(location) from exc
        raise StorageError(f"cannot {action} {location}: {_one_line(exc)}") from exc
    except Exception as exc:
        if not _is_backend_error(exc):
            raise
        raise StorageError(f"cannot {action} {location}: {_one_line(exc)}") from exc


def _is_backend_error(exc: BaseException) -> bool:
    """Whether an exception reports a storage failure rather than a bug."""
    if isinstance(exc, OSError):
        return True
    return any(cls.__module__.partition(".")[0] in _BACKEND_PACKAGES for cls in type(exc).__mro__)


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line (its type name if it has none)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _is_retryable(exc: BaseException | None) -> bool:
    """Whether a backend failure may pass if the call is simply made again."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    return isinstance(exc, OSError) and exc.errno in _RETRYABLE_ERRNOS


def _write_step(location: str) -> str:
    """The fault-injection step (see `dvtool.faults`) of a whole-file write to `location`."""
    directory, _, name = location.rpartition("/")
    if directory.endswith("_delta_log"):
        if name == "_last_checkpoint":
            return "last-checkpoint"
        if ".checkpoint" in name and name.endswith(".parquet"):
            return "checkpoint"
    if "_symlink_format_manifest" in directory.split("/"):
        return "manifest"
    if name.endswith(".bin"):
        return "dv-file"
    return "write"
