"""Partition values (parse/serialize), Hive partition directories, Delta -> arrow types.

Oracles: the golden `basic_partitioned` table (Delta Spark), deltalake (delta-rs) writing
tables with tricky partition strings, Spark's escapePathName rule written out independently
here, and pyarrow reading back files written with `arrow_schema`.
"""

from __future__ import annotations

import json
import math
import os
import string
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.delta.protocol.arrow_types import (
    FIELD_ID_METADATA_KEY,
    arrow_schema,
    delta_to_arrow_type,
)
from dvtool.delta.protocol.partitions import (
    HIVE_DEFAULT_PARTITION,
    escape_path_name,
    java_double_string,
    java_float_string,
    parse_partition_value,
    partition_arrays,
    partition_directory,
    serialize_partition_value,
)
from dvtool.delta.protocol.schema import ArrayType, MapType, StructField, StructType, parse_schema
from dvtool.errors import LogError
from dvtool.storage.table_storage import Storage
from tests.oracles import GOLDEN

# Spark's ExternalCatalogUtils.charToEscape, restated here as the oracle.
SPARK_ESCAPED = {chr(c) for c in range(1, 32)} | set("\"#%'*/:=?\\\x7f{[]^")


def spark_unescape(text: str) -> str:
    """Spark's ExternalCatalogUtils.unescapePathName."""
    out, i = [], 0
    while i < len(text):
        hex_digits = text[i + 1 : i + 3]
        if (
            text[i] == "%"
            and len(hex_digits) == 2
            and all(c in string.hexdigits for c in hex_digits)
        ):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def roundtrip(value: Any, delta_type: str) -> Any:
    return parse_partition_value(serialize_partition_value(value, delta_type), delta_type)


# Round trips, one per type


@given(st.text(min_size=1))
def test_string_roundtrip(value: str) -> None:
    assert serialize_partition_value(value, "string") == value
    assert roundtrip(value, "string") == value


@pytest.mark.parametrize(
    ("delta_type", "bits"), [("byte", 8), ("short", 16), ("integer", 32), ("long", 64)]
)
@given(data=st.data())
def test_integral_roundtrip(delta_type: str, bits: int, data: st.DataObject) -> None:
    value = data.draw(st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    assert serialize_partition_value(value, delta_type) == str(value)
    assert roundtrip(value, delta_type) == value


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_double_roundtrip(value: float) -> None:
    back = roundtrip(value, "double")
    if math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value
        assert math.copysign(1.0, back) == math.copysign(1.0, value)


@given(st.floats(width=32, allow_nan=True, allow_infinity=True))
def test_float_roundtrip(value: float) -> None:
    back = roundtrip(value, "float")
    if math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value


@given(st.booleans())
def test_boolean_roundtrip(value: bool) -> None:
    assert serialize_partition_value(value, "boolean") == str(value).lower()
    assert roundtrip(value, "boolean") is value


@given(st.dates())
def test_date_roundtrip(value: date) -> None:
    assert roundtrip(value, "date") == value


@given(st.datetimes(timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=-7))])))
def test_timestamp_roundtrip(value: datetime) -> None:
    text = serialize_partition_value(value, "timestamp")
    assert text is not None and text.endswith("Z") and "T" in text
    back = parse_partition_value(text, "timestamp")
    assert back == value  # the same instant
    assert back.utcoffset() == timedelta(0)


@given(st.datetimes())
def test_timestamp_ntz_roundtrip(value: datetime) -> None:
    back = roundtrip(value, "timestamp_ntz")
    assert back == value and back.tzinfo is None


@pytest.mark.parametrize(("precision", "scale"), [(10, 0), (10, 2), (38, 18), (5, 5), (38, 0)])
@given(data=st.data())
def test_decimal_roundtrip(precision: int, scale: int, data: st.DataObject) -> None:
    # From the unscaled integer (st.decimals rounds 38-digit bounds to 28 digits).
    unscaled = data.draw(st.integers(-(10**precision) + 1, 10**precision - 1))
    value = Decimal(f"{unscaled}E-{scale}")
    delta_type = f"decimal({precision},{scale})"
    text = serialize_partition_value(value, delta_type)
    assert text is not None and "E" not in text.upper()
    assert roundtrip(value, delta_type) == value


@given(st.text(min_size=1).map(lambda s: s.encode("utf-8")))
def test_binary_roundtrip(value: bytes) -> None:
    assert roundtrip(value, "binary") == value


