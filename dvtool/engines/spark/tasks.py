"""What runs on the executors, and the Arrow rows it exchanges with the driver.

The functions the engine hands to `mapInArrow` and `mapPartitions` (`collect_matches`,
`write_task`, `write_bins`) are pickled by reference: executors import this module and call
them with plain Arrow batches or Python rows. So it imports no pyspark at all, and as little
else as it can; its imports are listed one by one so that the executors' dependencies stay
visible (scans: pyarrow and numpy; rewrites: dvtool's storage layer over pyarrow's
filesystems and `write_bin`; a format's own writes: what their pickled function imports,
for Iceberg `dvtool.iceberg.rewrite_executor`, pyarrow and numpy alone).
Importing it runs the package's `__init__` first, which imports the driver-side modules
too (none of them imports pyspark when imported). Each exchange is defined here on both
sides: the helper columns a scan hands the tasks, and the rows of a rewrite's bins
(`bins_table`, `_BINS_SCHEMA`) and of its results (`_WRITTEN_SCHEMA`, read back on the
driver by `written_files`).

Scan. The matching (file index, row index) pairs never reach the driver: `collect_matches`
builds one bitmap per file within each Spark partition (row indexes as numpy arrays, encoded
with `dvtool.deletion_vectors.roaring`), subtracts the file's
current DV there (the DVs travel, serialized, in the function's closure, which works for
classic and Connect sessions alike) and yields (file index, serialized bitmap); the driver
ORs the partial bitmaps of each file. A matching row whose path Spark reported in a spelling
dvtool could not map (`UNMAPPED_COLUMN`) fails the job instead of being skipped.

Rewrite. Each task calls the arrow engine's `write_bin` for each of its bins, which reads
the bin's inputs with pyarrow through dvtool's storage layer (reopened from the table root
and storage options in `WriteJob`), drops each input's `drop` rows and writes one parquet
file with dvtool's writer (schema with field ids, Delta statistics) under the bin's
directory, memory bounded by a row group. A task returns one row per bin: the
written file's description, nothing for a bin whose rows were all dropped (None), or the
error that stopped it - a task catches its error rather than failing the job, so that the
driver, which alone commits, learns which files the other bins wrote, deletes them and
raises the error (message from the worker, on one line).

A format's own writes (`Engine.run_writes`: Iceberg's data file rewrites). The function and
each item travel pickled (`bytes`), and the executor unpickles them inside the task
(`run_writes_task`), so that what it lacks to run them (e.g. pyiceberg, which a catalog
FileIO pyarrow has no filesystem for needs) comes back as the task's error, not as a failed
job. A task returns one
row per item: its pickled result or the error that stopped it (`_WRITES_SCHEMA`; the
driver raises the first error once every task finished, `write_results`). The files are
the caller's to delete: it recorded them before the job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvtool.data_files import WrittenFile
from dvtool.deletion_vectors import roaring
from dvtool.engines.base import RewriteBin, RewriteInput, TableLayout
from dvtool.engines.rewrite import write_bin
from dvtool.engines.spark.failures import SparkEngineError
from dvtool.errors import DvtoolError
from dvtool.storage.arrow_storage import ArrowStorage
from dvtool.storage.data_file_storage import DataFileStorage

if TYPE_CHECKING:
    from dvtool.delta.protocol.schema import StructType

# Helper column names; no Delta column is expected to use them.
PATH_COLUMN = "__dvtool_path"
FILE_COLUMN = "__dvtool_file"
ROW_COLUMN = "__dvtool_row"
UNMAPPED_COLUMN = "__dvtool_unmapped"
# The column of spark.range: a rewrite's bin id.
BIN_ID_COLUMN = "id"

# One row per bin input, sent to the rewrite tasks: the bin's directory and partition
# values (JSON) repeat on each of its inputs; `drop` is the serialized bitmap (null: none).
_BINS_SCHEMA = pa.schema(
    [
        (BIN_ID_COLUMN, pa.int64()),
        ("input", pa.int32()),
        ("path", pa.string()),
        ("location", pa.string()),
        ("drop", pa.binary()),
        ("directory", pa.string()),
        ("partition_values", pa.string()),
        ("base_row_id", pa.int64()),
        ("default_row_commit_version", pa.int64()),
    ]
)
# One row per bin from the rewrite tasks: the file written (location null: no row remained)
# or the error that stopped the task.
_WRITTEN_SCHEMA = pa.schema(
    [
        ("bin", pa.int64()),
        ("relative_path", pa.string()),
        ("location", pa.string()),
        ("size", pa.int64()),
        ("num_records", pa.int64()),
        ("stats_json", pa.string()),
        ("modification_time_ms", pa.int64()),
        ("error", pa.string()),
    ]
)
WRITTEN_DDL = (
    "bin BIGINT, relative_path STRING, location STRING, size BIGINT, num_records BIGINT, "
    "stats_json STRING, modification_time_ms BIGINT, error STRING"
)
# One row per item of a format's writes: the item's index, its pickled result or the error.
_WRITES_SCHEMA = pa.schema([("item", pa.int64()), ("result", pa.binary()), ("error", pa.string())])
WRITES_DDL = "item BIGINT, result BINARY, error STRING"
# One row per item sent to the tasks of a Connect session: its index and pickled item.
_ITEMS_SCHEMA = pa.schema([(BIN_ID_COLUMN, pa.int64()), ("item", pa.binary())])
_MATCHES_SCHEMA = pa.schema([("file", pa.int32()), ("rows", pa.binary())])
MATCHES_DDL = "file INT, rows BINARY"


# -- scan -----------------------------------------------------------------------------------


def _unmapped_error(batch: pa.RecordBatch) -> RuntimeError:
    paths = [p for p in batch.column(UNMAPPED_COLUMN).to_pylist() if p is not None]
    shown = paths[0] if paths else "?"
    return RuntimeError(f"dvtool cannot map the file Spark reports as {shown} to a table file")


def collect_matches(
    deleted: Mapping[int, bytes], batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Matching (file, row index) pairs of one Spark partition -> one bitmap per file.

    `deleted` holds each file's current DV as portable 64-bit Roaring bytes, subtracted
    here. The bitmaps are encoded with dvtool's numpy codec (`dvtool.deletion_vectors.roaring`), so
    this needs nothing an executor of a stock cluster lacks (no pyroaring).
    """
    found: dict[int, list[np.ndarray]] = {}
    for batch in batches:
        if batch.num_rows == 0:
            continue
        files = batch.column(FILE_COLUMN)
        if files.null_count:
            raise _unmapped_error(batch)
        rows = batch.column(ROW_COLUMN)
        uniques = pc.unique(files).to_pylist()
        for index in uniques:
            selected = rows if len(uniques) == 1 else rows.filter(pc.equal(files, index))
            found.setdefault(index, []).append(selected.to_numpy(zero_copy_only=False))
    if not found:
        return
    indexes, blobs = [], []
    for index, parts in found.items():
        matched = np.unique(np.concatenate(parts).astype(np.uint64))
        if index in deleted:
            matched = np.setdiff1d(matched, roaring.decode64(deleted[index]), assume_unique=True)
        indexes.append(index)
        blobs.append(roaring.encode64(matched))
    yield pa.RecordBatch.from_arrays(
        [pa.array(indexes, pa.int32()), pa.array(blobs, pa.binary())], schema=_MATCHES_SCHEMA
    )


