"""Paimon's two DV framings in the shared codec (`dvtool.deletion_vectors.paimon`).

Golden bytes: deletion files Paimon's Java writer (paimon-bundle 1.4.2, the fixture builder
of tests/reference/paimon_tables.py) wrote for `pk_dv` (32-bit), `append_dv` (two 32-bit
DVs) and `pk_dv_bitmap64` (64-bit), with the (offset, length, cardinality) their index
manifests give. They decode to what the test-side decoder (tests/reference/dv_files.py,
pyroaring straight from the spec) reads, and re-encode byte for byte. Random sets of every
container kind round-trip in both framings; each damaged field raises its own error.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from pyroaring import BitMap64

from dvtool.deletion_vectors.paimon import (
    MAGIC_32,
    check_index_file_version,
    decode_paimon_dv,
    encode_deletion_file,
    encode_paimon_dv,
)
from dvtool.deletion_vectors.roaring import encode32
from dvtool.errors import (
    DVChecksumError,
    DVEncodingError,
    DVMagicError,
    DVRangeError,
    DVSizeMismatchError,
    DVVersionError,
)
from tests.reference.dv_files import paimon_bitmap

# (deletion file hex, [(offset, length, cardinality)], bitmap64) as Paimon wrote them.
GOLDEN = {
    "pk_dv": (
        "01000000265e43f2d03a30000001000000000008001000000000000200030005000600080009000a00"
        "0d0039e4a7e2",
        [(1, 38, 9)],
        False,
    ),
    "append_dv": (
        "010000001c5e43f2d03a30000001000000000003001000000005000c0013001a005617c7590000001e"
        "5e43f2d03a300000010000000000040010000000000007000e0015001c00684686cf",
        [(1, 28, 4), (37, 30, 5)],
        False,
    ),
    "pk_dv_bitmap64": (
        "0100000030d1d339640100000000000000000000003a300000010000000000070010000000000001"
        "000400060007000a000d000f0005460726",
        [(1, 56, 8)],
        True,
    ),
}


def _oracle(data: bytes, offset: int) -> list[int]:
    """The positions the spec-level test decoder reads at `offset` (size, payload, CRC)."""
    (size,) = struct.unpack_from(">i", data, offset)
    return sorted(paimon_bitmap(data[offset + 4 : offset + 4 + size]).positions)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_deletion_files_decode_and_reencode_byte_for_byte(name: str) -> None:
    text, ranges, bitmap64 = GOLDEN[name]
    data = bytes.fromhex(text)
    check_index_file_version(data)
    decoded = []
    for offset, length, cardinality in ranges:
        dv = decode_paimon_dv(data, offset, length)
        assert dv.bitmap64 == bitmap64
        assert sorted(dv.rows) == _oracle(data, offset)
        assert len(dv.rows) == cardinality
        decoded.append(dv.rows)
    again, placed = encode_deletion_file(decoded, bitmap64)
    assert again == data
    assert placed == [(offset, length) for offset, length, _ in ranges]


def _sets() -> list[np.ndarray]:
    rng = np.random.default_rng(27)
    return [
        np.array([], dtype=np.uint64),
        np.array([0], dtype=np.uint64),
        np.sort(rng.choice(100_000, 300, replace=False)).astype(np.uint64),  # arrays
        np.sort(rng.choice(70_000, 20_000, replace=False)).astype(np.uint64),  # bitmaps
        np.arange(5, 90_000, dtype=np.uint64),  # runs
        np.array([3, 2**31 - 1], dtype=np.uint64),  # the largest 32-bit position
    ]


@pytest.mark.parametrize("bitmap64", [False, True])
@pytest.mark.parametrize("index", range(6))
def test_framings_round_trip(bitmap64: bool, index: int) -> None:
    rows = BitMap64(_sets()[index])
    framed, length = encode_paimon_dv(rows, bitmap64)
    # The quirk: 32-bit DVs record their payload length, 64-bit ones the whole record.
    (size,) = struct.unpack_from(">I", framed)
    assert length == (len(framed) if bitmap64 else size) and size == len(framed) - 8
    dv = decode_paimon_dv(b"\x01" + framed, 1, length)
    assert dv.rows == rows and dv.bitmap64 == bitmap64


def test_a_32_bit_dv_cannot_hold_positions_beyond_a_java_int() -> None:
    with pytest.raises(ValueError, match="2\\*\\*31"):
        encode_paimon_dv(BitMap64([2**31]), bitmap64=False)
    framed, length = encode_paimon_dv(BitMap64([2**31]), bitmap64=True)
    assert list(decode_paimon_dv(b"\x01" + framed, 1, length).rows) == [2**31]


def _reframe(payload: bytes) -> bytes:
    """A 32-bit record around `payload` with a correct size and CRC."""
    return struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))


@pytest.mark.parametrize("bitmap64", [False, True])
def test_each_damaged_field_raises_its_own_error(bitmap64: bool) -> None:
    framed, length = encode_paimon_dv(BitMap64([1, 5, 9]), bitmap64)
    data = b"\x01" + framed
    wrong_size = bytearray(data)
    wrong_size[4] ^= 0x01
    with pytest.raises(DVSizeMismatchError):
        decode_paimon_dv(bytes(wrong_size), 1, length)
    with pytest.raises(DVSizeMismatchError):  # the index manifest's length is off
        decode_paimon_dv(data, 1, length - 1)
    wrong_magic = bytearray(data)
    wrong_magic[5] ^= 0xFF
    with pytest.raises(DVMagicError):
        decode_paimon_dv(bytes(wrong_magic), 1, length)
    wrong_crc = bytearray(data)
    wrong_crc[-1] ^= 0x01
    with pytest.raises(DVChecksumError):
        decode_paimon_dv(bytes(wrong_crc), 1, length)
    with pytest.raises(DVRangeError):
        decode_paimon_dv(data[:-3], 1, length)
    with pytest.raises(DVRangeError):
        decode_paimon_dv(data, len(data) - 2, length)


def test_a_bitmap_that_does_not_decode_is_an_encoding_error() -> None:
    bad_cookie = struct.pack(">I", MAGIC_32) + struct.pack("<II", 99, 0)
    with pytest.raises(DVEncodingError):
        decode_paimon_dv(b"\x01" + _reframe(bad_cookie), 1, len(bad_cookie))
    trailing = struct.pack(">I", MAGIC_32) + struct.pack("<II", 12346, 0) + b"\x00"
    with pytest.raises(DVEncodingError):
        decode_paimon_dv(b"\x01" + _reframe(trailing), 1, len(trailing))
    beyond_int = struct.pack(">I", MAGIC_32) + encode32([2**31])  # a negative Java int
    with pytest.raises(DVEncodingError, match="2\\*\\*31"):
        decode_paimon_dv(b"\x01" + _reframe(beyond_int), 1, len(beyond_int))


def test_the_deletion_file_version_is_checked() -> None:
    check_index_file_version(b"\x01")
    with pytest.raises(DVVersionError):
        check_index_file_version(b"\x02")
    with pytest.raises(DVRangeError):
        check_index_file_version(b"")