ALL_TYPES = [
    "string",
    "long",
    "integer",
    "short",
    "byte",
    "double",
    "float",
    "boolean",
    "date",
    "timestamp",
    "timestamp_ntz",
    "decimal(10,2)",
    "binary",
]


@pytest.mark.parametrize("delta_type", ALL_TYPES)
def test_null_and_empty_string_are_null(delta_type: str) -> None:
    assert parse_partition_value(None, delta_type) is None
    assert parse_partition_value("", delta_type) is None
    assert serialize_partition_value(None, delta_type) is None


def test_empty_string_and_binary_serialize_as_null() -> None:
    """Delta Spark writes empty strings as null partition values."""
    assert serialize_partition_value("", "string") is None
    assert serialize_partition_value(b"", "binary") is None


# Serialized forms


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1.0"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (100.0, "100.0"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1.5e-10, "1.5E-10"),
        (-2.5e300, "-2.5E300"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (5e-324, "4.9E-324"),
    ],
)
def test_java_double_string(value: float, expected: str) -> None:
    assert java_double_string(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.1, "0.1"), (1e10, "1.0E10"), (3.4028234663852886e38, "3.4028235E38"), (2.5, "2.5")],
)
def test_java_float_string(value: float, expected: str) -> None:
    assert java_float_string(value) == expected


def test_serialized_timestamps() -> None:
    ts = datetime(2021, 6, 30, 0, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-8)))
    assert serialize_partition_value(ts, "timestamp") == "2021-06-30T08:00:00.123456Z"
    naive = datetime(1970, 1, 1)
    assert serialize_partition_value(naive, "timestamp") == "1970-01-01T00:00:00.000000Z"
    assert serialize_partition_value(naive, "timestamp_ntz") == "1970-01-01 00:00:00"
    ntz = datetime(2024, 5, 1, 12, 30, 1, 120000)
    assert serialize_partition_value(ntz, "timestamp_ntz") == "2024-05-01 12:30:01.12"
    assert serialize_partition_value(date(24, 1, 2), "date") == "0024-01-02"


def test_serialized_decimals() -> None:
    assert serialize_partition_value(Decimal("1.5"), "decimal(5,2)") == "1.50"
    assert serialize_partition_value(Decimal("1E-8"), "decimal(10,8)") == "0.00000001"
    assert serialize_partition_value(Decimal("-12"), "decimal(4,0)") == "-12"


def test_serialize_rejects_wrong_values() -> None:
    with pytest.raises(ValueError):
        serialize_partition_value(300, "byte")
    with pytest.raises(ValueError):
        serialize_partition_value(True, "long")
    with pytest.raises(ValueError):
        serialize_partition_value(b"\xff", "binary")
    with pytest.raises(ValueError):
        serialize_partition_value(Decimal("1000"), "decimal(3,0)")
    with pytest.raises(ValueError):
        serialize_partition_value(datetime(2020, 1, 1), "date")


# Parsing what writers produce


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01 00:00:00", datetime(1970, 1, 1, tzinfo=timezone.utc)),
        ("1970-01-01 00:00:00.123456", datetime(1970, 1, 1, 0, 0, 0, 123456, timezone.utc)),
        ("1970-01-01T00:00:00.123456Z", datetime(1970, 1, 1, 0, 0, 0, 123456, timezone.utc)),
        ("2021-06-30T00:00:00.5-08:00", datetime(2021, 6, 30, 8, 0, 0, 500000, timezone.utc)),
        ("2021-06-30T10:00:00+0200", datetime(2021, 6, 30, 8, 0, 0, 0, timezone.utc)),
        ("2021-06-30 00:00:00.123456789", datetime(2021, 6, 30, 0, 0, 0, 123456, timezone.utc)),
        ("2021-06-30", datetime(2021, 6, 30, tzinfo=timezone.utc)),
    ],
)
def test_parse_timestamp_forms(text: str, expected: datetime) -> None:
    assert parse_partition_value(text, "timestamp") == expected


def test_parse_other_forms() -> None:
    assert parse_partition_value("2021-01-01T10:00:00", "timestamp_ntz") == datetime(2021, 1, 1, 10)
    assert parse_partition_value("TRUE", "boolean") is True
    assert parse_partition_value("Infinity", "double") == math.inf
    assert parse_partition_value("1.0E10", "float") == 1e10
    assert parse_partition_value("1.005", "decimal(4,2)") == Decimal("1.01")  # half up
    assert parse_partition_value(" 42 ", "integer") == 42
    assert parse_partition_value("\u0001\u0002", "binary") == b"\x01\x02"
    assert parse_partition_value("1", "int") == 1  # Spark SQL spellings of type names


