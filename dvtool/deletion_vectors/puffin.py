"""Puffin files and their `deletion-vector-v1` blobs, without any IO (Iceberg puffin-spec.md).

A Puffin file is `Magic Blob1 ... BlobN Footer`, the footer `Magic FooterPayload
FooterPayloadSize Flags Magic`: the payload a UTF-8 JSON `FileMetadata` (`blobs`, each with
`type`, `fields`, `snapshot-id`, `sequence-number`, `offset`, `length`, optional
`compression-codec` and `properties`), its size and the flags little-endian int32s. Readers
fetch the last `FOOTER_TRAILER` bytes, ask `footer_length` how many to fetch, and parse them
with `parse_footer`; `build_puffin` writes a file.

A `deletion-vector-v1` blob holds exactly the bytes of one Delta DV file entry (PROTOCOL.md
"Deletion Vector Format"): a big-endian length of magic plus bitmap, the magic
`D1 D3 39 64`, the portable 64-bit Roaring bitmap and a big-endian CRC-32 of magic plus
bitmap. So the blob codec is Delta's (`dvtool.delta.protocol.deletion_vector`), framed here; the
blob's
properties name the data file it applies to (`referenced-data-file`) and the number of rows
it deletes (`cardinality`), and it is never compressed.

Only uncompressed footers are read: LZ4 footer compression is optional in the spec, Iceberg's
writers do not use it, and dvtool does not bundle LZ4; such a file is reported, not guessed.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

from dvtool.deletion_vectors.codec import ENTRY_OVERHEAD, decode_dv_entry, encode_dv_entry
from dvtool.errors import DeletionVectorError

MAGIC = b"PFA1"
FOOTER_TRAILER = 12
"""The footer's last bytes: payload size, flags, magic; `footer_length` reads them."""
DV_BLOB_TYPE = "deletion-vector-v1"
REFERENCED_DATA_FILE = "referenced-data-file"
CARDINALITY = "cardinality"
_COMPRESSED_FLAG = 0x01
_INT32_LE = struct.Struct("<i")


class PuffinError(DeletionVectorError):
    problem = "Puffin file is malformed"


@dataclass(frozen=True)
class BlobMetadata:
    """One entry of a Puffin footer's `blobs` list."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, blob: Mapping[str, Any]) -> BlobMetadata:
        try:
            return cls(
                type=str(blob["type"]),
                fields=tuple(int(f) for f in blob["fields"]),
                snapshot_id=int(blob["snapshot-id"]),
                sequence_number=int(blob["sequence-number"]),
                offset=int(blob["offset"]),
                length=int(blob["length"]),
                compression_codec=blob.get("compression-codec"),
                properties={str(k): str(v) for k, v in (blob.get("properties") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PuffinError(f"blob metadata {blob!r}: {exc!r}") from exc

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "fields": list(self.fields),
            "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number,
            "offset": self.offset,
            "length": self.length,
        }
        if self.compression_codec is not None:
            out["compression-codec"] = self.compression_codec
        if self.properties:
            out["properties"] = dict(self.properties)
        return out


@dataclass(frozen=True)
class PuffinFooter:
    """A Puffin file's `FileMetadata`."""

    blobs: tuple[BlobMetadata, ...]
    properties: Mapping[str, str] = field(default_factory=dict)


def footer_length(trailer: bytes, file_size: int) -> int:
    """How many bytes at the end of the file the footer takes, from its last 12 bytes."""
    if len(trailer) != FOOTER_TRAILER or trailer[8:] != MAGIC:
        raise PuffinError("no Puffin magic at the end of the file")
    payload_size = int(_INT32_LE.unpack_from(trailer, 0)[0])
    total = len(MAGIC) + payload_size + FOOTER_TRAILER
    if payload_size < 0 or total + len(MAGIC) > file_size:
        raise PuffinError(f"footer payload size {payload_size} in a {file_size}-byte file")
    return total


