"""Partition values and Hive partition directories.

Partition values live in `add.partitionValues` as strings keyed by physical column name
(PROTOCOL.md, "Partition Value Serialization"). This module parses them into python values
and constant arrow columns, serializes python values back the way Delta Spark writes them,
and builds the Hive-style directory (`region=eu/day=2024-01-01`) new files are written under.

Parsing (`parse_partition_value`) accepts what Delta writers produce:

- JSON null and the empty string are NULL, for every type (Delta Spark writes an empty
  string partition value as null, in a `__HIVE_DEFAULT_PARTITION__` directory).
- `string` as is; integral types as decimal integers (range-checked); `double`/`float` as
  numbers, including Java's `NaN`, `Infinity`, `-Infinity`; `boolean` as `true`/`false`
  (case-insensitive; Spark's other spellings `t`/`f`/`y`/`n`/`yes`/`no`/`1`/`0` too).
- `date` as `YYYY-MM-DD`.
- `timestamp` as `YYYY-MM-DD HH:MM:SS[.ffffff]`, read as UTC (the protocol says "the time
  zone of the writing system"; dvtool assumes UTC), or ISO 8601 with `T` and `Z` or an offset
  (`1970-01-01T00:00:00.123456Z`, as Delta Spark 3 writes). Returned as an aware UTC datetime.
  Digits beyond microseconds are truncated.
- `timestamp_ntz` as `YYYY-MM-DD[ T]HH:MM:SS[.ffffff]`, without a zone; a naive datetime.
- `decimal(p,s)` as a decimal number, rounded half-up to scale `s` like Spark's cast; more
  than `p` digits is an error.
- `binary` as the UTF-8 bytes of the string (Spark casts string to binary that way).

Anything else is a `LogError` naming the value and the type.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from dvtool.arrays import arrow_values
from dvtool.delta.protocol.arrow_types import DECIMAL_RE, delta_to_arrow_type, normalize_type
from dvtool.errors import LogError

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "escape_path_name",
    "parse_partition_value",
    "partition_arrays",
    "partition_directory",
    "serialize_partition_value",
]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Spark's ExternalCatalogUtils.charToEscape (non-Windows): what escapePathName turns into %XX.
_ESCAPED_CHARS = frozenset(
    [chr(c) for c in range(0x01, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)

_INTEGRAL_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}
_TRUE = frozenset({"true", "t", "y", "yes", "1"})
_FALSE = frozenset({"false", "f", "n", "no", "0"})
_INT_RE = re.compile(r"^[+-]?\d+$")
_DATE_RE = re.compile(r"^([+-]?\d{4,})-(\d{1,2})-(\d{1,2})$")
_TIMESTAMP_RE = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{0,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{2}(?::?\d{2})?)?$",
    re.IGNORECASE,
)
_DECIMAL_CONTEXT = Context(prec=100)


# Parsing


def parse_partition_value(text: str | None, delta_type: str) -> Any:
    """The python value of a serialized partition value of `delta_type` (see module doc).

    Returns None for NULL; str, int, float, bool, date, datetime, Decimal or bytes otherwise.
    """
    if text is None or text == "":
        return None
    try:
        return _parse(text, normalize_type(delta_type))
    except (ValueError, InvalidOperation, OverflowError) as e:
        raise LogError(f"partition value {text!r} is not a valid {delta_type}: {e}") from None


def _parse(text: str, t: str) -> Any:
    if t == "string":
        return text
    if t in _INTEGRAL_RANGES:
        stripped = text.strip()
        if not _INT_RE.match(stripped):
            raise ValueError("not an integer")
        value = int(stripped)
        low, high = _INTEGRAL_RANGES[t]
        if not low <= value <= high:
            raise ValueError(f"out of range for {t}")
        return value
    if t in ("double", "float"):
        value_f = _parse_float(text.strip())
        return _to_float32(value_f) if t == "float" else value_f
    if t == "boolean":
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError("not a boolean")
    if t == "date":
        m = _DATE_RE.match(text.strip())
        if not m:
            raise ValueError("expected YYYY-MM-DD")
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if t in ("timestamp", "timestamp_ntz"):
        return _parse_timestamp(text.strip(), aware=t == "timestamp")
    if t == "binary":
        return text.encode("utf-8")
    m = DECIMAL_RE.match(t)
    if m:
        return _parse_decimal(text.strip(), int(m.group(1)), int(m.group(2)))
    raise ValueError(f"{t} is not a type partition values can have")


def _parse_float(text: str) -> float:
    lowered = text.lower().lstrip("+")
    if lowered in ("nan", "-nan"):
        return math.nan
    if lowered in ("infinity", "inf"):
        return math.inf
    if lowered in ("-infinity", "-inf"):
        return -math.inf
    if not re.match(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?$", text):
        raise ValueError("not a number")
    return float(text.rstrip("dDfF"))


def _parse_timestamp(text: str, *, aware: bool) -> datetime:
    m = _TIMESTAMP_RE.match(text)
    if not m:
        raise ValueError("expected YYYY-MM-DD HH:MM:SS[.ffffff] or ISO 8601")
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    micros = int((fraction or "").ljust(6, "0")[:6] or 0)
    value = datetime(
        int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), micros
    )
    if not aware:
        if zone:
            raise ValueError("timestamp_ntz values have no time zone")
        return value
    offset = timedelta(0)
    if zone and zone.upper() not in ("Z", "UTC"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
    return (value - offset).replace(tzinfo=timezone.utc)


def _parse_decimal(text: str, precision: int, scale: int) -> Decimal:
    value = Decimal(text)
    if not value.is_finite():
        raise ValueError("not a finite decimal")
    quantized = value.quantize(
        Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_DECIMAL_CONTEXT
    )
    digits = len(quantized.as_tuple().digits)
    integer_digits = max(digits - scale, 0) if quantized != 0 else 0
    if integer_digits > precision - scale:
        raise ValueError(f"does not fit decimal({precision},{scale})")
    return quantized


def partition_arrays(
    partition_values: Mapping[str, str | None],
    columns: Sequence[tuple[str, str]],
    num_rows: int,
) -> dict[str, pa.Array]:
    """Constant arrow columns of `num_rows` rows, one per `(physical_name, delta_type)`.

    A column missing from `partition_values` is NULL, like an explicit null.
    """
    out: dict[str, pa.Array] = {}
    for name, delta_type in columns:
        arrow_type = delta_to_arrow_type(delta_type)
        value = parse_partition_value(partition_values.get(name), delta_type)
        if value is None:
            out[name] = pa.nulls(num_rows, arrow_type)
        else:
            out[name] = pa.repeat(arrow_values.scalar(value, arrow_type), num_rows)
    return out


# Serializing


def serialize_partition_value(value: Any, delta_type: str) -> str | None:
    """`value` as Delta Spark writes it in `partitionValues` (None for NULL).

    - empty strings and empty binaries are NULL (Spark writes them as null);
    - integers in decimal; booleans `true`/`false`;
    - `double` and `float` as Java's `Double.toString`/`Float.toString` (`1.0`, `1.0E10`,
      `NaN`, `Infinity`), shortest digits that read back to the same value;
    - `date` as `YYYY-MM-DD`;
    - `timestamp` as ISO 8601 in UTC with microseconds, `2024-01-01T10:00:00.000000Z`
      (Delta Spark 3's `write.utcTimestampPartitionValues`, the default); a naive datetime
      is taken as UTC;
    - `timestamp_ntz` as `YYYY-MM-DD HH:MM:SS[.ffffff]` (Spark's cast to string: fraction
      without trailing zeros);
    - `decimal(p,s)` in plain notation with exactly `s` fraction digits;
    - `binary` as its UTF-8 text (ValueError when the bytes are not UTF-8).
    """
    if value is None:
        return None
    t = normalize_type(delta_type)
    if t == "string":
        text = str(value)
        return text if text else None
    if t in _INTEGRAL_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not an integer")
        low, high = _INTEGRAL_RANGES[t]
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range for {t}")
        return str(value)
    if t == "boolean":
        return "true" if value else "false"
    if t == "double":
        return java_double_string(float(value))
    if t == "float":
        return java_float_string(float(value))
    if t == "date":
        if isinstance(value, datetime) or not isinstance(value, date):
            raise ValueError(f"{value!r} is not a date")
        return _date_string(value)
    if t == "timestamp":
        return _timestamp_utc_string(_require_datetime(value))
    if t == "timestamp_ntz":
        return _timestamp_ntz_string(_require_datetime(value))
    if t == "binary":
        data = bytes(value)
        return data.decode("utf-8") if data else None
    m = DECIMAL_RE.match(t)
    if m:
        precision, scale = int(m.group(1)), int(m.group(2))
        quantized = _parse_decimal(str(value), precision, scale)
        return f"{quantized:f}"
    raise ValueError(f"{delta_type} is not a type partition values can have")


def _require_datetime(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise ValueError(f"{value!r} is not a datetime")
    return value


def _date_string(value: date) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _timestamp_utc_string(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return (
        f"{_date_string(value)}T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        f".{value.microsecond:06d}Z"
    )


def _timestamp_ntz_string(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.replace(tzinfo=None)
    text = f"{_date_string(value)} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


def java_double_string(value: float) -> str:
    """Java's `Double.toString` (JDK 19+): shortest digits that read back to `value`.

    Like Java, a one-digit result becomes the closest two-digit one (`4.9E-324`).
    """
    shortest = repr(value)
    if math.isfinite(value) and value != 0.0:
        two = f"{value:.1e}"
        if _significant_digits(shortest) == 1 and float(two) == value:
            shortest = two
    return _java_string(value, shortest)


def java_float_string(value: float) -> str:
    """Java's `Float.toString` (JDK 19+): shortest digits that read back to the float32."""
    shortest = float32_shortest(value)
    target = _to_float32(value)
    if math.isfinite(target) and target != 0.0:
        two = f"{target:.1e}"
        if _significant_digits(shortest) == 1 and _to_float32(float(two)) == target:
            shortest = two
    return _java_string(value, shortest)


def _significant_digits(text: str) -> int:
    return len(Decimal(text).normalize().as_tuple().digits)


def float32_shortest(value: float) -> str:
    """The shortest decimal text (python syntax) that rounds to the float32 of `value`."""
    target = _to_float32(value)
    if not math.isfinite(target) or target == 0.0:
        return repr(target)
    for digits in range(1, 10):
        text = f"{target:.{digits - 1}e}"
        if _to_float32(float(text)) == target:
            return repr(float(text))
    return repr(target)


def _to_float32(value: float) -> float:
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _java_string(value: float, shortest: str) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits_t, exponent = Decimal(shortest).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t))
    point = len(digits) + exponent  # position of the decimal point within digits
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{minus}{digits}{'0' * (point - len(digits))}.0"
        return f"{minus}{digits[:point]}.{digits[point:]}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{minus}{mantissa}E{point - 1}"


