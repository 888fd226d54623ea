"""Every Iceberg fixture table reads as its expected rows through every oracle
(tests/iceberg_oracles.py), also at an older snapshot; the later-life shapes
(tests/reference/iceberg_tables.py's HISTORY_SPECS) have the files they claim; the catalog
fixtures' tables (tests/reference/iceberg_catalogs.py: SQLite JdbcCatalog, REST catalog
server, S3 emulator) load through pyiceberg's catalogs and read the same through every oracle.

Oracles and their known refusals: pyiceberg 0.12 and polars (which plans with pyiceberg
once a table has equality deletes) refuse equality deletes ("PyIceberg does not yet support
equality deletes"); DuckDB's iceberg extension reads every shape. Iceberg's Spark runtime
reads the history tables too (test_iceberg_tables.py covers the first ones).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.manifest import FileFormat, ManifestEntryStatus
from pyiceberg.table import Table

from tests import iceberg_oracles as oracles
from tests.engines.jvm_engines import JvmSession
from tests.reference.dv_files import puffin_deletion_vectors
from tests.reference.iceberg_catalogs import CatalogTable
from tests.reference.iceberg_tables import ALL_SPECS, HISTORY_SPECS, make_rows

NAMES = [spec.name for spec in ALL_SPECS]
WITH_EQUALITY_DELETES = {"v2_equality", "v2_flink", "v2_flink_part", "v3_flink_part"}
REFUSES_EQUALITY_DELETES = {"pyiceberg", "polars"}


def refuses(oracle: str, name: str) -> bool:
    return oracle in REFUSES_EQUALITY_DELETES and name in WITH_EQUALITY_DELETES


@pytest.mark.parametrize("oracle", oracles.ORACLES)
@pytest.mark.parametrize("name", NAMES)
def test_each_oracle_reads_the_expected_rows_or_refuses_known_shapes(
    name: str, oracle: str, iceberg_tables: dict[str, Any]
) -> None:
    entry = iceberg_tables[name]
    if refuses(oracle, name):
        with pytest.raises(oracles.OracleRefused, match=oracles.KNOWN_REFUSALS[oracle][1]):
            oracles.oracle_rows(oracle, entry["metadata"])
    else:
        assert oracles.oracle_rows(oracle, entry["metadata"]) == entry["expected"]


@pytest.mark.parametrize("name", [spec.name for spec in HISTORY_SPECS])
def test_iceberg_spark_reads_the_expected_rows(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    assert iceberg_spark.rows(f"SELECT * FROM {entry['table']} ORDER BY id") == entry["expected"]


@pytest.mark.parametrize("name", NAMES)
def test_counts_bound_the_live_rows(name: str, iceberg_tables: dict[str, Any]) -> None:
    """DuckDB counts the expected rows; the manifests' counts bound them (exactly for
    deletion vectors alone: Parquet position deletes may repeat or dangle, and an equality
    delete may match no row or several)."""
    entry = iceberg_tables[name]
    counts = oracles.counts(entry["metadata"])
    live = len(entry["expected"])
    assert oracles.live_row_count(entry["metadata"]) == live
    assert (counts.equality_delete_files > 0) == (name in WITH_EQUALITY_DELETES)
    assert counts.physical_rows - counts.position_deletes - counts.equality_deletes <= live
    assert live <= counts.physical_rows
    if counts.deletion_vectors and not counts.position_delete_files + counts.equality_delete_files:
        assert counts.physical_rows - counts.position_deletes == live


def metadata(entry: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(Path(entry["metadata"]).read_text())
    return loaded


def live_files(entry: dict[str, Any]) -> list[dict[str, Any]]:
    files = oracles.load_table(entry["metadata"]).inspect.files()
    rows: list[dict[str, Any]] = files.select(["content", "file_path", "spec_id"]).to_pylist()
    return rows


def test_evolved_table_has_files_and_deletes_under_several_specs(
    iceberg_tables: dict[str, Any],
) -> None:
    entry = iceberg_tables["v2_evolved"]
    assert len(metadata(entry)["partition-specs"]) == 4
    files = live_files(entry)
    assert len({f["spec_id"] for f in files if f["content"] == 0}) >= 3
    assert len({f["spec_id"] for f in files if f["content"] == 1}) >= 2


def files_on_disk(entry: dict[str, Any]) -> set[str]:
    """The table's data and delete files on disk (not Hadoop's hidden `.crc` checksums)."""
    files = Path(entry["location"], "data").rglob("*")
    return {str(p) for p in files if p.is_file() and not p.name.startswith(".")}


def local(path: str) -> Path:
    return Path(path.removeprefix("file:"))


@pytest.mark.parametrize("name", ["v2_compacted", "v3_compacted"])
def test_compacted_tables_were_rewritten_and_expired(
    name: str, iceberg_tables: dict[str, Any]
) -> None:
    """Two snapshots kept, one a compaction (`replace`) or made after it: every file they
    use is on disk, and the manifest lists of the expired snapshots (named by the older
    metadata files, which expiry keeps) are gone."""
    entry = iceberg_tables[name]
    meta = metadata(entry)
    assert len(meta["snapshots"]) == 2
    table = oracles.load_table(entry["metadata"])
    used = {str(local(p)) for p in table.inspect.all_files()["file_path"].to_pylist()}
    assert used <= files_on_disk(entry)
    kept = {s["manifest-list"] for s in meta["snapshots"]}
    assert all(local(path).is_file() for path in kept)
    older = [json.loads(local(m["metadata-file"]).read_text()) for m in meta["metadata-log"]]
    expired = {s["manifest-list"] for m in older for s in m.get("snapshots", [])} - kept
    assert len(expired) >= 4
    assert not any(local(path).exists() for path in expired)
    operations = {s["summary"]["operation"] for m in [*older, meta] for s in m.get("snapshots", [])}
    assert "replace" in operations


def named_data_files(position_delete_file: str) -> set[str]:
    """The data files a Parquet position-delete file names."""
    column = pq.read_table(position_delete_file, columns=["file_path"])["file_path"]
    return set(column.to_pylist())


def test_v2_compaction_leaves_a_dangling_position_delete_file(
    iceberg_tables: dict[str, Any],
) -> None:
    """rewrite_data_files on partition `a` removed the data files that partition's
    compacted position deletes name; the delete file stays live (a documented shape)."""
    files = live_files(iceberg_tables["v2_compacted"])
    live_data = {f["file_path"] for f in files if f["content"] == 0}
    named = [named_data_files(f["file_path"]) for f in files if f["content"] == 1]
    assert any(paths.isdisjoint(live_data) for paths in named)
    assert any(paths <= live_data for paths in named)


@dataclass(frozen=True)
class Added:
    """A file a snapshot added (from the live manifests)."""

    content: int
    path: str
    puffin: bool
    equality_ids: list[int] | None
    sequence: int | None


def added_files(entry: dict[str, Any]) -> dict[int, list[Added]]:
    """The files each snapshot added, by snapshot id: the ADDED entries of the current
    snapshot's manifests (read with pyiceberg's manifest reader: its `inspect.entries()`
    fails on deletion vectors, which have no column sizes)."""
    table = oracles.load_table(entry["metadata"])
    snapshot = table.current_snapshot()
    assert snapshot is not None
    added: dict[int, list[Added]] = defaultdict(list)
    for manifest in snapshot.manifests(table.io):
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if e.status == ManifestEntryStatus.ADDED and e.snapshot_id is not None:
                f = e.data_file
                puffin = f.file_format == FileFormat.PUFFIN
                ids = list(f.equality_ids) if f.equality_ids else None
                added[e.snapshot_id].append(
                    Added(f.content.value, f.file_path, puffin, ids, e.sequence_number)
                )
    return added


def deleted_from(delete: Added) -> set[str]:
    """The data files a position-delete file or a Puffin file of DVs names."""
    if delete.puffin:
        return set(puffin_deletion_vectors(Path(delete.path)))
    return named_data_files(delete.path)


FLINK_TABLES = [("v2_flink", [1], False), ("v2_flink_part", [1, 2], False)]
FLINK_TABLES.append(("v3_flink_part", [1, 2], True))


@pytest.mark.parametrize(("name", "equality_ids", "dvs"), FLINK_TABLES)
def test_flink_checkpoints_commit_data_equality_and_position_deletes_together(
    name: str, equality_ids: list[int], dvs: bool, iceberg_tables: dict[str, Any]
) -> None:
    """Each checkpoint's commit adds, per partition, a data file and an equality-delete file
    on the identifier fields, and position deletes (deletion vectors in v3) into that
    commit's own data files, all with the commit's sequence number."""
    entry = iceberg_tables[name]
    checkpoints = [s["snapshot-id"] for s in metadata(entry)["snapshots"][-2:]]
    added = added_files(entry)
    for snapshot in checkpoints:
        files = added[snapshot]
        by_content: dict[int, list[Added]] = defaultdict(list)
        for f in files:
            by_content[f.content].append(f)
        assert len(by_content[0]) == len(by_content[2]) >= 1
        assert all(f.equality_ids == equality_ids for f in by_content[2])
        assert by_content[1]
        assert all(f.puffin == dvs for f in by_content[1])
        data_paths = {f.path for f in by_content[0]}
        assert all(deleted_from(f) <= data_paths for f in by_content[1])
        assert len({f.sequence for f in files}) == 1


def load(table: CatalogTable) -> Table:
    """The table through its catalog, as pyiceberg's `load_catalog` gives it."""
    return load_catalog(table.name, **table.properties).load_table(table.identifier)


