"""date_format patterns (dvtool/predicate/datetime_format.py) against Spark 4.

Without Spark: compile_pattern's one-line refusals, and format_expression on examples that
were checked against Spark 4.3 by hand. With one local Spark session (session time zone UTC,
shared by the module, stopped at its end): patterns covering every supported letter and
count, formatted by Spark's `date_format` and by `format_expression` over the same instants
(years -290308 to 294247, all that microsecond timestamps hold; midnight, noon, fractions,
NULL), compared row by row; and every pattern compile_pattern refuses is refused by Spark too,
except the few listed in SPARK_ACCEPTS, which Spark formats and dvtool does not support.
"""

from __future__ import annotations

import datetime as dt
import string
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dvtool.arrays import arrow_values
from dvtool.errors import PredicateError
from dvtool.predicate.arrow import evaluate
from dvtool.predicate.datetime_format import (
    DatetimePattern,
    Field,
    compile_pattern,
    format_expression,
)

# With `pytest -n N --dist loadgroup`, one xdist worker runs the Spark tests (one JVM).
SPARK = pytest.mark.xdist_group("spark-predicates")
EPOCH = dt.datetime(1970, 1, 1)
CYCLE_MICROS = 146_097 * 86_400_000_000  # the 400 years after which the calendar repeats
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def micros(
    year: int, month: int = 1, day: int = 1, hour: int = 0, minute: int = 0, s: int = 0, us: int = 0
) -> int:
    """Microseconds since the epoch of a UTC date and time, for any proleptic year."""
    cycles = (year - 2000) // 400
    moved = dt.datetime(year - 400 * cycles, month, day, hour, minute, s, us)
    return (moved - EPOCH) // dt.timedelta(microseconds=1) + cycles * CYCLE_MICROS


ROWS: list[int | None] = [
    micros(2024, 5, 3, 4, 5, 6, 789_000),
    micros(2024, 5, 3, 16, 5, 6, 123),
    micros(1, 1, 1),
    micros(99, 6, 15, 12),  # noon
    micros(999, 12, 31, 23, 59, 59, 999_999),
    micros(1969, 12, 31, 23, 59, 59, 999_999),
    micros(1970, 1, 1),
    micros(2024, 2, 29, 0, 0, 0, 1),  # midnight
    micros(2024, 12, 31, 12, 30, 0, 500_000),  # day 366, 12:30 PM
    micros(2023, 10, 1, 11, 59, 59, 999_000),  # a Sunday, 11 AM
    micros(2000, 3, 1, 13, 0, 0, 10_000),
    micros(1900, 3, 1, 0, 1, 2, 3),  # 1900 is not a leap year
    micros(9999, 12, 31, 23, 59, 59, 999_999),
    micros(0, 1, 1),  # 1 BC
    micros(-1, 3, 1, 7),
    micros(-44, 3, 15, 10),
    micros(10_000, 1, 1, 20),
    micros(40_000, 7, 4, 5),
    micros(-40_000, 7, 4, 5),
    micros(123_455, 12, 26, 16),
    INT64_MIN,
    INT64_MAX,
    None,
]
PATTERNS = [
    "yyyy-MM-dd HH:mm:ss.SSS",
    "y yy yyy yyyy yyyyy yyyyyy",
    "G GG GGG y yy yyy yyyy yyyyy yyyyyy",
    "M MM MMM MMMM|L LL LLL LLLL",
    "d dd D DD DDD",
    "Q QQ QQQ QQQQ|q qq qqq qqqq",
    "E EE EEE EEEE",
    "a h hh H HH k kk K KK",
    "m mm s ss",
    "S SS SSS SSSS SSSSS SSSSSS SSSSSSS SSSSSSSS SSSSSSSSS",
    "X XX XXX x xx xxx Z ZZ ZZZ z zz zzz",
    "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "yyyy''MM''dd 'o''clock' h a ''''",
    "dd/MM/yyyy [x]|[yyyy[-MM[-dd]]]",
    "EEEE, MMMM d, yyyy 'at' h:mm a z",
    "yyyyMMddHHmmssSSS",
    'é ü 123 _ , ; ! ( ) / \\ " : .',
    "GGG yy QQQ MMM",
    "",
    "'only text' - x",
]
# The most letters dvtool supports in a row, by letter (and so the letters it supports).
LONGEST = {
    "G": 3, "y": 6, "M": 4, "L": 4, "Q": 4, "q": 4, "D": 3, "d": 2, "E": 4, "a": 1,
    "H": 2, "h": 2, "k": 2, "K": 2, "m": 2, "s": 2, "S": 9, "X": 3, "x": 3, "Z": 3, "z": 3,
}  # fmt: skip
UNSUPPORTED = sorted(set(string.ascii_letters) - set(LONGEST))
# What dvtool refuses and Spark formats: other letters, and longer zone and era fields.
SPARK_ACCEPTS = [
    *("F", "g", "O", "OOOO", "VV", "v", "vvvv"),
    *("GGGG", "XXXX", "XXXXX", "xxxx", "xxxxx", "ZZZZ", "ZZZZZ", "zzzz"),
]
SPARK_REFUSES = [
    *[c for c in UNSUPPORTED if c not in SPARK_ACCEPTS],
    *[p for p in (c * (n + 1) for c, n in LONGEST.items()) if p not in SPARK_ACCEPTS],
    *("GGGGG", "XXXXXX", "xxxxxx", "ZZZZZZ", "zzzzz", "OO", "VVV", "vv"),
    *("'abc", "yyyy'", "'''", "#", "{", "}", "x]", "]"),
]
SUPPORTED_HINT = (
    "supported: G y M L Q q D d E a H h k K m s S X x Z z, 'quoted text' and non-letters"
)


