"""Evaluating predicates on arrow data: the tree as a pyarrow compute expression.

The expression reads columns by their physical names (`pc.field("a", "b")` for struct fields)
and follows Spark SQL semantics, including three-valued logic: the engine deletes the rows
where it is TRUE (`Table.filter` drops NULL). Beyond arrow's defaults this needs:

- floating point comparisons where NaN equals NaN and is greater than every other number;
- `/` and `%` returning NULL for a zero divisor (Spark's try_divide and try_mod; ANSI Spark
  fails the statement instead), `%` taking the sign of the dividend;
- integer `+ - *`, unary minus and abs raising `pyarrow.ArrowInvalid` on overflow, like ANSI
  Spark's ARITHMETIC_OVERFLOW error;
- LIKE translated to an anchored RE2 regex with `.` matching newlines, as Spark does;
- every column reference cast to its table type, so partition columns materialized as
  `int64` or `large_string`, dictionary-encoded strings and timestamps in other units all
  compare correctly; the cast is a safe one, so a value the table's type cannot hold (a
  nanosecond remainder, an integer out of range) fails instead of comparing as a wrapped
  or truncated value (the engines hand over columns conformed exactly already:
  `dvtool.delta.protocol.file_schema`, INT96 read as microseconds).

Nothing here imports pandas, which pyarrow does (when it is installed, 0.1-0.2 s) the first
time it converts a Python object: every constant is a pyarrow scalar built by
`dvtool.arrays.arrow_values` (`casts.constant`), and expressions are evaluated by acero's
compiled module `pyarrow._acero`, not by `pyarrow.acero` or `Table.filter(expression)`,
which import `pyarrow.dataset`, whose import converts a Python `True`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

# Not `pyarrow.acero`: it imports pyarrow.dataset, and so pandas (see the module docstring).
from pyarrow import _acero as acero

from dvtool.arrays import arrow_values
from dvtool.predicate import casts, datetime_arrow, regex
from dvtool.predicate.casts import FALSE, constant, null_of
from dvtool.predicate.sqltypes import (
    BINARY,
    BOOLEAN,
    INT,
    INTERVAL_MICROS,
    INTERVAL_MONTHS,
    SqlType,
    decimal,
    exact_decimal_result,
    is_atomic,
    is_decimal,
    is_floating,
    to_arrow,
)
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

V = TypeVar("V")

_REGEX_SPECIAL = set("\\.^$|?*+()[]{}")

_COMPARE: dict[str, Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
_SWAPPED = {">": "<", ">=": "<="}
INTERVALS = (INTERVAL_MONTHS, INTERVAL_MICROS)
_CHECKED = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}


def like_regex(pattern: str, escape: str) -> str:
    """The anchored regex for a Spark LIKE pattern; ValueError if the escape is misused.

    As in Spark, the escape character may only precede `_`, `%` or itself.
    """
    out = ["(?s)^"]
    chars = iter(pattern)
    for c in chars:
        if c == escape:
            following = next(chars, None)
            if following not in ("_", "%", escape):
                where = "at the end" if following is None else f"before {following!r}"
                raise ValueError(f"the escape character {escape!r} is not allowed {where}")
            out.append(_regex_literal(following))
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(_regex_literal(c))
    out.append("$")
    return "".join(out)


def like_prefix(pattern: str, escape: str) -> str | None:
    """The prefix P when the LIKE pattern means "starts with P" (`abc%`), else None."""
    prefix: list[str] = []
    chars = iter(pattern)
    for c in chars:
        if c == escape:
            prefix.append(next(chars, ""))
        elif c == "%":
            rest = "".join(chars)
            return "".join(prefix) if rest.strip("%") == "" else None
        elif c == "_":
            return None
        else:
            prefix.append(c)
    return None


def _regex_literal(c: str) -> str:
    return "\\" + c if c in _REGEX_SPECIAL else c


def _null_bool() -> pc.Expression:
    return null_of(BOOLEAN)


def _both_valid(a: pc.Expression, b: pc.Expression) -> pc.Expression:
    return pc.and_kleene(pc.is_valid(a), pc.is_valid(b))


def _float_equal(a: pc.Expression, b: pc.Expression) -> pc.Expression:
    """Equality where NaN equals NaN (and -0.0 equals 0.0), for non-NULL operands."""
    return pc.or_kleene(pc.equal(a, b), pc.and_kleene(pc.is_nan(a), pc.is_nan(b)))


def _float_compare(op: str, a: pc.Expression, b: pc.Expression) -> pc.Expression:
    """Spark's ordering of floating point numbers: NaN is equal to itself and above all."""
    if op in _SWAPPED:
        return _float_compare(_SWAPPED[op], b, a)
    if op in ("=", "!="):
        result = _float_equal(a, b)
        result = pc.invert(result) if op == "!=" else result
    elif op == "<":
        result = pc.or_kleene(pc.less(a, b), pc.and_kleene(pc.invert(pc.is_nan(a)), pc.is_nan(b)))
    else:
        result = pc.or_kleene(pc.less_equal(a, b), pc.is_nan(b))
    return pc.if_else(_both_valid(a, b), result, _null_bool())


