"""Iceberg tables damaged as real faults damage them, one per `--verify` problem kind.

Every damage starts from a writable copy of a table Iceberg's Spark runtime wrote
(tests/reference/iceberg_tables.py: `v3_flat` with deletion vectors in two Puffin files,
`v2_flat` with Parquet position delete files, `v2_equality` with an equality delete file;
`copy_table` makes the copy) and does to it what a fault does:

- to bytes in storage (bit rot, an interrupted upload, a lost object): a flipped CRC byte,
  a file cut in half, a data file deleted, a Puffin file's magic or a blob's type
  overwritten, a Parquet footer zeroed;
- to the metadata a buggy writer commits: a manifest rewritten (pyiceberg's own Avro
  reader and writer, `edit_manifest`, keeping the file's schema and metadata) with a wrong
  `content_offset`, `content_size_in_bytes`, `record_count`, `file_size_in_bytes`,
  `referenced_data_file` or `equality_ids`, an entry listed twice or a data file removed
  without its DV; a DV blob re-framed with a wrong length prefix or magic (CRC recomputed,
  as its writer would have); a position delete file rewritten out of order or past the end
  of its data file (its manifest size updated, as its writer would have);
- through Iceberg's Java API in the reference engine (`session.python`), as a writer that
  skips the spec's rules commits: a second DV for a data file that has one (`RowDelta` with
  a Puffin file built by dvtool's codec), an equality delete file on a field id the schema
  does not have;
- as early DuckDB builds wrote DVs: a bare `deletion-vector-v1` blob in its own file with
  no Puffin container, the manifest pointing at offset 0 (duckdb-iceberg#1095).

`DAMAGES` maps each damage to the copy it starts from, the function that applies it and the
problem kinds `verify` must report (some faults show twice: a truncated file is also the
wrong size). A damage returns the file it damaged, which the problems must name.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dvtool.deletion_vectors.puffin import build_puffin, dv_blob_metadata, encode_dv_blob
from tests.iceberg.table_edits import (
    DATA,
    DELETED,
    EQUALITY,
    POSITION,
    Copy,
    Entry,
    edit_manifest,
    local,
    patch,
    truncate,
)
from tests.reference.dv_files import iceberg_dv_blob
from tests.reference.iceberg_tables import COMMIT_EQUALITY_DELETES


def dv(table: Copy, n: int = 0) -> Entry:
    """The `n`th live DV entry of the copy."""
    return table.entries(POSITION, "PUFFIN")[n][1]


def reframe(table: Copy, change: Callable[[bytearray], None]) -> str:
    """Change the first DV's blob (length, magic, bitmap) and recompute its CRC."""
    entry = dv(table)
    offset, length = entry["content_offset"], entry["content_size_in_bytes"]
    blob = bytearray(local(entry["file_path"]).read_bytes()[offset : offset + length])
    change(blob)
    blob[-4:] = struct.pack(">I", zlib.crc32(bytes(blob[4:-4])))
    patch(entry["file_path"], offset, bytes(blob))
    return str(entry["file_path"])


# -- the damages ------------------------------------------------------------------------------


def flip_crc(table: Copy) -> str:
    """A bit-rotted byte: the last byte (the CRC's) of the first DV's blob flipped."""
    entry = dv(table)
    end = entry["content_offset"] + entry["content_size_in_bytes"] - 1
    byte = local(entry["file_path"]).read_bytes()[end]
    patch(entry["file_path"], end, bytes([byte ^ 0xFF]))
    return str(entry["file_path"])


def wrong_dv_magic(table: Copy) -> str:
    """The first DV blob's magic written as `D1 D3 39 65` (CRC recomputed)."""
    return reframe(table, lambda blob: blob.__setitem__(slice(4, 8), b"\xd1\xd3\x39\x65"))


def wrong_length_prefix(table: Copy) -> str:
    """The first DV blob's length prefix one more than its magic and bitmap (CRC
    recomputed)."""

    def change(blob: bytearray) -> None:
        blob[:4] = struct.pack(">I", len(blob) - 7)

    return reframe(table, change)


