"""Three-valued file skipping: can a file's rows satisfy the predicate?

For each node the `RangeVisitor` computes a `Range`: whether rows of the file may give NULL,
whether they may give a value, and bounds on those values. Column ranges come from the
statistics (min/max/nullCount), partition columns are exact, and boolean nodes combine with
Kleene logic, so the predicate's range says which of TRUE, FALSE and NULL rows may produce:
`Match.NONE` if no row can be TRUE, `Match.ALL` if every row is TRUE, else `Match.SOME`.

Everything over-approximates, so the answer is sound: anything unknown (a missing statistic, a
function the visitor cannot bound) widens to "any value, maybe NULL". Subtrees that reference
only partition columns are evaluated exactly with the arrow code (once per distinct partition
tuple), so partition-only predicates always give ALL or NONE; strict casts (ansi.py) are
checked there. A strict cast of a data column keeps files from ALL: the rows must be checked.

Column statistics become sound bounds in statistics.py (truncated strings and timestamps,
NaN, decimals as JSON floats); `nullCount` says something only when it is 0 (no NULLs) or
equals `numRecords` (all NULL), which also holds for wide bounds (`tightBounds: false`) and
with deletion vectors. Columns whose min/max do not bound their values (`Column.min_max`
False: a type change since older files were written, a collated string) use only nullCount.
"""

from __future__ import annotations

import bisect
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.errors import LogError
from dvtool.predicate import ansi, arrow, casts, datetime_bounds
from dvtool.predicate.sqltypes import STRING, SqlType, is_floating, is_integral, to_arrow
from dvtool.predicate.statistics import ColumnStats
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
    columns,
)

_MISSING = object()


class Match(enum.Enum):
    """Whether the valid rows of a file (or row group) satisfy the predicate."""

    ALL = "all"  # every row evaluates to TRUE
    NONE = "none"  # no row evaluates to TRUE
    SOME = "some"  # unknown: some rows may


@dataclass(frozen=True)
class Range:
    """What the rows of a file may produce for an expression.

    `nulls`: some row may give NULL; `values`: some row may give a non-NULL value, every such
    value lying in [lo, hi] (`hi` exclusive if `hi_open`; None = unbounded). For booleans,
    FALSE < TRUE: `Range.truth` builds the range of a set of truth values.
    """

    nulls: bool
    values: bool
    lo: Any = None
    hi: Any = None
    hi_open: bool = False

    @staticmethod
    def exact(value: Any) -> Range:
        if value is None:
            return Range(True, False)
        return Range(False, True, value, value)

    @staticmethod
    def truth(true: bool, false: bool, null: bool) -> Range:
        if not (true or false):
            return Range(null, False)
        return Range(null, True, lo=not false, hi=true)

    @property
    def may_true(self) -> bool:
        return self.values and self.hi is not False

    @property
    def may_false(self) -> bool:
        return self.values and self.lo is not True

    @property
    def single(self) -> bool:
        """Every non-NULL value is the same known value (lo)."""
        return (
            self.lo is not None and self.hi is not None and not self.hi_open and self.lo == self.hi
        )


UNKNOWN = Range(True, True)


def match_of(r: Range) -> Match:
    if not r.may_true:
        return Match.NONE
    if not (r.may_false or r.nulls):
        return Match.ALL
    return Match.SOME


# --- comparisons and logic on ranges ------------------------------------------------------


def _always_less(a: Range, b: Range) -> bool:
    """Every value of a is below every value of b."""
    if a.hi is None or b.lo is None:
        return False
    return bool(a.hi < b.lo or (a.hi_open and a.hi <= b.lo))


def _always_at_most(a: Range, b: Range) -> bool:
    """Every value of a is at most every value of b."""
    return a.hi is not None and b.lo is not None and bool(a.hi <= b.lo)


def _possible(op: str, a: Range, b: Range) -> tuple[bool, bool]:
    """Whether `a op b` may be TRUE and may be FALSE for non-NULL operands."""
    if op == "=":
        differ = _always_less(a, b) or _always_less(b, a)
        return not differ, not (a.single and b.single and a.lo == b.lo)
    if op == "!=":
        t, f = _possible("=", a, b)
        return f, t
    if op == "<":
        return not _always_at_most(b, a), not _always_less(a, b)
    if op == "<=":
        return not _always_less(b, a), not _always_at_most(a, b)
    if op == ">":
        return _possible("<", b, a)
    return _possible("<=", b, a)


