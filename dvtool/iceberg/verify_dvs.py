"""`--verify` for deletion vectors: one Puffin file and the DVs the manifests place in it.

A Puffin file is read once for all its DVs: a HEAD for its size, then the whole file when
it is small (`WHOLE_FILE_BYTES`), else its first bytes, the 12-byte trailer, the footer
(`dvtool.deletion_vectors.puffin`) and each blob by range. Each DV's blob is then read at
the manifest's `content_offset` / `content_size_in_bytes` (where Iceberg's readers read
it) and checked against the footer's entry for it, the framing of the blob (length prefix,
magic `D1 D3 39 64`, CRC-32; the codec of `dvtool.deletion_vectors.codec`), its `cardinality`
property, the manifest's `record_count` and the row count of the data file it deletes from.

A file that is a bare `deletion-vector-v1` blob (its bytes 4..8 are the DV magic, and there
is no `PFA1` magic) is what DuckDB's Iceberg extension wrote before duckdb-iceberg#1095
(`content_offset` 0, the file exactly one blob): Iceberg Java, pyiceberg and newer DuckDB
refuse it. It is reported as `dv-not-in-puffin`, and its blob is still checked where the
manifest points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from io import BytesIO
from typing import TYPE_CHECKING, Any

from dvtool.deletion_vectors.codec import ENTRY_OVERHEAD, decode_dv_entry
from dvtool.deletion_vectors.puffin import (
    CARDINALITY,
    DV_BLOB_TYPE,
    FOOTER_TRAILER,
    MAGIC,
    REFERENCED_DATA_FILE,
    BlobMetadata,
    PuffinError,
    PuffinFooter,
    footer_length,
    parse_footer,
)
from dvtool.errors import (
    DeletionVectorError,
    DVChecksumError,
    DVEncodingError,
    DVMagicError,
    DVRangeError,
    DVSizeMismatchError,
)
from dvtool.iceberg.delete_index import DeleteFileEntry
from dvtool.iceberg.verify_files import (
    READ_ERRORS,
    FileRef,
    IcebergProblem,
    describe,
    read_at,
    stat,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyroaring import BitMap64

DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
WHOLE_FILE_BYTES = 8 << 20
"""Puffin files up to this size are read in one request (one GET on an object store, not
one per DV); larger ones blob by blob, so memory stays bounded."""

# The codec's errors, by what they found wrong in the blob's framing.
_CODEC_KINDS: tuple[tuple[type[DeletionVectorError], str], ...] = (
    (DVSizeMismatchError, "dv-length"),
    (DVRangeError, "dv-range"),
    (DVChecksumError, "dv-checksum"),
    (DVMagicError, "dv-magic"),
    (DVEncodingError, "dv-bitmap"),
)


def _problem(kind: str, dv: DeleteFileEntry, message: str) -> IcebergProblem:
    return IcebergProblem(kind, message, dv.referenced_data_file, dv.path)


def _where(dv: DeleteFileEntry) -> str:
    return (
        f"the deletion vector of {dv.referenced_data_file} at offset {dv.content_offset} "
        f"of {dv.path}"
    )


def check_puffin_file(
    io: FileIO, path: str, dvs: Sequence[DeleteFileEntry], records: Mapping[str, int]
) -> list[IcebergProblem]:
    """Check the Puffin file `path` and the DVs `dvs` the manifests place in it;
    `records` maps each live data file to its `record_count`."""
    ref = FileRef("delete-file", path, dvs[0].file_size_in_bytes, None, path)
    input_file, problems = stat(io, ref)
    if input_file is None:
        return [_problem(p.kind, dv, p.message) for p in problems for dv in dvs]
    try:
        with input_file.open(seekable=True) as opened:
            size = len(input_file)
            stream = _whole(opened) if size <= WHOLE_FILE_BYTES else opened
            container, footer = _container(stream, size, path, dvs)
            problems += container
            if container and footer is None and container[0].kind == "puffin-unreadable":
                return problems
            for dv in dvs:
                problems += _check_dv(stream, size, footer, dv, records)
    except READ_ERRORS as e:
        problems.append(IcebergProblem("puffin-unreadable", f"{path}: {describe(e)}", None, path))
    return problems


def _whole(stream: Any) -> BytesIO:
    """A small Puffin file read in one request: its DVs are then sliced from memory."""
    return BytesIO(stream.read())


def _container(
    stream: Any, size: int, path: str, dvs: Sequence[DeleteFileEntry]
) -> tuple[list[IcebergProblem], PuffinFooter | None]:
    """The Puffin framing: leading magic, trailer and footer; the footer if it parses."""
    head = read_at(stream, 0, min(8, size))
    trailer = read_at(stream, max(0, size - FOOTER_TRAILER), FOOTER_TRAILER)
    if trailer[-4:] != MAGIC and head[4:8] == DV_MAGIC and head[:4] != MAGIC:
        return [_bare_blob(dv, size) for dv in dvs], None
    try:
        footer_bytes = read_at(stream, size - footer_length(trailer, size), size)
        footer = parse_footer(footer_bytes)
    except PuffinError as e:
        return [
            IcebergProblem("puffin-unreadable", f"Puffin file {path}: {e.message}", None, path)
        ], None
    if head[:4] != MAGIC:
        message = f"Puffin file {path} does not start with the magic PFA1 (found {head[:4].hex()})"
        return [IcebergProblem("puffin-unreadable", message, None, path)], footer
    return [], footer


def _bare_blob(dv: DeleteFileEntry, size: int) -> IcebergProblem:
    message = (
        f"{dv.path} is a bare {DV_BLOB_TYPE} blob ({size} bytes: length, magic D1 D3 39 64, "
        "bitmap, CRC) with no Puffin container (no PFA1 magic, no footer), as DuckDB's Iceberg "
        "extension wrote DVs before duckdb-iceberg#1095; Iceberg Java, pyiceberg and newer "
        f"DuckDB cannot read it. It holds the deletion vector of {dv.referenced_data_file}"
    )
    return _problem("dv-not-in-puffin", dv, message)


def _check_dv(
    stream: Any,
    size: int,
    footer: PuffinFooter | None,
    dv: DeleteFileEntry,
    records: Mapping[str, int],
) -> list[IcebergProblem]:
    offset, length = dv.content_offset, dv.content_size_in_bytes
    if offset is None or length is None or dv.referenced_data_file is None:
        missing = [
            name
            for name, value in (
                ("referenced_data_file", dv.referenced_data_file),
                ("content_offset", offset),
                ("content_size_in_bytes", length),
            )
            if value is None
        ]
        message = (
            f"a deletion vector's manifest entry for {dv.path} has no {', '.join(missing)}, "
            "which the spec requires of every DV"
        )
        return [_problem("dv-manifest-fields", dv, message)]
    problems: list[IcebergProblem] = []
    meta = None
    if footer is not None:
        meta, footer_problems = _footer_entry(footer, dv)
        problems += footer_problems
    if offset < 0 or length < ENTRY_OVERHEAD or offset + length > size:
        message = (
            f"{_where(dv)}: content_offset {offset} and content_size_in_bytes {length} lie "
            f"outside the {size}-byte file"
        )
        return [*problems, _problem("dv-range", dv, message)]
    rows, decode_problems = _decode(read_at(stream, offset, length), dv)
    if rows is None:
        return problems + decode_problems
    return problems + _counts(rows, meta, dv, records.get(dv.referenced_data_file))


def _footer_entry(
    footer: PuffinFooter, dv: DeleteFileEntry
) -> tuple[BlobMetadata | None, list[IcebergProblem]]:
    """The footer's blob at the DV's offset, and how it disagrees with the manifest."""
    found = [b for b in footer.blobs if b.offset == dv.content_offset]
    if not found:
        offsets = sorted(b.offset for b in footer.blobs)
        message = (
            f"{_where(dv)}: the Puffin footer has no blob at content_offset "
            f"{dv.content_offset} (its blobs start at {offsets})"
        )
        return None, [_problem("dv-blob-offset", dv, message)]
    meta = found[0]
    problems = []
    if meta.length != dv.content_size_in_bytes:
        message = (
            f"{_where(dv)}: the manifest's content_size_in_bytes is {dv.content_size_in_bytes}, "
            f"the Puffin footer's blob length {meta.length}"
        )
        problems.append(_problem("dv-blob-length", dv, message))
    if meta.type != DV_BLOB_TYPE or meta.compression_codec is not None:
        message = (
            f"{_where(dv)}: the blob is of type {meta.type!r}"
            + (f", compressed with {meta.compression_codec}" if meta.compression_codec else "")
            + f"; a DV is an uncompressed {DV_BLOB_TYPE} blob"
        )
        problems.append(_problem("dv-blob-type", dv, message))
    named = meta.properties.get(REFERENCED_DATA_FILE)
    if named != dv.referenced_data_file:
        message = (
            f"{_where(dv)}: the blob's {REFERENCED_DATA_FILE} property is {named!r}, the "
            f"manifest's referenced_data_file {dv.referenced_data_file!r}"
        )
        problems.append(_problem("dv-referenced-file", dv, message))
    return meta, problems


def _decode(blob: bytes, dv: DeleteFileEntry) -> tuple[BitMap64 | None, list[IcebergProblem]]:
    """The blob's rows, or the problem with its framing."""
    try:
        return decode_dv_entry(blob, len(blob) - ENTRY_OVERHEAD), []
    except DeletionVectorError as e:
        kind = next((k for cls, k in _CODEC_KINDS if isinstance(e, cls)), "dv-bitmap")
        return None, [_problem(kind, dv, f"{_where(dv)}: {e.message}")]


def _counts(
    rows: BitMap64, meta: BlobMetadata | None, dv: DeleteFileEntry, records: int | None
) -> list[IcebergProblem]:
    """The bitmap's cardinality against the blob's property and the manifest's
    record_count, and its largest position against the data file's record_count."""
    problems = []
    cardinality = None if meta is None else meta.properties.get(CARDINALITY)
    if cardinality is not None and cardinality.strip() != str(len(rows)):
        message = (
            f"{_where(dv)}: the blob's cardinality property is {cardinality}, the bitmap "
            f"holds {len(rows)} positions"
        )
        problems.append(_problem("dv-cardinality", dv, message))
    if dv.record_count != len(rows):
        message = (
            f"{_where(dv)}: the manifest's record_count is {dv.record_count}, the bitmap "
            f"holds {len(rows)} positions"
        )
        problems.append(_problem("dv-cardinality", dv, message))
    if records is not None and rows and rows.max() >= records:
        message = (
            f"{_where(dv)} deletes position {rows.max()}, beyond the data file's "
            f"{records} rows (its manifest record_count)"
        )
        problems.append(_problem("dv-row-index", dv, message))
    return problems
