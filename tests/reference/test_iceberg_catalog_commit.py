"""dvtool's Iceberg commits (`dvtool.iceberg.catalog_commit`) on tables Iceberg Spark wrote,
checked by Iceberg Java itself, pyiceberg and DuckDB.

- metadata bytes: every metadata file of the Spark-made tables, parsed by pyiceberg and
  written back by `metadata_json`, is byte for byte the file Java wrote (v2 and v3);
- path (Hadoop) tables, v2 and v3 (deletion vectors, row lineage): dvtool commits a
  property change; Iceberg Java making the same change on a twin copy writes the same
  metadata, field for field (but the time); Spark, pyiceberg and DuckDB read the new state
  (rows, properties) and Spark goes on writing the table (a DELETE on dvtool's version);
  Spark committing first makes dvtool's stale commit a conflict;
- SQL (JdbcCatalog on SQLite) and REST (Iceberg's REST fixture server) catalogs, v2 and v3:
  the same property change, read back through the catalog by Spark and pyiceberg; pyiceberg
  appends (its own writers, dvtool's commit) on v2; two committers on one base: one lands.

The tests write copies of the shared fixture tables (`copy_table`, namespace `commits`) and
catalog tables they build themselves, never the shared tables, which other tests read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate

from dvtool.errors import CommitConflictError
from dvtool.iceberg.catalog_commit import commit_updates, refresh
from dvtool.iceberg.metadata_json import metadata_bytes
from dvtool.iceberg.tables import IcebergTable, open_iceberg
from tests import iceberg_oracles
from tests.engines.jvm_engines import JvmSession
from tests.iceberg.commit_tables import committed, through_dvtool
from tests.reference.iceberg_catalogs import CATALOG_STEPS, CatalogTable, build_in_catalog
from tests.reference.iceberg_tables import (
    SPECS,
    TableSpec,
    copy_table,
    expected_rows,
    warehouse,
)

DB = "commits"
SPEC = {spec.name: spec for spec in SPECS}
CHANGE = {"dvtool.commit-test": "yes"}


def ids_and_values(found: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return sorted((int(r["id"]), int(r["v"])) for r in found)


def spark_rows(session: JvmSession, table: str) -> list[tuple[int, int]]:
    session.sql(f"REFRESH TABLE {table}")
    return ids_and_values(session.rows(f"SELECT id, v FROM {table}"))


def spark_properties(session: JvmSession, table: str) -> dict[str, str]:
    session.sql(f"REFRESH TABLE {table}")
    found = session.rows(f"SHOW TBLPROPERTIES {table}")
    return {r["key"]: r["value"] for r in found}


@pytest.fixture(scope="module")
def built(iceberg_tables: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The shared fixture tables (read-only: the tests write copies, `twin`)."""
    return iceberg_tables


def twin(session: JvmSession, entry: dict[str, Any], name: str) -> tuple[str, Path]:
    """A copy of a built table in the `local` catalog as `local.commits.NAME`."""
    dst = warehouse(session) / DB / name
    copy_table(session, entry, dst)
    return f"local.{DB}.{name}", dst


# -- metadata bytes ----------------------------------------------------------------------------


def test_java_metadata_files_round_trip_byte_for_byte(built: dict[str, dict[str, Any]]) -> None:
    files = [
        p for e in built.values() for p in Path(e["location"], "metadata").glob("v*.metadata.json")
    ]
    assert len(files) >= 10
    for path in files:
        raw = path.read_bytes()
        assert metadata_bytes(TableMetadataUtil.parse_raw(raw)) == raw, path


