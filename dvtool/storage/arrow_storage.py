"""Data file storage over pyarrow's own filesystems, for Spark executors.

Executors of a stock Spark cluster have pyarrow but not fsspec or its backends (s3fs, gcsfs,
adlfs), so the code that rewrites data files there reaches the table through
`pyarrow.fs` instead: `ArrowStorage` offers what data files need (`DataFileStorage`: open a
parquet file, write a new file, stat it, delete it, and the location arithmetic of
`Storage`; and `size`, `exists` and `read`, with which `dvtool.iceberg.file_io` reads and
writes an Iceberg table's data files on executors), with the same locations and the same
errors (`FileMissingError`, `StorageError` naming the location). It never commits:
commits, DVs and listings stay on the driver's `Storage`.

The table's storage options (`--storage-option`, as the user gave them) are resolved as for
fsspec (`storage_options`: object_store's keys such as `AWS_REGION` become s3fs's
arguments) and those mapped to pyarrow's (`arrow_filesystem_options`: s3fs's `key` to
`access_key`, its region to `region`, `endpoint_url` to `endpoint_override` and `scheme`,
...). This is checked on the driver before any job starts, so an option pyarrow has no
equivalent for is a `UsageError` there, not a failure on every executor. Credentials the
options do not give come from where pyarrow's backends look (environment variables, the
instance profile), as for fsspec's backends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from dvtool.errors import FileMissingError, StorageError, UsageError
from dvtool.storage import local_disk
from dvtool.storage.failures import one_line
from dvtool.storage.listing import FileInfo
from dvtool.storage.locations import (
    file_uri_to_path,
    join_location,
    local_abspath,
    path_under,
    resolve_log_path,
)
from dvtool.storage.schemes import SCHEMES, scheme_of
from dvtool.storage.storage_options import storage_option_settings

__all__ = ["ArrowStorage", "arrow_filesystem_options"]

# adlfs's arguments that pyarrow's AzureFileSystem takes under the same name.
_AZURE_SAME_NAMES = frozenset(
    {"account_name", "account_key", "sas_token", "client_id", "client_secret", "tenant_id"}
)


def arrow_filesystem_options(protocol: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of pyarrow's filesystem for `protocol` from dvtool's storage
    options (resolved as for fsspec: `storage_options`); UsageError naming an option
    pyarrow cannot take."""
    out: dict[str, Any] = {}
    for setting in storage_option_settings(protocol, options):
        mapped = _arrow_argument(protocol, setting.path, setting.value)
        if mapped is None:
            raise UsageError(
                f"--storage-option {setting.option} cannot be passed to the Spark executors, "
                "which reach the table through pyarrow's filesystems",
                hint="Give the executors their credentials through the environment (or the "
                "instance profile), or use --engine arrow.",
            )
        out.update(mapped)
    return out


def _arrow_argument(protocol: str, path: tuple[str, ...], value: Any) -> dict[str, Any] | None:
    """pyarrow's arguments for one fsspec backend argument, or None if it has none."""
    if protocol == "s3":
        return _s3_argument(path, value)
    if protocol == "gs":
        if path == ("token",):
            # gcsfs's token names a credential source (a key file, a JSON key): only
            # anonymous access maps; pyarrow finds key files through the environment.
            return {"anonymous": True} if value == "anon" else None
        if path == ("project",):
            return {"project_id": value}
        return _endpoint(value) if path == ("endpoint_url",) else None
    if protocol == "abfs":
        return {path[0]: value} if len(path) == 1 and path[0] in _AZURE_SAME_NAMES else None
    if protocol == "file":
        return {} if path == ("auto_mkdir",) else None  # local writes make their directories
    return None


def _s3_argument(path: tuple[str, ...], value: Any) -> dict[str, Any] | None:
    """pyarrow's S3FileSystem arguments for one of s3fs's."""
    names = {
        ("key",): "access_key",
        ("secret",): "secret_key",
        ("token",): "session_token",
        ("client_kwargs", "region_name"): "region",
    }
    if path in names:
        return {names[path]: value}
    if path == ("anon",):
        return {"anonymous": bool(value)}  # a boolean: `anon` is a flag of the rules
    if path == ("endpoint_url",):
        return _endpoint(value)
    if path == ("config_kwargs", "s3", "addressing_style"):
        return {"force_virtual_addressing": True} if value == "virtual" else {}
    return None


def _endpoint(url: str) -> dict[str, Any]:
    """pyarrow's `endpoint_override` (host[:port]) and `scheme` of an endpoint URL."""
    parts = urlsplit(url)
    if not parts.scheme:
        return {"endpoint_override": url}
    return {"endpoint_override": parts.netloc, "scheme": parts.scheme}