# Directories


def escape_path_name(text: str) -> str:
    """Spark's `ExternalCatalogUtils.escapePathName`: the characters below become `%XX`.

    Escaped (uppercase hex of the UTF-16 code unit, as Spark's `%02X`): control characters
    U+0001-U+001F, `"`, `#`, `%`, `'`, `*`, `/`, `:`, `=`, `?`, `\\`, U+007F, `{`, `[`,
    `]`, `^`. Everything else stays as is, including space, `}`, U+0000 and non-ASCII
    characters (Spark escapes ` `, `<`, `>`, `|` only on Windows; dvtool never does).
    """
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED_CHARS else ch for ch in text)


def partition_directory(partition_values: Sequence[tuple[str, str | None]]) -> str:
    """The Hive partition directory, e.g. `region=eu/day=2024-01-01`, as Spark builds it.

    `partition_values` are `(physical_name, serialized value)` in partition column order;
    names and values are escaped with `escape_path_name`, and NULL (or an empty string) is
    `__HIVE_DEFAULT_PARTITION__`. Values are used as serialized in the log, so a timestamp
    column's directory holds its ISO 8601 UTC text (Delta Spark names the directory with the
    session-time-zone text instead; the directory name carries no meaning for readers, which
    take partition values from the log). No partition columns give "".
    """
    parts = []
    for name, value in partition_values:
        shown = HIVE_DEFAULT_PARTITION if value is None or value == "" else escape_path_name(value)
        parts.append(f"{escape_path_name(name)}={shown}")
    return "/".join(parts)


# Arrow types and schemas