def garbled_bitmap(table: Copy) -> str:
    """The portable bitmap claims 2**40 buckets (its first 8 bytes, after the magic)."""
    return reframe(table, lambda blob: blob.__setitem__(slice(8, 16), struct.pack("<Q", 2**40)))


def truncate_puffin(table: Copy) -> str:
    """The Puffin file of the first DV cut in half (no footer left)."""
    path = str(dv(table)["file_path"])
    truncate(path)
    return path


def wrong_puffin_magic(table: Copy) -> str:
    """The Puffin file of the first DV starts with `PFA2` instead of `PFA1`."""
    path = str(dv(table)["file_path"])
    patch(path, 0, b"PFA2")
    return path


def wrong_blob_type(table: Copy) -> str:
    """The footer names the blobs `deletion-vector-v2` (same length: offsets stay)."""
    path = str(dv(table)["file_path"])
    data = local(path).read_bytes()
    local(path).write_bytes(data.replace(b'"deletion-vector-v1"', b'"deletion-vector-v2"'))
    return path


def manifest_field(field: str, change: Callable[[Any], Any]) -> Callable[[Copy], str]:
    """A damage that rewrites `field` of the first DV's manifest entry."""

    def damage(table: Copy) -> str:
        entry = table.edit(POSITION, "PUFFIN", lambda e: e.__setitem__(field, change(e[field])))
        return str(entry["file_path"])

    return damage


def dv_positions(entry: Entry) -> list[int]:
    """The positions of a DV, decoded by the spec reader of tests/reference/dv_files.py."""
    offset, length = entry["content_offset"], entry["content_size_in_bytes"]
    blob = local(entry["file_path"]).read_bytes()[offset : offset + length]
    return iceberg_dv_blob(blob).positions


def dv_of_other_file(table: Copy) -> str:
    """A DV's entry names a live data file that has no DV and holds all its positions."""
    dvs = table.entries(POSITION, "PUFFIN")
    with_dvs = {e["referenced_data_file"] for _, e in dvs}
    other = next(e for _, e in table.entries(DATA) if e["file_path"] not in with_dvs)
    manifest, entry = next(me for me in dvs if max(dv_positions(me[1])) < other["record_count"])
    key = entry["file_path"], entry["content_offset"]

    def edit(entries: list[Entry]) -> list[Entry]:
        for e in entries:
            if (e["file_path"], e["content_offset"]) == key:
                e["referenced_data_file"] = other["file_path"]
        return entries

    edit_manifest(manifest, edit)
    return str(entry["file_path"])


def shrink_data_file_count(table: Copy) -> str:
    """The data file of the first DV claims fewer rows than the DV's largest position."""
    target = dv(table)["referenced_data_file"]
    manifest = next(m for m, e in table.entries(DATA) if e["file_path"] == target)

    def edit(entries: list[Entry]) -> list[Entry]:
        for entry in entries:
            if entry["file_path"] == target:
                entry["record_count"] = 1
        return entries

    edit_manifest(manifest, edit)
    return str(target)


def remove_data_file_keep_dv(table: Copy) -> str:
    """The data file of the first DV is removed (status DELETED), its DV stays live."""
    target = dv(table)["referenced_data_file"]
    manifest = next(m for m, e in table.entries(DATA) if e["file_path"] == target)

    def edit(entries: list[Entry]) -> list[Entry]:
        for entry in entries:
            if entry["file_path"] == target:
                entry["status"] = DELETED
        return entries

    edit_manifest(manifest, edit)
    return str(dv(table)["file_path"])


