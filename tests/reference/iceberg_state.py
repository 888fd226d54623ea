"""What an Iceberg table holds, read independently of dvtool, for the fault and race tests.

- `agreed_rows`: the rows Iceberg Spark reads, after checking that pyiceberg, DuckDB and
  polars read the same (an oracle may refuse only a shape it is known to refuse, and only
  when the table has that shape: `iceberg_writes.delete_file_shapes`);
- `referenced_files`: every file the table's latest metadata reaches, from any snapshot it
  keeps (manifest lists, manifests, data and delete files, whatever the entry's status),
  its metadata log and statistics files, as pyiceberg reads them; relative to the folder;
- `table_tree`: the files under a table folder, relative (not Hadoop's `.crc` files);
- `unreferenced`: the files of the tree that the metadata does not reach.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyiceberg.table import StaticTable, Table

from tests import iceberg_oracles as oracles
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import latest_metadata
from tests.reference.iceberg_writes import _allowed, delete_file_shapes

Row = dict[str, Any]
VERSION_HINT = "metadata/version-hint.text"


def agreed_rows(session: JvmSession, source: Path | Table, table: str) -> list[Row]:
    """The table's rows as Iceberg Spark reads them (`table`, its catalog name), which
    every oracle that can read the table's shape reads too; the oracles read `source`, a
    path table's folder (its latest metadata) or a table loaded from its catalog."""
    location = source if isinstance(source, Path) else _folder(source.metadata.location)
    shapes = delete_file_shapes(session, table, location)  # refreshes the table in Spark
    spark = session.rows(f"SELECT * FROM {table} ORDER BY id")
    metadata = latest_metadata(source) if isinstance(source, Path) else source
    for oracle in oracles.ORACLES:
        try:
            rows = oracles.oracle_rows(oracle, metadata)
        except oracles.OracleRefused as refusal:
            assert _allowed(refusal, shapes), refusal
            continue
        assert rows == spark, oracle
    return spark


def _folder(location: str) -> Path | str:
    """A table location as a local folder, or as it is for an object store URI."""
    if location.startswith(("file:", "/")):
        return Path(location.removeprefix("file:").removeprefix("//"))
    return location


def relative(folder: Path, location: str) -> str:
    """A location under `folder` as a path relative to it (`file:` URIs too)."""
    path = location.removeprefix("file:").removeprefix("//")
    return str(Path(path).relative_to(folder))


def referenced_files(folder: Path, metadata: str | None = None) -> set[str]:
    """The files the latest `vN.metadata.json` (or the metadata file `metadata`, a catalog
    table's) reaches (see the module docstring)."""
    location = metadata or latest_metadata(folder)
    static = StaticTable.from_metadata(str(location))
    meta = static.metadata
    found = {str(location), *(entry.metadata_file for entry in meta.metadata_log)}
    found |= {s.statistics_path for s in meta.statistics}
    for snapshot in meta.snapshots:
        found.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(static.io):
            found.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(static.io, discard_deleted=False):
                found.add(entry.data_file.file_path)
    return {relative(folder, f) for f in found} | {VERSION_HINT}


def table_tree(folder: Path) -> set[str]:
    """The files under `folder`, relative to it, without Hadoop's checksum files."""
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not p.name.endswith(".crc")
    }


def unreferenced(folder: Path, metadata: str | None = None) -> set[str]:
    """Files under `folder` that its latest metadata (or `metadata`) does not reach."""
    return table_tree(folder) - referenced_files(folder, metadata)