def compare(op: str, a: Range, b: Range) -> Range:
    """The range of `a op b` for the comparison operators, `<=>` included."""
    if op == "<=>":
        t, f = _possible("=", a, b) if a.values and b.values else (False, False)
        true = (a.nulls and b.nulls) or (a.values and b.values and t)
        false = (a.nulls and b.values) or (a.values and b.nulls) or (a.values and b.values and f)
        return Range.truth(true, false, False)
    nulls = a.nulls or b.nulls
    if not (a.values and b.values):
        return Range.truth(False, False, nulls)
    t, f = _possible(op, a, b)
    return Range.truth(t, f, nulls)


def kleene_and(a: Range, b: Range) -> Range:
    true = a.may_true and b.may_true
    false = a.may_false or b.may_false
    null = (a.nulls and (b.may_true or b.nulls)) or (b.nulls and (a.may_true or a.nulls))
    return Range.truth(true, false, null)


def kleene_or(a: Range, b: Range) -> Range:
    true = a.may_true or b.may_true
    false = a.may_false and b.may_false
    null = (a.nulls and (b.may_false or b.nulls)) or (b.nulls and (a.may_false or a.nulls))
    return Range.truth(true, false, null)


def kleene_not(a: Range) -> Range:
    return Range.truth(a.may_false, a.may_true, a.nulls)


# --- column statistics ------------------------------------------------------------------


def column_range(stats: ColumnStats, t: SqlType, *, min_max: bool = True) -> Range:
    """The range of a data column from its statistics; only nullCount when not `min_max`
    (the column's min/max do not bound its values: see `Column.min_max`)."""
    n, nulls = stats.num_rows, stats.null_count
    if nulls is not None and n is not None and nulls >= n:
        return Range(True, False)
    may_null = nulls != 0
    if not min_max:
        return Range(may_null, True)
    try:
        lo, hi, hi_open = stats.bounds(t)
    except (ValueError, TypeError, ArithmeticError, InvalidOperation):
        return Range(may_null, True)
    return Range(may_null, True, lo, hi, hi_open)


# --- the visitor --------------------------------------------------------------------------


def _cast_bound(value: Any, src: SqlType, dst: SqlType) -> Any:
    """A bound mapped through a monotone cast, or None if it does not convert exactly."""
    if value is None:
        return None
    try:
        if is_floating(src) and is_integral(dst):
            value, src = math.trunc(value), SqlType("bigint")
        return arrow_values.as_py(arrow_values.scalar(value, to_arrow(src)).cast(to_arrow(dst)))
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        return None


@dataclass
class InOptions:
    """The constant options of an IN list, sorted for bisection."""

    values: list[Any]
    has_null: bool
    others: tuple[Expr, ...]

    def __post_init__(self) -> None:
        self.members = set(self.values)

    @staticmethod
    def of(node: In) -> InOptions:
        constants = [o.value for o in node.options if isinstance(o, Literal)]
        others = tuple(o for o in node.options if not isinstance(o, Literal))
        present = [v for v in constants if v is not None]
        if is_floating(node.value.type):  # NaN does not sort: compare one by one
            others += tuple(Literal(v, node.value.type) for v in present)
            present = []
        return InOptions(sorted(set(present)), None in constants, others)

    def range(self, v: Range) -> Range:
        """The range of `value IN (constants)` when the value has range `v`."""
        if not v.values:
            return Range.truth(False, False, v.nulls)
        start = 0 if v.lo is None else bisect.bisect_left(self.values, v.lo)
        if v.hi is None:
            end = len(self.values)
        elif v.hi_open:
            end = bisect.bisect_left(self.values, v.hi)
        else:
            end = bisect.bisect_right(self.values, v.hi)
        true = start < end
        unmatched = not (v.single and v.lo in self.members)
        return Range.truth(
            true, unmatched and not self.has_null, v.nulls or (self.has_null and unmatched)
        )


