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

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from tests import iceberg_oracles as oracles
from tests.cli_helpers import all_output, run
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import copy_table, latest_metadata, warehouse

Row = dict[str, Any]
NAMESPACE = "dvdelete"
WHERE = "id % 5 = 1 OR v < 0"


def _matches(row: Row) -> bool:
    return bool(row["id"] % 5 == 1 or row["v"] < 0)


def _copy(session: JvmSession, entry: dict[str, Any], name: str) -> tuple[Path, str]:
    """A writable copy in the catalog's warehouse: its folder and Spark name."""
    folder = warehouse(session) / NAMESPACE / name
    assert not folder.exists()
    folder.parent.mkdir(parents=True, exist_ok=True)
    copy_table(session, entry, folder)
    return folder, f"local.{NAMESPACE}.{name}"


def _json(*args: str | Path, code: int = 0) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == code, all_output(result)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _readers_agree(
    session: JvmSession, folder: Path, name: str, expected: list[Row], equality: bool = False
) -> None:
    metadata = latest_metadata(folder)
    for oracle in oracles.ORACLES:
        if equality and oracle in ("pyiceberg", "polars"):
            continue  # they refuse equality deletes: tests/iceberg_oracles.py KNOWN_REFUSALS
        assert oracles.oracle_rows(oracle, metadata) == expected, oracle
    session.sql(f"REFRESH TABLE {name}")
    assert session.rows(f"SELECT * FROM {name} ORDER BY id") == expected


def _verify_clean(folder: Path) -> None:
    doc = _json("inspect", folder, "--verify")
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
    doc = _json("delete", folder, "--where", WHERE)
    deleted = len(entry["expected"]) - len(expected)
    assert doc["metrics"]["numDeletedRows"] == deleted
    assert doc["base_snapshot_id"] == before.snapshot_id
    _readers_agree(iceberg_spark, folder, table, expected)
    _verify_clean(folder)
    _check_snapshot(folder, doc, deleted, before)
    _check_delete_files(folder, entry["format_version"])
    if lineage is not None:  # the rows that stay keep their row ids and sequence numbers
        kept = {r["id"] for r in expected}
        after = _lineage(iceberg_spark, table)
        assert after == [r for r in lineage if r["id"] in kept]
    # Iceberg Spark goes on: a merge-on-read DELETE, then a compaction of every file with deletes.
    iceberg_spark.sql(f"DELETE FROM {table} WHERE id % 7 = 2")
    expected = [r for r in expected if r["id"] % 7 != 2]
    _readers_agree(iceberg_spark, folder, table, expected)
    iceberg_spark.sql(
        f"CALL local.system.rewrite_data_files(table => '{NAMESPACE}.{name}_mor', "
        "options => map('delete-file-threshold', '1'))"
    )
    _readers_agree(iceberg_spark, folder, table, expected)
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


def _check_delete_files(folder: Path, version: int) -> None:
    """v3: at most one DV per data file, no new Parquet position deletes; v2: the new
    position delete files are sorted by (file_path, pos) and carry `file_path` bounds."""
    static = StaticTable.from_metadata(str(latest_metadata(folder)))
    files = static.inspect.delete_files().to_pylist()
    snapshot = static.current_snapshot()
    added = [
        f for f in static.inspect.entries().to_pylist() if f["snapshot_id"] == snapshot.snapshot_id
    ]
    if version >= 3:
        targets = [f["referenced_data_file"] for f in files if f["file_format"] == "PUFFIN"]
        assert len(targets) == len(set(targets))
        assert all(
            e["data_file"]["file_format"] == "PUFFIN"
            for e in added
            if e["data_file"]["content"] == 1
        )
        return
    for e in added:
        if e["data_file"]["content"] != 1 or e["status"] != 1:
            continue
        rows = pq.read_table(e["data_file"]["file_path"].removeprefix("file:")).to_pylist()
        keys = [(r["file_path"], r["pos"]) for r in rows]
        assert keys == sorted(keys)
        bounds = e["data_file"]["lower_bounds"], e["data_file"]["upper_bounds"]
        assert all(2147483546 in dict(b) for b in bounds)


def test_whole_partitions_go_without_delete_files(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    """`cat = 'a'` matches every row of the `cat=a` files of a table partitioned by cat: the
    files are removed from their metrics alone, no delete file is written for them."""
    entry = iceberg_tables["v2_part"]
    folder, table = _copy(iceberg_spark, entry, "v2_part_whole")
    doc = _json("delete", folder, "--where", "cat = 'a'")
    assert doc["files"] and all(c["action"] == "remove" and not c["read"] for c in doc["files"])
    assert doc["metrics"]["numAddedDeleteFiles"] == 0
    expected = [r for r in entry["expected"] if r["cat"] != "a"]
    _readers_agree(iceberg_spark, folder, table, expected)
    _verify_clean(folder)


def test_equality_deleted_rows_are_not_deleted_twice(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    """Rows an equality delete already removed do not count as deleted again."""
    entry = iceberg_tables["v2_equality"]
    folder, table = _copy(iceberg_spark, entry, "v2_equality_mor")
    doc = _json("delete", folder, "--where", "id < 60")
    expected = [r for r in entry["expected"] if r["id"] >= 60]
    assert doc["metrics"]["numDeletedRows"] == len(entry["expected"]) - len(expected)
    _readers_agree(iceberg_spark, folder, table, expected, equality=True)


def test_dry_run_writes_nothing(iceberg_tables: dict[str, Any], iceberg_spark: JvmSession) -> None:
    entry = iceberg_tables["v3_part"]
    folder, _ = _copy(iceberg_spark, entry, "v3_part_dry")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    doc = _json("delete", folder, "--where", WHERE, "--dry-run")
    assert doc["dry_run"] and doc["snapshot_id"] is None
    assert doc["metrics"]["numDeletedRows"] == sum(map(_matches, entry["expected"]))
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before


def test_nothing_matched_commits_nothing(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    entry = iceberg_tables["v2_flat"]
    folder, _ = _copy(iceberg_spark, entry, "v2_flat_none")
    before = latest_metadata(folder)
    doc = _json("delete", folder, "--where", "id < 0")
    assert doc["snapshot_id"] is None and doc["files"] == []
    assert latest_metadata(folder) == before