def format_rows(patterns: Sequence[str], rows: Sequence[int | None]) -> list[list[str | None]]:
    """format_expression of each pattern over `rows` (microseconds, None for NULL)."""
    column = arrow_values.array(list(rows), pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    table = pa.Table.from_arrays([column], names=["ts"])
    exprs = [format_expression(pc.field("ts"), compile_pattern(p)) for p in patterns]
    return [c.to_pylist() for c in evaluate(exprs, table)]


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- compile_pattern -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("YYYY-MM", f"letter 'Y' is not supported; {SUPPORTED_HINT}"),
        ("yyyy-ww", f"letter 'w' is not supported; {SUPPORTED_HINT}"),
        ("u", f"letter 'u' is not supported; {SUPPORTED_HINT}"),
        ("F", f"letter 'F' is not supported; {SUPPORTED_HINT}"),
        ("dd ddd", "'ddd' is too long: at most 'dd'"),
        ("MMMMM", "'MMMMM' is too long: at most 'MMMM'"),
        ("aa", "'aa' is too long: at most 'a'"),
        ("yyyyyyy", "'yyyyyyy' is too long: at most 'yyyyyy'"),
        ("SSSSSSSSSS", "'SSSSSSSSSS' is too long: at most 'SSSSSSSSS'"),
        ("zzzz", "'zzzz' is too long: at most 'zzz'"),
        ("'abc", "the quote at position 1 is never closed (write '' for a quote)"),
        ("yyyy'''", "the quote at position 5 is never closed (write '' for a quote)"),
        ("yyyy]", "']' at position 5 closes no optional section"),
        ("[x]]", "']' at position 4 closes no optional section"),
        ("dd#", "'#' is reserved (quote it as text: '#')"),
        ("{", "'{' is reserved (quote it as text: '{')"),
    ],
)
def test_refused_patterns(pattern: str, problem: str) -> None:
    with pytest.raises(PredicateError) as info:
        compile_pattern(pattern)
    assert str(info.value) == f"date_format pattern {pattern!r}: {problem}"


def test_patterns_are_values() -> None:
    a, b = compile_pattern("yyyy-MM"), compile_pattern("yyyy-MM")
    assert a == b and hash(a) == hash(b) and a.pattern == "yyyy-MM"
    assert a != compile_pattern("yyyy-M") and len({a, b}) == 1
    assert isinstance(a, DatetimePattern)
    with pytest.raises(AttributeError):
        a.pattern = "y"  # type: ignore[misc]