def parse_footer(footer: bytes) -> PuffinFooter:
    """Parse the footer bytes (`footer_length` of them, from the end of the file)."""
    if footer[:4] != MAGIC or footer[-4:] != MAGIC:
        raise PuffinError("footer magic missing")
    (payload_size,) = _INT32_LE.unpack_from(footer, len(footer) - FOOTER_TRAILER)
    (flags,) = _INT32_LE.unpack_from(footer, len(footer) - 8)
    if flags & _COMPRESSED_FLAG:
        raise PuffinError("compressed (LZ4) footer payloads are not supported")
    payload = footer[4 : 4 + payload_size]
    try:
        document = json.loads(payload.decode("utf-8"))
        blobs = tuple(BlobMetadata.from_json(b) for b in document["blobs"])
        properties = {str(k): str(v) for k, v in (document.get("properties") or {}).items()}
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise PuffinError(f"footer payload is not FileMetadata JSON: {exc!r}") from exc
    return PuffinFooter(blobs, properties)


def build_puffin(
    blobs: Sequence[tuple[BlobMetadata, bytes]], properties: Mapping[str, str] | None = None
) -> tuple[bytes, list[BlobMetadata]]:
    """A Puffin file holding `blobs` (their `offset`/`length` are set here), uncompressed.

    Returns the file's bytes and the blob metadata as written (with offsets and lengths).
    """
    out = bytearray(MAGIC)
    written: list[BlobMetadata] = []
    for meta, data in blobs:
        placed = BlobMetadata(
            meta.type,
            meta.fields,
            meta.snapshot_id,
            meta.sequence_number,
            offset=len(out),
            length=len(data),
            compression_codec=meta.compression_codec,
            properties=meta.properties,
        )
        written.append(placed)
        out += data
    document: dict[str, Any] = {"blobs": [b.to_json() for b in written]}
    if properties:
        document["properties"] = dict(properties)
    payload = json.dumps(document, separators=(",", ":")).encode("utf-8")
    out += MAGIC + payload + _INT32_LE.pack(len(payload)) + _INT32_LE.pack(0) + MAGIC
    return bytes(out), written


def encode_dv_blob(rows: BitMap64) -> bytes:
    """The bytes of a `deletion-vector-v1` blob deleting `rows` (a Delta DV file entry)."""
    return encode_dv_entry(rows)


def dv_blob_metadata(rows: BitMap64, data_file: str) -> BlobMetadata:
    """The metadata of a DV blob for `data_file` (offset and length set by `build_puffin`)."""
    return BlobMetadata(
        type=DV_BLOB_TYPE,
        fields=(),
        snapshot_id=-1,
        sequence_number=-1,
        offset=0,
        length=0,
        properties={REFERENCED_DATA_FILE: data_file, CARDINALITY: str(len(rows))},
    )


def decode_dv_blob(blob: bytes, meta: BlobMetadata) -> BitMap64:
    """Decode and check a `deletion-vector-v1` blob against its metadata.

    Checks the blob type, that it is uncompressed, its length field, CRC and magic (the
    Delta codec), and its `cardinality` property when present.
    """
    if meta.type != DV_BLOB_TYPE:
        raise PuffinError(f"blob type {meta.type!r} is not {DV_BLOB_TYPE!r}")
    if meta.compression_codec is not None:
        raise PuffinError(f"{DV_BLOB_TYPE} blobs are never compressed: {meta.compression_codec}")
    if len(blob) < ENTRY_OVERHEAD or len(blob) != meta.length:
        raise PuffinError(f"blob of {len(blob)} bytes, metadata says {meta.length}")
    rows = decode_dv_entry(blob, len(blob) - ENTRY_OVERHEAD)
    cardinality = meta.properties.get(CARDINALITY)
    if cardinality is not None and cardinality.strip() != str(len(rows)):
        raise PuffinError(f"cardinality property {cardinality}, the bitmap holds {len(rows)}")
    return rows
