"""dvtool's Iceberg writes through real catalogs and on an object store, end to end.

Tables Iceberg Spark wrote (the 80-row history of tests/reference/iceberg_tables.py: two
INSERTs, a DELETE, an UPDATE and a MERGE, merge-on-read, partitioned by `cat`) in format
versions 2 (position deletes) and 3 (deletion vectors):

- through Iceberg's JdbcCatalog on SQLite (`sqlcat`) and Iceberg's REST catalog server
  (`restcat`), the catalogs of the `iceberg_sql_catalog` and `iceberg_rest_catalog`
  fixtures (tests/reference/iceberg_catalogs.py; new tables of this module's own, the
  fixtures' tables stay as they are), configured for dvtool as pyiceberg users configure
  them (`$PYICEBERG_HOME/.pyiceberg.yaml`);
- a path (Hadoop) table on the S3 emulator (tests/s3_server.py): a fixture table copied
  there with Iceberg's `rewrite_table_path`, opened by its `s3://` URI with dvtool's
  `--storage-option`s; Iceberg Spark reads it by registering its metadata file in the
  `s3cat` catalog of the `iceberg_s3_table` fixture (S3FileIO).

Each gets `dvtool delete --where` then `dvtool optimize --rewrite-deletes`; after each,
pyiceberg (through the catalog), DuckDB, polars and Iceberg Spark (through its catalog)
read the expected rows (computed from intent), and `inspect --verify` is clean; then Iceberg
Spark goes on writing (a merge-on-read DELETE, an INSERT) and every reader still agrees.
Faults at the REST commit: a failed commit lands nothing and leaves no file; a lost answer
is resolved by reading the table back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import StaticTable, Table

from dvtool import faults
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_catalogs import (
    NAMESPACE,
    CatalogTable,
    build_in_catalog,
    s3_properties,
)
from tests.reference.iceberg_state import agreed_rows, table_tree, unreferenced
from tests.reference.iceberg_tables import STEPS, TableSpec, expected_rows
from tests.reference.iceberg_writes import cli_json
from tests.s3_server import S3Server

Row = dict[str, Any]
WHERE = "id % 5 = 1 OR v < 0"


def _matches(row: Row) -> bool:
    return bool(row["id"] % 5 == 1 or row["v"] < 0)


def _configure(catalogs: list[CatalogTable], home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalogs in `$PYICEBERG_HOME/.pyiceberg.yaml`, read as a new process reads it."""
    from pyiceberg.utils.config import Config

    home.mkdir(parents=True, exist_ok=True)
    lines = ["catalog:"]  # block style: pyiceberg's strictyaml refuses flow style
    for catalog in catalogs:
        lines.append(f"  {catalog.name}:")
        lines += [f"    {key}: {json.dumps(value)}" for key, value in catalog.properties.items()]
    (home / ".pyiceberg.yaml").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    monkeypatch.setattr("pyiceberg.catalog._ENV_CONFIG", Config())


def _agree(session: JvmSession, spark_name: str, table: Table, expected: list[Row]) -> None:
    """Iceberg Spark (`spark_name`) reads `expected`, and so does every oracle (given
    `table`, loaded through its catalog or from its metadata file) that reads the table's
    shape (polars refuses the partition-scoped position delete files of a v2 delete)."""
    assert agreed_rows(session, table, spark_name) == expected


def _spark_goes_on(
    session: JvmSession, spark_name: str, load: Any, expected: list[Row]
) -> list[Row]:
    """Iceberg Spark deletes and inserts through its catalog; every reader agrees."""
    session.sql(f"REFRESH TABLE {spark_name}")
    session.sql(f"DELETE FROM {spark_name} WHERE id % 9 = 4")
    session.sql(f"INSERT INTO {spark_name} VALUES (500, 'a', DATE'2024-01-02', 7)")
    new = {"id": 500, "cat": "a", "d": dt.date(2024, 1, 2), "v": 7}
    expected = sorted([r for r in expected if r["id"] % 9 != 4] + [new], key=lambda r: r["id"])
    _agree(session, spark_name, load(), expected)
    return expected


