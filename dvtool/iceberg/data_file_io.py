"""Reading and writing an Iceberg table's data files where a rewrite runs: pyarrow only.

A rewrite's writes (`dvtool.iceberg.rewrite_executor`) reach files through the three calls of
pyiceberg's `FileIO` they need: `new_input(location).open(seekable=True)`,
`new_output(location).create(overwrite=False)` and `delete(location)`. In the driver's process
that is the table's own FileIO. On Spark executors, whose stock Python has no pyiceberg and no
fsspec, it is one of these, built again from plain data (`dvtool.iceberg.rewrite_job` decides
which on the driver):

- `StoreIO`: a path table's files through `ArrowStorage` (pyarrow's filesystems, the table's
  storage options; the new file's bytes published whole when closed, as
  `dvtool.iceberg.file_io` publishes them on the driver);
- `FileSystemIO`: a catalog table's files through the pyarrow filesystems pyiceberg's own
  `PyArrowFileIO` builds from the catalog's properties (credentials it vended included), one
  per scheme and bucket, pickled by pyarrow; locations parsed as `PyArrowFileIO` parses them.

`read_errors` turns the errors of reading a table's files (through any of these, or a
catalog's FileIO) into dvtool's.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from dvtool.errors import DataFileError, DvtoolError, FileMissingError, StorageError
from dvtool.storage.arrow_storage import ArrowStorage


@contextmanager
def read_errors(location: str) -> Iterator[None]:
    """pyiceberg's and pyarrow's IO errors as dvtool's (missing file, storage, damage):
    a catalog's FileIO raises Python's; dvtool's own FileIO raises dvtool's already."""
    try:
        yield
    except DvtoolError:
        raise
    except FileNotFoundError:
        raise FileMissingError(location) from None
    except pa.ArrowInvalid as e:
        raise DataFileError(f"{location} is not a readable Parquet file: {e}") from None
    except EOFError:
        raise DataFileError(f"{location} is truncated") from None
    except OSError as e:
        raise StorageError(f"reading {location} failed: {e}") from None


class StorageOutputStream(io.BytesIO):
    """The bytes of one new file, written to a storage whole when closed (not when the
    writer fails: leaving the `with` block on an error publishes nothing)."""

    def __init__(self, storage: Any, location: str) -> None:
        super().__init__()
        self._storage = storage
        self._location = location
        self._failed = False

    def __exit__(self, *exc: object) -> None:
        self._failed = exc[0] is not None
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        data = self.getvalue()
        super().close()
        if not self._failed:
            self._storage.write(self._location, data)


@dataclass(frozen=True)
class _StoreFile:
    storage: ArrowStorage
    location: str

    def open(self, seekable: bool = True) -> Any:
        return self.storage.open_parquet(self.location)

    def create(self, overwrite: bool = False) -> StorageOutputStream:
        if not overwrite and self.storage.exists(self.location):
            raise FileExistsError(f"Cannot create file, already exists: {self.location}")
        return StorageOutputStream(self.storage, self.location)


class StoreIO:
    """A path table's data files through `ArrowStorage` (module docstring)."""

    def __init__(self, root: str, options: Mapping[str, str]) -> None:
        self.root = root
        self.options = dict(options)
        self.storage = ArrowStorage(root, self.options)

    def new_input(self, location: str) -> _StoreFile:
        return _StoreFile(self.storage, location)

    def new_output(self, location: str) -> _StoreFile:
        return _StoreFile(self.storage, location)

    def delete(self, location: str) -> None:
        self.storage.delete(location)

    def __reduce__(self) -> tuple[Any, tuple[str, dict[str, str]]]:
        return (StoreIO, (self.root, self.options))


def parse_location(location: str) -> tuple[str, str, str]:
    """(scheme, netloc, path on its filesystem) of a location, as pyiceberg's
    `PyArrowFileIO.parse_location` gives them."""
    uri = urlparse(location)
    if not uri.scheme or len(uri.scheme) == 1:  # a local path (a drive letter on Windows)
        return "file", "", os.path.abspath(location)
    if uri.scheme in ("hdfs", "viewfs"):
        return uri.scheme, uri.netloc, uri.path
    return uri.scheme, uri.netloc, f"{uri.netloc}{uri.path}"


@dataclass(frozen=True)
class _SystemFile:
    filesystem: pafs.FileSystem
    path: str
    location: str
    local: bool

    def open(self, seekable: bool = True) -> Any:
        return self.filesystem.open_input_file(self.path)

    def create(self, overwrite: bool = False) -> Any:
        info = self.filesystem.get_file_info(self.path)
        if not overwrite and info.type != pafs.FileType.NotFound:
            raise FileExistsError(f"Cannot create file, already exists: {self.location}")
        if self.local:  # pyiceberg's local filesystem makes the parent folders
            self.filesystem.create_dir(os.path.dirname(self.path), recursive=True)
        return self.filesystem.open_output_stream(self.path)


class FileSystemIO:
    """A catalog table's data files through pyarrow filesystems, keyed by (scheme, netloc)
    (module docstring)."""

    def __init__(self, filesystems: Mapping[tuple[str, str], pafs.FileSystem]) -> None:
        self.filesystems = dict(filesystems)

    def _file(self, location: str) -> _SystemFile:
        scheme, netloc, path = parse_location(location)
        filesystem = self.filesystems.get((scheme, netloc))
        if filesystem is None:
            raise ValueError(f"no filesystem was shipped for {location}")
        local = isinstance(filesystem, pafs.LocalFileSystem)
        return _SystemFile(filesystem, path, location, local)

    def new_input(self, location: str) -> _SystemFile:
        return self._file(location)

    def new_output(self, location: str) -> _SystemFile:
        return self._file(location)

    def delete(self, location: str) -> None:
        file = self._file(location)
        file.filesystem.delete_file(file.path)

    def __reduce__(self) -> tuple[Any, tuple[dict[tuple[str, str], pafs.FileSystem]]]:
        return (FileSystemIO, (self.filesystems,))


__all__ = ["FileSystemIO", "StorageOutputStream", "StoreIO", "parse_location", "read_errors"]
