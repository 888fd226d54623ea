"""The SQL types of predicate expressions, and Spark's implicit type coercion between them.

Predicates follow Spark 4 with its default ANSI type coercion (`spark.sql.ansi.enabled`):
binary operators and IN lists find a common type of their operands, a string meeting an
integral type is read as BIGINT, a string meeting a fractional or decimal type as DOUBLE, and
a string meeting any other atomic type as that type. Decimal results follow Spark's
`DecimalPrecision` rules. The rules here only compute types; `parse.py` inserts the casts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from dvtool.delta.protocol.schema import ArrayType, DataType, MapType, StructType

MAX_PRECISION = 38


@dataclass(frozen=True)
class SqlType:
    """A Spark SQL type: `name` as Spark prints it, with precision and scale for decimals.

    Struct, array, map, variant and unknown Delta types are opaque: they can only be tested
    for NULL (and resolve.py refuses variant references outright).
    """

    name: str
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        if self.name == "decimal":
            return f"decimal({self.precision},{self.scale})"
        return self.name


BYTE = SqlType("tinyint")
SHORT = SqlType("smallint")
INT = SqlType("int")
LONG = SqlType("bigint")
FLOAT = SqlType("float")
DOUBLE = SqlType("double")
STRING = SqlType("string")
BINARY = SqlType("binary")
BOOLEAN = SqlType("boolean")
DATE = SqlType("date")
TIMESTAMP = SqlType("timestamp")
TIMESTAMP_NTZ = SqlType("timestamp_ntz")
NULL = SqlType("void")
VARIANT = SqlType("variant")
INTERVAL_MONTHS = SqlType("interval year to month")
"""A year-month interval constant; its Literal value is a whole number of months."""
INTERVAL_MICROS = SqlType("interval day to second")
"""A day-time interval constant; its Literal value is a whole number of microseconds."""

INTEGRAL = (BYTE, SHORT, INT, LONG)
FLOATING = (FLOAT, DOUBLE)
DATETIME = (DATE, TIMESTAMP_NTZ, TIMESTAMP)  # in widening order
_NUMERIC_PRECEDENCE = (*INTEGRAL, *FLOATING)
_INTEGRAL_DIGITS = {BYTE: 3, SHORT: 5, INT: 10, LONG: 20}
INTEGRAL_RANGE = {
    BYTE: (-(2**7), 2**7 - 1),
    SHORT: (-(2**15), 2**15 - 1),
    INT: (-(2**31), 2**31 - 1),
    LONG: (-(2**63), 2**63 - 1),
}

_DELTA_PRIMITIVES = {
    "long": LONG,
    "integer": INT,
    "short": SHORT,
    "byte": BYTE,
    "float": FLOAT,
    "double": DOUBLE,
    "string": STRING,
    "binary": BINARY,
    "boolean": BOOLEAN,
    "date": DATE,
    "timestamp": TIMESTAMP,
    "timestamp_ntz": TIMESTAMP_NTZ,
    "void": NULL,
    "variant": VARIANT,
}
_DECIMAL_RE = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def decimal(precision: int, scale: int) -> SqlType:
    """The type `decimal(precision, scale)`."""
    return SqlType("decimal", precision, scale)


def is_integral(t: SqlType) -> bool:
    return t in INTEGRAL


def is_floating(t: SqlType) -> bool:
    return t in FLOATING


def is_decimal(t: SqlType) -> bool:
    return t.name == "decimal"


def is_numeric(t: SqlType) -> bool:
    return is_integral(t) or is_floating(t) or is_decimal(t)


def is_datetime(t: SqlType) -> bool:
    return t in DATETIME


def is_atomic(t: SqlType) -> bool:
    """Whether values of `t` can be compared (numbers, strings, binary, booleans, datetimes)."""
    return is_numeric(t) or is_datetime(t) or t in (STRING, BINARY, BOOLEAN)


def from_delta(t: DataType) -> SqlType:
    """The SqlType of a Delta schema type (`long`, `decimal(10,2)`, a struct, ...)."""
    if isinstance(t, StructType):
        return SqlType("struct")
    if isinstance(t, ArrayType):
        return SqlType("array")
    if isinstance(t, MapType):
        return SqlType("map")
    if t in _DELTA_PRIMITIVES:
        return _DELTA_PRIMITIVES[t]
    m = _DECIMAL_RE.fullmatch(t)
    if m:
        return decimal(int(m.group(1)), int(m.group(2)))
    return SqlType(t)


_ARROW = {
    BYTE: pa.int8(),
    SHORT: pa.int16(),
    INT: pa.int32(),
    LONG: pa.int64(),
    FLOAT: pa.float32(),
    DOUBLE: pa.float64(),
    STRING: pa.string(),
    BINARY: pa.binary(),
    BOOLEAN: pa.bool_(),
    DATE: pa.date32(),
    TIMESTAMP: pa.timestamp("us", tz="UTC"),
    TIMESTAMP_NTZ: pa.timestamp("us"),
    NULL: pa.null(),
    INTERVAL_MONTHS: pa.int32(),
    INTERVAL_MICROS: pa.duration("us"),
}


def to_arrow(t: SqlType) -> pa.DataType:
    """The arrow type holding values of `t` (timestamps in microseconds, UTC)."""
    if is_decimal(t):
        return pa.decimal128(t.precision, t.scale)
    return _ARROW[t]


def decimal_for_integral(t: SqlType) -> SqlType:
    """Spark's `DecimalType.forType`: the decimal that holds every value of an integral type."""
    return decimal(_INTEGRAL_DIGITS[t], 0)


