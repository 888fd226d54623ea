"""Writing Iceberg delete files: v2 position delete files and v3 deletion vectors.

- **Position delete files** (spec.md "Position Delete Files"): Parquet with the reserved
  columns `file_path` (field id 2147483546) and `pos` (2147483545), rows sorted by
  `(file_path, pos)`, one file per partition per commit as Iceberg Spark writes them. The
  manifest entry carries what readers prune with: `file_path` and `pos` bounds (full paths,
  never truncated: a reader compares data file paths with them), value and null counts, and
  `referenced_data_file` when the file holds deletes of one data file only.
- **Deletion vectors** (spec.md "Deletion Vectors", puffin-spec.md `deletion-vector-v1`):
  one Puffin file per commit with one blob per data file; each blob's manifest entry is a
  position delete entry in Puffin format whose `referenced_data_file`, `content_offset` and
  `content_size_in_bytes` name the blob, and whose `record_count` is the DV's cardinality.

Files are written with put-if-absent semantics through the table's FileIO (`create()`
refuses an existing file) under the table's data location (`write.data.path`, else
`<location>/data`), named as Iceberg Java's `OutputFileFactory` names them. The caller
records every location written, to delete them only if the commit provably did not land.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyroaring import BitMap64

from dvtool.deletion_vectors.puffin import build_puffin, dv_blob_metadata, encode_dv_blob

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile

FILE_PATH_ID = 2147483546
POS_ID = 2147483545
DATA_PATH_PROPERTY = "write.data.path"
DELETE_CODEC_PROPERTY = "write.delete.parquet.compression-codec"
CODEC_PROPERTY = "write.parquet.compression-codec"
DEFAULT_CODEC = "zstd"  # Iceberg Java's default since 1.4
CREATED_BY = "dvtool"
_ROW_GROUP_ROWS = 1 << 20


@dataclass(frozen=True)
class DataFileDeletes:
    """The rows to delete from one data file: its path, partition (pyiceberg `Record` as
    its manifest entry holds it), spec id, and the positions."""

    path: str
    spec_id: int
    partition: Any
    positions: BitMap64


@dataclass(frozen=True)
class FileNamer:
    """Names new files as Iceberg Java's `OutputFileFactory`: one operation id per commit,
    a counter per file (`used`: the locations named so far)."""

    data_location: str
    operation_id: str
    used: list[str] = field(default_factory=list)

    @classmethod
    def for_table(cls, location: str, properties: Mapping[str, str]) -> FileNamer:
        data = properties.get(DATA_PATH_PROPERTY) or f"{location.rstrip('/')}/data"
        return cls(data.rstrip("/"), str(uuid.uuid4()))

    def location(self, count: int, partition_path: str, suffix: str) -> str:
        folder = f"{self.data_location}/{partition_path}" if partition_path else self.data_location
        return f"{folder}/00000-{count}-{self.operation_id}-{count:05d}{suffix}"


def parquet_codec(properties: Mapping[str, str]) -> str:
    """The Parquet codec delete files are written with (Iceberg's table properties)."""
    codec = properties.get(DELETE_CODEC_PROPERTY) or properties.get(CODEC_PROPERTY) or DEFAULT_CODEC
    return "none" if codec.lower() == "uncompressed" else codec.lower()


def _schema(dictionary: bool = False) -> pa.Schema:
    """The reserved columns; `dictionary`: `file_path` as the writer takes it (a dictionary
    of the data file paths: Parquet stores it as a plain string column, dictionary-encoded)."""

    def field(name: str, t: pa.DataType, field_id: int) -> pa.Field:
        return pa.field(name, t, nullable=False, metadata={b"PARQUET:field_id": str(field_id)})

    path_type = pa.dictionary(pa.int32(), pa.string()) if dictionary else pa.string()
    return pa.schema(
        [field("file_path", path_type, FILE_PATH_ID), field("pos", pa.int64(), POS_ID)]
    )


def encode_position_deletes(deletes: Sequence[DataFileDeletes], codec: str) -> bytes:
    """A position delete file's bytes: `(file_path, pos)` sorted, a data file at a time, in
    row groups of at most `_ROW_GROUP_ROWS` (memory stays bounded by one data file's
    positions)."""
    import numpy as np
    import pyarrow.parquet as pq

    from dvtool.deletion_vectors.codec import bitmap_rows

    schema = _schema(dictionary=True)
    sink = pa.BufferOutputStream()
    options = {"compression": codec, "write_statistics": True, "store_schema": False}
    with pq.ParquetWriter(sink, schema, **options) as writer:
        for item in sorted(deletes, key=lambda d: d.path):
            rows = bitmap_rows(item.positions).astype(np.int64)
            name = pa.array([item.path], pa.string())
            for start in range(0, len(rows), _ROW_GROUP_ROWS):
                chunk = rows[start : start + _ROW_GROUP_ROWS]
                paths = pa.DictionaryArray.from_arrays(np.zeros(len(chunk), np.int32), name)
                writer.write_table(
                    pa.Table.from_arrays([paths, pa.array(chunk, pa.int64())], schema=schema)
                )
    return bytes(sink.getvalue())


def write_position_deletes(
    io: FileIO, location: str, deletes: Sequence[DataFileDeletes], codec: str
) -> DataFile:
    """Write one position delete file (the deletes of one partition) and its manifest
    record. `location` must not exist."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.types import LongType, StringType

    data = encode_position_deletes(deletes, codec)
    _create(io, location, data)
    sizes = _column_sizes(data)
    paths = sorted(d.path for d in deletes)
    count = sum(len(d.positions) for d in deletes)
    lowest = min(int(d.positions.min()) for d in deletes)
    highest = max(int(d.positions.max()) for d in deletes)
    first = deletes[0]
    return _delete_record(
        content_path=location,
        file_format="PARQUET",
        spec_id=first.spec_id,
        partition=first.partition,
        record_count=count,
        file_size=len(data),
        column_sizes=sizes,
        value_counts={FILE_PATH_ID: count, POS_ID: count},
        nan_value_counts={},
        null_value_counts={FILE_PATH_ID: 0, POS_ID: 0},
        lower_bounds={
            FILE_PATH_ID: to_bytes(StringType(), paths[0]),
            POS_ID: to_bytes(LongType(), lowest),
        },
        upper_bounds={
            FILE_PATH_ID: to_bytes(StringType(), paths[-1]),
            POS_ID: to_bytes(LongType(), highest),
        },
        referenced_data_file=paths[0] if len(paths) == 1 else None,
    )


def write_deletion_vectors(
    io: FileIO, location: str, deletes: Sequence[DataFileDeletes]
) -> list[DataFile]:
    """Write one Puffin file with a `deletion-vector-v1` blob per data file and return a
    manifest record per blob. `location` must not exist."""
    ordered = sorted(deletes, key=lambda d: d.path)
    blobs = [(dv_blob_metadata(d.positions, d.path), encode_dv_blob(d.positions)) for d in ordered]
    data, placed = build_puffin(blobs, {"created-by": CREATED_BY})
    _create(io, location, data)
    return [
        _delete_record(
            content_path=location,
            file_format="PUFFIN",
            spec_id=d.spec_id,
            partition=d.partition,
            record_count=len(d.positions),
            file_size=len(data),
            referenced_data_file=d.path,
            content_offset=meta.offset,
            content_size_in_bytes=meta.length,
        )
        for d, meta in zip(ordered, placed, strict=True)
    ]


def _column_sizes(data: bytes) -> dict[int, int]:
    """The compressed bytes of each column, by field id (the `column_sizes` metric)."""
    import io as bytes_io

    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(bytes_io.BytesIO(data)).metadata
    sizes = {FILE_PATH_ID: 0, POS_ID: 0}
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column, field_id in enumerate((FILE_PATH_ID, POS_ID)):
            sizes[field_id] += row_group.column(column).total_compressed_size
    return sizes


def _create(io: FileIO, location: str, data: bytes) -> None:
    """Write a new file (put-if-absent: `create()` refuses an existing one)."""
    with io.new_output(location).create(overwrite=False) as stream:
        stream.write(data)


def _delete_record(
    *,
    content_path: str,
    file_format: str,
    spec_id: int,
    partition: Any,
    record_count: int,
    file_size: int,
    **fields: Any,
) -> DataFile:
    """A position delete file's manifest record (pyiceberg's v3 `DataFile` struct, a
    superset of v2's)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    record = DataFile.from_args(
        _table_format_version=3,
        content=DataFileContent.POSITION_DELETES,
        file_path=content_path,
        file_format=FileFormat[file_format],
        partition=partition,
        record_count=record_count,
        file_size_in_bytes=file_size,
        **fields,
    )
    record.spec_id = spec_id
    return record
