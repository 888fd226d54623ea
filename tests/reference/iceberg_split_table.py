"""The Iceberg table of the split-compaction tests, written by Iceberg Spark.

A v3 table partitioned by `cat`: in `a` one file of 30,000 rows (about 300 KB), in `b` six
small files (20 rows each) and a file of 30,000 rows, with deletion vectors on the rows `id
% 7 = 0`, in `c` two small files. With a target size of a fifth of the large file's (about
60 KB), the large files are far above the maximum (180%), and a new file's share is well
above Java's 5 KiB split overhead times the other new files (so Java's `expectedOutputFiles`
is the count of splits: `iceberg_binpack`'s docstring):
tests/reference/test_iceberg_split_compaction.py and test_iceberg_spark_engine.py compact
it.
"""

from __future__ import annotations

from pathlib import Path

from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import warehouse

NAMESPACE = "dvsplit"
BIG = 30_000
# v: a hash, so that the rows do not compress away (a large file of some 300 KB)
ROWS = "SELECT id, cat, date_add(DATE'2024-01-01', CAST(id % 4 AS INT)) AS d, xxhash64(id) AS v"


def build_split_table(
    session: JvmSession, name: str, namespace: str = NAMESPACE, big: int = BIG
) -> tuple[Path, str]:
    """The table of the module docstring (`big` rows in each large file), written by Spark:
    its folder and name."""
    table = f"local.{namespace}.{name}"
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS local.{namespace}")
    session.sql(
        f"CREATE TABLE {table} (id BIGINT, cat STRING, d DATE, v BIGINT) USING iceberg "
        "PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='3', "
        "'write.delete.mode'='merge-on-read', 'write.distribution-mode'='none')"
    )

    def insert(lo: int, hi: int, tasks: int, cat: str) -> None:
        """Rows lo..hi-1 in `tasks` Spark tasks, each writing one file per partition."""
        source = f"(SELECT id, {cat} AS cat FROM range({lo}, {hi}, 1, {tasks}))"
        session.sql(f"INSERT INTO {table} {ROWS} FROM {source}")

    insert(0, 2 * big, 2, f"IF(id < {big}, 'a', 'b')")  # a large file in a and in b
    insert(100_000, 100_160, 8, "IF(id < 100120, 'b', 'c')")  # six small in b, two in c
    session.sql(f"DELETE FROM {table} WHERE cat = 'b' AND id % 7 = 0")
    return warehouse(session) / namespace / name, table