def test_tokens() -> None:
    tokens = compile_pattern("yyyy''MM 'T''s'[x]X z é").tokens
    assert tokens == (Field("y", 4), "'", Field("M", 2), " T's+00Z UTC é")
    assert compile_pattern("").tokens == ()


# -- format_expression without Spark ---------------------------------------------------------


def test_examples_checked_against_spark() -> None:
    ts = micros(2024, 5, 3, 4, 5, 6, 789_000)
    cases = {
        "yyyy-MM-dd HH:mm:ss.SSS a EEE EEEE MMM MMMM y yy D DDD Q QQ h hh d M": (
            "2024-05-03 04:05:06.789 AM Fri Friday May May 2024 24 124 124 2 02 4 04 3 5"
        ),
        "yyyyy": "02024",
        "k K": "4 4",
        "G": "AD",
        "L LL LLL": "5 05 May",
        "'T'x": "T+00",
        "X Z z": "Z +0000 UTC",
        "dd/MM/yyyy [x]": "03/05/2024 +00",
    }
    got = format_rows(list(cases), [ts])
    assert [g[0] for g in got] == list(cases.values())
    (years,) = format_rows(["y yy yyy yyyy"], [micros(99, 1, 1)])
    assert years == ["99 99 099 0099"]
    (fraction,) = format_rows(["SSSSSS SS S SSSSSSSSS"], [micros(2024, 1, 1, 0, 0, 0, 123)])
    assert fraction == ["000123 00 0 000123000"]


def test_null_gives_null_even_for_constant_text() -> None:
    got = format_rows(["yyyy", "'text'", "", "x"], [None, 0])
    assert got == [[None, "1970"], [None, "text"], [None, ""], [None, "+00"]]


def test_years_beyond_arrows_calendar_kernels() -> None:
    """arrow's year kernel wraps beyond ±32767; the 400-year shift keeps every field right."""
    rows = [micros(40_000, 7, 4, 5), micros(-40_000, 7, 4, 5)]  # 2000-07-04 plus 400n years
    dates, eras = format_rows(["yyyy-MM-dd HH EEE D", "G y"], rows)
    assert dates == ["+40000-07-04 05 Tue 186", "-40000-07-04 05 Tue 186"]
    assert eras == ["AD 40000", "BC 40001"]


# -- against Spark ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(spark: Any) -> Any:
    """The shared session (conftest.py), with the instants registered as a view."""
    frame = spark.createDataFrame(list(enumerate(ROWS)), "id INT, us BIGINT")
    frame.createOrReplaceTempView("instants")
    return spark


def spark_format(spark: Any, patterns: Sequence[str]) -> list[list[str | None]]:
    """Spark's date_format of each pattern over ROWS, in order."""
    columns = ", ".join(
        f"date_format(timestamp_micros(us), {sql_string(p)}) AS f{i}"
        for i, p in enumerate(patterns)
    )
    rows = spark.sql(f"SELECT {columns} FROM instants ORDER BY id").collect()
    return [[row[i] for row in rows] for i in range(len(patterns))]


@SPARK
def test_formats_as_spark(spark: Any) -> None:
    patterns = [q for p in PATTERNS for q in p.split("|")]
    expected = spark_format(spark, patterns)
    got = format_rows(patterns, ROWS)
    for pattern, want, have in zip(patterns, expected, got, strict=True):
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            assert h == w, f"{pattern!r} of {ROWS[i]} microseconds"


@SPARK
@pytest.mark.parametrize("pattern", SPARK_REFUSES)
def test_spark_refuses_what_dvtool_refuses(spark: Any, pattern: str) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises(PredicateError):
        compile_pattern(pattern)
    with pytest.raises((PySparkException, Py4JJavaError)):
        spark_format(spark, [pattern])


@SPARK
def test_spark_accepts_these_refused_patterns(spark: Any) -> None:
    """Not supported by dvtool (refused, so never silently wrong), formatted by Spark."""
    for pattern in SPARK_ACCEPTS:
        with pytest.raises(PredicateError):
            compile_pattern(pattern)
    values = spark_format(spark, SPARK_ACCEPTS)
    assert all(isinstance(column[0], str) for column in values)
