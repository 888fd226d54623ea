"""Binding `--where` text into the typed predicate tree.

sqlglot (Spark dialect) parses the text once (syntax.py); the `Binder` then walks sqlglot's
tree and builds dvtool's own nodes (tree.py): it resolves column names against the table
schema (resolve.py: case insensitively, exact matches first, like Spark; refusing variant
columns and collated strings), checks types, inserts Spark's implicit casts (sqltypes.py) as
explicit `Cast` nodes, desugars BETWEEN / NOT IN / IS NOT NULL, and folds every subtree
without column references into a `Literal` (evaluated by the arrow code, so constants mean
exactly what they mean row by row). Everything the binder does not know is a
`PredicateError` naming the construct, so nothing is silently misread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
from sqlglot import exp

from dvtool.delta.protocol.schema import StructType
from dvtool.errors import PredicateError
from dvtool.predicate import arrow
from dvtool.predicate.casts import can_cast
from dvtool.predicate.datetime_calls import DatetimeCalls
from dvtool.predicate.resolve import ColumnResolver
from dvtool.predicate.sqltypes import (
    BINARY,
    BOOLEAN,
    INT,
    INTEGRAL_RANGE,
    NULL,
    STRING,
    SqlType,
    arithmetic_type,
    common_type,
    decimal_for_integral,
    decimal_for_literal,
    is_atomic,
    is_decimal,
    is_integral,
    is_numeric,
)
from dvtool.predicate.string_calls import StringCalls
from dvtool.predicate.syntax import (
    SUPPORTED,
    cast_type,
    describe,
    name_parts,
    node_sql,
    number_literal,
    parse_sql,
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
    Literal,
    Neg,
    Not,
    Or,
    columns,
)

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.NullSafeEQ: "<=>",
}
_ARITHMETIC: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.SafeDivide: "/",  # try_divide: `/` already gives NULL for a zero divisor
    exp.Mod: "%",
}


class Binder:
    """Turns sqlglot's tree into a typed, schema-bound predicate tree."""

    def __init__(
        self,
        schema: StructType,
        partition_columns: Sequence[str],
        column_mapping_mode: str,
        now: datetime,
    ) -> None:
        self.resolver = ColumnResolver(schema, partition_columns, column_mapping_mode)
        self.datetime = DatetimeCalls(self, now)
        self.strings = StringCalls(self)
        self._handlers: dict[type[exp.Expr], Callable[[Any], Expr]] = {
            exp.Paren: lambda n: self.bind(n.this),
            exp.Column: self._column,
            exp.Dot: self._column,
            exp.Literal: self._literal,
            exp.Boolean: lambda n: Literal(bool(n.this), BOOLEAN),
            exp.Null: lambda n: Literal(None, NULL),
            exp.HexString: lambda n: Literal(bytes.fromhex(n.this), BINARY),
            exp.Neg: self._neg,
            exp.Cast: self._cast_node,
            exp.TryCast: self._cast_node,
            exp.And: lambda n: self._logic(And, n),
            exp.Or: lambda n: self._logic(Or, n),
            exp.Not: lambda n: self.finish(Not(self._boolean(self.bind(n.this), "NOT"))),
            exp.NullSafeNEQ: lambda n: self.finish(Not(self._compare("<=>", n.this, n.expression))),
            exp.In: self._in,
            exp.Between: self._between,
            exp.Is: self._is,
            exp.Coalesce: self._coalesce,
            exp.Abs: self._abs,
            exp.Anonymous: self._anonymous,
        }
        for cls, op in _COMPARISONS.items():
            self._handlers[cls] = functools.partial(self._compare_node, op)
        for cls, op in _ARITHMETIC.items():
            self._handlers[cls] = functools.partial(self._arith, op)
        self._handlers.update(self.strings.handlers())
        self._handlers.update(self.datetime.handlers())

    def bind_predicate(self, node: exp.Expr) -> Expr:
        """The bound tree of a whole `--where` predicate, which must be boolean."""
        expr = self.bind(node)
        if expr.type == NULL:
            return Literal(None, BOOLEAN)
        if expr.type != BOOLEAN:
            raise PredicateError(
                f"the predicate must be boolean, but {node_sql(node)} is {expr.type}",
                hint="compare it with something, e.g. --where 'x + 1 > 10'",
            )
        return expr

    def bind(self, node: exp.Expr) -> Expr:
        handler = self._handlers.get(type(node))
        if handler is None:
            self.resolver.refuse_variants_in(node)
            raise PredicateError(
                f"{describe(node)} is not supported in --where: {node_sql(node)}", hint=SUPPORTED
            )
        return handler(node)

    # --- columns and literals ---------------------------------------------------------------

    def _column(self, node: exp.Expr, *, null_test: bool = False) -> Column:
        parts = name_parts(node)
        if parts is None:
            raise PredicateError(f"unsupported column reference {node_sql(node)}", hint=SUPPORTED)
        return self.resolver.resolve(parts, null_test=null_test)

    def _null_test_operand(self, node: exp.Expr) -> Expr:
        """The operand of IS [NOT] NULL / isnull(): a bare column reference there may be a
        collated string, which a NULL test reads without comparing."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, (exp.Column, exp.Dot)):
            return self._column(node, null_test=True)
        return self.bind(node)

    def _literal(self, node: exp.Literal) -> Literal:
        text = str(node.this)
        if node.is_string:
            return Literal(text, STRING)
        return number_literal(text)

    # --- logic and comparisons --------------------------------------------------------------

    def _boolean(self, expr: Expr, context: str) -> Expr:
        if expr.type == NULL:
            return Literal(None, BOOLEAN)
        if expr.type != BOOLEAN:
            raise PredicateError(f"{context} needs a boolean operand, got {expr.type}")
        return expr

    def _logic(self, cls: type[And] | type[Or], node: exp.Expr) -> Expr:
        name = "AND" if cls is And else "OR"
        left = self._boolean(self.bind(node.this), name)
        right = self._boolean(self.bind(node.expression), name)
        return self.finish(cls(left, right))

    def _compare_node(self, op: str, node: exp.Expr) -> Expr:
        return self._compare(op, node.this, node.expression)

    def _compare(self, op: str, left: exp.Expr, right: exp.Expr) -> Expr:
        return self._compare_bound(op, self.bind(left), self.bind(right))

    def _compare_bound(self, op: str, left: Expr, right: Expr) -> Expr:
        target = self._common_type([left, right], f"cannot compare {left.type} with {right.type}")
        return self.finish(Compare(op, self.cast(left, target), self.cast(right, target)))

    def _common_type(self, exprs: Sequence[Expr], message: str) -> SqlType:
        """Spark's common type of the operands (integer literals meeting decimals count with
        only the digits they have, like Spark's DecimalType.fromLiteral)."""
        # With a string among them, Spark folds the types in order as they are (`name IN
        # (1, 2.5)` is read as DECIMAL(21,1): BIGINT for the string and 1, then the decimal).
        has_decimal = any(is_decimal(e.type) for e in exprs) and all(
            e.type != STRING for e in exprs
        )
        result = NULL
        for e in exprs:
            t = _literal_decimal_type(e) if has_decimal else e.type
            if not (is_atomic(t) or t == NULL):
                raise PredicateError(f"{message}: {t} values can only be tested with IS NULL")
            common = common_type(result, t)
            if common is None:
                raise PredicateError(message)
            result = common
        return BOOLEAN if result == NULL else result

    def _in(self, node: exp.In) -> Expr:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise PredicateError(
                f"IN with a subquery is not supported: {node_sql(node)}", hint="list the values"
            )
        if not node.expressions:
            raise PredicateError(f"IN needs at least one value: {node_sql(node)}")
        value = self.bind(node.this)
        options = [self.bind(o) for o in node.expressions]
        target = self._common_type(
            [value, *options], f"cannot compare {value.type} with the IN list: {node_sql(node)}"
        )
        cast = tuple(self.cast(o, target) for o in options)
        return self.finish(In(self.cast(value, target), cast))

    def _between(self, node: exp.Between) -> Expr:
        value = self.bind(node.this)
        low = self._compare_bound(">=", value, self.bind(node.args["low"]))
        high = self._compare_bound("<=", value, self.bind(node.args["high"]))
        return self.finish(And(low, high))

    def _is(self, node: exp.Is) -> Expr:
        target = node.expression
        if isinstance(target, exp.Null):
            return self.finish(IsNull(self._null_test_operand(node.this)))
        if isinstance(target, exp.Boolean):
            child = self._boolean(self.bind(node.this), "IS TRUE/FALSE")
            return self.finish(IsBool(child, bool(target.this)))
        raise PredicateError(f"unsupported IS test: {node_sql(node)}", hint=SUPPORTED)

    # --- arithmetic -------------------------------------------------------------------------

    def _neg(self, node: exp.Neg) -> Expr:
        if isinstance(node.this, exp.Literal) and not node.this.is_string:
            return number_literal("-" + str(node.this.this))  # Spark reads -5 as one literal
        child = self.bind(node.this)
        if child.type == NULL:
            return child
        if not is_numeric(child.type):
            raise PredicateError(f"unary minus needs a number, got {child.type}: {node_sql(node)}")
        return self.finish(Neg(child))

    def _arith(self, op: str, node: exp.Expr) -> Expr:
        if op in "+-":
            dated = self.datetime.arith(op, node)
            if dated is not None:
                return dated
        left, right = self._string_operands(self.bind(node.this), self.bind(node.expression))
        if is_decimal(left.type) or is_decimal(right.type):
            left = self.cast(left, _literal_decimal_type(left))
            right = self.cast(right, _literal_decimal_type(right))
        result = arithmetic_type(op, left.type, right.type)
        if result is None:
            raise PredicateError(_arith_error(op, left.type, right.type, node))
        if left.type == NULL or right.type == NULL:
            return Literal(None, result)
        if op in "+-*" and is_decimal(result):
            left, right = self._decimal_operand(left), self._decimal_operand(right)
        else:
            left, right = self.cast(left, result), self.cast(right, result)
        return self.finish(Arith(op, left, right, result))

    def _string_operands(self, left: Expr, right: Expr) -> tuple[Expr, Expr]:
        """Spark's ANSI promotion of a string operand of arithmetic with a number: read as a
        BIGINT beside an integral type, else as a DOUBLE (`name + 1`, `name * 1.5`)."""
        for a, b in ((left, right), (right, left)):
            if a.type == STRING and is_numeric(b.type):
                promoted = common_type(a.type, b.type)
                assert promoted is not None
                a_cast = self.cast(a, promoted)
                return (a_cast, b) if a is left else (b, a_cast)
        return left, right

    def _decimal_operand(self, expr: Expr) -> Expr:
        if is_integral(expr.type):
            return self.cast(expr, _literal_decimal_type(expr, for_column=True))
        return expr

    # --- casts ------------------------------------------------------------------------------

    def _cast_node(self, node: exp.Cast) -> Expr:
        target = cast_type(node.args["to"])
        child = self.bind(node.this)
        if child.type != NULL and not can_cast(child.type, target):
            raise PredicateError(f"cannot CAST {child.type} to {target}: {node_sql(node)}")
        return self.cast(child, target, strict=not node.args.get("safe"))

    def cast(self, expr: Expr, target: SqlType, *, strict: bool = True) -> Expr:
        """`expr` as type `target`. As in ANSI Spark, a value that does not convert is an
        error unless `strict` is off (TRY_CAST): now for a constant; for a string read from
        the table, when the rows are evaluated (`Cast.strict`, see ansi.py)."""
        if expr.type == target:
            return expr
        if expr.type != NULL and not can_cast(expr.type, target):
            raise PredicateError(f"cannot convert {expr.type} to {target}")
        if isinstance(expr, Literal) and is_integral(expr.type) and is_integral(target):
            return self._integral_literal(expr, target, strict)
        cast = Cast(expr, target, strict=strict and expr.type == STRING and target != BINARY)
        if not isinstance(expr, Literal):
            return self.finish(cast)
        folded = self._fold(cast)
        if strict and folded.value is None and expr.value is not None:
            shown = expr.value if isinstance(expr.value, str) else repr(expr.value)
            raise PredicateError(f"cannot read {shown!r} as {target}")
        return folded

    def _integral_literal(self, expr: Literal, target: SqlType, strict: bool) -> Literal:
        """An integer constant as another integer type (the common case in long IN lists)."""
        lo, hi = INTEGRAL_RANGE[target]
        if expr.value is None or lo <= expr.value <= hi:
            return Literal(expr.value, target)
        if strict:
            raise PredicateError(f"cannot read {expr.value} as {target}")
        return Literal(None, target)

    # --- functions --------------------------------------------------------------------------

    def constant_string(self, expr: Expr, context: str) -> str:
        if not (isinstance(expr, Literal) and isinstance(expr.value, str)):
            raise PredicateError(f"{context} must be a string constant")
        return expr.value

    def constant_int(self, expr: Expr, context: str) -> Literal:
        if not (isinstance(expr, Literal) and is_integral(expr.type) and expr.value is not None):
            raise PredicateError(f"{context} must be an integer constant")
        return Literal(int(expr.value), INT)

    def _coalesce(self, node: exp.Coalesce) -> Expr:
        bound = [self.bind(n) for n in [node.this, *node.expressions]]
        message = f"coalesce() arguments have no common type: {node_sql(node)}"
        target = self._common_type(bound, message)
        if all(e.type == NULL for e in bound):
            return Literal(None, NULL)
        return self.finish(Func("coalesce", tuple(self.cast(e, target) for e in bound), target))

    def _abs(self, node: exp.Abs) -> Expr:
        arg = self.bind(node.this)
        if not is_numeric(arg.type):
            raise PredicateError(f"abs() needs a number, got {arg.type}")
        return self.finish(Func("abs", (arg,), arg.type))

    def _anonymous(self, node: exp.Anonymous) -> Expr:
        name = str(node.this).lower()
        if name in ("try_mod", "try_remainder") and len(node.expressions) == 2:
            return self._arith(
                "%", exp.Mod(this=node.expressions[0], expression=node.expressions[1])
            )
        if name in ("regexp", "regexp_like") and len(node.expressions) == 2:
            this, pattern = node.expressions
            return self.strings.rlike(exp.RegexpLike(this=this, expression=pattern))
        dated = self.datetime.call(name, node.expressions)
        if dated is not None:
            return dated
        if name in ("isnull", "isnotnull") and len(node.expressions) == 1:
            test = IsNull(self._null_test_operand(node.expressions[0]))
            return self.finish(test if name == "isnull" else Not(test))
        self.resolver.refuse_variants_in(node)
        raise PredicateError(f"function {name}() is not supported in --where", hint=SUPPORTED)

    # --- folding ----------------------------------------------------------------------------

    def finish(self, expr: Expr) -> Expr:
        """`expr`, or the Literal it always equals when it references no columns.

        As Spark's BooleanSimplification, `x AND FALSE` is FALSE and `x OR TRUE` is TRUE
        without evaluating x (so a strict cast in x never fails, see ansi.py)."""
        if isinstance(expr, (And, Or)):
            absorbing = isinstance(expr, Or)
            for side in (expr.left, expr.right):
                if isinstance(side, Literal) and side.value is absorbing:
                    return Literal(absorbing, BOOLEAN)
        if isinstance(expr, Literal) or columns(expr):
            return expr
        return self._fold(expr)

    def _fold(self, expr: Expr) -> Literal:
        try:
            return arrow.fold(expr)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            reason = str(e).splitlines()[0]
            raise PredicateError(f"cannot evaluate a constant in --where: {reason}") from None


