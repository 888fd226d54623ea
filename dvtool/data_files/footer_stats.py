"""Column statistics held in parquet footers, for both sides of a rewrite.

- `row_group_stats` (reading): min, max and null count per column of each row group, as
  python values, so scans skip row groups the predicate cannot match.
- `footer_statistics` (writing): the null counts and min/max of a file just written, taken
  from its footer (the writer's own metadata) instead of being computed batch by batch
  (see `StatsCollector.use_footer`); `read_back_statistics` reads the leaves the footer has
  no usable statistics for back from the file.

Both read INT64 timestamp statistics from their raw values (`timestamp_unit`): pyarrow would
import pandas to convert those with a zone or in nanoseconds.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvtool.arrays import arrow_values
from dvtool.data_files.reading import open_parquet_file, row_group_starts

if TYPE_CHECKING:
    from dvtool.delta.protocol.stats_collect import FooterColumn, FooterGroup, StatsCollector
    from dvtool.storage.data_file_storage import DataFileStorage

__all__ = [
    "RowGroupStats",
    "footer_statistics",
    "read_back_statistics",
    "row_group_stats",
    "timestamp_unit",
]

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
    storage: DataFileStorage,
    location: str,
    parquet: pq.ParquetFile | None = None,
    columns: Collection[str] | None = None,
) -> list[RowGroupStats]:
    """Min, max and null count per column of each row group, from the footer.

    `columns` (top-level physical names) limits the statistics to those columns' leaves: a
    scan needs only its predicate's, and converting every column's bounds to python values
    cost more than reading a one-column predicate's data of a wide file.

    Keys are dotted physical column paths as in the parquet schema (`a`, `s.x`, and
    `l.list.element` inside lists). Values are python values typed by the column's logical
    type (int, float, str, bytes, bool, Decimal, date, datetime). A column without
    statistics is left out of `null_count`; one without valid min/max (or with a NaN bound,
    or of INT96 timestamps, whose order is undefined) is left out of `min` and `max`.
    """
    if parquet is None:
        with open_parquet_file(storage, location) as opened:
            meta = opened.metadata
    else:
        meta = parquet.metadata
    starts = row_group_starts(meta)
    leaves = _leaves(meta, columns)
    timestamps = _timestamp_types(meta, leaves)
    out = []
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        minimum: dict[str, Any] = {}
        maximum: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        for c in leaves:
            chunk = group.column(c)
            stats = chunk.statistics
            if stats is None:
                continue
            path = chunk.path_in_schema
            if stats.has_null_count:
                nulls[path] = int(stats.null_count)
            if not stats.has_min_max or chunk.physical_type == "INT96":
                continue  # INT96 has no defined order (PARQUET-1065): its min/max mean nothing
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


def _leaves(meta: pq.FileMetaData, columns: Collection[str] | None) -> list[int]:
    """The indexes of the leaf columns under the top-level `columns` (all if None); a name
    holding a dot may take a few more leaves, never fewer."""
    if columns is None:
        return list(range(meta.num_columns))
    schema = meta.schema

    def wanted(path: str) -> bool:
        return any(path == name or path.startswith(name + ".") for name in columns)

    return [i for i in range(meta.num_columns) if wanted(schema.column(i).path)]


def _timestamp_types(meta: pq.FileMetaData, leaves: Iterable[int]) -> dict[int, pa.DataType]:
    """The arrow types pyarrow gives the statistics of the INT64 timestamp leaf columns, by
    leaf index: zone "UTC" when the values are adjusted to UTC, none otherwise."""
    out = {}
    for index in leaves:
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


def footer_statistics(
    meta: pq.FileMetaData,
    schema: pa.Schema,
    stats: StatsCollector,
    columns: Sequence[FooterColumn],
) -> list[tuple[str, ...]]:
    """Give `stats` the statistics of the leaf `columns` (`StatsCollector.use_footer`) from
    `meta`, the footer of the file just written with the arrow `schema`; returns the paths of
    those it could not take there, to be read back from the file (`read_back_statistics`).

    Leaves are found by position: the parquet leaf columns are the arrow schema's leaves in
    order (a dotted parquet path is ambiguous when names hold dots), each checked to be the
    non-repeated column of that path.
    """
    if not columns:
        return []
    layout = _footer_layout(meta, schema)
    groups = [meta.row_group(rg) for rg in range(meta.num_row_groups)]
    missing = []
    for column in columns:
        found = layout.get(column.path)
        if found is None or not _add_footer_column(groups, *found, column, stats):
            missing.append(column.path)
    return missing


def read_back_statistics(
    parquet: pq.ParquetFile, stats: StatsCollector, paths: Sequence[tuple[str, ...]]
) -> None:
    """The statistics of the leaves at `paths` from the rows of the file just written, for
    those the footer lacks (pyarrow leaves out the min/max of strings over 4 KiB)."""
    names = list(dict.fromkeys(path[0] for path in paths))
    # A dotted name would select a nested field: read every column then.
    selected = None if any("." in name for name in names) else names
    stats.update_from_file(parquet.iter_batches(columns=selected), paths)


# A non-repeated parquet leaf column: its index, and `timestamp_unit` of it.
_Leaf = tuple[int, str | None]

# The layout of the last file: a rewrite writes many files of one schema. A tuple, replaced
# whole (threads may race to fill it: each then computes the same layout).
_last_layout: tuple[pa.Schema, pq.ParquetSchema, dict[tuple[str, ...], _Leaf]] | None = None


def _footer_layout(meta: pq.FileMetaData, schema: pa.Schema) -> dict[tuple[str, ...], _Leaf]:
    """`_leaf_layout` of a file, the last one's when the file has the same arrow and parquet
    schemas (both compared: the parquet schema also depends on the writer's options)."""
    global _last_layout
    parquet_schema = meta.schema
    last = _last_layout
    if last is not None and last[0].equals(schema) and last[1].equals(parquet_schema):
        return last[2]
    layout = _leaf_layout(parquet_schema, schema)
    _last_layout = (schema, parquet_schema, layout)
    return layout


def _leaf_layout(
    parquet_schema: pq.ParquetSchema, schema: pa.Schema
) -> dict[tuple[str, ...], _Leaf]:
    """The non-repeated leaves (top level or in structs) of a file written with the arrow
    `schema`, by arrow path; empty when the parquet schema has another layout, without the
    leaves whose parquet column is not the one expected."""
    paths: list[tuple[str, ...] | None] = []
    _arrow_leaves(schema, (), paths)
    if len(paths) != len(parquet_schema):
        return {}
    out: dict[tuple[str, ...], _Leaf] = {}
    for index, path in enumerate(paths):
        if path is None or path in out:
            continue
        column = parquet_schema.column(index)
        if column.max_repetition_level == 0 and column.path == ".".join(path):
            out[path] = (index, timestamp_unit(column))
    return out


# Arrow types written as repeated parquet columns (their leaves are inside arrays or maps).
_REPEATED_TYPES = tuple(
    getattr(pa, name)
    for name in (
        "ListType",
        "LargeListType",
        "FixedSizeListType",
        "MapType",
        "ListViewType",
        "LargeListViewType",
    )
    if hasattr(pa, name)
)
_NOT_FLAT_TYPES = (*_REPEATED_TYPES, pa.BaseExtensionType)


def _arrow_leaves(
    fields: Iterable[pa.Field], prefix: tuple[str, ...], out: list[tuple[str, ...] | None]
) -> None:
    """The parquet leaf columns of `fields` in order: the path of each leaf of a struct
    nesting, None for each leaf inside an array or map (repeated) or an extension type."""
    for f in fields:
        t = f.type
        if isinstance(t, pa.StructType):
            _arrow_leaves(t, (*prefix, f.name), out)
        elif isinstance(t, _NOT_FLAT_TYPES):
            out.extend([None] * _leaf_count(t))
        else:
            out.append((*prefix, f.name))


def _leaf_count(t: pa.DataType) -> int:
    """How many parquet leaf columns a column of arrow type `t` is written as."""
    if isinstance(t, pa.BaseExtensionType):
        return _leaf_count(t.storage_type)
    if isinstance(t, pa.StructType):
        return sum(_leaf_count(f.type) for f in t)
    if isinstance(t, pa.MapType):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if isinstance(t, _REPEATED_TYPES):
        return _leaf_count(t.value_type)
    return 1


def _add_footer_column(
    groups: list[pq.RowGroupMetaData],
    index: int,
    unit: str | None,
    column: FooterColumn,
    stats: StatsCollector,
) -> bool:
    """Pass every row group's statistics of leaf column `index` (`unit`: its
    `timestamp_unit`) to `stats`; False when it takes none (some row group lacks them: the
    leaf is then read back)."""
    if not column.bounds:
        unit = ""
    elif unit is None:
        return False  # INT96 timestamps
    raw = bool(unit)  # timestamps: integers in the file's unit
    rows: list[FooterGroup] = []
    for group in groups:
        statistics = group.column(index).statistics
        if statistics is None or not statistics.has_null_count:
            return False
        low = high = None
        if column.bounds and statistics.has_min_max:
            try:
                low = statistics.min_raw if raw else statistics.min
                high = statistics.max_raw if raw else statistics.max
            except (ValueError, pa.ArrowException):
                return False  # a logical type pyarrow cannot convert
        rows.append((group.num_rows, statistics.null_count, low, high))
    return stats.add_footer(column.path, rows, unit)
