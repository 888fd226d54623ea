"""Date and time functions of the predicate tree as pyarrow compute expressions.

Spark's calendar arithmetic (java.time's proleptic Gregorian calendar, session time zone
UTC) in arrow's kernels, with no Python per row:

- `date_add`/`date_sub`/`datediff` are integer arithmetic on days since the epoch, checked,
  so an overflow raises `pyarrow.ArrowInvalid` as ANSI Spark raises;
- `add_months` (and `± INTERVAL n MONTHS`) moves the year and month and clamps the day to the
  new month's length, like `LocalDate.plusMonths`: arrow has no such kernel, so the new date
  is computed from (year, month, day) with the days-from-civil algorithm (H. Hinnant's
  `days_from_civil`), in int64 expressions;
- `timestamp ± INTERVAL` adds microseconds (day-time) or months (year-month, keeping the
  time of day);
- `date_trunc`/`trunc` are `floor_temporal` (weeks start on Monday, as in Spark);
- the field extractors are arrow's temporal component kernels, as Spark numbers them
  (`dayofweek` 1 = Sunday, `weekday` 0 = Monday, `weekofyear` the ISO week).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.predicate import datetime_format
from dvtool.predicate.casts import constant
from dvtool.predicate.sqltypes import INTERVAL_MONTHS, SqlType, to_arrow
from dvtool.predicate.tree import Func, Literal

DAY_MICROS = 86_400_000_000
_INT64 = pa.int64()
_INT32 = pa.int32()


def _i64(value: int) -> pc.Expression:
    return constant(value, _INT64)


def _floor_div(a: pc.Expression, b: int) -> pc.Expression:
    """Integer division rounding down (arrow's `divide` truncates toward zero); b > 0."""
    quotient = pc.divide(a, _i64(b))
    remainder = pc.subtract(a, pc.multiply(quotient, _i64(b)))
    return pc.if_else(pc.less(remainder, _i64(0)), pc.subtract(quotient, _i64(1)), quotient)


def _floor_mod(a: pc.Expression, b: int) -> pc.Expression:
    return pc.subtract(a, pc.multiply(_floor_div(a, b), _i64(b)))


def days_from_civil(y: pc.Expression, m: pc.Expression, d: pc.Expression) -> pc.Expression:
    """Days since 1970-01-01 of the proleptic Gregorian date (y, m, d), all int64."""
    march_year = pc.subtract(y, pc.less_equal(m, _i64(2)).cast(_INT64))
    era = _floor_div(march_year, 400)
    year_of_era = pc.subtract(march_year, pc.multiply(era, _i64(400)))
    march_month = pc.if_else(pc.greater(m, _i64(2)), pc.subtract(m, _i64(3)), pc.add(m, _i64(9)))
    day_of_year = pc.add(
        pc.divide(pc.add(pc.multiply(march_month, _i64(153)), _i64(2)), _i64(5)),
        pc.subtract(d, _i64(1)),
    )
    day_of_era = pc.add(
        pc.subtract(
            pc.add(pc.multiply(year_of_era, _i64(365)), pc.divide(year_of_era, _i64(4))),
            pc.divide(year_of_era, _i64(100)),
        ),
        day_of_year,
    )
    return pc.subtract(pc.add(pc.multiply(era, _i64(146_097)), day_of_era), _i64(719_468))


def _days_in_month(y: pc.Expression, m: pc.Expression) -> pc.Expression:
    leap = pc.or_kleene(
        pc.and_kleene(
            pc.equal(_floor_mod(y, 4), _i64(0)), pc.not_equal(_floor_mod(y, 100), _i64(0))
        ),
        pc.equal(_floor_mod(y, 400), _i64(0)),
    )
    february = pc.if_else(leap, _i64(29), _i64(28))
    lengths = [_i64(n) if n else february for n in (31, 0, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)]
    return pc.choose(pc.subtract(m, _i64(1)), *lengths)


def _plus_months_days(value: pc.Expression, months: pc.Expression) -> pc.Expression:
    """Days since the epoch of the date of `value` (a date or timestamp) plus `months`,
    the day clamped to the length of the new month."""
    year = pc.year(value).cast(_INT64)
    month = pc.month(value).cast(_INT64)
    day = pc.day(value).cast(_INT64)
    total = pc.add_checked(
        pc.add(pc.multiply(year, _i64(12)), pc.subtract(month, _i64(1))), months.cast(_INT64)
    )
    new_year = _floor_div(total, 12)
    new_month = pc.add(pc.subtract(total, pc.multiply(new_year, _i64(12))), _i64(1))
    new_day = pc.min_element_wise(day, _days_in_month(new_year, new_month))
    return days_from_civil(new_year, new_month, new_day)


def _as_date(days: pc.Expression) -> pc.Expression:
    """int64 days since the epoch as date32 (out of range raises, as ANSI Spark does)."""
    return days.cast(_INT32).cast(pa.date32())


def add_months(value: pc.Expression, months: pc.Expression) -> pc.Expression:
    """Spark's `add_months(date, n)` (also `date + INTERVAL n MONTHS`)."""
    return _as_date(_plus_months_days(value, months))


def plus_interval(value: pc.Expression, interval: Literal, t: SqlType) -> pc.Expression:
    """`value + interval` for a TIMESTAMP or TIMESTAMP_NTZ `value` of type `t`."""
    micros = value.cast(_INT64)
    if interval.type == INTERVAL_MONTHS:
        time_of_day = _floor_mod(micros, DAY_MICROS)
        days = _plus_months_days(value, constant(interval.value, _INT32))
        micros = pc.add_checked(pc.multiply_checked(days, _i64(DAY_MICROS)), time_of_day)
    else:
        micros = pc.add_checked(micros, _i64(interval.value))
    return micros.cast(to_arrow(t))


def _days(value: pc.Expression) -> pc.Expression:
    return value.cast(_INT32)


def _date_add(args: Sequence[pc.Expression], node: Func) -> pc.Expression:
    return pc.add_checked(_days(args[0]), args[1].cast(_INT32)).cast(pa.date32())


def _date_sub(args: Sequence[pc.Expression], node: Func) -> pc.Expression:
    return pc.subtract_checked(_days(args[0]), args[1].cast(_INT32)).cast(pa.date32())


def _datediff(args: Sequence[pc.Expression], node: Func) -> pc.Expression:
    return pc.subtract_checked(_days(args[0]), _days(args[1]))


def _unit(node: Func, i: int) -> str:
    unit = node.args[i]
    assert isinstance(unit, Literal) and isinstance(unit.value, str)
    return unit.value.lower()


def _date_trunc(args: Sequence[pc.Expression], node: Func) -> pc.Expression:
    return pc.floor_temporal(args[1], unit=_unit(node, 0), week_starts_monday=True)


def _trunc(args: Sequence[pc.Expression], node: Func) -> pc.Expression:
    return pc.floor_temporal(args[0], unit=_unit(node, 1), week_starts_monday=True)


def _date_format(args: Sequence[pc.Expression], node: Func) -> pc.Expression:
    pattern = node.args[1]
    assert isinstance(pattern, Literal) and isinstance(pattern.value, str)
    return datetime_format.format_expression(
        args[0], datetime_format.compile_pattern(pattern.value)
    )


def _field(kernel: Callable[..., pc.Expression], **options: object) -> Callable[..., pc.Expression]:
    def extract(args: Sequence[pc.Expression], node: Func) -> pc.Expression:
        return kernel(args[0], **options).cast(_INT32)

    return extract


FUNCTIONS: dict[str, Callable[[Sequence[pc.Expression], Func], pc.Expression]] = {
    "date_add": _date_add,
    "date_sub": _date_sub,
    "datediff": _datediff,
    "add_months": lambda args, node: add_months(args[0], args[1]),
    "date_trunc": _date_trunc,
    "trunc": _trunc,
    "date_format": _date_format,
    "year": _field(pc.year),
    "quarter": _field(pc.quarter),
    "month": _field(pc.month),
    "day": _field(pc.day),
    "dayofweek": _field(pc.day_of_week, count_from_zero=False, week_start=7),
    "weekday": _field(pc.day_of_week, count_from_zero=True, week_start=1),
    "dayofyear": _field(pc.day_of_year),
    "weekofyear": _field(pc.iso_week),
    "hour": _field(pc.hour),
    "minute": _field(pc.minute),
    "second": _field(pc.second),
}
"""Arrow evaluation of the tree's date/time `Func` nodes, by name."""