# -- path tables -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["v2_flat", "v3_part"])
def test_path_table_commit_equals_javas(
    iceberg_spark: JvmSession, built: dict[str, dict[str, Any]], name: str
) -> None:
    entry = built[name]
    ours_name, ours = twin(iceberg_spark, entry, f"{name}_dvtool")
    java_name, java = twin(iceberg_spark, entry, f"{name}_java")
    table = open_iceberg(str(ours))
    done = commit_updates(table, (), (SetPropertiesUpdate(updates=CHANGE),))
    iceberg_spark.sql(f"REFRESH TABLE {java_name}")
    iceberg_spark.sql(f"ALTER TABLE {java_name} SET TBLPROPERTIES ('dvtool.commit-test'='yes')")
    java_file = open_iceberg(str(java)).metadata_location
    assert Path(java_file).name == Path(done.metadata_location).name
    ours_json = json.loads(Path(done.metadata_location).read_text())
    java_json = json.loads(Path(java_file).read_text().replace(str(java), str(ours)))
    for doc in (ours_json, java_json):
        doc.pop("last-updated-ms")
    assert ours_json == java_json
    # Iceberg Java, pyiceberg and DuckDB read dvtool's version.
    expected = ids_and_values(expected_rows(SPEC[name]))  # type: ignore[arg-type]
    assert spark_rows(iceberg_spark, ours_name) == expected
    assert spark_properties(iceberg_spark, ours_name)["dvtool.commit-test"] == "yes"
    for oracle in ("pyiceberg", "duckdb"):
        found = iceberg_oracles.oracle_rows(oracle, done.metadata_location)
        assert ids_and_values(found) == expected, oracle
    # Iceberg Spark goes on writing the table from dvtool's version.
    iceberg_spark.sql(f"DELETE FROM {ours_name} WHERE id = 1")
    assert spark_rows(iceberg_spark, ours_name) == [r for r in expected if r[0] != 1]
    assert refresh(done).metadata_location != done.metadata_location


def test_spark_commit_first_makes_ours_a_conflict(
    iceberg_spark: JvmSession, built: dict[str, dict[str, Any]]
) -> None:
    name, folder = twin(iceberg_spark, built["v3_part"], "v3_part_race")
    table = open_iceberg(str(folder))
    iceberg_spark.sql(f"REFRESH TABLE {name}")
    iceberg_spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('spark'='first')")
    with pytest.raises(CommitConflictError):
        commit_updates(table, (), (SetPropertiesUpdate(updates=CHANGE),))
    done = commit_updates(refresh(table), (), (SetPropertiesUpdate(updates=CHANGE),))
    properties = spark_properties(iceberg_spark, name)
    assert properties["spark"] == "first" and properties["dvtool.commit-test"] == "yes"
    assert done.metadata.next_row_id == table.metadata.next_row_id  # type: ignore[union-attr]


# -- catalogs ----------------------------------------------------------------------------------


def catalog_table(catalog: CatalogTable, identifier: str) -> IcebergTable:
    loaded_catalog = load_catalog(catalog.name, **catalog.properties)
    loaded = loaded_catalog.load_table(identifier)
    return IcebergTable(
        loaded.metadata, loaded.metadata_location, loaded.io, identifier, catalog=loaded_catalog
    )


def build(session: JvmSession, catalog: CatalogTable, name: str, version: int) -> IcebergTable:
    spec = TableSpec(name, version, None, CATALOG_STEPS)
    identifier, _ = build_in_catalog(session, catalog.name, spec)
    return catalog_table(catalog, identifier)


@pytest.fixture(scope="module", params=["sql", "rest"])
def catalog(request: pytest.FixtureRequest) -> CatalogTable:
    fixture = "iceberg_sql_catalog" if request.param == "sql" else "iceberg_rest_catalog"
    found: CatalogTable = request.getfixturevalue(fixture)
    return found