@pytest.mark.parametrize(
    ("text", "delta_type"),
    [
        ("abc", "long"),
        ("128", "byte"),
        ("9223372036854775808", "long"),
        ("1.5", "integer"),
        ("maybe", "boolean"),
        ("2021-13-01", "date"),
        ("2021-01-01 10:00:00Z", "timestamp_ntz"),
        ("yesterday", "timestamp"),
        ("1000", "decimal(3,1)"),
        ("x", "double"),
        ("1", "array<int>"),
    ],
)
def test_parse_errors_are_log_errors(text: str, delta_type: str) -> None:
    with pytest.raises(LogError, match="partition value"):
        parse_partition_value(text, delta_type)


# Constant arrow columns


def test_partition_arrays_types_and_values() -> None:
    columns = [
        ("l", "long"),
        ("i", "integer"),
        ("s", "short"),
        ("b", "byte"),
        ("d", "double"),
        ("f", "float"),
        ("str", "string"),
        ("bool", "boolean"),
        ("date", "date"),
        ("ts", "timestamp"),
        ("ntz", "timestamp_ntz"),
        ("dec", "decimal(7,3)"),
        ("bin", "binary"),
        ("missing", "string"),
        ("null", "long"),
    ]
    values = {
        "l": "-5",
        "i": "7",
        "s": "3",
        "b": "1",
        "d": "2.5",
        "f": "0.1",
        "str": "eu",
        "bool": "false",
        "date": "2024-01-01",
        "ts": "2024-01-01T10:00:00.000000Z",
        "ntz": "2024-01-01 10:00:00",
        "dec": "1.5",
        "bin": "ab",
        "null": None,
    }
    arrays = partition_arrays(values, columns, 3)
    expected_types = {
        "l": pa.int64(),
        "i": pa.int32(),
        "s": pa.int16(),
        "b": pa.int8(),
        "d": pa.float64(),
        "f": pa.float32(),
        "str": pa.string(),
        "bool": pa.bool_(),
        "date": pa.date32(),
        "ts": pa.timestamp("us", tz="UTC"),
        "ntz": pa.timestamp("us"),
        "dec": pa.decimal128(7, 3),
        "bin": pa.binary(),
        "missing": pa.string(),
        "null": pa.int64(),
    }
    assert list(arrays) == [c for c, _ in columns]
    for name, array in arrays.items():
        assert array.type == expected_types[name], name
        assert len(array) == 3
    assert arrays["l"].to_pylist() == [-5] * 3
    assert arrays["f"].to_pylist()[0] == pa.scalar(0.1, pa.float32()).as_py()
    assert arrays["ts"][0].as_py() == datetime(2024, 1, 1, 10, tzinfo=timezone.utc)
    assert arrays["dec"][0].as_py() == Decimal("1.500")
    assert arrays["missing"].null_count == 3 and arrays["null"].null_count == 3
    assert partition_arrays({"x": "1"}, [("x", "long")], 0)["x"].to_pylist() == []


# Hive directories


def test_escape_exactly_spark_characters() -> None:
    for code in range(0, 0x2000):
        ch = chr(code)
        expected = f"%{code:02X}" if ch in SPARK_ESCAPED else ch
        assert escape_path_name(ch) == expected, repr(ch)


@given(st.text())
def test_escape_roundtrips_with_spark_unescape(text: str) -> None:
    escaped = escape_path_name(text)
    assert "/" not in escaped and "=" not in escaped
    assert spark_unescape(escaped) == text


def test_partition_directory_examples() -> None:
    assert partition_directory([("region", "eu"), ("day", "2024-01-01")]) == (
        "region=eu/day=2024-01-01"
    )
    assert partition_directory([("letter", None)]) == "letter=__HIVE_DEFAULT_PARTITION__"
    assert partition_directory([("letter", "")]) == f"letter={HIVE_DEFAULT_PARTITION}"
    assert partition_directory([("a=b", "x/y:z")]) == "a%3Db=x%2Fy%3Az"
    assert partition_directory([("p", "a b}ü")]) == "p=a b}ü"
    assert partition_directory([]) == ""


