"""dvtool maintains what Delta Spark writes (issue 24): restore, maintain and vacuum.

The tables are the shapes of tests/reference/spark_tables.py (Delta Spark's own DML with DVs,
row tracking, CDF, `CLUSTER BY`, column mapping `name` / `id`, type widening, V2 checkpoints,
DVs turned on and off), built once and copied for every check; tests/reference/
test_spark_written_tables.py says what each comparison means.

- `restore` equals Delta Spark's `RESTORE TABLE ... TO VERSION AS OF v` on a copy: the same
  rows, row IDs and row commit versions.
- `maintain` (purge, compaction, checkpoint) and then `vacuum` keep every row with its row ID
  and commit version as Delta Spark read them before; Delta Spark reads the result from
  dvtool's checkpoint (V2 where the table asks for it), its `VACUUM ... DRY RUN` finds
  nothing left to delete (dvtool deletes the Hadoop `.crc` sidecars of the files it
  deletes, as Delta Spark does), and `DESCRIBE HISTORY` lists every dvtool commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

import dvtool
from tests.cli_helpers import run
from tests.engines.jvm_engines import JvmSession
from tests.oracles import canon, commit_versions, replay_json
from tests.reference import spark_tables
from tests.reference.spark_checks import (
    assert_history_ends_with,
    assert_readers_agree,
    assert_same_table,
)
from tests.reference.spark_tables import (
    SparkWritten,
    built,
    copy_table,
    ref,
    spark_checkpoint,
    spark_rows,
    spark_vacuum_dry_run,
)


def test_restore_equals_delta_spark_restore(
    delta_spark: JvmSession, spark_written: SparkWritten, tmp_path: Path
) -> None:
    """`dvtool restore --version v` and Delta Spark's `RESTORE TABLE ... TO VERSION AS OF v`
    leave the same rows, row IDs and row commit versions."""
    shape, path = spark_written
    ours = copy_table(path, tmp_path / "ours")
    theirs = copy_table(path, tmp_path / "theirs")
    assert dvtool.restore(ours, version=shape.restore_to).version is not None
    delta_spark.sql(f"RESTORE TABLE {ref(theirs)} TO VERSION AS OF {shape.restore_to}")
    assert_same_table(delta_spark, shape, ours, theirs)
    assert_history_ends_with(delta_spark, ours, ["RESTORE"])


def test_restore_to_dvs_off_with_dvs_live(delta_spark: JvmSession, tmp_path: Path) -> None:
    """Restoring the DV-toggled table to version 3 (`delta.enableDeletionVectors` just turned
    off, DVs of versions 1-2 still live) re-adds files with their DVs. Delta Spark 4.4
    refuses its own `RESTORE` there (DELTA_ADDING_DELETION_VECTORS_DISALLOWED, "Please file a
    bug report": an internal check that takes every re-added DV for a new one). PROTOCOL.md
    "Deletion Vectors" forbids writing *new* DVs while the property is off; a restore writes
    none, it re-adds the descriptors version 3 holds. So dvtool restores, and the result is
    compared with what the protocol fixes: Delta Spark's read of version 3 (rows, row IDs,
    row commit versions). Delta Spark then writes to the restored table (a copy-on-write
    DELETE, DVs being off) and reads it."""
    shape = spark_tables.SHAPES["id-mapping-v2-dv-toggled"]
    path = built(delta_spark, tmp_path.parent / "spark-written", shape.name)
    table = copy_table(path, tmp_path / "t")
    assert dvtool.restore(table, version=3).version is not None
    (restored,) = spark_rows(delta_spark, table, row_tracking=True)
    (expected,) = spark_rows(delta_spark, path, row_tracking=True, version=3)
    assert canon(restored) == canon(expected)
    assert_readers_agree(shape, table, restored)
    assert_history_ends_with(delta_spark, table, ["RESTORE"])
    delta_spark.sql(f"DELETE FROM {ref(table)} WHERE id % 10 = 1")
    (after,) = spark_rows(delta_spark, table, row_tracking=True)
    assert canon(after) == canon([row for row in restored if row["id"] % 10 != 1])


def test_maintain_then_vacuum_keep_every_row(
    delta_spark: JvmSession, spark_written: SparkWritten, tmp_path: Path
) -> None:
    """`maintain` (purge every DV, compact, checkpoint) then `vacuum --retain 0h --force`:
    Delta Spark reads the rows (with row IDs and commit versions) it read before, from
    dvtool's checkpoint; its own VACUUM finds nothing more to delete; `inspect --verify` is
    clean."""
    shape, path = spark_written
    table = copy_table(path, tmp_path / "t")
    (before,) = spark_rows(delta_spark, table, row_tracking=shape.row_tracking)
    result = dvtool.maintain(
        table, purge_ratio=0.0, target_size=64 * 1024 * 1024, checkpoint_interval=1
    )
    assert result.exit_code == 0, result.to_dict()
    maintained = max(commit_versions(table))
    vacuumed = dvtool.vacuum(table, retain="0h", force=True)
    assert vacuumed.failed == []
    (after,) = spark_rows(delta_spark, table, row_tracking=shape.row_tracking)
    assert canon(after) == canon(before)
    assert_readers_agree(shape, table, after)
    version, name = spark_checkpoint(delta_spark, table)
    assert version >= maintained  # maintain's, or one dvtool wrote at the interval since
    assert (table / "_delta_log" / name).exists()
    v2 = replay_json(table)[0]["configuration"].get("delta.checkpointPolicy") == "v2"
    assert _v2_spec(table / "_delta_log" / name) == v2, name
    assert spark_vacuum_dry_run(delta_spark, table) == []
    assert_history_ends_with(
        delta_spark, table, ["REORG", "OPTIMIZE", "VACUUM START", "VACUUM END"]
    )
    verified = run("inspect", table, "--verify", "--json")
    assert verified.exit_code == 0, verified.output
    assert json.loads(verified.stdout)["verify"]["problems"] == []


def _v2_spec(checkpoint: Path) -> bool:
    """Whether a checkpoint follows the V2 spec (holds a `checkpointMetadata` action).
    PROTOCOL.md "V2 Checkpoint Table Feature" lets a v2Checkpoint table use V2-spec
    checkpoints under a classic name (`N.checkpoint.parquet`), as dvtool writes them, or
    UUID-named ones, as Delta Spark does: what it fixes is the spec, not the name."""
    if checkpoint.suffix == ".json":
        return any("checkpointMetadata" in json.loads(line) for line in checkpoint.open())
    names = pq.read_schema(checkpoint).names
    if "checkpointMetadata" not in names:
        return False
    column = pq.read_table(checkpoint, columns=["checkpointMetadata"]).column(0)
    return column.null_count < len(column)
