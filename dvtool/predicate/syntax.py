"""The text side of `--where`: sqlglot parsing, literal and CAST types, nodes named in errors.

sqlglot (Spark dialect) parses the text once; parse.py binds the resulting tree. This module
holds what depends only on sqlglot's tree, not on the table: reading the text into one
expression, typing numeric literals and CAST target types as Spark does, and rendering nodes
briefly for error messages. Every problem is a `PredicateError` with a one-line reason.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from dvtool.errors import PredicateError
from dvtool.predicate.sqltypes import (
    BINARY,
    BOOLEAN,
    BYTE,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    INTEGRAL_RANGE,
    LONG,
    MAX_PRECISION,
    SHORT,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NTZ,
    SqlType,
    decimal,
)
from dvtool.predicate.tree import Literal

SUPPORTED = (
    "supported: comparisons (= != <> < <= > >= <=>), AND/OR/NOT, [NOT] IN, [NOT] BETWEEN, "
    "IS [NOT] NULL/TRUE/FALSE, [NOT] LIKE/ILIKE/RLIKE, + - * / %, INTERVAL, [TRY_]CAST, and "
    "the functions lower, upper, length, substring, trim, ltrim, rtrim, concat, coalesce, abs, "
    "startswith, endswith, contains, regexp_like, isnull, isnotnull, try_divide, try_mod, "
    "current_date, current_timestamp, now, date_add, date_sub, datediff, add_months, "
    "date_trunc, trunc, date_format, to_date, year, quarter, month, day, dayofweek, weekday, "
    "dayofyear, weekofyear, hour, minute, second"
)


_PLAIN_CALLS = frozenset(
    {
        "ADD_MONTHS", "DATEADD", "DATEDIFF", "DATE_ADD", "DATE_DIFF", "DATE_FORMAT",
        "DATE_SUB", "DATE_TRUNC", "DAYOFWEEK", "DAYOFYEAR", "HOUR", "MINUTE", "QUARTER",
        "SECOND", "TIMESTAMPADD", "TRUNC", "WEEKDAY", "WEEKOFYEAR",
    }
)  # fmt: skip


class _SparkCalls(Spark):
    """Spark's dialect, with the date/time functions sqlglot would rewrite (`date_sub(d, n)`
    into `DATE_ADD(d, n * -1)`, `date_format` patterns into strftime, arguments wrapped in
    `TO_DATE`) left as plain calls, so the binder reads exactly what the user wrote."""

    class Parser(Spark.Parser):  # type: ignore[misc,valid-type]
        FUNCTIONS: ClassVar[dict[str, Any]] = {
            name: build
            for name, build in Spark.Parser.FUNCTIONS.items()
            if name not in _PLAIN_CALLS
        }


_T = exp.DataType.Type
_CAST_TYPES: dict[Any, SqlType] = {
    _T.TINYINT: BYTE,
    _T.SMALLINT: SHORT,
    _T.INT: INT,
    _T.BIGINT: LONG,
    _T.FLOAT: FLOAT,
    _T.DOUBLE: DOUBLE,
    _T.TEXT: STRING,
    _T.VARCHAR: STRING,
    _T.CHAR: STRING,
    _T.BOOLEAN: BOOLEAN,
    _T.DATE: DATE,
    _T.TIMESTAMP: TIMESTAMP,
    _T.TIMESTAMPTZ: TIMESTAMP,
    _T.TIMESTAMPLTZ: TIMESTAMP,
    _T.TIMESTAMPNTZ: TIMESTAMP_NTZ,
    _T.BINARY: BINARY,
    _T.VARBINARY: BINARY,
}


def parse_sql(sql: str) -> exp.Expr:
    """sqlglot's tree for one expression; PredicateError with a one-line reason otherwise."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=_SparkCalls) if s is not None]
    except sqlglot.errors.ParseError as e:
        raise PredicateError(f"cannot parse --where {sql!r}: {_parse_error(e)}") from None
    except sqlglot.errors.SqlglotError as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise PredicateError(f"cannot parse --where {sql!r}: {reason}") from None
    if len(statements) != 1:
        raise PredicateError(
            f"--where needs exactly one boolean expression, got {len(statements)}",
            hint="e.g. --where \"country = 'NL' AND year(ts) = 2024\"",
        )
    return statements[0]


