"""Property tests of dvtool.predicate against independent oracles.

Hypothesis draws small tables (int64, double, string, date, timestamp, decimal and boolean
columns, all with NULLs) and predicates from a grammar of the supported constructs. Every
generated node carries three things written here, independently of the module:

- its Spark SQL text;
- its text in polars' SQL dialect, or None where polars differs from Spark: division and `%`
  by zero (polars gives inf/NaN, Spark NULL), LIKE with escapes, negative substring
  positions, concat with NULL (polars skips NULLs), IS [NOT] TRUE/FALSE on NULL, comparisons
  of strings with dates or numbers, casts from strings and floats, NaN, and the functions
  polars lacks (startswith, contains, isnull);
- a pure-Python evaluator of Spark's semantics (three-valued logic, NaN ordering, Java `%`,
  1-based substring, ...), the reference for everything.

Properties: `to_arrow()` selects exactly the rows where the reference is TRUE, and the rows
polars' `pl.sql_expr` selects whenever the whole predicate has a polars form; `to_spark_sql()`
parses back to an equal tree; file skipping is sound: for random file splits and partition
layouts, with deletion vectors (statistics over all physical rows, truth over the valid ones),
Delta's truncated statistics (32-character string prefixes, optionally with a U+FFFF
tie-breaker, millisecond timestamps, decimals as JSON floats), missing statistics, and exact
parquet-style row-group statistics, `file_match`/`stats_match` never say NONE when a valid row
is TRUE nor ALL when one is not, and are exact for partition-only predicates.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvtool.core.schema import StructField, StructType
from dvtool.predicate import Match, Predicate

Row = dict[str, Any]
Ref = Callable[[Row], Any]

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

PROFILE = settings(  # PREDICATE_EXAMPLES=5000 for a deeper search
    max_examples=int(os.environ.get("PREDICATE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


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


# --- reference semantics (Spark) ----------------------------------------------------------


def _key(x: Any) -> tuple[int, Any]:
    """Spark's ordering: NaN equals NaN and is above every number."""
    if isinstance(x, float) and math.isnan(x):
        return (1, 0)
    return (0, x)


def ref_compare(op: str, a: Any, b: Any) -> bool | None:
    if op == "<=>":
        if a is None or b is None:
            return a is None and b is None
        return _key(a) == _key(b)
    if a is None or b is None:
        return None
    ka, kb = _key(a), _key(b)
    return {
        "=": ka == kb,
        "!=": ka != kb,
        "<>": ka != kb,
        "<": ka < kb,
        "<=": ka <= kb,
        ">": ka > kb,
        ">=": ka >= kb,
    }[op]


def ref_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def ref_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def ref_not(a: bool | None) -> bool | None:
    return None if a is None else not a


def ref_in(value: Any, options: list[Any]) -> bool | None:
    if value is None:
        return None
    if any(o is not None and ref_compare("=", value, o) for o in options):
        return True
    return None if any(o is None for o in options) else False


def ref_like(s: str | None, pattern: str) -> bool | None:
    if s is None:
        return None
    regex, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            regex += re.escape(pattern[i + 1])
            i += 2
            continue
        regex += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(regex, s, re.DOTALL) is not None


def ref_substring(s: str | None, pos: int, length: int | None) -> str | None:
    """UTF8String.substringSQL."""
    if s is None:
        return None
    n = len(s)
    start = pos - 1 if pos > 0 else (n + pos if pos < 0 else 0)
    end = n if length is None else start + length
    start = max(start, 0)
    return "" if start >= end else s[start : min(end, n)]


def ref_remainder(a: int | None, b: int | None) -> int | None:
    if a is None or b is None or b == 0:
        return None
    return int(math.fmod(a, b))


def ref_divide(a: Any, b: Any) -> float | None:
    if a is None or b is None or float(b) == 0:
        return None
    return float(a) / float(b)


def strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NULL in, NULL out."""
    return lambda *args: None if any(a is None for a in args) else fn(*args)


def ref_string_to_long(s: str | None) -> int | None:
    if s is None:
        return None
    text = s.strip()
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else None


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
            f"CAST({s.spark} AS BIGINT)", None, lambda r: ref_string_to_long(s.ref(r)), "int", s
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


BUILDERS: dict[str, list[Callable[[st.DrawFn, int], Node]]] = {
    "int": [_int_arith, _int_unary, _int_from_other],
    "float": [_float_expr],
    "dec": [_dec_expr],
    "str": [_str_expr],
    "date": [_date_expr],
    "ts": [_ts_expr],
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
    """Spark's implicit casts from string literals: date vs '2024-01-01', string vs number."""
    if draw(st.booleans()):
        d = draw(value_expr("date", depth))
        value = draw(dates)
        op = draw(st.sampled_from(["=", "<", ">="]))
        ref = lambda r: ref_compare(op, d.ref(r), value)  # noqa: E731
        return node(f"({d.spark} {op} '{value.isoformat()}')", None, ref, "bool", d)
    s = nonconstant(draw(value_expr("str", depth)), "s", "str")
    k = draw(ints)
    ref = lambda r: ref_compare("=", ref_string_to_long(s.ref(r)), k)  # noqa: E731
    return node(f"({s.spark} = {literal('int', k).spark})", None, ref, "bool", s)


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
STRING_ATOMS = [like, string_test, loose_comparison]


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


# --- properties ---------------------------------------------------------------------------


def true_rows(p: Node, data: list[Row]) -> list[int]:
    return [k for k, row in enumerate(data) if p.ref(row) is True]


def parse(sql: str, partitions: tuple[str, ...] = ()) -> Predicate:
    return Predicate.parse(sql, SCHEMA, partitions, "none")


@pytest.mark.parametrize("focus", FOCUS)
@PROFILE
@given(data=rows(nan=True), draws=st.data())
def test_arrow_matches_reference_and_polars(
    focus: str, data: list[Row], draws: st.DataObject
) -> None:
    p = draws.draw(predicate(focus=focus))
    pred = parse(p.spark)
    table = to_table(data).append_column("k", pa.array(range(len(data)), pa.int64()))
    selected = table.filter(pred.to_arrow())["k"].to_pylist()
    assert selected == true_rows(p, data), pred.to_spark_sql()
    has_nan = any(isinstance(r["f"], float) and math.isnan(r["f"]) for r in data)
    if p.polars is not None and not has_nan:
        frame = to_polars(table)
        assert frame.filter(pl.sql_expr(p.polars))["k"].to_list() == selected, p.polars


@pytest.mark.parametrize("focus", FOCUS)
@PROFILE
@given(draws=st.data())
def test_spark_sql_round_trips(focus: str, draws: st.DataObject) -> None:
    p = draws.draw(predicate(focus=focus))
    pred = parse(p.spark)
    again = parse(pred.to_spark_sql())
    assert again.expr == pred.expr
    assert again.to_spark_sql() == pred.to_spark_sql()


# --- skipping -----------------------------------------------------------------------------


def _json_value(name: str, value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        floored = value.replace(microsecond=value.microsecond // 1000 * 1000)
        return floored.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, date):
        return value.isoformat()
    return value


def _truncate(value: Any, is_max: bool, tie_breaker: bool) -> Any:
    if isinstance(value, str) and len(value) > 32:
        return value[:32] + ("\uffff" if is_max and tie_breaker else "")
    return value


def delta_stats(physical: list[Row], names: list[str], draw: st.DrawFn) -> dict[str, Any] | None:
    """Delta JSON stats over the physical rows, as a writer would produce them, parsed back."""
    if draw(st.integers(0, 6)) == 0:
        return None
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    tie_breaker = draw(st.booleans())
    for name in names:
        values = [r[name] for r in physical if r[name] is not None]
        if draw(st.integers(0, 5)) > 0:
            nulls[name] = len(physical) - len(values)
        comparable = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
        if comparable and name != "b" and draw(st.integers(0, 5)) > 0:
            mins[name] = _truncate(_json_value(name, min(comparable)), False, tie_breaker)
            maxs[name] = _truncate(_json_value(name, max(comparable)), True, tie_breaker)
    stats = {"numRecords": len(physical), "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    text = json.dumps(stats)
    exact = draw(st.booleans())
    parsed: dict[str, Any] = json.loads(text, parse_float=Decimal) if exact else json.loads(text)
    return parsed


def row_group_stats(physical: list[Row], names: list[str]) -> tuple[dict[str, Any], ...]:
    """Exact typed statistics like pyarrow's parquet row-group statistics."""
    mins, maxs, nulls = {}, {}, {}
    for name in names:
        values = [r[name] for r in physical if r[name] is not None]
        nulls[name] = len(physical) - len(values)
        comparable = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
        if comparable:
            mins[name], maxs[name] = min(comparable), max(comparable)
    return mins, maxs, nulls


def serialize_partition(value: Any, iso: bool = False) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        utc = value.astimezone(UTC)
        if iso:
            return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return utc.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def files_of(data: list[Row], partition: str | None, draw: st.DrawFn) -> list[list[int]]:
    if partition is not None:
        groups: dict[Any, list[int]] = {}
        for k, row in enumerate(data):
            groups.setdefault(row[partition], []).append(k)
        return list(groups.values())
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=2)))
    bounds = [0, *cuts, len(data)]
    return [list(range(a, b)) for a, b in itertools.pairwise(bounds)]