def _literal_decimal_type(expr: Expr, *, for_column: bool = False) -> SqlType:
    """The decimal type an integral operand meeting a decimal is read as (its own type for
    other operands): the literal's digits for constants, Spark's DecimalType.forType else."""
    if not is_integral(expr.type):
        return expr.type
    if isinstance(expr, Literal) and expr.value is not None:
        return decimal_for_literal(int(expr.value))
    if for_column:
        return decimal_for_integral(expr.type)
    return expr.type


def _arith_error(op: str, a: SqlType, b: SqlType, node: exp.Expr) -> str:
    if op == "/" and (is_decimal(a) or is_decimal(b)):
        return (
            f"decimal division is not supported: {node_sql(node)}; CAST the operands to DOUBLE "
            "(or write the literal as 1.5D)"
        )
    if op == "%" and is_numeric(a) and is_numeric(b):
        return f"% is supported on integers only: {node_sql(node)}"
    if is_numeric(a) and is_numeric(b):
        return f"decimal arithmetic beyond 76 digits is not supported: {node_sql(node)}"
    return f"cannot apply {op} to {a} and {b}: {node_sql(node)}"


def bind(
    sql: str,
    schema: StructType,
    partition_columns: Sequence[str],
    column_mapping_mode: str,
    now: datetime,
) -> Expr:
    """Parse and bind a `--where` predicate; every problem is a PredicateError. `now` is
    what current_date() and current_timestamp() mean (an aware UTC datetime)."""
    binder = Binder(schema, partition_columns, column_mapping_mode, now)
    return binder.bind_predicate(parse_sql(sql))
