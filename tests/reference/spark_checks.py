"""Comparisons for the Spark-written tables: Delta Spark against the independent readers, and
a dvtool result against Delta Spark's own result on a copy of the same table.

Readers: Delta Spark (`spark_rows`), the oracle of tests/oracles.py (`raw_rows`, and
`row_tracking_rows` for the stable row IDs and commit versions), delta-rs (deltalake's
QueryBuilder) and polars, each on the tables whose reader features it takes (`READERS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from tests.engines.jvm_engines import JvmSession
from tests.oracles import canon, commit_actions, commit_versions, raw_rows, row_tracking_rows
from tests.reference.spark_tables import Shape, spark_history, spark_rows

Row = dict[str, Any]
ROW_TRACKING_COLUMNS = ("_row_id", "_row_commit_version")


def _logical(rows: list[Row]) -> list[Row]:
    return [{k: v for k, v in row.items() if k not in ROW_TRACKING_COLUMNS} for row in rows]


def _deltalake_rows(path: Path) -> list[Row]:
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t")
    return pa.table(result.read_all()).to_pylist()


def _polars_rows(path: Path) -> list[Row]:
    return pl.read_delta(str(path)).to_dicts()


# The independent readers, and the reader features each refuses (deltalake 1.6: "Unsupported
# table features required: [TypeWidening]"; polars: column mapping).
READERS = {
    "deltalake": (_deltalake_rows, {"typeWidening", "typeWidening-preview"}),
    "polars": (_polars_rows, {"columnMapping", "typeWidening", "typeWidening-preview"}),
}


def reader_features(path: Path) -> set[str]:
    """The reader features of the latest protocol action in the JSON commits."""
    features: set[str] = set()
    for version in commit_versions(path):
        for action in commit_actions(path, version):
            if "protocol" in action:
                features = set(action["protocol"].get("readerFeatures") or [])
    return features


def assert_readers_agree(shape: Shape, path: Path, spark_read: list[Row]) -> None:
    """The oracle and the independent readers that take the table's features read the rows
    Delta Spark read (`spark_read`); on row-tracking tables the oracle's stable row IDs and
    commit versions are Delta Spark's `_metadata.row_id` / `row_commit_version`."""
    logical = canon(_logical(spark_read))
    assert canon(raw_rows(path)) == logical, "oracle (raw parquet + DVs)"
    features = reader_features(path)
    for name, (read, refused) in READERS.items():
        if not features & refused:
            assert canon(read(path)) == logical, name
    if shape.row_tracking:
        assert canon(row_tracking_rows(path)) == canon(spark_read), "oracle row tracking"


def assert_same_table(spark: JvmSession, shape: Shape, ours: Path, theirs: Path) -> None:
    """dvtool's result `ours` and Delta Spark's `theirs` hold the same rows (with row IDs and
    row commit versions on row-tracking tables), as Delta Spark reads both; every reader
    agrees on ours."""
    mine, expected = spark_rows(spark, ours, theirs, row_tracking=shape.row_tracking)
    assert canon(mine) == canon(expected)
    assert_readers_agree(shape, ours, mine)


def assert_history_ends_with(spark: JvmSession, path: Path, operations: list[str]) -> None:
    """Delta Spark's `DESCRIBE HISTORY` lists every commit of the log, the last ones being
    dvtool's `operations`."""
    history = spark_history(spark, path)
    assert [h["version"] for h in history] == commit_versions(path)
    last = history[len(history) - len(operations) :]
    assert [h["operation"] for h in last] == operations
    assert all(h["engineInfo"].startswith("dvtool/") for h in last)
