"""`dvtool delete --where` on tables Iceberg Spark wrote, read back by every Iceberg reader.

Each test copies a fixture table (tests/reference/iceberg_tables.py) into the warehouse of
the Iceberg Spark session's Hadoop catalog (`local.dvdelete.<name>`), so Spark reads it by
name and can go on writing it. After dvtool's delete: pyiceberg, DuckDB, polars and Iceberg
Spark read exactly the expected rows (the fixture's rows minus those the predicate selects,
computed in Python); `dvtool inspect --verify` finds nothing wrong; the snapshot is what
Iceberg Java writes for a row-level delete (operation, summary counts, one DV per data file
on v3, sorted position deletes with `file_path` bounds on v2); then Iceberg Spark deletes
more rows and compacts, and every reader still agrees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import latest_metadata
from tests.reference.iceberg_writes import cli_json, copy_into_catalog, readers_agree

Row = dict[str, Any]
NAMESPACE = "dvdelete"
WHERE = "id % 5 = 1 OR v < 0"


def _matches(row: Row) -> bool:
    return bool(row["id"] % 5 == 1 or row["v"] < 0)


def _copy(session: JvmSession, entry: dict[str, Any], name: str) -> tuple[Path, str]:
    return copy_into_catalog(session, entry, NAMESPACE, name)


def _verify_clean(folder: Path) -> None:
    doc = cli_json("inspect", folder, "--verify")
    assert doc["verify"]["problems"] == [], doc["verify"]


def _snapshot(folder: Path) -> Any:
    return StaticTable.from_metadata(str(latest_metadata(folder))).current_snapshot()


CASES = ("v2_flat", "v2_part", "v3_flat", "v3_part", "v3_compacted")


@pytest.mark.parametrize("name", CASES)
def test_delete_then_every_reader_and_spark_agree(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables[name]
    folder, table = _copy(iceberg_spark, entry, f"{name}_mor")
    expected = [r for r in entry["expected"] if not _matches(r)]
    before = _snapshot(folder)
    lineage = _lineage(iceberg_spark, table) if entry["format_version"] >= 3 else None
    doc = cli_json("delete", folder, "--where", WHERE)
    deleted = len(entry["expected"]) - len(expected)
    assert doc["metrics"]["numDeletedRows"] == deleted
    assert doc["base_snapshot_id"] == before.snapshot_id
    readers_agree(iceberg_spark, folder, table, expected)
    _verify_clean(folder)
    _check_snapshot(folder, doc, deleted, before)
    _check_delete_files(iceberg_spark, table, entry["format_version"])
    if lineage is not None:  # the rows that stay keep their row ids and sequence numbers
        kept = {r["id"] for r in expected}
        after = _lineage(iceberg_spark, table)
        assert after == [r for r in lineage if r["id"] in kept]
    # Iceberg Spark goes on: a merge-on-read DELETE, then a compaction of every file with deletes.
    iceberg_spark.sql(f"DELETE FROM {table} WHERE id % 7 = 2")
    expected = [r for r in expected if r["id"] % 7 != 2]
    readers_agree(iceberg_spark, folder, table, expected)
    iceberg_spark.sql(
        f"CALL local.system.rewrite_data_files(table => '{NAMESPACE}.{name}_mor', "
        "options => map('delete-file-threshold', '1'))"
    )
    readers_agree(iceberg_spark, folder, table, expected)
    _verify_clean(folder)


def _lineage(session: JvmSession, table: str) -> list[Row]:
    session.sql(f"REFRESH TABLE {table}")
    return session.rows(
        f"SELECT id, _row_id, _last_updated_sequence_number FROM {table} ORDER BY id"
    )


def _check_snapshot(folder: Path, doc: dict[str, Any], deleted: int, before: Any) -> None:
    """Operation and summary as Iceberg Java's SnapshotSummary fills them."""
    snapshot = _snapshot(folder)
    assert snapshot.snapshot_id == doc["snapshot_id"]
    assert snapshot.parent_snapshot_id == before.snapshot_id
    summary = snapshot.summary
    assert summary.operation.value == "delete"
    removed_files = doc["metrics"]["numRemovedFiles"]
    assert int(summary.get("deleted-data-files", "0")) == removed_files
    removed_rows = sum(c["num_records"] for c in doc["files"] if c["action"] == "remove")
    assert int(summary.get("deleted-records", "0")) == removed_rows
    total = int(before.summary["total-records"]) - removed_rows
    assert int(summary["total-records"]) == total


