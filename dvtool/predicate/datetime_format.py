"""Spark's `date_format(ts, pattern)` as a pyarrow compute expression.

Spark formats with java.time's DateTimeFormatter (Locale.US, here the session time zone
UTC) after checking the pattern itself (`DateTimeFormatterHelper`). This module reproduces
the patterns of `_MAX_COUNT` exactly from arrow's temporal kernels, integer arithmetic,
casts to string, zero padding and `choose` over English names - not `strftime`, whose text
depends on the C locale and the time zone database and whose `%S` prints fractions.
`compile_pattern` parses a pattern once, when the predicate is bound, so that an unsupported
one is a `PredicateError` before any data is read; `format_expression` builds the expression.

Spark's behaviour reproduced here, beyond the obvious:

- `y` is the proleptic year (Spark turns it into java's `u`: ..., -1, 0, 1, ...) unless the
  pattern has an era `G`; then it is the year of the era (0 is 1 BC). `yy` prints the last
  two digits of its absolute value; other counts print `-` before a negative year, and four
  or more `+` before a year with more digits than letters (java's EXCEEDS_PAD);
- `S` is the fraction of the second truncated (not rounded) to its length, zeros past the
  microseconds; the zone letters print the session time zone UTC, constants;
- quoted text is literal (`''` is a quote), so is any other character but `# { }`, and the
  optional-section brackets `[` `]` print their content (every field is available).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.errors import PredicateError
from dvtool.predicate.casts import constant

__all__ = ["DatetimePattern", "compile_pattern", "format_expression"]

_STRING = pa.string()
_INT64 = pa.int64()

# The supported letters and how many of each a field may have. Spark accepts more for some
# (GGGG, zzzz, XXXX, ...) and a few other letters (F, g, O, V, v): they are refused here.
_MAX_COUNT = {
    "G": 3, "y": 6, "M": 4, "L": 4, "Q": 4, "q": 4, "D": 3, "d": 2, "E": 4, "a": 1,
    "H": 2, "h": 2, "k": 2, "K": 2, "m": 2, "s": 2, "S": 9,
    "X": 3, "x": 3, "Z": 3, "z": 3,
}  # fmt: skip
_SUPPORTED = "G y M L Q q D d E a H h k K m s S X x Z z, 'quoted text' and non-letters"
# The zone fields of the session time zone UTC, by letter and count (1-3).
_ZONE_TEXT = {
    "X": ("Z", "Z", "Z"),
    "x": ("+00", "+0000", "+00:00"),
    "Z": ("+0000", "+0000", "+0000"),
    "z": ("UTC", "UTC", "UTC"),
}
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_QUARTERS = ("1st quarter", "2nd quarter", "3rd quarter", "4th quarter")
_RESERVED = "#{}"
_CYCLE_MICROS = 146_097 * 86_400_000_000  # 400 years


@dataclass(frozen=True)
class Field:
    """A run of `count` copies of pattern letter `letter` (`yyyy`)."""

    letter: str
    count: int


Token = Field | str
"""A field, or literal text."""


@dataclass(frozen=True)
class DatetimePattern:
    """A parsed date_format pattern: equal (and hashed) by its text, `pattern`."""

    pattern: str
    tokens: tuple[Token, ...] = field(compare=False, repr=False)
    """Fields and literal text in order: adjacent literals merged, zone fields (constant in
    UTC) as their literal text."""

    @property
    def has_era(self) -> bool:
        """Whether the pattern has a `G` field: its `y` fields then count years of the era."""
        return any(isinstance(t, Field) and t.letter == "G" for t in self.tokens)


def _refuse(pattern: str, problem: str) -> PredicateError:
    return PredicateError(f"date_format pattern {pattern!r}: {problem}")


def _quoted(pattern: str, start: int) -> tuple[str, int]:
    """The literal text of the quote opened at `start` and the position of its closing
    quote, as java.time reads it: `''` inside is a quote, and `''` alone is one too."""
    pos = start + 1
    while pos < len(pattern):
        if pattern[pos] == "'":
            if pos + 1 < len(pattern) and pattern[pos + 1] == "'":
                pos += 1
            else:
                break
        pos += 1
    if pos >= len(pattern):
        problem = f"the quote at position {start + 1} is never closed (write '' for a quote)"
        raise _refuse(pattern, problem)
    text = pattern[start + 1 : pos]
    return (text.replace("''", "'") if text else "'"), pos


def compile_pattern(pattern: str) -> DatetimePattern:
    """Parse a Spark datetime pattern; PredicateError (one line) for what is not supported."""
    tokens: list[Token] = []
    literal: list[str] = []
    depth = 0  # open optional sections
    pos = 0
    while pos < len(pattern):
        c = pattern[pos]
        if "A" <= c <= "Z" or "a" <= c <= "z":
            end = pos
            while end < len(pattern) and pattern[end] == c:
                end += 1
            count = end - pos
            if c not in _MAX_COUNT:
                raise _refuse(pattern, f"letter {c!r} is not supported; supported: {_SUPPORTED}")
            if count > _MAX_COUNT[c]:
                longest = c * _MAX_COUNT[c]
                raise _refuse(pattern, f"{c * count!r} is too long: at most {longest!r}")
            if c in _ZONE_TEXT:  # constant in the session time zone
                literal.append(_ZONE_TEXT[c][count - 1])
            else:
                if literal:
                    tokens.append("".join(literal))
                    literal = []
                tokens.append(Field(c, count))
            pos = end
            continue
        if c == "'":
            text, pos = _quoted(pattern, pos)
            literal.append(text)
        elif c == "[":
            depth += 1
        elif c == "]":
            if not depth:
                raise _refuse(pattern, f"']' at position {pos + 1} closes no optional section")
            depth -= 1
        elif c in _RESERVED:
            raise _refuse(pattern, f"{c!r} is reserved (quote it as text: '{c}')")
        else:
            literal.append(c)
        pos += 1
    if literal:
        tokens.append("".join(literal))
    return DatetimePattern(pattern, tuple(tokens))


def _i64(value: int) -> pc.Expression:
    return constant(value, _INT64)


def _str(value: str) -> pc.Expression:
    return constant(value, _STRING)


def _padded(number: pc.Expression, width: int) -> pc.Expression:
    """A non-negative integer in decimal, zero-padded to `width` digits (never cut)."""
    text = number.cast(_STRING)
    return text if width <= 1 else pc.utf8_lpad(text, width=width, padding="0")


def _mod(a: pc.Expression, b: int) -> pc.Expression:
    """`a % b` for non-negative `a` (arrow's integer divide truncates towards zero)."""
    return pc.subtract(a, pc.multiply(pc.divide(a, _i64(b)), _i64(b)))


def _name(index: pc.Expression, names: tuple[str, ...]) -> pc.Expression:
    """`names[index]` for an integer `index` from 0."""
    return pc.choose(index, *[_str(n) for n in names])


class _Calendar:
    """The fields of a UTC timestamp (java.time's proleptic Gregorian calendar) as int64
    expressions, from arrow's temporal kernels.

    Those kernels hold the year in 16 bits and wrap beyond ±32767, which Spark's timestamps
    reach (year 294247). The Gregorian calendar repeats every 400 years, weekdays included
    (146097 days, 20871 weeks), so the kernels read the timestamp moved by whole 400-year
    cycles to within 400 years of 1970, and the cycles are added back to the year.
    """

    def __init__(self, ts: pc.Expression) -> None:
        micros = ts.cast(_INT64)
        cycles = pc.divide(micros, _i64(_CYCLE_MICROS))
        near = pc.subtract(micros, pc.multiply(cycles, _i64(_CYCLE_MICROS)))
        self.ts = near.cast(pa.timestamp("us"))  # no zone: UTC, and no time zone database
        self.year = pc.add(self.get(pc.year), pc.multiply(cycles, _i64(400)))

    def get(self, kernel: Callable[[pc.Expression], pc.Expression]) -> pc.Expression:
        """`kernel(ts)` (pc.month, pc.hour, ... but not pc.year) as int64."""
        return kernel(self.ts).cast(_INT64)

    def micros(self) -> pc.Expression:
        """The microseconds of the second, 0-999999."""
        millis = pc.multiply(self.get(pc.millisecond), _i64(1000))
        return pc.add(millis, self.get(pc.microsecond))


def _year(c: _Calendar, count: int, era: bool) -> pc.Expression:
    """Field `y`: java's `u` (proleptic year), or with an era `G` its `y` (year of era)."""
    year = c.year
    if era:
        year = pc.if_else(pc.greater(year, _i64(0)), year, pc.subtract(_i64(1), year))
    magnitude = pc.abs(year)
    if count == 2:
        return _padded(_mod(magnitude, 100), 2)
    sign = pc.if_else(pc.less(year, _i64(0)), _str("-"), _str(""))
    if count >= 4:  # java's SignStyle.EXCEEDS_PAD: "+" when wider than the field
        plus = pc.if_else(pc.greater_equal(year, _i64(10**count)), _str("+"), _str(""))
        sign = pc.binary_join_element_wise(sign, plus, _str(""))
    return pc.binary_join_element_wise(sign, _padded(magnitude, count), _str(""))


def _field_text(c: _Calendar, f: Field, era: bool) -> pc.Expression:
    """The text of one field for each timestamp (NULL for NULL)."""
    letter, count = f.letter, f.count
    if letter == "y":
        return _year(c, count, era)
    if letter in "MLQq":
        number, names = (
            (c.get(pc.month), _MONTHS) if letter in "ML" else (c.get(pc.quarter), _QUARTERS)
        )
        if count <= 2:
            return _padded(number, count)
        if letter in "Qq" and count == 3:
            return pc.binary_join_element_wise(_str("Q"), _padded(number, 1), _str(""))
        short = tuple(n[:3] for n in names) if count == 3 else names
        return _name(pc.subtract(number, _i64(1)), short)
    if letter == "E":  # pc.day_of_week: Monday is 0
        return _name(c.get(pc.day_of_week), _DAYS if count == 4 else tuple(d[:3] for d in _DAYS))
    if letter == "S":
        digits = pc.utf8_slice_codeunits(_padded(c.micros(), 6), 0, min(count, 6))
        return pc.binary_join_element_wise(digits, _str("0" * max(count - 6, 0)), _str(""))
    if letter == "G":
        return pc.if_else(pc.greater(c.year, _i64(0)), _str("AD"), _str("BC"))
    kernels = {"d": pc.day, "D": pc.day_of_year, "m": pc.minute, "s": pc.second}
    value = c.get(kernels.get(letter, pc.hour))
    if letter == "a":
        return pc.if_else(pc.less(value, _i64(12)), _str("AM"), _str("PM"))
    if letter == "h":  # 1-12
        value = pc.add(_mod(pc.add(value, _i64(11)), 12), _i64(1))
    elif letter == "k":  # 1-24
        value = pc.if_else(pc.equal(value, _i64(0)), _i64(24), value)
    elif letter == "K":  # 0-11
        value = _mod(value, 12)
    return _padded(value, count)  # d D H h k K m s


def format_expression(ts: pc.Expression, pattern: DatetimePattern) -> pc.Expression:
    """`date_format(ts, pattern)` as Spark 4 gives it (session time zone UTC), as a string
    expression; `ts` is a `timestamp('us', tz='UTC')` expression. NULL gives NULL."""
    if not any(isinstance(t, Field) for t in pattern.tokens):  # constant text
        text = "".join(t for t in pattern.tokens if isinstance(t, str))
        return pc.if_else(pc.is_valid(ts), _str(text), constant(None, _STRING))
    calendar = _Calendar(ts)
    parts = [
        _str(t) if isinstance(t, str) else _field_text(calendar, t, pattern.has_era)
        for t in pattern.tokens
    ]
    return pc.binary_join_element_wise(*parts, _str(""))
