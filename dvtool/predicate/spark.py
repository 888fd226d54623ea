"""The predicate as Spark SQL text, so Spark can evaluate exactly what dvtool evaluates.

Columns are written by their logical names, backquoted (`` `a`.`b` ``). Every operation is
parenthesized and every implicit cast the binder inserted is written out, so Spark neither
re-derives types nor depends on operator precedence. Literals carry their exact type:
`DATE '...'`, `TIMESTAMP '...Z'` (an explicit zone, whatever the session time zone),
`CAST('1.5' AS DOUBLE)`, `CAST(5 AS BIGINT)`, and decimals as plain text when Spark types that
text as the same decimal, else as a CAST. Parsing the text again gives an equal tree.

Where ANSI Spark fails a statement at run time but dvtool yields NULL (division or remainder
by zero, a CAST of a number that does not fit), the text says `try_divide`, `try_mod` and
`TRY_CAST`, so Spark computes exactly what dvtool computes, row for row. A strict cast of a
string (`Cast.strict`: `name > 5` reads `name` as a BIGINT) stays `CAST`: it fails in Spark
where it fails in dvtool (ansi.py).
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from dvtool.predicate.casts import may_fail
from dvtool.predicate.sqltypes import (
    BINARY,
    BOOLEAN,
    DATE,
    INT,
    INTERVAL_MICROS,
    INTERVAL_MONTHS,
    NULL,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NTZ,
    SqlType,
    is_decimal,
    is_floating,
    is_integral,
)
from dvtool.predicate.syntax import number_literal
from dvtool.predicate.tree import (
    And,
    Arith,
    Cast,
    Column,
    Compare,
    Expr,
    Func,
    In,
    IsBool,
    IsNull,
    Like,
    Literal,
    Neg,
    Not,
    Or,
    Visitor,
)

_TRIM_SIDES = {"trim": "BOTH", "ltrim": "LEADING", "rtrim": "TRAILING"}
_TRY_FUNCTIONS = {"/": "try_divide", "%": "try_mod"}


def type_sql(t: SqlType) -> str:
    """The type as written in a Spark CAST."""
    if is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    return t.name.upper()


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """A Spark string literal (backslash escapes are on by default in Spark)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _timestamp_text(value: datetime) -> str:
    """`YYYY-MM-DD HH:MM:SS[.ffffff]`, the year zero-padded to 4 digits (strftime's `%Y`
    gives `1-01-01` for year 1 on glibc, which Spark refuses)."""
    text = f"{value.year:04d}-" + value.strftime("%m-%d %H:%M:%S")
    return text + (f".{value.microsecond:06d}" if value.microsecond else "")


def literal_sql(value: Any, t: SqlType) -> str:
    """A Spark SQL literal that Spark (and parse.py) read back as exactly `value` of type `t`."""
    if value is None:
        return "NULL" if t == NULL else f"CAST(NULL AS {type_sql(t)})"
    if t == BOOLEAN:
        return "TRUE" if value else "FALSE"
    if t == STRING:
        return quote_string(value)
    if is_integral(t):
        return _integral_sql(int(value), t)
    if is_floating(t):
        return f"CAST('{float(value)!r}' AS {type_sql(t)})"
    if is_decimal(t):
        return _decimal_sql(value, t)
    if t == BINARY:
        return f"X'{bytes(value).hex().upper()}'"
    if t == DATE and isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if t == TIMESTAMP and isinstance(value, datetime):
        return f"TIMESTAMP '{_timestamp_text(value.astimezone(timezone.utc))}Z'"
    if t == TIMESTAMP_NTZ and isinstance(value, datetime):
        return f"TIMESTAMP_NTZ '{_timestamp_text(value)}'"
    if t == INTERVAL_MONTHS:
        return f"INTERVAL '{int(value)}' MONTH"
    if t == INTERVAL_MICROS:
        seconds = Decimal(int(value)).scaleb(-6).normalize()
        return f"INTERVAL '{format(seconds, 'f')}' SECOND"
    raise ValueError(f"cannot write a {t} literal")


def _integral_sql(value: int, t: SqlType) -> str:
    if t == INT:
        return str(value) if value >= 0 else f"({value})"
    return f"CAST({value} AS {type_sql(t)})"


def _decimal_sql(value: Decimal, t: SqlType) -> str:
    text = format(value, "f")
    unsigned = text.lstrip("-")
    if "." in unsigned and number_literal(unsigned).type == t:
        return text if not text.startswith("-") else f"({text})"
    return f"CAST({text} AS {type_sql(t)})"


class SparkSqlVisitor(Visitor[str]):
    """Writes a predicate tree as Spark SQL over logical column names."""

    def visit_column(self, node: Column) -> str:
        return ".".join(quote_identifier(part) for part in node.path)

    def visit_literal(self, node: Literal) -> str:
        return literal_sql(node.value, node.type)

    def visit_compare(self, node: Compare) -> str:
        return f"({self.visit(node.left)} {node.op} {self.visit(node.right)})"

    def visit_and(self, node: And) -> str:
        return f"({self.visit(node.left)} AND {self.visit(node.right)})"

    def visit_or(self, node: Or) -> str:
        return f"({self.visit(node.left)} OR {self.visit(node.right)})"

    def visit_not(self, node: Not) -> str:
        return f"(NOT {self.visit(node.child)})"

    def visit_in(self, node: In) -> str:
        options = ", ".join(self.visit(o) for o in node.options)
        return f"({self.visit(node.value)} IN ({options}))"

    def visit_is_null(self, node: IsNull) -> str:
        return f"({self.visit(node.child)} IS NULL)"

    def visit_is_bool(self, node: IsBool) -> str:
        return f"({self.visit(node.child)} IS {'TRUE' if node.value else 'FALSE'})"

    def visit_like(self, node: Like) -> str:
        keyword = "ILIKE" if node.ignore_case else "LIKE"
        text = f"{self.visit(node.child)} {keyword} {quote_string(node.pattern)}"
        if node.escape != "\\":
            text += f" ESCAPE {quote_string(node.escape)}"
        return f"({text})"

    def visit_arith(self, node: Arith) -> str:
        left, right = self.visit(node.left), self.visit(node.right)
        if node.op in _TRY_FUNCTIONS:
            return f"{_TRY_FUNCTIONS[node.op]}({left}, {right})"
        return f"({left} {node.op} {right})"

    def visit_neg(self, node: Neg) -> str:
        return f"(- {self.visit(node.child)})"

    def visit_cast(self, node: Cast) -> str:
        try_cast = may_fail(node.child.type, node.type) and not node.strict
        keyword = "TRY_CAST" if try_cast else "CAST"
        return f"{keyword}({self.visit(node.child)} AS {type_sql(node.type)})"

    def visit_func(self, node: Func) -> str:
        args = [self.visit(a) for a in node.args]
        if node.name == "rlike":
            return f"({args[0]} RLIKE {args[1]})"
        if node.name in _TRIM_SIDES and len(args) == 2:
            return f"trim({_TRIM_SIDES[node.name]} {args[1]} FROM {args[0]})"
        return f"{node.name}({', '.join(args)})"


def to_spark_sql(expr: Expr) -> str:
    """Spark SQL text for the tree (see the module docstring)."""
    return SparkSqlVisitor().visit(expr)
