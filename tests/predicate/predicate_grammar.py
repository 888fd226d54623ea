"""A hypothesis grammar of `--where` predicates for the property tests.

Hypothesis draws small tables (int64, double, string, date, timestamp, decimal and boolean
columns, all with NULLs) and predicates from a grammar of the supported constructs. Every
generated node carries its Spark SQL text, its text in polars' SQL dialect (or None where
polars differs from Spark: see tests/predicate/test_predicate_properties.py), and a reference
evaluator built from tests/predicate/predicate_reference.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import polars as pl
import pyarrow as pa
from hypothesis import strategies as st

from dvtool.delta.protocol.schema import StructField, StructType
from tests.predicate.predicate_reference import (
    Ref,
    Row,
    ref_add_months,
    ref_add_months_ts,
    ref_and,
    ref_compare,
    ref_date_format,
    ref_date_trunc,
    ref_dayofweek,
    ref_divide,
    ref_in,
    ref_like,
    ref_not,
    ref_or,
    ref_remainder,
    ref_string_to_long,
    ref_substring,
    ref_trunc_date,
    strict,
)

COLUMNS = {
    "i": ("long", pa.int64()),
    "f": ("double", pa.float64()),
    "s": ("string", pa.string()),
    "d": ("date", pa.date32()),
    "ts": ("timestamp", pa.timestamp("us", tz="UTC")),
    "dec": ("decimal(10,2)", pa.decimal128(10, 2)),
    "b": ("boolean", pa.bool_()),
}
SCHEMA = StructType(tuple(StructField(name, t) for name, (t, _) in COLUMNS.items()))
UTC = timezone.utc
T0 = datetime(2024, 1, 1, tzinfo=UTC)
NAN = float("nan")

# --- values -------------------------------------------------------------------------------

ints = st.integers(-6, 6)
floats = st.sampled_from([-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 1.5, 3.0])
short_strings = st.text(alphabet="abAé1 %_", max_size=4)
long_strings = st.builds(lambda s: "x" * 30 + s, st.text(alphabet="ab", min_size=1, max_size=4))
strings = st.one_of(short_strings, short_strings, long_strings)
dates = st.dates(date(2023, 12, 30), date(2024, 1, 3))
timestamps = st.builds(
    lambda s, us: T0 + timedelta(seconds=s, microseconds=us),
    st.integers(0, 1),
    st.sampled_from([0, 1, 999, 1000, 1001]),
)
decimals = st.integers(-300, 300).map(lambda c: Decimal(c).scaleb(-2))
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": ints,
    "f": floats,
    "s": strings,
    "d": dates,
    "ts": timestamps,
    "dec": decimals,
    "b": st.booleans(),
}


@st.composite
def rows(draw: st.DrawFn, nan: bool = False) -> list[Row]:
    n = draw(st.integers(0, 10))
    out = []
    for _ in range(n):
        row = {}
        for name, values in VALUES.items():
            if name == "f" and nan:
                values = st.one_of(values, st.just(NAN))
            row[name] = draw(st.one_of(st.none(), values, values, values))
        out.append(row)
    return out


def to_table(data: list[Row]) -> pa.Table:
    return pa.table({n: pa.array([r[n] for r in data], t) for n, (_, t) in COLUMNS.items()})


def to_polars(table: pa.Table) -> pl.DataFrame:
    naive = table.set_column(4, "ts", table["ts"].cast(pa.timestamp("us")))
    return pl.from_arrow(naive)  # type: ignore[return-value]


# --- the grammar --------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    spark: str
    polars: str | None
    ref: Ref
    kind: str  # int, float, dec, str, date, ts, bool
    cols: frozenset[str] = frozenset()


def node(spark: str, polars: str | None, ref: Ref, kind: str, *parts: Node) -> Node:
    cols = frozenset().union(*(p.cols for p in parts)) if parts else frozenset()
    ok = polars is not None and all(p.polars is not None for p in parts)
    return Node(spark, polars if ok else None, ref, kind, cols)


def column(name: str, kind: str) -> Node:
    return Node(name, name, lambda r: r[name], kind, frozenset([name]))


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def literal(kind: str, value: Any) -> Node:
    if kind == "int":
        text = f"({value})" if value < 0 else str(value)
    elif kind == "float":
        text = f"CAST({float(value)!r} AS DOUBLE)"
    elif kind == "dec":
        text = f"({value})" if value < 0 else str(value)
    elif kind == "str":
        text = sql_string(value)
    elif kind == "date":
        text = f"DATE '{value.isoformat()}'"
    elif kind == "ts":
        text = f"TIMESTAMP '{value.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    else:
        text = "TRUE" if value else "FALSE"
    return Node(text, text, lambda r: value, kind)


def nonconstant(expr: Node, name: str, kind: str) -> Node:
    """A column instead of a constant expression where a constant would not convert: ANSI
    Spark (and dvtool) reject CAST('a' AS BIGINT) when parsing."""
    return expr if expr.cols else column(name, kind)


LITERAL_KINDS = {"int": ints, "float": floats, "dec": decimals, "str": strings, "date": dates}
LITERAL_KINDS |= {"ts": timestamps, "bool": st.booleans()}
COLUMN_OF = {
    "int": "i",
    "float": "f",
    "dec": "dec",
    "str": "s",
    "date": "d",
    "ts": "ts",
    "bool": "b",
}


@st.composite
def value_expr(draw: st.DrawFn, kind: str, depth: int) -> Node:
    """An expression of the given kind; literals are never NULL here (see null_literal)."""
    leaf = draw(st.booleans()) if depth > 0 and BUILDERS[kind] else True
    if leaf:
        if draw(st.integers(0, 3)) == 0:
            return literal(kind, draw(LITERAL_KINDS[kind]))
        return column(COLUMN_OF[kind], kind)
    builder = draw(st.sampled_from(BUILDERS[kind]))
    return builder(draw, depth - 1)


def _int_arith(draw: st.DrawFn, depth: int) -> Node:
    a = draw(value_expr("int", depth))
    op = draw(st.sampled_from(["+", "-", "*", "%"]))
    b = draw(value_expr("int", depth))
    if op == "%":
        return node(
            f"({a.spark} % {b.spark})",
            None,
            lambda r: ref_remainder(a.ref(r), b.ref(r)),
            "int",
            a,
            b,
        )
    fn = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
    text = f"({a.spark} {op} {b.spark})"
    return node(
        text, f"({a.polars} {op} {b.polars})", lambda r: strict(fn)(a.ref(r), b.ref(r)), "int", a, b
    )


def _int_unary(draw: st.DrawFn, depth: int) -> Node:
    a = draw(value_expr("int", depth))
    which = draw(st.sampled_from(["neg", "abs", "coalesce"]))
    if which == "neg":
        return node(
            f"(- {a.spark})", f"(- {a.polars})", lambda r: strict(lambda x: -x)(a.ref(r)), "int", a
        )
    if which == "abs":
        return node(
            f"abs({a.spark})", f"abs({a.polars})", lambda r: strict(abs)(a.ref(r)), "int", a
        )
    k = draw(ints)
    ref = lambda r: k if a.ref(r) is None else a.ref(r)  # noqa: E731
    return node(
        f"coalesce({a.spark}, {literal('int', k).spark})",
        f"coalesce({a.polars}, {literal('int', k).polars})",
        ref,
        "int",
        a,
    )


def _int_from_other(draw: st.DrawFn, depth: int) -> Node:
    which = draw(
        st.sampled_from(["length", "year", "month", "day", "cast_string", "cast_dec", "cast_float"])
    )
    if which == "length":
        s = draw(value_expr("str", depth))
        return node(
            f"length({s.spark})", f"length({s.polars})", lambda r: strict(len)(s.ref(r)), "int", s
        )
    if which in ("year", "month", "day"):
        d = draw(value_expr("date", depth))
        ref = lambda r: strict(lambda x: getattr(x, which))(d.ref(r))  # noqa: E731
        return node(f"{which}({d.spark})", f"{which}({d.polars})", ref, "int", d)
    if which == "cast_string":
        s = nonconstant(draw(value_expr("str", depth)), "s", "str")
        return node(
            f"TRY_CAST({s.spark} AS BIGINT)", None, lambda r: ref_string_to_long(s.ref(r)), "int", s
        )
    if which == "cast_dec":
        m = draw(value_expr("dec", depth))
        return node(f"CAST({m.spark} AS INT)", None, lambda r: strict(int)(m.ref(r)), "int", m)
    f = draw(value_expr("float", depth))

    def to_long(x: float | None) -> int | None:
        return None if x is None or math.isnan(x) else int(x)

    return node(f"CAST({f.spark} AS BIGINT)", None, lambda r: to_long(f.ref(r)), "int", f)


def _float_expr(draw: st.DrawFn, depth: int) -> Node:
    which = draw(st.sampled_from(["arith", "divide", "cast"]))
    if which == "cast":
        a = draw(value_expr("int", depth))
        return node(
            f"CAST({a.spark} AS DOUBLE)",
            f"CAST({a.polars} AS DOUBLE)",
            lambda r: strict(float)(a.ref(r)),
            "float",
            a,
        )
    a = draw(value_expr(draw(st.sampled_from(["int", "float"])), depth))
    b = draw(value_expr(draw(st.sampled_from(["int", "float"])), depth))
    if which == "divide":
        return node(
            f"({a.spark} / {b.spark})",
            None,
            lambda r: ref_divide(a.ref(r), b.ref(r)),
            "float",
            a,
            b,
        )
    op = draw(st.sampled_from(["+", "-", "*"]))
    fn = {
        "+": lambda x, y: float(x) + float(y),
        "-": lambda x, y: float(x) - float(y),
        "*": lambda x, y: float(x) * float(y),
    }[op]
    if "float" not in (a.kind, b.kind):
        a = node(f"CAST({a.spark} AS DOUBLE)", f"CAST({a.polars} AS DOUBLE)", a.ref, "float", a)
    return node(
        f"({a.spark} {op} {b.spark})",
        f"({a.polars} {op} {b.polars})",
        lambda r: strict(fn)(a.ref(r), b.ref(r)),
        "float",
        a,
        b,
    )


def _dec_expr(draw: st.DrawFn, depth: int) -> Node:
    a = draw(value_expr("dec", depth))
    op = draw(st.sampled_from(["+", "-", "*"]))
    b = draw(value_expr(draw(st.sampled_from(["dec", "int"])), depth))
    fn = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
    ref = lambda r: strict(lambda x, y: fn(Decimal(x), Decimal(y)))(a.ref(r), b.ref(r))  # noqa: E731
    return node(f"({a.spark} {op} {b.spark})", f"({a.polars} {op} {b.polars})", ref, "dec", a, b)


def _str_expr(draw: st.DrawFn, depth: int) -> Node:
    a = draw(value_expr("str", depth))
    which = draw(st.sampled_from(["lower", "upper", "trim", "substring", "concat", "cast_int"]))
    if which in ("lower", "upper"):
        fn = str.lower if which == "lower" else str.upper
        return node(
            f"{which}({a.spark})", f"{which}({a.polars})", lambda r: strict(fn)(a.ref(r)), "str", a
        )
    if which == "trim":
        return node(
            f"trim({a.spark})",
            f"trim({a.polars})",
            lambda r: strict(lambda x: x.strip(" "))(a.ref(r)),
            "str",
            a,
        )
    if which == "substring":
        pos = draw(st.integers(-4, 4))
        length = draw(st.one_of(st.none(), st.integers(-1, 4)))
        args = f"{a.spark}, {literal('int', pos).spark}" + (
            "" if length is None else f", {literal('int', length).spark}"
        )
        polars_ok = pos > 0 and (length is None or length >= 0)
        polars_args = f"{a.polars}, {pos}" + ("" if length is None else f", {length}")
        ref = lambda r: ref_substring(a.ref(r), pos, length)  # noqa: E731
        return node(
            f"substring({args})", f"substring({polars_args})" if polars_ok else None, ref, "str", a
        )
    if which == "concat":
        b = draw(value_expr("str", depth))
        return node(
            f"concat({a.spark}, {b.spark})",
            None,
            lambda r: strict(lambda x, y: x + y)(a.ref(r), b.ref(r)),
            "str",
            a,
            b,
        )
    i = draw(value_expr("int", depth))
    return node(
        f"CAST({i.spark} AS STRING)",
        f"CAST({i.polars} AS STRING)",
        lambda r: strict(str)(i.ref(r)),
        "str",
        i,
    )


def _date_expr(draw: st.DrawFn, depth: int) -> Node:
    t = draw(value_expr("ts", depth))
    ref = lambda r: strict(lambda x: x.astimezone(UTC).date())(t.ref(r))  # noqa: E731
    return node(f"CAST({t.spark} AS DATE)", f"CAST({t.polars} AS DATE)", ref, "date", t)


def _ts_expr(draw: st.DrawFn, depth: int) -> Node:
    d = draw(value_expr("date", depth))
    ref = lambda r: strict(lambda x: datetime(x.year, x.month, x.day, tzinfo=UTC))(d.ref(r))  # noqa: E731
    return node(f"CAST({d.spark} AS TIMESTAMP)", None, ref, "ts", d)


# --- dates and times ----------------------------------------------------------------------

NOW = datetime(2024, 1, 2, 13, 45, 6, 789012, tzinfo=UTC)
"""The instant current_date() and current_timestamp() denote in these tests."""
DATE_UNITS = ["YEAR", "QUARTER", "MONTH", "WEEK"]
TIMESTAMP_UNITS = [*DATE_UNITS, "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND"]
DATE_FORMATS = ["yyyy-MM-dd", "HH:mm:ss.SSS", "EEE d MMM yyyy"]
RLIKE_PATTERNS = ["a", "^a", "b$", "[aé]+", "A|1", "^$", "x{30}", "a.b", "\\d", "^\\s*$"]


def _date_calc(draw: st.DrawFn, depth: int) -> Node:
    """date_add, date_sub, add_months, trunc, date ± INTERVAL, date ± n, current_date()."""
    d = draw(value_expr("date", depth))
    which = draw(st.sampled_from(["date_add", "date_sub", "plus", "interval", "months", "trunc"]))
    if draw(st.integers(0, 9)) == 0:
        return Node("current_date()", None, lambda r: NOW.date(), "date")
    if which == "trunc":
        unit = draw(st.sampled_from(DATE_UNITS))
        ref = lambda r: strict(lambda x: ref_trunc_date(x, unit))(d.ref(r))  # noqa: E731
        return node(f"trunc({d.spark}, '{unit}')", None, ref, "date", d)
    if which == "months":
        m = draw(st.integers(-14, 14))
        text = draw(
            st.sampled_from(
                [f"add_months({d.spark}, {literal('int', m).spark})",
                 f"({d.spark} + INTERVAL {m} MONTHS)", f"({d.spark} - INTERVAL '{-m}' MONTH)"]
            )
        )  # fmt: skip
        ref = lambda r: strict(lambda x: ref_add_months(x, m))(d.ref(r))  # noqa: E731
        return node(text, None, ref, "date", d)
    k = draw(st.integers(-40, 40))
    sign = -1 if which == "date_sub" else 1
    text = {
        "date_add": f"date_add({d.spark}, {literal('int', k).spark})",
        "date_sub": f"date_sub({d.spark}, {literal('int', k).spark})",
        "plus": f"({d.spark} + {literal('int', k).spark})",
        "interval": f"({d.spark} + INTERVAL {k} DAYS)",
    }[which]
    ref = lambda r: strict(lambda x: x + timedelta(days=sign * k))(d.ref(r))  # noqa: E731
    return node(text, None, ref, "date", d)


def _ts_calc(draw: st.DrawFn, depth: int) -> Node:
    """timestamp ± INTERVAL (day-time and year-month), date_trunc, current_timestamp()."""
    which = draw(st.sampled_from(["hours", "seconds", "months", "trunc", "date_hours", "now"]))
    if which == "now":
        return Node("current_timestamp()", None, lambda r: NOW, "ts")
    if which == "date_hours":
        d = draw(value_expr("date", depth))
        h = draw(st.integers(-30, 30))

        def at_hour(x: date) -> datetime:
            return datetime(x.year, x.month, x.day, tzinfo=UTC) + timedelta(hours=h)

        ref = lambda r: strict(at_hour)(d.ref(r))  # noqa: E731
        return node(f"({d.spark} + INTERVAL {h} HOURS)", None, ref, "ts", d)
    t = draw(value_expr("ts", depth))
    if which == "trunc":
        unit = draw(st.sampled_from(TIMESTAMP_UNITS))
        ref = lambda r: strict(lambda x: ref_date_trunc(unit, x))(t.ref(r))  # noqa: E731
        return node(f"date_trunc('{unit}', {t.spark})", None, ref, "ts", t)
    if which == "months":
        m = draw(st.integers(-14, 14))
        ref = lambda r: strict(lambda x: ref_add_months_ts(x, -m))(t.ref(r))  # noqa: E731
        return node(f"({t.spark} - INTERVAL {m} MONTHS)", None, ref, "ts", t)
    step = (
        timedelta(hours=draw(st.integers(-30, 30)))
        if which == "hours"
        else timedelta(microseconds=draw(st.integers(-2_000_001, 2_000_001)))
    )
    seconds = Decimal(step // timedelta(microseconds=1)).scaleb(-6)
    text = f"({t.spark} + INTERVAL '{seconds}' SECOND)"
    if which == "hours":
        text = f"({t.spark} + INTERVAL {step // timedelta(hours=1)} HOURS)"
    ref = lambda r: strict(lambda x: x + step)(t.ref(r))  # noqa: E731
    return node(text, None, ref, "ts", t)


def _int_from_datetime(draw: st.DrawFn, depth: int) -> Node:
    """datediff and the field extractors."""
    which = draw(
        st.sampled_from(["datediff", "hour", "minute", "second", "dayofweek", "weekday",
                         "dayofyear", "weekofyear", "quarter"])
    )  # fmt: skip
    if which == "datediff":
        a, b = draw(value_expr("date", depth)), draw(value_expr("date", depth))
        ref = lambda r: strict(lambda x, y: (x - y).days)(a.ref(r), b.ref(r))  # noqa: E731
        return node(f"datediff({a.spark}, {b.spark})", None, ref, "int", a, b)
    if which in ("hour", "minute", "second"):
        t = draw(value_expr("ts", depth))
        ref = lambda r: strict(lambda x: getattr(x.astimezone(UTC), which))(t.ref(r))  # noqa: E731
        return node(f"{which}({t.spark})", None, ref, "int", t)
    d = draw(value_expr("date", depth))
    fields: dict[str, Callable[[date], int]] = {
        "dayofweek": ref_dayofweek,
        "weekday": date.weekday,
        "dayofyear": lambda x: x.timetuple().tm_yday,
        "weekofyear": lambda x: x.isocalendar()[1],
        "quarter": lambda x: (x.month - 1) // 3 + 1,
    }
    fn = fields[which]
    return node(f"{which}({d.spark})", None, lambda r: strict(fn)(d.ref(r)), "int", d)


def _date_format(draw: st.DrawFn, depth: int) -> Node:
    t = draw(value_expr("ts", depth))
    pattern = draw(st.sampled_from(DATE_FORMATS))
    ref = lambda r: strict(lambda x: ref_date_format(x, pattern))(t.ref(r))  # noqa: E731
    return node(f"date_format({t.spark}, '{pattern}')", None, ref, "str", t)


@st.composite
def rlike(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    """RLIKE with patterns whose meaning Java and Python's re share on these strings."""
    s = draw(value_expr("str", depth))
    pattern = draw(st.sampled_from(RLIKE_PATTERNS))
    negate = draw(st.booleans())

    def ref(r: Row) -> bool | None:
        found = strict(lambda x: re.search(pattern, x) is not None)(s.ref(r))
        return ref_not(found) if negate else found

    keyword = "NOT RLIKE" if negate else "RLIKE"
    return node(f"({s.spark} {keyword} {sql_string(pattern)})", None, ref, "bool", s)


