"""Helpers of the data-file rewrite tests (tests/iceberg/test_data_file_rewrite*.py): Parquet
files written with the field ids Iceberg writers give them, their manifest records, and the
field ids a file's schema carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record


def sql_catalog(folder: Path) -> SqlCatalog:
    """A SQL catalog on SQLite in `folder`, with namespace `ns`."""
    catalog = SqlCatalog("rw", uri=f"sqlite:///{folder}/c.db", warehouse=f"file://{folder}")
    catalog.create_namespace("ns")
    return catalog


def field(name: str, typ: pa.DataType, field_id: int) -> pa.Field:
    """An arrow field with its Parquet field id."""
    return pa.field(name, typ, metadata={b"PARQUET:field_id": str(field_id).encode()})


def data_file(path: Path, rows: int, partition: Record | None = None) -> DataFile:
    """The manifest record of a data file of spec 0 written here."""
    record = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=str(path),
        file_format=FileFormat.PARQUET,
        partition=partition or Record(),
        record_count=rows,
        file_size_in_bytes=path.stat().st_size,
    )
    record.spec_id = 0
    return record


def read_file(metadata: TableMetadata, table: Table, record: DataFile) -> pa.Table:
    """pyiceberg's reading of one data file onto the current schema, no deletes."""
    scan = ArrowScan(metadata, table.io, metadata.schema(), AlwaysTrue())
    return scan.to_table([FileScanTask(record)])


def values(rows: pa.Table) -> list[dict[str, Any]]:
    """The rows as Python values, NaN as a string (NaN != NaN), whatever the arrow types."""
    return [{k: "NaN" if v != v else v for k, v in row.items()} for row in rows.to_pylist()]


def field_ids(schema: pa.Schema | pa.DataType) -> list[str]:
    """Every field's `PARQUET:field_id`, nested fields too, depth first."""
    fields = list(schema) if isinstance(schema, pa.Schema) else _children(schema)
    ids = []
    for field in fields:
        ids.append((field.metadata or {}).get(b"PARQUET:field_id", b"?").decode())
        ids.extend(field_ids(field.type))
    return ids


def _children(typ: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(typ):
        return list(typ)
    if pa.types.is_map(typ):
        return [typ.key_field, typ.item_field]
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return [typ.value_field]
    return []
