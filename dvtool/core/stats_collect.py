"""Per-file statistics (`add.stats`) for data files dvtool writes, collected like Delta Spark.

`StatsCollector` takes the record batches of one data file as they are written (memory
stays bounded: it keeps one running min, max and null count per column) and gives the
statistics of PROTOCOL.md "Per-file Statistics", nested by physical names for struct columns:

    {"numRecords": N, "minValues": {...}, "maxValues": {...}, "nullCount": {...},
     "tightBounds": true}

Which columns (Delta Spark's `StatisticsCollection`):

- `delta.dataSkippingNumIndexedCols` (default 32): the first N leaf columns of the data
  schema (partition columns are not in data files, so they do not count), in schema order,
  where each field of a struct counts as a leaf and an array or map counts as one leaf;
  negative means all columns. Or
- `delta.dataSkippingStatsColumns`: exactly the named columns (a struct names all its leaves).

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
- Strings: the min is the first 32 characters of the min value. The max, when longer than
  32 UTF-16 code units, is truncated like Delta Spark's `truncateMaxStringAgg`: the prefix
  plus a tie-breaker, U+007F when the next character is below U+007F and U+10FFFF
  otherwise (U+10FFFF characters in the way are kept, up to twice the prefix length; past
  that the max is left out). The old tie-breaker U+FFFF of Delta 1.x/2.x is not used: it
  is not an upper bound for strings continuing with a supplementary character, in UTF-8 order.
- Decimals are JSON numbers in plain notation; `float` columns are rendered with the
  shortest digits that read back to the same float32 (like Java's `Float.toString`).
- NaN and infinities: the JSON never holds NaN or Infinity. Min/max ignore NaN for the min
  (NaN sorts above every number in Spark, so the smallest non-NaN value is the min); when a
  column holds a NaN its max is left out, as NaN would be the max. A min or max that is
  infinite is left out too.
- A column whose values are all null has no min/max; its nullCount is numRecords. Nested
  structs without any min/max are left out of minValues/maxValues.

Min/max from a parquet footer: a writer that just wrote the file can call `defer_bounds()`
before the first batch; the collector then stops computing min/max (one `min_max` pass per
column and batch) for the leaves whose parquet statistics are exact and ordered as Arrow
orders them: top-level signed integers, strings, `date32` and timestamps. The writer feeds
each row group's footer min/max to `add_bounds` (timestamps as raw integers in the file's
unit), and the data of any leaf whose footer lacks them to `update_bounds`. The statistics
are the same either way; floats (NaN, signed zeros), decimals, binaries, `date64` and nested
leaves are always computed from the data.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.core.partitions import float32_shortest
from dvtool.core.schema import StructType
from dvtool.errors import LogError

__all__ = [
    "DEFAULT_NUM_INDEXED_COLS",
    "DEFAULT_STRING_PREFIX_LENGTH",
    "NUM_INDEXED_COLS_KEY",
    "STATS_COLUMNS_KEY",
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

NUM_INDEXED_COLS_KEY = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"
DEFAULT_NUM_INDEXED_COLS = 32
DEFAULT_STRING_PREFIX_LENGTH = 32

ASCII_MAX_CHARACTER = "\x7f"
UTF8_MAX_CHARACTER = "\U0010ffff"

_STATS_KEY_ORDER = ("numRecords", "minValues", "maxValues", "nullCount", "tightBounds")
_EPOCH = datetime(1970, 1, 1)
_MS_PER_UNIT = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}

IndexedColumns = int | Sequence[str | Sequence[str]]


@dataclass
class _Leaf:
    """One selected leaf column and its running statistics."""

    path: tuple[str, ...]
    kind: str  # int, float, float32, decimal, date, timestamp, timestamp_ntz, string, none
    unit: str = ""
    minimum: Any = None
    maximum: Any = None
    null_count: int = 0
    has_nan: bool = False
    deferred: bool = False  # min/max come from `add_bounds`/`update_bounds`, not `update`


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
        self._types = _select_leaves(schema, indexed_columns, opaque_columns)
        self._leaves = [_Leaf(path, *_kind(t)) for path, t in self._types]
        self._deferred: dict[tuple[str, ...], _Leaf] = {}

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
        if rows == 0:
            return
        cache: dict[tuple[str, ...], pa.Array | None] = {}
        for leaf in self._leaves:
            array = _column(batch, leaf.path, cache)
            if array is None:  # not in this batch: all null, as Delta counts missing columns
                leaf.null_count += rows
                continue
            leaf.null_count += array.null_count
            if leaf.kind != "none" and not leaf.deferred and array.null_count < len(array):
                _update_min_max(leaf, array)

    def defer_bounds(self) -> list[tuple[str, ...]]:
        """Stop computing min/max in `update` for the leaves a parquet footer gives exactly.

        Returns their paths (one name each: top-level columns only). The caller must then
        pass every row group's footer min/max of each to `add_bounds`, or its data to
        `update_bounds`, else their min/max are missing from `result`.
        """
        for leaf, (_, arrow_type) in zip(self._leaves, self._types, strict=True):
            if leaf.kind != "none" and _footer_exact(leaf.path, arrow_type):
                leaf.deferred = True
                self._deferred[leaf.path] = leaf
        return list(self._deferred)

    def add_bounds(self, path: tuple[str, ...], low: Any, high: Any, unit: str = "") -> bool:
        """Merge one row group's footer min/max of the deferred leaf at `path`.

        Values are python values as parquet statistics give them (int, str, date); for
        timestamps raw integers in `unit` (`s`, `ms`, `us`, `ns`), floored to milliseconds
        here. Returns False, merging nothing, when the values are not of the leaf's kind:
        the caller then uses `update_bounds`.
        """
        leaf = self._deferred_leaf(path)
        if not _footer_values_fit(leaf.kind, unit, low, high):
            return False
        if leaf.kind in ("timestamp", "timestamp_ntz"):
            low, high = _floor_ms(low, unit), _floor_ms(high, unit)
        _merge_bounds(leaf, low, high)
        return True

    def update_bounds(self, batch: pa.RecordBatch, paths: Sequence[tuple[str, ...]]) -> None:
        """Min/max of the deferred leaves at `paths` from the rows of `batch` (their data)."""
        cache: dict[tuple[str, ...], pa.Array | None] = {}
        for path in paths:
            leaf = self._deferred_leaf(path)
            array = _column(batch, leaf.path, cache)
            if array is not None and array.null_count < len(array):
                _update_min_max(leaf, array)

    def _deferred_leaf(self, path: tuple[str, ...]) -> _Leaf:
        leaf = self._deferred.get(tuple(path))
        if leaf is None:
            raise KeyError(f"no deferred statistics column {'.'.join(path)}")
        return leaf

    def result(self, tight_bounds: bool | None = True) -> dict[str, Any]:
        """The statistics so far; `tightBounds` is left out when `tight_bounds` is None."""
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
        if kind in ("timestamp", "timestamp_ntz"):
            zone = "Z" if kind == "timestamp" else ""
            return _timestamp_text(low) + zone, _timestamp_text(high) + zone
        if kind == "date":
            return _date_text(low), _date_text(high)
        if kind == "string":
            prefix = self.string_prefix_length
            return truncate_min_string(low, prefix), truncate_max_string(high, prefix)
        return low, high


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set `target[p0][p1]...[pn] = value`, creating the nested dicts on the way."""
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