def test_golden_basic_partitioned_directories() -> None:
    """Every add's directory in the Delta Spark table is partition_directory of its values."""
    table = GOLDEN / "basic_partitioned"
    if not table.is_dir():
        pytest.fail(f"golden table {table} is missing")
    seen = set()
    for log in sorted((table / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "add" not in action:
                continue
            add = action["add"]
            directory = partition_directory(list(add["partitionValues"].items()))
            assert unquote(add["path"]).rpartition("/")[0] == directory
            assert (table / directory).is_dir()
            seen.add(directory)
    assert "letter=__HIVE_DEFAULT_PARTITION__" in seen


TRICKY = [
    "plain",
    "a:b",
    "x=y",
    "p/q",
    "50%",
    "#?*",
    "{[]^\\",
    "quote'\"",
    "\x01c",
    "a b",
    "}",
    "ünï",
    "é\u00a0",
    "日本",
    "tab\tx",
]


def test_directories_vs_deltalake(tmp_path: Path) -> None:
    """deltalake escapes a superset of Spark's characters: Spark's own set identically.

    Differences (we follow Spark): deltalake also percent-encodes space, `}` and every
    non-ASCII character (as UTF-8 bytes), which Spark leaves as they are; and deltalake
    keeps an empty string as a `""` partition value in a `p=` directory, where Spark writes
    NULL in `__HIVE_DEFAULT_PARTITION__`. Both directory names decode to the same value.
    """
    deltalake = pytest.importorskip("deltalake")
    values: list[str | None] = [*TRICKY, None]
    data = pa.table({"p": pa.array(values, pa.string()), "v": list(range(len(values)))})
    deltalake.write_deltalake(str(tmp_path / "t"), data, partition_by=["p"])
    by_value: dict[str | None, str] = {}
    for log in sorted((tmp_path / "t" / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                add = action["add"]
                by_value[add["partitionValues"]["p"]] = add["path"]
    assert set(by_value) == set(values)
    on_disk = set(os.listdir(tmp_path / "t")) - {"_delta_log"}
    for value, log_path in by_value.items():
        theirs = unquote(log_path).rpartition("/")[0]
        assert theirs in on_disk
        ours = partition_directory([("p", value)])
        spark_only = value is None or all(
            ch in SPARK_ESCAPED or (ch.isascii() and ch.isalnum()) for ch in value
        )
        if spark_only:
            assert ours == theirs, value
            # ... and the log paths agree too, once encoded the Delta Spark way.
            file_name = log_path.rpartition("/")[2]
            assert Storage.encode_for_log(f"{ours}/{file_name}") == log_path
        else:
            assert ours != theirs
            assert unquote(ours.partition("=")[2]) == value
            assert unquote(theirs.partition("=")[2]) == value


# Arrow types and schemas


def test_delta_to_arrow_primitives() -> None:
    expected = {
        "long": pa.int64(),
        "integer": pa.int32(),
        "short": pa.int16(),
        "byte": pa.int8(),
        "double": pa.float64(),
        "float": pa.float32(),
        "string": pa.string(),
        "boolean": pa.bool_(),
        "binary": pa.binary(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
        "decimal(38,18)": pa.decimal128(38, 18),
        "decimal(5, 2)": pa.decimal128(5, 2),
    }
    for delta_type, arrow_type in expected.items():
        assert delta_to_arrow_type(delta_type) == arrow_type
    # PROTOCOL.md "Variant data in Parquet": the unshredded struct of two binaries.
    variant = delta_to_arrow_type("variant")
    fields = [(f.name, f.type) for f in variant]
    assert fields == [("value", pa.binary()), ("metadata", pa.binary())]
    with pytest.raises(ValueError):
        delta_to_arrow_type("geometry")


def test_delta_to_arrow_nested() -> None:
    inner = StructType((StructField("x", "long"), StructField("y", "string", nullable=False)))
    t = StructType(
        (
            StructField("s", inner),
            StructField("a", ArrayType("integer", contains_null=False)),
            StructField("m", MapType("string", ArrayType(inner))),
        )
    )
    arrow = delta_to_arrow_type(t)
    assert arrow == pa.struct(
        [
            pa.field("s", pa.struct([("x", pa.int64()), pa.field("y", pa.string(), False)])),
            pa.field("a", pa.list_(pa.field("element", pa.int32(), nullable=False))),
            pa.field(
                "m",
                pa.map_(
                    pa.field("key", pa.string(), nullable=False),
                    pa.field(
                        "value",
                        pa.list_(
                            pa.field(
                                "element",
                                pa.struct([("x", pa.int64()), pa.field("y", pa.string(), False)]),
                            )
                        ),
                    ),
                ),
            ),
        ]
    )


def _mapped(name: str, physical: str, field_id: int, t: Any, nullable: bool = True) -> StructField:
    return StructField(
        name,
        t,
        nullable,
        {"delta.columnMapping.physicalName": physical, "delta.columnMapping.id": field_id},
    )


MAPPED_SCHEMA = StructType(
    (
        _mapped("id", "col-1", 1, "long", nullable=False),
        _mapped("Region", "col-2", 2, "string"),
        _mapped(
            "s",
            "col-3",
            3,
            StructType(
                (_mapped("x", "col-4", 4, "double"), _mapped("ts", "col-5", 5, "timestamp"))
            ),
        ),
        _mapped("tags", "col-6", 6, ArrayType(StructType((_mapped("k", "col-7", 7, "string"),)))),
    )
)


def test_arrow_schema_physical_names_and_field_ids(tmp_path: Path) -> None:
    schema = arrow_schema(MAPPED_SCHEMA, "name", ["region"])
    assert schema.names == ["col-1", "col-3", "col-6"]
    assert not schema.field("col-1").nullable
    assert schema.field("col-1").metadata == {FIELD_ID_METADATA_KEY: b"1"}
    nested = schema.field("col-3").type
    assert [f.name for f in nested] == ["col-4", "col-5"]
    assert nested.field("col-5").metadata == {FIELD_ID_METADATA_KEY: b"5"}
    assert nested.field("col-5").type == pa.timestamp("us", tz="UTC")
    element = schema.field("col-6").type.value_type
    assert element.field("col-7").metadata == {FIELD_ID_METADATA_KEY: b"7"}

    # pyarrow writes them as parquet field ids.
    path = tmp_path / "f.parquet"
    pq.write_table(schema.empty_table(), path)
    text = str(pq.ParquetFile(path).metadata.schema)
    assert "field_id=1 col-1" in text and "field_id=3 col-3" in text
    assert "field_id=4 col-4" in text and "field_id=7 col-7" in text

    none_mode = arrow_schema(MAPPED_SCHEMA, "none", [])
    assert none_mode.names == ["id", "Region", "s", "tags"]
    assert all(f.metadata is None for f in none_mode)
    id_mode = arrow_schema(MAPPED_SCHEMA, "id", [])
    assert id_mode.field("col-2").metadata == {FIELD_ID_METADATA_KEY: b"2"}


def test_arrow_schema_matches_golden_column_mapping_files() -> None:
    """Names and field ids as Delta Spark wrote them in a name-mode table's data files."""
    table = GOLDEN / "dv-with-columnmapping" / "delta"
    if not table.is_dir():
        pytest.fail(f"golden table {table} is missing")
    metadata = None
    for line in (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines():
        action = json.loads(line)
        if "metaData" in action:
            metadata = action["metaData"]
    assert metadata is not None
    schema = parse_schema(metadata["schemaString"])
    mode = metadata["configuration"]["delta.columnMapping.mode"]
    ours = arrow_schema(schema, mode, metadata["partitionColumns"])
    data_file = next(table.rglob("*.parquet"))
    theirs = pq.read_schema(data_file)
    assert ours.names == theirs.names
    parquet = pq.ParquetFile(data_file).metadata.schema
    for i, f in enumerate(ours):
        assert f.metadata is not None
        assert parquet.column(i).name == f.name
        assert f"field_id={f.metadata[FIELD_ID_METADATA_KEY].decode()} {f.name}" in str(parquet)
        assert theirs.field(f.name).type == f.type


@settings(max_examples=30)
@given(st.lists(st.sampled_from(ALL_TYPES[:-1]), min_size=1, max_size=5))
def test_partition_arrays_roundtrip_serialized(types: list[str]) -> None:
    """Arrays built from serialized values hold the serialized values' parses."""
    samples = {
        "string": "x",
        "long": 5,
        "integer": -3,
        "short": 2,
        "byte": 1,
        "double": 0.5,
        "float": 1.5,
        "boolean": True,
        "date": date(2020, 2, 29),
        "timestamp": datetime(2020, 1, 1, 1, 2, 3, 4, timezone.utc),
        "timestamp_ntz": datetime(2020, 1, 1, 1, 2, 3, 4),
        "decimal(10,2)": Decimal("12.34"),
    }
    columns = [(f"c{i}", t) for i, t in enumerate(types)]
    values = {name: serialize_partition_value(samples[t], t) for name, t in columns}
    arrays = partition_arrays(values, columns, 2)
    for name, t in columns:
        assert arrays[name].to_pylist() == [samples[t]] * 2
