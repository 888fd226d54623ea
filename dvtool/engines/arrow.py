"""The in-process engine: pyarrow on a thread pool, no JVM.

A scan reads each file row group by row group. Row groups whose parquet statistics prove that
no row matches are skipped, row groups where every row matches are taken whole, and the rest
are read with only the columns the predicate needs, partition columns added as constants. The
result per file is a bitmap of matching physical row indexes, minus rows its DV already
deletes. Memory stays bounded by one row group batch per thread.

Each file's columns are resolved and conformed to the table's current physical schema
(`dvtool.core.file_schema`: field ids in id mode, other writers' arrow types, type widening)
before the predicate sees them; row-group statistics are used only for columns the file
holds under the table's own physical name.

A rewrite (purge, compaction, copy-on-write delete) runs `dvtool.engines.rewrite.write_bin`
per bin on the thread pool; the fsyncs of new local files run off the writer threads
(`dvtool.data_files.BackgroundSync`) and are awaited before the files are returned.
`dvtool.predicate` (sqlglot, acero) is imported only when a scan runs. Nothing here imports
pandas: the predicate is evaluated with `Predicate.filter`, not `Table.filter(expression)`,
whose `pyarrow.acero` would import it (see dvtool.predicate.arrow).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dvtool.core import arrow_values
from dvtool.core.arrow_types import arrow_schema
from dvtool.core.file_schema import ColumnPlan
from dvtool.core.partitions import partition_arrays
from dvtool.data_files import (
    BackgroundSync,
    RowGroupStats,
    WrittenFile,
    iter_file_batches,
    open_parquet_file,
    row_group_stats,
)
from dvtool.engines.base import (
    Progress,
    RewriteBin,
    ScanFile,
    TableLayout,
)
from dvtool.engines.rewrite import write_bin
from dvtool.errors import PredicateError
from dvtool.io_pool import map_io

if TYPE_CHECKING:  # imported where a scan runs: its sqlglot costs ~0.05 s at start-up
    from dvtool.predicate import Predicate

_ROW = "__dvtool_row_index"
_BASE_INDEXES = arrow_values.from_numpy(np.arange(1 << 16, dtype=np.uint64))
_BASE_LOCK = threading.Lock()


def _row_indexes(first: int, count: int) -> pa.Array:
    """Row indexes first..first+count-1, offset from one cached 0..n array in C++.

    Building them from `range(...)` is a Python loop per row that holds the GIL; this is a
    slice and one vectorised add.
    """
    global _BASE_INDEXES
    base = _BASE_INDEXES
    if count > len(base):
        with _BASE_LOCK:
            if count > len(_BASE_INDEXES):
                _BASE_INDEXES = arrow_values.from_numpy(np.arange(count, dtype=np.uint64))
            base = _BASE_INDEXES
    return pc.add(base.slice(0, count), arrow_values.scalar(first, pa.uint64()))


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
        """One new file per bin; if any bin fails, the files of the others are deleted.

        The files are durable when this returns (the caller commits them next): the writer
        threads hand each local file's fsyncs to a `BackgroundSync`, which runs them while
        the next bins are written, and this waits for all of them before returning.
        """
        done: list[WrittenFile] = []
        lock = threading.Lock()

        # One sync thread per writer, at most 4: fsyncs cost kernel CPU too, and on 2 cores
        # more threads measured no faster.
        with BackgroundSync(threads=min(self.threads, 4)) as sync:

            def one(rewrite_bin: RewriteBin) -> WrittenFile | None:
                written = write_bin(table, configuration, rewrite_bin, sync)
                if written is not None:
                    with lock:
                        done.append(written)
                if progress:
                    progress(1)
                return written

            try:
                outputs = map_io(one, bins, threads=self.threads)
                sync.wait()
                return outputs
            except BaseException:
                # map_io returns only once every bin has finished, so `done` is complete.
                sync.close()  # no fsync runs on a file about to be deleted
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
        predicate.to_arrow()  # the expression, built once here rather than by the threads
        mode = table.column_mapping_mode
        data_schema = arrow_schema(table.schema, mode, table.partition_columns)
        self.columns = [data_schema.field(name) for name in sorted(predicate.columns)]
        self.partitions = _partition_types(table, predicate)

    def matches(self, file: ScanFile) -> BitMap64:
        with open_parquet_file(self.table.storage, file.location) as parquet:
            plan = ColumnPlan.of(parquet.schema_arrow, self.columns, self.table.column_mapping_mode)
            return self._matches(file, parquet, plan)

    def _matches(self, file: ScanFile, parquet: pq.ParquetFile, plan: ColumnPlan) -> BitMap64:
        from dvtool.predicate import Match

        storage = self.table.storage
        groups = [_own_stats(g, plan) for g in row_group_stats(storage, file.location, parquet)]
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
            self._scan_groups(file, parquet, plan, [g.index for g in to_read], matched)
        if file.deleted:
            matched -= file.deleted
        return matched

    def _scan_groups(
        self,
        file: ScanFile,
        parquet: pq.ParquetFile,
        plan: ColumnPlan,
        groups: list[int],
        matched: BitMap64,
    ) -> None:
        batches = iter_file_batches(
            self.table.storage,
            file.location,
            columns=plan.file_columns,
            row_groups=groups,
            parquet=parquet,
        )
        for first_row, batch in batches:
            data = self._with_partitions(pa.Table.from_batches([plan.conform(batch)]), file)
            rows = _row_indexes(first_row, batch.num_rows)
            try:
                hits = self.predicate.filter(data.append_column(_ROW, rows)).column(_ROW)
            except pa.ArrowInvalid as e:  # e.g. integer overflow, an error in ANSI Spark too
                raise PredicateError(
                    f"--where cannot be evaluated on {file.location}: {e}",
                    hint="Widen the arithmetic, e.g. CAST(column AS DOUBLE).",
                ) from None
            if len(hits):
                matched.update(hits.to_pylist())

    def _with_partitions(self, data: pa.Table, file: ScanFile) -> pa.Table:
        if not self.partitions:
            return data
        constants = partition_arrays(file.partition_values, self.partitions, data.num_rows)
        for name, values in constants.items():
            data = data.append_column(name, values)
        return data


def _own_stats(group: RowGroupStats, plan: ColumnPlan) -> RowGroupStats:
    """`group` with only the statistics of columns the file holds under the table's own
    physical name (a column found by field id under another name, or missing, has none, so
    skipping never uses another column's statistics)."""
    renamed = {
        target.name
        for target, source in zip(plan.targets, plan.sources, strict=True)
        if source != target.name
    }
    if not renamed:
        return group

    def own(values: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in values.items() if k.split(".")[0] not in renamed}

    return RowGroupStats(
        group.index,
        group.first_row,
        group.num_rows,
        own(group.min),
        own(group.max),
        own(group.null_count),
    )


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