# Column selection


_OPAQUE = pa.null()  # the leaf type of an opaque column: statistics kind "none"


def _select_leaves(
    schema: pa.Schema, indexed_columns: IndexedColumns, opaque: frozenset[str] = frozenset()
) -> list[tuple[tuple[str, ...], pa.DataType]]:
    if isinstance(indexed_columns, bool):
        raise TypeError("indexed_columns must be an int or a list of column paths")
    if opaque:
        # One leaf of no statistics kind per opaque column: nullCount only.
        schema = pa.schema([pa.field(f.name, _OPAQUE) if f.name in opaque else f for f in schema])
    if isinstance(indexed_columns, int):
        limit = None if indexed_columns < 0 else indexed_columns
        out: list[tuple[tuple[str, ...], pa.DataType]] = []
        _first_leaves(list(schema), (), limit, out)
        return out
    wanted = [_as_path(p) for p in indexed_columns]
    return _filter_leaves(list(schema), (), wanted)


def leaf_paths(schema: pa.Schema, indexed_columns: IndexedColumns) -> list[tuple[str, ...]]:
    """The leaf column paths `indexed_columns` selects in `schema` (see StatsCollector)."""
    return [path for path, _ in _select_leaves(schema, indexed_columns)]


def with_required_columns(
    spec: IndexedColumns, schema: pa.Schema, required: Sequence[tuple[str, ...]]
) -> IndexedColumns:
    """`spec` widened so that the `required` physical paths get statistics too (clustering
    columns must have them, PROTOCOL.md "Clustered Table"); `spec` itself when it already
    covers them."""
    selected = leaf_paths(schema, spec)
    covered = set(selected)
    missing = [
        path for path in required if not any(leaf[: len(path)] == tuple(path) for leaf in covered)
    ]
    if not missing:
        return spec
    return [*selected, *(tuple(p) for p in missing)]


