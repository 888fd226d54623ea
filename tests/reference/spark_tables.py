"""Tables written by Delta Spark's own DML, and what Delta Spark says about them.

Each `Shape` builds one small table (hundreds of rows, a few files per commit) through the
reference engine's SQL only: CREATE, INSERT (`REPARTITION` hints for several files), DELETE,
UPDATE and MERGE with deletion vectors on (UPDATE and MERGE write DVs *and* new files in one
commit), ALTER TABLE for the features that change over a table's life. Tests build each shape
once per module and copy it for every check (`copy_table`).

The readers here are Delta Spark's: `spark_rows` (with `_metadata.row_id` and
`_metadata.row_commit_version` on row-tracking tables), `spark_counts` (its snapshot's files,
records and DVs) and `spark_history`. Nothing here imports dvtool.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.engines.jvm_engines import JvmSession

Row = dict[str, Any]

DV_ON = "'delta.enableDeletionVectors' = 'true'"
ROW_TRACKING = "'delta.enableRowTracking' = 'true'"


def ref(path: Path) -> str:
    """The path-table reference Delta Spark takes."""
    return f"delta.`{path}`"


@dataclass(frozen=True)
class Shape:
    """A table built by Delta Spark: how, and what the tests may ask of it.

    `delete_where` is a predicate both dvtool and Delta Spark delete by; `restore_to` the
    version both restore; `row_tracking` whether `_metadata.row_id` is readable."""

    name: str
    build: Callable[[JvmSession, Path], None]
    row_tracking: bool
    delete_where: str
    restore_to: int


def _insert(spark: JvmSession, path: Path, select: str, files: int) -> None:
    spark.sql(f"INSERT INTO {ref(path)} SELECT /*+ REPARTITION({files}) */ {select}")


def _create(spark: JvmSession, path: Path, layout: str, select: str, files: int) -> None:
    """CREATE TABLE ... AS SELECT (version 0) in `files` files; `layout` is what goes between
    `USING delta` and `AS` (partitioning, clustering, TBLPROPERTIES)."""
    spark.sql(
        f"CREATE TABLE {ref(path)} USING delta {layout} "
        f"AS SELECT /*+ REPARTITION({files}) */ {select}"
    )


def _dml(spark: JvmSession, path: Path, key: str, value: str) -> None:
    """DELETE, UPDATE and MERGE (matched delete, matched update, not-matched insert): with
    DVs on, each marks rows deleted in existing files; UPDATE and MERGE also add files."""
    t = ref(path)
    spark.sql(f"DELETE FROM {t} WHERE {key} % 7 = 0")
    spark.sql(f"UPDATE {t} SET {value} = {value} + 1000 WHERE {key} % 11 = 1")
    spark.sql(
        f"MERGE INTO {t} AS t USING (SELECT /*+ REPARTITION(2) */ id AS {key}, "
        f"CAST(id * 3 AS INT) AS {value} FROM range(280, 380)) AS s ON t.{key} = s.{key} "
        f"WHEN MATCHED AND s.{key} % 3 = 0 THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET t.{value} = s.{value} "
        f"WHEN NOT MATCHED THEN INSERT ({key}, {value}) VALUES (s.{key}, s.{value})"
    )


def build_clustered(spark: JvmSession, path: Path) -> None:
    """`CLUSTER BY`, row tracking, change data feed: created, appended to, OPTIMIZE
    (clusters the files), then DELETE / UPDATE / MERGE with DVs (v0-5)."""
    select = "id, CAST(id % 13 AS INT) AS k, CAST(id AS INT) AS v FROM range(200)"
    layout = (
        f"CLUSTER BY (k) TBLPROPERTIES ({DV_ON}, {ROW_TRACKING}, "
        "'delta.enableChangeDataFeed' = 'true')"
    )
    _create(spark, path, layout, select, 3)
    _insert(spark, path, "id, CAST(id % 13 AS INT), CAST(id AS INT) FROM range(200, 320)", 2)
    spark.sql(f"OPTIMIZE {ref(path)}")
    _dml(spark, path, "id", "v")


def build_partitioned_name_mapping(spark: JvmSession, path: Path) -> None:
    """Partitioned, column mapping `name`, type widening and row tracking: DVs written, then
    a column renamed, one dropped, `n` widened INT -> BIGINT and written with values beyond
    INT, then DELETE / UPDATE / MERGE with DVs (v0-8). The MERGE inserts rows with a NULL
    partition value. No change data feed: Delta Spark refuses DML on a CDF
    table after RENAME / DROP COLUMN (DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION)."""
    t = ref(path)
    layout = (
        f"PARTITIONED BY (part) TBLPROPERTIES ({DV_ON}, {ROW_TRACKING}, "
        "'delta.columnMapping.mode' = 'name', 'delta.enableTypeWidening' = 'true')"
    )
    select = (
        "id, CAST(id AS INT) AS n, concat('s', id) AS s, id / 4 AS d, "
        "concat('p', id % 3) AS part FROM range(300)"
    )
    _create(spark, path, layout, select, 2)
    spark.sql(f"DELETE FROM {t} WHERE id % 9 = 4")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN s TO label")
    spark.sql(f"ALTER TABLE {t} DROP COLUMN d")
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN n TYPE BIGINT")
    select = "id, id * 100000000, concat('w', id), concat('p', id % 3) FROM range(300, 340)"
    _insert(spark, path, select, 1)
    _dml(spark, path, "id", "n")


def build_id_mapping_v2_toggled(spark: JvmSession, path: Path) -> None:
    """Column mapping `id`, row tracking, V2 checkpoints every 2 commits, and
    `delta.enableDeletionVectors` turned on, off, on and off again: DELETE and UPDATE with
    DVs, a copy-on-write DELETE, a MERGE with DVs, then DVs off with DVs still live (v0-7)."""
    t = ref(path)
    layout = (
        f"TBLPROPERTIES ({DV_ON}, {ROW_TRACKING}, 'delta.columnMapping.mode' = 'id', "
        "'delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2')"
    )
    select = "id, CAST(id % 5 AS INT) AS g, concat('s', id) AS s FROM range(300)"
    _create(spark, path, layout, select, 3)
    spark.sql(f"DELETE FROM {t} WHERE id % 7 = 0")
    spark.sql(f"UPDATE {t} SET g = g + 1000 WHERE id % 11 = 1")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    spark.sql(f"DELETE FROM {t} WHERE id % 13 = 2")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ({DV_ON})")
    spark.sql(
        f"MERGE INTO {t} AS t USING (SELECT /*+ REPARTITION(2) */ id, CAST(id AS INT) AS g "
        "FROM range(250, 350)) AS s ON t.id = s.id "
        "WHEN MATCHED AND s.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.g = s.g "
        "WHEN NOT MATCHED THEN INSERT (id, g) VALUES (s.id, s.g)"
    )
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")


SHAPES = {
    shape.name: shape
    for shape in (
        Shape(
            "partitioned-name-mapping",
            build_partitioned_name_mapping,
            True,
            "n > 1100 OR label IS NULL",
            4,
        ),
        Shape("clustered", build_clustered, True, "k = 4 OR id > 300", 3),
        Shape("id-mapping-v2-dv-toggled", build_id_mapping_v2_toggled, True, "g = 3", 2),
    )
}

# A built shape: its definition and the root of the table Delta Spark made.
SparkWritten = tuple[Shape, Path]


def copy_table(source: Path, dest: Path) -> Path:
    """A copy of a built table at `dest` (a fresh directory)."""
    shutil.copytree(source, dest)
    return dest


def spark_rows(
    spark: JvmSession, *paths: Path, row_tracking: bool, version: int | None = None
) -> list[list[Row]]:
    """The rows of each table (at `version`, else the latest) as Delta Spark reads them (one
    query for all); on row-tracking tables with `_row_id` and `_row_commit_version` from
    Delta Spark's `_metadata` (the stable values)."""
    extra = (
        ", _metadata.row_id AS _row_id, _metadata.row_commit_version AS _row_commit_version"
        if row_tracking
        else ""
    )
    travel = "" if version is None else f" VERSION AS OF {version}"
    query = " UNION ALL ".join(
        f"SELECT {i} AS _table, *{extra} FROM {ref(path)}{travel}" for i, path in enumerate(paths)
    )
    out: list[list[Row]] = [[] for _ in paths]
    for row in spark.rows(query):
        out[row.pop("_table")].append(row)
    return out


