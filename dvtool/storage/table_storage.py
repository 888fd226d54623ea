"""`Storage`: a table root on its filesystem, and every operation dvtool does there.

The class is the storage layer's one public face (its contract is the docstring of
`dvtool.storage`). It owns the filesystem and the root, converts between locations and
fsspec's paths, routes each backend call through the error translation and retries of
`failures`, and dispatches to the concept modules beside it: `locations` (path forms),
`backends` (opening the filesystem; `local_files` is the one for local disk without fsspec),
`put_if_absent` (commits), `local_disk` (crash-safe local writes), `listing` (listings and
walks) and `real_paths` (where local paths lead, links resolved).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from dvtool import faults
from dvtool.errors import FileMissingError, StorageError
from dvtool.storage import local_disk
from dvtool.storage.backends import open_table_filesystem
from dvtool.storage.failures import backend_errors, call_with_retries
from dvtool.storage.listing import (
    FileInfo,
    TreeEntry,
    file_info,
    is_child_dir,
    is_child_file,
    remote_tree,
    walk_local,
)
from dvtool.storage.locations import (
    encode_for_log,
    file_uri_to_path,
    join_location,
    local_abspath,
    path_under,
    resolve_log_path,
)
from dvtool.storage.put_if_absent import exclusive_create
from dvtool.storage.real_paths import RealPaths
from dvtool.storage.schemes import SCHEMES, scheme_of

if TYPE_CHECKING:
    import pyarrow.fs as pafs

# Characters fsspec's bulk `rm` reads as a glob pattern (it expands them before deleting).
_GLOB_CHARS = re.compile(r"[*?\[]")
_PARQUET_BLOCK_SIZE = 4 * 2**20
T = TypeVar("T")


class ReadableFile(Protocol):
    """A seekable binary file pyarrow can read; close it (or use `with`) when done."""

    def read(self, nbytes: int = ..., /) -> bytes: ...

    def seek(self, offset: int, whence: int = ..., /) -> int: ...

    def tell(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> ReadableFile: ...

    def __exit__(self, *exc: object) -> None: ...


class Storage:
    """A table root and the filesystem it lives on; see `dvtool.storage`'s docstring."""

    def __init__(
        self,
        fs: Any,
        root_path: str,
        *,
        scheme: str,
        authority: str = "",
        unsafe_single_writer: bool = False,
    ) -> None:
        """Use `Storage.for_table`; this takes fsspec's form of the root and a filesystem
        with the fsspec methods used here (fsspec's, or `LocalFiles` on local disk)."""
        self._fs = fs
        self._root_path = root_path
        self._scheme = scheme
        self.options: dict[str, str] = {}
        """The options `for_table` was given, so another process can open the same storage."""
        self.protocol: str = SCHEMES[scheme].protocol
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
        opened = open_table_filesystem(uri, options or {})
        storage = cls(
            opened.fs,
            opened.root_path,
            scheme=opened.scheme,
            authority=opened.authority,
            unsafe_single_writer=unsafe_single_writer,
        )
        storage.options = dict(options or {})
        return storage

    def __repr__(self) -> str:
        return f"Storage({self.root!r})"

    # Locations

    def join(self, relative: str) -> str:
        """The location of `relative` (a `/`-separated path) under the table root."""
        return join_location(self.root, relative)

    def relative_to_root(self, location: str) -> str | None:
        """The `/`-separated path of `location` under the root, or None if not under it."""
        try:
            path = self._fs_path(location)
        except StorageError:
            return None
        return path_under(path, self._root_path)

    def resolve(self, path_in_log: str) -> str:
        """The location of a path from the Delta log: a URI, percent-decoded exactly once.

        Relative paths are joined to the root; absolute URIs are kept (`file:` URIs become
        local paths); absolute POSIX paths are kept.
        """
        return resolve_log_path(path_in_log, self.join)

    @staticmethod
    def encode_for_log(relative: str) -> str:
        """`relative` percent-encoded for the Delta log the way Delta Spark writes paths
        (what stays and what is encoded: `dvtool.storage.locations.encode_for_log`)."""
        return encode_for_log(relative)

    # Reading

    def list_dir(self, location: str, start_after: str | None = None) -> list[FileInfo]:
        """The files directly in a directory, sorted by name; [] if it does not exist.

        With `start_after`, only names greater than it (filtered after listing).
        """
        path = self._fs_path(location)
        base = self._to_location(path)
        entries = self._list_entries(location, path)
        infos = [file_info(e, base) for e in entries if is_child_file(e, path)]
        if start_after is not None:
            infos = [i for i in infos if i.name > start_after]
        return sorted(infos, key=lambda i: i.name)

    def list_subdirs(self, location: str) -> list[str]:
        """The names of the directories directly in a directory (links are none), sorted;
        [] if it does not exist. One delimited listing on object stores."""
        path = self._fs_path(location)
        entries = self._list_entries(location, path)
        names = (
            str(e["name"]).rstrip("/").rpartition("/")[2] for e in entries if is_child_dir(e, path)
        )
        return sorted(names)

    def is_dir(self, location: str) -> bool:
        """Whether a directory is at `location` (object stores: an object lies under it)."""
        path = self._fs_path(location)

        def stat() -> bool:
            self._fs.invalidate_cache(path)
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                return bool(self._fs.info(path).get("type") == "directory")
            return False

        return self._call(location, "stat", stat)

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
            except (FileNotFoundError, NotADirectoryError):
                return None

        entry = self._call(location, "stat", stat)
        if entry is None or entry.get("type") != "file":
            return None
        normalized = self._to_location(path)
        parent, _, name = normalized.rpartition("/")
        return file_info({**entry, "name": name}, parent)

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
        import pyarrow.fs as pafs  # local: only commands that read parquet need it

        path = self._fs_path(location)
        with backend_errors(location, "open"):
            if self._local:
                return pafs.LocalFileSystem().open_input_file(path)  # type: ignore[no-any-return]
            return self._fs.open(  # type: ignore[no-any-return]
                path, "rb", block_size=_PARQUET_BLOCK_SIZE, cache_type="readahead"
            )

    def arrow_filesystem(self, location: str | None = None) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem and the path on it of `location` (default: the root)."""
        import pyarrow.fs as pafs  # local: only commands that read or write data files need it

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
        create = exclusive_create(
            self._fs,
            self.protocol,
            location,
            path,
            unsafe_single_writer=self.unsafe_single_writer,
            holds_exactly=functools.partial(self._holds_exactly, location, path),
        )
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
                local_disk.replace_file(path, data)
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
            yield from walk_local(location, path, descend)
        else:
            yield from self._walk_remote(location, path, descend)

    def real_relative_to_root(self, location: str) -> str | None:
        """`relative_to_root` with symbolic links resolved on local disk, the root's too.

        None when the location, links resolved, is not inside the root's real directory tree
        (for example a path through a link that points elsewhere, or a link itself pointing
        elsewhere). On object stores, which have no links, the same as `relative_to_root`.
        """
        return self.real_relative_paths()(location)

    def real_relative_paths(self) -> Callable[[str], str | None]:
        """`real_relative_to_root` for many locations checked in a row, ~one stat each.

        The returned function resolves the root and each directory once and keeps their real
        paths (`real_paths.RealPaths`): same answers, but a link changed after it resolved a
        directory is not seen, so make a new one for each check.
        """
        if not self._local:
            return self.relative_to_root
        real_paths = RealPaths(self._root_path)

        def real_relative(location: str) -> str | None:
            try:
                path = self._fs_path(location)
            except StorageError:
                return None
            return real_paths.under_root(path)

        return real_relative

    def remove_empty_dir(self, location: str) -> bool:
        """Remove a local directory if it is empty; True if it was removed.

        Never the root, a non-empty directory or a symbolic link (False). Object stores have
        no directories to remove: always False.
        """
        if not self._local:
            return False
        return local_disk.remove_empty_dir(location, self._fs_path(location), self._root_path)

    # Internals

    def _list_entries(self, location: str, path: str) -> list[dict[str, Any]]:
        """fsspec's detailed listing of the directory at `path` (`location`); [] if missing."""

        def listing() -> list[dict[str, Any]]:
            self._fs.invalidate_cache(path)
            try:
                return list(self._fs.ls(path, detail=True))
            except (FileNotFoundError, NotADirectoryError):
                return []

        return self._call(location, "list", listing)

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
        yield from remote_tree(entries, path, descend, self._to_location)

    def _fs_path(self, location: str) -> str:
        """fsspec's path for a location on this storage; StorageError if it is elsewhere."""
        scheme = scheme_of(location)
        if self._local:
            if scheme == "file":
                return file_uri_to_path(location)
            if scheme is None:
                return local_abspath(location)
        elif scheme is not None and scheme in SCHEMES and SCHEMES[scheme].protocol == self.protocol:
            under = path_under(location, self.root)
            if under is not None:
                # Under the root: joined by hand, since fsspec would read a `::` in the
                # name as a URL chain (`memory://t/::` became `t/::`).
                return join_location(self._root_path, under)
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

    def _call(
        self, location: str, action: str, call: Callable[[], T], *, missing: bool = True
    ) -> T:
        """Run a backend call with its errors translated and transient failures retried
        (see `failures.call_with_retries`); `retries` counts the retries."""
        return call_with_retries(location, action, call, missing=missing, on_retry=self._retried)

    def _retried(self) -> None:
        self.retries += 1

    def _holds_exactly(self, location: str, path: str, data: bytes) -> bool:
        """Whether the existing file has exactly `data` (our own write, its reply lost)."""
        found = self.info(location)
        if found is None or found.size != len(data):
            return False
        return bytes(self._fs.cat_file(path)) == data


def _write_step(location: str) -> str:
    """The fault-injection step (see `dvtool.faults`) of a whole-file write to `location`."""
    directory, _, name = location.rpartition("/")
    if directory.endswith("_delta_log"):
        if name == "_last_checkpoint":
            return "last-checkpoint"
        if ".checkpoint." in name and name.endswith((".parquet", ".json")):
            return "checkpoint"
    if "_symlink_format_manifest" in directory.split("/"):
        return "manifest"
    if name.endswith(".bin"):
        return "dv-file"
    return "write"