def _null_safe_equal(a: pc.Expression, b: pc.Expression, floating: bool) -> pc.Expression:
    equal = _float_equal(a, b) if floating else pc.equal(a, b)
    return pc.if_else(_both_valid(a, b), equal, pc.and_kleene(pc.is_null(a), pc.is_null(b)))


def _nonzero(x: pc.Expression, t: SqlType) -> pc.Expression:
    """`x`, with zero replaced by NULL (so dividing by it gives NULL)."""
    zero = constant(0, to_arrow(t))
    return pc.if_else(pc.equal(x, zero), null_of(t), x)


def _remainder(a: pc.Expression, b: pc.Expression, t: SqlType) -> pc.Expression:
    """Integer `a % b` with the sign of `a` (Java's remainder); NULL when `b` is 0."""
    divisor = _nonzero(b, t)
    result = pc.subtract(a, pc.multiply(pc.divide(a, divisor), divisor))
    minus_one = constant(-1, to_arrow(t))
    zero = pc.multiply(a, constant(0, to_arrow(t)))  # 0, or NULL where `a` is NULL
    return pc.if_else(pc.equal(divisor, minus_one), zero, result)


def _wide_decimal_arith(node: Arith, a: pc.Expression, b: pc.Expression) -> pc.Expression:
    """Decimal `+ - *` whose exact result exceeds 38 digits: computed in decimal256, then
    rounded half up to the result scale Spark chose; NULL if it still does not fit."""
    ta, tb, t = node.left.type, node.right.type, node.type
    wide_a = a.cast(pa.decimal256(ta.precision, ta.scale))
    wide_b = b.cast(pa.decimal256(tb.precision, tb.scale))
    result = _CHECKED[node.op](wide_a, wide_b)
    precision, scale = exact_decimal_result(node.op, ta, tb)
    if t.scale < scale:
        # not pc.round: pyarrow rounds wrongly near 2**63 and 2**64 (casts.rounded_half_up)
        result = casts.rounded_half_up(result, decimal(precision, scale), t.scale)
        precision, scale = min(precision - scale + 1 + t.scale, 76), t.scale
    lo, hi = casts.integer_digit_limit(scale, t.precision - t.scale)
    fits = casts.decimal_between(result, scale, lo, hi)
    held = pa.decimal256(precision, scale)
    return pc.if_else(fits, result.cast(held), constant(None, held)).cast(to_arrow(t), safe=False)


