"""Tests of the independent oracles in tests/oracles.py, on golden tables and hand-made cases.

The expected values are written here from reading the parquet files with pyarrow and
reasoning from the Delta schema and PROTOCOL.md, never from dvtool (which this file must not
import) nor from the oracle's own output.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.oracles import (
    GOLDEN,
    UTC,
    canon,
    check_type_changes,
    copy_golden,
    parse_partition_value,
    raw_rows,
    row_id_high_water_mark,
    row_tracking_rows,
    variant_decode,
    variant_from_parquet,
    widening_supported,
)

Row = dict[str, Any]


def typed(rows: list[Row]) -> list[dict[str, tuple[str, str]]]:
    """Rows with each value as (Python type, repr): 5 and 5.0, or Decimal('1') and
    Decimal('1.0'), are different here, as a reader converting to the current type must be."""
    return sorted(
        ({k: (type(v).__name__, repr(v)) for k, v in row.items()} for row in rows), key=repr
    )


# -- type widening --------------------------------------------------------------------------

# Row of the first file (written before the widening, narrow types: int8, int32, float32,
# decimal(10,2), date32 ...) converted to the current types of the schema at version 2.
TYPE_WIDENING_OLD_ROW: Row = {
    "byte_long": 1,  # int8 1 -> long
    "int_long": 2,  # int32 -> long
    "float_double": 3.4000000953674316,  # float32 3.4 -> double: the exact float32 value
    "byte_double": 5.0,
    "short_double": 6.0,
    "int_double": 7.0,
    "decimal_decimal_same_scale": Decimal("123.45"),  # decimal(10,2) -> decimal(20,2)
    "decimal_decimal_greater_scale": Decimal("67.89000"),  # decimal(10,2) -> decimal(20,5)
    "byte_decimal": Decimal("1.0"),  # int8 -> decimal(4,1)
    "short_decimal": Decimal("2.0"),  # int16 -> decimal(6,1)
    "int_decimal": Decimal("3.0"),  # int32 -> decimal(11,1)
    "long_decimal": Decimal("4.0"),  # int64 -> decimal(21,1)
    "date_timestamp_ntz": dt.datetime(2024, 9, 9, 0, 0),  # date -> timestamp_ntz: midnight
}
# Row of the second file, already written with the wide types.
TYPE_WIDENING_NEW_ROW: Row = {
    "byte_long": 9223372036854775807,
    "int_long": 9223372036854775807,
    "float_double": 1.234567890123,
    "byte_double": 1.234567890123,
    "short_double": 1.234567890123,
    "int_double": 1.234567890123,
    "decimal_decimal_same_scale": Decimal("12345678901234.56"),
    "decimal_decimal_greater_scale": Decimal("12345678901.23456"),
    "byte_decimal": Decimal("123.4"),
    "short_decimal": Decimal("12345.6"),
    "int_decimal": Decimal("1234567890.1"),
    "long_decimal": Decimal("123456789012345678.9"),
    "date_timestamp_ntz": dt.datetime(2024, 9, 9, 12, 34, 56, 123456),
}


def test_type_widening_golden_rows_are_converted_to_the_current_types() -> None:
    rows = raw_rows(GOLDEN / "type-widening")
    assert typed(rows) == typed([TYPE_WIDENING_OLD_ROW, TYPE_WIDENING_NEW_ROW])


def test_type_widening_golden_old_file_really_holds_narrow_types() -> None:
    """The premise of the test above: the first file still has the pre-widening types."""
    files = sorted((GOLDEN / "type-widening").glob("*.parquet"))
    narrow = [f for f in files if pq.read_schema(f).field("byte_long").type == pa.int8()]
    assert len(narrow) == 1
    schema = pq.read_schema(narrow[0])
    assert schema.field("float_double").type == pa.float32()
    assert schema.field("date_timestamp_ntz").type == pa.date32()
    assert schema.field("decimal_decimal_greater_scale").type == pa.decimal128(10, 2)


@pytest.mark.parametrize(
    ("from_type", "to_type", "ok"),
    [
        ("byte", "short", True),
        ("short", "integer", True),
        ("integer", "long", True),
        ("long", "integer", False),
        ("float", "double", True),
        ("integer", "double", True),
        ("long", "double", False),
        ("date", "timestamp_ntz", True),
        ("date", "timestamp", False),
        ("decimal(10,2)", "decimal(20,5)", True),
        ("decimal(10,2)", "decimal(11,4)", False),  # k1 = 1 < k2 = 2
        ("decimal(10,2)", "decimal(10,1)", False),
        ("integer", "decimal(10,0)", True),
        ("integer", "decimal(10,1)", False),  # 9 integral digits < 10
        ("byte", "decimal(4,1)", True),  # as Delta Spark (the golden table)
        ("long", "decimal(20,0)", True),
        ("long", "decimal(21,2)", False),
        ("string", "long", False),
    ],
)
def test_widening_supported(from_type: str, to_type: str, ok: bool) -> None:
    assert widening_supported(from_type, to_type) is ok


def test_unsupported_type_change_is_refused(tmp_path: Path) -> None:
    """Readers must fail on a type change they do not support (here long -> integer)."""
    table = copy_golden("type-widening", tmp_path)
    log = table / "_delta_log" / "00000000000000000002.json"
    lines = log.read_text().splitlines()
    for i, line in enumerate(lines):
        action = json.loads(line)
        if "metaData" in action:
            schema = json.loads(action["metaData"]["schemaString"])
            schema["fields"][0]["metadata"]["delta.typeChanges"][0]["fromType"] = "string"
            action["metaData"]["schemaString"] = json.dumps(schema)
            lines[i] = json.dumps(action)
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="unsupported type change of 'byte_long'"):
        raw_rows(table)


def test_nested_type_changes_are_checked() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {
                "name": "s",
                "type": {
                    "type": "array",
                    "elementType": {
                        "type": "struct",
                        "fields": [
                            {
                                "name": "x",
                                "type": "long",
                                "nullable": True,
                                "metadata": {
                                    "delta.typeChanges": [{"fromType": "double", "toType": "long"}]
                                },
                            }
                        ],
                    },
                    "containsNull": True,
                },
                "nullable": True,
                "metadata": {},
            }
        ],
    }
    with pytest.raises(ValueError, match="'x'"):
        check_type_changes(schema)


# -- partition values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "delta_type", "expected"),
    [
        ("7", "integer", 7),
        ("-3", "byte", -3),
        ("", "integer", None),
        (None, "string", None),
        ("a b", "string", "a b"),
        ("1970-01-01", "date", dt.date(1970, 1, 1)),
        ("true", "boolean", True),
        ("false", "boolean", False),
        ("1.5", "double", 1.5),
        ("12.3", "decimal(10,4)", Decimal("12.3000")),
        ("5", "decimal(4,1)", Decimal("5.0")),
        ("1970-01-01 00:00:00", "timestamp", dt.datetime(1970, 1, 1, tzinfo=UTC)),
        (
            "2024-03-04 05:06:07.123456",
            "timestamp",
            dt.datetime(2024, 3, 4, 5, 6, 7, 123456, tzinfo=UTC),
        ),
        (
            "2024-03-04T05:06:07.5Z",
            "timestamp",
            dt.datetime(2024, 3, 4, 5, 6, 7, 500000, tzinfo=UTC),
        ),
        (
            "2024-03-04T07:06:07+02:00",
            "timestamp",
            dt.datetime(2024, 3, 4, 5, 6, 7, tzinfo=UTC),
        ),
        ("2024-03-04 05:06:07", "timestamp_ntz", dt.datetime(2024, 3, 4, 5, 6, 7)),
        ("2024-03-04 05:06:07.000001", "timestamp_ntz", dt.datetime(2024, 3, 4, 5, 6, 7, 1)),
    ],
)
def test_partition_values(text: str | None, delta_type: str, expected: Any) -> None:
    value = parse_partition_value(text, delta_type)
    assert (type(value), value) == (type(expected), expected)
    if isinstance(expected, dt.datetime):
        assert (value.tzinfo is None) == (expected.tzinfo is None)
    if isinstance(expected, Decimal):
        assert value.as_tuple().exponent == expected.as_tuple().exponent


def test_nan_and_infinity_partition_values() -> None:
    assert str(parse_partition_value("NaN", "double")) == "nan"
    assert parse_partition_value("-Infinity", "double") == float("-inf")


# -- golden tables ---------------------------------------------------------------------------


def test_materialize_partition_columns_golden_rows() -> None:
    """The null partition is JSON null in the log (the directory says
    __HIVE_DEFAULT_PARTITION__); `letter` appears once per row."""
    rows = raw_rows(GOLDEN / "partitioned-with-materialize-feature")
    expected = [
        {"letter": "a", "number": 1, "a_float": 1.1},
        {"letter": "b", "number": 2, "a_float": 2.2},
        {"letter": "c", "number": 3, "a_float": 3.3},
        {"letter": "a", "number": 4, "a_float": 4.4},
        {"letter": "e", "number": 5, "a_float": 5.5},
        {"letter": None, "number": 6, "a_float": 6.6},
    ]
    assert canon(rows) == canon(expected)
    assert all(list(row) == ["letter", "number", "a_float"] for row in rows)


def test_column_mapping_name_mode_golden_rows_use_logical_names() -> None:
    rows = raw_rows(GOLDEN / "dv-with-columnmapping" / "delta")
    assert len(rows) == 35
    assert {tuple(sorted(row)) for row in rows} == {("col1", "col2", "part")}


# -- hand-made tables ------------------------------------------------------------------------


def field(
    name: str, data_type: Any, column_id: int | None = None, physical: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if column_id is not None:
        metadata["delta.columnMapping.id"] = column_id
        metadata["delta.columnMapping.physicalName"] = physical or name
    return {"name": name, "type": data_type, "nullable": True, "metadata": metadata}


def one_file_table(
    root: Path,
    fields: list[dict[str, Any]],
    files: list[pa.Table],
    *,
    configuration: dict[str, str] | None = None,
    add_fields: list[dict[str, Any]] | None = None,
) -> Path:
    """A table whose JSON commit 0 adds `files` under the schema `fields`."""
    root.mkdir()
    (root / "_delta_log").mkdir()
    actions: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "t",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": [],
                "configuration": configuration or {},
                "createdTime": 0,
            }
        },
    ]
    for i, data in enumerate(files):
        pq.write_table(data, root / f"f{i}.parquet")
        add = {"path": f"f{i}.parquet", "partitionValues": {}, "size": 1, "dataChange": True}
        add.update((add_fields or [{}] * len(files))[i])
        actions.append({"add": add})
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (root / "_delta_log" / "00000000000000000000.json").write_text(text)
    return root


def with_id(name: str, arrow_type: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, arrow_type, metadata={b"PARQUET:field_id": str(field_id).encode()})


def test_id_mode_resolves_by_field_id_and_falls_back_to_names(tmp_path: Path) -> None:
    fields = [field("a", "long", 1, "col-a"), field("b", "string", 2, "col-b")]
    by_id = pa.table(
        [pa.array([1]), pa.array(["x"])],
        schema=pa.schema([with_id("old-a", pa.int64(), 1), with_id("old-b", pa.string(), 2)]),
    )
    missing = pa.table([pa.array([2])], schema=pa.schema([with_id("zzz", pa.int64(), 1)]))
    # a file without any field id: read by physical name
    no_ids = pa.table({"col-a": [3], "col-b": ["z"], "a": [99]})
    table = one_file_table(
        tmp_path / "t",
        fields,
        [by_id, missing, no_ids],
        configuration={"delta.columnMapping.mode": "id"},
    )
    assert canon(raw_rows(table)) == canon(
        [{"a": 1, "b": "x"}, {"a": 2, "b": None}, {"a": 3, "b": "z"}]
    )


def test_name_mode_resolves_nested_physical_names_and_missing_columns(tmp_path: Path) -> None:
    inner = {"type": "struct", "fields": [field("c", "integer", 3, "col-c")]}
    fields = [
        field("a", "long", 1, "col-a"),
        field("s", inner, 2, "col-s"),
        field("n", "string", 4, "col-n"),
    ]
    data = pa.table(
        {
            "col-a": pa.array([1, 2], pa.int64()),
            "col-s": pa.array([{"col-c": 5}, None], pa.struct([("col-c", pa.int32())])),
        }
    )
    table = one_file_table(
        tmp_path / "t", fields, [data], configuration={"delta.columnMapping.mode": "name"}
    )
    assert raw_rows(table) == [{"a": 1, "s": {"c": 5}, "n": None}, {"a": 2, "s": None, "n": None}]


def test_nested_values_are_widened(tmp_path: Path) -> None:
    """Struct fields, array elements and map keys / values are converted too."""
    inner = {"type": "struct", "fields": [field("x", "long"), field("d", "decimal(6,3)")]}
    fields = [
        field("s", inner),
        field("l", {"type": "array", "elementType": "double", "containsNull": True}),
        field(
            "m",
            {
                "type": "map",
                "keyType": "long",
                "valueType": "timestamp_ntz",
                "valueContainsNull": True,
            },
        ),
    ]
    data = pa.table(
        {
            "s": pa.array(
                [{"x": 1, "d": Decimal("1.5")}],
                pa.struct([("x", pa.int32()), ("d", pa.decimal128(4, 1))]),
            ),
            "l": pa.array([[1, None]], pa.list_(pa.int16())),
            "m": pa.array([[(7, dt.date(2020, 1, 2))]], pa.map_(pa.int8(), pa.date32())),
        }
    )
    table = one_file_table(tmp_path / "t", fields, [data])
    (row,) = raw_rows(table)
    assert typed([row]) == typed(
        [
            {
                "s": {"x": 1, "d": Decimal("1.500")},
                "l": [1.0, None],
                "m": [(7, dt.datetime(2020, 1, 2))],
            }
        ]
    )
    assert row["s"]["d"].as_tuple().exponent == -3 and isinstance(row["l"][0], float)


def test_row_tracking_reader_rules(tmp_path: Path) -> None:
    """Materialized values win when non-null; else baseRowId + physical index and
    defaultRowCommitVersion; the hidden columns never show up; DV'd rows are skipped."""
    config = {
        "delta.enableRowTracking": "true",
        "delta.rowTracking.materializedRowIdColumnName": "_rid",
        "delta.rowTracking.materializedRowCommitVersionColumnName": "_rv",
    }
    materialized = pa.table(
        {
            "a": [0, 1, 2],
            "_rid": pa.array([100, None, 102], pa.int64()),
            "_rv": pa.array([None, 5, None], pa.int64()),
        }
    )
    plain = pa.table({"a": [3, 4]})
    table = one_file_table(
        tmp_path / "t",
        [field("a", "long")],
        [materialized, plain],
        configuration=config,
        add_fields=[
            {"baseRowId": 10, "defaultRowCommitVersion": 3},
            {"baseRowId": 20, "defaultRowCommitVersion": 4},
        ],
    )
    (table / "_delta_log" / "00000000000000000001.json").write_text(
        json.dumps(
            {
                "domainMetadata": {
                    "domain": "delta.rowTracking",
                    "configuration": '{"rowIdHighWaterMark":102}',
                    "removed": False,
                }
            }
        )
        + "\n"
    )
    assert sorted(row_tracking_rows(table), key=lambda r: r["a"]) == [
        {"a": 0, "_row_id": 100, "_row_commit_version": 3},
        {"a": 1, "_row_id": 11, "_row_commit_version": 5},
        {"a": 2, "_row_id": 102, "_row_commit_version": 3},
        {"a": 3, "_row_id": 20, "_row_commit_version": 4},
        {"a": 4, "_row_id": 21, "_row_commit_version": 4},
    ]
    assert row_id_high_water_mark(table) == 102