@pytest.mark.parametrize(
    "fixture", ["iceberg_sql_catalog", "iceberg_rest_catalog", "iceberg_s3_table"]
)
def test_catalog_tables_load_through_pyiceberg_catalogs(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """Each oracle reads the table pyiceberg's SqlCatalog / RestCatalog loads (the S3 one
    through the emulator: pyiceberg's and polars' S3 clients, DuckDB's httpfs)."""
    expected: CatalogTable = request.getfixturevalue(fixture)
    table = load(expected)
    assert table.metadata_location == expected.metadata
    for oracle in oracles.ORACLES:
        assert oracles.oracle_rows(oracle, table) == expected.expected, oracle


def test_the_s3_table_is_on_the_emulator(iceberg_s3_table: CatalogTable) -> None:
    table = load(iceberg_s3_table)
    assert table.metadata_location.startswith("s3://")
    files = table.inspect.files()["file_path"].to_pylist()
    assert files and all(path.startswith("s3://") for path in files)


@pytest.mark.parametrize("oracle", oracles.ORACLES)
def test_each_oracle_reads_an_older_snapshot(oracle: str, iceberg_tables: dict[str, Any]) -> None:
    """`snapshot_id`: v2_flink before its Flink checkpoints holds the 40 rows Spark inserted
    (no equality deletes yet, so every oracle reads it)."""
    entry = iceberg_tables["v2_flink"]
    before_flink = metadata(entry)["snapshots"][-3]
    assert before_flink["summary"]["operation"] == "append"
    rows = oracles.oracle_rows(oracle, entry["metadata"], snapshot_id=before_flink["snapshot-id"])
    assert rows == make_rows(0, 40)