def _parse_error(e: sqlglot.errors.ParseError) -> str:
    if not e.errors:
        return str(e).splitlines()[0]
    first = e.errors[0]
    description = str(first.get("description", "syntax error"))
    if description.startswith("Required keyword"):
        description = "incomplete expression"
    near = first.get("highlight")
    where = f" near {near!r}" if near else ""
    return f"{description}{where} (line {first.get('line')}, column {first.get('col')})"


def node_sql(node: exp.Expr) -> str:
    """The node as Spark SQL, cut to 60 characters: how error messages quote the user."""
    text = node.sql(dialect="spark")
    return text if len(text) <= 60 else text[:57] + "..."


# Functions Spark SQL spells as an operator, by the parser's class name.
_SPARK_OPERATORS = {"RegexpLike": "RLIKE", "RegexpILike": "ILIKE", "Overlaps": "OVERLAPS"}
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")


def describe(node: exp.Expr) -> str:
    """What kind of construct the node is, for "... is not supported" messages, in Spark
    SQL's words (the parser's own names, such as TIME_TO_STR for date_format, never show)."""
    if isinstance(node, exp.Func):
        operator = _SPARK_OPERATORS.get(type(node).__name__)
        if operator:
            return operator
        spark = node.sql(dialect="spark")
        call = _CALL.match(spark)
        if call or re.fullmatch(r"[A-Z_]+", spark):  # f(x), or CURRENT_DATE without ()
            return f"function {(call.group(1) if call else spark).lower()}()"
        return node.sql_name()  # a keyword construct: CASE, ...
    return re.sub(r"(?<!^)(?=[A-Z])", " ", type(node).__name__).upper()


def name_parts(node: exp.Expr) -> list[str] | None:
    """The parts of a (dotted) column reference, or None when the node is not one."""
    if isinstance(node, exp.Column):
        return [part.name for part in node.parts]
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        left = name_parts(node.this)
        return None if left is None else [*left, node.expression.name]
    return None


def number_literal(text: str) -> Literal:
    """A numeric literal typed as Spark types it: INT, BIGINT, else DECIMAL for integers;
    DECIMAL for `1.5`; DOUBLE with an exponent (`1e3`)."""
    if re.fullmatch(r"-?\d+", text):
        value = int(text)
        for t in (INT, LONG):
            if INTEGRAL_RANGE[t][0] <= value <= INTEGRAL_RANGE[t][1]:
                return Literal(value, t)
        digits = len(str(abs(value)))
        if digits > MAX_PRECISION:
            raise PredicateError(f"number {text} has more than {MAX_PRECISION} digits")
        return Literal(Decimal(value), decimal(digits, 0))
    if "e" in text.lower():
        return Literal(float(text), DOUBLE)
    value_d = Decimal(text)
    parts = value_d.as_tuple()
    scale = max(-int(parts.exponent), 0)
    precision = max(len(parts.digits), scale, 1)
    if precision > MAX_PRECISION:
        raise PredicateError(f"number {text} has more than {MAX_PRECISION} digits")
    return Literal(value_d, decimal(precision, scale))


def cast_type(dt: exp.DataType) -> SqlType:
    """The SqlType a CAST names; PredicateError for a type dvtool does not cast to."""
    kind = dt.this
    if kind == _T.DECIMAL:
        params = [int(str(p.this.this)) for p in dt.expressions]
        precision, scale = (params + [10, 0][len(params) :])[:2] if params else (10, 0)
        if not (1 <= precision <= MAX_PRECISION and 0 <= scale <= precision):
            raise PredicateError(f"invalid decimal type DECIMAL({precision},{scale})")
        return decimal(precision, scale)
    if kind in _CAST_TYPES:
        return _CAST_TYPES[kind]
    raise PredicateError(
        f"CAST to {dt.sql(dialect='spark')} is not supported",
        hint="types: INT, BIGINT, SMALLINT, TINYINT, DOUBLE, FLOAT, STRING, DATE, TIMESTAMP, "
        "TIMESTAMP_NTZ, DECIMAL(p,s), BOOLEAN, BINARY",
    )
