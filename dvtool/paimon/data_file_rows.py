"""How many rows a Paimon data file holds, by its own metadata, without reading its rows.

Paimon writes data files as Parquet, ORC (`file.format`'s default) or Avro, named by their
format's extension:

- Parquet: the footer's row count (`pyarrow.parquet`);
- ORC: the file footer's row count (`pyarrow.orc`, which reads the file's tail only; not
  counted where pyarrow is built without ORC, as on Windows);
- Avro: the sum of the object counts of the container file's blocks. Each block starts
  with its object count and byte size (zigzag varints) and ends with the file's 16-byte
  sync marker, so the blocks are walked by seeking over their data, never decoding a row;
  a sync marker that is not the header's (a truncated or damaged file) is an error.

Other formats (`csv`, `json`, `lance`...) are not counted (None). Errors: what reading
raises (OSError, pyarrow.ArrowException, `dvtool.errors`), and ValueError for an Avro file
whose framing does not hold; `verify` reports each as an unreadable data file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dvtool.paimon.avro_files import AVRO_MAGIC

if TYPE_CHECKING:
    from dvtool.storage.table_storage import ReadableFile, Storage

COUNTED_FORMATS = ("parquet", "orc", "avro")
_SYNC_SIZE = 16


def file_format_of(file_name: str) -> str | None:
    """The format a data file's name says (`parquet`, `orc`, `avro`), None for another."""
    suffix = file_name.rpartition(".")[2].lower()
    return suffix if suffix in COUNTED_FORMATS else None


def data_file_rows(storage: Storage, location: str, file_name: str) -> int | None:
    """The rows the data file's own metadata counts; None for a format not counted."""
    kind = file_format_of(file_name)
    if kind is None:
        return None
    with storage.open_parquet(location) as stream:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(stream).metadata.num_rows)
        if kind == "orc":
            try:
                import pyarrow.orc as orc
            except ImportError:  # pyarrow builds without ORC (Windows wheels)
                return None
            return int(orc.ORCFile(stream).nrows)
        return avro_record_count(stream)


def avro_record_count(stream: ReadableFile) -> int:
    """The records of an Avro container file: its blocks' object counts, summed."""
    if stream.read(4) != AVRO_MAGIC:
        raise ValueError(f"not an Avro file: it does not start with {AVRO_MAGIC!r}")
    _skip_metadata(stream)
    sync = stream.read(_SYNC_SIZE)
    if len(sync) != _SYNC_SIZE:
        raise ValueError("the Avro header ends before its sync marker")
    total = 0
    block = 0
    while first := stream.read(1):
        count = _read_long(stream, first)
        size = _read_long(stream)
        if count < 0 or size < 0:
            raise ValueError(f"Avro block {block} has a negative count or size")
        stream.seek(size, 1)
        if stream.read(_SYNC_SIZE) != sync:
            raise ValueError(
                f"Avro block {block} ({count} records, {size} bytes) does not end with the "
                "file's sync marker: the file is truncated or damaged"
            )
        total += count
        block += 1
    return total


def _skip_metadata(stream: ReadableFile) -> None:
    """Skip the header's metadata map (blocks of key/value byte strings)."""
    while (entries := _read_long(stream)) != 0:
        if entries < 0:
            entries = -entries
            _read_long(stream)  # the block's byte size
        for _ in range(2 * entries):
            length = _read_long(stream)
            if length < 0 or len(stream.read(length)) != length:
                raise ValueError("the Avro header's metadata is truncated")


def _read_long(stream: ReadableFile, first: bytes = b"") -> int:
    """One zigzag varint long."""
    shift = 0
    value = 0
    byte = first or stream.read(1)
    while True:
        if not byte:
            raise ValueError("an Avro file ends inside a number")
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (value >> 1) ^ -(value & 1)
        shift += 7
        if shift > 63:
            raise ValueError("an Avro number is longer than 10 bytes")
        byte = stream.read(1)