class RangeVisitor(Visitor[Range]):
    """The range of each node for one file: see the module docstring."""

    def __init__(
        self,
        stats: Mapping[tuple[str, ...], ColumnStats],
        exact: Mapping[int, Any],
        in_options: dict[int, InOptions],
    ) -> None:
        self.stats = stats
        self.exact = exact  # id(node) -> value, for partition columns and subtrees
        self.in_options = in_options

    def visit(self, node: Expr) -> Range:
        value = self.exact.get(id(node), _MISSING)
        if value is not _MISSING:
            return Range.exact(value)
        return super().visit(node)

    def visit_column(self, node: Column) -> Range:
        stats = self.stats.get(node.physical)
        return UNKNOWN if stats is None else column_range(stats, node.type, min_max=node.min_max)

    def visit_literal(self, node: Literal) -> Range:
        return Range.exact(node.value)

    def visit_compare(self, node: Compare) -> Range:
        return compare(node.op, self.visit(node.left), self.visit(node.right))

    def visit_and(self, node: And) -> Range:
        return kleene_and(self.visit(node.left), self.visit(node.right))

    def visit_or(self, node: Or) -> Range:
        return kleene_or(self.visit(node.left), self.visit(node.right))

    def visit_not(self, node: Not) -> Range:
        return kleene_not(self.visit(node.child))

    def visit_in(self, node: In) -> Range:
        options = self.in_options.get(id(node))
        if options is None:
            options = self.in_options[id(node)] = InOptions.of(node)
        value = self.visit(node.value)
        result = options.range(value)
        for other in options.others:
            result = kleene_or(result, compare("=", value, self.visit(other)))
        return result

    def visit_is_null(self, node: IsNull) -> Range:
        child = self.visit(node.child)
        return Range.truth(child.nulls, child.values, False)

    def visit_is_bool(self, node: IsBool) -> Range:
        child = self.visit(node.child)
        hit = child.may_true if node.value else child.may_false
        miss = child.may_false if node.value else child.may_true
        return Range.truth(hit, miss or child.nulls, False)

    def visit_like(self, node: Like) -> Range:
        child = self.visit(node.child)
        prefix = None if node.ignore_case else arrow.like_prefix(node.pattern, node.escape)
        return _starts_with(child, prefix)

    def visit_arith(self, node: Arith) -> Range:
        if datetime_bounds.varying_argument(node) is not None:
            return self._monotone(node)
        return self._strict(node, may_fail=node.op in "/%")

    def visit_neg(self, node: Neg) -> Range:
        return self._strict(node)

    def visit_cast(self, node: Cast) -> Range:
        child = self.visit(node.child)
        src, dst = node.child.type, node.type
        nulls = child.nulls or (child.values and casts.may_fail(src, dst))
        if not casts.is_monotone(src, dst):
            return Range(nulls, child.values)
        lo, hi = _cast_bound(child.lo, src, dst), _cast_bound(child.hi, src, dst)
        return Range(nulls, child.values, lo, hi)

    def visit_func(self, node: Func) -> Range:
        if node.name == "startswith":
            prefix = node.args[1]
            assert isinstance(prefix, Literal)
            return _starts_with(self.visit(node.args[0]), prefix.value)
        if node.name == "coalesce":
            ranges = [self.visit(a) for a in node.args]
            return Range(all(r.nulls for r in ranges), any(r.values for r in ranges))
        if datetime_bounds.varying_argument(node) is not None:
            return self._monotone(node)
        return self._strict(node)

    def _monotone(self, node: Expr) -> Range:
        """A function that never decreases in its one varying argument: its bounds are the
        function of the argument's bounds (an open upper bound becomes a closed one)."""
        result = self._strict(node)
        varying = datetime_bounds.varying_argument(node)
        assert varying is not None
        child = self.visit(varying)
        lo, hi = datetime_bounds.apply(node, child.lo), datetime_bounds.apply(node, child.hi)
        return Range(result.nulls, result.values, lo, hi)

    def _strict(self, node: Expr, may_fail: bool = False) -> Range:
        """NULL when any argument is NULL (and maybe otherwise); bounds unknown."""
        ranges = [self.visit(child) for child in node.children()]
        values = all(r.values for r in ranges)
        return Range(any(r.nulls for r in ranges) or (values and may_fail), values)


def _starts_with(child: Range, prefix: str | None) -> Range:
    """The range of "child starts with prefix" (unknown for a None prefix)."""
    if not child.values:
        return Range.truth(False, False, child.nulls)
    if prefix is None:
        return Range.truth(True, True, child.nulls)
    return Range.truth(_may_start(child, prefix), not _all_start(child, prefix), child.nulls)


def _may_start(r: Range, prefix: str) -> bool:
    """Whether some string in r may start with prefix."""
    if r.hi is not None and r.hi < prefix:
        return False
    lo = r.lo
    return not (lo is not None and lo > prefix and not lo.startswith(prefix))


