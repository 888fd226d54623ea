"""INTERVAL literals of `--where` predicates, read as Spark 4 reads them (ANSI intervals).

Spark has two interval types: year-month intervals (a whole number of months) and day-time
intervals (a whole number of microseconds), and refuses literals that mix them (`INTERVAL 1
MONTH 2 DAYS`). Both forms of literal are read here:

- unit lists, `INTERVAL 7 DAYS`, `INTERVAL 1 HOUR 30 MINUTES`, `INTERVAL -1.5 SECONDS`,
  `INTERVAL '2 weeks'` (a fraction only on seconds, as in Spark);
- ANSI strings with a unit or a span, `INTERVAL '7' DAY`, `INTERVAL '1-2' YEAR TO MONTH`,
  `INTERVAL '1 02:03:04.5' DAY TO SECOND`.

Which fields a day-time interval has matters: Spark adds an interval of whole days
(`INTERVAL 7 DAYS`, fields DAY only) to a DATE giving a DATE, and any other day-time interval
to a DATE by first casting the date to TIMESTAMP. `Interval.days_only` records that.

Intervals are constants only (Delta has no interval columns), folded while binding; the
tree holds them as `Literal`s of type `INTERVAL_MONTHS` (value: int months) or
`INTERVAL_MICROS` (value: int microseconds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from dvtool.errors import PredicateError
from dvtool.predicate.sqltypes import INTERVAL_MICROS, INTERVAL_MONTHS, SqlType

_MICROS = {
    "WEEK": 7 * 86_400_000_000,
    "DAY": 86_400_000_000,
    "HOUR": 3_600_000_000,
    "MINUTE": 60_000_000,
    "SECOND": 1_000_000,
    "MILLISECOND": 1_000,
    "MICROSECOND": 1,
}
_MONTHS = {"YEAR": 12, "MONTH": 1}
_DAY_UNITS = ("WEEK", "DAY")
_UNIT_TEXT = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s+([A-Za-z]+)\s*")
_UNIT_LIST = re.compile(r"(?:\s*[+-]?\d+(?:\.\d+)?\s+[A-Za-z]+)+\s*")

# ANSI span strings: the fields of each span, as a regex over the unsigned text.
_SPANS = {
    ("YEAR", "MONTH"): r"(\d+)-(\d+)",
    ("DAY", "HOUR"): r"(\d+) (\d+)",
    ("DAY", "MINUTE"): r"(\d+) (\d+):(\d+)",
    ("DAY", "SECOND"): r"(\d+) (\d+):(\d+):(\d+(?:\.\d+)?)",
    ("HOUR", "MINUTE"): r"(\d+):(\d+)",
    ("HOUR", "SECOND"): r"(\d+):(\d+):(\d+(?:\.\d+)?)",
    ("MINUTE", "SECOND"): r"(\d+):(\d+(?:\.\d+)?)",
}
_FIELD_ORDER = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")
_FIELD_LIMIT = {"MONTH": 12, "HOUR": 24, "MINUTE": 60, "SECOND": 60}


@dataclass(frozen=True)
class Interval:
    """A constant interval: `months` for year-month intervals, else `micros`."""

    year_month: bool
    amount: int
    days_only: bool = False

    @property
    def sql_type(self) -> SqlType:
        return INTERVAL_MONTHS if self.year_month else INTERVAL_MICROS

    def negated(self) -> Interval:
        return Interval(self.year_month, -self.amount, self.days_only)

    def plus(self, other: Interval) -> Interval:
        if self.year_month != other.year_month:
            raise PredicateError(
                "cannot mix year-month and day-time interval fields (as in Spark)",
                hint="add them one at a time: ts + INTERVAL 1 MONTH + INTERVAL 2 DAYS",
            )
        return Interval(
            self.year_month, self.amount + other.amount, self.days_only and other.days_only
        )


def interval_of(node: exp.Expr) -> Interval | None:
    """The constant interval `node` denotes (unit lists arrive from sqlglot as sums of
    single-unit intervals), or None when it is no interval expression."""
    if isinstance(node, exp.Paren):
        return interval_of(node.this)
    if isinstance(node, exp.Neg):
        inner = interval_of(node.this)
        return None if inner is None else inner.negated()
    if isinstance(node, (exp.Add, exp.Sub)):
        left, right = interval_of(node.this), interval_of(node.expression)
        if left is None or right is None:
            return None
        return left.plus(right if isinstance(node, exp.Add) else right.negated())
    if isinstance(node, exp.Interval):
        return _literal(node)
    return None


def _literal(node: exp.Interval) -> Interval:
    value, negate = node.this, False
    while isinstance(value, (exp.Neg, exp.Paren)):
        negate ^= isinstance(value, exp.Neg)
        value = value.this
    if not isinstance(value, exp.Literal):
        raise PredicateError(
            f"an INTERVAL needs a constant number: {node.sql(dialect='spark')}",
            hint="e.g. INTERVAL 7 DAYS; for a column n of days use date_add(d, n)",
        )
    text = str(value.this).strip()
    unit = node.args.get("unit")
    if unit is None:
        result = _unit_list(text)
    elif isinstance(unit, exp.IntervalSpan):
        result = _span(text, _unit_name(unit.this), _unit_name(unit.expression))
    else:
        result = _single(text, _unit_name(unit))
    return result.negated() if negate else result


def _unit_name(node: exp.Expr) -> str:
    name = node.name.upper()
    name = name[:-1] if name.endswith("S") else name
    if name not in _MICROS and name not in _MONTHS:
        raise PredicateError(
            f"unknown INTERVAL unit {node.name!r}",
            hint="units: YEAR, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND, MICROSECOND",
        )
    return name


def _single(text: str, unit: str) -> Interval:
    """`INTERVAL 'n' UNIT` or `INTERVAL n UNITS`: whole numbers, fractions only of seconds."""
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise PredicateError(f"cannot read INTERVAL {text!r} {unit} as a number") from None
    if number != number.to_integral_value() and unit != "SECOND":
        raise PredicateError(f"INTERVAL {text} {unit}: only seconds may have a fraction")
    if unit in _MONTHS:
        return Interval(True, int(number) * _MONTHS[unit])
    micros = number * _MICROS[unit]
    if micros != micros.to_integral_value():
        raise PredicateError(f"INTERVAL {text} {unit} is finer than a microsecond")
    return Interval(False, int(micros), unit in _DAY_UNITS)


def _unit_list(text: str) -> Interval:
    """The string of `INTERVAL '1 day 2 hours'`."""
    if not _UNIT_LIST.fullmatch(text):
        raise PredicateError(f"cannot read INTERVAL {text!r}", hint="e.g. INTERVAL '1 day 2 hours'")
    result: Interval | None = None
    for number, unit in _UNIT_TEXT.findall(text):
        one = _single(number, _unit_name(exp.Var(this=unit)))
        result = one if result is None else result.plus(one)
    assert result is not None
    return result


def _span(text: str, first: str, last: str) -> Interval:
    """An ANSI span string such as `'1 02:03:04.5' DAY TO SECOND`."""
    pattern = _SPANS.get((first, last))
    if pattern is None:
        raise PredicateError(f"INTERVAL ... {first} TO {last} is not a Spark interval type")
    sign = -1 if text.startswith("-") else 1
    match = re.fullmatch(pattern, text.lstrip("+-"))
    if match is None:
        raise PredicateError(f"cannot read INTERVAL {text!r} {first} TO {last}")
    fields = _FIELD_ORDER[_FIELD_ORDER.index(first) : _FIELD_ORDER.index(last) + 1]
    total = Decimal(0)
    for position, (field, value) in enumerate(zip(fields, match.groups(), strict=True)):
        number = Decimal(value)
        if position > 0 and number >= _FIELD_LIMIT[field]:
            raise PredicateError(f"INTERVAL {text!r} {first} TO {last}: {field} out of range")
        total += number * (_MONTHS[field] if field in _MONTHS else _MICROS[field])
    if first == "YEAR":
        return Interval(True, sign * int(total))
    return Interval(False, sign * int(total))
