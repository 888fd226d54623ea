"""Spark-checked: a string compared with a number (or a date, timestamp, boolean) follows
Spark 4's ANSI rules exactly, failures included.

Spark 4 (ANSI mode, its default) reads the string side of `name > 5` with CAST(name AS
BIGINT), of `name = 1.5` with CAST(name AS DOUBLE), and fails the query with
CAST_INVALID_INPUT on the first value the cast cannot read. For each table and predicate
below, a local Spark session either selects rows or fails; dvtool must select the same rows
or fail with InvalidInputError naming the same value, and Spark running dvtool's own text
(`to_spark_sql()`, what the Spark engine runs) must do the same.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest

from dvtool.delta.protocol.schema import StructField, StructType
from dvtool.errors import InvalidInputError
from dvtool.predicate import Match, Predicate

pytestmark = pytest.mark.xdist_group("spark-predicates")

SCHEMA = StructType(
    (
        StructField("id", "integer", True, {}),
        StructField("name", "string", True, {}),
        StructField("kind", "string", True, {}),
    )
)
# name holds numbers only (Spark trims whitespace, takes a sign) in "numbers"; "mixed" adds
# values no BIGINT cast reads ('1.0', 'abc', ''), on rows of kind 'x' or with a NULL id.
TABLES: dict[str, list[tuple[int | None, str | None, str]]] = {
    "numbers": [
        *[(1, "1", "n"), (2, " 2 ", "n"), (3, "+3", "n"), (4, "-7", "n"), (5, None, "n")],
        *[(6, "\t10\n", "n"), (7, "9223372036854775806", "n")],
    ],
    "mixed": [
        *[(1, "1", "n"), (2, "5", "n"), (3, "abc", "x"), (None, "", "x"), (5, None, "n")],
        *[(6, "1.0", "x"), (7, "12", "n")],
    ],
    "dates": [
        *[(1, "2024-01-01", "d"), (2, " 2024-01-02 ", "d"), (3, "2024-01-01T10:00", "d")],
        *[(4, "true", "b"), (5, None, "d")],
    ],
}
PREDICATES = [
    # comparisons: the string side is read as BIGINT beside an integer
    "name > 5",
    "name = 5",
    "name <> 5",
    "name < 2",
    "name <= -7",
    "name >= 10",
    "name <=> 12",
    "5 < name",
    "name = 9223372036854775806",
    "name = id",
    "id = name",
    "name IN (1, 2, 12)",
    "name NOT IN (1, 2)",
    "name BETWEEN 1 AND 5",
    "name NOT BETWEEN 1 AND 5",
    # ... as DOUBLE beside a decimal or floating point number: '1.0' = 1.0
    "name = 1.0",
    "name > 5.5",
    "name = 1.0D",
    "name = CAST(1 AS DECIMAL(10,2))",
    # ... IN lists fold the types in order: DECIMAL(21,1) here, DOUBLE with 2.5 first
    "name IN (1, 2.5)",
    "name IN (2.5, 1)",
    # arithmetic
    "name + 1 > 2",
    "name * 1.5 > 2",
    # explicit casts fail the same way; TRY_CAST reads invalid values as NULL
    "CAST(name AS INT) > 1",
    "TRY_CAST(name AS INT) > 1",
    "name > '5'",
    # Spark's evaluation order: AND and OR short-circuit, NULL ids are dropped first
    "kind = 'n' AND name > 1",
    "name > 1 AND kind = 'n'",
    "kind <> 'n' OR name > 1",
    "kind = 'n' OR name > 1",
    "id < 3 AND name < 10",
    "NOT (name = 1)",
    "name > 5 AND FALSE",
    # dates, timestamps and booleans: the string is cast to their type
    "name = DATE '2024-01-01'",
    "name > TIMESTAMP '2024-01-01 05:00:00'",
    "name = TRUE",
]
_SPARK_VALUE = re.compile(r"The value '(.*?)' of the type \"STRING\"", re.DOTALL)


def _outcomes_in_spark(spark: Any, table: str, texts: list[str]) -> list[list[int] | str]:
    """`_outcome_in_spark` of each text: in one query while none fails."""
    columns = ", ".join(f"({t}) AS p{j}" for j, t in enumerate(texts))
    try:
        rows = spark.sql(f"SELECT k, {columns} FROM {table}").collect()
    except Exception:
        return [_outcome_in_spark(spark, table, text) for text in texts]
    return [sorted(row["k"] for row in rows if row[f"p{j}"] is True) for j in range(len(texts))]


def _outcome_in_spark(spark: Any, table: str, text: str) -> list[int] | str:
    """The row indexes Spark selects, or the value its CAST_INVALID_INPUT names (the first
    one in row order: one partition, one task)."""
    try:
        rows = spark.sql(f"SELECT k FROM {table} WHERE {text}").collect()
    except Exception as e:
        message = str(e)
        assert "CAST_INVALID_INPUT" in message, message
        found = _SPARK_VALUE.search(message)
        assert found is not None, message
        return found.group(1)
    return sorted(row["k"] for row in rows)


def _outcome_in_dvtool(pred: Predicate, rows: pa.Table) -> list[int] | str:
    try:
        return list(pred.filter(rows)["k"].to_pylist())
    except InvalidInputError as e:
        return e.value


def _table(data: list[tuple[int | None, str | None, str]]) -> pa.Table:
    ids, names, kinds = zip(*data, strict=True)
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "name": pa.array(names, pa.string()),
            "kind": pa.array(kinds, pa.string()),
            "k": pa.array(range(len(data)), pa.int64()),
        }
    )


@pytest.fixture(scope="module")
def views(spark: Any) -> Any:
    for name, data in TABLES.items():
        records = [(*row, k) for k, row in enumerate(data)]
        frame = spark.createDataFrame(records, "id int, name string, kind string, k bigint")
        frame.coalesce(1).createOrReplaceTempView(name)
    return spark


@pytest.mark.parametrize("table", sorted(TABLES))
def test_string_comparisons_select_or_fail_as_spark_does(views: Any, table: str) -> None:
    rows = _table(TABLES[table])
    parsed = [Predicate.parse(text, SCHEMA, (), "none") for text in PREDICATES]
    own_texts = [p.to_spark_sql() for p in parsed]
    outcomes = _outcomes_in_spark(views, table, PREDICATES + own_texts)
    for j, (text, pred) in enumerate(zip(PREDICATES, parsed, strict=True)):
        expected = outcomes[j]
        assert _outcome_in_dvtool(pred, rows) == expected, f"{table}: {text}"
        own = outcomes[len(PREDICATES) + j]
        assert own == expected, f"{table}: Spark on dvtool's {pred.to_spark_sql()}"


def test_the_rules_found_on_spark(views: Any) -> None:
    """The coercions themselves, as Spark's analyzed plans show them."""
    cases = {
        "name > 5": "cast(name as bigint)",
        "name = 1.5": "cast(name as double)",
        "name IN (1, 2.5)": "cast(name as decimal(21,1))",
        "name = DATE '2024-01-01'": "cast(name as date)",
    }
    for text, cast in cases.items():
        plan = views.sql(f"SELECT k FROM numbers WHERE {text}")._jdf.queryExecution().analyzed()
        assert cast in re.sub(r"#\d+", "", plan.toString()), plan.toString()
        spark_sql = Predicate.parse(text, SCHEMA, (), "none").to_spark_sql().lower()
        assert cast.replace("name", "`name`") in spark_sql