def _all_start(r: Range, prefix: str) -> bool:
    """Whether every string in r starts with prefix (the set of such strings is convex)."""
    if prefix == "":
        return True
    return (
        r.lo is not None
        and r.hi is not None
        and not r.hi_open
        and r.lo.startswith(prefix)
        and r.hi.startswith(prefix)
    )


# --- partitions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionRow:
    """One partition tuple: typed values of the partition columns and the exact results of
    the partition-only subtrees, both keyed by id() of the tree nodes."""

    scalars: dict[str, pa.Scalar]  # physical column name -> typed value
    exact: dict[int, Any]


def _partition_only_subtrees(expr: Expr) -> list[Expr]:
    """The largest subtrees whose columns are all partition columns (bare columns aside)."""
    if isinstance(expr, (Column, Literal)):
        return []
    refs = columns(expr)
    if refs and all(c.partition for c in refs):
        return [expr]
    return [s for child in expr.children() for s in _partition_only_subtrees(child)]


class Skipper:
    """File and row-group skipping for one bound predicate, with per-partition caching."""

    def __init__(self, expr: Expr) -> None:
        self.expr = expr
        refs = columns(expr)
        self.data_paths = sorted({c.physical for c in refs if not c.partition})
        self.partition_nodes = [c for c in refs if c.partition]
        self.partition_types = {c.physical[0]: c.type for c in self.partition_nodes}
        self.subtrees = _partition_only_subtrees(expr)
        self._subtree_exprs = [arrow.to_arrow_expression(s) for s in self.subtrees]
        self._subtree_checks = [c for s in self.subtrees for c in ansi.strict_checks(s)]
        self.reads_rows_strictly = ansi.reads_data_strictly(expr)  # never ALL, see above
        self._rows: dict[tuple[str | None, ...], PartitionRow] = {}
        self._in_options: dict[int, InOptions] = {}

    def partition_row(self, partition_values: Mapping[str, str | None]) -> PartitionRow:
        """Typed partition values and exact partition-only results, cached per tuple."""
        names = list(self.partition_types)
        key = tuple(partition_values.get(name) for name in names)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self._evaluate_partition(dict(zip(names, key, strict=True)))
        return row

    def _evaluate_partition(self, raw: dict[str, str | None]) -> PartitionRow:
        scalars = parse_partition_values(raw, self.partition_types)
        exact: dict[int, Any] = {
            id(c): arrow_values.as_py(scalars[c.physical[0]]) for c in self.partition_nodes
        }
        if self.subtrees:
            table = pa.Table.from_arrays(
                [pa.repeat(s, 1) for s in scalars.values()], names=list(scalars)
            )
            ansi.raise_invalid(self._subtree_checks, table, "a partition value")
            results = arrow.evaluate(self._subtree_exprs, table)
            exact.update(
                {
                    id(s): arrow_values.as_py(r[0])
                    for s, r in zip(self.subtrees, results, strict=True)
                }
            )
        return PartitionRow(scalars, exact)

    def match(
        self,
        stats: Mapping[tuple[str, ...], ColumnStats],
        partition_values: Mapping[str, str | None] | None,
    ) -> Match:
        exact: dict[int, Any] = {}
        if partition_values is not None and self.partition_types:
            exact = self.partition_row(partition_values).exact
        visitor = RangeVisitor(stats, exact, self._in_options)
        verdict = match_of(visitor.visit(self.expr))
        if verdict is Match.ALL and self.reads_rows_strictly:
            return Match.SOME
        return verdict


def parse_partition_values(
    raw: Mapping[str, str | None], types: Mapping[str, SqlType]
) -> dict[str, pa.Scalar]:
    """Typed partition values from `partitionValues` strings (empty string or None = NULL),
    parsed with Spark's CAST from string; LogError for a value that is not of the type."""
    names = list(types)
    if not names:
        return {}
    texts = pa.Table.from_arrays(
        [arrow_values.array([raw.get(name) or None], pa.string()) for name in names], names=names
    )
    exprs = [casts.cast_expr(pc.field(name), STRING, types[name]) for name in names]
    parsed = arrow.evaluate(exprs, texts)
    out: dict[str, pa.Scalar] = {}
    for name, column in zip(names, parsed, strict=True):
        value = column[0]
        if not value.is_valid and raw.get(name):
            raise LogError(
                f"partition value {raw[name]!r} of column {name!r} is not a valid {types[name]}"
            )
        out[name] = value
    return out
