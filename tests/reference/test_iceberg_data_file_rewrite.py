"""The data-file rewrite (dvtool/iceberg/data_file_rewrite.py) on v3 tables Iceberg Spark
wrote: row lineage as Iceberg Spark reports it.

Every live data file of a fixture table is rewritten without the rows its deletes remove
(deletion vectors, and the v2 position deletes of the upgraded table), into files outside
the table (the fixture tables stay read-only). The new files must hold exactly the table's
live rows, and each row the `_row_id` and `_last_updated_sequence_number` that Iceberg Spark
reads for it (`SELECT id, _row_id, _last_updated_sequence_number`): the materialized values
Spark's own compaction wrote (`v3_compacted`), the values the rows inherit from their file's
`first_row_id` (manifest inheritance, computed here from the manifest list) and data
sequence number, and in `v2_to_v3` the ids a post-upgrade snapshot assigned to files written
before the upgrade. The new files are those Iceberg Spark's `rewrite_data_files` writes:
lineage columns after the data columns, all non-null.

And Iceberg Java takes them: in a copy of a table, `RewriteFiles` replaces the data files
(and their DVs) by the rewritten ones; the metrics Iceberg Java reads from each new file's
footer (`ParquetUtil.fileMetrics`) are exactly the `DataFile` dvtool returns, and Iceberg
Spark then reads the copy's rows and lineage as the original's.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.avro.file import AvroFile
from pyiceberg.manifest import (
    MANIFEST_LIST_FILE_SCHEMAS,
    ManifestContent,
    ManifestFile,
    PartitionFieldSummary,
)
from pyiceberg.table import StaticTable
from pyroaring import BitMap64

from dvtool.iceberg.data_file_rewrite import (
    RewriteSource,
    new_data_location,
    rewrite_data_files,
)
from dvtool.iceberg.delete_index import DeleteIndex
from dvtool.iceberg.deleted_rows import dv_bitmap, position_bitmaps
from dvtool.iceberg.snapshot_files import (
    _v3_field,
    data_entry,
    delete_entry,
    manifest_entries,
    unpartitioned_specs,
)
from tests.engines.jvm_engines import JvmSession
from tests.reference.iceberg_tables import copy_table

TABLES = ("v3_flat", "v3_part", "v3_compacted", "v2_to_v3")
LINEAGE = ["id", "_row_id", "_last_updated_sequence_number"]


def _manifests_with_first_row_ids(manifest_list: str, io: Any) -> list[tuple[Any, int | None]]:
    """The manifests of a v3 manifest list with their `first_row_id` (pyiceberg 0.12 reads
    manifest lists with the v2 schema, which drops it)."""
    schema = MANIFEST_LIST_FILE_SCHEMAS[3]
    position = [f.name for f in schema.fields].index("first_row_id")
    with AvroFile[ManifestFile](
        io.new_input(manifest_list),
        schema,
        read_types={-1: ManifestFile, 508: PartitionFieldSummary},
        read_enums={517: ManifestContent},
    ) as reader:
        return [(manifest, manifest[position]) for manifest in reader]


def _sources(metadata_path: str) -> tuple[Any, list[RewriteSource]]:
    """A `RewriteSource` per live data file: its deleted positions, data sequence number and
    inherited first row id (spec "First Row ID Inheritance")."""
    table = StaticTable.from_metadata(metadata_path)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    data, deletes = [], []
    for manifest, first_row_id in _manifests_with_first_row_ids(snapshot.manifest_list, table.io):
        next_row_id = first_row_id
        for entry in manifest_entries(manifest, table.io, 3):
            if int(entry.data_file.content) != 0:
                deletes.append(delete_entry(entry))
                continue
            own = _v3_field(entry.data_file, "first_row_id")
            if own is None and next_row_id is not None:
                own, next_row_id = next_row_id, next_row_id + entry.data_file.record_count
            data.append((entry, own))
    index = DeleteIndex(deletes, unpartitioned_specs(table.metadata))
    sources = []
    for entry, first_row_id in data:
        plain = data_entry(entry)
        applied = index.for_data_file(plain)
        assert applied.equality == ()
        if applied.deletion_vector is not None:
            drop = dv_bitmap(table.io, applied.deletion_vector)
        else:
            drop = position_bitmaps([(plain, applied)], table.io).get(plain.path, BitMap64())
        sources.append(RewriteSource(entry.data_file, drop, entry.sequence_number, first_row_id))
    return table, sources


@pytest.mark.parametrize("name", TABLES)
def test_rewritten_rows_keep_the_lineage_iceberg_spark_reads(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession, tmp_path: Path
) -> None:
    entry = iceberg_tables[name]
    table, sources = _sources(entry["metadata"])
    assert all(s.first_row_id is not None for s in sources)
    rows = []
    for n, source in enumerate(sources):
        out = tmp_path / f"{n}.parquet"
        written = rewrite_data_files(
            table.io,
            table.metadata,
            [source],
            str(out),
            spec_id=source.data_file.spec_id,
            partition=source.data_file.partition,
        )
        if written is None:
            assert source.remaining_rows == 0 and not out.exists()
            continue
        content = pq.read_table(out)
        assert content.column_names == ["id", "cat", "d", "v", *LINEAGE[1:]]
        assert content.num_rows == written.record_count == source.remaining_rows
        assert content.column("_row_id").null_count == 0
        assert content.column("_last_updated_sequence_number").null_count == 0
        rows += content.to_pylist()
    by_id = sorted(rows, key=lambda r: r["id"])
    expected = sorted(entry["expected"], key=lambda r: r["id"])
    assert [{k: r[k] for k in ("id", "cat", "v")} for r in by_id] == [
        {k: r[k] for k in ("id", "cat", "v")} for r in expected
    ]
    assert [str(r["d"]) for r in by_id] == [str(r["d"]) for r in expected]
    spark = iceberg_spark.rows(f"SELECT {', '.join(LINEAGE)} FROM {entry['table']} ORDER BY id")
    assert [{k: r[k] for k in LINEAGE} for r in by_id] == spark


# Runs in the engine's process: replaces data files (and their deletes) of the Hadoop table at
# `args["location"]` by the rewritten files with Iceberg's Java API (`RewriteFiles`), each new
# file described by the metrics Iceberg Java reads from its footer; returns those metrics.
JAVA_REWRITE = """
I = jvm.org.apache.iceberg
table = I.hadoop.HadoopTables(spark.sparkContext._jsc.hadoopConfiguration()).load(args["location"])
config = I.MetricsConfig.forTable(table)
tasks = {}
scan = table.newScan().planFiles().iterator()
while scan.hasNext():
    task = scan.next()
    tasks[task.file().location()] = task

