"""`dvtool optimize --rewrite-deletes` and `--convert-equality` on tables Iceberg Spark wrote.

REWRITE is compared with Iceberg Spark's own `rewrite_position_delete_files` on a second
copy: both tables then delete exactly the same (data file, position) pairs, as Spark's
`position_deletes` metadata table lists them, and read the same rows through every reader.
On v2 every partition is left with at most one position delete file; on a table upgraded to
v3 the position delete files become deletion vectors, one per data file. CONVERT leaves no
equality delete file: pyiceberg and polars, which refuse equality deletes, then read the
table too, and agree with DuckDB and Iceberg Spark.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_writes import cli_json, copy_into_catalog, readers_agree

NAMESPACE = "dvoptimize"


def _copy(session: JvmSession, entry: dict[str, Any], name: str) -> tuple[Path, str]:
    return copy_into_catalog(session, entry, NAMESPACE, name)


def _deleted_positions(session: JvmSession, table: str, folder: Path) -> set[tuple[str, int]]:
    """The (data file relative to the table, position) pairs the live deletes name, for
    live data files, as Iceberg Spark lists them."""
    session.sql(f"REFRESH TABLE {table}")
    live = {r["file_path"] for r in session.rows(f"SELECT file_path FROM {table}.data_files")}
    rows = session.rows(f"SELECT file_path, pos FROM {table}.position_deletes")
    prefix = f"{folder}/"
    return {
        (r["file_path"].removeprefix("file:").removeprefix(prefix), r["pos"])
        for r in rows
        if r["file_path"] in live
    }


def _delete_files(session: JvmSession, table: str) -> list[dict[str, Any]]:
    """The live delete files as Iceberg Spark's `delete_files` metadata table lists them."""
    session.sql(f"REFRESH TABLE {table}")
    rows = session.rows(f"SELECT * FROM {table}.delete_files")
    return [{**r, "partition": r.get("partition")} for r in rows]


@pytest.mark.parametrize("name", ["v2_flat", "v2_part"])
def test_rewrite_deletes_equals_iceberg_spark(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    ours, our_table = _copy(iceberg_spark, entry, f"{name}_rw")
    theirs, their_table = _copy(iceberg_spark, entry, f"{name}_rw_spark")
    before = _deleted_positions(iceberg_spark, our_table, ours)
    doc = cli_json("optimize", ours, "--rewrite-deletes")
    assert doc["snapshot_id"] is not None and doc["operation"] == "rewrite-deletes"
    iceberg_spark.sql(
        f"CALL local.system.rewrite_position_delete_files(table => '{NAMESPACE}.{name}_rw_spark',"
        " options => map('rewrite-all', 'true'))"
    )
    after = _deleted_positions(iceberg_spark, our_table, ours)
    spark_result = _deleted_positions(iceberg_spark, their_table, theirs)
    assert after == before == spark_result
    per_partition = Counter(
        (f["spec_id"], json.dumps(f["partition"], default=str, sort_keys=True))
        for f in _delete_files(iceberg_spark, our_table)
        if f["content"] == 1
    )
    assert set(per_partition.values()) <= {1}
    readers_agree(iceberg_spark, ours, our_table, entry["expected"])
    again = cli_json("optimize", ours, "--rewrite-deletes")
    assert again["snapshot_id"] is None  # nothing left to combine


def test_rewrite_deletes_on_a_table_upgraded_to_v3_makes_dvs(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables["v2_part"]
    folder, table = _copy(iceberg_spark, entry, "v2_part_to_v3")
    before = _deleted_positions(iceberg_spark, table, folder)
    iceberg_spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('format-version'='3')")
    doc = cli_json("optimize", folder, "--rewrite-deletes")
    assert doc["format_version"] == 3 and doc["snapshot_id"] is not None
    files = _delete_files(iceberg_spark, table)
    assert files and all(f["file_format"] == "PUFFIN" for f in files)
    targets = [f["referenced_data_file"] for f in files]
    assert len(targets) == len(set(targets))
    assert _deleted_positions(iceberg_spark, table, folder) == before
    readers_agree(iceberg_spark, folder, table, entry["expected"])


@pytest.mark.parametrize("name", ["v2_equality", "v2_flink", "v3_flink_part"])
def test_convert_equality_leaves_no_equality_deletes(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    folder, table = _copy(iceberg_spark, entry, f"{name}_conv")
    doc = cli_json("optimize", folder, "--convert-equality")
    assert doc["snapshot_id"] is not None and doc["metrics"]["convertedRows"] > 0
    assert not [f for f in _delete_files(iceberg_spark, table) if f["content"] == 2]
    readers_agree(iceberg_spark, folder, table, entry["expected"])
    # Spark can go on writing the converted table.
    iceberg_spark.sql(f"DELETE FROM {table} WHERE id % 9 = 4")
    expected = [r for r in entry["expected"] if r["id"] % 9 != 4]
    readers_agree(iceberg_spark, folder, table, expected)


def test_dry_runs_write_nothing(iceberg_tables: dict[str, Any], iceberg_spark: JvmSession) -> None:
    folder, _ = _copy(iceberg_spark, iceberg_tables["v2_equality"], "v2_equality_dry")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    for flag in ("--convert-equality", "--rewrite-deletes"):
        doc = cli_json("optimize", folder, flag, "--dry-run")
        assert doc["dry_run"] and doc["snapshot_id"] is None
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