# -- rewrite --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteJob:
    """What every rewrite task needs besides its bins' rows (pickled into the function)."""

    root: str
    options: Mapping[str, Any]
    schema: StructType
    partition_columns: tuple[str, ...]
    column_mapping_mode: str
    configuration: Mapping[str, str]
    layout_options: Mapping[str, Any]

    def __post_init__(self) -> None:
        """On the driver: refuse storage options the executors' pyarrow filesystems cannot
        take before any task starts (unpickling on an executor does not run this)."""
        ArrowStorage(self.root, self.options).check_options()

    def layout(self) -> TableLayout:
        """The table layout again, on the executor: the table reached through pyarrow's
        filesystems (`ArrowStorage`; executors have no fsspec) with the same options."""
        storage = ArrowStorage(self.root, self.options)
        return TableLayout(
            storage,
            self.schema,
            self.partition_columns,
            self.column_mapping_mode,
            **self.layout_options,
        )


def layout_options(table: TableLayout) -> dict[str, Any]:
    """The fields of `table` beyond storage, schema, partitioning and mapping mode."""
    fields = dataclasses.fields(TableLayout)
    return {f.name: getattr(table, f.name) for f in fields[4:]}


def bins_table(bins: Sequence[RewriteBin]) -> pa.Table:
    """The rewrite's bins as rows for the tasks (`_BINS_SCHEMA`): one per bin input."""
    rows = [
        {
            BIN_ID_COLUMN: bin_id,
            "input": order,
            "path": item.path,
            "location": item.location,
            "drop": _drop_bytes(item.drop),
            "directory": b.directory,
            "partition_values": json.dumps(dict(b.partition_values)),
            "base_row_id": item.base_row_id,
            "default_row_commit_version": item.default_row_commit_version,
        }
        for bin_id, b in enumerate(bins)
        for order, item in enumerate(b.inputs)
    ]
    return pa.Table.from_pylist(rows, schema=_BINS_SCHEMA)