def _check_delete_files(
    session: JvmSession, table: str, version: int, granularity: str = "file"
) -> None:
    """As Iceberg Spark's metadata tables list them: v3: at most one DV per data file, no
    new Parquet position deletes; v2: the new position delete files are sorted by
    (file_path, pos) and carry `file_path` bounds. (pyiceberg 0.12's `inspect.entries()`
    fails on DV entries.)"""
    session.sql(f"REFRESH TABLE {table}")
    added = session.rows(
        f"SELECT data_file.file_path AS path, data_file.file_format AS format, "
        f"data_file.referenced_data_file AS target, "
        f"data_file.lower_bounds AS lower, data_file.upper_bounds AS upper "
        f"FROM {table}.entries WHERE status = 1 AND data_file.content = 1 "
        f"AND snapshot_id = (SELECT snapshot_id FROM {table}.snapshots "
        f"ORDER BY committed_at DESC LIMIT 1)"
    )
    if version >= 3:
        assert all(e["format"] == "PUFFIN" for e in added)
        live = session.rows(f"SELECT referenced_data_file AS target FROM {table}.delete_files")
        targets = [r["target"] for r in live if r["target"] is not None]
        assert len(targets) == len(set(targets))
        return
    for e in added:
        rows = pq.read_table(e["path"].removeprefix("file:")).to_pylist()
        keys = [(r["file_path"], r["pos"]) for r in rows]
        assert keys == sorted(keys)
        assert 2147483546 in dict(e["lower"]) and 2147483546 in dict(e["upper"])
        targets = {r["file_path"] for r in rows}
        if granularity == "file":  # Iceberg Spark's default: a file per data file
            assert targets == {e["target"]}
        else:
            assert e["target"] == (targets.pop() if len(targets) == 1 else None)


def test_whole_partitions_go_without_delete_files(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    """`cat = 'a'` matches every row of the `cat=a` files of a table partitioned by cat: the
    files are removed from their metrics alone, no delete file is written for them."""
    entry = iceberg_tables["v2_part"]
    folder, table = _copy(iceberg_spark, entry, "v2_part_whole")
    doc = cli_json("delete", folder, "--where", "cat = 'a'")
    assert doc["files"] and all(c["action"] == "remove" and not c["read"] for c in doc["files"])
    assert doc["metrics"]["numAddedDeleteFiles"] == 0
    expected = [r for r in entry["expected"] if r["cat"] != "a"]
    readers_agree(iceberg_spark, folder, table, expected)
    _verify_clean(folder)


def test_partition_granularity_writes_a_file_per_partition(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    """`write.delete.granularity = partition`: one position delete file per partition."""
    entry = iceberg_tables["v2_part"]
    folder, table = _copy(iceberg_spark, entry, "v2_part_granular")
    iceberg_spark.sql(
        f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.granularity' = 'partition')"
    )
    doc = cli_json("delete", folder, "--where", "id % 2 = 0")
    kept = [c for c in doc["files"] if c["action"] == "dv"]
    partitions = {Path(c["path"]).parent for c in kept}
    assert doc["metrics"]["numAddedDeleteFiles"] == len(partitions) < len(kept)
    _check_delete_files(iceberg_spark, table, 2, "partition")
    expected = [r for r in entry["expected"] if r["id"] % 2]
    readers_agree(iceberg_spark, folder, table, expected)


def test_equality_deleted_rows_are_not_deleted_twice(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    """Rows an equality delete already removed do not count as deleted again."""
    entry = iceberg_tables["v2_equality"]
    folder, table = _copy(iceberg_spark, entry, "v2_equality_mor")
    doc = cli_json("delete", folder, "--where", "id < 60")
    expected = [r for r in entry["expected"] if r["id"] >= 60]
    assert doc["metrics"]["numDeletedRows"] == len(entry["expected"]) - len(expected)
    readers_agree(iceberg_spark, folder, table, expected)


def test_dry_run_writes_nothing(iceberg_tables: dict[str, Any], iceberg_spark: JvmSession) -> None:
    entry = iceberg_tables["v3_part"]
    folder, _ = _copy(iceberg_spark, entry, "v3_part_dry")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    doc = cli_json("delete", folder, "--where", WHERE, "--dry-run")
    assert doc["dry_run"] and doc["snapshot_id"] is None
    assert doc["metrics"]["numDeletedRows"] == sum(map(_matches, entry["expected"]))
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before


def test_nothing_matched_commits_nothing(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables["v2_flat"]
    folder, _ = _copy(iceberg_spark, entry, "v2_flat_none")
    before = latest_metadata(folder)
    doc = cli_json("delete", folder, "--where", "id < 0")
    assert doc["snapshot_id"] is None and doc["files"] == []
    assert latest_metadata(folder) == before
