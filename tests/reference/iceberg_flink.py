"""Iceberg commits shaped the way Flink's upsert sink writes them, for the fixture tables.

Flink's Iceberg sink in upsert mode (Iceberg's `BaseEqualityDeltaWriter`, one writer per
partition) turns each checkpoint's changes into one `RowDelta` commit with, per partition:

- a data file with every row the checkpoint wrote (upserts), in arrival order;
- an equality-delete file on the table's identifier fields (`equality_ids`) with the key of
  every upsert or delete whose key was not already written in this checkpoint: it deletes
  the key's older rows (data sequence number strictly lower: not this commit's rows);
- a position-delete file for the rows this checkpoint wrote and then replaced or deleted
  again (same key twice in one checkpoint): positions in this commit's own data file,
  which a position delete reaches (data sequence number lower or equal).

`checkpoint_files` replays Flink's writer over a checkpoint's operations to get those
files' contents; `Checkpoint.apply` is what the operations intend (the expected rows, found
without the writer). `commit_checkpoint` writes the files with pyarrow (Parquet, the
table's field ids; position deletes sorted by file and position) and commits them in one
`RowDelta` through Iceberg's Java API in the engine's JVM (Iceberg computes each file's
metrics from its Parquet footer), as the Flink sink's committer does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.engines.jvm_engines import JvmSession

Row = dict[str, Any]
State = dict[int, Row]
# The Flink tables' schema: `id` (and `cat` when partitioned by it) are identifier fields.
FIELD_IDS = {"id": 1, "cat": 2, "d": 3, "v": 4}
ARROW_TYPES = {"id": pa.int64(), "cat": pa.string(), "d": pa.date32(), "v": pa.int64()}
REQUIRED = {"id", "cat"}
POS_FIELDS = [
    pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
    pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
]


def upsert(row: Row) -> tuple[str, Row]:
    return ("upsert", row)


def delete(row: Row) -> tuple[str, Row]:
    """A delete of the row's key (its other columns are not used)."""
    return ("delete", row)


@dataclass(frozen=True)
class Checkpoint:
    """One Flink checkpoint: upserts and deletes by key, in order."""

    ops: tuple[tuple[str, Row], ...]

    def apply(self, state: State) -> None:
        """The intended effect: an upsert sets the key's row, a delete drops it."""
        for kind, row in self.ops:
            if kind == "upsert":
                state[row["id"]] = dict(row)
            else:
                state.pop(row["id"], None)


@dataclass
class PartitionWrite:
    """What Flink's writer of one partition produces in one checkpoint."""

    rows: list[Row] = field(default_factory=list)
    equality_keys: list[Row] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    _written: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def delete_key(self, key: tuple[Any, ...], key_row: Row) -> None:
        """`BaseEqualityDeltaWriter.deleteKey`: a position delete if this checkpoint wrote
        the key, else an equality delete."""
        position = self._written.pop(key, None)
        if position is None:
            self.equality_keys.append(key_row)
        else:
            self.positions.append(position)

    def write(self, key: tuple[Any, ...], row: Row) -> None:
        """`BaseEqualityDeltaWriter.write`: a row written twice has its first copy deleted."""
        previous = self._written.get(key)
        if previous is not None:
            self.positions.append(previous)
        self._written[key] = len(self.rows)
        self.rows.append(dict(row))


def checkpoint_files(
    checkpoint: Checkpoint, key_fields: tuple[str, ...], partition_of: Callable[[Row], str]
) -> dict[str, PartitionWrite]:
    """Flink's upsert writer replayed over the checkpoint: the files' contents by partition
    path ('' when unpartitioned)."""
    writes: dict[str, PartitionWrite] = {}
    for kind, row in checkpoint.ops:
        writer = writes.setdefault(partition_of(row), PartitionWrite())
        key_row = {name: row[name] for name in key_fields}
        key = tuple(key_row.values())
        writer.delete_key(key, key_row)
        if kind == "upsert":
            writer.write(key, row)
    return writes


def _field_id(field_id: int) -> dict[bytes, bytes]:
    return {b"PARQUET:field_id": str(field_id).encode()}


def _schema(names: list[str]) -> pa.Schema:
    return pa.schema(
        pa.field(n, ARROW_TYPES[n], n not in REQUIRED, _field_id(FIELD_IDS[n])) for n in names
    )


