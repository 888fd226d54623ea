"""dvtool's Spark engine on Iceberg tables: the same scans and rewrites as the arrow engine.

One local Spark session (dvtool's `SparkEngine`, as tests/engines/test_spark.py makes it)
serves the module, beside the Iceberg Spark session of the fixtures (another process).

- Scans: on the fixture tables (position deletes, DVs, equality deletes) and on a copy of
  `v2_evolved` whose column `v` was renamed to `w` and which gained a column `extra` after
  most of its files were written, the Spark scan finds exactly the arrow scan's new matches
  per data file (rows deleted before never match); the delete it drives (merge-on-read) then
  reads, through every oracle, as the fixture's rows filtered in Python.
- Rewrites: `delete --mode cow` then `optimize --purge` (v3, DVs), and compaction of small
  files (v3), with the Spark engine on one copy and the arrow engine on another give the
  same rows (every oracle), each row the same data sequence number, `_row_id` and
  `_last_updated_sequence_number`; so do they on a compaction that splits files far above the
  maximum size over several new files. (Equality-deleted rows reach a rewrite as positions the
  driver computed, as DVs do: the engines see no difference.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dvtool.commands.delete.command import DeleteRequest
from dvtool.commands.delete.iceberg import run_delete_iceberg, scan_storage
from dvtool.commands.delete.iceberg_plan import parse_predicate, plan_delete, scan_files
from dvtool.commands.optimize.iceberg import IcebergOptimizeRequest, run_optimize_iceberg
from dvtool.engines import SparkSettings
from dvtool.engines.arrow import ArrowEngine
from dvtool.engines.base import Engine
from dvtool.engines.spark.engine import SparkEngine
from dvtool.iceberg.live_files import DeletedBefore, live_files
from dvtool.iceberg.tables import open_iceberg
from tests.engines.jvm_engines import JvmSession
from tests.engines.spark_cluster import DRIVER_CONF
from tests.reference.iceberg_split_table import build_split_table
from tests.reference.iceberg_tables import TableSpec, build_table, delete_multiples, insert
from tests.reference.iceberg_tables import make_rows as fixture_rows
from tests.reference.iceberg_writes import copy_into_catalog, readers_agree

NAMESPACE = "dvspark"
Row = dict[str, Any]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkEngine]:
    engine = SparkEngine(SparkSettings(master="local[2]", conf=DRIVER_CONF))
    try:
        yield engine
    finally:
        engine.stop()


def _matches(folder: str, where: str, engine: Engine) -> dict[str, list[int]]:
    """Per scanned data file, the new matches `engine` finds (the delete's own scan)."""
    table = open_iceberg(folder)
    plan = plan_delete(table, parse_predicate(table, where, None))
    deleted = DeletedBefore(table.io, plan.live.index)
    touched = scan_files(plan, deleted, scan_storage(table, {}), engine, None)
    return {t.file.path: list(t.new_rows) for t in touched}


SCANS = {
    "v2_part": "v % 3 = 0 OR cat = 'b'",
    "v3_part": "d >= DATE'2024-01-03' AND id % 2 = 0",
    "v2_equality": "id % 4 = 3 OR id = 50",  # 3, 50 and 79 are equality-deleted
}


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scans_find_the_arrow_matches(
    name: str, iceberg_tables: dict[str, Any], spark: SparkEngine
) -> None:
    """Read-only: the fixture table itself is scanned, nothing is written."""
    folder = iceberg_tables[name]["location"]
    ours = _matches(folder, SCANS[name], spark)
    assert ours and ours == _matches(folder, SCANS[name], ArrowEngine())


def test_scan_and_delete_after_a_rename_and_a_new_column(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, spark: SparkEngine
) -> None:
    entry = iceberg_tables["v2_evolved"]
    folder, table = copy_into_catalog(iceberg_spark, entry, NAMESPACE, "evolved_renamed")
    iceberg_spark.sql(f"ALTER TABLE {table} RENAME COLUMN v TO w")
    iceberg_spark.sql(f"ALTER TABLE {table} ADD COLUMN extra BIGINT")
    iceberg_spark.sql(
        f"INSERT INTO {table} VALUES (1001, 'a', DATE'2024-02-01', 5, 7), "
        "(1002, 'b', DATE'2024-02-02', 6, NULL), (1003, 'c', DATE'2024-02-03', 700, 8)"
    )
    where = "(w > 300 AND extra IS NULL) OR extra = 8 OR id % 7 = 1"
    ours = _matches(str(folder), where, spark)
    assert ours == _matches(str(folder), where, ArrowEngine())
    assert len(ours) > 1  # files from before and after the rename

    rows = [
        {"id": r["id"], "cat": r["cat"], "d": r["d"], "w": r["v"], "extra": None}
        for r in entry["expected"]
    ]
    rows += [
        {"id": 1001, "cat": "a", "d": dt.date(2024, 2, 1), "w": 5, "extra": 7},
        {"id": 1002, "cat": "b", "d": dt.date(2024, 2, 2), "w": 6, "extra": None},
        {"id": 1003, "cat": "c", "d": dt.date(2024, 2, 3), "w": 700, "extra": 8},
    ]

    def matches(r: Row) -> bool:
        extra = r["extra"]
        return (
            (r["w"] is not None and r["w"] > 300 and extra is None)
            or extra == 8
            or r["id"] % 7 == 1
        )

    result = run_delete_iceberg(
        open_iceberg(str(folder)),
        DeleteRequest(where, "dv"),
        scan_storage(open_iceberg(str(folder)), {}),
        engine=spark,
    )
    assert result.snapshot_id is not None and result.files_scanned > 0
    readers_agree(iceberg_spark, folder, table, [r for r in rows if not matches(r)])


# -- rewrites: Spark and arrow on two copies -------------------------------------------------


def _lineage(session: JvmSession, table: str, version: int) -> list[Row]:
    """Per row: its data file's data sequence number, and in v3 its row lineage."""
    session.sql(f"REFRESH TABLE {table}")
    sequences = {
        r["path"]: r["seq"]
        for r in session.rows(
            f"SELECT data_file.file_path AS path, sequence_number AS seq FROM {table}.entries "
            "WHERE status < 2 AND data_file.content = 0"
        )
    }
    lineage = ", _row_id, _last_updated_sequence_number" if version >= 3 else ""
    rows = session.rows(f"SELECT id, _file{lineage} FROM {table} ORDER BY id")
    return [{**r, "_file": sequences[r["_file"]]} for r in rows]


def _two_copies(
    session: JvmSession, entry: dict[str, Any], name: str
) -> dict[str, tuple[Path, str]]:
    return {
        engine: copy_into_catalog(session, entry, NAMESPACE, f"{name}_{engine}")
        for engine in ("arrow", "spark")
    }


ENGINES = ("arrow", "spark")


def _engines(spark: SparkEngine) -> dict[str, Engine]:
    return {"arrow": ArrowEngine(), "spark": spark}


def test_compaction_on_spark_equals_arrow(iceberg_spark: JvmSession, spark: SparkEngine) -> None:
    inserts = tuple(insert(fixture_rows(i * 6, i * 6 + 6)) for i in range(6))
    spec = TableSpec("small_files", 3, "cat", (*inserts, delete_multiples(7)))
    built = build_table(iceberg_spark, spec, NAMESPACE)
    expected = [{**r, "d": dt.date.fromisoformat(r["d"])} for r in built["expected"]]
    copies = {
        "arrow": (Path(built["location"]), built["table"]),
        "spark": copy_into_catalog(iceberg_spark, built, NAMESPACE, "small_files_spark"),
    }
    for engine_name, engine in _engines(spark).items():
        folder, _ = copies[engine_name]
        request = IcebergOptimizeRequest("compact")
        result = run_optimize_iceberg(open_iceberg(str(folder)), request, lambda n, e=engine: e)
        assert result.engine == engine_name and result.metrics["addedDataFiles"] == 3
    folder, table = copies["spark"]
    readers_agree(iceberg_spark, folder, table, expected)
    assert _lineage(iceberg_spark, table, 3) == _lineage(iceberg_spark, copies["arrow"][1], 3)


def test_cow_delete_then_purge_on_spark_equal_arrow(
    iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, spark: SparkEngine
) -> None:
    """v3 (DVs): a copy-on-write delete (its new files get the commit's sequence number),
    then a purge of the files that still have DVs (they keep theirs)."""
    entry = iceberg_tables["v3_part"]
    copies = _two_copies(iceberg_spark, entry, "v3_part_cow")
    where = "id % 5 = 2 OR v > 7000"
    for engine_name, engine in _engines(spark).items():
        folder, _ = copies[engine_name]
        table = open_iceberg(str(folder))
        deleted = run_delete_iceberg(
            table, DeleteRequest(where, "cow"), scan_storage(table, {}), engine=engine
        )
        assert deleted.mode == "cow" and deleted.metrics["numAddedDataFiles"] > 0
        purge = IcebergOptimizeRequest("purge")
        purged = run_optimize_iceberg(open_iceberg(str(folder)), purge, lambda n, e=engine: e)
        assert purged.engine == engine_name and purged.metrics["addedDataFiles"] > 0
    expected = [r for r in entry["expected"] if not (r["id"] % 5 == 2 or r["v"] > 7000)]
    folder, table_name = copies["spark"]
    readers_agree(iceberg_spark, folder, table_name, expected)
    arrow_table = copies["arrow"][1]
    assert _lineage(iceberg_spark, table_name, 3) == _lineage(iceberg_spark, arrow_table, 3)


def test_split_compaction_on_spark_equals_arrow(
    iceberg_spark: JvmSession, spark: SparkEngine
) -> None:
    """Files far above the maximum size (tests/reference/test_iceberg_split_compaction.py's
    table) split over several new files: the Spark engine writes each as its own task, from
    its row ranges, the files the arrow engine writes."""
    copies = {e: build_split_table(iceberg_spark, f"split_{e}", NAMESPACE, 5000) for e in ENGINES}
    expected = iceberg_spark.rows(f"SELECT * FROM {copies['arrow'][1]} ORDER BY id")
    added = {}
    for engine_name, engine in _engines(spark).items():
        folder, _ = copies[engine_name]
        table = open_iceberg(str(folder))
        target = max(f.entry.file_size_in_bytes for f in live_files(table).data) // 5
        request = IcebergOptimizeRequest("compact", target_size=target)
        result = run_optimize_iceberg(table, request, lambda n, e=engine: e)
        assert result.engine == engine_name
        added[engine_name] = result.metrics["addedDataFiles"]
    assert added["spark"] == added["arrow"] > 7
    table_name = copies["spark"][1]  # every reader: test_iceberg_split_compaction.py (arrow)
    assert iceberg_spark.rows(f"SELECT * FROM {table_name} ORDER BY id") == expected
    arrow_table = copies["arrow"][1]
    assert _lineage(iceberg_spark, table_name, 3) == _lineage(iceberg_spark, arrow_table, 3)