BUILDERS: dict[str, list[Callable[[st.DrawFn, int], Node]]] = {
    "int": [_int_arith, _int_unary, _int_from_other, _int_from_datetime],
    "float": [_float_expr],
    "dec": [_dec_expr],
    "str": [_str_expr, _date_format],
    "date": [_date_expr, _date_calc],
    "ts": [_ts_expr, _ts_calc],
    "bool": [],
}
COMPARABLE = [("int", "int"), ("int", "float"), ("float", "float"), ("float", "float")]
COMPARABLE += [("dec", "dec"), ("dec", "int"), ("str", "str"), ("str", "str"), ("date", "date")]
COMPARABLE += [("ts", "ts"), ("ts", "ts"), ("bool", "bool")]


@st.composite
def comparison(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    ka, kb = draw(st.sampled_from([p for p in COMPARABLE if focus in (None, *p)]))
    if draw(st.booleans()):
        ka, kb = kb, ka
    a, b = draw(value_expr(ka, depth)), draw(value_expr(kb, depth))
    op = draw(st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">=", "<=>"]))
    ref = lambda r: ref_compare(op, a.ref(r), b.ref(r))  # noqa: E731
    return node(f"({a.spark} {op} {b.spark})", f"({a.polars} {op} {b.polars})", ref, "bool", a, b)