def _first_leaves(
    fields: list[pa.Field],
    prefix: tuple[str, ...],
    limit: int | None,
    out: list[tuple[tuple[str, ...], pa.DataType]],
) -> None:
    for f in fields:
        if limit is not None and len(out) >= limit:
            return
        if pa.types.is_struct(f.type):
            _first_leaves(list(f.type), (*prefix, f.name), limit, out)
        else:
            out.append(((*prefix, f.name), f.type))


def _filter_leaves(
    fields: list[pa.Field], prefix: tuple[str, ...], wanted: list[tuple[str, ...]]
) -> list[tuple[tuple[str, ...], pa.DataType]]:
    """The leaves named by `wanted` (paths relative to `fields`), in schema order."""
    out: list[tuple[tuple[str, ...], pa.DataType]] = []
    names = {f.name for f in fields}
    for f in fields:
        here = [p for p in wanted if _name_matches(p[0], f.name, names)]
        if not here:
            continue
        path = (*prefix, f.name)
        if any(len(p) == 1 for p in here):
            if pa.types.is_struct(f.type):
                _first_leaves(list(f.type), path, None, out)
            else:
                out.append((path, f.type))
        elif pa.types.is_struct(f.type):
            out.extend(_filter_leaves(list(f.type), path, [p[1:] for p in here]))
    return out


def _name_matches(wanted: str, name: str, names: set[str]) -> bool:
    """Exact match, or case-insensitive when no field has exactly the wanted name."""
    if wanted == name:
        return True
    return wanted not in names and wanted.lower() == name.lower()


