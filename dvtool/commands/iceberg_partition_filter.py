"""A `--where` predicate as a filter on Iceberg partitions, by inclusive projection.

Iceberg Spark's `rewrite_position_delete_files(where => ...)` "converts the filter to a
partition filter with an inclusive projection": per partition spec,
`Projections.inclusive(spec).project(filter)` is evaluated on each delete file's partition,
and any file that may hold deletes of matching rows is chosen. dvtool does the same with
pyiceberg's `inclusive_projection` and `expression_evaluator`, on a pyiceberg expression
translated from dvtool's own predicate tree (`dvtool.predicate.tree`).

The translation only has to be INCLUSIVE: whenever the SQL predicate is TRUE for a row, the
pyiceberg expression is true for it too (a partition that may hold a matching row is never
left out). Comparisons, IN and IS NULL of a column against constants translate one to one;
anything else (functions, arithmetic, LIKE, float columns, ...) is approximated by
`AlwaysTrue`: an OR with such a side is `AlwaysTrue`, an AND keeps its other side, a NOT
over anything approximated is `AlwaysTrue`. A NOT over an exact child is safe because an
exact translation is also false wherever the SQL predicate is FALSE (a NULL SQL result may
translate to either: NOT of it is NULL, which matches nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pyiceberg import expressions as ie
from pyiceberg.expressions.literals import literal
from pyiceberg.expressions.visitors import bind, expression_evaluator, inclusive_projection
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, FloatType, NestedField, StructType

from dvtool.predicate.sqltypes import SqlType
from dvtool.predicate.tree import And, Cast, Column, Compare, Expr, In, IsNull, Literal, Not, Or

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

    from dvtool.predicate import Predicate

PartitionMatch = Callable[[int, Sequence[Any]], bool]
"""(spec id, partition values) -> whether the partition may hold a row the filter matches."""

_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "<=>": "<=>"}
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


@dataclass(frozen=True)
class _Translated:
    """A pyiceberg expression; `exact` when it is true exactly where the SQL predicate is
    TRUE and false wherever it is FALSE (else it is only true wherever the SQL is TRUE)."""

    expression: ie.BooleanExpression
    exact: bool


_ANYTHING = _Translated(ie.AlwaysTrue(), exact=False)


def partition_match(metadata: TableMetadata, predicate: Predicate) -> PartitionMatch:
    """Whether a file of spec `spec_id` with `partition` values may hold a row `predicate`
    matches (Iceberg Spark's inclusive projection of the filter, per spec)."""
    schema = metadata.schema()
    row_filter = iceberg_expression(predicate.expr, schema)
    specs = metadata.specs()
    evaluators: dict[int, Callable[[Record], bool] | None] = {}

    def evaluator(spec_id: int) -> Callable[[Record], bool] | None:
        if spec_id not in evaluators:
            evaluators[spec_id] = _spec_evaluator(schema, specs.get(spec_id), row_filter)
        return evaluators[spec_id]

    def matches(spec_id: int, partition: Sequence[Any]) -> bool:
        evaluate = evaluator(spec_id)
        return evaluate is None or evaluate(Record(*partition))

    return matches


def _spec_evaluator(
    schema: Schema, spec: Any, row_filter: ie.BooleanExpression
) -> Callable[[Record], bool] | None:
    """The partition evaluator of one spec; None (every partition may match) for a spec
    pyiceberg cannot project against the current schema (a source column dropped since)."""
    if spec is None:
        return None
    try:
        projected = inclusive_projection(schema, spec, True)(row_filter)
        partition_schema = Schema(*spec.partition_type(schema).fields)
        return expression_evaluator(partition_schema, projected, True)
    except (ValueError, KeyError, TypeError):
        return None


def iceberg_expression(expr: Expr, schema: Schema) -> ie.BooleanExpression:
    """`expr` as an inclusive pyiceberg row filter over `schema` (see the module docstring)."""
    return _translate(expr, schema).expression


def _translate(expr: Expr, schema: Schema) -> _Translated:
    if isinstance(expr, And):
        left, right = _translate(expr.left, schema), _translate(expr.right, schema)
        return _Translated(ie.And(left.expression, right.expression), left.exact and right.exact)
    if isinstance(expr, Or):
        left, right = _translate(expr.left, schema), _translate(expr.right, schema)
        if not (left.exact and right.exact):
            return _ANYTHING if _is_anything(left) or _is_anything(right) else _or(left, right)
        return _or(left, right)
    if isinstance(expr, Not):
        child = _translate(expr.child, schema)
        return _Translated(ie.Not(child.expression), True) if child.exact else _ANYTHING
    return _leaf(expr, schema)


def _or(left: _Translated, right: _Translated) -> _Translated:
    return _Translated(ie.Or(left.expression, right.expression), left.exact and right.exact)


def _is_anything(t: _Translated) -> bool:
    return isinstance(t.expression, ie.AlwaysTrue) and not t.exact


def _leaf(expr: Expr, schema: Schema) -> _Translated:
    """A comparison, IN or IS NULL of a column against constants; anything else: AlwaysTrue."""
    if isinstance(expr, IsNull):
        name = _column(expr.child, schema)
        return _bound(ie.IsNull(term=ie.Reference(name)), schema) if name is not None else _ANYTHING
    if isinstance(expr, In):
        name = _column(expr.value, schema)
        values = [o.value for o in expr.options if isinstance(o, Literal)]
        if name is None or len(values) != len(expr.options) or None in values:
            return _ANYTHING
        options = {literal(_value(v, expr.value.type)) for v in values}
        return _bound(ie.In(term=ie.Reference(name), values=options), schema)
    if isinstance(expr, Compare):
        return _comparison(expr, schema)
    return _ANYTHING


def _comparison(expr: Compare, schema: Schema) -> _Translated:
    op, column, constant = expr.op, expr.left, expr.right
    if isinstance(column, Literal):
        op, column, constant = _FLIPPED[op], expr.right, expr.left
    name = _column(column, schema)
    if name is None or not isinstance(constant, Literal):
        return _ANYTHING
    if constant.value is None:
        return _bound(ie.IsNull(term=ie.Reference(name)), schema) if op == "<=>" else _ANYTHING
    value = _value(constant.value, constant.type)
    built: ie.BooleanExpression = {
        "=": ie.EqualTo,
        "<=>": ie.EqualTo,
        "!=": ie.NotEqualTo,
        "<": ie.LessThan,
        "<=": ie.LessThanOrEqual,
        ">": ie.GreaterThan,
        ">=": ie.GreaterThanOrEqual,
    }[op](name, value)
    return _bound(built, schema)


def _value(value: Any, sql_type: SqlType) -> Any:
    """A literal as pyiceberg takes it: a decimal with exactly its type's scale (pyiceberg
    binds no other; one that does not fit keeps its own and so fails to bind)."""
    if not isinstance(value, Decimal) or sql_type.name != "decimal":
        return value
    scaled = value.quantize(Decimal(1).scaleb(-sql_type.scale))
    return scaled if scaled == value else value


def _bound(expression: ie.BooleanExpression, schema: Schema) -> _Translated:
    """`expression` if pyiceberg binds it to `schema` (the literal converts to the column's
    type), else AlwaysTrue."""
    try:
        bind(schema, expression, case_sensitive=True)
    except (ValueError, TypeError, KeyError, AttributeError):
        return _ANYTHING
    return _Translated(expression, exact=True)


def _column(expr: Expr, schema: Schema) -> str | None:
    """The pyiceberg name of the column `expr` reads, if it is a column (or an integral
    column widened to a larger integral type) whose values compare as in SQL; else None."""
    if isinstance(expr, Cast):
        child = expr.child
        if not (expr.type.name in _INTEGRAL and child.type.name in _INTEGRAL):
            return None
        expr = child
    if not isinstance(expr, Column) or any("." in part for part in expr.path):
        return None
    field = _field(schema.as_struct(), expr.path)
    if field is None or isinstance(field.field_type, FloatType | DoubleType | StructType):
        return None
    return ".".join(expr.path)


def _field(struct: StructType, path: tuple[str, ...]) -> NestedField | None:
    """The field at `path` through nested structs, by exact name."""
    field = next((f for f in struct.fields if f.name == path[0]), None)
    if field is None or len(path) == 1:
        return field
    if not isinstance(field.field_type, StructType):
        return None
    return _field(field.field_type, path[1:])
