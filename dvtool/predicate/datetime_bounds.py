"""File skipping through date and time functions: statistics bounds mapped in Python.

`date_add(d, 3) < DATE '2024-01-01'` can skip files from the min/max of `d` because
`date_add(·, 3)` never decreases: the bounds of the result are the function of the bounds.
The functions here are monotone non-decreasing in one argument while the others are
constants, and `apply` computes them on one statistics bound (a Python date or datetime) with
Spark's calendar rules, the same ones datetime_arrow.py evaluates row by row (checked equal in
the tests). A bound that leaves Python's date range gives None: unbounded, which is sound.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta
from typing import Any

from dvtool.predicate.sqltypes import INTERVAL_MONTHS
from dvtool.predicate.tree import Arith, Expr, Func, Literal

MONOTONE_ARGUMENT = {
    "date_add": 0,
    "date_sub": 0,
    "add_months": 0,
    "date_trunc": 1,
    "trunc": 0,
    "year": 0,
}
"""Functions that never decrease in the argument at this position (others constant)."""


def varying_argument(node: Expr) -> Expr | None:
    """The argument `node` is monotone in, when all its other arguments are constants."""
    if isinstance(node, Arith):
        is_interval = isinstance(node.right, Literal) and node.right.type.name.startswith(
            "interval"
        )
        return node.left if is_interval else None
    if not isinstance(node, Func) or node.name not in MONOTONE_ARGUMENT:
        return None
    position = MONOTONE_ARGUMENT[node.name]
    others = [a for i, a in enumerate(node.args) if i != position]
    return node.args[position] if all(isinstance(a, Literal) for a in others) else None


def apply(node: Expr, value: Any) -> Any:
    """The monotone function `node` at the bound `value`; None when unknown or out of range."""
    if value is None:
        return None
    try:
        return _apply(node, value)
    except (OverflowError, ValueError, TypeError, AttributeError):
        return None


def _apply(node: Expr, value: Any) -> Any:
    if isinstance(node, Arith):
        interval = node.right
        assert isinstance(interval, Literal)
        if interval.type == INTERVAL_MONTHS:
            return plus_months(value, int(interval.value))
        return value + timedelta(microseconds=int(interval.value))
    assert isinstance(node, Func)
    constants = [a.value for a in node.args if isinstance(a, Literal)]
    if node.name == "date_add":
        return value + timedelta(days=int(constants[0]))
    if node.name == "date_sub":
        return value - timedelta(days=int(constants[0]))
    if node.name == "add_months":
        return plus_months(value, int(constants[0]))
    if node.name in ("date_trunc", "trunc"):
        return truncate(value, str(constants[0]))
    if node.name == "year":
        return value.year
    return None


def plus_months(value: date, months: int) -> date:
    """`LocalDate.plusMonths`: the same day in the month `months` later, clamped to its
    length; a datetime keeps its time of day."""
    total = value.year * 12 + value.month - 1 + months
    year, month = divmod(total, 12)
    day = min(value.day, calendar.monthrange(year, month + 1)[1])
    return value.replace(year=year, month=month + 1, day=day)


def truncate(value: date, unit: str) -> date:
    """`date_trunc`/`trunc` to a unit of datetime_calls.TIMESTAMP_UNITS' values."""
    unit = unit.upper()
    if unit == "WEEK":
        value = value - timedelta(days=value.weekday())
        unit = "DAY"
    if unit in ("YEAR", "QUARTER", "MONTH"):
        month = {"YEAR": 1, "QUARTER": 3 * ((value.month - 1) // 3) + 1}.get(unit, value.month)
        value = value.replace(month=month, day=1)
        unit = "DAY"
    if not isinstance(value, datetime):
        return value
    keep = ("DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND").index(unit)
    micros = (0, 0, 0, 0, value.microsecond // 1000 * 1000, value.microsecond)[keep]
    return value.replace(
        hour=value.hour if keep >= 1 else 0,
        minute=value.minute if keep >= 2 else 0,
        second=value.second if keep >= 3 else 0,
        microsecond=micros,
    )
