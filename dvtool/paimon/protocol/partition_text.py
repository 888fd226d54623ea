"""A partition value as text, exactly as Paimon (Java) names its folder, without any IO.

Paimon's `InternalRowPartitionComputer` turns each value into text one of two ways, chosen
by the table option `partition.legacy-name` (default true):

- legacy: Java's `toString()` of the value as Paimon holds it: numbers as Java prints them
  (`Float.toString`, `Double.toString`: `1.5`, `1.0E10`, `NaN`), DECIMAL as
  `BigDecimal.toPlainString` (`-12.50`), DATE as its day number (`19857`), TIME as its
  millisecond of the day, TIMESTAMP (with or without local time zone) as
  `LocalDateTime.toString` in UTC (`2024-05-14T10:15`, `...T10:15:30.123`: seconds only
  when not zero, the fraction in 3, 6 or 9 digits), strings as they are. A BINARY value is
  a Java array, whose `toString()` is its identity (`[B@1b6d3586`): a different folder
  each time a writer names it, so no reader can find it again (refused);
- cast to STRING (legacy false): numbers and strings as above, DATE as `2024-05-14`,
  TIME as `10:15:30` with the milliseconds' significant digits (at least one when the
  precision is not 0), TIMESTAMP as `2024-05-14 10:15:30` with the nanoseconds' digits
  (trailing zeros cut down to the precision), BINARY as its bytes read as UTF-8.
  TIMESTAMP WITH LOCAL TIME ZONE is printed in the writing JVM's default time zone, which
  no file records (refused).

Java 19 and later print a float or double as the shortest digits that read back as it
(what dvtool prints); Java 18 and older print a few with a digit too many (1.0E23 as
9.999999999999999E22), and which Java wrote a table is recorded nowhere: such a partition
written on an old Java names a folder dvtool does not find (`--verify`: data files missing).

A value whose text is empty or whitespace only (Java's `Character.isWhitespace`) names the
`partition.default-name` folder, as a null does.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal
from typing import Any

from dvtool.errors import UnsupportedFeatureError
from dvtool.paimon.protocol.binary_row import BINARIES, STRINGS, TIMESTAMPS, PaimonType, Timestamp

_EPOCH = dt.date(1970, 1, 1)
# Java's Character.isWhitespace: space separators but the no-break ones, and these controls.
_JAVA_SPACE_CONTROLS = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NO_BREAK_SPACES = frozenset("\xa0\u2007\u202f")


def value_text(value: Any, kind: PaimonType, legacy_name: bool, column: str = "?") -> str | None:
    """The folder text of a partition value of type `kind` (before escaping and before the
    default name replaces blanks); None for null. UnsupportedFeatureError where Paimon's
    text cannot be known (module docstring)."""
    if value is None:
        return None
    root = kind.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root in ("FLOAT", "DOUBLE"):
        return java_float_text(float(value), single=root == "FLOAT")
    if root == "DECIMAL":
        return f"{Decimal(value):f}"
    if root == "DATE":
        days = value if isinstance(value, int) else (value - _EPOCH).days
        return str(days) if legacy_name else format_date(days)
    if root == "TIME":
        millis = _millis_of_day(value)
        return str(millis) if legacy_name else format_time(millis, kind.precision or 0)
    if root in TIMESTAMPS:
        return _timestamp_text(value, kind, legacy_name, column)
    if root in BINARIES:
        if legacy_name:
            raise _refused(
                kind,
                column,
                "partition.legacy-name is true: Paimon names the "
                "folder by the Java identity of the byte array, not its bytes",
            )
        return bytes(value).decode("utf-8", errors="replace")
    if root in STRINGS or isinstance(value, (int, str)):
        return str(value)
    raise _refused(kind, column, "dvtool does not know how Paimon prints it")


def _timestamp_text(value: Timestamp, kind: PaimonType, legacy_name: bool, column: str) -> str:
    if legacy_name:
        return local_date_time_text(value)
    if kind.root == "TIMESTAMP_LTZ":
        raise _refused(
            kind,
            column,
            "partition.legacy-name is false: Paimon prints the "
            "folder in the writing JVM's time zone, which the table does not record",
        )
    return format_timestamp(value, 6 if kind.precision is None else kind.precision)


def _refused(kind: PaimonType, column: str, why: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        f"dvtool cannot name the folders of Paimon partition column {column!r} of type "
        f"{kind.root}: {why}",
        "Inspect this table with Paimon itself; a table with partition.legacy-name "
        "false (BINARY) or true (TIMESTAMP WITH LOCAL TIME ZONE) reads with dvtool.",
    )


def _millis_of_day(value: int | dt.time) -> int:
    if isinstance(value, int):
        return value
    seconds = value.hour * 3600 + value.minute * 60 + value.second
    return seconds * 1000 + value.microsecond // 1000


def is_blank(text: str) -> bool:
    """Whether Paimon's `StringUtils.isNullOrWhitespaceOnly` holds: every char is Java
    whitespace (not Python's: the no-break spaces are not, U+001C..U+001F are)."""
    return all(_java_whitespace(c) for c in text)


def _java_whitespace(c: str) -> bool:
    if c in _JAVA_SPACE_CONTROLS:
        return True
    if c in _NO_BREAK_SPACES:
        return False
    return c.isspace() and c not in "\x85"


def java_float_text(value: float, single: bool) -> str:
    """Java's `Float.toString` (single) or `Double.toString`: the shortest digits that
    read back as the value (at least two significant digits), plain between 10^-3 and 10^7,
    else `d.dddE-n`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits, exponent = _shortest_digits(abs(value), single)
    sign = "-" if value < 0 else ""
    if 1e-3 <= abs(value) < 1e7:
        return sign + _plain(digits, exponent)
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exponent}"


def _plain(digits: str, exponent: int) -> str:
    """`d.ddd x 10^exponent` written out, with at least one fractional digit."""
    point = exponent + 1
    if point <= 0:
        return "0." + "0" * -point + digits
    whole = digits[:point].ljust(point, "0")
    return f"{whole}.{digits[point:] or '0'}"


def _shortest_digits(value: float, single: bool) -> tuple[str, int]:
    """The significant digits (no trailing zeros) and decimal exponent of the shortest
    decimal that rounds to `value` (as a float32 when single), the closest of those; when
    that is one digit, the closest two-digit decimal, as Java prints it."""
    for count in range(1, 18):
        best = _closest_round_trip(value, count, single)
        if best is not None:
            if count == 1:
                best = _closest_round_trip(value, 2, single) or best
            digits, exponent = best
            return digits.rstrip("0") or "0", exponent
    text = f"{value:.16e}"
    return text[0] + text[2:18].rstrip("0"), int(text[19:])


def _closest_round_trip(value: float, count: int, single: bool) -> tuple[str, int] | None:
    """Among the `count`-digit decimals next to `value`, the closest one that reads back as
    `value`; None if none does."""
    mantissa, exponent = f"{value:.{count - 1}e}".split("e")
    unit = Decimal(1).scaleb(int(exponent) - count + 1)
    center = Decimal(mantissa.replace(".", "")) * unit
    exact = Decimal(value)
    found = [
        (abs(c - exact), c)
        for c in (center - unit, center, center + unit)
        if c > 0 and _reads_back(c, value, single)
    ]
    if not found:
        return None
    _, best = min(found)
    _, digit_tuple, exp = best.normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    return digits, int(exp) + len(digits) - 1


def _reads_back(candidate: Decimal, value: float, single: bool) -> bool:
    parsed = float(candidate)
    if single:
        try:
            parsed = struct.unpack("<f", struct.pack("<f", parsed))[0]
        except OverflowError:
            return False
    return parsed == value


def civil_date(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of an epoch day, any year."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _java_year(year: int) -> str:
    """A year as `LocalDate.toString` prints it: 4 digits at least, `+` above 9999."""
    if abs(year) < 1000:
        return f"-{-year:04d}" if year < 0 else f"{year:04d}"
    return f"+{year}" if year > 9999 else str(year)


def local_date_time_text(ts: Timestamp) -> str:
    """Java's `LocalDateTime.toString` of a timestamp read in UTC."""
    year, month, day = civil_date(ts.epoch_day)
    seconds, nanos = divmod(ts.nano_of_day, 1_000_000_000)
    hour, minute, second = seconds // 3600, seconds // 60 % 60, seconds % 60
    text = f"{_java_year(year)}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}"
    if second or nanos:
        text += f":{second:02d}"
    if nanos % 1_000_000 == 0 and nanos:
        text += f".{nanos // 1_000_000:03d}"
    elif nanos % 1000 == 0 and nanos:
        text += f".{nanos // 1000:06d}"
    elif nanos:
        text += f".{nanos:09d}"
    return text


def _int4(value: int) -> str:
    """Calcite's `int4`: four digits of a year by Java's truncating division."""
    return "".join(chr(48 + _java_rem(_java_div(value, d), 10)) for d in (1000, 100, 10, 1))


def _java_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _java_rem(a: int, b: int) -> int:
    return a - b * _java_div(a, b)


def format_date(days: int) -> str:
    """Paimon's `DateTimeUtils.formatDate`: `yyyy-MM-dd`."""
    year, month, day = civil_date(days)
    return f"{_int4(year)}-{month:02d}-{day:02d}"


def format_time(millis: int, precision: int) -> str:
    """Paimon's `DateTimeUtils.formatTimestampMillis`: `HH:mm:ss`, then (precision > 0) a
    point and the milliseconds' digits up to the last non-zero one (at least one)."""
    millis %= 86_400_000
    seconds, ms = divmod(millis, 1000)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if precision <= 0:
        return text
    fraction = ""
    while precision > 0:
        fraction += str(ms // 100)
        ms = ms % 100 * 10
        if ms == 0:
            break
        precision -= 1
    return f"{text}.{fraction}"


def format_timestamp(ts: Timestamp, precision: int) -> str:
    """Paimon's `DateTimeUtils.formatTimestamp` (UTC): `yyyy-MM-dd HH:mm:ss`, then the
    nanoseconds' 9 digits with trailing zeros cut while longer than the precision."""
    year, month, day = civil_date(ts.epoch_day)
    seconds, nanos = divmod(ts.nano_of_day, 1_000_000_000)
    fraction = f"{nanos:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = (
        f"{_int4(year)}-{month:02d}-{day:02d} "
        f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    )
    return f"{text}.{fraction}" if fraction else text