def assert_sound(match: Match, truths: list[Any], exact: bool, context: str) -> None:
    if any(t is True for t in truths):
        assert match is not Match.NONE, context
    if match is Match.ALL:
        assert all(t is True for t in truths), context
    if exact and truths:  # one partition: every row has the same truth value
        assert match is (Match.ALL if truths[0] is True else Match.NONE), context


@pytest.mark.parametrize("focus", FOCUS)
@PROFILE
@given(data=rows(nan=True), draws=st.data())
def test_file_skipping_is_sound(focus: str, data: list[Row], draws: st.DataObject) -> None:
    p = draws.draw(predicate(focus=focus))
    partition = draws.draw(st.sampled_from([None, None, "i", "s", "d", "ts", "dec", "b"]))
    if partition == "s":
        data = [{**r, "s": r["s"] or None} for r in data]  # "" cannot be a partition value
    partitions = (partition,) if partition else ()
    pred = parse(p.spark, partitions)
    data_columns = [n for n in COLUMNS if n != partition]
    for rows_of_file in files_of(data, partition, draws.draw):
        physical = [data[k] for k in rows_of_file]
        deleted = draws.draw(
            st.lists(st.booleans(), min_size=len(physical), max_size=len(physical))
        )
        valid = [r for r, gone in zip(physical, deleted, strict=True) if not gone]
        truths = [p.ref(r) for r in valid]
        pv = {}
        if partition is not None and physical:
            iso = draws.draw(st.booleans())
            pv[partition] = serialize_partition(physical[0][partition], iso)
        stats = delta_stats(physical, data_columns, draws.draw)
        exact = pred.references_only_partitions and partition is not None
        match = pred.file_match(pv, stats)
        assert_sound(match, truths, exact, f"{pred.to_spark_sql()} {pv} {stats}")
        mins, maxs, nulls = row_group_stats(physical, data_columns)
        group_match = pred.stats_match(len(physical), mins, maxs, nulls, pv)
        assert_sound(group_match, truths, exact, f"row group: {pred.to_spark_sql()} {pv}")


@PROFILE
@given(rows(), predicate(depth=1))
def test_constant_columns_are_exact_when_partitioned(data: list[Row], p: Node) -> None:
    """Partition columns only: every file is one partition, so the answer is exact."""
    names = sorted(p.cols)
    pred = parse(p.spark, tuple(names))
    if not data or not pred.references_only_partitions:
        return
    first = {n: data[0][n] for n in names}
    if "s" in first and first["s"] == "":
        return
    truth = p.ref({**data[0], **first})
    pv = {n: serialize_partition(v) for n, v in first.items()}
    expected = Match.ALL if truth is True else Match.NONE
    assert pred.file_match(pv, {"numRecords": 3}) is expected


def test_arrow_expression_filters_a_batch_with_physical_partition_columns() -> None:
    pred = Predicate.parse("i > 1 AND s = 'x'", SCHEMA, ("s",), "none")
    batch = pa.table({"i": pa.array([1, 2, 3], pa.int32())})
    scalar = pred.partition_scalars({"s": "x"})["s"]
    batch = batch.append_column("s", pa.repeat(scalar, 3).dictionary_encode())
    assert batch.filter(pred.to_arrow())["i"].to_pylist() == [2, 3]
    assert pc.sum(batch.filter(pred.to_arrow())["i"]).as_py() == 5
