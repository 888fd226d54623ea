"""Readers, written from the specs, for the deletion-vector files the reference engines write.

The fixture tests use them to check that the files are what the tables claim, without the
engines' own code:

- `puffin_footer(path)` and `puffin_deletion_vectors(path)`: an Iceberg Puffin file's footer
  (magic `PFA1` at both ends, JSON payload) and its `deletion-vector-v1` blobs (4-byte
  big-endian length, magic `D1 D3 39 64`, portable 64-bit Roaring bitmap, big-endian CRC-32
  of magic and bitmap); /work/shared/reference/iceberg/puffin-spec.md.
- `paimon_deletion_file(path)`: a Paimon deletion file under `index/` (version byte 1, then
  per data file: big-endian size, the serialized bitmap, big-endian CRC-32); each bitmap is
  a 32-bit RoaringBitmap after magic 1581511376 (big-endian), or with
  `deletion-vectors.bitmap64` a portable 64-bit Roaring bitmap after magic 1681511377
  (little-endian), the same layout as Iceberg's; /work/shared/reference/paimon/tableindex.md.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyroaring import BitMap, BitMap64

PUFFIN_MAGIC = b"PFA1"
ICEBERG_DV_MAGIC = bytes.fromhex("D1D33964")
PAIMON_BITMAP32_MAGIC = 1581511376
PAIMON_BITMAP64_MAGIC = 1681511377


@dataclass(frozen=True)
class Bitmap:
    """One deletion vector: the deleted positions and which layout encoded them."""

    positions: list[int]
    bitmap64: bool


def puffin_footer(path: Path) -> dict[str, Any]:
    """The JSON footer of a Puffin file (uncompressed footers only, as Iceberg writes)."""
    data = path.read_bytes()
    assert data[:4] == PUFFIN_MAGIC and data[-4:] == PUFFIN_MAGIC, "not a Puffin file"
    size, flags = struct.unpack("<ii", data[-12:-4])
    assert flags & 1 == 0, "compressed Puffin footer"
    payload = data[-12 - size : -12]
    assert data[-16 - size : -12 - size] == PUFFIN_MAGIC
    footer: dict[str, Any] = json.loads(payload)
    return footer


def iceberg_dv_blob(blob: bytes) -> Bitmap:
    """Decode one `deletion-vector-v1` blob, checking its length, magic and CRC."""
    (length,) = struct.unpack(">i", blob[:4])
    body = blob[4 : 4 + length]
    assert len(blob) == length + 8, "blob length does not match its length field"
    assert body[:4] == ICEBERG_DV_MAGIC, f"bad DV magic {body[:4].hex()}"
    (crc,) = struct.unpack(">I", blob[4 + length :])
    assert crc == zlib.crc32(body), "DV checksum mismatch"
    return Bitmap(list(BitMap64.deserialize(body[4:])), bitmap64=True)


def puffin_deletion_vectors(path: Path) -> dict[str, tuple[Bitmap, dict[str, str]]]:
    """Every `deletion-vector-v1` blob of a Puffin file by its referenced data file."""
    data = path.read_bytes()
    vectors = {}
    for blob in puffin_footer(path)["blobs"]:
        assert blob["type"] == "deletion-vector-v1", blob["type"]
        assert "compression-codec" not in blob
        raw = data[blob["offset"] : blob["offset"] + blob["length"]]
        props = blob["properties"]
        vectors[props["referenced-data-file"]] = (iceberg_dv_blob(raw), props)
    return vectors


def paimon_bitmap(serialized: bytes) -> Bitmap:
    """One Paimon serialized bin: magic (which says the layout) and bitmap."""
    if struct.unpack(">i", serialized[:4])[0] == PAIMON_BITMAP32_MAGIC:
        return Bitmap(list(BitMap.deserialize(serialized[4:])), bitmap64=False)
    assert struct.unpack("<i", serialized[:4])[0] == PAIMON_BITMAP64_MAGIC, serialized[:4].hex()
    return Bitmap(list(BitMap64.deserialize(serialized[4:])), bitmap64=True)


def paimon_deletion_file(path: Path) -> dict[int, Bitmap]:
    """The bitmaps of a Paimon deletion file by offset (the offset its DeletionFile names)."""
    data = path.read_bytes()
    assert data[:1] == b"\x01", f"deletion file version {data[:1].hex()}"
    bitmaps, offset = {}, 1
    while offset < len(data):
        (size,) = struct.unpack(">i", data[offset : offset + 4])
        serialized = data[offset + 4 : offset + 4 + size]
        (crc,) = struct.unpack(">I", data[offset + 4 + size : offset + 8 + size])
        assert crc == zlib.crc32(serialized), f"checksum mismatch at {offset} in {path}"
        bitmaps[offset] = paimon_bitmap(serialized)
        offset += 8 + size
    return bitmaps
