"""Committing a produced snapshot to a path (Hadoop) table in tests, and small tables to
commit to.

`commit_locally` commits a produced snapshot with dvtool's commit layer
(`catalog_commit.commit_updates`, one attempt: the requirements checked, the next
`metadata/vN.metadata.json` put if absent), so the producer's tests commit as dvtool does.

`new_table` makes an empty path table with pyiceberg (v2, or v2 upgraded to v3 in
metadata), and `parquet_data_file` writes a Parquet file with the table's field ids and
returns its pyiceberg `DataFile` (pyiceberg's `parquet_file_to_data_file`: statistics
from the footer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFileIO, parquet_file_to_data_file
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from dvtool.iceberg.catalog_commit import commit_updates
from dvtool.iceberg.metadata_json import metadata_bytes
from dvtool.iceberg.snapshot_producer import ProducedSnapshot
from dvtool.iceberg.tables import IcebergTable, open_iceberg

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "cat", StringType(), required=False),
)
FILE_PATH_ID, POS_ID = 2147483546, 2147483545


def commit_locally(table: IcebergTable, produced: ProducedSnapshot) -> IcebergTable:
    """Commit `produced` on `table` (a path table) through dvtool's own commit layer: one
    attempt of `catalog_commit.commit_updates` (a new `vN.metadata.json`, put-if-absent)."""
    return commit_updates(table, produced.requirements, produced.updates)


def new_table(
    root: Path, format_version: int, spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC
) -> IcebergTable:
    """An empty path table at `root` of `format_version` (2 or 3), opened as dvtool opens
    a table (`open_iceberg`: its storage and writable FileIO)."""
    properties = {"format-version": str(format_version)}
    metadata = new_table_metadata(
        SCHEMA, spec, UNSORTED_SORT_ORDER, str(root), properties=properties
    )
    if format_version >= 3:  # pyiceberg leaves the required next-row-id unset
        metadata = metadata.model_copy(update={"next_row_id": 0})
    folder = root / "metadata"
    folder.mkdir(parents=True)
    (folder / "v1.metadata.json").write_bytes(metadata_bytes(metadata))
    (folder / "version-hint.text").write_text("1")
    return open_iceberg(str(root))


def arrow_schema(schema: Schema = SCHEMA) -> pa.Schema:
    return pa.schema(
        [
            pa.field(
                f.name,
                pa.int64() if f.field_id == 1 else pa.string(),
                metadata={b"PARQUET:field_id": str(f.field_id).encode()},
            )
            for f in schema.fields
        ]
    )


def parquet_data_file(table: IcebergTable, name: str, rows: list[dict[str, Any]]) -> DataFile:
    """Write `rows` to `{location}/data/{name}`; its DataFile (unpartitioned spec)."""
    path = Path(table.location) / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema()), path)
    return parquet_file_to_data_file(PyArrowFileIO(), table.metadata, str(path))


def position_delete_file(
    table: IcebergTable, name: str, deletes: list[tuple[str, int]], partition: Record | None = None
) -> DataFile:
    """A Parquet position delete file (`file_path`, `pos`, sorted) and its DataFile, with
    the `file_path` bounds readers prune by (and `referenced_data_file` for one file)."""
    deletes = sorted(deletes)
    schema = pa.schema(
        [
            pa.field(
                "file_path",
                pa.string(),
                nullable=False,
                metadata={b"PARQUET:field_id": str(FILE_PATH_ID).encode()},
            ),
            pa.field(
                "pos",
                pa.int64(),
                nullable=False,
                metadata={b"PARQUET:field_id": str(POS_ID).encode()},
            ),
        ]
    )
    path = Path(table.location) / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"file_path": f, "pos": p} for f, p in deletes]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    paths = [f for f, _ in deletes]
    version = table.metadata.format_version
    return DataFile.from_args(
        _table_format_version=3 if version >= 3 else 2,
        content=DataFileContent.POSITION_DELETES,
        file_path=str(path),
        file_format=FileFormat.PARQUET,
        partition=partition if partition is not None else Record(),
        record_count=len(rows),
        file_size_in_bytes=path.stat().st_size,
        lower_bounds={FILE_PATH_ID: min(paths).encode()},
        upper_bounds={FILE_PATH_ID: max(paths).encode()},
    )


def summary_of(table: IcebergTable) -> dict[str, str]:
    """The current snapshot's summary as plain strings (`operation` included)."""
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return dict(json.loads(snapshot.summary.model_dump_json()))


def puffin_dvs(
    table: IcebergTable, name: str, dvs: dict[str, list[int]], partition: Record | None = None
) -> list[DataFile]:
    """One Puffin file at `{location}/data/{name}` with a deletion vector per data file
    (`dvs`: data file path -> deleted positions); a DataFile per DV blob."""
    from pyroaring import BitMap64

    from dvtool.deletion_vectors.puffin import build_puffin, dv_blob_metadata, encode_dv_blob

    bitmaps = {path: BitMap64(positions) for path, positions in dvs.items()}
    data, blobs = build_puffin(
        [(dv_blob_metadata(rows, path), encode_dv_blob(rows)) for path, rows in bitmaps.items()]
    )
    path = Path(table.location) / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return [
        DataFile.from_args(
            _table_format_version=3,
            content=DataFileContent.POSITION_DELETES,
            file_path=str(path),
            file_format=FileFormat.PUFFIN,
            partition=partition if partition is not None else Record(),
            record_count=len(bitmaps[blob.properties["referenced-data-file"]]),
            file_size_in_bytes=len(data),
            referenced_data_file=blob.properties["referenced-data-file"],
            content_offset=blob.offset,
            content_size_in_bytes=blob.length,
        )
        for blob in blobs
    ]