def duckdb_bare_blob(table: Copy) -> str:
    """The first DV moved to a file of its own holding only the blob's bytes, the manifest
    pointing at offset 0 with the file's size (what DuckDB wrote before #1095)."""
    entry = dv(table)
    offset, length = entry["content_offset"], entry["content_size_in_bytes"]
    blob = local(entry["file_path"]).read_bytes()[offset : offset + length]
    bare = local(entry["file_path"]).with_name("duckdb-bare-dv.puffin")
    bare.write_bytes(blob)

    def change(e: Entry) -> None:
        e["file_path"], e["content_offset"], e["file_size_in_bytes"] = str(bare), 0, len(blob)

    table.edit(POSITION, "PUFFIN", change)
    return str(bare)


COMMIT_DV = """
I = jvm.org.apache.iceberg
table = I.hadoop.HadoopTables(spark.sparkContext._jsc.hadoopConfiguration()).load(args["location"])
b = I.FileMetadata.deleteFileBuilder(table.spec()).ofPositionDeletes().withFormat("puffin")
b = b.withPath(args["path"]).withFileSizeInBytes(args["size"]).withRecordCount(args["count"])
b = b.withReferencedDataFile(args["data_file"]).withContentOffset(args["offset"])
b = b.withContentSizeInBytes(args["length"])
delta = table.newRowDelta().addDeletes(b.build())
# Validating from the current snapshot, as a writer that planned on it and missed the DV
# there: Iceberg only looks for DVs added since (`validateAddedDVs`).
delta.validateFromSnapshot(table.currentSnapshot().snapshotId()).commit()
result = table.currentSnapshot().snapshotId()
"""


def second_dv(table: Copy) -> str:
    """A second DV (deleting row 0) for the data file of the first DV, committed with
    Iceberg's `RowDelta` by a writer that did not merge the DV already there."""
    target = str(dv(table)["referenced_data_file"])
    rows = BitMap64([0])
    data, (meta,) = build_puffin([(dv_blob_metadata(rows, target), encode_dv_blob(rows))])
    path = table.root / "data" / "second-dv.puffin"
    path.write_bytes(data)
    table.session.python(
        COMMIT_DV,
        location=str(table.root),
        path=str(path),
        size=len(data),
        count=len(rows),
        data_file=target,
        offset=meta.offset,
        length=meta.length,
    )
    return str(path)


def delete_file(content: int, file_format: str | None = None) -> Callable[[Copy], str]:
    """A damage that deletes the first live file of the kind (a lost object)."""

    def damage(table: Copy) -> str:
        path = str(table.entries(content, file_format)[0][1]["file_path"])
        local(path).unlink()
        return path

    return damage


def truncate_file(content: int) -> Callable[[Copy], str]:
    """A damage that cuts the first live file of the kind in half."""

    def damage(table: Copy) -> str:
        path = str(table.entries(content)[0][1]["file_path"])
        truncate(path)
        return path

    return damage


def zero_parquet_footer(table: Copy) -> str:
    """The last 8 bytes of a data file (footer length and `PAR1`) zeroed: same size."""
    path = str(table.entries(DATA)[0][1]["file_path"])
    patch(path, local(path).stat().st_size - 8, bytes(8))
    return path


def entry_field(content: int, field: str, change: Callable[[Any], Any]) -> Callable[[Copy], str]:
    """A damage that rewrites `field` of the first live entry of the kind in its manifest."""

    def damage(table: Copy) -> str:
        entry = table.edit(content, None, lambda e: e.__setitem__(field, change(e[field])))
        return str(entry["file_path"])

    return damage


def list_data_file_twice(table: Copy) -> str:
    """The first data file's entry written twice in its manifest."""
    manifest, target = table.entries(DATA)[0]

    def edit(entries: list[Entry]) -> list[Entry]:
        twin = next(e for e in entries if e["file_path"] == target["file_path"]).copy()
        return [*entries, twin]

    edit_manifest(manifest, edit)
    return str(target["file_path"])