def test_skipping_never_takes_a_file_whole_through_a_strict_cast() -> None:
    """String statistics do not bound numbers, and the rows must be read to be checked."""
    pred = Predicate.parse("name > 5 OR id > 0", SCHEMA, (), "none")
    stats = {"numRecords": 2, "minValues": {"id": 1, "name": "abc"}}
    stats |= {"maxValues": {"id": 9, "name": "abd"}, "nullCount": {"id": 0, "name": 0}}
    assert pred.file_match({}, stats) is Match.SOME
    assert Predicate.parse("id > 0", SCHEMA, (), "none").file_match({}, stats) is Match.ALL
    all_null = stats | {"nullCount": {"id": 0, "name": 2}}
    assert Predicate.parse("name > 5", SCHEMA, (), "none").file_match({}, all_null) is Match.NONE


def test_a_partition_value_that_is_no_number_fails_the_plan() -> None:
    pred = Predicate.parse("kind > 5", SCHEMA, ["kind"], "none")
    stats = {"numRecords": 1}
    assert pred.file_match({"kind": "7"}, stats) is Match.ALL
    assert pred.file_match({"kind": " 3 "}, stats) is Match.NONE
    with pytest.raises(InvalidInputError) as caught:
        pred.file_match({"kind": "x"}, stats)
    assert caught.value.value == "x" and "a partition value" in caught.value.message
    assert caught.value.exit_code == 2
