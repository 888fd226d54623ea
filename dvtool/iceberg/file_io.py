"""pyiceberg's `FileIO` over dvtool's storage layer, for tables opened by path.

An Iceberg table opened by its folder or a `*.metadata.json` reads every file (metadata,
manifest lists, manifests, delete files, Puffin files) through `dvtool.storage.Storage`, as
a Delta table does: the same `--storage-option` keys (README "Storage options"), the same
backends (local files without fsspec, s3fs, gcsfs, adlfs), the same retries and the same
errors (`FileMissingError`, `StorageError`), ranged reads for Puffin blobs. So there is one
table of storage option keys, not a second one in pyiceberg's spelling.

Writing (manifests, manifest lists, delete files, Puffin files, data files written by
pyiceberg's writers) goes through `Storage.write`: a stream collects the bytes and publishes
them whole when closed, so no reader sees half a file. `create(overwrite=False)` refuses a
file that exists (FileExistsError, as pyiceberg's own FileIO does); the new files dvtool
writes are uniquely named, and the one file whose creation must be atomic, a path table's
next `vN.metadata.json`, is created with `Storage.put_if_absent` by the commit
(`dvtool.iceberg.path_commit`), not through this FileIO.

On Spark executors, a rewrite reaches the data files through `dvtool.iceberg.data_file_io`
instead (`StoreIO`: `ArrowStorage`, pyarrow's filesystems with the same storage options, and
no pyiceberg).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile

from dvtool.iceberg.data_file_io import StorageOutputStream

if TYPE_CHECKING:
    # The driver's `Storage`, or on Spark executors (no fsspec there) pyarrow's filesystems
    # with the same options, for the data files a rewrite reads and writes.
    from typing import TypeAlias

    from dvtool.storage.arrow_storage import ArrowStorage
    from dvtool.storage.table_storage import Storage

    FileStore: TypeAlias = Storage | ArrowStorage


class StorageInputFile(InputFile):
    """One file read through `Storage`."""

    def __init__(self, storage: FileStore, location: str) -> None:
        super().__init__(location)
        self._storage = storage

    def __len__(self) -> int:
        return self._storage.size(self.location)

    def exists(self) -> bool:
        return self._storage.exists(self.location)

    def open(self, seekable: bool = True) -> InputStream:
        """A seekable stream with ranged reads (`Storage.open_parquet`); small sequential
        reads (a manifest) as one read."""
        if not seekable:
            return io.BytesIO(self._storage.read(self.location))
        stream: InputStream = self._storage.open_parquet(self.location)
        return stream


class StorageOutputFile(OutputFile):
    """One new file written through `Storage`."""

    def __init__(self, storage: FileStore, location: str) -> None:
        super().__init__(location)
        self._storage = storage

    def __len__(self) -> int:
        return self._storage.size(self.location)

    def exists(self) -> bool:
        return self._storage.exists(self.location)

    def to_input_file(self) -> InputFile:
        return StorageInputFile(self._storage, self.location)

    def create(self, overwrite: bool = False) -> StorageOutputStream:
        """A stream whose bytes become the file when closed; FileExistsError now if the
        file exists and `overwrite` is false."""
        if not overwrite and self.exists():
            raise FileExistsError(f"Cannot create file, already exists: {self.location}")
        return StorageOutputStream(self._storage, self.location)


class StorageFileIO(FileIO):
    """A `FileIO` whose files are those of a `Storage` (any location on its filesystem,
    not only under its root: Iceberg paths are absolute)."""

    def __init__(self, storage: FileStore, properties: dict[str, Any] | None = None) -> None:
        super().__init__(properties or {})
        self.storage = storage

    def new_input(self, location: str) -> InputFile:
        return StorageInputFile(self.storage, location)

    def new_output(self, location: str) -> OutputFile:
        return StorageOutputFile(self.storage, location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        """Delete a file; one already gone is not an error (`Storage.delete`)."""
        if isinstance(location, (InputFile, OutputFile)):
            location = location.location
        self.storage.delete(location)