def decimal_for_literal(value: int) -> SqlType:
    """Spark's `DecimalType.fromLiteral` for an integer literal: as many digits as it has."""
    return decimal(max(len(str(abs(value))), 1), 0)


def bounded_decimal(precision: int, scale: int) -> SqlType:
    return decimal(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def wider_decimal(a: SqlType, b: SqlType) -> SqlType:
    """Spark's `widerDecimalType`: keeps the integer digits and the scale of both."""
    scale = max(a.scale, b.scale)
    integer_digits = max(a.precision - a.scale, b.precision - b.scale)
    return bounded_decimal(integer_digits + scale, scale)


def _decimal_is_wider(d: SqlType, t: SqlType) -> bool:
    other = decimal_for_integral(t)
    return d.precision - d.scale >= other.precision - other.scale and d.scale >= 0


def tightest_common_type(a: SqlType, b: SqlType) -> SqlType | None:
    """Spark's (ANSI) `findTightestCommonType`: a common type that loses no information."""
    if a == b:
        return a
    if a == NULL:
        return b
    if b == NULL:
        return a
    if is_integral(a) and is_decimal(b):
        return b if _decimal_is_wider(b, a) else None
    if is_decimal(a) and is_integral(b):
        return a if _decimal_is_wider(a, b) else None
    if a in _NUMERIC_PRECEDENCE and b in _NUMERIC_PRECEDENCE:
        wider = max(_NUMERIC_PRECEDENCE.index(a), _NUMERIC_PRECEDENCE.index(b))
        result = _NUMERIC_PRECEDENCE[wider]
        return DOUBLE if result == FLOAT and (is_integral(a) or is_integral(b)) else result
    if is_datetime(a) and is_datetime(b):
        return max(a, b, key=DATETIME.index)
    return None


def _wider_decimal_type(a: SqlType, b: SqlType) -> SqlType | None:
    if is_decimal(a) and is_decimal(b):
        return wider_decimal(a, b)
    if is_integral(a) and is_decimal(b):
        return wider_decimal(decimal_for_integral(a), b)
    if is_decimal(a) and is_integral(b):
        return wider_decimal(a, decimal_for_integral(b))
    if (is_floating(a) and is_decimal(b)) or (is_decimal(a) and is_floating(b)):
        return DOUBLE
    return None


def _string_promotion(a: SqlType, b: SqlType) -> SqlType | None:
    """Spark's ANSI `findWiderTypeForString`: the type a string operand is read as."""
    if b == STRING:
        a, b = b, a
    if a != STRING or b == STRING:
        return None
    if is_integral(b):
        return LONG
    if is_floating(b) or is_decimal(b):
        return DOUBLE
    if b == NULL or is_atomic(b):
        return STRING if b == NULL else b
    return None


def common_type(a: SqlType, b: SqlType) -> SqlType | None:
    """The type both operands of a comparison, IN or COALESCE are cast to, or None."""
    return tightest_common_type(a, b) or _wider_decimal_type(a, b) or _string_promotion(a, b)


def arithmetic_type(op: str, a: SqlType, b: SqlType) -> SqlType | None:
    """The result type of `a op b` for `+ - * / %` on numbers, or None when not defined.

    Both operands are cast to this type first, except for decimal `+ - *` whose operands keep
    their own precision (see `decimal_operand`). Decimal `/` and `%`, and `%` on floating point
    numbers, are not supported (None).
    """
    if not (is_numeric(a) or a == NULL) or not (is_numeric(b) or b == NULL):
        return None
    if op == "/":
        return None if is_decimal(a) or is_decimal(b) else DOUBLE
    if is_decimal(a) or is_decimal(b):
        if op == "%":
            return None
        return _decimal_arithmetic(op, a, b)
    result = tightest_common_type(a, b)
    if result == NULL:
        result = INT
    if op == "%" and result is not None and not is_integral(result):
        return None
    return result


def decimal_operand(t: SqlType) -> SqlType:
    """The decimal type an operand of decimal arithmetic is read as."""
    return decimal_for_integral(t) if is_integral(t) else t


def _decimal_arithmetic(op: str, a: SqlType, b: SqlType) -> SqlType | None:
    if is_floating(a) or is_floating(b):
        return DOUBLE
    da = decimal_operand(a) if a != NULL else decimal(1, 0)
    db = decimal_operand(b) if b != NULL else decimal(1, 0)
    precision, scale = exact_decimal_result(op, da, db)
    if precision > 2 * MAX_PRECISION:
        return None
    if precision <= MAX_PRECISION:
        return decimal(precision, scale)
    # Spark's adjustPrecisionScale: keep the integer digits, give up scale down to 6 digits.
    integer_digits = precision - scale
    return decimal(MAX_PRECISION, max(MAX_PRECISION - integer_digits, min(scale, 6)))


def exact_decimal_result(op: str, a: SqlType, b: SqlType) -> tuple[int, int]:
    """Precision and scale of the exact result of decimal `a op b` (`+`, `-` or `*`)."""
    if op == "*":
        return a.precision + b.precision + 1, a.scale + b.scale
    scale = max(a.scale, b.scale)
    return scale + max(a.precision - a.scale, b.precision - b.scale) + 1, scale
