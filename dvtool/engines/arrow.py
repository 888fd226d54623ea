"""The in-process engine: pyarrow on a thread pool, no JVM.

A scan reads each file row group by row group. Row groups whose parquet statistics prove that
no row matches are skipped, row groups where every row matches are taken whole, and the rest
are read with only the columns the predicate needs, partition columns added as constants. The
result per file is a bitmap of matching physical row indexes, minus rows its DV already
deletes. Memory stays bounded by one row group batch per thread.

A rewrite (purge, compaction, copy-on-write delete) streams the batches of each input, takes
from each batch the rows its DV keeps (bitmap operations on the batch's row range, then one
`take`) and writes them with `write_data_file`, one file per bin, bins on the thread pool.
`dvtool.predicate` (sqlglot, acero) is imported only when a scan runs.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import threading
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dvtool.core.partitions import arrow_schema, partition_arrays
from dvtool.core.stats_collect import StatsCollector, stats_columns_spec
from dvtool.data_files import (
    RowGroupStats,
    WrittenFile,
    iter_file_batches,
    open_parquet_file,
    row_group_stats,
    write_data_file,
)
from dvtool.engines.base import (
    Progress,
    RewriteBin,
    ScanFile,
    TableLayout,
)
from dvtool.errors import PredicateError
from dvtool.io_pool import map_io
from dvtool.storage import Storage

if TYPE_CHECKING:  # imported where a scan runs: sqlglot and acero cost ~0.1 s at start-up
    from dvtool.predicate import Predicate

_ROW = "__dvtool_row_index"
_BASE_INDEXES = pa.array(range(1 << 16), pa.uint64())
_BASE_LOCK = threading.Lock()


def _row_indexes(first: int, count: int) -> pa.Array:
    """Row indexes first..first+count-1, offset from one cached 0..n array in C++.

    Building them with `pa.array(range(...))` is a Python loop per row that holds the GIL;
    this is a slice and one vectorised add.
    """
    global _BASE_INDEXES
    base = _BASE_INDEXES
    if count > len(base):
        with _BASE_LOCK:
            if count > len(_BASE_INDEXES):
                _BASE_INDEXES = pa.array(range(count), pa.uint64())
            base = _BASE_INDEXES
    return pc.add(base.slice(0, count), pa.scalar(first, pa.uint64()))


class ArrowEngine:
    """Scans data files with pyarrow in this process."""

    name = "arrow"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or max(2, os.cpu_count() or 2)

    def find_matches(
        self,
        table: TableLayout,
        files: Sequence[ScanFile],
        predicate: Predicate,
        progress: Progress | None = None,
    ) -> list[BitMap64]:
        scan = _FileScan(table, predicate)

        def one(file: ScanFile) -> BitMap64:
            rows = scan.matches(file)
            if progress:
                progress(1)
            return rows

        return map_io(one, files, threads=self.threads)

    def rewrite(
        self,
        table: TableLayout,
        configuration: Mapping[str, str],
        bins: Sequence[RewriteBin],
        progress: Progress | None = None,
    ) -> list[WrittenFile | None]:
        """One new file per bin; if any bin fails, the files of the others are deleted."""
        done: list[WrittenFile] = []
        lock = threading.Lock()

        def one(rewrite_bin: RewriteBin) -> WrittenFile | None:
            written = write_bin(table, configuration, rewrite_bin)
            if written is not None:
                with lock:
                    done.append(written)
            if progress:
                progress(1)
            return written

        try:
            return map_io(one, bins, threads=self.threads)
        except BaseException:
            # map_io returns only once every bin has finished, so `done` is complete.
            with lock:
                locations = [w.location for w in done]
            with contextlib.suppress(Exception):  # the original error is the one to report
                table.storage.delete_many(locations)
            raise


class _FileScan:
    """The per-table parts of a scan: expression, columns to read and their types."""

    def __init__(self, table: TableLayout, predicate: Predicate) -> None:
        self.table = table
        self.predicate = predicate
        self.expression = predicate.to_arrow()
        mode = table.column_mapping_mode
        data_schema = arrow_schema(table.schema, mode, table.partition_columns)
        self.columns = [data_schema.field(name) for name in sorted(predicate.columns)]
        self.partitions = _partition_types(table, predicate)

    def matches(self, file: ScanFile) -> BitMap64:
        with open_parquet_file(self.table.storage, file.location) as parquet:
            return self._matches(file, parquet)

    def _matches(self, file: ScanFile, parquet: pq.ParquetFile) -> BitMap64:
        from dvtool.predicate import Match

        storage = self.table.storage
        groups = row_group_stats(storage, file.location, parquet)
        matched = BitMap64()
        to_read: list[RowGroupStats] = []
        for group in groups:
            verdict = self.predicate.stats_match(
                group.num_rows,
                group.min,
                group.max,
                group.null_count,
                partition_values=file.partition_values,
            )
            if verdict is Match.ALL:
                matched.add_range(group.first_row, group.first_row + group.num_rows)
            elif verdict is Match.SOME:
                to_read.append(group)
        if to_read:
            self._scan_groups(file, parquet, [g.index for g in to_read], matched)
        if file.deleted:
            matched -= file.deleted
        return matched

    def _scan_groups(
        self, file: ScanFile, parquet: pq.ParquetFile, groups: list[int], matched: BitMap64
    ) -> None:
        names = [f.name for f in self.columns]
        batches = iter_file_batches(
            self.table.storage, file.location, columns=names, row_groups=groups, parquet=parquet
        )
        for first_row, batch in batches:
            data = self._with_partitions(self._complete(batch), file)
            rows = _row_indexes(first_row, batch.num_rows)
            try:
                hits = data.append_column(_ROW, rows).filter(self.expression).column(_ROW)
            except pa.ArrowInvalid as e:  # e.g. integer overflow, an error in ANSI Spark too
                raise PredicateError(
                    f"--where cannot be evaluated on {file.location}: {e}",
                    hint="Widen the arithmetic, e.g. CAST(column AS DOUBLE).",
                ) from None
            if len(hits):
                matched.update(hits.to_pylist())

    def _complete(self, batch: pa.RecordBatch) -> pa.Table:
        """The batch with every needed column; columns absent from the file read as NULL."""
        present = set(batch.schema.names)
        columns = [
            batch.column(f.name) if f.name in present else pa.nulls(batch.num_rows, f.type)
            for f in self.columns
        ]
        return pa.Table.from_arrays(columns, schema=pa.schema(self.columns))

    def _with_partitions(self, data: pa.Table, file: ScanFile) -> pa.Table:
        if not self.partitions:
            return data
        constants = partition_arrays(file.partition_values, self.partitions, data.num_rows)
        for name, values in constants.items():
            data = data.append_column(name, values)
        return data


def _partition_types(table: TableLayout, predicate: Predicate) -> list[tuple[str, str]]:
    """(physical name, Delta type) of the partition columns the predicate uses."""
    out = []
    mode = table.column_mapping_mode
    for name in table.partition_columns:
        field = table.schema.get(name)
        if field is None:
            continue
        physical = field.physical_name(mode)
        if physical in predicate.partition_columns_used and isinstance(field.type, str):
            out.append((physical, field.type))
    return out


# -- rewrites --------------------------------------------------------------------------------


def write_bin(
    table: TableLayout, configuration: Mapping[str, str], rewrite_bin: RewriteBin
) -> WrittenFile | None:
    """Write the rows the inputs of `rewrite_bin` keep as one new file; None if none remain."""
    schema = arrow_schema(table.schema, table.column_mapping_mode, table.partition_columns)
    spec = stats_columns_spec(configuration, table.schema, table.column_mapping_mode)
    batches = (
        batch
        for source in rewrite_bin.inputs
        for batch in _filtered_batches(
            table.storage, source.location, schema, source.drop, keep=True
        )
        if batch.num_rows
    )
    first = next(batches, None)
    if first is None:
        return None
    return write_data_file(
        table.storage,
        partition_dir=rewrite_bin.directory,
        batches=chain([first], batches),
        schema=schema,
        stats=StatsCollector(schema, spec),
    )


def write_change_data(
    table: TableLayout, add: Mapping[str, Any], rows: BitMap64
) -> tuple[dict[str, Any], str]:
    """Write the rows `rows` of the data file of `add` to a `_change_data` file with
    `_change_type = 'delete'`; returns its `cdc` action and location."""
    location = table.storage.resolve(str(add["path"]))
    relative = table.storage.relative_to_root(location) or ""
    schema = arrow_schema(table.schema, table.column_mapping_mode, table.partition_columns)
    return _write_change_data(table, location, schema, posixpath.dirname(relative), rows, add)


def _filtered_batches(
    storage: Storage, location: str, schema: pa.Schema, rows: BitMap64 | None, *, keep: bool
) -> Iterator[pa.RecordBatch]:
    """The file's batches without (keep=True) or with only (keep=False) the rows in `rows`.

    Each batch takes the positions it keeps, found with bitmap operations on its row range
    (no per-row Python work and no hash set), so purging a file is linear in its size and
    memory stays bounded by one batch.
    """
    present: set[str] | None = None
    for first_row, batch in iter_file_batches(storage, location):
        if present is None:
            present = set(batch.schema.names)
        selected = _select_rows(batch, first_row, rows or BitMap64(), keep=keep)
        if selected.num_rows:
            yield _conform(selected, schema, present)


def _select_rows(
    batch: pa.RecordBatch, first_row: int, rows: BitMap64, *, keep: bool
) -> pa.RecordBatch:
    """The rows of `batch` (file rows first_row...) not in `rows` (keep) or only those in it."""
    wanted = BitMap64()
    wanted.add_range(first_row, first_row + batch.num_rows)
    if keep:
        wanted -= rows
    else:
        wanted &= rows
    if len(wanted) == batch.num_rows:
        return batch
    if not wanted:
        return batch.slice(0, 0)
    indexes = wanted.to_array()  # array('Q'): wrapped by Arrow without a copy
    positions = pa.Array.from_buffers(pa.uint64(), len(indexes), [None, pa.py_buffer(indexes)])
    return batch.take(pc.subtract(positions, pa.scalar(first_row, pa.uint64())))


def _conform(batch: pa.RecordBatch, schema: pa.Schema, present: set[str]) -> pa.RecordBatch:
    """Columns in table order; columns the old file lacks are written as NULL."""
    arrays = [
        batch.column(f.name) if f.name in present else pa.nulls(batch.num_rows, f.type)
        for f in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _write_change_data(
    table: TableLayout,
    location: str,
    schema: pa.Schema,
    directory: str,
    rows: BitMap64,
    add: Mapping[str, Any],
) -> tuple[dict[str, Any], str]:
    cdc_schema = schema.append(pa.field("_change_type", pa.string()))
    batches = (
        batch.append_column("_change_type", pa.array(["delete"] * batch.num_rows, pa.string()))
        for batch in _filtered_batches(table.storage, location, schema, rows, keep=False)
    )
    target = posixpath.join("_change_data", directory) if directory else "_change_data"
    written = write_data_file(
        table.storage,
        partition_dir=target,
        batches=batches,
        schema=cdc_schema,
        stats=StatsCollector(cdc_schema, 0),
    )
    action = {
        "cdc": {
            "path": written.relative_path,
            "partitionValues": dict(add.get("partitionValues") or {}),
            "size": written.size,
            "dataChange": False,
        }
    }
    return action, written.location