def _drop_bytes(drop: np.ndarray | None) -> bytes | None:
    """An input's rows to drop as portable Roaring bytes (None for none)."""
    return roaring.encode64(drop) if drop is not None and len(drop) else None


def _task_bins(batches: Iterable[pa.RecordBatch]) -> list[tuple[int, RewriteBin]]:
    """The bins of one task's rows (`_BINS_SCHEMA`), inputs in their order within each bin."""
    rows = [row for batch in batches for row in batch.to_pylist()]
    rows.sort(key=lambda r: (r[BIN_ID_COLUMN], r["input"]))
    grouped: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row[BIN_ID_COLUMN], []).append(row)
    out = []
    for bin_id, inputs in grouped.items():
        first = inputs[0]
        rewrite_bin = RewriteBin(
            tuple(
                RewriteInput(
                    r["path"],
                    r["location"],
                    None if r["drop"] is None else roaring.decode64(r["drop"]),
                    r["base_row_id"],
                    r["default_row_commit_version"],
                )
                for r in inputs
            ),
            first["directory"],
            json.loads(first["partition_values"]),
        )
        out.append((bin_id, rewrite_bin))
    return out


def write_task(job: WriteJob, bins: Iterable[tuple[int, RewriteBin]]) -> Iterator[tuple[Any, ...]]:
    """Write each (bin id, bin) of one task with the arrow engine's `write_bin`.

    One `_WRITTEN_SCHEMA` tuple per bin. An error ends the task with a tuple that carries it
    instead of failing the Spark job, so that the driver learns which files the other bins
    wrote and can delete them.
    """
    layout: TableLayout | None = None
    for bin_id, rewrite_bin in bins:
        try:
            layout = layout or job.layout()
            written = write_bin(layout, job.configuration, rewrite_bin)
        except Exception as exc:  # reported to the driver, which raises it
            yield (bin_id, None, None, None, None, None, None, _task_error(exc, rewrite_bin))
            return
        if written is None:
            yield (bin_id, None, None, None, None, None, None, None)
        else:
            yield (
                bin_id,
                written.relative_path,
                written.location,
                written.size,
                written.num_records,
                written.stats_json,
                written.modification_time_ms,
                None,
            )