class ArrowVisitor(Visitor[pc.Expression]):
    """Builds the pyarrow compute expression of a predicate tree."""

    def visit_column(self, node: Column) -> pc.Expression:
        field = pc.field(*node.physical)
        return field.cast(to_arrow(node.type), safe=True) if is_atomic(node.type) else field

    def visit_literal(self, node: Literal) -> pc.Expression:
        return constant(node.value, to_arrow(node.type))

    def visit_compare(self, node: Compare) -> pc.Expression:
        left, right = self.visit(node.left), self.visit(node.right)
        floating = is_floating(node.left.type)
        if node.op == "<=>":
            return _null_safe_equal(left, right, floating)
        if floating:
            return _float_compare(node.op, left, right)
        return _COMPARE[node.op](left, right)

    def visit_and(self, node: And) -> pc.Expression:
        return pc.and_kleene(self.visit(node.left), self.visit(node.right))

    def visit_or(self, node: Or) -> pc.Expression:
        return pc.or_kleene(self.visit(node.left), self.visit(node.right))

    def visit_not(self, node: Not) -> pc.Expression:
        return pc.invert(self.visit(node.child))

    def visit_in(self, node: In) -> pc.Expression:
        """Kleene OR of the equalities: TRUE on a match, else NULL if the value or any option
        is NULL, else FALSE. Non-NULL literal options use one hash lookup (except for floating
        point, where NaN and -0.0 need Spark's equality)."""
        value = self.visit(node.value)
        floating = is_floating(node.value.type)
        literals = [o for o in node.options if isinstance(o, Literal)]
        constants = [o.value for o in literals if o.value is not None]
        parts: list[pc.Expression] = []
        if constants and not floating:
            value_set = arrow_values.combined(
                arrow_values.array(constants, to_arrow(node.value.type))
            )
            parts.append(
                pc.if_else(pc.is_valid(value), pc.is_in(value, value_set=value_set), _null_bool())
            )
        for option in node.options:
            if isinstance(option, Literal) and not (floating and option.value is not None):
                continue
            parts.append(self.visit(Compare("=", node.value, option)))
        if any(o.value is None for o in literals):
            parts.append(_null_bool())
        return functools.reduce(pc.or_kleene, parts)

    def visit_is_null(self, node: IsNull) -> pc.Expression:
        return pc.is_null(self.visit(node.child))

    def visit_is_bool(self, node: IsBool) -> pc.Expression:
        child = self.visit(node.child)
        matches = child if node.value else pc.invert(child)
        return pc.coalesce(matches, FALSE)

    def visit_like(self, node: Like) -> pc.Expression:
        anchored = like_regex(node.pattern, node.escape)
        return pc.match_substring_regex(
            self.visit(node.child), pattern=anchored, ignore_case=node.ignore_case
        )

    def visit_arith(self, node: Arith) -> pc.Expression:
        if isinstance(node.right, Literal) and node.right.type in INTERVALS:
            return datetime_arrow.plus_interval(self.visit(node.left), node.right, node.type)
        left, right = self.visit(node.left), self.visit(node.right)
        if node.op == "/":
            return pc.divide(left, _nonzero(right, node.type))
        if node.op == "%":
            return _remainder(left, right, node.type)
        if is_decimal(node.type):
            precision, _ = exact_decimal_result(node.op, node.left.type, node.right.type)
            if precision > node.type.precision:
                return _wide_decimal_arith(node, left, right)
        return _CHECKED[node.op](left, right).cast(to_arrow(node.type))

    def visit_neg(self, node: Neg) -> pc.Expression:
        return pc.negate_checked(self.visit(node.child))

    def visit_cast(self, node: Cast) -> pc.Expression:
        return casts.cast_expr(self.visit(node.child), node.child.type, node.type)

    def visit_func(self, node: Func) -> pc.Expression:
        dated = datetime_arrow.FUNCTIONS.get(node.name)
        if dated is not None:
            return dated([self.visit(a) for a in node.args], node)
        method: Callable[[Func], pc.Expression] = getattr(self, "_func_" + node.name)
        return method(node)

    def _arg(self, node: Func, i: int = 0) -> pc.Expression:
        return self.visit(node.args[i])

    def _func_lower(self, node: Func) -> pc.Expression:
        return pc.utf8_lower(self._arg(node))

    def _func_upper(self, node: Func) -> pc.Expression:
        return pc.utf8_upper(self._arg(node))

    def _func_length(self, node: Func) -> pc.Expression:
        arg = self._arg(node)
        length = pc.binary_length(arg) if node.args[0].type == BINARY else pc.utf8_length(arg)
        return length.cast(to_arrow(INT))

    def _func_substring(self, node: Func) -> pc.Expression:
        """Spark's 1-based `substring(s, pos[, len])`: pos 0 acts as 1, a negative pos counts
        from the end, a negative len gives ''."""
        pos = _literal_arg(node, 1, int)
        length = _literal_arg(node, 2, int) if len(node.args) > 2 else None
        stop: int | None
        if pos >= 0:
            start = max(pos - 1, 0)
            stop = None if length is None else start + max(length, 0)
        else:
            start = pos
            stop = None if length is None or pos + length >= 0 else pos + length
        return pc.utf8_slice_codeunits(self._arg(node), start, stop)

    def _trim(self, node: Func, fn: Callable[..., pc.Expression]) -> pc.Expression:
        characters = _literal_arg(node, 1, str) if len(node.args) > 1 else " "
        return fn(self._arg(node), characters=characters)

    def _func_trim(self, node: Func) -> pc.Expression:
        return self._trim(node, pc.utf8_trim)

    def _func_ltrim(self, node: Func) -> pc.Expression:
        return self._trim(node, pc.utf8_ltrim)

    def _func_rtrim(self, node: Func) -> pc.Expression:
        return self._trim(node, pc.utf8_rtrim)

    def _func_concat(self, node: Func) -> pc.Expression:
        args = [self.visit(a) for a in node.args]
        return pc.binary_join_element_wise(*args, constant("", pa.string()))

    def _func_coalesce(self, node: Func) -> pc.Expression:
        return pc.coalesce(*[self.visit(a) for a in node.args])

    def _func_abs(self, node: Func) -> pc.Expression:
        return pc.abs_checked(self._arg(node))

    def _func_startswith(self, node: Func) -> pc.Expression:
        return pc.starts_with(self._arg(node), pattern=_literal_arg(node, 1, str))

    def _func_endswith(self, node: Func) -> pc.Expression:
        return pc.ends_with(self._arg(node), pattern=_literal_arg(node, 1, str))

    def _func_contains(self, node: Func) -> pc.Expression:
        return pc.match_substring(self._arg(node), pattern=_literal_arg(node, 1, str))

    def _func_rlike(self, node: Func) -> pc.Expression:
        pattern = regex.java_to_re2(_literal_arg(node, 1, str))
        return pc.match_substring_regex(self._arg(node), pattern=pattern)