def rewrite_position_deletes(table: Copy, change: Callable[[pa.Table], pa.Table]) -> str:
    """Rewrite the largest position delete file with `change(rows)`; its manifest entry
    takes the new size and count, as the writer of such a file would have recorded."""
    _, target = max(table.entries(POSITION), key=lambda me: me[1]["record_count"])
    path = local(target["file_path"])
    rows = pq.read_table(path)
    rows = change(rows)
    pq.write_table(rows, path)

    def update(e: Entry) -> None:
        e["file_size_in_bytes"], e["record_count"] = path.stat().st_size, rows.num_rows

    key = target["file_path"]
    manifest = next(m for m, e in table.entries(POSITION) if e["file_path"] == key)

    def edit(entries: list[Entry]) -> list[Entry]:
        for entry in entries:
            if entry["file_path"] == key:
                update(entry)
        return entries

    edit_manifest(manifest, edit)
    return str(key)


def unsorted_position_deletes(table: Copy) -> str:
    """A position delete file rewritten in reverse (file_path, pos) order."""
    return rewrite_position_deletes(table, lambda rows: rows.take(list(range(rows.num_rows))[::-1]))


def position_past_the_end(table: Copy) -> str:
    """A position delete file whose last position is 10000, past its data file's rows."""

    def change(rows: pa.Table) -> pa.Table:
        pos = rows.column("pos").to_pylist()
        pos[-1] = 10_000
        return rows.set_column(1, rows.schema.field("pos"), pa.array(pos, pa.int64()))

    return rewrite_position_deletes(table, change)


def other_referenced_file(table: Copy) -> str:
    """A position delete file's entry names another live data file as its only target."""
    _, target = table.entries(POSITION)[0]
    rows = pq.read_table(local(target["file_path"]), columns=["file_path"])
    named = set(rows.column("file_path").to_pylist())
    other = next(e["file_path"] for _, e in table.entries(DATA) if e["file_path"] not in named)
    return entry_field(POSITION, "referenced_data_file", lambda _: other)(table)


def truncate_delete_manifest(table: Copy) -> str:
    """The current snapshot's delete manifest cut in half."""
    table_ = table.table()
    manifests = table_.current_snapshot().manifests(table_.io)
    path = next(m.manifest_path for m in manifests if m.content.value == 1)
    truncate(path)
    return path


def truncate_manifest_list(table: Copy) -> str:
    """The current snapshot's manifest list cut in half."""
    path = str(table.table().current_snapshot().manifest_list)
    truncate(path)
    return path


def equality_on_unknown_field(table: Copy) -> str:
    """An equality delete file on field id 99 (a column `ghost` the table never had),
    committed with Iceberg's `RowDelta`, which does not check the ids against the schema."""
    field = pa.field("ghost", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"99"})
    path = table.root / "data" / "eq-deletes-ghost.parquet"
    pq.write_table(pa.table({"ghost": [1, 2]}, schema=pa.schema([field])), path)
    table.session.python(
        COMMIT_EQUALITY_DELETES,
        location=str(table.root),
        field_ids=[99],
        path=str(path),
        size=path.stat().st_size,
        count=2,
    )
    return str(path)


@dataclass(frozen=True)
class Damage:
    """A damage: the fixture table it starts from, what it does, the kinds it shows."""

    base: str
    apply: Callable[[Copy], str]
    kinds: frozenset[str]


def _d(base: str, apply: Callable[[Copy], str], *kinds: str) -> Damage:
    return Damage(base, apply, frozenset(kinds))