def _delete_then_rewrite(
    session: JvmSession, table_args: list[str], spark_name: str, load: Any, rows: list[Row]
) -> list[Row]:
    """`dvtool delete`, then `optimize --rewrite-deletes`, each read back by every reader."""
    expected = [r for r in rows if not _matches(r)]
    doc = cli_json("delete", *table_args, "--where", WHERE)
    assert doc["metrics"]["numDeletedRows"] == len(rows) - len(expected)
    _agree(session, spark_name, load(), expected)
    doc = cli_json("optimize", *table_args, "--rewrite-deletes")
    assert doc["operation"] == "rewrite-deletes"
    _agree(session, spark_name, load(), expected)
    if load().metadata.format_version == 2:
        assert doc["snapshot_id"] is not None
        _one_position_file_per_partition(load())
    _one_dv_per_data_file(session, spark_name)
    verify = cli_json("inspect", *table_args, "--verify")
    assert verify["verify"]["problems"] == [], verify["verify"]
    return expected


def _one_dv_per_data_file(session: JvmSession, spark_name: str) -> None:
    """No data file has two deletion vectors (Iceberg Spark's `delete_files`)."""
    session.sql(f"REFRESH TABLE {spark_name}")
    rows = session.rows(
        f"SELECT referenced_data_file AS target FROM {spark_name}.delete_files "
        "WHERE file_format = 'PUFFIN'"
    )
    targets = [r["target"] for r in rows]
    assert len(targets) == len(set(targets)), targets


def _one_position_file_per_partition(table: Table) -> None:
    files = table.inspect.delete_files().to_pylist()
    partitions = [json.dumps(f["partition"], sort_keys=True, default=str) for f in files]
    assert files and len(partitions) == len(set(partitions)), partitions


