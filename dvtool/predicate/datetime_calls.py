"""Binding the date and time parts of `--where`: functions, INTERVAL arithmetic, `now`.

Spark 4's semantics (ANSI mode, session time zone UTC), checked against Spark in the tests:

- `current_date()`, `current_timestamp()` (`now()`), `localtimestamp()` are one instant
  fixed per command (`Binder.now`), so a predicate means the same thing on every file and in
  every re-plan after a conflict; they fold into literals, which is how the commit's
  predicate records them (`DATE '2026-11-24'`).
- `date ± INTERVAL n DAYS` is `date_add`/`date_sub` (a DATE), `date ± INTERVAL n MONTHS` is
  `add_months` (a DATE, clamped to the month's last day), `date ± INTERVAL 1 HOUR` casts the
  date to TIMESTAMP first, `timestamp ± interval` keeps the timestamp's type; `date ± n` with
  an INT is `date_add`/`date_sub`, as in Spark. Intervals are constants (intervals.py).
- `date_add`, `date_sub`, `datediff`, `add_months`, `date_trunc`, `trunc`, `year`, `quarter`,
  `month`, `day`, `dayofweek`, `weekday`, `dayofyear`, `weekofyear`, `hour`, `minute`,
  `second`, `to_date` and `date_format`, with Spark's implicit casts of their arguments
  (strings and timestamps to DATE, strings and dates to TIMESTAMP).

What Spark computes differently from a plain reading is refused with a hint instead:
`date - date` (an interval in Spark; use `datediff`), strings plus intervals (a string in
Spark), and unknown `date_trunc`/`trunc` units (NULL in Spark, a typo in practice).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sqlglot import exp

from dvtool.errors import PredicateError
from dvtool.predicate import datetime_format
from dvtool.predicate.intervals import Interval, interval_of
from dvtool.predicate.sqltypes import (
    BYTE,
    DATE,
    INT,
    INTEGRAL_RANGE,
    LONG,
    NULL,
    SHORT,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NTZ,
    SqlType,
    is_datetime,
    is_integral,
)
from dvtool.predicate.syntax import node_sql
from dvtool.predicate.tree import Arith, Expr, Func, Literal

if TYPE_CHECKING:
    from dvtool.predicate.parse import Binder

# date_trunc units by Spark's spelling -> the unit dvtool evaluates (pyarrow's floor_temporal)
TIMESTAMP_UNITS = {
    "YEAR": "YEAR", "YYYY": "YEAR", "YY": "YEAR", "QUARTER": "QUARTER", "MONTH": "MONTH",
    "MM": "MONTH", "MON": "MONTH", "WEEK": "WEEK", "DAY": "DAY", "DD": "DAY", "HOUR": "HOUR",
    "MINUTE": "MINUTE", "SECOND": "SECOND", "MILLISECOND": "MILLISECOND",
    "MICROSECOND": "MICROSECOND",
}  # fmt: skip
DATE_UNITS = {
    "YEAR": "YEAR", "YYYY": "YEAR", "YY": "YEAR", "QUARTER": "QUARTER", "MONTH": "MONTH",
    "MM": "MONTH", "MON": "MONTH", "WEEK": "WEEK",
}  # fmt: skip
_DATE_PARTS = ("year", "quarter", "month", "day", "dayofweek", "weekday", "dayofyear")
_DATE_PART_NODES: dict[type[exp.Expr], str] = {
    exp.Year: "year",
    exp.Month: "month",
    exp.Day: "day",
    exp.DayOfMonth: "day",
}
_ALIASES = {"dayofmonth": "day", "date_diff": "datediff", "dateadd": "date_add", "now": "now"}
_DAY_COUNT_TYPES = (BYTE, SHORT, INT)


class DatetimeCalls:
    """The date/time part of a `Binder` (see the module docstring)."""

    def __init__(self, binder: Binder, now: datetime) -> None:
        self.binder = binder
        self.now = now
        self._calls: dict[str, Callable[[Sequence[exp.Expr]], Expr]] = {
            "current_date": lambda a: self._now(a, "current_date", DATE),
            "curdate": lambda a: self._now(a, "curdate", DATE),
            "current_timestamp": lambda a: self._now(a, "current_timestamp", TIMESTAMP),
            "now": lambda a: self._now(a, "now", TIMESTAMP),
            "localtimestamp": lambda a: self._now(a, "localtimestamp", TIMESTAMP_NTZ),
            "date_add": lambda a: self._add_days("date_add", a),
            "date_sub": lambda a: self._add_days("date_sub", a),
            "datediff": self._datediff,
            "add_months": self._add_months,
            "date_trunc": self._date_trunc,
            "trunc": self._trunc,
            "weekofyear": lambda a: self._date_part("weekofyear", a),
            "to_date": self._to_date,
            "date_format": self._date_format,
        }
        for name in _DATE_PARTS:
            self._calls[name] = functools.partial(self._date_part, name)
        for name in ("hour", "minute", "second"):
            self._calls[name] = functools.partial(self._time_part, name)

    def handlers(self) -> dict[type[exp.Expr], Callable[[exp.Expr], Expr]]:
        """Binder handlers for the sqlglot nodes that are date/time constructs."""
        out: dict[type[exp.Expr], Callable[[exp.Expr], Expr]] = {
            exp.CurrentDate: lambda n: self._now([], "current_date", DATE),
            exp.CurrentTimestamp: lambda n: self._now([], "current_timestamp", TIMESTAMP),
            exp.Localtimestamp: lambda n: self._now([], "localtimestamp", TIMESTAMP_NTZ),
            exp.TsOrDsToDate: self._ts_or_ds_to_date,
            exp.Interval: self._bare_interval,
        }
        for cls, name in _DATE_PART_NODES.items():
            out[cls] = functools.partial(self._date_part_node, name)
        return out

    def _date_part_node(self, name: str, node: exp.Expr) -> Expr:
        return self._date_part(name, [_unwrap_to_date(node.this)])

    def call(self, name: str, args: Sequence[exp.Expr]) -> Expr | None:
        """The bound call of a date/time function by name, or None if it is not one."""
        handler = self._calls.get(_ALIASES.get(name, name))
        return None if handler is None else handler(args)

    # --- arithmetic -------------------------------------------------------------------------

    def arith(self, op: str, node: exp.Expr) -> Expr | None:
        """`a + b` / `a - b` when an operand is an INTERVAL or a DATE (else None: numbers)."""
        left_interval, right_interval = interval_of(node.this), interval_of(node.expression)
        if right_interval is not None and left_interval is None:
            signed = right_interval if op == "+" else right_interval.negated()
            return self._plus_interval(self.binder.bind(node.this), signed, node)
        if left_interval is not None and right_interval is None:
            if op == "-":
                raise PredicateError(f"cannot subtract a date or time from an interval: "
                                     f"{node_sql(node)}")  # fmt: skip
            return self._plus_interval(self.binder.bind(node.expression), left_interval, node)
        if left_interval is not None:
            raise PredicateError(
                f"an interval can only be added to a date or timestamp: {node_sql(node)}"
            )
        left, right = self.binder.bind(node.this), self.binder.bind(node.expression)
        if not (is_datetime(left.type) or is_datetime(right.type)):
            return None
        return self._date_arith(op, left, right, node)

    def _plus_interval(self, value: Expr, interval: Interval, node: exp.Expr) -> Expr:
        if value.type == NULL:
            return Literal(None, NULL)
        if value.type == DATE and interval.year_month:
            return self._func("add_months", (value, _int_literal(interval.amount, node)), DATE)
        if value.type == DATE and interval.days_only:
            days = _int_literal(interval.amount // 86_400_000_000, node)
            return self._func("date_add", (value, days), DATE)
        if value.type == DATE:
            value = self.binder.cast(value, TIMESTAMP)
        if value.type not in (TIMESTAMP, TIMESTAMP_NTZ):
            hint = "CAST it to DATE or TIMESTAMP first" if value.type == STRING else None
            raise PredicateError(
                f"cannot add an interval to {value.type}: {node_sql(node)}", hint=hint
            )
        constant = Literal(interval.amount, interval.sql_type)
        return self.binder.finish(Arith("+", value, constant, value.type))

    def _date_arith(self, op: str, left: Expr, right: Expr, node: exp.Expr) -> Expr:
        """`date ± n` and `n + date` with an INT n, as Spark's date_add/date_sub."""
        if is_datetime(left.type) and is_datetime(right.type):
            raise PredicateError(
                f"subtracting dates or timestamps gives an interval in Spark: {node_sql(node)}",
                hint="use datediff(end, start) for days, or compare the values directly",
            )
        if op == "+" and is_datetime(right.type):
            left, right = right, left
        if left.type != DATE or op not in "+-":
            raise PredicateError(f"cannot apply {op} to {left.type} and {right.type}: "
                                 f"{node_sql(node)}")  # fmt: skip
        days = self._day_count(right, "date_add" if op == "+" else "date_sub")
        return self._func("date_add" if op == "+" else "date_sub", (left, days), DATE)

    # --- functions --------------------------------------------------------------------------

    def _now(self, args: Sequence[exp.Expr], name: str, t: SqlType) -> Expr:
        _arity(name, args, 0)
        if t == DATE:
            return Literal(self.now.date(), DATE)
        if t == TIMESTAMP_NTZ:
            return Literal(self.now.replace(tzinfo=None), TIMESTAMP_NTZ)
        return Literal(self.now, TIMESTAMP)

    def _add_days(self, name: str, args: Sequence[exp.Expr]) -> Expr:
        _arity(name, args, 2)
        start = self.as_date(self.binder.bind(args[0]), f"{name}()")
        days = self._day_count(self.binder.bind(args[1]), name)
        return self._func(name, (start, days), DATE)

    def _day_count(self, expr: Expr, name: str) -> Expr:
        """The day count of date_add/date_sub: INT, SMALLINT or TINYINT (a BIGINT is an error
        in Spark too); a string is cast to INT."""
        if expr.type == LONG and isinstance(expr, Literal):
            expr = self.binder.cast(expr, INT)  # an out-of-range constant is an error
        if expr.type in (STRING, NULL):
            return self.binder.cast(expr, INT)
        if expr.type not in _DAY_COUNT_TYPES:
            raise PredicateError(f"{name}() needs an INT number of days, got {expr.type}")
        return expr

    def _datediff(self, args: Sequence[exp.Expr]) -> Expr:
        if len(args) == 3:
            raise PredicateError(
                "datediff(unit, start, end) is not supported; datediff(end, start) gives days"
            )
        _arity("datediff", args, 2)
        end, start = (self.as_date(self.binder.bind(a), "datediff()") for a in args)
        return self._func("datediff", (end, start), INT)

    def _add_months(self, args: Sequence[exp.Expr]) -> Expr:
        _arity("add_months", args, 2)
        start = self.as_date(self.binder.bind(args[0]), "add_months()")
        months = self.binder.bind(args[1])
        if not (is_integral(months.type) or months.type in (STRING, NULL)):
            raise PredicateError(f"add_months() needs an integer number of months, "
                                 f"got {months.type}")  # fmt: skip
        return self._func("add_months", (start, self.binder.cast(months, INT)), DATE)

    def _date_trunc(self, args: Sequence[exp.Expr]) -> Expr:
        _arity("date_trunc", args, 2)
        unit = self._unit(args[0], TIMESTAMP_UNITS, "date_trunc")
        value = self.as_timestamp(self.binder.bind(args[1]), "date_trunc()")
        return self._func("date_trunc", (unit, value), TIMESTAMP)

    def _trunc(self, args: Sequence[exp.Expr]) -> Expr:
        _arity("trunc", args, 2)
        value = self.as_date(self.binder.bind(args[0]), "trunc()")
        unit = self._unit(args[1], DATE_UNITS, "trunc")
        return self._func("trunc", (value, unit), DATE)

    def _unit(self, node: exp.Expr, units: dict[str, str], name: str) -> Literal:
        text = self.binder.constant_string(self.binder.bind(node), f"the unit of {name}()")
        unit = units.get(text.upper())
        if unit is None:
            raise PredicateError(
                f"{name}() has no unit {text!r} (Spark would give NULL)",
                hint="units: " + ", ".join(f"'{u}'" for u in units),
            )
        return Literal(unit, STRING)

    def _date_part(self, name: str, args: Sequence[exp.Expr]) -> Expr:
        _arity(name, args, 1)
        value = self.as_date(self.binder.bind(args[0]), f"{name}()")
        return self._func(name, (value,), INT)

    def _time_part(self, name: str, args: Sequence[exp.Expr]) -> Expr:
        _arity(name, args, 1)
        value = self.as_timestamp(self.binder.bind(args[0]), f"{name}()")
        return self._func(name, (value,), INT)

    def _date_format(self, args: Sequence[exp.Expr]) -> Expr:
        _arity("date_format", args, 2)
        value = self.as_timestamp(self.binder.bind(args[0]), "date_format()")
        pattern = self.binder.constant_string(
            self.binder.bind(args[1]), "the pattern of date_format()"
        )
        datetime_format.compile_pattern(pattern)  # refuses what is not supported, now
        return self._func("date_format", (value, Literal(pattern, STRING)), STRING)

    def _to_date(self, args: Sequence[exp.Expr]) -> Expr:
        if len(args) == 2:
            raise PredicateError("to_date() with a format is not supported")
        _arity("to_date", args, 1)
        return self.as_date(self.binder.bind(args[0]), "to_date()")

    def _ts_or_ds_to_date(self, node: exp.Expr) -> Expr:
        if node.args.get("format") is not None:
            raise PredicateError(f"to_date() with a format is not supported: {node_sql(node)}")
        return self.as_date(self.binder.bind(node.this), "to_date()")

    def _bare_interval(self, node: exp.Expr) -> Expr:
        interval_of(node)  # an unreadable literal is reported as such
        raise PredicateError(
            f"an interval can only be added to or subtracted from a date or timestamp: "
            f"{node_sql(node)}"
        )

    # --- argument types ---------------------------------------------------------------------

    def as_date(self, expr: Expr, context: str) -> Expr:
        """A DATE argument: dates, timestamps and strings convert, as in Spark."""
        if not (is_datetime(expr.type) or expr.type in (STRING, NULL)):
            raise PredicateError(f"{context} needs a date or timestamp, got {expr.type}")
        return self.binder.cast(expr, DATE)

    def as_timestamp(self, expr: Expr, context: str) -> Expr:
        """A TIMESTAMP argument: dates, timestamps without zone and strings convert."""
        if not (is_datetime(expr.type) or expr.type in (STRING, NULL)):
            raise PredicateError(f"{context} needs a timestamp or date, got {expr.type}")
        return self.binder.cast(expr, TIMESTAMP)

    def _func(self, name: str, args: tuple[Expr, ...], t: SqlType) -> Expr:
        if any(isinstance(a, Literal) and a.value is None for a in args):
            return Literal(None, t)  # every one of these functions is NULL on a NULL argument
        return self.binder.finish(Func(name, args, t))


def _arity(name: str, args: Sequence[exp.Expr], n: int) -> None:
    if len(args) != n:
        plural = "" if n == 1 else "s"
        raise PredicateError(f"{name}() takes {n} argument{plural}, got {len(args)}")


def _int_literal(value: int, node: exp.Expr) -> Literal:
    lo, hi = INTEGRAL_RANGE[INT]
    if not lo <= value <= hi:
        raise PredicateError(f"the interval is out of range: {node_sql(node)}")
    return Literal(value, INT)


def _unwrap_to_date(node: exp.Expr) -> exp.Expr:
    """sqlglot wraps the argument of year()/month()/day() in a to_date(): drop it."""
    if isinstance(node, exp.TsOrDsToDate) and node.args.get("format") is None:
        inner: exp.Expr = node.this
        return inner
    return node