def _as_path(path: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(path, str):
        parsed = parse_column_list(path)
        if len(parsed) != 1:
            raise ValueError(f"{path!r} is not one column path")
        return parsed[0]
    result = tuple(path)
    if not result:
        raise ValueError("empty column path")
    return result


def parse_column_list(text: str) -> list[tuple[str, ...]]:
    """Spark's comma-separated multi-part identifiers: `a, b.c, `x.y`.z` -> paths.

    Backticks quote a name (a doubled backtick is a literal one); whitespace around names is
    ignored. Raises LogError on malformed text (an unclosed backtick, an empty name).
    """
    if not text.strip():
        return []
    paths: list[tuple[str, ...]] = []
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == "`":
            name, i = _quoted_name(text, i)
        else:
            start = i
            while i < n and text[i] not in ".,`":
                i += 1
            name = text[start:i].strip()
            if not name or any(ch.isspace() for ch in name):
                raise LogError(f"bad column list {text!r}: bad column name {name!r}")
        parts.append(name)
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            paths.append(tuple(parts))
            return paths
        if text[i] == ".":
            i += 1
        elif text[i] == ",":
            paths.append(tuple(parts))
            parts = []
            i += 1
        else:
            raise LogError(f"bad column list {text!r} at position {i}")


def _quoted_name(text: str, i: int) -> tuple[str, int]:
    out = []
    i += 1
    while i < len(text):
        if text[i] == "`":
            if i + 1 < len(text) and text[i + 1] == "`":
                out.append("`")
                i += 2
                continue
            return "".join(out), i + 1
        out.append(text[i])
        i += 1
    raise LogError(f"bad column list {text!r}: unclosed backtick")


def physical_column_paths(
    schema: StructType, logical_paths: Iterable[Sequence[str]], mode: str
) -> list[tuple[str, ...]]:
    """Logical column paths (matched case-insensitively, like Delta) as physical paths.

    Paths that name no column of `schema`, or go through a non-struct, are skipped.
    """
    out = []
    for path in logical_paths:
        physical: list[str] = []
        current: StructType | None = schema
        for name in path:
            f = current.get(name) if current is not None else None
            if f is None:
                break
            physical.append(f.physical_name(mode))
            current = f.type if isinstance(f.type, StructType) else None
        else:
            out.append(tuple(physical))
    return out


def stats_columns_spec(
    configuration: Mapping[str, str], schema: StructType, mode: str
) -> int | list[tuple[str, ...]]:
    """What `StatsCollector(indexed_columns=...)` takes for a table's configuration.

    `delta.dataSkippingStatsColumns` (logical names, mapped to physical paths) when set,
    else `delta.dataSkippingNumIndexedCols` (default 32).
    """
    columns = configuration.get(STATS_COLUMNS_KEY)
    if columns is not None:
        return physical_column_paths(schema, parse_column_list(columns), mode)
    text = configuration.get(NUM_INDEXED_COLS_KEY)
    if text is None:
        return DEFAULT_NUM_INDEXED_COLS
    try:
        return int(text.strip())
    except ValueError:
        raise LogError(f"{NUM_INDEXED_COLS_KEY} is not an integer: {text!r}") from None


# Min/max


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


def _footer_exact(path: tuple[str, ...], arrow_type: pa.DataType) -> bool:
    """Whether parquet footer statistics hold this leaf's min/max exactly as `pc.min_max`
    gives them: top-level signed integers, strings (both byte-wise ordered), date32 and
    timestamps. Floats are not (writers skip NaN and store zeros as -0.0/+0.0), nor
    decimals, date64 (written as days), dictionaries or leaves inside structs."""
    if len(path) != 1:
        return False
    t = arrow_type
    return bool(
        pa.types.is_signed_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
    )


def _footer_values_fit(kind: str, unit: str, low: Any, high: Any) -> bool:
    """Whether footer values `low`/`high` are what a leaf of `kind` holds."""
    if kind in ("timestamp", "timestamp_ntz"):
        wanted: tuple[type, ...] = (int,)
        if unit not in _MS_PER_UNIT:
            return False
    elif kind == "int":
        wanted = (int,)
    elif kind == "string":
        wanted = (str,)
    elif kind == "date":
        return all(type(v) is date for v in (low, high))
    else:
        return False
    return all(isinstance(v, wanted) and not isinstance(v, bool) for v in (low, high))


def _merge_bounds(leaf: _Leaf, low: Any, high: Any) -> None:
    if low is None or high is None:
        return
    if leaf.minimum is None or low < leaf.minimum:
        leaf.minimum = low
    if leaf.maximum is None or high > leaf.maximum:
        leaf.maximum = high


def _update_min_max(leaf: _Leaf, array: pa.Array) -> None:
    kind = leaf.kind
    if kind in ("timestamp", "timestamp_ntz"):
        values = array.cast(pa.int64())
        low, high = _min_max(values)
        low, high = _floor_ms(low, leaf.unit), _floor_ms(high, leaf.unit)
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


def _timestamp_text(ms: int) -> str:
    """Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmm` (no zone)."""
    value = _EPOCH + timedelta(milliseconds=ms)
    return (
        f"{_date_text(value)}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        f".{value.microsecond // 1000:03d}"
    )


def _date_text(value: date) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def truncate_min_string(value: str, prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH) -> str:
    """The min string as Delta Spark stores it: its first `prefix_length` characters."""
    return value[: max(prefix_length, 0)]


def truncate_max_string(
    value: str, prefix_length: int = DEFAULT_STRING_PREFIX_LENGTH
) -> str | None:
    """Delta Spark's `truncateMaxStringAgg`: a short upper bound of `value`, or None.

    Lengths count UTF-16 code units, as Java strings do. A value of at most `prefix_length`
    units is kept. Otherwise the prefix (not splitting a surrogate pair) is extended over any
    U+10FFFF characters, then followed by U+007F if the next character is below it, else by
    U+10FFFF; the result is greater than or equal to every string starting with that prefix
    (in UTF-8 byte order), so it stays an upper bound. If the prefix would exceed twice
    `prefix_length` units, there is no bound (None: the max is left out).
    """
    units = _utf16_length(value)
    if units <= prefix_length:
        return value
    if prefix_length <= 0:
        return None
    chars = list(value)
    # Characters (code points) covering the first prefix_length units, not splitting a pair.
    count, used = 0, 0
    while count < len(chars) and used < prefix_length:
        used += _units(chars[count])
        count += 1
    limit = 2 * prefix_length
    while used <= limit:
        if count >= len(chars):
            return value
        ch = chars[count]
        if ch == UTF8_MAX_CHARACTER:
            count += 1
            used += 2
        elif ch < ASCII_MAX_CHARACTER:
            return "".join(chars[:count]) + ASCII_MAX_CHARACTER
        else:
            return "".join(chars[:count]) + UTF8_MAX_CHARACTER
    return None


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _utf16_length(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


# JSON


def stats_json(stats: Mapping[str, Any]) -> str:
    """Compact JSON of `stats`, `numRecords` first (readers match `^{"numRecords":N`).

    Decimals are written as plain JSON numbers; NaN and infinities are refused (ValueError).
    """
    ordered = {k: stats[k] for k in _STATS_KEY_ORDER if k in stats}
    ordered.update({k: v for k, v in stats.items() if k not in ordered})
    return _dump(ordered)


def _dump(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_dump(str(k))}:{_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} cannot be written as JSON")
        return f"{value:f}"
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} cannot be written as JSON")
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