# Delta Spark's own snapshot of the table's files: records from the stats, DV cardinalities.
_COUNTS = """
from pyspark.sql import DataFrame, functions as F
DeltaLog = jvm.org.apache.spark.sql.delta.DeltaLog
DeltaLog.clearCache()
files = DataFrame(
    DeltaLog.forTable(spark._jsparkSession, args["path"]).unsafeVolatileSnapshot()
    .allFiles().toDF(), spark)
row = files.agg(
    F.count("*").alias("num_files"),
    F.sum(F.get_json_object("stats", "$.numRecords").cast("long")).alias("physical_rows"),
    F.coalesce(F.sum("deletionVector.cardinality"), F.lit(0)).alias("deleted_rows"),
    F.count("deletionVector").alias("files_with_dvs"),
).first()
result = row.asDict()
result["logical_rows"] = spark.read.format("delta").load(args["path"]).count()
"""


def spark_counts(spark: JvmSession, path: Path) -> dict[str, int]:
    """Files, physical / logical / deleted rows and files with DVs as Delta Spark's snapshot
    has them (logical rows: its `count()`)."""
    counts: dict[str, int] = spark.python(_COUNTS, path=str(path))
    return counts


_CHECKPOINT = """
DeltaLog = jvm.org.apache.spark.sql.delta.DeltaLog
DeltaLog.clearCache()
provider = DeltaLog.forTable(spark._jsparkSession, args["path"]).unsafeVolatileSnapshot() \\
    .logSegment().checkpointProvider()
result = [provider.version(), provider.topLevelFiles().head().getPath().getName()]
"""