def write_bins(job: WriteJob, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`write_task` as a `mapInArrow` function: bins' rows in, one row per bin out."""
    names = _WRITTEN_SCHEMA.names
    for row in write_task(job, _task_bins(batches)):
        yield pa.RecordBatch.from_pylist([dict(zip(names, row, strict=True))], _WRITTEN_SCHEMA)


def _task_error(exc: Exception, rewrite_bin: RewriteBin) -> str:
    """One line for the user: dvtool's own message, else the exception and the bin's input."""
    if isinstance(exc, DvtoolError):
        text = exc.message
    else:
        where = rewrite_bin.inputs[0].location if rewrite_bin.inputs else rewrite_bin.directory
        text = f"{type(exc).__name__} while rewriting {where}: {exc}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first if len(first) <= 500 else first[:497] + "..."


def written_files(
    storage: DataFileStorage, count: int, rows: Sequence[tuple[Any, ...]]
) -> list[WrittenFile | None]:
    """On the driver: the tasks' rows as one result per bin; on any error or gap, delete
    what was written.

    Every bin must come back exactly once; a bin whose task failed comes back as its error.
    """
    out: list[WrittenFile | None] = [None] * count
    seen: set[int] = set()
    problem: str | None = None
    for row in rows:
        bin_id, relative, location, size, records, stats, mtime, error = row
        if error is not None:
            problem = problem or str(error)
            continue
        if bin_id in seen or not 0 <= bin_id < count:
            problem = problem or f"Spark returned an unexpected result for bin {bin_id}"
            continue
        seen.add(bin_id)
        if location is not None:
            out[bin_id] = WrittenFile(
                relative_path=relative,
                location=location,
                size=int(size),
                num_records=int(records),
                stats_json=stats,
                modification_time_ms=int(mtime),
            )
    if problem is None and len(seen) != count:
        problem = f"Spark returned {len(seen)} of {count} bins"
    if problem is not None:
        written = [row[2] for row in rows if row[7] is None and row[2] is not None]
        with contextlib.suppress(Exception):  # the task's error is the one to report
            storage.delete_many(written)
        raise SparkEngineError(f"cannot rewrite data files with Spark: {problem}")
    return out


# -- a format's own writes ------------------------------------------------------------------


def items_table(items: Sequence[bytes]) -> pa.Table:
    """The pickled items as rows for a Connect session's tasks (`_ITEMS_SCHEMA`)."""
    return pa.table(
        [pa.array(range(len(items)), pa.int64()), pa.array(items, pa.binary())],
        schema=_ITEMS_SCHEMA,
    )


def run_writes_task(
    write: bytes, items: Iterable[tuple[int, bytes]]
) -> Iterator[tuple[int, bytes | None, str | None]]:
    """Run the pickled `write` on each (index, pickled item) of one task: one
    `_WRITES_SCHEMA` tuple per item; the first error ends the task with a tuple carrying it
    (see the module docstring)."""
    function: Any = None
    for index, item in items:
        try:
            function = function or pickle.loads(write)
            result = function(pickle.loads(item))
        except Exception as exc:  # reported to the driver, which raises it
            yield (index, None, _writes_error(exc))
            return
        yield (index, pickle.dumps(result), None)


def run_writes_batches(write: bytes, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`run_writes_task` as a `mapInArrow` function: item rows in, one row per item out."""
    rows = sorted(
        (row[BIN_ID_COLUMN], row["item"]) for batch in batches for row in batch.to_pylist()
    )
    names = _WRITES_SCHEMA.names
    for out in run_writes_task(write, rows):
        yield pa.RecordBatch.from_pylist([dict(zip(names, out, strict=True))], _WRITES_SCHEMA)


def _writes_error(exc: Exception) -> str:
    """One line: a module the executors' Python lacks, dvtool's message, or the exception."""
    if isinstance(exc, ModuleNotFoundError):
        text = (
            f"the executors' Python cannot import {exc.name}, which these writes need: "
            "install it there (the Python of PYSPARK_PYTHON or spark.pyspark.python)"
        )
    elif isinstance(exc, DvtoolError):
        text = exc.message
    else:
        text = f"{type(exc).__name__}: {exc}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first if len(first) <= 500 else first[:497] + "..."


def write_results(count: int, rows: Sequence[tuple[Any, ...]]) -> list[Any]:
    """On the driver: the tasks' rows as one result per item, in order; SparkEngineError
    with the first error, or when an item did not come back exactly once."""
    out: list[Any] = [None] * count
    seen: set[int] = set()
    for index, result, error in rows:
        if error is not None:
            raise SparkEngineError(f"cannot write files with Spark: {error}")
        if index in seen or not 0 <= index < count:
            raise SparkEngineError(f"Spark returned an unexpected result for item {index}")
        seen.add(index)
        out[index] = pickle.loads(bytes(result))
    if len(seen) != count:
        raise SparkEngineError(f"Spark returned {len(seen)} of {count} results")
    return out