def _literal_arg(node: Func, i: int, kind: type[V]) -> V:
    """The constant argument `i` of a function call (the binder guarantees its kind)."""
    arg = node.args[i]
    assert isinstance(arg, Literal) and isinstance(arg.value, kind)
    return arg.value


def to_arrow_expression(expr: Expr) -> pc.Expression:
    """The pyarrow compute expression evaluating `expr` row by row."""
    return ArrowVisitor().visit(expr)


def evaluate(exprs: Sequence[pc.Expression], table: pa.Table) -> list[pa.ChunkedArray]:
    """Evaluate expressions over a table (an acero projection), one column per expression."""
    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
    project = acero.Declaration("project", acero.ProjectNodeOptions(list(exprs)))
    result = acero.Declaration.from_sequence([source, project]).to_table(use_threads=False)
    return list(result.columns)


def filter_table(table: pa.Table, expr: pc.Expression) -> pa.Table:
    """The rows of `table` where the boolean `expr` is TRUE (NULL drops the row).

    What `table.filter(expr)` does (the same acero plan: a table source and a filter node),
    without the pandas import of `pyarrow.acero` (see the module docstring), and all of it on
    the calling thread. On arrow's thread pool the plan releases its batches after `to_table`
    has returned (apache/arrow#36389); a batch holding a numpy-backed column (the scan's row
    positions) then takes the GIL on an arrow thread, and if that happens while the
    interpreter exits the process aborts ("terminate called without an active exception",
    exit 134, after a command that succeeded). The scan runs its own threads, one plan each.
    """
    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
    keep = acero.Declaration("filter", acero.FilterNodeOptions(expr))
    result: pa.Table = acero.Declaration.from_sequence([source, keep]).to_table(use_threads=False)
    return result


_ONE_ROW = pa.Table.from_arrays([arrow_values.array([0], pa.int64())], names=["row"])


def fold(expr: Expr) -> Literal:
    """Evaluate a tree without column references to the Literal it always yields."""
    (column,) = evaluate([to_arrow_expression(expr)], _ONE_ROW)
    return Literal(arrow_values.as_py(column[0]), expr.type)
