"""dvtool maintains what Delta Spark writes (issue 24): inspect, delete and optimize.

The tables are the shapes of tests/reference/spark_tables.py, written by Delta Spark's own
DML with DVs on (DELETE, UPDATE and MERGE, whose commits hold DVs and new files together):
partitioned with column mapping `name` (a rename, a drop), type widening and row tracking;
`CLUSTER BY` with row tracking and CDF; column mapping `id` with row tracking, V2 checkpoints
and DVs turned on and off (off at the end, with DVs live). Each is built once and copied
for every check. Expected values always come from Delta Spark (its reads, snapshot and
history) or from the independent oracle of tests/oracles.py, never from dvtool: a
difference is a bug of ours until PROTOCOL.md shows otherwise.

- `inspect --verify` is clean and its counts are Delta Spark's snapshot's and the oracle's.
- `delete --where P` equals Delta Spark's `DELETE FROM ... WHERE P` on a copy, `optimize
  --purge` its `REORG TABLE ... APPLY (PURGE)`, compaction its `OPTIMIZE`: the same rows,
  and on row-tracking tables the same `_metadata.row_id` / `_metadata.row_commit_version`
  per row. File layouts may differ (the protocol fixes rows and row tracking, not how rows
  are cut into files), so only those are compared.
- Every result is read alike by Delta Spark and the independent readers, and Delta Spark's
  `DESCRIBE HISTORY` lists the dvtool commit.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import dvtool
from tests.cli_helpers import run
from tests.engines.jvm_engines import JvmSession
from tests.oracles import canon, commit_versions, domain_metadata, replay_json
from tests.reference.spark_checks import (
    assert_history_ends_with,
    assert_readers_agree,
    assert_same_table,
)
from tests.reference.spark_tables import (
    SparkWritten,
    copy_table,
    ref,
    spark_changes,
    spark_counts,
    spark_rows,
)


def _copies(spark_written: SparkWritten, tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the base table: one for dvtool, one for Delta Spark."""
    _, path = spark_written
    return copy_table(path, tmp_path / "ours"), copy_table(path, tmp_path / "theirs")


def test_inspect_verify_is_clean_and_counts_are_delta_sparks(
    delta_spark: JvmSession, spark_written: SparkWritten
) -> None:
    """`inspect --verify --json` finds no problem; files, physical, logical and deleted rows
    and files with DVs equal Delta Spark's snapshot and the oracle's log replay."""
    shape, path = spark_written
    result = run("inspect", path, "--verify", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["verify"]["problems"] == []
    ours = {key: doc[key] for key in _COUNT_KEYS}
    assert ours == spark_counts(delta_spark, path)
    (rows,) = spark_rows(delta_spark, path, row_tracking=shape.row_tracking)
    assert_readers_agree(shape, path, rows)
    assert ours == _oracle_counts(path, len(rows))


_COUNT_KEYS = ("num_files", "physical_rows", "logical_rows", "deleted_rows", "files_with_dvs")


def _oracle_counts(path: Path, logical_rows: int) -> dict[str, Any]:
    """The counts from the JSON log replayed by the oracle (DV cardinalities as logged)."""
    adds = list(replay_json(path)[1].values())
    dvs = [add["deletionVector"] for add in adds if add.get("deletionVector")]
    physical = sum(json.loads(add["stats"])["numRecords"] for add in adds)
    return {
        "num_files": len(adds),
        "physical_rows": physical,
        "logical_rows": logical_rows,
        "deleted_rows": sum(dv["cardinality"] for dv in dvs),
        "files_with_dvs": len(dvs),
    }


def test_delete_equals_delta_spark_delete(
    delta_spark: JvmSession, spark_written: SparkWritten, tmp_path: Path
) -> None:
    """`dvtool delete --where P` (DVs where the table enables them, else copy-on-write) and
    Delta Spark's `DELETE FROM ... WHERE P` leave the same rows, row IDs and commit
    versions."""
    shape, _ = spark_written
    ours, theirs = _copies(spark_written, tmp_path)
    last = max(commit_versions(ours))
    result = run("delete", ours, "--where", shape.delete_where)
    assert result.exit_code == 0, result.output
    delta_spark.sql(f"DELETE FROM {ref(theirs)} WHERE {shape.delete_where}")
    assert max(commit_versions(ours)) == max(commit_versions(theirs)) == last + 1
    assert_same_table(delta_spark, shape, ours, theirs)
    assert_history_ends_with(delta_spark, ours, ["DELETE"])
    if _configuration(ours).get("delta.enableChangeDataFeed") == "true":
        version = max(commit_versions(ours))
        changes = spark_changes(delta_spark, ours, version)
        assert changes, "the delete's changes are in the change data feed"
        assert canon(changes) == canon(spark_changes(delta_spark, theirs, version))


def _configuration(path: Path) -> dict[str, str]:
    configuration: dict[str, str] = replay_json(path)[0].get("configuration") or {}
    return configuration


def test_purge_equals_reorg_purge(
    delta_spark: JvmSession, spark_written: SparkWritten, tmp_path: Path
) -> None:
    """`dvtool optimize --purge` and Delta Spark's `REORG TABLE ... APPLY (PURGE)` leave the
    same rows, row IDs and commit versions, and no DVs."""
    shape, _ = spark_written
    ours, theirs = _copies(spark_written, tmp_path)
    result = dvtool.optimize(ours, purge=True)
    assert result.versions, "the base tables all have DVs to purge"
    delta_spark.sql(f"REORG TABLE {ref(theirs)} APPLY (PURGE)")
    assert_same_table(delta_spark, shape, ours, theirs)
    assert not [add for add in replay_json(ours)[1].values() if add.get("deletionVector")]
    assert_history_ends_with(delta_spark, ours, ["REORG"] * len(result.versions))


def test_compaction_equals_optimize(
    delta_spark: JvmSession, spark_written: SparkWritten, tmp_path: Path
) -> None:
    """dvtool compaction (`optimize`, a target size above the table's) and Delta Spark's
    `OPTIMIZE` leave the same rows, row IDs and commit versions, and (bin-packing both) as
    many files per partition. Delta Spark clusters a clustered table where dvtool
    bin-packs: a different, equally valid layout, so there only rows and row tracking are
    compared."""
    shape, _ = spark_written
    ours, theirs = _copies(spark_written, tmp_path)
    result = dvtool.optimize(ours, target_size=64 * 1024 * 1024)
    assert result.versions, "the base tables all have small files to compact"
    delta_spark.sql(f"OPTIMIZE {ref(theirs)}")
    assert_same_table(delta_spark, shape, ours, theirs)
    if "delta.clustering" not in domain_metadata(theirs):
        assert _files_per_partition(ours) == _files_per_partition(theirs)
    assert_history_ends_with(delta_spark, ours, ["OPTIMIZE"] * len(result.versions))


def _files_per_partition(path: Path) -> Counter[tuple[tuple[str, Any], ...]]:
    """How many live files each partition has (the table's one partition: `()`)."""
    adds = replay_json(path)[1].values()
    return Counter(tuple(sorted((add["partitionValues"] or {}).items())) for add in adds)
