"""Per-file statistics (`add.stats`) for data files dvtool writes, collected like Delta Spark.

`StatsCollector` takes the record batches of one data file as they are written (memory
stays bounded: it keeps one running min, max and null count per column) and gives the
statistics of PROTOCOL.md "Per-file Statistics", nested by physical names for struct columns:

    {"numRecords": N, "minValues": {...}, "maxValues": {...}, "nullCount": {...},
     "tightBounds": true}

Which columns: `dvtool.delta.protocol.stats_columns` (`delta.dataSkippingNumIndexedCols`, default
the
first 32 leaves, or `delta.dataSkippingStatsColumns`). How values are written (string
truncation, timestamp text, the JSON): `dvtool.delta.protocol.stats_values`.

Which statistics:

- `nullCount` for every selected leaf, counting a row whose parent struct is null as null
  (arrays, maps, booleans and binaries get `nullCount` only).
- `minValues`/`maxValues` for Delta Spark's skipping-eligible types only: integral and
  floating point numbers, decimals, dates, timestamps and strings. Booleans get no min/max:
  Delta Spark's `SkippingEligibleDataType` leaves them out (delta-rs does write them).
- Timestamps are truncated (floored) to milliseconds, as the protocol says, and rendered
  ISO 8601 with milliseconds: `2021-01-01T00:00:00.000Z` with a time zone, and
  `2021-01-01T00:00:00.000` for `timestamp_ntz` (Spark's JSON default for it). Readers must
  widen max timestamps by 1 ms; Delta does.
- Strings: the min is the first 32 characters of the min value, the max a 32-character
  prefix with Delta Spark's tie-breaker (`stats_values.truncate_max_string`).
- Decimals are JSON numbers in plain notation; `float` columns are rendered with the
  shortest digits that read back to the same float32 (like Java's `Float.toString`).
- NaN and infinities: the JSON never holds NaN or Infinity. Min/max ignore NaN for the min
  (NaN sorts above every number in Spark, so the smallest non-NaN value is the min); when a
  column holds a NaN its max is left out, as NaN would be the max. A min or max that is
  infinite is left out too.
- A column whose values are all null has no min/max; its nullCount is numRecords. Nested
  structs without any min/max are left out of minValues/maxValues.

Statistics from a parquet footer. The writer of a file has the statistics parquet computed
for its footer; it calls `use_footer()` before the first batch, and `update` then leaves to
the footer what the footer gives exactly (`update` still counts the rows):

- nullCount, summed over the row groups, of every leaf that is one non-repeated parquet
  column of a plain type (integers, float, double, decimal128, strings, binaries, booleans,
  dates, timestamps), top-level or in structs (parquet counts a value under a null struct
  as null, as Delta does). Not of arrays and maps (parquet counts their elements), variant
  and null-typed columns (no statistics), dictionaries (a null dictionary value is null in
  parquet, not in arrow's null count).
- minValues/maxValues of those of them that are integers, strings, date32, timestamps or
  decimal128: their parquet min/max are exact values of the data, in the order Arrow
  compares them (signed or unsigned as the logical type says; strings byte-wise, which is
  code point order; decimals as signed numbers with the column's scale; timestamps read raw,
  in the file's unit, which need not be arrow's: seconds are written as milliseconds).
  Still computed from the data: floats (parquet writers skip NaN, which decides whether
  Delta's max exists, and write a zero min as -0.0 and a zero max as +0.0 whatever the data
  held, while Delta's JSON keeps the sign Arrow's min_max found), date64, other decimal
  widths, dictionaries.

The writer gives each such leaf's row groups to `add_footer`, all or nothing: it returns
False, taking none of them, when a row group has no null count, or no min/max although it
holds values (pyarrow leaves out those of strings over 4 KiB), or values of another kind;
the writer then reads those leaves back from the file into `update_from_file`. The
statistics are byte for byte the same either way (tests/data_files/test_footer_stats.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.delta.protocol.partitions import float32_shortest
from dvtool.delta.protocol.stats_columns import (
    DEFAULT_NUM_INDEXED_COLS,
    NUM_INDEXED_COLS_KEY,
    STATS_COLUMNS_KEY,
    IndexedColumns,
    leaf_paths,
    parse_column_list,
    physical_column_paths,
    select_leaves,
    stats_columns_spec,
    with_required_columns,
)
from dvtool.delta.protocol.stats_values import (
    ASCII_MAX_CHARACTER,
    DEFAULT_STRING_PREFIX_LENGTH,
    UTF8_MAX_CHARACTER,
    date_text,
    stats_json,
    timestamp_text,
    truncate_max_string,
    truncate_min_string,
)

__all__ = [
    "ASCII_MAX_CHARACTER",
    "DEFAULT_NUM_INDEXED_COLS",
    "DEFAULT_STRING_PREFIX_LENGTH",
    "NUM_INDEXED_COLS_KEY",
    "STATS_COLUMNS_KEY",
    "UTF8_MAX_CHARACTER",
    "FooterColumn",
    "FooterGroup",
    "StatsCollector",
    "leaf_paths",
    "parse_column_list",
    "physical_column_paths",
    "stats_columns_spec",
    "stats_json",
    "truncate_max_string",
    "truncate_min_string",
    "with_required_columns",
]

_MS_PER_UNIT = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}
_TIMESTAMP_KINDS = ("timestamp", "timestamp_ntz")

# One row group's footer statistics of a column chunk: (rows in the row group, null count or
# None when absent, min, max); min/max None when absent, timestamps as raw integers.
FooterGroup = tuple[int, int | None, Any, Any]


@dataclass
class _Leaf:
    """One selected leaf column and its running statistics."""

    path: tuple[str, ...]
    kind: str  # int, float, float32, decimal, date, timestamp, timestamp_ntz, string, none
    unit: str = ""  # timestamps
    scale: int = 0  # decimals
    minimum: Any = None
    maximum: Any = None
    null_count: int = 0
    has_nan: bool = False
    footer_nulls: bool = False  # nullCount from the footer (or the file read back)
    footer_bounds: bool = False  # min/max from the footer (or the file read back)
    pending: bool = False  # footer statistics expected, not given yet


@dataclass(frozen=True)
class FooterColumn:
    """A leaf whose statistics the footer of the file being written gives (`use_footer`):
    its null count, and its min/max too when `bounds`."""

    path: tuple[str, ...]
    bounds: bool


class StatsCollector:
    """Delta statistics of one data file, collected batch by batch (see module docstring).

    `schema` is the arrow schema of the data file (physical names, no partition columns).
    `indexed_columns` is `delta.dataSkippingNumIndexedCols` as an int (negative: all), or the
    columns of `delta.dataSkippingStatsColumns` as physical paths: tuples of names or dotted
    strings (backticks quote names with dots, as in Spark SQL). `opaque_columns` are
    top-level columns that count as one leaf with `nullCount` only, whatever their arrow
    type: variant columns (PROTOCOL.md "Statistics for Variant Columns").
    """

    def __init__(
        self,
        schema: pa.Schema,
        indexed_columns: IndexedColumns = DEFAULT_NUM_INDEXED_COLS,
        *,
        string_prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH,
        opaque_columns: frozenset[str] = frozenset(),
    ) -> None:
        self.schema = schema
        self.string_prefix_length = string_prefix_length
        self.num_records = 0
        self._types = select_leaves(schema, indexed_columns, opaque_columns)
        self._leaves = [_new_leaf(path, t) for path, t in self._types]
        self._footer: dict[tuple[str, ...], _Leaf] = {}
        self._active = self._leaves  # the leaves `update` computes something of

    @property
    def columns(self) -> list[tuple[str, ...]]:
        """The paths of the leaf columns statistics are collected for, in schema order."""
        return [leaf.path for leaf in self._leaves]

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Add the rows of `batch` (a record batch or table with the collector's columns)."""
        if isinstance(batch, pa.Table):
            for b in batch.to_batches():
                self.update(b)
            return
        rows = batch.num_rows
        self.num_records += rows
        if rows == 0 or not self._active:
            return
        cache: dict[tuple[str, ...], pa.Array | None] = {}
        for leaf in self._active:
            array = _column(batch, leaf.path, cache)
            if array is None:  # not in this batch: all null, as Delta counts missing columns
                if not leaf.footer_nulls:
                    leaf.null_count += rows
                continue
            nulls = array.null_count
            if not leaf.footer_nulls:
                leaf.null_count += nulls
            if leaf.kind != "none" and not leaf.footer_bounds and nulls < len(array):
                _update_min_max(leaf, array)

    def use_footer(self) -> list[FooterColumn]:
        """Leave to the parquet footer what it gives exactly (see module docstring); returns
        those leaves. Call it before the first batch; the caller must then pass each leaf's
        footer statistics to `add_footer`, or its data to `update_from_file`, before
        `result`."""
        if self.num_records:
            raise RuntimeError("use_footer() must be called before the first rows")
        for leaf, (_, arrow_type) in zip(self._leaves, self._types, strict=True):
            if leaf.path in self._footer or arrow_type.id not in _FOOTER_NULLS_EXACT:
                continue
            leaf.footer_nulls = leaf.pending = True
            leaf.footer_bounds = leaf.kind != "none" and arrow_type.id in _FOOTER_BOUNDS_EXACT
            self._footer[leaf.path] = leaf
        self._active = [
            leaf
            for leaf in self._leaves
            if not (leaf.footer_nulls and (leaf.footer_bounds or leaf.kind == "none"))
        ]
        return [FooterColumn(leaf.path, leaf.footer_bounds) for leaf in self._footer.values()]

    def add_footer(
        self, path: Sequence[str], groups: Iterable[FooterGroup], unit: str = ""
    ) -> bool:
        """Take the footer statistics of the leaf at `path`, one `FooterGroup` per row group
        (timestamps as raw integers in `unit`: `s`, `ms`, `us`, `ns`, floored to milliseconds
        here). All or nothing: False, taking none, when a row group lacks its null count, or
        min/max although it holds values, or they are not of the leaf's kind; the caller then
        passes the leaf's data to `update_from_file`."""
        leaf = self._pending_leaf(path)
        nulls = 0
        low: Any = None
        high: Any = None
        for rows, null_count, lo, hi in groups:
            if type(null_count) is not int or not 0 <= null_count <= rows:
                return False
            nulls += null_count
            if not leaf.footer_bounds or null_count == rows:
                continue
            if not _footer_values_fit(leaf, unit, lo, hi):
                return False
            if leaf.kind in _TIMESTAMP_KINDS:
                lo, hi = _floor_ms(lo, unit), _floor_ms(hi, unit)
            if low is None or lo < low:
                low = lo
            if high is None or hi > high:
                high = hi
        leaf.null_count += nulls
        _merge_bounds(leaf, low, high)
        leaf.pending = False
        return True

    def update_from_file(
        self, batches: Iterable[pa.RecordBatch], paths: Sequence[Sequence[str]]
    ) -> None:
        """The statistics `add_footer` refused for the leaves at `paths`, from all the rows of
        the file written (`batches`, read back: those columns at least)."""
        leaves = [self._pending_leaf(path) for path in paths]
        for batch in batches:
            rows = batch.num_rows
            cache: dict[tuple[str, ...], pa.Array | None] = {}
            for leaf in leaves if rows else ():
                array = _column(batch, leaf.path, cache)
                if array is None:
                    leaf.null_count += rows
                    continue
                leaf.null_count += array.null_count
                if leaf.footer_bounds and array.null_count < len(array):
                    _update_min_max(leaf, array)
        for leaf in leaves:
            leaf.pending = False

    def _pending_leaf(self, path: Sequence[str]) -> _Leaf:
        leaf = self._footer.get(tuple(path))
        if leaf is None:
            raise KeyError(f"no footer statistics column {'.'.join(path)}")
        if not leaf.pending:
            raise RuntimeError(f"the footer statistics of {'.'.join(path)} were given already")
        return leaf

    def result(self, tight_bounds: bool | None = True) -> dict[str, Any]:
        """The statistics so far; `tightBounds` is left out when `tight_bounds` is None.

        Raises RuntimeError while footer statistics `use_footer` expects are missing."""
        pending = [".".join(leaf.path) for leaf in self._footer.values() if leaf.pending]
        if pending:
            raise RuntimeError(f"footer statistics not given for {', '.join(pending)}")
        minimum: dict[str, Any] = {}
        maximum: dict[str, Any] = {}
        null_count: dict[str, Any] = {}
        for leaf in self._leaves:
            _put(null_count, leaf.path, leaf.null_count)
            low, high = self._bounds(leaf)
            if low is not None:
                _put(minimum, leaf.path, low)
            if high is not None:
                _put(maximum, leaf.path, high)
        stats: dict[str, Any] = {
            "numRecords": self.num_records,
            "minValues": minimum,
            "maxValues": maximum,
            "nullCount": null_count,
        }
        if tight_bounds is not None:
            stats["tightBounds"] = bool(tight_bounds)
        return stats

    def _bounds(self, leaf: _Leaf) -> tuple[Any, Any]:
        low, high = leaf.minimum, leaf.maximum
        if low is None or high is None:
            return None, None
        kind = leaf.kind
        if kind in ("float", "float32"):
            low = low if math.isfinite(low) else None
            high = high if math.isfinite(high) and not leaf.has_nan else None
            if kind == "float32":
                low = None if low is None else float(float32_shortest(low))
                high = None if high is None else float(float32_shortest(high))
            return low, high
        if kind in _TIMESTAMP_KINDS:
            zone = "Z" if kind == "timestamp" else ""
            return timestamp_text(low) + zone, timestamp_text(high) + zone
        if kind == "date":
            return date_text(low), date_text(high)
        if kind == "string":
            prefix = self.string_prefix_length
            return truncate_min_string(low, prefix), truncate_max_string(high, prefix)
        return low, high


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set `target[p0][p1]...[pn] = value`, creating the nested dicts on the way."""
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


# Min/max


def _new_leaf(path: tuple[str, ...], t: pa.DataType) -> _Leaf:
    kind, unit = _kind(t)
    scale = t.scale if pa.types.is_decimal(t) else 0
    return _Leaf(path, kind, unit, scale)


def _kind(t: pa.DataType) -> tuple[str, str]:
    """The statistics kind of an arrow type, and the timestamp unit."""
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_integer(t):
        return "int", ""
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float32", ""
    if pa.types.is_float64(t):
        return "float", ""
    if pa.types.is_decimal(t):
        return "decimal", ""
    if pa.types.is_date(t):
        return "date", ""
    if pa.types.is_timestamp(t):
        return ("timestamp" if t.tz is not None else "timestamp_ntz"), t.unit
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_string_view(t):
        return "string", ""
    return "none", ""


def _is_string_view(t: pa.DataType) -> bool:
    check = getattr(pa.types, "is_string_view", None)
    return bool(check(t)) if check is not None else False


def _column(
    batch: pa.RecordBatch, path: tuple[str, ...], cache: dict[tuple[str, ...], pa.Array | None]
) -> pa.Array | None:
    """The leaf at `path`, with parent struct nulls merged in; None if it is missing."""
    if path in cache:
        return cache[path]
    if len(path) == 1:
        index = batch.schema.get_field_index(path[0])
        array = None if index < 0 else batch.column(index)
    else:
        parent = _column(batch, path[:-1], cache)
        array = None
        if parent is not None and pa.types.is_struct(parent.type):
            index = parent.type.get_field_index(path[-1])
            if index >= 0:
                array = parent.flatten()[index]
    if array is not None and pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    cache[path] = array
    return array


# Arrow types (by type id: any unit, zone, precision) whose parquet footer null count is
# arrow's null count (with parent struct nulls merged in): one non-repeated column of a plain
# type. Not dictionaries: parquet counts a null dictionary value as null.
_FOOTER_NULLS_EXACT = frozenset(
    t.id
    for t in (
        pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
        pa.uint64(), pa.float32(), pa.float64(), pa.decimal128(1), pa.string(),
        pa.large_string(), pa.binary(), pa.large_binary(), pa.binary(1), pa.bool_(),
        pa.date32(), pa.date64(), pa.timestamp("s"),
    )
)  # fmt: skip
# Arrow types whose parquet footer min/max are what `pc.min_max` gives: integers (signed or
# unsigned, as their logical type says), strings (byte-wise ordered), date32, timestamps and
# decimal128. Not floats (writers skip NaN and store zeros as -0.0/+0.0), nor date64
# (written as days), nor dictionaries.
_FOOTER_BOUNDS_EXACT = frozenset(
    t.id
    for t in (
        pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
        pa.uint64(), pa.string(), pa.large_string(), pa.date32(), pa.timestamp("s"),
        pa.decimal128(1),
    )
)  # fmt: skip


def _footer_values_fit(leaf: _Leaf, unit: str, low: Any, high: Any) -> bool:
    """Whether footer min/max `low`/`high` are exactly what the leaf's data gives: values of
    its kind (decimals with its scale, which decides their JSON), in order."""
    kind = leaf.kind
    if kind in _TIMESTAMP_KINDS:
        if unit not in _MS_PER_UNIT:
            return False
        wanted: type = int
    elif kind == "int":
        wanted = int
    elif kind == "string":
        wanted = str
    elif kind == "date":
        wanted = date  # exactly: not a datetime
    elif kind == "decimal":
        if not (type(low) is Decimal and type(high) is Decimal):
            return False
        if not (low.is_finite() and high.is_finite()):
            return False
        exponents = (low.as_tuple().exponent, high.as_tuple().exponent)
        return exponents == (-leaf.scale, -leaf.scale) and low <= high
    else:
        return False
    return type(low) is wanted and type(high) is wanted and low <= high


def _merge_bounds(leaf: _Leaf, low: Any, high: Any) -> None:
    if low is None or high is None:
        return
    if leaf.minimum is None or low < leaf.minimum:
        leaf.minimum = low
    if leaf.maximum is None or high > leaf.maximum:
        leaf.maximum = high


def _update_min_max(leaf: _Leaf, array: pa.Array) -> None:
    kind = leaf.kind
    if kind in _TIMESTAMP_KINDS:
        # The array's own unit: a file read back may hold another unit than the schema's.
        unit = array.type.unit if pa.types.is_timestamp(array.type) else leaf.unit
        low, high = _min_max(array.cast(pa.int64()))
        low, high = _floor_ms(low, unit), _floor_ms(high, unit)
    else:
        if kind in ("float", "float32") and not leaf.has_nan:
            leaf.has_nan = bool(pc.any(pc.is_nan(array)).as_py())
        low, high = _min_max(array)
        if kind == "date" and isinstance(low, datetime):  # date64 reads as datetime
            low, high = low.date(), high.date()
        if kind in ("float", "float32") and (low is None or math.isnan(low)):
            return  # only NaNs (and nulls) here
    _merge_bounds(leaf, low, high)


def _min_max(array: pa.Array) -> tuple[Any, Any]:
    result = pc.min_max(array)
    return result["min"].as_py(), result["max"].as_py()


def _floor_ms(value: int | None, unit: str) -> int | None:
    if value is None:
        return None
    if unit == "s":
        return value * 1000
    divisor = _MS_PER_UNIT[unit]
    assert divisor is not None
    return value // divisor
