"""Per-column statistics of a file (Delta JSON `stats`) or parquet row group, as sound bounds.

Delta and parquet statistics are bounds of a column's values, with caveats handled here:

- Delta truncates string statistics to a prefix (32 characters): the min stays a lower bound,
  a max that may have been cut (32 or more UTF-16 units, or ending in the U+FFFF tie-breaker
  some writers append) is ignored. Timestamp statistics are truncated to milliseconds, so the
  max becomes an exclusive bound max + 1 ms (and pre-1970 mins are lowered by 1 ms).
- Float and double maxima are ignored: parquet writers leave NaN out of statistics, and Spark
  orders NaN above every number.
- Decimal statistics given as JSON floats are widened by one unit in the last place; Decimal
  values (`json.loads(text, parse_float=Decimal)`) are taken as exact, which holds only for
  writers that print decimals exactly (Delta Spark; not delta-rs, which rounds to doubles).
- min/max and nullCount stay valid bounds of the remaining rows with wide bounds
  (`tightBounds: false`) and deletion vectors.

Values are read in the column's current type; statistics written in another type (before a
type change) are not comparable and must not reach `ColumnStats.bounds` (see skipping.py).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from dvtool.predicate.sqltypes import (
    BINARY,
    BOOLEAN,
    DATE,
    FLOAT,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NTZ,
    SqlType,
    is_decimal,
    is_floating,
    is_integral,
)

DELTA_STRING_PREFIX = 32
_MILLISECOND = timedelta(milliseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _to_float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _stat_datetime(raw: Any, t: SqlType) -> datetime | None:
    if isinstance(raw, str):
        text = raw.strip().replace(" ", "T", 1)
        value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    elif isinstance(raw, datetime):
        value = raw
    else:
        return None
    if t == TIMESTAMP:
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)


def _stat_value(raw: Any, t: SqlType) -> Any:
    """A statistics value (from JSON or pyarrow) as a value comparable with literals of type
    `t`, or None when it is not usable."""
    if raw is None or isinstance(raw, (dict, list)):
        return None
    if t in (TIMESTAMP, TIMESTAMP_NTZ):
        return _stat_datetime(raw, t)
    if t == DATE:
        if isinstance(raw, datetime):
            return raw.date()
        return raw if isinstance(raw, date) else date.fromisoformat(str(raw))
    if t == BOOLEAN:
        return raw if isinstance(raw, bool) else None
    if isinstance(raw, bool):
        return None
    if is_integral(t):
        return int(raw) if float(raw).is_integer() else None
    if is_floating(t):
        value = float(raw)
        return None if math.isnan(value) else (_to_float32(value) if t == FLOAT else value)
    if is_decimal(t):
        return Decimal(raw) if not isinstance(raw, float) else raw
    if t == STRING:
        return raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
    if t == BINARY:
        return bytes(raw) if isinstance(raw, (bytes, bytearray)) else None
    return None


def _maybe_truncated(value: str) -> bool:
    units = len(value.encode("utf-16-le", "surrogatepass")) // 2
    return units >= DELTA_STRING_PREFIX or value.endswith("\uffff")


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one column of one file or row group, as given (JSON or pyarrow values)."""

    num_rows: int | None
    min_value: Any
    max_value: Any
    null_count: int | None
    truncated: bool  # Delta JSON: string prefixes, timestamps truncated to milliseconds

    def bounds(self, t: SqlType) -> tuple[Any, Any, bool]:
        """(lo, hi, hi_open): sound bounds of the non-NULL values as values of type `t`, None
        where unknown. Raises ValueError, TypeError or ArithmeticError for a value that is
        not of the type."""
        lo, hi = _stat_value(self.min_value, t), _stat_value(self.max_value, t)
        return _adjust_bounds(lo, hi, t, self.truncated)


def _adjust_bounds(lo: Any, hi: Any, t: SqlType, truncated: bool) -> tuple[Any, Any, bool]:
    """Make statistics sound bounds: see the module docstring."""
    hi_open = False
    if is_floating(t):
        hi = None
    elif is_decimal(t):  # decimal statistics parsed as JSON floats are near, not exact
        lo = Decimal(lo) - Decimal(math.ulp(lo)) if isinstance(lo, float) else lo
        hi = Decimal(hi) + Decimal(math.ulp(hi)) if isinstance(hi, float) else hi
    elif truncated and t == STRING and isinstance(hi, str) and _maybe_truncated(hi):
        hi = None
    elif truncated and t in (TIMESTAMP, TIMESTAMP_NTZ):
        epoch = _EPOCH if t == TIMESTAMP else _EPOCH.replace(tzinfo=None)
        if lo is not None and lo < epoch:
            lo -= _MILLISECOND
        if hi is not None:
            hi, hi_open = hi + _MILLISECOND, True
    return lo, hi, hi_open


def stats_from_json(
    stats: Mapping[str, Any] | None, paths: Sequence[tuple[str, ...]]
) -> tuple[int | None, dict[tuple[str, ...], ColumnStats]]:
    """`numRecords` and the statistics of the given physical column paths from an add
    action's parsed `stats` (nested by physical names)."""
    if not stats:
        return None, {}
    num_records = stats.get("numRecords")
    n = int(num_records) if num_records is not None else None
    sections = [stats.get(k) or {} for k in ("minValues", "maxValues", "nullCount")]
    out = {}
    for path in paths:
        lo, hi, nulls = (_dig(section, path) for section in sections)
        counted = isinstance(nulls, (int, float)) and not isinstance(nulls, bool)
        null_count = int(nulls) if counted else None
        out[path] = ColumnStats(n, lo, hi, null_count, truncated=True)
    return n, out


def stats_cover(stats: Mapping[str, Any] | None, paths: Sequence[tuple[str, ...]]) -> bool:
    """Whether parsed add `stats` hold `numRecords` and min, max and null count of `paths`."""
    if not stats or stats.get("numRecords") is None:
        return False
    sections = [stats.get(k) for k in ("minValues", "maxValues", "nullCount")]
    return all(_dig(section, path) is not None for path in paths for section in sections)


def _dig(section: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(section, Mapping):
            return None
        section = section.get(part)
    return section
