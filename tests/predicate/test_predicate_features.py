"""`--where` on columns other writers create: variants, collated strings and widened types.

- Variant columns (PROTOCOL.md "Variant Data Type") cannot be referenced, but do not disturb
  predicates on other columns.
- Strings with a non-binary collation (`__COLLATIONS` field metadata) can only be tested with
  IS [NOT] NULL; their min/max statistics are never used.
- Columns with type changes (PROTOCOL.md "Type Widening", `delta.typeChanges`) skip only by
  nullCount: files written before the change hold min/max in the old type. The golden table
  `type-widening` supplies real statistics and data of both kinds of files.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvtool.delta.protocol.schema import ArrayType, StructField, StructType, parse_schema
from dvtool.errors import PredicateError
from dvtool.predicate import Match, Predicate
from dvtool.predicate.skipping import Skipper
from dvtool.predicate.sqltypes import STRING, VARIANT, from_delta, to_arrow
from dvtool.predicate.statistics import ColumnStats
from dvtool.predicate.tree import Column, Compare, Literal, columns
from tests.oracles import GOLDEN

ALL, NONE, SOME = Match.ALL, Match.NONE, Match.SOME
WIDENED_TABLE = GOLDEN / "type-widening"


def field(name: str, type_: Any, **metadata: Any) -> StructField:
    return StructField(name, type_, True, metadata)


def parse(sql: str, schema: StructType, partitions: tuple[str, ...] = ()) -> Predicate:
    return Predicate.parse(sql, schema, partitions, "none")


def error(sql: str, schema: StructType, partitions: tuple[str, ...] = ()) -> str:
    with pytest.raises(PredicateError) as info:
        parse(sql, schema, partitions)
    message = str(info.value)
    assert message.count("\n") <= 1, message
    return message


def stats(num_records: int = 10, **columns: tuple[Any, Any, Any]) -> dict[str, Any]:
    """numRecords and (min, max, nullCount) per column; None leaves an entry out."""
    out: dict[str, Any] = {"numRecords": num_records}
    out.update({"minValues": {}, "maxValues": {}, "nullCount": {}})
    for name, values in columns.items():
        for key, value in zip(("minValues", "maxValues", "nullCount"), values, strict=True):
            if value is not None:
                out[key][name] = value
    return out


# --- variant columns ----------------------------------------------------------------------

VARIANT_SCHEMA = StructType(
    (
        field("id", "long"),
        field("payload", "variant"),
        field("st", StructType((field("v", "variant"), field("x", "integer")))),
        field("variants", ArrayType("variant")),
        field("p", "string"),
    )
)


@pytest.mark.parametrize(
    ("sql", "column"),
    [
        ("payload IS NULL", "`payload`"),
        ("isnotnull(payload)", "`payload`"),
        ("payload = 1", "`payload`"),
        ("PAYLOAD.a = 1", "`payload`"),
        ("payload['a'] = 1", "`payload`"),
        ("variant_get(payload, '$.a', 'int') = 1", "`payload`"),
        ("to_json(payload) = '{}'", "`payload`"),
        ("CAST(payload AS STRING) = 'x'", "`payload`"),
        ("id = 1 OR payload IS NOT NULL", "`payload`"),
        ("st.v IS NULL", "`st`.`v`"),
        ("st.v.k = 1", "`st`.`v`"),
    ],
)
def test_variant_references_are_refused(sql: str, column: str) -> None:
    message = error(sql, VARIANT_SCHEMA, ("p",))
    assert message.startswith(
        f"column {column} is a variant; --where cannot compare variant values "
        "(dvtool does not evaluate variant expressions)\n"
    )
    assert "select the rows by other columns" in message


def test_a_variant_column_does_not_break_other_predicates() -> None:
    schema_string = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "id", "type": "long", "nullable": True, "metadata": {}},
                {"name": "payload", "type": "variant", "nullable": True, "metadata": {}},
                {"name": "p", "type": "string", "nullable": True, "metadata": {}},
            ],
        }
    )
    assert from_delta("variant") == VARIANT
    for schema in (parse_schema(schema_string), VARIANT_SCHEMA):
        pred = parse("id > 5 AND p = 'a'", schema, ("p",))
        assert pred.columns == ("id",)
        assert pred.columns_without_min_max == ()
        table = pa.table({"id": pa.array([1, 6, None], pa.int64()), "p": ["a", "a", "a"]})
        assert table.filter(pred.to_arrow())["id"].to_pylist() == [6]
        # a variant's statistics: nullCount, and (with shredding) z85 text bounds
        file_stats = stats(id=(1, 5, 0), payload=("0S&u501fk+ze0(tB98", "0S&u5", 2))
        assert pred.file_match({"p": "a"}, file_stats) is NONE
        assert pred.file_match({"p": "a"}, stats(id=(6, 9, 0))) is ALL
        assert pred.file_match({"p": "b"}, stats(id=(6, 9, 0))) is NONE


def test_struct_with_a_variant_field_can_still_be_used() -> None:
    pred = parse("st.x = 1 AND st IS NOT NULL AND variants IS NULL", VARIANT_SCHEMA)
    assert pred.columns == ("st", "variants")
    file_stats = {"numRecords": 3, "minValues": {"st": {"x": 2}}, "maxValues": {"st": {"x": 4}}}
    assert pred.file_match({}, file_stats) is NONE


# --- collated strings ---------------------------------------------------------------------

LCASE = "spark.UTF8_LCASE"


def collated(name: str, collation: str = LCASE) -> StructField:
    return field(name, "string", __COLLATIONS={name: collation})


COLLATED_SCHEMA = StructType(
    (
        field("id", "long"),
        collated("name"),
        collated("pc", "icu.UNICODE_CI"),
        field("st", StructType((collated("city", "ICU.de_DE.73"), field("zip", "string")))),
        field("tags", ArrayType("string"), __COLLATIONS={"tags.element": LCASE}),
        field("plain", "string"),
    )
)


@pytest.mark.parametrize(
    ("sql", "column", "collation"),
    [
        ("name = 'a'", "`name`", LCASE),
        ("name <=> NULL", "`name`", LCASE),
        ("name <> 'a'", "`name`", LCASE),
        ("'a' < name", "`name`", LCASE),
        ("name BETWEEN 'a' AND 'b'", "`name`", LCASE),
        ("name IN ('a', 'b')", "`name`", LCASE),
        ("name NOT IN ('a')", "`name`", LCASE),
        ("name LIKE 'a%'", "`name`", LCASE),
        ("name ILIKE 'a%'", "`name`", LCASE),
        ("lower(name) = 'a'", "`name`", LCASE),
        ("length(name) > 3", "`name`", LCASE),
        ("startswith(name, 'a')", "`name`", LCASE),
        ("contains(name, 'a')", "`name`", LCASE),
        ("concat(name, 'x') IS NULL", "`name`", LCASE),
        ("coalesce(name, 'x') = 'x'", "`name`", LCASE),
        ("name = plain", "`name`", LCASE),
        ("id = 1 AND name = 'a'", "`name`", LCASE),
        ("pc = 'x'", "`pc`", "icu.UNICODE_CI"),
        ("st.city = 'Köln'", "`st`.`city`", "ICU.de_DE.73"),
    ],
)
def test_collated_string_comparisons_are_refused(sql: str, column: str, collation: str) -> None:
    message = error(sql, COLLATED_SCHEMA, ("pc",))
    assert message.startswith(
        f"dvtool compares strings byte-wise (UTF8_BINARY); column {column} uses collation "
        f"{collation}\n"
    )
    assert "only IS [NOT] NULL can test it" in message


@pytest.mark.parametrize(
    ("sql", "rows", "unbounded"),
    [
        ("name IS NULL", [2], ("name",)),
        ("name IS NOT NULL", [1, 3], ("name",)),
        ("(name) IS NULL", [2], ("name",)),
        ("NOT (name IS NULL)", [1, 3], ("name",)),
        ("isnull(name)", [2], ("name",)),
        ("isnotnull(name) AND id > 1", [3], ("name",)),
        ("st.city IS NULL OR st.zip = 'z'", [2], ("st",)),
    ],
)
def test_null_tests_on_collated_strings_are_allowed(
    sql: str, rows: list[int], unbounded: tuple[str, ...]
) -> None:
    pred = parse(sql, COLLATED_SCHEMA)
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": ["A", None, "b"],
            "st": pa.array([{"city": "x", "zip": "a"}, {"city": None, "zip": "b"}, {"city": "y"}]),
        }
    )
    assert table.filter(pred.to_arrow())["id"].to_pylist() == rows
    assert pred.columns_without_min_max == unbounded
    assert parse(pred.to_spark_sql(), COLLATED_SCHEMA).expr == pred.expr


def test_null_tests_on_collated_strings_skip_by_null_count() -> None:
    pred = parse("name IS NULL", COLLATED_SCHEMA)
    assert pred.file_match({}, stats(name=("A", "b", 0))) is NONE
    assert pred.file_match({}, stats(name=(None, None, 10))) is ALL
    assert pred.file_match({}, stats(name=("A", "b", 4))) is SOME
    partition = parse("pc IS NOT NULL", COLLATED_SCHEMA, ("pc",))
    assert partition.file_match({"pc": "x"}, None) is ALL
    assert partition.file_match({"pc": None}, None) is NONE


def test_collated_columns_are_never_bounded_by_min_max() -> None:
    """Were a comparison on a collated column ever allowed, skipping would ignore its binary
    min/max: "B" < "a" byte-wise, but not under UTF8_LCASE."""
    (column,) = columns(parse("name IS NULL", COLLATED_SCHEMA).expr)
    assert column == Column(("name",), ("name",), STRING, min_max=False)
    below = Compare("<", column, Literal("B", STRING))
    file_stats: dict[tuple[str, ...], ColumnStats] = {
        ("name",): ColumnStats(10, "a", "c", 0, truncated=True)
    }
    assert Skipper(below).match(file_stats, None) is SOME
    bounded = Compare("<", Column(("name",), ("name",), STRING), Literal("B", STRING))
    assert Skipper(bounded).match(file_stats, None) is NONE  # what binary min/max would say


@pytest.mark.parametrize("collation", ["spark.UTF8_BINARY", "UTF8_BINARY", "SPARK.utf8_binary"])
def test_binary_collation_is_plain_string(collation: str) -> None:
    schema = StructType((collated("name", collation),))
    pred = parse("name >= 'b'", schema)
    assert pred.columns_without_min_max == ()
    assert pred.file_match({}, stats(name=("b", "c", 0))) is ALL
    assert pred.file_match({}, stats(name=("A", "a", 0))) is NONE


@pytest.mark.parametrize(
    "metadata",
    [
        {"name": "spark.UTF8_LCASE_RTRIM"},
        {"name": "spark.UTF8_BINARY_RTRIM"},
        {"other": "icu.UNICODE"},
        "spark.UTF8_LCASE",
    ],
)
def test_unknown_or_trimming_collations_are_not_binary(metadata: Any) -> None:
    schema = StructType((field("name", "string", __COLLATIONS=metadata),))
    assert "byte-wise (UTF8_BINARY); column `name` uses collation" in error("name = 'a'", schema)


def test_collated_array_elements_leave_the_array_null_test_alone() -> None:
    pred = parse("tags IS NULL AND plain = 'a'", COLLATED_SCHEMA)
    assert pred.columns == ("tags", "plain")
    assert pred.file_match({}, stats(plain=("b", "c", 0))) is NONE


# --- type widening: the golden table ------------------------------------------------------


def golden_log() -> tuple[StructType, list[dict[str, Any]]]:
    """The golden table's latest schema and its add actions, oldest first."""
    schema_string, adds = "", []
    for commit in sorted((WIDENED_TABLE / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                schema_string = action["metaData"]["schemaString"]
            if "add" in action:
                adds.append(action["add"])
    return parse_schema(schema_string), adds


WIDENED_SCHEMA, GOLDEN_ADDS = golden_log()
WIDENED = [f.name for f in WIDENED_SCHEMA]


def test_the_golden_table_has_a_file_from_before_the_type_changes() -> None:
    assert len(WIDENED) == 13
    assert all(f.metadata["delta.typeChanges"] for f in WIDENED_SCHEMA)
    old = json.loads(GOLDEN_ADDS[0]["stats"])
    assert old["minValues"]["date_timestamp_ntz"] == "2024-09-09"  # a date, column is ntz
    assert old["minValues"]["float_double"] == 3.4  # the float 3.4, not the double


def _literal(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else str(value)


def _golden_predicates() -> list[tuple[str, int]]:
    """Comparisons of each widened column with each file's statistics values, by file."""
    out = []
    for index, add in enumerate(GOLDEN_ADDS):
        file_stats = json.loads(add["stats"])
        for name in WIDENED:
            for bound in ("minValues", "maxValues"):
                value = _literal(file_stats[bound][name])
                for op in ("=", "<>", "<", "<=", ">", ">="):
                    out.append((f"{name} {op} {value}", index))
                out.append((f"{name} IN ({value}, {value})", index))
    return out


@pytest.mark.parametrize("exact_decimals", [False, True], ids=["floats", "decimals"])
def test_widened_columns_never_skip_by_min_max(exact_decimals: bool) -> None:
    parse_float = Decimal if exact_decimals else float
    for sql, _ in _golden_predicates():
        pred = parse(sql, WIDENED_SCHEMA)
        assert pred.columns_without_min_max == pred.columns
        for add in GOLDEN_ADDS:
            file_stats = json.loads(add["stats"], parse_float=parse_float)
            assert pred.file_match(add["partitionValues"], file_stats) is SOME, sql


def _golden_rows(index: int) -> pa.Table:
    """A golden data file read as the current schema: old files hold the narrow types."""
    table = pq.read_table(WIDENED_TABLE / GOLDEN_ADDS[index]["path"])
    target = pa.schema([(f.name, to_arrow(from_delta(f.type))) for f in WIDENED_SCHEMA])
    return table.select(target.names).cast(target)


def test_widened_skipping_is_sound_on_the_golden_data() -> None:
    """Every comparison agrees with the golden rows read as the current types."""
    for sql, index in _golden_predicates():
        pred = parse(sql, WIDENED_SCHEMA)
        rows = _golden_rows(index)
        hits = rows.filter(pred.to_arrow()).num_rows
        verdict = pred.file_match({}, json.loads(GOLDEN_ADDS[index]["stats"]))
        assert not (verdict is NONE and hits), sql
        assert not (verdict is ALL and hits < rows.num_rows), sql


def test_float_statistics_from_before_widening_do_not_bound_the_doubles() -> None:
    """Spark prints a float statistic by its shortest text (the golden file's 3.4 for the
    float 3.4000000953674316). A float 3.3 is 3.299999952316284 as a double, below its
    statistic 3.3: min/max read as doubles would skip a file holding matching rows."""
    float_33 = pa.array([3.3], pa.float32()).cast(pa.float64())
    rows = _golden_rows(0).set_column(2, "float_double", float_33)
    file_stats = json.loads(GOLDEN_ADDS[0]["stats"])
    file_stats["minValues"]["float_double"] = file_stats["maxValues"]["float_double"] = 3.3
    pred = parse("float_double < 3.3", WIDENED_SCHEMA)
    assert rows.filter(pred.to_arrow()).num_rows == 1
    assert pred.file_match({}, file_stats) is SOME


WITH_ID = StructType((*WIDENED_SCHEMA.fields, field("id", "long")))


def _old_stats_with_id(low: int, high: int, null_counts: dict[str, int] | None = None) -> Any:
    """The old golden file's statistics, plus an `id` column (not widened) in [low, high]."""
    file_stats = json.loads(GOLDEN_ADDS[0]["stats"])
    file_stats["minValues"]["id"], file_stats["maxValues"]["id"] = low, high
    file_stats["nullCount"].update({"id": 0, **(null_counts or {})})
    return file_stats


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("id > 100 AND byte_long = 1", NONE),
        ("id >= 1 AND byte_long = 1", SOME),
        ("id > 100 OR byte_long = 1", SOME),
        ("id >= 1 OR byte_long = 100", ALL),
        ("id BETWEEN 1 AND 10 AND float_double IS NOT NULL", ALL),
        ("id IN (50, 60) OR date_timestamp_ntz < '2000-01-01'", SOME),
        ("byte_long IS NULL", NONE),
    ],
)
def test_other_columns_still_skip_in_a_widened_table(sql: str, expected: Match) -> None:
    pred = parse(sql, WITH_ID)
    assert "id" not in pred.columns_without_min_max
    assert pred.file_match({}, _old_stats_with_id(1, 10)) is expected


def test_widened_columns_still_skip_by_null_count() -> None:
    all_null = _old_stats_with_id(1, 10, {"long_decimal": 1})
    assert parse("long_decimal = 4", WITH_ID).file_match({}, all_null) is NONE
    assert parse("long_decimal IS NULL", WITH_ID).file_match({}, all_null) is ALL
    assert parse("int_long IS NOT NULL", WITH_ID).file_match({}, all_null) is ALL


def test_row_group_statistics_of_widened_columns_are_ignored() -> None:
    metadata = pq.ParquetFile(WIDENED_TABLE / GOLDEN_ADDS[0]["path"]).metadata
    group = metadata.row_group(0)
    mins, maxs, nulls = {}, {}, {}
    for c in range(group.num_columns):
        column = group.column(c)
        key, statistics = column.path_in_schema, column.statistics
        nulls[key] = statistics.null_count
        if statistics.has_min_max:  # int8 1 for byte_long, date 2024-09-09 for the ntz, ...
            mins[key], maxs[key] = statistics.min, statistics.max
    for sql, _ in _golden_predicates():
        verdict = parse(sql, WIDENED_SCHEMA).stats_match(group.num_rows, mins, maxs, nulls)
        assert verdict is SOME, sql
    null_test = parse("short_decimal IS NULL", WIDENED_SCHEMA)
    assert null_test.stats_match(group.num_rows, mins, maxs, nulls) is NONE


# --- type widening: nested fields and partitions ------------------------------------------


def widened(name: str, to_type: Any, from_type: str, field_path: str | None = None) -> StructField:
    """A field whose `delta.typeChanges` records one change (of `field_path` if given)."""
    change = {"fromType": from_type, "toType": str(to_type), "tableVersion": 3}
    if field_path:
        change["fieldPath"] = field_path
    return StructField(name, to_type, True, {"delta.typeChanges": [change]})


def test_nested_type_changes_disable_min_max_for_the_whole_column() -> None:
    inner = StructType((widened("a", "long", "integer"), field("b", "long")))
    schema = StructType(
        (
            StructField("st", inner, True, {"delta.columnMapping.physicalName": "col-st"}),
            widened("arr", ArrayType("double"), "float", "element"),
            field("id", "long", **{"delta.typeChanges": []}),
        )
    )
    pred = Predicate.parse("st.b > 5 AND arr IS NOT NULL AND id = 1", schema, [], "name")
    assert pred.columns == ("col-st", "arr", "id")
    assert pred.columns_without_min_max == ("col-st", "arr")
    file_stats: dict[str, Any] = {
        "numRecords": 3,
        "minValues": {"col-st": {"b": 1}, "id": 1},
        "maxValues": {"col-st": {"b": 2}, "id": 1},
        "nullCount": {"col-st": {"b": 0}, "arr": 0, "id": 0},
    }
    assert pred.file_match({}, file_stats) is SOME  # st.b <= 2 is not trusted
    file_stats["minValues"]["id"] = file_stats["maxValues"]["id"] = 2
    assert pred.file_match({}, file_stats) is NONE  # an empty typeChanges list changes nothing


@pytest.mark.parametrize(
    ("column", "from_type", "to_type", "value", "sql"),
    [
        ("pd", "date", "timestamp_ntz", "2024-09-09", "pd = TIMESTAMP_NTZ '2024-09-09 00:00:00'"),
        ("pd", "date", "timestamp_ntz", "2024-09-09 12:00:00", "pd > '2024-09-09'"),
        ("pi", "byte", "decimal(4,1)", "5", "pi = 5.0"),
        ("pi", "integer", "long", "-7", "pi = -7"),
        ("pi", "short", "double", "12", "pi = 12.0D"),
        ("pi", "float", "double", "3.4", "pi = 3.4D"),
        ("pi", "decimal(10,2)", "decimal(20,5)", "67.89", "pi = 67.89"),
    ],
)
def test_partition_values_of_widened_columns_parse_as_the_current_type(
    column: str, from_type: str, to_type: str, value: str, sql: str
) -> None:
    schema = StructType((field("id", "long"), widened(column, to_type, from_type)))
    pred = parse(sql, schema, (column,))
    assert pred.references_only_partitions
    assert pred.columns_without_min_max == ()  # partition values are exact, not statistics
    assert pred.file_match({column: value}, None) is ALL
    assert pred.file_match({column: None}, None) is NONE
