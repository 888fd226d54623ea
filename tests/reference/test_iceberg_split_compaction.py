"""Compaction of files above the maximum size, against Iceberg Java's planner and Spark's
`rewrite_data_files`.

A v3 table partitioned by `cat` (tests/reference/iceberg_split_table.py), built twice by
Iceberg Spark the same way: in `a` one file far above 180% of a small `--target-size`, in
`b` six small files and such a large file (with deletion vectors on some rows), in `c` two
small files (left alone). Oracles:

- Iceberg Java's own planner (`BinPackRewriteFilePlanner`, called through the JVM on the
  table with the same target): the groups (which files, per partition) and each group's
  `expectedOutputFiles`: dvtool's dry run plans the same files into that many new files
  (at these sizes the count of Java's read splits, see `iceberg_binpack`), and commits
  that many;
- Spark's `rewrite_data_files` on the twin table: the same files replaced (by partition and
  record count), the new files at the starting snapshot's sequence number; Spark's own file
  count follows its writer's rolling (see `iceberg_binpack`'s docstring), not compared;
- every reader (pyiceberg, DuckDB, Spark) reads the rows Spark read before, and each row
  keeps its `_row_id` and `_last_updated_sequence_number` (v3 row lineage), in both tables.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from dvtool.iceberg.tables import open_iceberg
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_split_table import BIG, NAMESPACE, build_split_table
from tests.reference.iceberg_writes import cli_json, readers_agree

LINEAGE = "SELECT id, _row_id, _last_updated_sequence_number FROM {t} ORDER BY id"

JAVA_PLAN = """
import json
I = jvm.org.apache.iceberg
table = I.hadoop.HadoopTables(spark.sparkContext._jsc.hadoopConfiguration()).load(args["location"])
planner = I.actions.BinPackRewriteFilePlanner(table)
options = jvm.java.util.HashMap()
options.put("target-file-size-bytes", str(args["target"]))
planner.init(options)
groups = []
tasks = planner.plan().groups().iterator()
while tasks.hasNext():
    group = tasks.next()
    files = [t.file().location() for t in group.fileScanTasks()]
    groups.append({"files": files, "outputs": group.expectedOutputFiles()})
result = json.dumps(groups)
"""


def _data_files(session: JvmSession, table: str) -> dict[str, dict[str, Any]]:
    """The live data files: path -> partition, records, sequence number."""
    session.sql(f"REFRESH TABLE {table}")
    rows = session.rows(
        f"SELECT data_file.file_path AS path, data_file.partition.cat AS cat, "
        f"data_file.record_count AS n, data_file.file_size_in_bytes AS size, "
        f"sequence_number AS seq FROM {table}.entries "
        "WHERE status < 2 AND data_file.content = 0"
    )
    return {r["path"].removeprefix("file:"): r for r in rows}


def _replaced(before: dict[str, Any], after: dict[str, Any]) -> Counter[tuple[str, int]]:
    return Counter((f["cat"], f["n"]) for p, f in before.items() if p not in after)


def _added(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for p, f in after.items() if p not in before]


def _java_plan(session: JvmSession, folder: Path, target: int) -> dict[str, Any]:
    """Java's groups by partition: their files (names) and expected output files."""
    groups = json.loads(session.python(JAVA_PLAN, location=str(folder), target=target))
    plan: dict[str, Any] = {}
    for group in groups:
        cat = Path(group["files"][0]).parent.name.removeprefix("cat=")
        names = {Path(f).name for f in group["files"]}
        known = plan.setdefault(cat, {"files": set(), "outputs": 0})
        known["files"] |= names
        known["outputs"] += group["outputs"]
    return plan


def _our_plan(dry: dict[str, Any]) -> dict[str, Any]:
    plan: dict[str, Any] = {}
    for b in dry["bins"]:
        known = plan.setdefault(b["partition"][0], {"files": set(), "outputs": 0})
        known["files"] |= {Path(f).name for f in b["files"]}
        known["outputs"] += len(b["outputs"])
    return plan


def test_large_files_split_as_iceberg_java_plans(iceberg_spark: JvmSession) -> None:
    ours, our_table = build_split_table(iceberg_spark, "split")
    _, their_table = build_split_table(iceberg_spark, "split_spark")
    expected = iceberg_spark.rows(f"SELECT * FROM {our_table} ORDER BY id")
    lineage = iceberg_spark.rows(LINEAGE.format(t=our_table))
    assert lineage == iceberg_spark.rows(LINEAGE.format(t=their_table))
    before, their_before = (
        _data_files(iceberg_spark, our_table),
        _data_files(iceberg_spark, their_table),
    )
    assert Counter(f["cat"] for f in before.values()) == {"a": 1, "b": 7, "c": 2}
    big = max(f["size"] for f in before.values() if f["cat"] == "a")
    target = big // 5  # the large files are far above 180% of it
    assert target > 50_000, big  # see iceberg_split_table: a new file's share >> 5 KiB
    snapshot = open_iceberg(str(ours)).metadata.current_snapshot()
    assert snapshot is not None
    starting = snapshot.sequence_number

    java = _java_plan(iceberg_spark, ours, target)
    dry = cli_json("optimize", ours, "--dry-run", "--target-size", str(target))
    assert _our_plan(dry) == java
    assert set(java) == {"a", "b"} and java["a"]["outputs"] >= 4

    doc = cli_json("optimize", ours, "--target-size", str(target))
    assert doc["metrics"]["addedDataFiles"] == sum(g["outputs"] for g in java.values())
    iceberg_spark.sql(
        f"CALL local.system.rewrite_data_files(table => '{NAMESPACE}.split_spark', "
        f"options => map('target-file-size-bytes', '{target}'))"
    )
    after, their_after = (
        _data_files(iceberg_spark, our_table),
        _data_files(iceberg_spark, their_table),
    )
    assert _replaced(before, after) == _replaced(their_before, their_after)
    added = _added(before, after)
    assert Counter(f["cat"] for f in added) == {c: g["outputs"] for c, g in java.items()}
    assert (
        {f["seq"] for f in added}
        == {starting}
        == {f["seq"] for f in _added(their_before, their_after)}
    )
    a_rows = sorted(f["n"] for f in added if f["cat"] == "a")  # one file cut by rows:
    assert a_rows[-1] - a_rows[1] <= 1 and sum(a_rows) == BIG  # all but the last alike

    readers_agree(iceberg_spark, ours, our_table, expected)
    assert iceberg_spark.rows(f"SELECT * FROM {their_table} ORDER BY id") == expected
    assert iceberg_spark.rows(LINEAGE.format(t=our_table)) == lineage
    assert iceberg_spark.rows(LINEAGE.format(t=their_table)) == lineage
