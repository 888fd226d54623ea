"""pyiceberg's `FileIO` over dvtool's storage layer, for tables opened by path.

An Iceberg table opened by its folder or a `*.metadata.json` reads every file (metadata,
manifest lists, manifests, delete files, Puffin files) through `dvtool.storage.Storage`, as
a Delta table does: the same `--storage-option` keys (README "Storage options"), the same
backends (local files without fsspec, s3fs, gcsfs, adlfs), the same retries and the same
errors (`FileMissingError`, `StorageError`), ranged reads for Puffin blobs. So there is one
table of storage option keys, not a second one in pyiceberg's spelling. Read-only: the read
side has nothing to write.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile

if TYPE_CHECKING:
    from dvtool.storage.table_storage import Storage


class StorageInputFile(InputFile):
    """One file read through `Storage`."""

    def __init__(self, storage: Storage, location: str) -> None:
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


class StorageFileIO(FileIO):
    """A read-only `FileIO` whose files are those of a `Storage` (any location on its
    filesystem, not only under its root: Iceberg paths are absolute)."""

    def __init__(self, storage: Storage, properties: dict[str, Any] | None = None) -> None:
        super().__init__(properties or {})
        self.storage = storage

    def new_input(self, location: str) -> InputFile:
        return StorageInputFile(self.storage, location)

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("dvtool's Iceberg read side writes no files")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError("dvtool's Iceberg read side deletes no files")
