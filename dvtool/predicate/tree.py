"""dvtool's own typed expression tree for `--where` predicates, and a visitor base class.

`parse.py` builds the tree from SQL text, resolving columns against the table schema and
making every implicit Spark cast explicit (as `Cast` nodes), so each node's operands already
have the types the operation needs. Literal-only subtrees are folded into `Literal`s. BETWEEN,
NOT IN, IS NOT NULL and friends are desugared into the nodes below, so the three consumers
(file skipping, arrow evaluation, Spark SQL text) each handle one small set of node kinds.

Nodes are frozen dataclasses: equal trees compare equal, which the Spark SQL round trip tests
rely on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from dvtool.predicate.sqltypes import BOOLEAN, SqlType

T = TypeVar("T")

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=", "<=>")


class Expr:
    """A node of the predicate tree; `type` is its SQL result type."""

    __slots__ = ()

    @property
    def type(self) -> SqlType:
        raise NotImplementedError

    def children(self) -> tuple[Expr, ...]:
        return ()


@dataclass(frozen=True)
class Column(Expr):
    """A column or nested struct field: logical `path` as in the schema, `physical` path as in
    parquet files and statistics, and whether it is a (top-level) partition column.

    `min_max` is False when the column's min/max statistics must not bound its values (a type
    change since older files were written, or a collated string): skipping then reads only
    its nullCount.
    """

    path: tuple[str, ...]
    physical: tuple[str, ...]
    sql_type: SqlType
    partition: bool = False
    min_max: bool = True

    @property
    def type(self) -> SqlType:
        return self.sql_type


@dataclass(frozen=True)
class Literal(Expr):
    """A constant: None for NULL, else int, float, Decimal, str, bytes, bool, date, or
    datetime (timezone-aware UTC for `timestamp`, naive for `timestamp_ntz`)."""

    value: Any
    sql_type: SqlType

    @property
    def type(self) -> SqlType:
        return self.sql_type


@dataclass(frozen=True)
class Compare(Expr):
    """`left op right`, op one of COMPARISONS; both sides have the same type."""

    op: str
    left: Expr
    right: Expr

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class And(Expr):
    left: Expr
    right: Expr

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Or(Expr):
    left: Expr
    right: Expr

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Not(Expr):
    child: Expr

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)


@dataclass(frozen=True)
class In(Expr):
    """`value IN (options...)`; all of the same type. NOT IN is `Not(In(...))`."""

    value: Expr
    options: tuple[Expr, ...]

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.value, *self.options)


@dataclass(frozen=True)
class IsNull(Expr):
    """`child IS NULL` (never NULL itself). IS NOT NULL is `Not(IsNull(...))`."""

    child: Expr

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)


@dataclass(frozen=True)
class IsBool(Expr):
    """`child IS TRUE` / `child IS FALSE` (never NULL). IS NOT ... is `Not(IsBool(...))`."""

    child: Expr
    value: bool

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)


@dataclass(frozen=True)
class Like(Expr):
    """`child LIKE pattern ESCAPE escape` (ILIKE when `ignore_case`); the pattern is a constant."""

    child: Expr
    pattern: str
    escape: str = "\\"
    ignore_case: bool = False

    @property
    def type(self) -> SqlType:
        return BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)


@dataclass(frozen=True)
class Arith(Expr):
    """`left op right` for op in `+ - * / %`, with result type `sql_type`."""

    op: str
    left: Expr
    right: Expr
    sql_type: SqlType

    @property
    def type(self) -> SqlType:
        return self.sql_type

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Neg(Expr):
    """Unary minus."""

    child: Expr

    @property
    def type(self) -> SqlType:
        return self.child.type

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)


@dataclass(frozen=True)
class Cast(Expr):
    """`CAST(child AS sql_type)`, explicit or implicit; NULL where the value does not convert,
    unless `strict`.

    `strict` marks Spark's ANSI CAST of a string (explicit, or implicit as in `name > 5`): a
    string that is not a valid value of the target type fails the command (Spark's
    CAST_INVALID_INPUT, see ansi.py) instead of becoming NULL. TRY_CAST and casts from other
    types are never strict.
    """

    child: Expr
    sql_type: SqlType
    strict: bool = False

    @property
    def type(self) -> SqlType:
        return self.sql_type

    def children(self) -> tuple[Expr, ...]:
        return (self.child,)


@dataclass(frozen=True)
class Func(Expr):
    """A scalar function call by its Spark name (`lower`, `substring`, `year`, ...).

    Arguments that must be constants (substring positions, trim characters, prefixes) are
    `Literal` nodes in `args`.
    """

    name: str
    args: tuple[Expr, ...]
    sql_type: SqlType

    @property
    def type(self) -> SqlType:
        return self.sql_type

    def children(self) -> tuple[Expr, ...]:
        return self.args


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of the tree, parents before children."""
    yield expr
    for child in expr.children():
        yield from walk(child)


def columns(expr: Expr) -> list[Column]:
    """The column references in the tree, in order of appearance (with repeats)."""
    return [node for node in walk(expr) if isinstance(node, Column)]


class Visitor(Generic[T]):
    """Dispatches `visit(node)` to the `visit_<kind>` method for the node's class.

    Methods recurse into children themselves by calling `visit`, so a visitor can decide
    evaluation order and short-circuit (the skipping visitor does).
    """

    _methods: ClassVar[dict[type, str]] = {
        Column: "visit_column",
        Literal: "visit_literal",
        Compare: "visit_compare",
        And: "visit_and",
        Or: "visit_or",
        Not: "visit_not",
        In: "visit_in",
        IsNull: "visit_is_null",
        IsBool: "visit_is_bool",
        Like: "visit_like",
        Arith: "visit_arith",
        Neg: "visit_neg",
        Cast: "visit_cast",
        Func: "visit_func",
    }

    def visit(self, node: Expr) -> T:
        method: Callable[[Any], T] = getattr(self, self._methods[type(node)])
        return method(node)

    def visit_column(self, node: Column) -> T:
        raise NotImplementedError

    def visit_literal(self, node: Literal) -> T:
        raise NotImplementedError

    def visit_compare(self, node: Compare) -> T:
        raise NotImplementedError

    def visit_and(self, node: And) -> T:
        raise NotImplementedError

    def visit_or(self, node: Or) -> T:
        raise NotImplementedError

    def visit_not(self, node: Not) -> T:
        raise NotImplementedError

    def visit_in(self, node: In) -> T:
        raise NotImplementedError

    def visit_is_null(self, node: IsNull) -> T:
        raise NotImplementedError

    def visit_is_bool(self, node: IsBool) -> T:
        raise NotImplementedError

    def visit_like(self, node: Like) -> T:
        raise NotImplementedError

    def visit_arith(self, node: Arith) -> T:
        raise NotImplementedError

    def visit_neg(self, node: Neg) -> T:
        raise NotImplementedError

    def visit_cast(self, node: Cast) -> T:
        raise NotImplementedError

    def visit_func(self, node: Func) -> T:
        raise NotImplementedError
