"""How Delta statistics values are written: truncated strings, dates and timestamps as text,
and the `stats` JSON itself (PROTOCOL.md "Per-file Statistics", as Delta Spark writes them).

- Strings: the min is the first 32 characters of the min value. The max, when longer than
  32 UTF-16 code units, is truncated like Delta Spark's `truncateMaxStringAgg`: the prefix
  plus a tie-breaker, U+007F when the next character is below U+007F and U+10FFFF
  otherwise (U+10FFFF characters in the way are kept, up to twice the prefix length; past
  that the max is left out). The old tie-breaker U+FFFF of Delta 1.x/2.x is not used: it
  is not an upper bound for strings continuing with a supplementary character, in UTF-8 order.
- Timestamps: milliseconds since the epoch as `2021-01-01T00:00:00.000` (the caller adds
  `Z` for timestamps with a time zone); dates as `2021-01-01`.
- JSON: compact, `numRecords` first, decimals as plain JSON numbers, never NaN or Infinity.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

__all__ = [
    "ASCII_MAX_CHARACTER",
    "DEFAULT_STRING_PREFIX_LENGTH",
    "UTF8_MAX_CHARACTER",
    "date_text",
    "stats_json",
    "timestamp_text",
    "truncate_max_string",
    "truncate_min_string",
]

DEFAULT_STRING_PREFIX_LENGTH = 32

ASCII_MAX_CHARACTER = "\x7f"
UTF8_MAX_CHARACTER = "\U0010ffff"

_STATS_KEY_ORDER = ("numRecords", "minValues", "maxValues", "nullCount", "tightBounds")
_EPOCH = datetime(1970, 1, 1)


def timestamp_text(ms: int) -> str:
    """Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmm` (no zone)."""
    value = _EPOCH + timedelta(milliseconds=ms)
    return (
        f"{date_text(value)}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        f".{value.microsecond // 1000:03d}"
    )


def date_text(value: date) -> str:
    """A date (or the date of a datetime) as `YYYY-MM-DD`, years zero-padded to 4 digits."""
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

# The encoder of the fast path: for built-in types it writes exactly what `_dump` writes (the
# same string escaping, `float.__repr__`, `int.__repr__`, compact separators).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_PLAIN_SCALARS = (str, int, float, bool, type(None))


def stats_json(stats: Mapping[str, Any]) -> str:
    """Compact JSON of `stats`, `numRecords` first (readers match `^{"numRecords":N`).

    Decimals are written as plain JSON numbers; NaN and infinities are refused (ValueError).
    Statistics of built-in values only (no decimal) go through the C JSON encoder, which
    writes the same bytes as `_dump` about 20 times faster (a purge writes one per file).
    """
    ordered = {k: stats[k] for k in _STATS_KEY_ORDER if k in stats}
    ordered.update({k: v for k, v in stats.items() if k not in ordered})
    if _plain(ordered):
        return _ENCODER.encode(ordered)
    return _dump(ordered)


def _plain(value: Any) -> bool:
    """Whether `value` holds only dicts with string keys, lists, and `_PLAIN_SCALARS` (exact
    types: a subclass might render otherwise), for which the encoder and `_dump` agree."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list or kind is tuple:
        return all(_plain(v) for v in value)
    return kind in _PLAIN_SCALARS


def _dump(value: Any) -> str:
    """The reference JSON writer: any mapping, sequence, decimal, or what `json` writes."""
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