@st.composite
def loose_comparison(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    """Spark's implicit casts from string literals (date vs '2024-01-01'), and strings read
    as numbers with TRY_CAST: the implicit cast of `s = 5` fails on the grammar's strings,
    which are no numbers (tests/predicate/test_spark_ansi.py checks that failure)."""
    if draw(st.booleans()):
        d = draw(value_expr("date", depth))
        value = draw(dates)
        op = draw(st.sampled_from(["=", "<", ">="]))
        ref = lambda r: ref_compare(op, d.ref(r), value)  # noqa: E731
        return node(f"({d.spark} {op} '{value.isoformat()}')", None, ref, "bool", d)
    s = nonconstant(draw(value_expr("str", depth)), "s", "str")
    k = draw(ints)
    ref = lambda r: ref_compare("=", ref_string_to_long(s.ref(r)), k)  # noqa: E731
    text = f"(TRY_CAST({s.spark} AS BIGINT) = {literal('int', k).spark})"
    return node(text, None, ref, "bool", s)


@st.composite
def in_list(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    kind = draw(ordered_kind(focus))
    value = draw(value_expr(kind, depth))
    options = draw(st.lists(LITERAL_KINDS[kind], min_size=1, max_size=4))
    with_null = draw(st.booleans())
    texts = [literal(kind, o).spark for o in options] + (["NULL"] if with_null else [])
    values = [*options, None] if with_null else options
    negate = draw(st.booleans())
    keyword = "NOT IN" if negate else "IN"
    ref = lambda r: (ref_not if negate else (lambda x: x))(ref_in(value.ref(r), values))  # noqa: E731
    text = f"({value.spark} {keyword} ({', '.join(texts)}))"
    polars = None if value.polars is None else f"({value.polars} {keyword} ({', '.join(texts)}))"
    return node(text, polars, ref, "bool", value)


@st.composite
def between(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    kind = draw(ordered_kind(focus))
    x, lo, hi = (draw(value_expr(kind, depth)) for _ in range(3))
    negate = draw(st.booleans())
    keyword = "NOT BETWEEN" if negate else "BETWEEN"

    def ref(r: Row) -> bool | None:
        inside = ref_and(
            ref_compare(">=", x.ref(r), lo.ref(r)), ref_compare("<=", x.ref(r), hi.ref(r))
        )
        return ref_not(inside) if negate else inside

    text = f"({x.spark} {keyword} {lo.spark} AND {hi.spark})"
    return node(text, f"({x.polars} {keyword} {lo.polars} AND {hi.polars})", ref, "bool", x, lo, hi)


@st.composite
def null_test(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    kind = focus or draw(st.sampled_from(list(LITERAL_KINDS)))
    x = draw(value_expr(kind, depth))
    which = draw(st.sampled_from(["IS NULL", "IS NOT NULL", "isnull", "isnotnull"]))
    is_null = which in ("IS NULL", "isnull")
    ref = lambda r: (x.ref(r) is None) == is_null  # noqa: E731
    spark = f"{which}({x.spark})" if which.islower() else f"({x.spark} {which})"
    polars = f"({x.polars} {'IS NULL' if is_null else 'IS NOT NULL'})"
    return node(spark, polars, ref, "bool", x)


@st.composite
def bool_test(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    x = draw(predicate(depth, focus))
    value = draw(st.booleans())
    negate = draw(st.booleans())

    def ref(r: Row) -> bool:
        result = x.ref(r) is value
        return not result if negate else result

    text = f"({x.spark} IS {'NOT ' if negate else ''}{'TRUE' if value else 'FALSE'})"
    return node(text, None, ref, "bool", x)


@st.composite
def like(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    s = draw(value_expr("str", depth))
    pieces = st.sampled_from(["a", "b", "A", "é", " ", "%", "_", "\\%", "\\_", "x" * 30])
    pattern = "".join(draw(st.lists(pieces, max_size=4)))
    negate = draw(st.booleans())
    keyword = "NOT LIKE" if negate else "LIKE"
    ref = lambda r: (ref_not if negate else (lambda v: v))(ref_like(s.ref(r), pattern))  # noqa: E731
    text = f"({s.spark} {keyword} '{pattern}')"
    polars = None if "\\" in pattern else f"({s.polars} {keyword} '{pattern}')"
    return node(text, polars, ref, "bool", s)


@st.composite
def string_test(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    s = draw(value_expr("str", depth))
    which = draw(st.sampled_from(["startswith", "endswith", "contains"]))
    arg = draw(short_strings)
    fn = {"startswith": str.startswith, "endswith": str.endswith, "contains": str.__contains__}[
        which
    ]
    ref = lambda r: strict(lambda x: fn(x, arg))(s.ref(r))  # noqa: E731
    polars_name = {"startswith": "starts_with", "endswith": "ends_with"}.get(which)
    polars = f"{polars_name}({s.polars}, {sql_string(arg)})" if polars_name else None
    return node(f"{which}({s.spark}, {sql_string(arg)})", polars, ref, "bool", s)


@st.composite
def logic(draw: st.DrawFn, depth: int, focus: str | None = None) -> Node:
    which = draw(st.sampled_from(["AND", "OR", "NOT"]))
    a = draw(predicate(depth, focus))
    if which == "NOT":
        return node(f"(NOT {a.spark})", f"(NOT {a.polars})", lambda r: ref_not(a.ref(r)), "bool", a)
    b = draw(predicate(depth, focus))
    fn = ref_and if which == "AND" else ref_or
    ref = lambda r: fn(a.ref(r), b.ref(r))  # noqa: E731
    return node(
        f"({a.spark} {which} {b.spark})", f"({a.polars} {which} {b.polars})", ref, "bool", a, b
    )


def ordered_kind(focus: str | None) -> st.SearchStrategy[str]:
    kinds = ["int", "float", "dec", "str", "date", "ts"]
    return st.just(focus) if focus in kinds else st.sampled_from(kinds)


FOCUS = ["int", "float", "dec", "str", "date", "ts", "bool"]
STRING_ATOMS = [like, string_test, loose_comparison, rlike]


@st.composite
def predicate(draw: st.DrawFn, depth: int = 2, focus: str | None = None) -> Node:
    """A boolean expression; with a `focus` kind, atoms mostly test values of that kind."""
    atoms = [comparison, comparison, comparison, in_list, between, null_test]
    if focus in (None, "str"):
        atoms += STRING_ATOMS
    if depth > 0:
        atoms += [logic, logic, bool_test]
    builder = draw(st.sampled_from(atoms))
    if builder in (logic, bool_test):
        return draw(builder(depth - 1, focus))
    return draw(builder(min(depth, 1), focus))
