"""The arrow engine's scan: which physical rows of each file satisfy a predicate.

A scan reads each file row group by row group. Row groups whose parquet statistics prove that
no row matches are skipped, row groups where every row matches are taken whole, and the rest
are read with only the columns the predicate needs, partition columns added as constants.
The result per file is a bitmap of matching physical row indexes, minus rows its DV already
deletes.

Each file's columns are resolved and conformed to the table's current physical schema
(`dvtool.delta.protocol.file_schema`: field ids in id mode, other writers' arrow types, type
widening)
before the predicate sees them (exactly: INT96 timestamps read as microseconds, a value the
table's type cannot hold is an error, never a wrapped one); row-group statistics are used
only for columns the file holds under the table's own physical name.

Files are scanned in groups (`scan_groups`): the batches read from the files of one group are
filtered together, in one acero plan per `PLAN_ROWS` rows (or `PLAN_BYTES` of the predicate's
columns, whichever comes first), not one per file. A plan costs ~130 us to set up whatever
its size, as much as reading a 2,000-row file's column: on tables of thousands of small
files (streaming ingest) that set-up was a third of the scan. Files are read in batches of
`FILTER_ROWS` rows, or a row group at a time when its predicate columns are fixed-width and
small (`read_rows`). Memory stays bounded by `PLAN_BYTES` plus one batch per thread.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dvtool.arrays import arrow_values
from dvtool.data_files import RowGroupStats, iter_file_batches, open_parquet_file, row_group_stats
from dvtool.delta.protocol.arrow_types import arrow_schema
from dvtool.delta.protocol.file_schema import ColumnPlan
from dvtool.delta.protocol.partitions import partition_arrays
from dvtool.engines.base import ScanFile, TableLayout
from dvtool.errors import InvalidInputError, PredicateError

if TYPE_CHECKING:  # imported where a scan runs: its sqlglot costs ~0.05 s at start-up
    from dvtool.predicate import Predicate

FILTER_ROWS = 1 << 16  # rows per read batch of byte-array or repeated columns
PLAN_ROWS = 1 << 20  # rows per acero filter plan, at most
PLAN_BYTES = 64 << 20  # bytes of predicate columns per filter plan, about
# A row group whose predicate columns are fixed-width and take at most this many bytes in
# memory is read whole and filtered in one plan: a 100,000-row row group read in batches of
# FILTER_ROWS pays the batch reader's set-up and a second plan, which cost more than
# decoding one int column (measured: a 10% delete on 10 such files scanned in 20 ms instead
# of 27). Byte-array and repeated columns are read in batches: their size in memory is not
# bounded by the row count.
WHOLE_ROW_GROUP_BYTES = 64 << 20
# Bytes per value in memory, at most: a decimal stored as INT32/INT64 reads as decimal128.
_FIXED_WIDTHS = dict.fromkeys(("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE"), 16)
# FIXED_LEN_BYTE_ARRAY: a decimal (decimal256 at most) or a fixed binary of at most 32
# bytes; a longer one is read in batches.
_FIXED_WIDTHS["FIXED_LEN_BYTE_ARRAY"] = 32
_POSITION = "__dvtool_position"


def scan_groups(files: Sequence[ScanFile], threads: int) -> list[Sequence[ScanFile]]:
    """Consecutive files in groups of about `PLAN_ROWS` rows, at least 4 groups per thread
    (while there are files enough): small files share filter plans, threads stay busy."""
    total = sum(f.num_records or FILTER_ROWS for f in files)
    target = max(1, min(PLAN_ROWS, total // max(1, threads * 4)))
    groups: list[Sequence[ScanFile]] = []
    start, rows = 0, 0
    for i, file in enumerate(files):
        rows += file.num_records or FILTER_ROWS
        if rows >= target:
            groups.append(files[start : i + 1])
            start, rows = i + 1, 0
    if start < len(files):
        groups.append(files[start:])
    return groups


@dataclass(frozen=True)
class _Piece:
    """Rows read from one file: `data` holds its rows from physical index `first_row` on."""

    file: int
    first_row: int
    data: pa.Table


class FileScan:
    """The per-table parts of a scan: expression, columns to read and their types."""

    def __init__(self, table: TableLayout, predicate: Predicate) -> None:
        self.table = table
        self.predicate = predicate
        predicate.to_arrow()  # the expression, built once here rather than by the threads
        mode = table.column_mapping_mode
        data_schema = arrow_schema(table.schema, mode, table.partition_columns)
        self.columns = [data_schema.field(name) for name in sorted(predicate.columns)]
        self.partitions = _partition_types(table, predicate)

    def matches(self, files: Sequence[ScanFile]) -> list[BitMap64]:
        """The matching physical rows of each file, not counting rows its DV deletes."""
        matched = [BitMap64() for _ in files]
        pending: list[_Piece] = []
        rows = size = 0
        for index, file in enumerate(files):
            for piece in self._pieces(index, file, matched[index]):
                pending.append(piece)
                rows += piece.data.num_rows
                size += piece.data.nbytes
                if rows >= PLAN_ROWS or size >= PLAN_BYTES:
                    self._filter(pending, files, matched)
                    pending, rows, size = [], 0, 0
        self._filter(pending, files, matched)
        for file, rows_of_file in zip(files, matched, strict=True):
            if file.deleted:
                rows_of_file -= file.deleted
        return matched

    def _pieces(self, index: int, file: ScanFile, matched: BitMap64) -> Iterator[_Piece]:
        """The rows of `file` the predicate must see; rows that statistics prove to match
        go straight into `matched`."""
        with open_parquet_file(self.table.storage, file.location) as parquet:
            mode = self.table.column_mapping_mode
            plan = ColumnPlan.of(parquet.schema_arrow, self.columns, mode, location=file.location)
            to_read = self._groups_to_read(file, parquet, plan, matched)
            if not to_read:
                return
            batches = iter_file_batches(
                self.table.storage,
                file.location,
                columns=plan.file_columns,
                batch_size=read_rows(parquet.metadata, plan.file_columns, to_read),
                row_groups=to_read,
                parquet=parquet,
            )
            for first_row, batch in batches:
                data = self._with_partitions(pa.Table.from_batches([plan.conform(batch)]), file)
                yield _Piece(index, first_row, data)

    def _groups_to_read(
        self, file: ScanFile, parquet: pq.ParquetFile, plan: ColumnPlan, matched: BitMap64
    ) -> list[int]:
        from dvtool.predicate import Match

        if file.stats_checked and parquet.metadata.num_row_groups == 1:
            return [0]  # its footer's bounds are the add's, already checked by the planner
        storage = self.table.storage
        to_read = []
        for stats in row_group_stats(storage, file.location, parquet, plan.file_columns):
            group = _own_stats(stats, plan)
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
                to_read.append(group.index)
        return to_read

    def _filter(
        self, pieces: Sequence[_Piece], files: Sequence[ScanFile], matched: list[BitMap64]
    ) -> None:
        """Evaluate the predicate over `pieces` at once and add each hit to its file's rows."""
        if not pieces:
            return
        try:
            combined = _concatenate([p.data for p in pieces])
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # files conformed to unequal types
            combined = None
        if combined is None or len(pieces) == 1:
            for piece in pieces:
                self._filter_one(piece, files, matched)
            return
        try:
            hits = self._positions(combined)
        except (pa.ArrowInvalid, PredicateError):  # again file by file, to name the file
            for piece in pieces:
                self._filter_one(piece, files, matched)
            return
        _distribute(hits, pieces, matched)

    def _filter_one(
        self, piece: _Piece, files: Sequence[ScanFile], matched: list[BitMap64]
    ) -> None:
        try:
            hits = self._positions(piece.data)
        except InvalidInputError as e:  # a string a cast cannot read: Spark fails there too
            raise e.located(files[piece.file].location) from None
        except pa.ArrowInvalid as e:  # e.g. integer overflow, an error in ANSI Spark too
            raise PredicateError(
                f"--where cannot be evaluated on {files[piece.file].location}: {e}",
                hint="Widen the arithmetic, e.g. CAST(column AS DOUBLE).",
            ) from None
        _distribute(hits, [piece], matched)

    def _positions(self, data: pa.Table) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Positions in `data` of the rows where the predicate is TRUE."""
        positions = arrow_values.from_numpy(np.arange(data.num_rows, dtype=np.int64))
        kept = self.predicate.filter(data.append_column(_POSITION, positions))
        chunks = kept.column(_POSITION).chunks
        if not chunks:
            return np.empty(0, dtype=np.int64)
        return np.concatenate([arrow_values.to_numpy(chunk) for chunk in chunks])

    def _with_partitions(self, data: pa.Table, file: ScanFile) -> pa.Table:
        if not self.partitions:
            return data
        constants = partition_arrays(file.partition_values, self.partitions, data.num_rows)
        for name, values in constants.items():
            data = data.append_column(name, values)
        return data


def read_rows(metadata: pq.FileMetaData, columns: Sequence[str], groups: Sequence[int]) -> int:
    """Rows per read of `columns` from the row groups `groups`: FILTER_ROWS, or the largest
    row group's rows when each of them fits WHOLE_ROW_GROUP_BYTES in memory (fixed-width,
    unrepeated columns only: see WHOLE_ROW_GROUP_BYTES)."""
    top = {c.split(".")[0] for c in columns}
    width = 0
    for i in range(metadata.num_columns):
        column = metadata.schema.column(i)
        if column.path.split(".")[0] not in top:
            continue
        fixed = _FIXED_WIDTHS.get(column.physical_type)
        if column.physical_type == "FIXED_LEN_BYTE_ARRAY" and column.length > 32:
            fixed = None  # a fixed-size binary of its length
        if fixed is None or column.max_repetition_level > 0:
            return FILTER_ROWS
        width += fixed + 1  # a validity bit, rounded up
    rows = max((metadata.row_group(g).num_rows for g in groups), default=0)
    if rows <= FILTER_ROWS or rows * max(width, 1) > WHOLE_ROW_GROUP_BYTES:
        return FILTER_ROWS
    return rows


def _concatenate(tables: Sequence[pa.Table]) -> pa.Table:
    """The rows of `tables` (same column names and types) as one table, without copying."""
    if len(tables) == 1:
        return tables[0]
    names = tables[0].column_names
    columns = [
        pa.chunked_array([c for t in tables for c in t.column(i).chunks]) for i in range(len(names))
    ]
    return pa.Table.from_arrays(columns, names=names)


def _distribute(
    hits: np.ndarray[Any, np.dtype[np.int64]], pieces: Sequence[_Piece], matched: list[BitMap64]
) -> None:
    """Add the hit positions of the concatenated `pieces` to their files' row bitmaps."""
    if not len(hits):
        return
    if len(hits) > 1 and not bool(np.all(hits[1:] > hits[:-1])):
        hits = np.sort(hits)  # the filter keeps the input order: a check, seldom a sort
    starts = np.cumsum([0] + [p.data.num_rows for p in pieces])
    bounds = np.searchsorted(hits, starts)
    for i, piece in enumerate(pieces):
        mine = hits[bounds[i] : bounds[i + 1]]
        if len(mine):
            rows = (mine - starts[i] + piece.first_row).astype(np.uint64)
            matched[piece.file] |= BitMap64(array("Q", rows.tobytes()))


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