def _write(path: Path, rows: list[Row], schema: pa.Schema) -> dict[str, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return {"path": str(path), "size": path.stat().st_size, "count": len(rows)}


def write_partition(
    folder: Path, partition: str, write: PartitionWrite, deletion_vectors: bool
) -> dict[str, Any]:
    """The partition's data, equality-delete and position-delete files (only the non-empty
    ones), named like a writer's files; their paths, sizes and record counts. With
    `deletion_vectors` (v3) the positions are left for Iceberg's DV writer (`positions`)."""
    stem = f"{folder}/{partition + '/' if partition else ''}00000-0-{uuid.uuid4()}"
    files: dict[str, Any] = {"partition": partition}
    if write.rows:
        files["data"] = _write(Path(f"{stem}-00001.parquet"), write.rows, _schema(list(FIELD_IDS)))
    if write.equality_keys:
        schema = _schema(list(write.equality_keys[0]))
        files["equality"] = _write(Path(f"{stem}-eq-deletes.parquet"), write.equality_keys, schema)
    if write.positions and deletion_vectors:
        files["positions"] = sorted(write.positions)
    elif write.positions:
        data_path = files["data"]["path"]
        rows = [{"file_path": data_path, "pos": p} for p in sorted(write.positions)]
        files["position"] = _write(Path(f"{stem}-pos-deletes.parquet"), rows, pa.schema(POS_FIELDS))
    return files


# Runs in the engine's process: one RowDelta with every partition's files (`args["files"]`
# from `write_partition`), metrics read from each Parquet footer, as Flink's committer does.
# In a v3 table the positions go to deletion vectors written by Iceberg's own DV writer
# (`BaseDVFileWriter`: one Puffin file for the commit; no earlier deletes to merge, as the
# positions are all in this commit's new data files).
COMMIT_ROW_DELTA = """
I = jvm.org.apache.iceberg
table = I.hadoop.HadoopTables(spark.sparkContext._jsc.hadoopConfiguration()).load(args["location"])
spec, config = table.spec(), I.MetricsConfig.forTable(table)
gateway = spark.sparkContext._gateway
ids = gateway.new_array(gateway.jvm.int, len(args["equality_ids"]))
for n, field_id in enumerate(args["equality_ids"]):
    ids[n] = field_id

def finish(builder, f, partition):
    metrics = I.parquet.ParquetUtil.fileMetrics(I.Files.localInput(f["path"]), config)
    builder = builder.withPath(f["path"]).withFormat("parquet")
    builder = builder.withFileSizeInBytes(f["size"]).withMetrics(metrics)
    return (builder.withPartitionPath(partition) if partition else builder).build()

delta = table.newRowDelta()
factory = I.io.OutputFileFactory.builderFor(table, 1, 1).format(I.FileFormat.PUFFIN).build()
# A java.util.function.Function answering null (Guava's, which Spark ships; the runtime's
# relocated Guava leaves that class out).
no_earlier_deletes = jvm.com.google.common.base.Functions.constant(None)
dvs = I.deletes.BaseDVFileWriter(factory, no_earlier_deletes)
for files in args["files"]:
    part = files["partition"]
    if "data" in files:
        data_file = finish(I.DataFiles.builder(spec), files["data"], part)
        delta = delta.addRows(data_file)
        for position in files.get("positions", []):
            dvs.delete(files["data"]["path"], position, spec, data_file.partition())
    if "equality" in files:
        builder = I.FileMetadata.deleteFileBuilder(spec).ofEqualityDeletes(ids)
        delta = delta.addDeletes(finish(builder, files["equality"], part))
    if "position" in files:
        builder = I.FileMetadata.deleteFileBuilder(spec).ofPositionDeletes()
        builder = builder.withReferencedDataFile(files["data"]["path"])
        delta = delta.addDeletes(finish(builder, files["position"], part))
dvs.close()
for dv in dvs.result().deleteFiles():
    delta = delta.addDeletes(dv)
delta.commit()
result = table.currentSnapshot().snapshotId()
"""


def format_version(location: Path) -> int:
    """The format version of the Hadoop table at `location` (its newest metadata file)."""
    hint = (location / "metadata" / "version-hint.text").read_text().strip()
    metadata = json.loads((location / "metadata" / f"v{hint}.metadata.json").read_text())
    return int(metadata["format-version"])


def commit_checkpoint(
    session: JvmSession,
    location: Path,
    checkpoint: Checkpoint,
    key_fields: tuple[str, ...],
    partition_of: Callable[[Row], str],
) -> int:
    """Write the checkpoint's files under `location`/data and commit them in one RowDelta;
    the new snapshot's id. Position deletes are deletion vectors in a v3 table."""
    writes = checkpoint_files(checkpoint, key_fields, partition_of)
    dv = format_version(location) >= 3
    folder = location / "data"
    files = [write_partition(folder, p, w, dv) for p, w in sorted(writes.items())]
    equality_ids = [FIELD_IDS[name] for name in key_fields]
    snapshot = session.python(
        COMMIT_ROW_DELTA, location=str(location), files=files, equality_ids=equality_ids
    )
    return int(snapshot)
