"""Puffin files and `deletion-vector-v1` blobs (dvtool/deletion_vectors/puffin.py) against the spec.

Oracles: the byte layout spelled out in puffin-spec.md, built here with struct, zlib and
pyroaring's portable serialization (not dvtool's codec); and the DV entries Delta Spark
wrote into the golden tables, which the spec says are the same bytes as a DV blob.
"""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap64

from dvtool.deletion_vectors.puffin import (
    CARDINALITY,
    DV_BLOB_TYPE,
    FOOTER_TRAILER,
    MAGIC,
    REFERENCED_DATA_FILE,
    BlobMetadata,
    PuffinError,
    build_puffin,
    decode_dv_blob,
    dv_blob_metadata,
    encode_dv_blob,
    footer_length,
    parse_footer,
)
from dvtool.errors import DVChecksumError
from tests.oracles import GOLDEN, dv_file, replay_json

SPEC_DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
positions = st.sets(
    st.one_of(st.integers(0, 70_000), st.integers(2**32 - 5, 2**32 + 5), st.integers(0, 2**40)),
    max_size=300,
)


def spec_blob(rows: set[int]) -> bytes:
    """A DV blob as puffin-spec.md spells it: BE length, magic, portable bitmap, BE CRC."""
    vector = SPEC_DV_MAGIC + BitMap64(rows).serialize()
    return struct.pack(">I", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector))


def read_puffin(data: bytes) -> tuple[dict[str, object], list[bytes]]:
    """Parse a Puffin file as the spec describes, sharing nothing with dvtool."""
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    size, flags = struct.unpack("<ii", data[-12:-4])
    assert flags == 0
    payload = data[-12 - size : -12]
    assert data[-16 - size : -12 - size] == b"PFA1"
    meta = json.loads(payload)
    blobs = [data[b["offset"] : b["offset"] + b["length"]] for b in meta["blobs"]]
    return meta, blobs


@given(positions)
def test_dv_blob_bytes_are_the_spec_layout(rows: set[int]) -> None:
    blob = encode_dv_blob(BitMap64(rows))
    assert blob == spec_blob(rows)
    meta = dv_blob_metadata(BitMap64(rows), "s3://b/t/data/a.parquet")
    placed = BlobMetadata(**{**meta.__dict__, "length": len(blob)})
    assert set(decode_dv_blob(blob, placed)) == rows


@given(st.lists(positions, min_size=1, max_size=4))
def test_a_puffin_file_reads_back_with_a_plain_spec_reader(row_sets: list[set[int]]) -> None:
    blobs = [
        (dv_blob_metadata(BitMap64(rows), f"data/{i}.parquet"), encode_dv_blob(BitMap64(rows)))
        for i, rows in enumerate(row_sets)
    ]
    data, written = build_puffin(blobs, {"created-by": "dvtool test"})
    meta, raw = read_puffin(data)
    assert meta["properties"] == {"created-by": "dvtool test"}
    for i, (blob_json, blob, rows) in enumerate(zip(meta["blobs"], raw, row_sets, strict=True)):
        assert blob_json["type"] == DV_BLOB_TYPE
        assert blob_json["snapshot-id"] == -1 and blob_json["sequence-number"] == -1
        assert blob_json["fields"] == [] and "compression-codec" not in blob_json
        assert blob_json["properties"] == {
            REFERENCED_DATA_FILE: f"data/{i}.parquet",
            CARDINALITY: str(len(rows)),
        }
        assert blob == spec_blob(rows)
    footer = parse_footer(data[-footer_length(data[-FOOTER_TRAILER:], len(data)) :])
    assert list(footer.blobs) == written
    assert [set(decode_dv_blob(data[b.offset : b.offset + b.length], b)) for b in written] == [
        set(r) for r in row_sets
    ]


def golden_dv_entries() -> list[tuple[bytes, set[int]]]:
    """(entry bytes, rows) of every DV file entry in the golden tables Delta Spark wrote."""
    entries = []
    for name in ("table-with-dv-small", "dv-with-columnmapping/delta", "with-short-dv"):
        table = GOLDEN / name
        _, files = replay_json(table)
        for action in files.values():
            dv = action.get("deletionVector")
            if not dv or dv["storageType"] != "u":
                continue
            data = dv_file(table, dv).read_bytes()
            offset, size = dv.get("offset") or 1, dv["sizeInBytes"]
            entry = data[offset : offset + size + 8]
            rows = set(BitMap64.deserialize(entry[8 : 4 + size]))
            entries.append((entry, rows))
    return entries


def test_delta_spark_dv_entries_are_dv_blobs() -> None:
    entries = golden_dv_entries()
    assert entries, "the golden tables hold DV files"
    for entry, rows in entries:
        meta = BlobMetadata(DV_BLOB_TYPE, (), -1, -1, 0, len(entry), None, {})
        assert set(decode_dv_blob(entry, meta)) == rows
        assert encode_dv_blob(BitMap64(rows)) == spec_blob(rows)


def _file_with_one_blob(rows: set[int]) -> tuple[bytes, BlobMetadata]:
    bitmap = BitMap64(rows)
    data, (meta,) = build_puffin([(dv_blob_metadata(bitmap, "a.parquet"), encode_dv_blob(bitmap))])
    return data, meta


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[:-1] + b"X", "no Puffin magic"),
        (lambda d: d[:-12] + struct.pack("<i", 10**6) + d[-8:], "footer payload size"),
        (lambda d: d[:-8] + struct.pack("<i", 1) + d[-4:], "compressed"),
    ],
)
def test_a_damaged_footer_is_named(damage: object, message: str) -> None:
    data, _ = _file_with_one_blob({1, 2, 3})
    bad = damage(data)  # type: ignore[operator]
    with pytest.raises(PuffinError, match=message):
        parse_footer(bad[-footer_length(bad[-FOOTER_TRAILER:], len(bad)) :])


def test_a_footer_that_is_not_json_is_named() -> None:
    payload = b"{not json"
    tail = MAGIC + payload + struct.pack("<ii", len(payload), 0) + MAGIC
    with pytest.raises(PuffinError, match="not FileMetadata JSON"):
        parse_footer(tail)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "apache-datasketches-theta-v1"}, "blob type"),
        ({"compression_codec": "zstd"}, "never compressed"),
        ({"length": 3}, "metadata says 3"),
        ({"properties": {CARDINALITY: "4"}}, "cardinality property 4"),
    ],
)
def test_a_blob_that_disagrees_with_its_metadata_is_refused(
    change: dict[str, object], message: str
) -> None:
    data, meta = _file_with_one_blob({1, 2, 3})
    blob = data[meta.offset : meta.offset + meta.length]
    with pytest.raises(PuffinError, match=message):
        decode_dv_blob(blob, BlobMetadata(**{**meta.__dict__, **change}))


def test_a_flipped_bit_fails_the_crc() -> None:
    data, meta = _file_with_one_blob({5, 70_000})
    blob = bytearray(data[meta.offset : meta.offset + meta.length])
    blob[10] ^= 0x01
    with pytest.raises(DVChecksumError):
        decode_dv_blob(bytes(blob), meta)
