"""Date and time in `--where`: INTERVAL literals, the functions' values, refusals, skipping.

The expected values of the examples are what Spark 4.3 printed for the same SQL (session
time zone UTC); tests/predicate/test_spark_semantics.py checks random predicates against a
live Spark session, and tests/predicate/test_predicate_properties.py against
tests/predicate/predicate_reference.py.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.errors import PredicateError
from dvtool.predicate import Match, Predicate, datetime_bounds
from dvtool.predicate.intervals import Interval, interval_of
from dvtool.predicate.tree import Literal
from tests.predicate.predicate_grammar import SCHEMA

UTC = timezone.utc
NOW = datetime(2026, 11, 24, 14, 15, 16, 123456, tzinfo=UTC)
DAY = 86_400_000_000


def parse(sql: str, partitions: tuple[str, ...] = ()) -> Predicate:
    return Predicate.parse(sql, SCHEMA, partitions, "none", now=NOW)


def interval(text: str) -> Interval | None:
    return interval_of(sqlglot.parse_one(text, read="spark"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INTERVAL 7 DAYS", Interval(False, 7 * DAY, True)),
        ("INTERVAL '7' DAY", Interval(False, 7 * DAY, True)),
        ("INTERVAL 2 WEEKS", Interval(False, 14 * DAY, True)),
        ("INTERVAL -7 DAYS", Interval(False, -7 * DAY, True)),
        ("INTERVAL - '7' DAY", Interval(False, -7 * DAY, True)),
        ("INTERVAL 36 HOURS", Interval(False, 36 * 3_600_000_000)),
        ("INTERVAL 1.5 SECONDS", Interval(False, 1_500_000)),
        ("INTERVAL 5 MICROSECONDS", Interval(False, 5)),
        ("INTERVAL 5 MILLISECONDS", Interval(False, 5_000)),
        ("INTERVAL 1 DAY 2 HOURS", Interval(False, DAY + 7_200_000_000)),
        ("INTERVAL '1 day 2 hours'", Interval(False, DAY + 7_200_000_000)),
        ("INTERVAL 1 YEAR 2 MONTHS", Interval(True, 14)),
        ("INTERVAL '1-2' YEAR TO MONTH", Interval(True, 14)),
        ("INTERVAL '-1-2' YEAR TO MONTH", Interval(True, -14)),
        ("INTERVAL '1 02:03:04.5' DAY TO SECOND", Interval(False, DAY + 7_384_500_000)),
        ("INTERVAL '100000.000001' SECOND", Interval(False, 100_000_000_001)),
        ("-INTERVAL 3 DAYS", Interval(False, -3 * DAY, True)),
        ("d + 1", None),
    ],
)
def test_interval_literals_read_as_spark_reads_them(text: str, expected: Interval | None) -> None:
    assert interval(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("INTERVAL 1.5 DAYS", "only seconds may have a fraction"),
        ("INTERVAL 1.5 MONTHS", "only seconds may have a fraction"),
        ("INTERVAL 1 MONTH 2 DAYS", "cannot mix year-month and day-time"),
        ("INTERVAL x DAYS", "needs a constant number"),
        ("INTERVAL 3 FORTNIGHTS", "unknown INTERVAL unit"),
        ("INTERVAL '1 25:00' DAY TO MINUTE", "HOUR out of range"),
        ("INTERVAL '1:2' YEAR TO MONTH", "cannot read INTERVAL"),
    ],
)
def test_bad_interval_literals_are_refused(text: str, message: str) -> None:
    with pytest.raises(PredicateError, match=message):
        interval(text)


# Constant expressions and what Spark 4.3 evaluated them to (SELECT <sql>).
SPARK_VALUES = [
    ("add_months(DATE '2024-01-31', 1)", "DATE '2024-02-29'"),
    ("DATE '2024-01-31' + INTERVAL 1 MONTH", "DATE '2024-02-29'"),
    ("DATE '2024-01-31' + INTERVAL 1 DAY", "DATE '2024-02-01'"),
    ("DATE '2024-01-31' + INTERVAL 1 HOUR", "TIMESTAMP '2024-01-31 01:00:00'"),
    ("DATE '2024-01-31' - INTERVAL 36 HOURS", "TIMESTAMP '2024-01-29 12:00:00'"),
    ("DATE '2024-01-31' + 1", "DATE '2024-02-01'"),
    ("1 + DATE '2024-01-31'", "DATE '2024-02-01'"),
    ("DATE '2024-01-31' - 1", "DATE '2024-01-30'"),
    ("TIMESTAMP '2024-01-31 10:00:00' + INTERVAL 1 MONTH", "TIMESTAMP '2024-02-29 10:00:00'"),
    (
        "TIMESTAMP '2024-01-31 10:00:00' - INTERVAL '1-2' YEAR TO MONTH",
        "TIMESTAMP '2022-11-30 10:00:00'",
    ),
    ("TIMESTAMP_NTZ '2024-01-31 10:00:00' + INTERVAL 1 DAY", "TIMESTAMP_NTZ '2024-02-01 10:00:00'"),
    ("date_sub(DATE '2024-01-01', 3)", "DATE '2023-12-29'"),
    ("date_add('2024-01-01', 3)", "DATE '2024-01-04'"),
    ("date_add(TIMESTAMP '2024-01-01 23:00:00', 3)", "DATE '2024-01-04'"),
    ("date_add(DATE '2024-01-01', '3')", "DATE '2024-01-04'"),
    ("datediff(DATE '2024-03-01', '2024-01-01')", "60"),
    ("datediff(TIMESTAMP '2024-03-01 23:00:00', TIMESTAMP '2024-03-01 01:00:00')", "0"),
    ("add_months('2024-01-31 10:00:00', 1)", "DATE '2024-02-29'"),
    ("date_trunc('MONTH', TIMESTAMP '2024-05-31 10:11:12.345')", "TIMESTAMP '2024-05-01'"),
    ("date_trunc('WEEK', TIMESTAMP '2024-05-31 10:11:12.345')", "TIMESTAMP '2024-05-27'"),
    ("date_trunc('QUARTER', DATE '2024-05-31')", "TIMESTAMP '2024-04-01'"),
    ("date_trunc('MM', TIMESTAMP_NTZ '2024-05-31 10:11:12')", "TIMESTAMP '2024-05-01'"),
    (
        "date_trunc('MILLISECOND', TIMESTAMP '2024-05-31 10:11:12.345678')",
        "TIMESTAMP '2024-05-31 10:11:12.345'",
    ),
    ("trunc(DATE '2024-05-31', 'WEEK')", "DATE '2024-05-27'"),
    ("trunc(TIMESTAMP '2024-05-31 10:00:00', 'MM')", "DATE '2024-05-01'"),
    ("hour(DATE '2024-05-31')", "0"),
    ("hour('2024-05-31 10:11:12')", "10"),
    ("hour(TIMESTAMP_NTZ '2024-05-31 10:11:12')", "10"),
    ("second(TIMESTAMP '2024-05-31 10:11:12.9')", "12"),
    ("dayofweek(DATE '2024-05-31')", "6"),
    ("weekday(DATE '2024-05-31')", "4"),
    ("weekofyear(DATE '2024-12-31')", "1"),
    ("quarter(TIMESTAMP '2024-05-31 10:11:12')", "2"),
    ("dayofyear('2024-05-31')", "152"),
    ("date_format(DATE '2024-05-03', 'yyyyMMdd')", "'20240503'"),
    ("'ab' RLIKE 'b'", "TRUE"),
    ("'ab' RLIKE '^b'", "FALSE"),
    ("regexp('ab', 'b')", "TRUE"),
    ("current_date()", "DATE '2026-11-24'"),
    ("current_timestamp()", "TIMESTAMP '2026-11-24 14:15:16.123456'"),
    ("now()", "TIMESTAMP '2026-11-24 14:15:16.123456'"),
    ("localtimestamp()", "TIMESTAMP_NTZ '2026-11-24 14:15:16.123456'"),
    ("current_date() - INTERVAL 30 DAYS", "DATE '2026-10-25'"),
]


@pytest.mark.parametrize(("sql", "spark_value"), SPARK_VALUES)
def test_constants_fold_to_what_spark_computes(sql: str, spark_value: str) -> None:
    assert parse(f"({sql}) <=> {spark_value}").expr == Literal(True, parse("TRUE").expr.type)


def test_current_date_and_timestamp_are_recorded_as_literals() -> None:
    pred = parse("ts < current_timestamp() - INTERVAL 7 DAYS OR d < current_date()")
    assert pred.to_spark_sql() == (
        "((`ts` < TIMESTAMP '2026-11-17 14:15:16.123456Z') OR (`d` < DATE '2026-11-24'))"
    )


def test_the_same_instant_gives_the_same_predicate() -> None:
    later = NOW + timedelta(hours=12)
    a = parse("d = current_date()")
    b = Predicate.parse("d = current_date()", SCHEMA, (), "none", now=later)
    assert a.expr != b.expr  # midnight passed
    assert a.expr == parse("d = current_date()").expr


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("d - d > 1", "use datediff(end, start)"),
        ("ts - ts > INTERVAL 1 DAY", "subtracting dates or timestamps gives an interval"),
        ("'2024-01-01' + INTERVAL 1 DAY = d", "CAST it to DATE or TIMESTAMP first"),
        ("s + INTERVAL 1 DAY = d", "cannot add an interval to string"),
        ("i + INTERVAL 1 DAY = 1", "cannot add an interval to bigint"),
        ("INTERVAL 1 DAY - d = d", "cannot subtract a date or time from an interval"),
        ("INTERVAL 1 DAY > d", "can only be added to or subtracted from"),
        ("date_add(d, i) = d", "date_add() needs an INT number of days, got bigint"),
        ("date_add(d, 1.5) = d", "needs an INT number of days"),
        ("date_add(d) = d", "date_add() takes 2 arguments, got 1"),
        ("date_trunc('fortnight', ts) = ts", "date_trunc() has no unit 'fortnight'"),
        ("trunc(d, 'DD') = d", "trunc() has no unit 'DD'"),
        ("date_trunc(s, ts) = ts", "the unit of date_trunc() must be a string constant"),
        ("hour(i) = 1", "hour() needs a timestamp or date, got bigint"),
        ("date_format(ts, s) = 'x'", "must be a string constant"),
        ("date_format(ts, 'YYYY') = '2024'", "letter 'Y' is not supported"),
        ("s RLIKE s", "the RLIKE pattern must be a string constant"),
    ],
)
def test_what_spark_computes_differently_or_refuses_is_refused(sql: str, message: str) -> None:
    with pytest.raises(PredicateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(sql)


# --- skipping -----------------------------------------------------------------------------


def stats(lo: Any, hi: Any) -> dict[str, Any]:
    return {"numRecords": 5, "minValues": lo, "maxValues": hi, "nullCount": {"d": 0, "ts": 0}}


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("date_add(d, 3) > DATE '2024-01-08'", Match.NONE),
        ("date_add(d, 3) >= DATE '2024-01-04'", Match.ALL),
        ("date_sub(d, 3) < DATE '2023-12-29'", Match.NONE),
        ("d + INTERVAL 1 MONTH > DATE '2024-02-05'", Match.NONE),
        ("add_months(d, -1) >= DATE '2023-12-01'", Match.ALL),
        ("trunc(d, 'MONTH') = DATE '2024-01-01'", Match.ALL),
        ("ts + INTERVAL 1 HOUR < TIMESTAMP '2024-01-01 01:00:00'", Match.NONE),
        ("date_trunc('DAY', ts) > TIMESTAMP '2024-01-05 00:00:00'", Match.NONE),
        ("ts > current_timestamp() - INTERVAL 1000 DAYS", Match.NONE),
        ("ts < current_timestamp() - INTERVAL 1000 DAYS", Match.ALL),
        ("d < current_date() - INTERVAL 30 DAYS", Match.ALL),
        ("hour(ts) = 3", Match.SOME),
    ],
)
def test_monotone_date_functions_skip_files_from_statistics(sql: str, expected: Match) -> None:
    file_stats = stats(
        {"d": "2024-01-01", "ts": "2024-01-01T00:00:00.000Z"},
        {"d": "2024-01-05", "ts": "2024-01-03T10:00:00.000Z"},
    )
    assert parse(sql).file_match({}, file_stats) is expected


@settings(max_examples=200, deadline=None)
@given(
    value=st.datetimes(datetime(1900, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)),
    months=st.integers(-30, 30),
    days=st.integers(-400, 400),
    unit=st.sampled_from(["YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MILLISECOND"]),
)
def test_bounds_are_computed_as_rows_are(
    value: datetime, months: int, days: int, unit: str
) -> None:
    """datetime_bounds maps a statistics bound exactly as the arrow code maps a row."""
    table = pa.table(
        {"d": pa.array([value.date()], pa.date32()), "ts": pa.array([value], SCHEMA_TS)}
    )
    for sql, column in [
        (f"add_months(d, {months})", "d"),
        (f"date_add(d, {days})", "d"),
        (f"date_sub(d, {days})", "d"),
        (f"trunc(d, '{unit if unit in ('YEAR', 'QUARTER', 'MONTH', 'WEEK') else 'YEAR'}')", "d"),
        (f"date_trunc('{unit}', ts)", "ts"),
        (f"ts + INTERVAL {months} MONTHS", "ts"),
        (f"ts - INTERVAL {days} HOURS", "ts"),
    ]:
        pred = parse(f"{sql} IS NOT NULL")
        node = pred.expr.children()[0].children()[0]  # Not(IsNull(node))
        row = pa.table({column: table[column]})
        (result,) = _evaluate(node, row)
        bound = value.date() if column == "d" else value
        assert datetime_bounds.apply(node, bound) == result, sql


SCHEMA_TS = pa.timestamp("us", tz="UTC")


def _evaluate(node: Any, table: pa.Table) -> list[Any]:
    from dvtool.predicate import arrow

    (column,) = arrow.evaluate([arrow.to_arrow_expression(node)], table)
    return [v.as_py() for v in column]


def test_dates_compare_with_python_dates() -> None:
    assert datetime_bounds.plus_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    assert datetime_bounds.truncate(date(2024, 5, 31), "QUARTER") == date(2024, 4, 1)