@pytest.mark.parametrize("version", [2, 3])
def test_catalog_commit(iceberg_spark: JvmSession, catalog: CatalogTable, version: int) -> None:
    table = build(iceberg_spark, catalog, f"commit_{catalog.name}_v{version}", version)
    done = commit_updates(table, (), (SetPropertiesUpdate(updates=CHANGE),))
    spark_name = f"{catalog.name}.{table.name}"
    iceberg_spark.sql(f"REFRESH TABLE {spark_name}")
    assert spark_properties(iceberg_spark, spark_name)["dvtool.commit-test"] == "yes"
    reloaded = catalog_table(catalog, str(table.name))
    assert reloaded.metadata_location == done.metadata_location
    assert reloaded.metadata.format_version == version
    expected = ids_and_values(expected_rows(TableSpec("x", version, None, CATALOG_STEPS)))  # type: ignore[arg-type]
    assert spark_rows(iceberg_spark, spark_name) == expected
    assert ids_and_values(iceberg_oracles.duckdb_rows(done.metadata_location)) == expected
    static = iceberg_oracles.load_table(done.metadata_location)
    assert ids_and_values(iceberg_oracles.pyiceberg_rows(static)) == expected
    # A requirement that fails (main moved) is a conflict, whichever side checks it.
    moved = AssertRefSnapshotId(ref="main", snapshot_id=12345)
    with pytest.raises(CommitConflictError):
        commit_updates(done, (moved,), (SetPropertiesUpdate(updates={"a": "b"}),))
    if version == 3 and catalog.name == "sqlcat":  # dvtool's own swap: the base must be current
        with pytest.raises(CommitConflictError):
            commit_updates(table, (), (SetPropertiesUpdate(updates={"a": "b"}),))


def test_catalog_appends_and_race(iceberg_spark: JvmSession, catalog: CatalogTable) -> None:
    """pyiceberg appends on a v2 catalog table, committed by dvtool; two on one base race."""
    table = build(iceberg_spark, catalog, f"append_{catalog.name}", 2)
    expected = ids_and_values(expected_rows(TableSpec("x", 2, None, CATALOG_STEPS)))  # type: ignore[arg-type]
    first, second = through_dvtool(table), through_dvtool(table)
    first.append(_shaped(first, 1000, 1005))
    with pytest.raises(CommitConflictError):
        second.append(_shaped(second, 2000, 2003))
    done = committed(first)
    spark_name = f"{catalog.name}.{table.name}"
    expected += [(i, 7) for i in range(1000, 1005)]
    assert spark_rows(iceberg_spark, spark_name) == sorted(expected)
    assert ids_and_values(iceberg_oracles.duckdb_rows(done.metadata_location)) == sorted(expected)


def _shaped(table: Any, lo: int, hi: int) -> Any:
    """Rows `lo..hi-1` in the fixture schema `(id, cat, d, v)`, v = 7."""
    import datetime as dt

    import pyarrow as pa

    schema = table.schema().as_arrow()
    n = hi - lo
    return pa.table(
        {
            "id": list(range(lo, hi)),
            "cat": ["z"] * n,
            "d": [dt.date(2024, 2, 1)] * n,
            "v": [7] * n,
        },
        schema=schema,
    )


def test_sql_catalog_on_s3(iceberg_spark: JvmSession, iceberg_s3_table: CatalogTable) -> None:
    """v3 on the S3 emulator: dvtool's metadata file through pyiceberg's S3 FileIO, the
    SQLite row swapped; Spark (S3FileIO) and DuckDB (httpfs) read the new state."""
    table = build(iceberg_spark, iceberg_s3_table, "commit_s3_v3", 3)
    done = commit_updates(table, (), (SetPropertiesUpdate(updates=CHANGE),))
    assert done.metadata_location.startswith("s3://")
    spark_name = f"{iceberg_s3_table.name}.{table.name}"
    assert spark_properties(iceberg_spark, spark_name)["dvtool.commit-test"] == "yes"
    expected = ids_and_values(expected_rows(TableSpec("x", 3, None, CATALOG_STEPS)))  # type: ignore[arg-type]
    assert spark_rows(iceberg_spark, spark_name) == expected
    io = iceberg_s3_table.properties
    assert ids_and_values(iceberg_oracles.duckdb_rows(done.metadata_location, io=io)) == expected
    with pytest.raises(CommitConflictError):  # stale base
        commit_updates(table, (), (SetPropertiesUpdate(updates={"a": "b"}),))