class ArrowStorage:
    """A table root on a pyarrow filesystem: the data-file half of `Storage`'s contract."""

    def __init__(self, root: str, options: Mapping[str, Any] | None = None) -> None:
        scheme = scheme_of(root)
        known = SCHEMES.get(scheme or "file")
        # pyarrow has a filesystem for what Hadoop reaches, not for one process's memory://.
        self.protocol = known.protocol if known and known.hadoop else ""
        if not self.protocol:
            raise StorageError(f"Spark executors cannot reach {root}: unsupported scheme")
        self.options = {key: str(value) for key, value in (options or {}).items()}
        self._local = self.protocol == "file"
        if self._local:
            self.root = file_uri_to_path(root) if scheme == "file" else local_abspath(root)
        else:
            self.root = root.rstrip("/")
        self._fs: pafs.FileSystem | None = None

    def __repr__(self) -> str:
        return f"ArrowStorage({self.root!r})"

    def check_options(self) -> None:
        """UsageError if an option has no pyarrow equivalent (see the module docstring)."""
        arrow_filesystem_options(self.protocol, self.options)

    # Locations, as `Storage` spells them

    def join(self, relative: str) -> str:
        return join_location(self.root, relative)

    def relative_to_root(self, location: str) -> str | None:
        return path_under(self._path(location), self._path(self.root))

    def resolve(self, path_in_log: str) -> str:
        return resolve_log_path(path_in_log, self.join)

    # Files

    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem, made on first use (an executor makes it once per task)."""
        if self._fs is None:
            self._fs = self._make_filesystem()
        return self._fs

    def arrow_filesystem(self, location: str | None = None) -> tuple[pafs.FileSystem, str]:
        return self.filesystem(), self._path(location or self.root)

    def open_parquet(self, location: str) -> Any:
        """A seekable pyarrow file of `location`; the caller closes it."""
        with self._errors(location, "open"):
            return self.filesystem().open_input_file(self._path(location))

    def info(self, location: str) -> FileInfo | None:
        with self._errors(location, "stat"):
            found = self.filesystem().get_file_info(self._path(location))
        if found.type != pafs.FileType.File:
            return None
        mtime = found.mtime_ns
        return FileInfo(
            location,
            location.rpartition("/")[2],
            int(found.size or 0),
            None if mtime is None else mtime // 1_000_000,
        )

    def size(self, location: str) -> int:
        """The file's length in bytes; FileMissingError if it does not exist."""
        found = self.info(location)
        if found is None:
            raise FileMissingError(location)
        return found.size

    def exists(self, location: str) -> bool:
        """Whether a file (not a directory) exists at `location`."""
        return self.info(location) is not None

    def read(self, location: str) -> bytes:
        """The whole file; FileMissingError if it does not exist."""
        path = self._path(location)
        with self._errors(location, "read"), self.filesystem().open_input_stream(path) as stream:
            return bytes(stream.read())

    def write(self, location: str, data: bytes) -> None:
        """Write a new, uniquely named file; no reader sees half of it."""
        path = self._path(location)
        with self._errors(location, "write"):
            if self._local:
                local_disk.replace_file(path, data)
            else:
                with self.filesystem().open_output_stream(path) as out:
                    out.write(data)

    def delete(self, location: str) -> None:
        with self._errors(location, "delete"), contextlib.suppress(FileNotFoundError):
            self.filesystem().delete_file(self._path(location))

    def delete_many(self, locations: Iterable[str]) -> None:
        for location in locations:
            self.delete(location)

    # Internals

    def _path(self, location: str) -> str:
        """pyarrow's path of a location: the local path, or `bucket/key`."""
        if self._local:
            if scheme_of(location) == "file":
                return file_uri_to_path(location)
            return local_abspath(location)
        parts = urlsplit(location)
        if self.protocol == "abfs" and "@" in parts.netloc:
            container = parts.netloc.partition("@")[0]
            return f"{container}{parts.path}"
        return f"{parts.netloc}{parts.path}"

    def _make_filesystem(self) -> pafs.FileSystem:
        kwargs = arrow_filesystem_options(self.protocol, self.options)
        try:
            return self._new_filesystem(kwargs)
        except (TypeError, ValueError) as exc:  # e.g. an executor's pyarrow without sas_token
            raise StorageError(
                f"pyarrow {pa.__version__} cannot open {self.root} with the storage options "
                f"given ({', '.join(self.options)}): {one_line(exc)}"
            ) from exc

    def _new_filesystem(self, kwargs: dict[str, Any]) -> pafs.FileSystem:
        if self._local:
            return pafs.LocalFileSystem()
        if self.protocol == "s3":
            return pafs.S3FileSystem(**kwargs)
        if self.protocol == "gs":
            return pafs.GcsFileSystem(**kwargs)
        netloc = urlsplit(self.root).netloc
        if "@" in netloc and "account_name" not in kwargs:
            kwargs["account_name"] = netloc.partition("@")[2].split(".")[0]
        return pafs.AzureFileSystem(**kwargs)

    @contextlib.contextmanager
    def _errors(self, location: str, action: str) -> Iterator[None]:
        """Backend failures as dvtool's storage errors naming the location."""
        try:
            yield
        except FileNotFoundError as e:
            raise FileMissingError(location) from e
        except (OSError, pa.ArrowException) as e:
            raise StorageError(f"cannot {action} {location}: {one_line(e)}") from e