# -- variant encoding ------------------------------------------------------------------------


def test_variant_decode_hand_encoded_values() -> None:
    """Bytes written here by hand from the Parquet VariantEncoding spec."""
    empty = b"\x01\x00\x00"  # version 1, offset size 1, empty dictionary
    assert variant_decode(empty, b"\x00") is None
    assert variant_decode(empty, b"\x04") is True
    assert variant_decode(empty, b"\x0c\xff") == -1  # int8
    assert variant_decode(empty, b"\x14" + (70000).to_bytes(4, "little")) == 70000  # int32
    assert variant_decode(empty, b"\x20\x02" + (1234).to_bytes(4, "little")) == Decimal("12.34")
    assert variant_decode(empty, b"\x2c" + (1).to_bytes(4, "little")) == dt.date(1970, 1, 2)
    assert variant_decode(empty, b"\x09hi") == "hi"  # short string
    # dictionary ["k"]; object {k: "v"}; array [1, "v"]
    meta = b"\x01\x01\x00\x01k"
    assert variant_decode(meta, b"\x02\x01\x00\x00\x02\x05v") == {"k": "v"}
    assert variant_decode(empty, b"\x03\x02\x00\x02\x04\x0c\x01\x05v") == [1, "v"]
    # shredded: typed field, missing field, residual object
    shredded = {
        "metadata": b"\x01\x02\x00\x01\x02ab",
        "value": b"\x02\x01\x01\x00\x01\x04",  # residual {b: true}
        "typed_value": {"a": {"value": None, "typed_value": 5}},
    }
    assert variant_from_parquet(shredded) == {"a": 5, "b": True}
    assert variant_from_parquet(None) is None
