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
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvtool.predicate import Match, Predicate
from tests.predicate.predicate_grammar import (
    COLUMNS,
    FOCUS,
    NOW,
    SCHEMA,
    UTC,
    Node,
    Row,
    predicate,
    rows,
    to_polars,
    to_table,
)

PROFILE = settings(  # PREDICATE_EXAMPLES=5000 for a deeper search
    max_examples=int(os.environ.get("PREDICATE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- properties ---------------------------------------------------------------------------


def true_rows(p: Node, data: list[Row]) -> list[int]:
    return [k for k, row in enumerate(data) if p.ref(row) is True]


def parse(sql: str, partitions: tuple[str, ...] = ()) -> Predicate:
    return Predicate.parse(sql, SCHEMA, partitions, "none", now=NOW)


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
