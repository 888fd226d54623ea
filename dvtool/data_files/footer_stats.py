"""Column statistics held in parquet footers, for both sides of a rewrite.

- `row_group_stats` (reading): min, max and null count per column of each row group, as
  python values, so scans skip row groups the predicate cannot match.
- `footer_bounds` (writing): the min/max of a file just written, taken from its footer
  instead of being computed batch by batch (see `StatsCollector.defer_bounds`); leaves the
  footer has no usable statistics for are read back from the file.

Both read INT64 timestamp statistics from their raw values (`timestamp_unit`): pyarrow would
import pandas to convert those with a zone or in nanoseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvtool.core import arrow_values
from dvtool.data_files.reading import open_parquet_file, row_group_starts

if TYPE_CHECKING:
    from dvtool.core.stats_collect import StatsCollector
    from dvtool.storage.data_file_storage import DataFileStorage

__all__ = ["RowGroupStats", "footer_bounds", "row_group_stats", "timestamp_unit"]

_PARQUET_TIME_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


@dataclass(frozen=True)
class RowGroupStats:
    """Footer statistics of one row group, keyed by physical dotted column path."""

    index: int
    first_row: int
    num_rows: int
    min: dict[str, Any] = field(default_factory=dict)
    max: dict[str, Any] = field(default_factory=dict)
    null_count: dict[str, int] = field(default_factory=dict)


# -- reading: row-group skipping -----------------------------------------------------------


def row_group_stats(
    storage: DataFileStorage, location: str, parquet: pq.ParquetFile | None = None
) -> list[RowGroupStats]:
    """Min, max and null count per column of each row group, from the footer.

    Keys are dotted physical column paths as in the parquet schema (`a`, `s.x`, and
    `l.list.element` inside lists). Values are python values typed by the column's logical
    type (int, float, str, bytes, bool, Decimal, date, datetime). A column without
    statistics is left out of `null_count`; one without valid min/max (or with a NaN bound)
    is left out of `min` and `max`.
    """
    if parquet is None:
        with open_parquet_file(storage, location) as opened:
            meta = opened.metadata
    else:
        meta = parquet.metadata
    starts = row_group_starts(meta)
    timestamps = _timestamp_types(meta)
    out = []
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        minimum: dict[str, Any] = {}
        maximum: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        for c in range(group.num_columns):
            chunk = group.column(c)
            stats = chunk.statistics
            if stats is None:
                continue
            path = chunk.path_in_schema
            if stats.has_null_count:
                nulls[path] = int(stats.null_count)
            if not stats.has_min_max:
                continue
            try:
                low, high = _min_max(stats, timestamps.get(c))
            except (ValueError, pa.ArrowException):
                continue  # a logical type pyarrow cannot convert
            if low is None or high is None or _is_nan(low) or _is_nan(high):
                continue
            minimum[path] = low
            maximum[path] = high
        out.append(RowGroupStats(rg, starts[rg], group.num_rows, minimum, maximum, nulls))
    return out


def _timestamp_types(meta: pq.FileMetaData) -> dict[int, pa.DataType]:
    """The arrow types pyarrow gives the statistics of the INT64 timestamp leaf columns, by
    leaf index: zone "UTC" when the values are adjusted to UTC, none otherwise."""
    out = {}
    for index in range(meta.num_columns):
        column = meta.schema.column(index)
        unit = timestamp_unit(column)
        if unit:
            utc = json.loads(column.logical_type.to_json()).get("isAdjustedToUTC")
            out[index] = pa.timestamp(unit, "UTC" if utc else None)
    return out


def _min_max(stats: pq.Statistics, timestamp: pa.DataType | None) -> tuple[Any, Any]:
    """`stats.min, stats.max`, but INT64 timestamps converted from their raw values here:
    pyarrow imports pandas to convert those with a zone or in nanoseconds (see
    `arrow_values.as_py`). Nanoseconds are widened to the enclosing microseconds, which
    still bound the values (pyarrow gives a pandas Timestamp, or fails without pandas)."""
    if timestamp is None:
        return stats.min, stats.max
    low, high = stats.min_raw, stats.max_raw
    if timestamp.unit == "ns":
        timestamp = pa.timestamp("us", timestamp.tz)
        low, high = low // 1000, -(-high // 1000)
    as_py = arrow_values.as_py
    return as_py(arrow_values.scalar(low, timestamp)), as_py(arrow_values.scalar(high, timestamp))


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def timestamp_unit(column: pq.ColumnSchema) -> str | None:
    """`ms`/`us`/`ns` for an INT64 timestamp column, "" for other columns, None for a
    timestamp column stored otherwise (INT96)."""
    logical = column.logical_type
    if logical is None or logical.type != "TIMESTAMP":
        return ""
    if column.physical_type != "INT64":
        return None
    return _PARQUET_TIME_UNITS.get(json.loads(logical.to_json()).get("timeUnit"))


# -- writing: the statistics of a file just written ----------------------------------------


def footer_bounds(
    parquet: pq.ParquetFile, stats: StatsCollector, deferred: list[tuple[str, ...]]
) -> None:
    """Give `stats` the min/max of the `deferred` top-level leaves from the footer of the
    file just written; leaves the footer has no usable statistics for in some row group
    (pyarrow leaves out strings over 4 KiB, for one) are read back from the file."""
    meta = parquet.metadata
    columns = _top_level_columns(meta)
    missing = [
        path
        for path in deferred
        if path[0] not in columns or not _add_column_bounds(meta, columns[path[0]], path, stats)
    ]
    if not missing:
        return
    names = [path[0] for path in missing]
    # A dotted name would select a nested field: read every column then.
    selected = None if any("." in name for name in names) else names
    for batch in parquet.iter_batches(columns=selected):
        stats.update_bounds(batch, missing)


def _top_level_columns(meta: pq.FileMetaData) -> dict[str, int]:
    """Leaf index by name of the top-level, non-repeated leaf columns whose name has no dot
    (a dotted path is a field inside a struct, or ambiguous with one)."""
    out = {}
    for index in range(meta.num_columns):
        column = meta.schema.column(index)
        if column.max_repetition_level == 0 and "." not in column.path:
            out[column.path] = index
    return out


def _add_column_bounds(
    meta: pq.FileMetaData, index: int, path: tuple[str, ...], stats: StatsCollector
) -> bool:
    """Pass every row group's min/max of leaf column `index` to `stats`; False when some row
    group with non-null values has none."""
    unit = timestamp_unit(meta.schema.column(index))
    if unit is None:
        return False
    for rg in range(meta.num_row_groups):
        chunk = meta.row_group(rg).column(index)
        statistics = chunk.statistics
        if statistics is None:
            return False
        if statistics.has_min_max:
            raw = bool(unit)  # timestamps: integers in the file's unit
            low = statistics.min_raw if raw else statistics.min
            high = statistics.max_raw if raw else statistics.max
            if not stats.add_bounds(path, low, high, unit):
                return False
        elif not (statistics.has_null_count and statistics.null_count == chunk.num_values):
            return False  # values, but no min/max
    return True
