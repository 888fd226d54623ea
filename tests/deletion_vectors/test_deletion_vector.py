"""DV descriptors and the DV codec, checked byte for byte against real Delta DV files."""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from dvtool.deletion_vectors import codec
from dvtool.delta.protocol import deletion_vector as dv
from dvtool.delta.protocol.deletion_vector import DeletionVectorDescriptor
from dvtool.errors import (
    DVCardinalityError,
    DVChecksumError,
    DVEncodingError,
    DVMagicError,
    DVRangeError,
    DVRowIndexError,
    DVSizeMismatchError,
    DVVersionError,
    LogError,
)
from tests.oracles import GOLDEN

PROTOCOL_EXAMPLE: dict[str, Any] = {
    "storageType": "u",
    "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
    "offset": 4,
    "sizeInBytes": 40,
    "cardinality": 6,
}


# --- golden table helpers ---------------------------------------------------------------


def _golden_descriptors() -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every (table root, deletionVector JSON) on add/remove actions of good golden tables."""
    if not GOLDEN.is_dir():
        return
    for log in sorted(GOLDEN.glob("**/_delta_log")):
        if "bad" in log.relative_to(GOLDEN).parts:
            continue
        for commit in sorted(log.glob("*.json")):
            for line in commit.read_text().splitlines():
                action = json.loads(line)
                for kind in ("add", "remove"):
                    descriptor = (action.get(kind) or {}).get("deletionVector")
                    if descriptor:
                        yield log.parent, descriptor


def _unique(storage_type: str) -> list[tuple[Path, DeletionVectorDescriptor]]:
    """The distinct golden descriptors of one storage type, per table."""
    seen: dict[tuple[Path, str], DeletionVectorDescriptor] = {}
    for table, raw in _golden_descriptors():
        descriptor = DeletionVectorDescriptor.from_json(raw)
        if descriptor.storage_type == storage_type:
            seen[(table, descriptor.unique_id)] = descriptor
    return [(table, d) for (table, _), d in sorted(seen.items(), key=lambda kv: kv[0])]


GOLDEN_UUID_DVS = _unique("u")
GOLDEN_INLINE_DVS = _unique("i")


def _golden_id(case: tuple[Path, DeletionVectorDescriptor]) -> str:
    return f"{case[0].relative_to(GOLDEN)}:{case[1].unique_id}"


# --- descriptors ----------------------------------------------------------------------


def test_from_json_reads_protocol_example() -> None:
    descriptor = DeletionVectorDescriptor.from_json(PROTOCOL_EXAMPLE)
    assert descriptor == DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 4, 40, 6)
    assert descriptor.to_json() == PROTOCOL_EXAMPLE


def test_relative_path_protocol_example() -> None:
    descriptor = DeletionVectorDescriptor.from_json(PROTOCOL_EXAMPLE)
    assert descriptor.prefix == "ab"
    assert descriptor.relative_path() == (
        "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )


def test_relative_path_without_prefix() -> None:
    descriptor = DeletionVectorDescriptor("u", "^-aqEH.-t@S}K{vb[*k^", 1, 40, 6)
    assert descriptor.relative_path() == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"


def test_unique_id_with_offset() -> None:
    descriptor = DeletionVectorDescriptor.from_json(PROTOCOL_EXAMPLE)
    assert descriptor.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"


def test_unique_id_without_offset() -> None:
    descriptor = DeletionVectorDescriptor(
        "i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", None, 40, 6
    )
    assert descriptor.unique_id == "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"


def test_unique_id_offset_zero_is_kept() -> None:
    assert DeletionVectorDescriptor("p", "s3://b/x.bin", 0, 1, 1).unique_id == "ps3://b/x.bin@0"


def test_to_json_omits_absent_offset_and_keeps_key_order() -> None:
    descriptor = DeletionVectorDescriptor("i", "abcde", None, 3, 1)
    assert list(descriptor.to_json()) == [
        "storageType",
        "pathOrInlineDv",
        "sizeInBytes",
        "cardinality",
    ]


def test_from_json_accepts_null_offset() -> None:
    # The golden cdf-table-with-dv writes "offset":null for inline DVs.
    raw = {
        "storageType": "i",
        "pathOrInlineDv": "00000",
        "offset": None,
        "sizeInBytes": 4,
        "cardinality": 0,
    }
    assert DeletionVectorDescriptor.from_json(raw).offset is None


def test_storage_type_helpers() -> None:
    u = DeletionVectorDescriptor.from_json(PROTOCOL_EXAMPLE)
    i = DeletionVectorDescriptor("i", "00000", None, 4, 0)
    p = DeletionVectorDescriptor("p", "s3://b/t/x.bin", None, 4, 0)
    assert (u.is_relative, u.is_inline, u.is_absolute_path) == (True, False, False)
    assert (i.is_relative, i.is_inline, i.is_absolute_path) == (False, True, False)
    assert (p.is_relative, p.is_inline, p.is_absolute_path) == (False, False, True)
    assert p.effective_offset == 0
    assert u.effective_offset == 4


def test_type_specific_accessors_refuse_other_types() -> None:
    p = DeletionVectorDescriptor("p", "s3://b/t/x.bin", None, 4, 0)
    with pytest.raises(ValueError, match="storageType 'p', not 'u'"):
        p.relative_path()
    with pytest.raises(ValueError, match="not 'i'"):
        p.inline_bytes()


def _with(**changes: Any) -> dict[str, Any]:
    return {**PROTOCOL_EXAMPLE, **changes}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_with(storageType="x"), "storageType must be one of"),
        (_with(storageType=None), "storageType must be a string"),
        (
            {k: v for k, v in PROTOCOL_EXAMPLE.items() if k != "pathOrInlineDv"},
            "pathOrInlineDv must be",
        ),
        (_with(pathOrInlineDv=""), "pathOrInlineDv is empty"),
        (_with(pathOrInlineDv="short"), "does not end in a Z85-encoded UUID"),
        (_with(pathOrInlineDv="ab" + " " * 20), "does not end in a Z85-encoded UUID"),
        (_with(offset="4"), "offset must be a non-negative integer"),
        (_with(offset=-1), "offset must be a non-negative integer"),
        (_with(sizeInBytes=None), "sizeInBytes must be"),
        (_with(sizeInBytes=40.0), "sizeInBytes must be"),
        (_with(cardinality=True), "cardinality must be"),
        ({k: v for k, v in PROTOCOL_EXAMPLE.items() if k != "cardinality"}, "cardinality must be"),
    ],
)
def test_from_json_rejects_malformed(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(LogError, match=message):
        DeletionVectorDescriptor.from_json(raw)


@given(st.uuids(), st.text(alphabet="abcdefghij0123456789", max_size=3))
def test_new_uuid_path_round_trips(value: uuid.UUID, prefix: str) -> None:
    path = dv.new_uuid_path(value, prefix)
    descriptor = DeletionVectorDescriptor("u", path, 1, 34, 1)
    assert descriptor.uuid == value
    expected_dir = f"{prefix}/" if prefix else ""
    assert descriptor.relative_path() == f"{expected_dir}deletion_vector_{value}.bin"


# --- bitmaps --------------------------------------------------------------------------

row_index = st.one_of(
    st.integers(0, 2**16),
    st.integers(2**32 - 70_000, 2**32 + 70_000),
    st.integers(0, codec.MAX_ROW_INDEX),
    st.just(codec.MAX_ROW_INDEX),
)


@st.composite
def bitmaps(draw: st.DrawFn) -> BitMap64:
    """Random row sets: scattered indexes (some above 2**32) plus dense ranges (run containers)."""
    rows = BitMap64(draw(st.sets(row_index, max_size=300)))
    for start, length in draw(st.lists(st.tuples(row_index, st.integers(1, 70_000)), max_size=2)):
        rows.add_range(start, min(start + length, codec.MAX_ROW_INDEX + 1))
    if draw(st.booleans()):
        rows.run_optimize()
    return rows


def test_magic_constant_bytes() -> None:
    assert codec.serialize_bitmap(BitMap64())[:4] == bytes.fromhex("d1d33964")


@given(bitmaps())
def test_bitmap_round_trip(rows: BitMap64) -> None:
    data = codec.serialize_bitmap(rows)
    assert struct.unpack_from("<I", data)[0] == codec.MAGIC
    assert codec.deserialize_bitmap(data) == rows


@settings(max_examples=50)
@given(st.lists(bitmaps(), min_size=1, max_size=5))
def test_dv_file_round_trip(rows_list: list[BitMap64]) -> None:
    data, placements = codec.encode_dv_file(rows_list)
    assert data[0] == codec.FILE_FORMAT_VERSION
    assert placements[0][0] == 1
    for rows, (offset, size) in zip(rows_list, placements, strict=True):
        chunk = data[offset : offset + size + codec.ENTRY_OVERHEAD]
        assert codec.decode_dv_entry(chunk, size) == rows
    last_offset, last_size = placements[-1]
    assert len(data) == last_offset + last_size + codec.ENTRY_OVERHEAD


@settings(max_examples=50)
@given(bitmaps())
def test_inline_round_trip(rows: BitMap64) -> None:
    descriptor = dv.descriptor_for_inline(rows)
    assert descriptor.offset is None
    assert descriptor.cardinality == len(rows)
    assert len(descriptor.path_or_inline_dv) % 5 == 0
    assert dv.decode_inline(descriptor) == rows
    assert DeletionVectorDescriptor.from_json(descriptor.to_json()) == descriptor


def test_serialize_rejects_index_with_high_bit() -> None:
    with pytest.raises(ValueError, match="not below 2\\*\\*63"):
        codec.serialize_bitmap(BitMap64([1, 2**63]))


def test_deserialize_rejects_index_with_high_bit() -> None:
    data = codec.serialize_bitmap(BitMap64())[:4] + BitMap64([2**63 + 5]).serialize()
    with pytest.raises(DVEncodingError, match="not below 2\\*\\*63"):
        codec.deserialize_bitmap(data)


def test_deserialize_wrong_magic() -> None:
    data = struct.pack("<I", codec.MAGIC + 1) + BitMap64([1]).serialize()
    with pytest.raises(DVMagicError) as info:
        codec.deserialize_bitmap(data)
    assert (info.value.expected, info.value.actual) == (codec.MAGIC, codec.MAGIC + 1)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xd1\xd3",
        struct.pack("<I", codec.MAGIC),
        struct.pack("<I", codec.MAGIC) + b"\x05" * 30,
    ],
)
def test_deserialize_garbage(data: bytes) -> None:
    with pytest.raises(DVEncodingError):
        codec.deserialize_bitmap(data)


def test_deserialize_truncated_bitmap() -> None:
    data = codec.serialize_bitmap(BitMap64([1, 2, 3, 2**40]))
    with pytest.raises(DVEncodingError):
        codec.deserialize_bitmap(data[:-3])


# --- DV file entries ------------------------------------------------------------------


def _one_entry(rows: BitMap64) -> tuple[bytes, int]:
    data, [(offset, size)] = codec.encode_dv_file([rows])
    return data[offset:], size


def test_entry_size_mismatch() -> None:
    chunk, size = _one_entry(BitMap64([0, 9]))
    with pytest.raises(DVSizeMismatchError) as info:
        codec.decode_dv_entry(chunk[:-1], size - 1)
    assert (info.value.expected, info.value.actual) == (size - 1, size)


def test_entry_checksum_mismatch_reports_hex() -> None:
    chunk, size = _one_entry(BitMap64([0, 9]))
    corrupt = bytearray(chunk)
    corrupt[-1] ^= 0xFF
    with pytest.raises(DVChecksumError) as info:
        codec.decode_dv_entry(bytes(corrupt), size)
    crc = zlib.crc32(chunk[4 : 4 + size])
    assert info.value.actual == f"0x{crc:08x}"
    assert info.value.expected == f"0x{crc ^ 0xFF:08x}"


def test_entry_corrupt_payload_fails_checksum() -> None:
    chunk, size = _one_entry(BitMap64([0, 9]))
    corrupt = bytearray(chunk)
    corrupt[10] ^= 0x01
    with pytest.raises(DVChecksumError):
        codec.decode_dv_entry(bytes(corrupt), size)


def test_entry_wrong_magic_with_valid_crc() -> None:
    payload = struct.pack("<I", 12345) + BitMap64([1]).serialize()
    chunk = struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    with pytest.raises(DVMagicError):
        codec.decode_dv_entry(chunk, len(payload))


def test_entry_wrong_chunk_length() -> None:
    chunk, size = _one_entry(BitMap64([0]))
    with pytest.raises(DVRangeError):
        codec.decode_dv_entry(chunk[:-2], size)


def test_file_version() -> None:
    codec.check_file_version(1)
    with pytest.raises(DVVersionError) as info:
        codec.check_file_version(2)
    assert (info.value.expected, info.value.actual) == (1, 2)


def test_validate_bitmap() -> None:
    rows = BitMap64([0, 9])
    descriptor = DeletionVectorDescriptor("u", PROTOCOL_EXAMPLE["pathOrInlineDv"], 1, 36, 2)
    dv.validate_bitmap(rows, descriptor, 10)
    dv.validate_bitmap(rows, descriptor, None)
    dv.validate_bitmap(BitMap64(), DeletionVectorDescriptor("i", "00000", None, 4, 0), 0)
    with pytest.raises(DVCardinalityError) as card:
        dv.validate_bitmap(rows, DeletionVectorDescriptor("i", "00000", None, 4, 3), None)
    assert (card.value.expected, card.value.actual) == (3, 2)
    with pytest.raises(DVRowIndexError) as index:
        dv.validate_bitmap(rows, descriptor, 9)
    assert index.value.actual == 9
    assert "numRecords (9)" in str(index.value)


# --- inline DVs -----------------------------------------------------------------------


def test_inline_bytes_strip_zero_padding() -> None:
    payload = codec.serialize_bitmap(BitMap64([7]))  # 34 bytes, padded to 36
    descriptor = dv.descriptor_for_inline(BitMap64([7]))
    assert descriptor.size_in_bytes == len(payload) == 34
    assert len(descriptor.path_or_inline_dv) == 45
    assert descriptor.inline_bytes() == payload


@pytest.mark.parametrize("size", [32, 37, 100])
def test_inline_size_mismatch(size: int) -> None:
    good = dv.descriptor_for_inline(BitMap64([7]))
    bad = DeletionVectorDescriptor("i", good.path_or_inline_dv, None, size, 1)
    with pytest.raises(DVSizeMismatchError):
        bad.inline_bytes()


@pytest.mark.parametrize("text", ["abcd", "abcde f", "abc\u00e9e"])
def test_inline_bad_text(text: str) -> None:
    with pytest.raises(DVEncodingError, match="not valid Z85"):
        DeletionVectorDescriptor("i", text, None, 4, 0).inline_bytes()


def test_golden_has_inline_dvs() -> None:
    assert len(GOLDEN_INLINE_DVS) == 3


# Rows per inline DV of cdf-table-with-dv (versions 3-5), as delta-rs reads them.
GOLDEN_INLINE_ROWS = {
    "^Bg9^0rr910000000000iXQKl0rr91000935c8Xg000311onP9": [0, 1, 4, 5],
    "^Bg9^0rr910000000000iXQKl0rr91000315c8Xg000f5": [0, 5],
    "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093": [3],
}


@pytest.mark.parametrize("case", GOLDEN_INLINE_DVS, ids=_golden_id)
def test_golden_inline(case: tuple[Path, DeletionVectorDescriptor]) -> None:
    _, descriptor = case
    rows = dv.decode_inline(descriptor)
    dv.validate_bitmap(rows, descriptor, 10)
    assert list(rows) == GOLDEN_INLINE_ROWS[descriptor.path_or_inline_dv]
    assert codec.serialize_bitmap(rows) == descriptor.inline_bytes()
    if descriptor.size_in_bytes % 4 == 0:  # no padding: our encoding is identical
        assert dv.descriptor_for_inline(rows) == descriptor


# --- golden DV files ------------------------------------------------------------------


def test_golden_has_many_uuid_dvs() -> None:
    assert len(GOLDEN_UUID_DVS) >= 90
    assert any(d.effective_offset > 1 for _, d in GOLDEN_UUID_DVS)


@pytest.mark.parametrize("case", GOLDEN_UUID_DVS, ids=_golden_id)
def test_golden_dv_entry_round_trips_byte_exact(
    case: tuple[Path, DeletionVectorDescriptor],
) -> None:
    table, descriptor = case
    data = (table / descriptor.relative_path()).read_bytes()
    codec.check_file_version(data[0])
    offset, size = descriptor.effective_offset, descriptor.size_in_bytes
    chunk = data[offset : offset + size + codec.ENTRY_OVERHEAD]
    rows = codec.decode_dv_entry(chunk, size)
    dv.validate_bitmap(rows, descriptor, None)
    payload = codec.serialize_bitmap(rows)
    assert struct.pack(">I", len(payload)) == chunk[:4]
    assert payload == chunk[4 : 4 + size]
    assert struct.pack(">I", zlib.crc32(payload)) == chunk[4 + size :]


def _golden_files() -> list[tuple[Path, list[DeletionVectorDescriptor]]]:
    """Each golden DV file with all descriptors that point into it, in offset order."""
    by_file: dict[Path, dict[int, DeletionVectorDescriptor]] = defaultdict(dict)
    for table, descriptor in GOLDEN_UUID_DVS:
        by_file[table / descriptor.relative_path()][descriptor.effective_offset] = descriptor
    return [
        (path, [d for _, d in sorted(found.items())]) for path, found in sorted(by_file.items())
    ]


def _entries(data: bytes) -> list[tuple[int, int]]:
    """Walk a DV file's entries by their size fields (test-side reference parser)."""
    out, offset = [], 1
    while offset < len(data):
        (size,) = struct.unpack_from(">I", data, offset)
        out.append((offset, size))
        offset += size + codec.ENTRY_OVERHEAD
    return out


@pytest.mark.parametrize("case", _golden_files(), ids=lambda c: str(c[0].relative_to(GOLDEN)))
def test_golden_dv_file_reencodes_byte_exact(
    case: tuple[Path, list[DeletionVectorDescriptor]],
) -> None:
    # Some files hold entries no log action references (e.g. from a retried write), so the
    # whole file is walked, not just the referenced offsets.
    path, descriptors = case
    data = path.read_bytes()
    entries = _entries(data)
    assert {(d.effective_offset, d.size_in_bytes) for d in descriptors} <= set(entries)
    rows = [codec.decode_dv_entry(data[o : o + n + codec.ENTRY_OVERHEAD], n) for o, n in entries]
    encoded, placements = codec.encode_dv_file(rows)
    assert placements == entries
    assert encoded == data