# -- through the SQL and REST catalogs ------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3])
def test_delete_and_rewrite_through_catalogs(
    version: int,
    iceberg_sql_catalog: CatalogTable,
    iceberg_rest_catalog: CatalogTable,
    iceberg_spark: JvmSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalogs = [iceberg_sql_catalog, iceberg_rest_catalog]
    _configure(catalogs, tmp_path / "pyiceberg-home", monkeypatch)
    for catalog in catalogs:
        spec = TableSpec(f"writes_v{version}", version, "cat", STEPS)
        identifier, _ = build_in_catalog(iceberg_spark, catalog.name, spec)
        spark_name = f"{catalog.name}.{identifier}"

        def load(catalog: CatalogTable = catalog, identifier: str = identifier) -> Table:
            return load_catalog(catalog.name, **catalog.properties).load_table(identifier)

        args = ["--catalog", catalog.name, identifier]
        expected = _delete_then_rewrite(iceberg_spark, args, spark_name, load, expected_rows(spec))
        _spark_goes_on(iceberg_spark, spark_name, load, expected)
        verify = cli_json("inspect", *args, "--verify")
        assert verify["verify"]["problems"] == [], (catalog.name, verify["verify"])


# -- a path table on the S3 emulator --------------------------------------------------------


def _copy_to_s3(session: JvmSession, entry: dict[str, Any], s3: S3Server, prefix: str) -> str:
    """The fixture table copied to `s3://bucket/prefix` (its paths rewritten by Iceberg's
    `rewrite_table_path`, the files uploaded, a version hint); returns the table URI."""
    target = s3.uri(prefix)
    stage = session.workdir / f"{prefix.replace('/', '_')}.staging"  # not beside the fixture
    catalog, name = entry["table"].split(".", 1)
    answer = session.rows(
        f"CALL {catalog}.system.rewrite_table_path(table => '{name}',"
        f" source_prefix => '{entry['location']}', target_prefix => '{target}',"
        f" staging_location => '{stage}/')"
    )[0]
    client = s3.client()
    for line in Path(answer["file_list_location"]).read_text().splitlines():
        source, destination = line.split(",")
        key = destination.removeprefix(f"s3://{s3.bucket}/")
        body = Path(source.removeprefix("file:")).read_bytes()
        client.put_object(Bucket=s3.bucket, Key=key, Body=body)
    shutil.rmtree(stage)
    version = answer["latest_version"][1:].split(".")[0]
    client.put_object(Bucket=s3.bucket, Key=f"{prefix}/metadata/version-hint.text", Body=version)
    return target


def _s3_metadata(s3: S3Server, prefix: str) -> str:
    """The newest `vN.metadata.json` of the path table under `prefix` (by listing)."""
    names = [k for k in s3.keys(f"{prefix}/metadata") if k.endswith(".metadata.json")]
    newest = max(names, key=lambda k: int(k[1:].split(".")[0]))
    return s3.uri(f"{prefix}/metadata/{newest}")


@pytest.mark.parametrize("name", ["v2_part", "v3_part"])
def test_delete_and_rewrite_a_path_table_on_s3(
    name: str,
    iceberg_tables: dict[str, Any],
    iceberg_s3_table: CatalogTable,
    iceberg_spark: JvmSession,
    s3_server: S3Server,
) -> None:
    entry = iceberg_tables[name]
    prefix = f"iceberg-path-tables/{name}"
    uri = _copy_to_s3(iceberg_spark, entry, s3_server, prefix)
    io = s3_properties(s3_server)
    registered: list[str] = []

    def load() -> Table:
        """The table at its newest metadata file, registered anew in Spark's `s3cat`
        (a catalog table names one metadata file: each dvtool commit makes a new one)."""
        metadata = _s3_metadata(s3_server, prefix)
        spark_name = f"{NAMESPACE}.s3_{name}_{len(registered)}"
        iceberg_spark.sql(
            f"CALL s3cat.system.register_table(table => '{spark_name}', "
            f"metadata_file => '{metadata}')"
        )
        registered.append(f"s3cat.{spark_name}")
        return StaticTable.from_metadata(metadata, properties=io)

    args = [uri, *s3_server.cli_options()]
    table = load()
    _agree(iceberg_spark, registered[-1], table, entry["expected"])  # the copy reads right
    expected = [r for r in entry["expected"] if not _matches(r)]
    doc = cli_json("delete", *args, "--where", WHERE)
    assert doc["metrics"]["numDeletedRows"] == len(entry["expected"]) - len(expected)
    table = load()
    _agree(iceberg_spark, registered[-1], table, expected)
    doc = cli_json("optimize", *args, "--rewrite-deletes")
    table = load()
    _agree(iceberg_spark, registered[-1], table, expected)
    if entry["format_version"] == 2:
        assert doc["snapshot_id"] is not None
        _one_position_file_per_partition(table)
    _one_dv_per_data_file(iceberg_spark, registered[-1])
    verify = cli_json("inspect", *args, "--verify")
    assert verify["verify"]["problems"] == [], verify["verify"]
    # Spark goes on writing the table through its catalog (S3FileIO).
    spark_name = registered[-1]
    catalog = load_catalog(iceberg_s3_table.name, **iceberg_s3_table.properties)
    _spark_goes_on(
        iceberg_spark, spark_name, lambda: catalog.load_table(spark_name.split(".", 1)[1]), expected
    )


# -- faults at the REST commit ----------------------------------------------------------------


def test_rest_commit_failure_then_lost_answer(
    iceberg_rest_catalog: CatalogTable,
    iceberg_spark: JvmSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A REST commit that fails lands nothing and leaves no file of its own; one whose
    answer is lost (the server applied it, the answer timed out) is resolved by reading
    the table back: it landed, exit 0."""
    catalog = iceberg_rest_catalog
    _configure([catalog], tmp_path / "pyiceberg-home", monkeypatch)
    spec = TableSpec("rest_faults", 3, "cat", STEPS)
    identifier, _ = build_in_catalog(iceberg_spark, catalog.name, spec)
    spark_name = f"{catalog.name}.{identifier}"

    def load() -> Table:
        return load_catalog(catalog.name, **catalog.properties).load_table(identifier)

    folder = Path(load().metadata.location.removeprefix("file:"))
    before = expected_rows(spec)
    args = ["delete", "--catalog", catalog.name, identifier, "--where", WHERE]

    files = table_tree(folder)
    code, stderr = _run_with_fault(args, "commit:fail", tmp_path / "fail.log")
    assert code not in (0, 70) and "Traceback" not in stderr, stderr
    _agree(iceberg_spark, spark_name, load(), before)
    assert table_tree(folder) == files  # the failed commit's files were deleted

    code, stderr = _run_with_fault(args, "commit:timeout", tmp_path / "timeout.log")
    assert code == 0, stderr
    _agree(iceberg_spark, spark_name, load(), [r for r in before if not _matches(r)])
    assert unreferenced(folder, load().metadata_location) == set()


def _run_with_fault(args: list[str], rule: str, log: Path) -> tuple[int, str]:
    """`python -m dvtool ARGS` with the fault `rule` armed; its exit code and stderr."""
    env = {**os.environ, faults.ENV: rule, faults.LOG_ENV: str(log)}
    proc = subprocess.run(
        [sys.executable, "-m", "dvtool", *args], env=env, capture_output=True, text=True
    )
    assert log.read_text().split() == rule.split(":"), "the fault never fired"
    return proc.returncode, proc.stderr
