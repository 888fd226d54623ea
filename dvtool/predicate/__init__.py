"""`--where` predicates: parsed once, then used for file skipping, row filtering and Spark.

`Predicate.parse(sql, schema, partition_columns, column_mapping_mode)` parses a Spark SQL
boolean expression with sqlglot into dvtool's own typed tree (tree.py), bound to the table
schema (parse.py, resolve.py). The schema's field metadata decides what a predicate may do
with a column: variant columns cannot be referenced, strings with a non-binary collation can
only be tested with IS [NOT] NULL, and the min/max statistics of collated strings and of
columns with type changes (`delta.typeChanges`) are never used for skipping (see resolve.py).
Three visitors consume the tree:

- skipping.py: `file_match` / `stats_match` say whether ALL, NONE or SOME of a file's (or
  parquet row group's) rows satisfy the predicate, soundly, from partition values and
  statistics;
- arrow.py: `to_arrow` gives a pyarrow compute expression over physical column names, with
  Spark's semantics (NULLs included), and `filter` selects the rows to delete with it;
- spark.py: `to_spark_sql` gives equivalent Spark SQL over logical names.

The semantics are Spark 4's with its default ANSI mode and session time zone UTC (date and
time functions, INTERVAL arithmetic and current_date()/current_timestamp() fixed once per
command: datetime_calls.py, intervals.py). A string that a CAST (explicit, or implicit as in
`name > 5`) cannot read fails the command as it fails Spark's statement (CAST_INVALID_INPUT:
`InvalidInputError`, raised by `filter` and, for partition values, by `file_match`; see
ansi.py). Where ANSI Spark fails a statement at run time for other reasons (a number that
does not fit a CAST, division by zero), the affected rows evaluate to NULL and so never
match; integer overflow raises `pyarrow.ArrowInvalid` during evaluation, as in Spark. Every
user-facing problem (syntax, an unknown column, a type mismatch, an unsupported construct)
is a `PredicateError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.delta.protocol.schema import StructType
from dvtool.predicate import ansi, arrow, parse, spark
from dvtool.predicate.skipping import Match, Skipper
from dvtool.predicate.statistics import ColumnStats, stats_cover, stats_from_json
from dvtool.predicate.tree import Expr, columns

__all__ = ["Match", "Predicate"]


class Predicate:
    """A `--where` predicate bound to a table schema (see the package docstring)."""

    def __init__(self, sql: str, expr: Expr) -> None:
        self.sql = sql
        self.expr = expr
        refs = columns(expr)
        self.columns: tuple[str, ...] = tuple(
            dict.fromkeys(c.physical[0] for c in refs if not c.partition)
        )
        """Physical names of the top-level data columns the predicate reads."""
        self.partition_columns_used: tuple[str, ...] = tuple(
            dict.fromkeys(c.physical[0] for c in refs if c.partition)
        )
        """Physical names of the partition columns it reads (`partitionValues` keys)."""
        self.columns_without_min_max: tuple[str, ...] = tuple(
            dict.fromkeys(c.physical[0] for c in refs if not c.partition and not c.min_max)
        )
        """Physical names of the top-level data columns whose min/max statistics skipping
        ignores for some field it reads (a type change, a collated string): only nullCount."""
        self._skipper = Skipper(expr)
        self._arrow: pc.Expression | None = None
        self._checks: list[ansi.Check] | None = None

    @classmethod
    def parse(
        cls,
        sql: str,
        schema: StructType,
        partition_columns: Sequence[str],
        column_mapping_mode: str,
        now: datetime | None = None,
    ) -> Predicate:
        """Parse and bind `sql`; `partition_columns` are logical names. Raises PredicateError.

        `now` (an aware datetime; default: the current time) is the instant
        current_date() and current_timestamp() denote: a command fixes it once, so every
        re-plan reads the predicate the same way.
        """
        instant = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        return cls(sql, parse.bind(sql, schema, partition_columns, column_mapping_mode, instant))

    @property
    def references_only_partitions(self) -> bool:
        """True when no data column is read: file_match is then exact (ALL or NONE)."""
        return not self.columns

    def file_match(
        self, partition_values: Mapping[str, str | None], stats: Mapping[str, Any] | None
    ) -> Match:
        """Whether ALL, NONE or SOME valid rows of a file satisfy the predicate.

        `partition_values` is the add action's `partitionValues` (physical names, serialized
        strings, None or "" for NULL); `stats` its parsed `stats` JSON or None. Decimal
        statistics parsed as floats are widened by one ulp, which is sound for any writer;
        parse with `json.loads(text, parse_float=Decimal)` only when the writer prints
        decimals exactly (Delta Spark does; delta-rs writes rounded doubles). The min/max of
        `columns_without_min_max` are never used. Raises LogError for a partition value that
        is not valid for its column type, and InvalidInputError for one that a strict cast of
        the predicate cannot read (`part > 5` on a string partition column holding 'x').
        Never ALL while a strict cast reads data columns: the rows must be checked (ansi.py).
        """
        num_records, column_stats = stats_from_json(stats, self._skipper.data_paths)
        if num_records == 0:
            return Match.NONE
        return self._skipper.match(column_stats, partition_values)

    def stats_complete(self, stats: Mapping[str, Any] | None) -> bool:
        """Whether parsed add `stats` hold numRecords and the min, max and null count of
        every data column path the predicate reads (all `file_match` can use)."""
        return stats_cover(stats, self._skipper.data_paths)

    def stats_match(
        self,
        num_rows: int | None,
        min_values: Mapping[str, Any],
        max_values: Mapping[str, Any],
        null_counts: Mapping[str, int | None],
        partition_values: Mapping[str, str | None] | None = None,
        *,
        truncated: bool = False,
    ) -> Match:
        """Like `file_match`, from statistics keyed by dotted physical column path ("a.b").

        Values may be typed (pyarrow's parquet row-group statistics: int, float, Decimal,
        str, date, datetime) or as in Delta JSON. A missing key means unknown. `truncated`
        applies Delta's truncation rules (string prefixes, millisecond timestamps); parquet
        statistics are exact bounds, so it is off by default.
        """
        if num_rows == 0:
            return Match.NONE
        column_stats = {}
        for path in self._skipper.data_paths:
            key = ".".join(path)
            column_stats[path] = ColumnStats(
                num_rows,
                min_values.get(key),
                max_values.get(key),
                null_counts.get(key),
                truncated,
            )
        return self._skipper.match(column_stats, partition_values)

    def partition_scalars(self, partition_values: Mapping[str, str | None]) -> dict[str, pa.Scalar]:
        """Typed values of the partition columns used, by physical name: the engine
        materializes them as columns (e.g. `pa.repeat(scalar, n)`) before filtering."""
        return dict(self._skipper.partition_row(partition_values).scalars)

    def to_arrow(self) -> pc.Expression:
        """The predicate as a pyarrow compute expression over physical column names."""
        if self._arrow is None:
            self._arrow = arrow.to_arrow_expression(self.expr)
            self._checks = ansi.strict_checks(self.expr)
        return self._arrow

    def filter(self, table: pa.Table) -> pa.Table:
        """The rows of `table` (columns by physical name) where the predicate is TRUE: what
        `table.filter(self.to_arrow())` gives, without importing pandas (see arrow.py).

        Raises `InvalidInputError` (a PredicateError) when a row holds a string that a cast
        of the predicate cannot read, where ANSI Spark fails (see ansi.py); its message names
        no file: the engine adds it with `located`."""
        expression = self.to_arrow()
        ansi.raise_invalid(self._checks or [], table)
        return arrow.filter_table(table, expression)

    def to_spark_sql(self) -> str:
        """The predicate as Spark SQL over backquoted logical column names."""
        return spark.to_spark_sql(self.expr)

    def __repr__(self) -> str:
        return f"Predicate({self.to_spark_sql()})"
