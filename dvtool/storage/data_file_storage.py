"""What reading and writing data files needs of a storage: `DataFileStorage`.

Two classes meet it: `Storage` (fsspec, the driver's one storage layer, which also commits,
lists and deletes) and `ArrowStorage` (pyarrow's filesystems, on Spark executors that have
no fsspec). Data file code (`dvtool.data_files`, `dvtool.engines.rewrite`) is written
against this protocol only, so the same rewrite runs in both places.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from dvtool.storage.listing import FileInfo

__all__ = ["DataFileStorage"]


class DataFileStorage(Protocol):
    """A table root: locations as `Storage` spells them, and the file operations of data
    files (see `dvtool.storage`'s contract for each)."""

    root: str
    protocol: str
    options: dict[str, str]

    def join(self, relative: str) -> str: ...

    def relative_to_root(self, location: str) -> str | None: ...

    def resolve(self, path_in_log: str) -> str: ...

    def open_parquet(self, location: str) -> Any: ...

    def arrow_filesystem(self, location: str | None = None) -> tuple[pafs.FileSystem, str]: ...

    def info(self, location: str) -> FileInfo | None: ...

    def write(self, location: str, data: bytes) -> None: ...

    def delete(self, location: str) -> None: ...

    def delete_many(self, locations: Iterable[str]) -> None: ...
