"""The DV store: finds a descriptor's deletion vector, reads it, and checks it.

The codec in `dvtool.delta.protocol.deletion_vector` knows the byte formats but does no IO; this
module adds the IO through the storage layer. It reads exactly the bytes a DV needs (one
ranged read per DV, plus a one-byte version read per DV file, cached) and runs every check
the protocol allows: file version, range, size, CRC, magic, cardinality and row indexes.
Any failure is a `DeletionVectorError` naming the DV file and the data file it belongs to.
A missing DV file is an error, never an empty DV: treating it as "no deleted rows" would
silently resurrect deleted data.

Writing is the mirror image: `write` packs many DVs into as few new DV files as possible
(a new file starts when the current one would pass the target size, 2 MiB as in Delta),
writes each file whole, and returns `u` descriptors. Existing DV files are never modified.
"""

from __future__ import annotations

import secrets
import string
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pyroaring import BitMap64

from dvtool.deletion_vectors.codec import (
    ENTRY_OVERHEAD,
    check_file_version,
    decode_dv_entry,
    encode_dv_file,
    serialize_bitmap,
)
from dvtool.delta.protocol.deletion_vector import (
    DeletionVectorDescriptor,
    decode_inline,
    new_uuid_path,
    validate_bitmap,
)
from dvtool.errors import (
    DeletionVectorError,
    DVFileMissingError,
    DVRangeError,
    FileMissingError,
)


class DVStorage(Protocol):
    """The part of `dvtool.storage.table_storage.Storage` the DV store uses."""

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

    def write(self, location: str, data: bytes) -> None:
        """Write a new file whole (readers never see part of it)."""
        ...


DEFAULT_TARGET_FILE_SIZE = 2 * 1024 * 1024
_PREFIX_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class WrittenDVFile:
    """A DV file `write` created: its location and size (for metrics and cleanup)."""

    location: str
    size: int


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

    def write(
        self,
        bitmaps: Sequence[BitMap64],
        *,
        prefix_length: int = 0,
        target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
    ) -> tuple[list[DeletionVectorDescriptor], list[WrittenDVFile]]:
        """Write `bitmaps` to new DV files; returns their descriptors (in order) and the files.

        `prefix_length` > 0 puts each file under a random directory of that many characters
        (`delta.randomizeFilePrefixes` / `delta.randomPrefixLength`).
        """
        descriptors: list[DeletionVectorDescriptor] = []
        files: list[WrittenDVFile] = []
        for group in _pack(bitmaps, target_file_size):
            group_descriptors, written = self._write_file(group, prefix_length)
            descriptors.extend(group_descriptors)
            files.append(written)
        return descriptors, files

    def _write_file(
        self, bitmaps: Sequence[BitMap64], prefix_length: int
    ) -> tuple[list[DeletionVectorDescriptor], WrittenDVFile]:
        prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(prefix_length))
        encoded_path = new_uuid_path(uuid.uuid4(), prefix)
        data, entries = encode_dv_file(bitmaps)
        descriptors = [
            DeletionVectorDescriptor("u", encoded_path, offset, size, len(bitmap))
            for bitmap, (offset, size) in zip(bitmaps, entries, strict=True)
        ]
        location = self._storage.join(descriptors[0].relative_path())
        self._storage.write(location, data)
        return descriptors, WrittenDVFile(location, len(data))


def _pack(bitmaps: Sequence[BitMap64], target: int) -> list[list[BitMap64]]:
    """Group bitmaps in order so each group's file stays within `target` (one DV at least)."""
    groups: list[list[BitMap64]] = []
    current: list[BitMap64] = []
    size = 1
    for bitmap in bitmaps:
        entry = ENTRY_OVERHEAD + len(serialize_bitmap(bitmap))
        if current and size + entry > target:
            groups.append(current)
            current, size = [], 1
        current.append(bitmap)
        size += entry
    if current:
        groups.append(current)
    return groups
