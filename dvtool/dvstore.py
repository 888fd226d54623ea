"""The DV store: finds a descriptor's deletion vector, reads it, and checks it.

The codec in `dvtool.core.deletion_vector` knows the byte formats but does no IO; this
module adds the IO through the storage layer. It reads exactly the bytes a DV needs (one
ranged read per DV, plus a one-byte version read per DV file, cached) and runs every check
the protocol allows: file version, range, size, CRC, magic, cardinality and row indexes.
Any failure is a `DeletionVectorError` naming the DV file and the data file it belongs to.
A missing DV file is an error, never an empty DV: treating it as "no deleted rows" would
silently resurrect deleted data.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from pyroaring import BitMap64

from dvtool.core.deletion_vector import (
    ENTRY_OVERHEAD,
    DeletionVectorDescriptor,
    check_file_version,
    decode_dv_entry,
    decode_inline,
    validate_bitmap,
)
from dvtool.errors import (
    DeletionVectorError,
    DVFileMissingError,
    DVRangeError,
    FileMissingError,
)


class DVStorage(Protocol):
    """The part of `dvtool.storage.Storage` the DV store uses."""

    def join(self, relative: str) -> str:
        """The location of `relative` under the table root."""
        ...

    def resolve(self, path_in_log: str) -> str:
        """The location of a (URI-encoded) path from the log, relative or absolute."""
        ...

    def read_range(self, location: str, offset: int, size: int) -> bytes:
        """Exactly `size` bytes at `offset`; FileMissingError if the file is missing."""
        ...

    def size(self, location: str) -> int:
        """The file's length in bytes; FileMissingError if it is missing."""
        ...


@dataclass(frozen=True)
class _DVFileHeader:
    """What the store remembers per DV file: its length and version byte (None if empty)."""

    size: int
    version: int | None


class DVStore:
    """Loads deletion vectors of one table; safe to share between threads."""

    def __init__(self, storage: DVStorage) -> None:
        self._storage = storage
        self._headers: dict[str, _DVFileHeader] = {}
        self._lock = threading.Lock()

    def location(self, descriptor: DeletionVectorDescriptor) -> str | None:
        """The DV file's location, or None for an inline DV."""
        if descriptor.is_relative:
            return self._storage.join(descriptor.relative_path())
        if descriptor.is_absolute_path:
            return self._storage.resolve(descriptor.path_or_inline_dv)
        return None

    def load(
        self, descriptor: DeletionVectorDescriptor, *, data_file: str, num_records: int | None
    ) -> BitMap64:
        """The deleted row indexes of `data_file`, checked against descriptor and numRecords.

        Raises a located `DeletionVectorError` (DVFileMissingError for a missing DV file).
        """
        location = self.location(descriptor)
        try:
            rows = self._decode(descriptor, location)
            validate_bitmap(rows, descriptor, num_records)
        except FileMissingError as exc:
            raise DVFileMissingError().locate(location, data_file) from exc
        except DeletionVectorError as exc:
            exc.locate(location, data_file)
            raise
        return rows

    def _decode(self, descriptor: DeletionVectorDescriptor, location: str | None) -> BitMap64:
        """Decode the DV from the log or from its file, without the cardinality checks."""
        if location is None:
            return decode_inline(descriptor)
        return self._read_entry(descriptor, location)

    def _read_entry(self, descriptor: DeletionVectorDescriptor, location: str) -> BitMap64:
        """Range-check, read and decode the DV file entry the descriptor points at."""
        header = self._header(location)
        if header.version is None:
            raise DVRangeError(expected="a version byte", actual="an empty file")
        check_file_version(header.version)
        offset = descriptor.effective_offset
        length = descriptor.size_in_bytes + ENTRY_OVERHEAD
        if offset < 1:
            raise DVRangeError("offset points at the version byte", expected=">= 1", actual=offset)
        if offset + length > header.size:
            raise DVRangeError(
                expected=f"bytes {offset}..{offset + length} (offset + 4 + sizeInBytes + 4)",
                actual=f"a file of {header.size} bytes",
            )
        chunk = self._storage.read_range(location, offset, length)
        return decode_dv_entry(chunk, descriptor.size_in_bytes)

    def _header(self, location: str) -> _DVFileHeader:
        """The cached length and version byte of a DV file, read on first use.

        The IO runs outside the lock; two threads may both read a new file's header, which
        is harmless and keeps slow storage from serializing unrelated loads.
        """
        with self._lock:
            cached = self._headers.get(location)
        if cached is not None:
            return cached
        size = self._storage.size(location)
        version = self._storage.read_range(location, 0, 1)[0] if size else None
        header = _DVFileHeader(size=size, version=version)
        with self._lock:
            return self._headers.setdefault(location, header)
