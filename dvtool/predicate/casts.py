"""Spark's CAST as arrow compute expressions.

One implementation of every supported conversion serves the whole module: row evaluation,
constant folding of literals (`CAST('2024-01-01' AS DATE)`), and parsing partition values,
which are strings cast to the column type.

Semantics are Spark 4's `try_cast` (ANSI CAST with errors turned into NULL): a value that does
not convert (`'abc'` to INT, an out-of-range number, `'2024-02-30'` to DATE) becomes NULL
instead of failing the statement, so such rows never match. Numbers are truncated towards
zero when cast to integers and rounded half up when cast to a smaller decimal scale; strings
are trimmed before parsing; timestamps without a zone are in UTC (the session time zone).

Known differences from Spark, each giving NULL where Spark gives a value: strings with more
than 38 digits or 18 decimal places or an exponent cast to a decimal, hexadecimal floats, and
dates or timestamps written other than `[+]yyyy-m[m]-d[d]` and
`yyyy-mm-dd[( |T)hh:mm[:ss[.ffffff]]][Z|+hh[:mm]]`. Casts whose text formatting differs
between Java and arrow (floating point, decimal and timestamp to string) and floating point
to decimal are not supported at all.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, localcontext
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.predicate.sqltypes import (
    BINARY,
    BOOLEAN,
    BYTE,
    DOUBLE,
    INTEGRAL_RANGE,
    MAX_PRECISION,
    NULL,
    STRING,
    TIMESTAMP_NTZ,
    SqlType,
    decimal,
    is_decimal,
    is_floating,
    is_integral,
    to_arrow,
)

CastFn = Callable[[pc.Expression, SqlType, SqlType], pc.Expression]

_TRUE_STRINGS = arrow_values.array(["t", "true", "y", "yes", "1"], pa.string())
_FALSE_STRINGS = arrow_values.array(["f", "false", "n", "no", "0"], pa.string())
_FLOAT_RE = r"^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?[df]?$|^[+-]?(inf|infinity|nan)$"
_DECIMAL_TEXT_RE = r"^[+-]?(\d{1,20}(\.\d{0,18})?|\.\d{1,18})$"
_INTEGER_TEXT_RE = r"^[+-]?\d{1,38}$"
_TS_RE = (
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?"
    r"(Z|[+-]\d{2}(:?\d{2})?)?$"
)
_WIDE_DECIMAL = 76


def constant(value: Any, typ: pa.DataType) -> pc.Expression:
    """The constant `value` of arrow type `typ` as an expression operand.

    Every constant of an expression is built here, from a pyarrow scalar made by
    `dvtool.arrays.arrow_values`: pyarrow would convert a Python value (`pc.scalar(0)`,
    `pc.equal(x, 0)`) through its pandas check, which imports pandas when installed."""
    return pc.scalar(arrow_values.scalar(value, typ))


TRUE = pc.scalar(arrow_values.TRUE)
FALSE = pc.scalar(arrow_values.FALSE)


def null_of(t: SqlType) -> pc.Expression:
    """A typed NULL constant."""
    return constant(None, to_arrow(t))


def _where(condition: pc.Expression, value: pc.Expression, t: SqlType) -> pc.Expression:
    """`value` where `condition` is true, else NULL (of type `t`)."""
    return pc.if_else(condition, value, null_of(t))


def _regex(x: pc.Expression, pattern: str) -> pc.Expression:
    return pc.match_substring_regex(x, pattern=pattern)


def _replace(x: pc.Expression, pattern: str, replacement: str) -> pc.Expression:
    return pc.replace_substring_regex(x, pattern=pattern, replacement=replacement)


def _trim(x: pc.Expression) -> pc.Expression:
    return pc.utf8_trim_whitespace(x)


def _in_range(x: pc.Expression, lo: int, hi: int) -> pc.Expression:
    """`lo <= x <= hi` for an integral `x`, the bounds as int64 (how pyarrow reads ints)."""
    return pc.and_kleene(
        pc.greater_equal(x, constant(lo, pa.int64())), pc.less_equal(x, constant(hi, pa.int64()))
    )


def decimal_between(
    x: pc.Expression, scale: int, lo: Decimal, hi: Decimal, *, strict: bool = False
) -> pc.Expression:
    """`lo <= x <= hi` (`lo < x < hi` if strict) for a decimal `x` of scale `scale`, compared
    in a decimal256 wide enough for all three (arrow cannot compare mixed decimals beyond 38)."""
    wide = pa.decimal256(_WIDE_DECIMAL, scale)
    x_wide = x.cast(wide)
    above, below = (pc.greater, pc.less) if strict else (pc.greater_equal, pc.less_equal)
    return pc.and_kleene(
        above(x_wide, constant(lo, wide)),
        below(x_wide, constant(hi, wide)),
    )


def integer_digit_limit(scale: int, digits: int) -> tuple[Decimal, Decimal]:
    """The range of values with at most `digits` integer digits, at scale `scale`.

    Computed exactly: decimal's default context keeps 28 digits, fewer than DECIMAL(38, s).
    """
    with localcontext() as exact:
        exact.prec = 100
        bound = Decimal(10) ** digits - Decimal(1).scaleb(-scale)
    return -bound, bound


# --- to integral types ----------------------------------------------------------------------


def _integral_to_integral(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    lo, hi = INTEGRAL_RANGE[dst]
    src_lo, src_hi = INTEGRAL_RANGE[src]
    if lo <= src_lo and src_hi <= hi:
        return x.cast(to_arrow(dst))
    return _where(_in_range(x, lo, hi), x, src).cast(to_arrow(dst), safe=False)


def _floating_to_integral(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    lo, hi = INTEGRAL_RANGE[dst]
    truncated = pc.trunc(x.cast(pa.float64()))
    fits = pc.and_kleene(
        pc.greater_equal(truncated, constant(float(lo), pa.float64())),
        pc.less(truncated, constant(float(hi) + 1, pa.float64())),
    )
    return _where(fits, truncated, DOUBLE).cast(to_arrow(dst), safe=False)


def _decimal_to_integral(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    lo, hi = INTEGRAL_RANGE[dst]
    if Decimal(10) ** (src.precision - src.scale) <= hi:
        return x.cast(to_arrow(dst), safe=False)
    # Truncation towards zero keeps exactly the values strictly between lo - 1 and hi + 1.
    fits = decimal_between(x, src.scale, Decimal(lo - 1), Decimal(hi + 1), strict=True)
    return _where(fits, x, src).cast(to_arrow(dst), safe=False)


def _string_to_integral(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    text = _trim(x)
    number = _where(_regex(text, _INTEGER_TEXT_RE), text, STRING).cast(pa.decimal128(38, 0))
    return _decimal_to_integral(number, decimal(38, 0), dst)


def _boolean_to_number(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    return x.cast(pa.int8()).cast(to_arrow(dst))


# --- to floating point and decimal ----------------------------------------------------------


def _number_to_floating(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    return x.cast(to_arrow(dst), safe=False)


def _decimal_to_floating(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    """Through the decimal's exact text, which arrow parses to the nearest float as Spark's
    `BigDecimal.doubleValue` does; arrow's direct cast is off by an ulp (213.6 becomes
    213.60000000000002), so `double_col < 213.6` would match the row holding 213.6."""
    return x.cast(pa.string()).cast(to_arrow(dst))


def _string_to_floating(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    text = pc.utf8_lower(_trim(x))
    text = _replace(text, r"^([+-]?)inf(inity)?$", r"\1inf")
    text = _replace(text, r"^([^a-z]*\d)[df]$", r"\1")  # Java's 1.5d / 1.5f suffixes
    valid = _regex(pc.utf8_lower(_trim(x)), _FLOAT_RE)
    return _where(valid, text, STRING).cast(pa.float64()).cast(to_arrow(dst))


def _integral_to_decimal(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    # arrow wants a precision that fits the whole integer type, then narrows decimal to decimal
    wide = decimal(MAX_PRECISION, 0)
    return _decimal_to_decimal(x.cast(to_arrow(wide)), wide, dst)


def _decimal_to_decimal(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    digits, scale = src.precision - src.scale, src.scale
    if dst.scale < src.scale:
        x, digits, scale = rounded_half_up(x, src, dst.scale), digits + 1, dst.scale
    if digits > dst.precision - dst.scale:
        lo, hi = integer_digit_limit(scale, dst.precision - dst.scale)
        held = pa.decimal256(digits + scale, scale)
        x = pc.if_else(decimal_between(x, scale, lo, hi), x.cast(held), constant(None, held))
    return x.cast(to_arrow(dst), safe=False)


# pyarrow (26) lowers a decimal's scale wrongly when it drops 14 or more digits at once from
# values near 2**63 or 2**64: 18446744073709551615.5 at scale 18 cast to scale 0 gives
# 18446744068757791458, and `pc.round` is off the same way (9223372036854775807 at scale 18
# rounded to 1 digit gives 9223372036235805787.4). Dropped at most 8 digits at a time, the
# result is exact (tests/predicate/test_decimal_rounding.py checks it against Python's Decimal).
_SCALE_STEP = 8


def _truncated(x: pc.Expression, digits: int, scale: int, to: int) -> pc.Expression:
    """A decimal256 `x` with `digits` integer digits at `scale`, truncated toward zero to
    scale `to` (< `scale`), `_SCALE_STEP` digits at a time."""
    while scale > to:
        scale = max(to, scale - _SCALE_STEP)
        x = x.cast(pa.decimal256(min(max(1, digits + scale), _WIDE_DECIMAL), scale), safe=False)
    return x


def rounded_half_up(x: pc.Expression, src: SqlType, scale: int) -> pc.Expression:
    """`x` (decimal `src`) rounded half away from zero (Spark's HALF_UP) to `scale` digits,
    as a decimal256 with one more integer digit (9.95 -> 10.0). HALF_UP only looks at the
    first digit dropped: truncate to one digit past `scale`, add or subtract 5 there, and
    truncate that digit too."""
    digits = src.precision - src.scale
    wide = x.cast(pa.decimal256(min(src.precision, _WIDE_DECIMAL), src.scale))
    kept = pa.decimal256(min(digits + 1 + scale + 1, _WIDE_DECIMAL), scale + 1)
    y = _truncated(wide, digits, src.scale, scale + 1).cast(kept)
    half = Decimal(5).scaleb(-(scale + 1))
    zero = constant(Decimal(0), kept)
    nudged = pc.add(y, pc.if_else(pc.less(y, zero), constant(-half, kept), constant(half, kept)))
    return _truncated(nudged.cast(kept), digits + 1, scale + 1, scale)


def _string_to_decimal(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    text = _trim(x)
    wide = decimal(38, 18)
    number = _where(_regex(text, _DECIMAL_TEXT_RE), text, STRING).cast(to_arrow(wide))
    return _decimal_to_decimal(number, wide, dst)


def _boolean_to_decimal(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    return _integral_to_decimal(x.cast(pa.int8()), BYTE, dst)


# --- to boolean, string and binary ----------------------------------------------------------


def _number_to_boolean(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    return pc.not_equal(x, constant(0, to_arrow(src)))


def _string_to_boolean(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    text = pc.utf8_lower(_trim(x))
    is_false = _where(pc.is_in(text, value_set=_FALSE_STRINGS), FALSE, BOOLEAN)
    return pc.if_else(pc.is_in(text, value_set=_TRUE_STRINGS), TRUE, is_false)


def _plain_cast(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    return x.cast(to_arrow(dst))


# --- datetimes ------------------------------------------------------------------------------


def _valid_datetime_text(text: pc.Expression, fmt: str) -> pc.Expression:
    """Whether `text` is a real date/time in `fmt` (strptime alone accepts 2024-02-30)."""
    parsed = pc.strptime(text, format=fmt, unit="s", error_is_null=True)
    return pc.equal(pc.strftime(parsed, format=fmt), text)


def _string_to_date(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    text = _replace(_trim(x), r"^\+", "")
    text = _replace(text, r"^(\d{4}-\d{1,2}-\d{1,2})[ T].*$", r"\1")
    text = _replace(text, r"^(\d{4})$", r"\1-01")
    text = _replace(text, r"^(\d{4}-\d{1,2})$", r"\1-01")
    text = _replace(text, r"^(\d{4})-(\d)-", r"\1-0\2-")
    text = _replace(text, r"^(\d{4}-\d{2})-(\d)$", r"\1-0\2")
    valid = _regex(text, r"^\d{4}-\d{2}-\d{2}$")
    valid = pc.and_kleene(valid, _valid_datetime_text(text, "%Y-%m-%d"))
    return _where(valid, text, STRING).cast(pa.timestamp("s")).cast(pa.date32())


def _string_to_timestamp(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    text = _replace(_trim(x), r"^(\d{4}-\d{2}-\d{2})T", r"\1 ")
    text = _replace(text, r"^(\d{4}-\d{2}-\d{2})($|[Z+-])", r"\1 00:00\2")
    text = _replace(text, r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2})($|[.Z+-])", r"\1:00\2")
    fields = pc.utf8_slice_codeunits(text, 0, 19)
    valid = pc.and_kleene(_regex(text, _TS_RE), _valid_datetime_text(fields, "%Y-%m-%d %H:%M:%S"))
    if dst == TIMESTAMP_NTZ:
        text = _replace(text, r"(Z|[+-]\d{2}(:?\d{2})?)$", "")
    else:
        text = _replace(text, r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?)$", r"\1Z")
    return _where(valid, text, STRING).cast(to_arrow(dst))


def _datetime_cast(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    return x.cast(to_arrow(dst))


def _target_kind(t: SqlType) -> str:
    if is_integral(t):
        return "integral"
    if is_floating(t):
        return "floating"
    return t.name


def _source_kind(t: SqlType) -> str:
    return _target_kind(t)


_CASTS: dict[tuple[str, str], CastFn] = {
    ("integral", "integral"): _integral_to_integral,
    ("floating", "integral"): _floating_to_integral,
    ("decimal", "integral"): _decimal_to_integral,
    ("string", "integral"): _string_to_integral,
    ("boolean", "integral"): _boolean_to_number,
    ("integral", "floating"): _number_to_floating,
    ("floating", "floating"): _number_to_floating,
    ("decimal", "floating"): _decimal_to_floating,
    ("string", "floating"): _string_to_floating,
    ("boolean", "floating"): _boolean_to_number,
    ("integral", "decimal"): _integral_to_decimal,
    ("decimal", "decimal"): _decimal_to_decimal,
    ("string", "decimal"): _string_to_decimal,
    ("boolean", "decimal"): _boolean_to_decimal,
    ("integral", "boolean"): _number_to_boolean,
    ("floating", "boolean"): _number_to_boolean,
    ("decimal", "boolean"): _number_to_boolean,
    ("string", "boolean"): _string_to_boolean,
    ("integral", "string"): _plain_cast,
    ("boolean", "string"): _plain_cast,
    ("date", "string"): _plain_cast,
    ("string", "binary"): _plain_cast,
    ("string", "date"): _string_to_date,
    ("timestamp", "date"): _datetime_cast,
    ("timestamp_ntz", "date"): _datetime_cast,
    ("string", "timestamp"): _string_to_timestamp,
    ("date", "timestamp"): _datetime_cast,
    ("timestamp_ntz", "timestamp"): _datetime_cast,
    ("string", "timestamp_ntz"): _string_to_timestamp,
    ("date", "timestamp_ntz"): _datetime_cast,
    ("timestamp", "timestamp_ntz"): _datetime_cast,
}


def can_cast(src: SqlType, dst: SqlType) -> bool:
    """Whether CAST from `src` to `dst` is supported."""
    if src in (dst, NULL):
        return dst != NULL
    return (_source_kind(src), _target_kind(dst)) in _CASTS


def cast_expr(x: pc.Expression, src: SqlType, dst: SqlType) -> pc.Expression:
    """The arrow expression for `CAST(x AS dst)` where `x` has type `src` (see can_cast)."""
    if src == dst:
        return x
    if src == NULL:
        return null_of(dst)
    return _CASTS[(_source_kind(src), _target_kind(dst))](x, src, dst)


MONOTONE_KINDS = {
    ("integral", "integral"),
    ("floating", "integral"),
    ("decimal", "integral"),
    ("integral", "floating"),
    ("integral", "decimal"),
    ("floating", "floating"),
    ("decimal", "floating"),
    ("decimal", "decimal"),
    ("date", "timestamp"),
    ("date", "timestamp_ntz"),
    ("timestamp", "date"),
    ("timestamp_ntz", "date"),
    ("timestamp", "timestamp_ntz"),
    ("timestamp_ntz", "timestamp"),
}


def is_monotone(src: SqlType, dst: SqlType) -> bool:
    """Whether CAST from `src` to `dst` never reorders the values it converts, so it maps
    bounds to bounds. Values that do not fit become NULL: see `may_fail`."""
    return (_source_kind(src), _target_kind(dst)) in MONOTONE_KINDS


def may_fail(src: SqlType, dst: SqlType) -> bool:
    """Whether CAST from `src` to `dst` can turn a non-NULL value into NULL."""
    if src in (dst, NULL):
        return False
    if src == STRING:
        return dst not in (STRING, BINARY)
    if is_floating(src):
        return not is_floating(dst)
    if is_integral(src) and is_integral(dst):
        return INTEGRAL_RANGE[dst][1] < INTEGRAL_RANGE[src][1]
    if is_decimal(src) and (is_decimal(dst) or is_integral(dst)):
        return True
    if is_integral(src) and is_decimal(dst):
        return int(10 ** (dst.precision - dst.scale)) <= INTEGRAL_RANGE[src][1]
    return False