DAMAGES: dict[str, Damage] = {
    # deletion vectors and their Puffin files (v3_flat)
    "dv-checksum": _d("v3_flat", flip_crc, "dv-checksum"),
    "dv-magic": _d("v3_flat", wrong_dv_magic, "dv-magic"),
    "dv-length": _d("v3_flat", wrong_length_prefix, "dv-length"),
    "dv-bitmap": _d("v3_flat", garbled_bitmap, "dv-bitmap"),
    "puffin-truncated": _d("v3_flat", truncate_puffin, "puffin-unreadable", "delete-file-size"),
    "puffin-magic": _d("v3_flat", wrong_puffin_magic, "puffin-unreadable"),
    "dv-blob-type": _d("v3_flat", wrong_blob_type, "dv-blob-type"),
    "dv-blob-offset": _d(
        "v3_flat", manifest_field("content_offset", lambda o: o + 1), "dv-blob-offset", "dv-length"
    ),
    "dv-blob-length": _d(
        "v3_flat",
        manifest_field("content_size_in_bytes", lambda n: n + 1),
        "dv-blob-length",
        "dv-length",
    ),
    "dv-range": _d(
        "v3_flat", manifest_field("content_offset", lambda _: 1 << 20), "dv-blob-offset", "dv-range"
    ),
    "dv-manifest-fields": _d(
        "v3_flat", manifest_field("content_offset", lambda _: None), "dv-manifest-fields"
    ),
    "dv-cardinality": _d(
        "v3_flat", manifest_field("record_count", lambda n: n + 1), "dv-cardinality"
    ),
    "dv-referenced-file": _d("v3_flat", dv_of_other_file, "dv-referenced-file"),
    "dv-row-index": _d("v3_flat", shrink_data_file_count, "dv-row-index", "data-file-record-count"),
    "dv-dangling": _d("v3_flat", remove_data_file_keep_dv, "dv-dangling"),
    "dv-duplicate": _d("v3_flat", second_dv, "dv-duplicate"),
    "dv-not-in-puffin": _d("v3_flat", duckdb_bare_blob, "dv-not-in-puffin"),
    "puffin-missing": _d("v3_flat", delete_file(POSITION, "PUFFIN"), "delete-file-missing"),
    # data files, delete files and manifests (v2_flat)
    "data-file-missing": _d("v2_flat", delete_file(DATA), "data-file-missing"),
    "data-file-size": _d(
        "v2_flat", entry_field(DATA, "file_size_in_bytes", lambda n: n + 1), "data-file-size"
    ),
    "data-file-record-count": _d(
        "v2_flat", entry_field(DATA, "record_count", lambda n: n + 1), "data-file-record-count"
    ),
    "data-file-unreadable": _d("v2_flat", zero_parquet_footer, "data-file-unreadable"),
    "file-duplicate": _d("v2_flat", list_data_file_twice, "file-duplicate"),
    "delete-file-missing": _d("v2_flat", delete_file(POSITION), "delete-file-missing"),
    "delete-file-size": _d(
        "v2_flat",
        entry_field(POSITION, "file_size_in_bytes", lambda n: n + 1),
        "delete-file-size",
    ),
    "delete-file-record-count": _d(
        "v2_flat",
        entry_field(POSITION, "record_count", lambda n: n + 1),
        "delete-file-record-count",
    ),
    "delete-file-unreadable": _d(
        "v2_flat", truncate_file(POSITION), "delete-file-unreadable", "delete-file-size"
    ),
    "position-delete-unsorted": _d(
        "v2_flat", unsorted_position_deletes, "position-delete-unsorted"
    ),
    "position-delete-row-index": _d("v2_flat", position_past_the_end, "position-delete-row-index"),
    "position-delete-referenced-file": _d(
        "v2_flat", other_referenced_file, "position-delete-referenced-file"
    ),
    "manifest-unreadable": _d("v2_flat", truncate_delete_manifest, "manifest-unreadable"),
    "manifest-list-unreadable": _d("v2_flat", truncate_manifest_list, "manifest-list-unreadable"),
    # equality deletes (v2_equality)
    "equality-field-unknown": _d(
        "v2_equality", equality_on_unknown_field, "equality-field-unknown"
    ),
    "equality-delete-columns": _d(
        "v2_equality",
        entry_field(EQUALITY, "equality_ids", lambda _: [2]),
        "equality-delete-columns",
    ),
    "equality-ids-missing": _d(
        "v2_equality", entry_field(EQUALITY, "equality_ids", lambda _: None), "equality-ids-missing"
    ),
}
