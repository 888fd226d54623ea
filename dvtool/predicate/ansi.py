"""Spark 4's ANSI CAST of strings: a value that is not valid for the target type fails.

With ANSI mode on (Spark 4's default), `name > 5` on a string column is
`CAST(name AS BIGINT) > 5`, and Spark fails the whole statement with CAST_INVALID_INPUT on
the first value the cast cannot read ('abc', '1.0', '' for a BIGINT). Deleting nothing there
would be a silent mistake, so dvtool fails too: the binder marks such casts `Cast.strict`
(implicit ones, and explicit CASTs of strings; never TRY_CAST), and before a batch is
filtered, `raise_invalid` looks for a row where a strict cast is evaluated on a value it
cannot read and raises `InvalidInputError` naming the column, the value and (through the
engine) the file.

"Evaluated" follows Spark's evaluation order, so dvtool fails exactly where Spark does:
`a AND b` evaluates `b` only where `a` is not FALSE, `a OR b` only where `a` is not TRUE
(Spark's short circuit: `kind = 'n' AND name > 5` is fine when every row of kind 'n' holds a
number); the right operand of a comparison or of `+ - *` only where the left one is not NULL
(the divisor of `/ %` first, then the dividend where the divisor is not NULL); an IN option
only while the value is not NULL and no earlier option matched; a coalesce() argument only
while the earlier ones are NULL. Other functions evaluate all their arguments.

File and row-group skipping never take a file whole (Match.ALL) while a strict cast reads
data columns (skipping.py): Spark reads the rows of such a file and would fail on them, so
dvtool reads them too. Strict casts of partition columns are checked on the partition values.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.errors import InvalidInputError
from dvtool.predicate import arrow
from dvtool.predicate.casts import FALSE, TRUE
from dvtool.predicate.resolve import quote
from dvtool.predicate.spark import to_spark_sql, type_sql
from dvtool.predicate.tree import (
    And,
    Arith,
    Cast,
    Column,
    Compare,
    Expr,
    Func,
    In,
    Like,
    Neg,
    Not,
    Or,
    columns,
    walk,
)


@dataclass(frozen=True)
class Check:
    """One strict cast: `failed` is TRUE on rows where Spark evaluates it and it cannot read
    `value` (its input); never NULL."""

    cast: Cast
    failed: pc.Expression
    value: pc.Expression


def has_strict_casts(expr: Expr) -> bool:
    return any(isinstance(n, Cast) and n.strict for n in walk(expr))


def reads_data_strictly(expr: Expr) -> bool:
    """Whether a strict cast reads data (not partition) columns: skipping then never takes a
    file or row group whole, whatever its statistics say (Spark reads such files, and fails
    on their rows; string statistics do not bound numbers anyway)."""
    return any(
        isinstance(node, Cast) and node.strict and not all(c.partition for c in columns(node))
        for node in walk(expr)
    )


def strict_checks(expr: Expr) -> list[Check]:
    """The checks of the strict casts in `expr`, in Spark's evaluation order.

    Spark's optimizer puts `isnotnull(c)` first in a filter for each column `c` that a
    top-level conjunct reads through NULL-intolerant operations only (InferFiltersFromConstraints:
    `id = 1 AND name > 0` drops rows with a NULL id before `name > 0` sees them); then it
    evaluates the conjuncts in order, stopping at the first FALSE.
    """
    out: list[Check] = []
    if not has_strict_casts(expr):
        return out
    conjuncts = _conjuncts(expr)
    guard: Guard = None
    for column in dict.fromkeys(c for e in conjuncts for c in _null_intolerant_columns(e)):
        guard = _both(guard, pc.is_valid(arrow.to_arrow_expression(column)))
    for conjunct in conjuncts:
        _collect(conjunct, guard, out)
        guard = _both(guard, pc.coalesce(arrow.to_arrow_expression(conjunct), TRUE))
    return out


def _conjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, And):
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    return [expr]


def _null_intolerant_columns(expr: Expr) -> list[Column]:
    """Spark's `scanNullIntolerantAttribute`: the top-level columns reached from `expr`
    through operations that are NULL whenever an operand is (comparisons but `<=>`,
    arithmetic, casts, NOT, LIKE)."""
    if isinstance(expr, Column):
        return [expr] if len(expr.path) == 1 else []
    intolerant = (Arith, Neg, Cast, Not, Like) if not isinstance(expr, Compare) else (Compare,)
    if isinstance(expr, Compare) and expr.op == "<=>":
        return []
    if not isinstance(expr, intolerant):
        return []
    return [c for child in expr.children() for c in _null_intolerant_columns(child)]


def raise_invalid(checks: Sequence[Check], table: pa.Table, where: str | None = None) -> None:
    """Raise InvalidInputError for the first row of `table` (columns by physical name) where
    a check fails; return when none does."""
    if not checks or table.num_rows == 0:
        return
    any_failed = functools.reduce(pc.or_kleene, [c.failed for c in checks])
    (flags,) = arrow.evaluate([any_failed], table)
    if not arrow_values.as_py(pc.any(flags)):
        return
    first = arrow_values.as_py(pc.index(flags, arrow_values.TRUE))
    row = table.slice(first, 1)
    results = arrow.evaluate([c.failed for c in checks] + [c.value for c in checks], row)
    for i, check in enumerate(checks):
        if arrow_values.as_py(results[i][0]):
            value = arrow_values.as_py(results[len(checks) + i][0])
            target = type_sql(check.cast.type)
            raise InvalidInputError(_shown(check.cast.child), str(value), target, where)


def _shown(expr: Expr) -> str:
    """The cast's input as the user may recognize it: a column's name, else Spark SQL."""
    if isinstance(expr, Column):
        return ".".join(quote(part) for part in expr.path)
    return to_spark_sql(expr)


# --- evaluation order -----------------------------------------------------------------------

Guard: TypeAlias = "pc.Expression | None"  # None: always evaluated


def _both(guard: Guard, condition: pc.Expression) -> pc.Expression:
    return condition if guard is None else pc.and_kleene(guard, condition)


def _collect(node: Expr, guard: Guard, out: list[Check]) -> None:
    if not has_strict_casts(node):
        return
    if isinstance(node, Cast) and node.strict:
        value = arrow.to_arrow_expression(node.child)
        unreadable = pc.and_kleene(pc.is_valid(value), pc.is_null(arrow.to_arrow_expression(node)))
        out.append(Check(node, pc.coalesce(_both(guard, unreadable), FALSE), value))
    for child, child_guard in _child_guards(node, guard):
        _collect(child, child_guard, out)


def _child_guards(node: Expr, guard: Guard) -> list[tuple[Expr, Guard]]:
    """Each child of `node` with the condition under which Spark evaluates it."""
    if isinstance(node, (And, Or)):
        left = arrow.to_arrow_expression(node.left)
        if isinstance(node, And):
            goes_on = pc.coalesce(left, TRUE)  # not FALSE
        else:
            goes_on = pc.invert(pc.coalesce(left, FALSE))  # not TRUE
        return [(node.left, guard), (node.right, _both(guard, goes_on))]
    if (isinstance(node, Compare) and node.op != "<=>") or isinstance(node, Arith):
        first, second = (node.right, node.left) if _divides(node) else (node.left, node.right)
        valid = pc.is_valid(arrow.to_arrow_expression(first))
        return [(first, guard), (second, _both(guard, valid))]
    if isinstance(node, In):
        return _in_guards(node, guard)
    if isinstance(node, Func) and node.name == "coalesce":
        out: list[tuple[Expr, Guard]] = []
        for arg in node.args:
            out.append((arg, guard))
            guard = _both(guard, pc.is_null(arrow.to_arrow_expression(arg)))
        return out
    return [(child, guard) for child in node.children()]


def _divides(node: Expr) -> bool:
    """Spark's `/` and `%` evaluate the divisor first."""
    return isinstance(node, Arith) and node.op in "/%"


def _in_guards(node: In, guard: Guard) -> list[tuple[Expr, Guard]]:
    out: list[tuple[Expr, Guard]] = [(node.value, guard)]
    option_guard = _both(guard, pc.is_valid(arrow.to_arrow_expression(node.value)))
    for option in node.options:
        out.append((option, option_guard))
        equal = arrow.to_arrow_expression(Compare("=", node.value, option))
        option_guard = _both(option_guard, pc.invert(pc.coalesce(equal, FALSE)))
    return out