def spark_checkpoint(spark: JvmSession, path: Path) -> tuple[int, str]:
    """The version of the checkpoint Delta Spark's snapshot of the table starts from, and the
    name of its top-level file (`N.checkpoint.UUID.{json,parquet}` for a V2 checkpoint)."""
    version, kind = spark.python(_CHECKPOINT, path=str(path))
    return int(version), str(kind)


def spark_changes(spark: JvmSession, path: Path, version: int) -> list[Row]:
    """The change data feed of commit `version` as Delta Spark reads it (`table_changes`,
    without the commit timestamp)."""
    return spark.rows(
        "SELECT * EXCEPT (_commit_timestamp) "
        f"FROM table_changes_by_path('{path}', {version}, {version})"
    )


_VACUUM_DRY_RUN = """
key = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
old = spark.conf.get(key, None)
spark.conf.set(key, "2")
try:
    rows = spark.sql(f"VACUUM delta.`{args['path']}` RETAIN 0 HOURS DRY RUN").collect()
finally:
    spark.conf.unset(key) if old is None else spark.conf.set(key, old)
result = [row.path for row in rows]
"""


def spark_vacuum_dry_run(spark: JvmSession, path: Path) -> list[str]:
    """What Delta Spark's `VACUUM ... RETAIN 0 HOURS DRY RUN` would delete (files and
    directories). Its listing runs with 2 tasks instead of Spark's default 10,000 (minutes
    on a 2-core machine); the setting is restored afterwards."""
    paths: list[str] = spark.python(_VACUUM_DRY_RUN, path=str(path))
    return paths


def spark_history(spark: JvmSession, path: Path) -> list[Row]:
    """`DESCRIBE HISTORY`: version, operation and engine of each commit, oldest first."""
    code = (
        "rows = spark.sql(f\"DESCRIBE HISTORY delta.`{args['path']}`\").collect();"
        "result = [[r.version, r.operation, r.engineInfo] for r in rows]"
    )
    rows = spark.python(code, path=str(path))
    return [dict(zip(("version", "operation", "engineInfo"), r, strict=True)) for r in sorted(rows)]


_BUILT: dict[str, Path] = {}


def built(spark: JvmSession, root: Path, name: str) -> Path:
    """Shape `name` built once per test session under `root` (read-only by convention: tests
    work on `copy_table` copies)."""
    if name not in _BUILT:
        path = root / name
        SHAPES[name].build(spark, path)
        _BUILT[name] = path
    return _BUILT[name]
