"""Paimon's deletion vector framings, without any IO: the same Roaring bitmaps as Delta's
and Iceberg's DVs, two ways around them.

A Paimon deletion file (an index file of type `DELETION_VECTORS`, `tableindex.md`) is a
version byte (1) followed by one serialized DV per data file; the index manifest gives each
its data file, `offset`, `length` and `cardinality`. A DV is one of (Paimon's
`BitmapDeletionVector` and `Bitmap64DeletionVector`, told apart by the magic as Paimon's
`DeletionVector.read` does):

- 32-bit (the default): a big-endian uint32 size, then that many bytes, the big-endian magic
  1581511376 (`5E 43 F2 D0`) and a 32-bit portable Roaring bitmap (RoaringFormatSpec), then
  a big-endian CRC-32 of those bytes. The index manifest's `length` is the size field (magic
  plus bitmap); positions are Java ints, so at most 2**31 - 1.
- 64-bit (`deletion-vectors.bitmap64`): Iceberg's `deletion-vector-v1` record byte for byte
  (`dvtool.deletion_vectors.codec`: size, little-endian magic 1681511377, portable 64-bit
  Roaring, CRC-32), and here the index manifest's `length` is the whole record: size field,
  payload and CRC. That is the quirk a reader must know: the same field means payload bytes
  for one framing and record bytes for the other.

Errors are `dvtool.errors` DV errors without a location; the reader adds the file names.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap64

from dvtool.deletion_vectors import roaring
from dvtool.deletion_vectors.codec import (
    ENTRY_OVERHEAD,
    bitmap_rows,
    decode_dv_entry,
    encode_dv_entry,
)
from dvtool.deletion_vectors.codec import (
    MAGIC as MAGIC_64,
)
from dvtool.errors import (
    DVChecksumError,
    DVEncodingError,
    DVMagicError,
    DVRangeError,
    DVSizeMismatchError,
    DVVersionError,
)

MAGIC_32 = 1581511376
"""Big-endian uint32 in front of a 32-bit (`BitmapDeletionVector`) bitmap."""
INDEX_FILE_VERSION = 1
"""The first byte of every Paimon deletion file (`DeletionVectorsIndexFile.VERSION_ID_V1`)."""
MAX_POSITION_32 = 2**31 - 1
"""The largest row position a 32-bit Paimon DV holds (a Java int)."""

_UINT32_BE = struct.Struct(">I")
_UINT32_LE = struct.Struct("<I")


@dataclass(frozen=True)
class PaimonDV:
    """A decoded Paimon DV: its row positions and which framing held them."""

    rows: BitMap64
    bitmap64: bool


def check_index_file_version(data: bytes) -> None:
    """Raise DVVersionError unless a deletion file starts with the supported version."""
    if not data:
        raise DVRangeError(expected="a version byte", actual="an empty file")
    if data[0] != INDEX_FILE_VERSION:
        raise DVVersionError(expected=INDEX_FILE_VERSION, actual=data[0])


def decode_paimon_dv(data: bytes, offset: int, length: int) -> PaimonDV:
    """Decode the DV at `offset` of the deletion file `data`, whose index manifest `length`
    is `length`: the framing by its magic, then size field, CRC-32 and bitmap checked."""
    if offset < 0 or length < 0 or offset + ENTRY_OVERHEAD > len(data):
        raise DVRangeError(
            expected=f"a DV at offset {offset} of a {len(data)}-byte file",
            actual="no room for its size field and magic",
        )
    (magic_be,) = _UINT32_BE.unpack_from(data, offset + 4)
    (magic_le,) = _UINT32_LE.unpack_from(data, offset + 4)
    if magic_be == MAGIC_32:
        return PaimonDV(_decode_32(data, offset, length), bitmap64=False)
    if magic_le == MAGIC_64:
        return PaimonDV(_decode_64(data, offset, length), bitmap64=True)
    raise DVMagicError(
        expected=f"{MAGIC_32} (big-endian) or {MAGIC_64} (little-endian)", actual=magic_be
    )


def _decode_32(data: bytes, offset: int, length: int) -> BitMap64:
    (size,) = _UINT32_BE.unpack_from(data, offset)
    if size != length:
        raise DVSizeMismatchError("size field", expected=length, actual=size)
    end = offset + 4 + size + 4
    if end > len(data):
        raise DVRangeError(expected=f"{end} bytes", actual=f"a {len(data)}-byte file")
    payload = data[offset + 4 : offset + 4 + size]
    (stored,) = _UINT32_BE.unpack_from(data, offset + 4 + size)
    computed = zlib.crc32(payload)
    if stored != computed:
        raise DVChecksumError(expected=f"0x{stored:08x}", actual=f"0x{computed:08x}")
    try:
        values = roaring.decode32(payload[4:])
    except ValueError as exc:
        raise DVEncodingError(f"not a portable 32-bit Roaring bitmap: {exc}") from exc
    if values.size and int(values[-1]) > MAX_POSITION_32:
        raise DVEncodingError(f"row position {int(values[-1])} is not below 2**31")
    return BitMap64(values.astype(np.uint64))


def _decode_64(data: bytes, offset: int, length: int) -> BitMap64:
    if length < ENTRY_OVERHEAD or offset + length > len(data):
        raise DVRangeError(
            expected=f"{length} record bytes at offset {offset}", actual=f"a {len(data)}-byte file"
        )
    return decode_dv_entry(data[offset : offset + length], length - ENTRY_OVERHEAD)


def encode_paimon_dv(rows: BitMap64, bitmap64: bool) -> tuple[bytes, int]:
    """One framed DV as Paimon writes it, and the `length` its index manifest entry holds
    (32-bit: payload bytes; 64-bit: record bytes). The 64-bit bitmap is run-optimized first,
    as Paimon's writer does."""
    if bitmap64:
        optimized = BitMap64(rows)
        optimized.run_optimize()
        entry = encode_dv_entry(optimized)
        return entry, len(entry)
    if rows and rows.max() > MAX_POSITION_32:
        raise ValueError(f"row position {rows.max()} is not below 2**31")
    payload = _UINT32_BE.pack(MAGIC_32) + roaring.encode32(bitmap_rows(rows))
    framed = _UINT32_BE.pack(len(payload)) + payload + _UINT32_BE.pack(zlib.crc32(payload))
    return framed, len(payload)


def encode_deletion_file(
    bitmaps: Sequence[BitMap64], bitmap64: bool
) -> tuple[bytes, list[tuple[int, int]]]:
    """A deletion file holding `bitmaps`, with each one's (offset, length) as the index
    manifest records them."""
    out = bytearray([INDEX_FILE_VERSION])
    ranges = []
    for rows in bitmaps:
        framed, length = encode_paimon_dv(rows, bitmap64)
        ranges.append((len(out), length))
        out += framed
    return bytes(out), ranges
