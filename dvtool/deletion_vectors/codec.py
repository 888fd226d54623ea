"""The DV record and Delta's DV file framing, without any IO.

A deletion vector's rows are a portable 64-bit Roaring bitmap (`dvtool.deletion_vectors.roaring`
decodes it with numpy; `pyroaring.BitMap64.serialize` emits it byte for byte as Delta does).
One record, exactly as PROTOCOL.md "Deletion Vector Format" specifies it:

* a bitmap is a little-endian uint32 magic number followed by the portable serialization;
* a record is a big-endian uint32 size, those bitmap bytes, and a big-endian CRC-32 of them.

The framings: a Delta DV file is a version byte (1) followed by records (a descriptor's
`offset` points at a record's size field, so the first is at offset 1); an Iceberg
`deletion-vector-v1` Puffin blob is one record (`dvtool.deletion_vectors.puffin`); Delta's
inline DVs are bare bitmaps (`dvtool.delta.protocol.deletion_vector`).

Errors are `dvtool.errors` DV errors without a location; the reader adds the file names.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np
from pyroaring import BitMap64

from dvtool.errors import (
    DVChecksumError,
    DVEncodingError,
    DVMagicError,
    DVRangeError,
    DVSizeMismatchError,
    DVVersionError,
)

MAGIC = 1681511377
"""Little-endian uint32 in front of every serialized bitmap."""

FILE_FORMAT_VERSION = 1
"""The only DV file format version (the file's first byte)."""

MAX_ROW_INDEX = 2**63 - 1
"""Delta requires the high bit of every 32-bit bucket key clear, so indexes stay below 2**63."""

ENTRY_OVERHEAD = 8
"""Bytes a DV file entry adds around its bitmap: the size field and the CRC."""

_MAGIC_BYTES = struct.pack("<I", MAGIC)
_UINT32_BE = struct.Struct(">I")
_UINT32_LE = struct.Struct("<I")


def serialize_bitmap(rows: BitMap64) -> bytes:
    """Serialize row indexes as Delta does: magic, then portable 64-bit Roaring bytes.

    The bitmap's containers are written as they are (call `run_optimize()` first for the
    smallest output). Raises ValueError for an index >= 2**63, which Delta forbids.
    """
    if rows and rows.max() > MAX_ROW_INDEX:
        raise ValueError(f"row index {rows.max()} is not below 2**63")
    return _MAGIC_BYTES + rows.serialize()


def deserialize_bitmap(data: bytes) -> BitMap64:
    """Parse magic-prefixed bitmap bytes; DVMagicError or DVEncodingError if malformed."""
    if len(data) < 4:
        raise DVEncodingError(f"{len(data)} bytes are too short for a bitmap")
    (magic,) = _UINT32_LE.unpack_from(data)
    if magic != MAGIC:
        raise DVMagicError(expected=MAGIC, actual=magic)
    try:
        rows = BitMap64.deserialize(data[4:])
    except (ValueError, IndexError) as exc:
        raise DVEncodingError(f"not a portable 64-bit Roaring bitmap: {exc}") from exc
    if rows and rows.max() > MAX_ROW_INDEX:
        raise DVEncodingError(f"row index {rows.max()} is not below 2**63")
    return rows


def bitmap_rows(rows: BitMap64) -> np.ndarray:
    """The row indexes of a bitmap as a sorted uint64 numpy array (no copy of the values
    beyond pyroaring's own `to_array`)."""
    return np.frombuffer(rows.to_array(), dtype=np.uint64)


def encode_dv_entry(rows: BitMap64) -> bytes:
    """One framed DV: big-endian size, magic and bitmap, big-endian CRC-32 of those.

    The framing of a Delta DV file entry and, byte for byte, of an Iceberg
    `deletion-vector-v1` Puffin blob.
    """
    payload = serialize_bitmap(rows)
    return _UINT32_BE.pack(len(payload)) + payload + _UINT32_BE.pack(zlib.crc32(payload))


def encode_dv_file(bitmaps: Sequence[BitMap64]) -> tuple[bytes, list[tuple[int, int]]]:
    """Build a DV file holding `bitmaps`; also return each one's (offset, size_in_bytes)."""
    out = bytearray([FILE_FORMAT_VERSION])
    placements: list[tuple[int, int]] = []
    for rows in bitmaps:
        entry = encode_dv_entry(rows)
        placements.append((len(out), len(entry) - ENTRY_OVERHEAD))
        out += entry
    return bytes(out), placements


def check_file_version(first_byte: int) -> None:
    """Raise DVVersionError unless a DV file's first byte is the supported version."""
    if first_byte != FILE_FORMAT_VERSION:
        raise DVVersionError(expected=FILE_FORMAT_VERSION, actual=first_byte)


def decode_dv_entry(chunk: bytes, expected_size: int) -> BitMap64:
    """Decode one DV file entry: `chunk` is the 4 + size + 4 bytes at the descriptor's offset.

    Checks the size field against the descriptor's `expected_size`, then the CRC-32, then
    the magic number.
    """
    if len(chunk) != expected_size + ENTRY_OVERHEAD:
        raise DVRangeError(
            expected=f"{expected_size + ENTRY_OVERHEAD} entry bytes", actual=f"{len(chunk)} bytes"
        )
    (size,) = _UINT32_BE.unpack_from(chunk)
    if size != expected_size:
        raise DVSizeMismatchError("size field", expected=expected_size, actual=size)
    payload = chunk[4 : 4 + size]
    (stored,) = _UINT32_BE.unpack_from(chunk, 4 + size)
    computed = zlib.crc32(payload)
    if stored != computed:
        raise DVChecksumError(expected=f"0x{stored:08x}", actual=f"0x{computed:08x}")
    return deserialize_bitmap(payload)
