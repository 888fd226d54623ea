"""Small Iceberg tables made with pyiceberg, and pyiceberg writing through dvtool's commits.

- `new_path_table(folder, version)`: a path (Hadoop) table as Iceberg Java's
  `HadoopTableOperations` lays it out (`metadata/v1.metadata.json`, `version-hint.text`),
  schema `(id long, name string)`, no snapshot; `folder` is a local path or an `s3://` URI
  with `options` (the storage options of the S3 emulator).
- `new_sql_table(root, version)`: the same table in a pyiceberg `SqlCatalog` on SQLite
  (format v1/v2 created by pyiceberg itself; v3, which pyiceberg cannot write, registered
  from a metadata file written by dvtool's `metadata_json`).
- `through_dvtool(table)`: a pyiceberg `Table` over an `IcebergTable` whose catalog commits
  with `dvtool.iceberg.catalog_commit.commit_updates`: pyiceberg's own writers (`append`,
  `set_properties`) write the data, manifests and manifest list, dvtool makes the commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField, StringType

from dvtool.iceberg.catalog_commit import commit_updates
from dvtool.iceberg.metadata_json import metadata_bytes
from dvtool.iceberg.tables import IcebergTable, open_iceberg
from dvtool.storage.table_storage import Storage

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
NAMESPACE = "db"


def rows(lo: int, hi: int) -> pa.Table:
    """Rows `lo..hi-1` of the test schema."""
    ids = list(range(lo, hi))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=ARROW_SCHEMA)


def new_metadata(location: str, version: int, properties: dict[str, str] | None = None) -> Any:
    """New table metadata of the test schema; v3 with `next-row-id` 0, as Java starts it
    (pyiceberg's `new_table_metadata` leaves it unset)."""
    metadata = new_table_metadata(
        SCHEMA,
        UNPARTITIONED_PARTITION_SPEC,
        UNSORTED_SORT_ORDER,
        location,
        {"format-version": str(version), **(properties or {})},
    )
    if version >= 3:
        metadata = metadata.model_copy(update={"next_row_id": 0})
    return metadata


def new_path_table(
    folder: str,
    version: int,
    options: dict[str, str] | None = None,
    properties: dict[str, str] | None = None,
) -> IcebergTable:
    """A new empty path table at `folder` (see the module docstring), opened."""
    storage = Storage.for_table(folder, options)
    metadata = new_metadata(storage.root, version, properties)
    storage.write(storage.join("metadata/v1.metadata.json"), metadata_bytes(metadata))
    storage.write(storage.join("metadata/version-hint.text"), b"1")
    return open_iceberg(folder, options)


def new_sql_table(root: Path, version: int, name: str = "t") -> IcebergTable:
    """A new empty table `db.NAME` in a SqlCatalog on root/catalog.db, opened through it."""
    root.mkdir(parents=True, exist_ok=True)
    properties = {"type": "sql", "uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root)}
    catalog = load_catalog("dvtool_tests", **properties)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    identifier = f"{NAMESPACE}.{name}"
    if version < 3:
        catalog.create_table(identifier, SCHEMA, properties={"format-version": str(version)})
    else:
        location = f"{root}/{name}"
        metadata = new_metadata(location, 3)
        path = (
            Path(location) / "metadata" / "00000-5e2f1c4a-0f43-4a8e-9d1c-3f0b8a2f7e11.metadata.json"
        )
        path.parent.mkdir(parents=True)
        path.write_bytes(metadata_bytes(metadata))
        catalog.register_table(identifier, str(path))
    loaded = catalog.load_table(identifier)
    return IcebergTable(
        loaded.metadata, loaded.metadata_location, loaded.io, identifier, catalog=catalog
    )


class DvtoolCommits(NoopCatalog):
    """A pyiceberg catalog that commits with dvtool's `commit_updates` on `table`."""

    def __init__(self, table: IcebergTable) -> None:
        super().__init__("dvtool")
        self.table = table

    def commit_table(
        self, table: Table, requirements: tuple[Any, ...], updates: tuple[Any, ...]
    ) -> CommitTableResponse:
        self.table = commit_updates(self.table, requirements, updates)
        return CommitTableResponse(
            metadata=self.table.metadata, metadata_location=self.table.metadata_location
        )


def through_dvtool(table: IcebergTable) -> Table:
    """A pyiceberg Table of `table` whose commits are dvtool's (see the module docstring)."""
    identifier = tuple((table.name or f"{NAMESPACE}.path").split("."))
    return Table(
        identifier, table.metadata, table.metadata_location, table.io, DvtoolCommits(table)
    )


def committed(table: Table) -> IcebergTable:
    """The `IcebergTable` after the commits made through `through_dvtool`'s table."""
    catalog = table.catalog
    assert isinstance(catalog, DvtoolCommits)
    return catalog.table
