"""Spark-checked property tests: dvtool's `--where` evaluation equals Spark's, row by row.

Hypothesis draws tables and predicates from the grammar of tests/predicate/predicate_grammar.py with
the focus on dates, timestamps and strings (date and time functions, INTERVAL arithmetic,
RLIKE, date_format); a local Spark session (session time zone UTC, ANSI mode, Spark's
defaults otherwise) evaluates the user's text, and dvtool's arrow filter must select exactly
the rows where Spark says TRUE. Spark also evaluates dvtool's own `to_spark_sql()` text (what
the Spark engine runs) to the same rows. current_date() and current_timestamp() are replaced
in Spark's text by the instant dvtool was given (`NOW`), as dvtool fixes them per command.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dvtool.errors import InvalidInputError
from dvtool.predicate import Predicate
from tests.predicate.predicate_grammar import COLUMNS, NOW, SCHEMA, Row, predicate, rows, to_table

pytestmark = pytest.mark.xdist_group("spark-predicates")

PREDICATES_PER_EXAMPLE = 12
SPARK_PROFILE = settings(
    max_examples=int(os.environ.get("SPARK_PREDICATE_EXAMPLES", "8")),
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # shrinking costs Spark minutes
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_NOW_TEXT = {
    "current_date()": f"DATE '{NOW.date().isoformat()}'",
    "current_timestamp()": f"TIMESTAMP '{NOW.strftime('%Y-%m-%d %H:%M:%S.%f')}Z'",
}


def _spark_frame(spark: Any, data: list[Row]) -> Any:
    """The rows as a Spark DataFrame with the grammar's column types, plus an index `k`."""
    table = to_table(data).append_column("k", pa.array(range(len(data)), pa.int64()))
    ddl = ", ".join(f"`{name}` {t}" for name, (t, _) in COLUMNS.items()) + ", k bigint"
    records = [tuple(row.values()) for row in table.to_pylist()]
    return spark.createDataFrame(records, ddl)


def _spark_text(text: str) -> str:
    for call, literal in _NOW_TEXT.items():
        text = text.replace(call, literal)
    return text


def _spark_true_rows(spark: Any, data: list[Row], texts: list[str]) -> list[list[int] | None]:
    """For each predicate text, the indexes of the rows where Spark evaluates it TRUE, or
    None where ANSI Spark fails the query at run time (a division by zero: dvtool evaluates
    those rows to NULL, as its own text's try_divide does in Spark; a string a CAST cannot
    read: dvtool fails too)."""
    _spark_frame(spark, data).createOrReplaceTempView("t")
    try:
        return _select(spark, texts)
    except Exception:  # one failing predicate fails the query: ask one by one
        out: list[list[int] | None] = []
        for text in texts:
            try:
                out.extend(_select(spark, [text]))
            except Exception as e:
                assert "SparkRuntimeException" in type(e).__name__ or "[" in str(e), e
                out.append(None)
        return out


def _select(spark: Any, texts: list[str]) -> list[list[int] | None]:
    columns = ", ".join(f"({t}) AS p{j}" for j, t in enumerate(texts))
    result = spark.sql(f"SELECT k, {columns} FROM t ORDER BY k").collect()
    return [[row["k"] for row in result if row[f"p{j}"] is True] for j in range(len(texts))]


@pytest.mark.parametrize("focus", ["date", "ts", "str", "int"])
@SPARK_PROFILE
@given(data=rows(), draws=st.data())
def test_dvtool_selects_the_rows_spark_selects(
    spark: Any, focus: str, data: list[Row], draws: st.DataObject
) -> None:
    nodes = [draws.draw(predicate(focus=focus)) for _ in range(PREDICATES_PER_EXAMPLE)]
    parsed = [Predicate.parse(n.spark, SCHEMA, (), "none", now=NOW) for n in nodes]
    user_texts = [_spark_text(n.spark) for n in nodes]
    own_texts = [p.to_spark_sql() for p in parsed]
    expected = _spark_true_rows(spark, data, user_texts + own_texts)
    table = to_table(data).append_column("k", pa.array(range(len(data)), pa.int64()))
    for j, (node, pred) in enumerate(zip(nodes, parsed, strict=True)):
        selected: list[int] | None
        try:
            selected = pred.filter(table)["k"].to_pylist()
        except InvalidInputError:  # a string a CAST cannot read: Spark must fail as well
            selected = None
        own = expected[len(nodes) + j]
        assert own == selected, f"Spark on dvtool's text {pred.to_spark_sql()}"
        if expected[j] is not None or selected is None:
            assert selected == expected[j], f"{node.spark} (dvtool: {pred.to_spark_sql()})"


def test_current_date_and_timestamp_are_the_instant_given(spark: Any) -> None:
    """What Spark's current_date()/current_timestamp() read is what dvtool fixes per
    command by default: the current instant, in UTC."""
    before = datetime.now(timezone.utc)
    pred = Predicate.parse("ts <= current_timestamp() AND d = current_date()", SCHEMA, (), "none")
    after = datetime.now(timezone.utc)
    row = spark.sql("SELECT current_timestamp() AS ts, current_date() AS d").collect()[0]
    spark_now = row["ts"].astimezone(timezone.utc)
    text = pred.to_spark_sql()
    fixed = datetime.fromisoformat(text.split("TIMESTAMP '")[1].split("'")[0])
    assert before <= fixed <= after <= spark_now
    assert (spark_now - fixed).total_seconds() < 120
    assert f"DATE '{fixed.date().isoformat()}'" in text
    assert row["d"] in (fixed.date(), spark_now.date())  # the same day, unless at midnight