def entries(values, convert):
    return {} if values is None else {str(k): convert(v) for k, v in values.items()}

def hexed(buffer):
    return bytes(I.util.ByteBuffers.toByteArray(buffer)).hex()

rewrite = table.newRewrite().validateFromSnapshot(table.currentSnapshot().snapshotId())
metrics = {}
for old, new in args["files"]:
    task = tasks[old]
    rewrite = rewrite.deleteFile(task.file())
    for delete in task.deletes():
        rewrite = rewrite.deleteFile(delete)
    if new is None:
        continue
    m = I.parquet.ParquetUtil.fileMetrics(I.Files.localInput(new["path"]), config)
    builder = I.DataFiles.builder(task.spec()).withPath(new["path"]).withFormat("parquet")
    builder = builder.withFileSizeInBytes(new["size"]).withPartition(task.file().partition())
    rewrite = rewrite.addFile(builder.withMetrics(m).build())
    metrics[new["path"]] = {
        "record_count": m.recordCount(),
        "column_sizes": entries(m.columnSizes(), int),
        "value_counts": entries(m.valueCounts(), int),
        "null_value_counts": entries(m.nullValueCounts(), int),
        "nan_value_counts": entries(m.nanValueCounts(), int),
        "lower_bounds": entries(m.lowerBounds(), hexed),
        "upper_bounds": entries(m.upperBounds(), hexed),
    }
rewrite.commit()
result = metrics
"""


def _metrics(data_file: Any) -> dict[str, Any]:
    """Our `DataFile`'s metrics in the shape JAVA_REWRITE returns Iceberg Java's."""

    def entries(values: dict[int, Any] | None, convert: Any) -> dict[str, Any]:
        return {str(k): convert(v) for k, v in (values or {}).items()}

    return {
        "record_count": data_file.record_count,
        "column_sizes": entries(data_file.column_sizes, int),
        "value_counts": entries(data_file.value_counts, int),
        "null_value_counts": entries(data_file.null_value_counts, int),
        "nan_value_counts": entries(data_file.nan_value_counts, int),
        "lower_bounds": entries(data_file.lower_bounds, lambda b: bytes(b).hex()),
        "upper_bounds": entries(data_file.upper_bounds, lambda b: bytes(b).hex()),
    }


@pytest.mark.parametrize("name", ["v3_part", "v3_compacted"])
def test_iceberg_java_commits_the_rewritten_files_and_reads_the_same_rows_and_lineage(
    name: str, iceberg_tables: dict[str, Any], iceberg_spark: JvmSession
) -> None:
    """The rewritten files replace the table's (with their DVs) in a copy, through Iceberg
    Java's `RewriteFiles`: the metrics Java reads from each new file's footer are ours, and
    Iceberg Spark reads the copy's rows and lineage as the original's."""
    entry = iceberg_tables[name]
    db = iceberg_spark.workdir / "iceberg-warehouse" / "rewrites"
    location = db / f"{name}_{uuid.uuid4().hex[:8]}"
    table, sources = _sources(str(copy_table(iceberg_spark, entry, location)))
    files, ours = [], {}
    for source in sources:
        spec_id, partition = source.data_file.spec_id, source.data_file.partition
        out = Path(new_data_location(table.metadata, spec_id=spec_id, partition=partition))
        assert out.parent == Path(source.data_file.file_path).parent  # Spark's partition path
        written = rewrite_data_files(
            table.io, table.metadata, [source], str(out), spec_id=spec_id, partition=partition
        )
        new = None if written is None else {"path": str(out), "size": written.file_size_in_bytes}
        files.append((source.data_file.file_path, new))
        if written is not None:
            ours[str(out)] = _metrics(written)
    theirs = iceberg_spark.python(JAVA_REWRITE, location=str(location), files=files)
    assert ours and theirs == ours
    columns = "id, cat, d, v, _row_id, _last_updated_sequence_number"
    copy = f"local.rewrites.{location.name}"
    iceberg_spark.sql(f"REFRESH TABLE {copy}")
    rewritten = iceberg_spark.rows(f"SELECT {columns} FROM {copy} ORDER BY id")
    assert rewritten == iceberg_spark.rows(f"SELECT {columns} FROM {entry['table']} ORDER BY id")
    paths = iceberg_spark.rows(f"SELECT DISTINCT file_path FROM {copy}.files")
    assert {Path(p["file_path"].removeprefix("file:")).name for p in paths} <= {
        Path(p).name for p in ours
    }
