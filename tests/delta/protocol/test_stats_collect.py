"""Per-file statistics collection, checked against independently computed values and deltalake.

The oracle for random tables is plain python over `to_pylist()` (sorting, counting Nones);
for string truncation it is Delta Spark's own `truncateMaxStringAgg` test cases; deltalake
(delta-rs) writes the same data where its statistics have the same meaning.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.delta.protocol.schema import StructField, StructType
from dvtool.delta.protocol.stats_collect import (
    StatsCollector,
    parse_column_list,
    physical_column_paths,
    stats_columns_spec,
    stats_json,
    truncate_max_string,
    truncate_min_string,
)
from dvtool.errors import LogError

MAX_CHAR = "\U0010ffff"
DEL = "\x7f"
EPOCH = datetime(1970, 1, 1)


def collect(data: pa.Table | pa.RecordBatch, indexed: Any = 32, **kw: Any) -> dict[str, Any]:
    collector = StatsCollector(data.schema, indexed, **kw)
    collector.update(data)
    return collector.result()


def strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in stats JSON")

    return json.loads(text, parse_constant=refuse, parse_float=Decimal)


# Random tables vs plain python


ROW = st.fixed_dictionaries(
    {
        "i": st.none() | st.integers(-(2**63), 2**63 - 1),
        "small": st.none() | st.integers(-128, 127),
        "d": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "s": st.none() | st.text(max_size=40),
        "day": st.none() | st.dates(min_value=date(1, 1, 1)),
        "dec": st.none() | st.integers(-(10**9) + 1, 10**9 - 1).map(lambda u: Decimal(f"{u}E-3")),
        "st": st.none()
        | st.fixed_dictionaries(
            {"x": st.none() | st.integers(-1000, 1000), "y": st.none() | st.text(max_size=5)}
        ),
        "flag": st.none() | st.booleans(),
        "blob": st.none() | st.binary(max_size=4),
        "arr": st.none() | st.lists(st.integers(0, 3), max_size=2),
    }
)
SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("small", pa.int8()),
        ("d", pa.float64()),
        ("s", pa.string()),
        ("day", pa.date32()),
        ("dec", pa.decimal128(12, 3)),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("flag", pa.bool_()),
        ("blob", pa.binary()),
        ("arr", pa.list_(pa.int64())),
    ]
)


def leaf_values(rows: list[dict[str, Any]], path: tuple[str, ...]) -> list[Any]:
    out = []
    for row in rows:
        value: Any = row
        for name in path:
            value = None if value is None else value[name]
        out.append(value)
    return out


def expected_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    leaves = [(f,) for f in SCHEMA.names if f != "st"] + [("st", "x"), ("st", "y")]
    order = {name: i for i, name in enumerate(SCHEMA.names)}
    for path in sorted(leaves, key=lambda p: order[p[0]]):
        values = leaf_values(rows, path)
        present = [v for v in values if v is not None]
        target_n = nulls.setdefault(path[0], {}) if len(path) > 1 else nulls
        target_n[path[-1]] = len(values) - len(present)
        if path[0] in ("flag", "blob", "arr") or not present:
            continue
        low, high = min(present), max(present)
        if path[0] == "day":
            low, high = low.isoformat().rjust(10, "0"), high.isoformat().rjust(10, "0")
        if path in (("s",), ("st", "y")):
            low = low[:32]
            high = truncate_max_string(high)
            if high is None:
                continue
        for target, v in ((minimum, low), (maximum, high)):
            (target.setdefault(path[0], {}) if len(path) > 1 else target)[path[-1]] = v
    return {
        "numRecords": len(rows),
        "minValues": minimum,
        "maxValues": maximum,
        "nullCount": nulls,
        "tightBounds": True,
    }


@settings(max_examples=60, deadline=None)
@given(st.lists(ROW, max_size=30), st.lists(st.integers(0, 30), max_size=4))
def test_random_tables_match_python(rows: list[dict[str, Any]], cuts: list[int]) -> None:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    expected = expected_stats(rows)
    # One batch, and the same rows in arbitrary batches, give the same statistics.
    assert collect(table) == expected
    collector = StatsCollector(SCHEMA)
    bounds = sorted({0, len(rows), *[min(c, len(rows)) for c in cuts]})
    for start, end in itertools.pairwise(bounds):
        collector.update(table.slice(start, end - start))
    assert collector.result() == expected
    text = stats_json(expected)
    assert re.match(r'^\{"numRecords":\d+', text)
    assert strict_json(text) == json.loads(text, parse_float=Decimal)


def test_struct_nulls_count_for_children() -> None:
    struct = pa.array(
        [{"a": {"b": 1}}, None, {"a": None}, {"a": {"b": None}}],
        pa.struct([("a", pa.struct([("b", pa.int64())]))]),
    )
    stats = collect(pa.table({"s": struct}))
    assert stats["nullCount"] == {"s": {"a": {"b": 3}}}
    assert stats["minValues"] == {"s": {"a": {"b": 1}}}


def test_all_null_columns_and_empty_files() -> None:
    table = pa.table(
        {
            "n": pa.nulls(3, pa.int64()),
            "s": pa.nulls(3, pa.string()),
            "st": pa.nulls(3, pa.struct([("x", pa.int32())])),
        }
    )
    stats = collect(table)
    assert stats["minValues"] == {} and stats["maxValues"] == {}
    assert stats["nullCount"] == {"n": 3, "s": 3, "st": {"x": 3}}
    empty = collect(table.slice(0, 0))
    assert empty["numRecords"] == 0
    assert empty["nullCount"] == {"n": 0, "s": 0, "st": {"x": 0}}
    assert stats_json(empty).startswith('{"numRecords":0,')


def test_booleans_binaries_arrays_maps_get_null_counts_only() -> None:
    table = pa.table(
        {
            "b": pa.array([True, None, False]),
            "bin": pa.array([b"a", b"b", None]),
            "l": pa.array([[1], None, None], pa.list_(pa.int32())),
            "m": pa.array([[("k", 1)], [], None], pa.map_(pa.string(), pa.int32())),
        }
    )
    stats = collect(table)
    assert stats["minValues"] == {} and stats["maxValues"] == {}
    assert stats["nullCount"] == {"b": 1, "bin": 1, "l": 2, "m": 1}


# Timestamps


def test_timestamps_truncated_to_milliseconds() -> None:
    values = [
        datetime(2021, 1, 1, 0, 0, 0, 999999, tzinfo=timezone.utc),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),  # floors, not rounds
        None,
    ]
    table = pa.table(
        {
            "ts": pa.array(values, pa.timestamp("us", tz="UTC")),
            "paris": pa.array(values, pa.timestamp("us", tz="Europe/Paris")),
            "ntz": pa.array([v and v.replace(tzinfo=None) for v in values], pa.timestamp("us")),
            "ns": pa.array(values, pa.timestamp("ns", tz="UTC")),
            "sec": pa.array([datetime(2000, 1, 1, 0, 0, 1), None, None], pa.timestamp("s")),
        }
    )
    stats = collect(table)
    assert stats["minValues"] == {
        "ts": "1969-12-31T23:59:59.999Z",
        "paris": "1969-12-31T23:59:59.999Z",
        "ntz": "1969-12-31T23:59:59.999",
        "ns": "1969-12-31T23:59:59.999Z",
        "sec": "2000-01-01T00:00:01.000",
    }
    assert stats["maxValues"]["ts"] == "2021-01-01T00:00:00.999Z"
    assert stats["maxValues"]["ntz"] == "2021-01-01T00:00:00.999"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.none() | st.integers(-(2**50), 2**50), min_size=1, max_size=20))
def test_timestamp_bounds_vs_python(micros: list[int | None]) -> None:
    table = pa.table({"t": pa.array(micros, pa.timestamp("us", tz="UTC"))})
    stats = collect(table)
    present = [m for m in micros if m is not None]
    if not present:
        assert "t" not in stats["minValues"]
        return

    def text(m: int) -> str:
        value = EPOCH + timedelta(milliseconds=m // 1000)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"

    assert stats["minValues"]["t"] == text(min(present))
    assert stats["maxValues"]["t"] == text(max(present))


# Strings


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Delta Spark's StatisticsCollectionSuite "Truncate max string" cases (prefix 6):
        # there U+FFFD is an input character, U+10FFFF and U+007F are tie-breakers.
        ("abcd", "abcd"),
        ("abcdef", "abcdef"),
        ("abcde\ufffd", "abcde\ufffd"),
        ("abcd\ufffdabcd", "abcd\ufffda" + DEL),
        ("\ufffdabcd", "\ufffdabcd"),
        ("abcdef\ufffd", "abcdef" + MAX_CHAR),
        ("abcdef-abcdef\ufffd", "abcdef" + DEL),
        ("abcdef\ufffdabcdef", "abcdef" + MAX_CHAR),
        ("abcdef" + MAX_CHAR + "abcdef", "abcdef" + MAX_CHAR + DEL),
        ("abcdef\ufffdabcdef\ufffdabcdef\ufffdabcdef", "abcdef" + MAX_CHAR),
        # A surrogate pair is not split; a run of U+10FFFF beyond twice the prefix: no bound.
        ("abcde\U0001f600xyz", "abcde\U0001f600" + DEL),
        ("abcdef" + MAX_CHAR * 3 + "z", "abcdef" + MAX_CHAR * 3 + DEL),
        ("abcdef" + MAX_CHAR * 4 + "z", None),
        ("abcdef" + MAX_CHAR * 2, "abcdef" + MAX_CHAR * 2),
    ],
)
def test_truncate_max_string_like_delta_spark(value: str, expected: str | None) -> None:
    assert truncate_max_string(value, 6) == expected


@given(st.lists(st.text(), min_size=1, max_size=8), st.integers(1, 8))
def test_truncated_max_is_an_upper_bound(values: list[str], prefix: int) -> None:
    """In UTF-8 byte order (Delta's string order) no value exceeds the truncated max."""
    high = truncate_max_string(max(values), prefix)
    if high is None:
        return
    assert all(v.encode() <= high.encode() for v in values)
    assert len(high.encode("utf-16-le")) // 2 <= 2 * prefix + 2
    low = truncate_min_string(min(values), prefix)
    assert all(low.encode() <= v.encode() for v in values)


def test_string_stats_truncation_in_collector() -> None:
    long_a, long_b = "a" * 40, "b" * 40 + "z"
    stats = collect(pa.table({"s": [long_a, long_b, None], "short": ["x", "y", "z"]}))
    assert stats["minValues"]["s"] == "a" * 32
    assert stats["maxValues"]["s"] == "b" * 32 + DEL
    assert stats["maxValues"]["short"] == "z"
    text = stats_json(stats)
    assert strict_json(text)["maxValues"]["s"] == "b" * 32 + DEL
    emoji = collect(pa.table({"e": ["\U0001f600" * 40]}), string_prefix_length=32)
    assert emoji["maxValues"]["e"] == "\U0001f600" * 16 + MAX_CHAR
    assert emoji["minValues"]["e"] == "\U0001f600" * 32  # min: 32 characters (Spark substring)


def test_string_variants_and_dictionaries() -> None:
    table = pa.table(
        {
            "large": pa.array(["b", "a"], pa.large_string()),
            "dict": pa.array(["q", "p", None]).dictionary_encode().slice(0, 2),
        }
    )
    stats = collect(table)
    assert stats["minValues"] == {"large": "a", "dict": "p"}
    assert stats["maxValues"] == {"large": "b", "dict": "q"}


# Floats


def test_nan_and_infinities_never_reach_json() -> None:
    table = pa.table(
        {
            "nan": pa.array([1.0, math.nan, -2.0]),
            "only_nan": pa.array([math.nan, None, math.nan]),
            "inf": pa.array([1.0, math.inf, None]),
            "ninf": pa.array([-math.inf, 3.0, None]),
            "f32": pa.array([0.1, 2.5, None], pa.float32()),
        }
    )
    stats = collect(table)
    # NaN sorts above every number (Spark): min is the smallest number, max is unknown.
    assert stats["minValues"] == {"nan": -2.0, "inf": 1.0, "f32": 0.1}
    assert stats["maxValues"] == {"ninf": 3.0, "f32": 2.5}
    assert stats["nullCount"]["only_nan"] == 1
    strict_json(stats_json(stats))
    with pytest.raises(ValueError):
        stats_json({"numRecords": 1, "minValues": {"x": math.nan}})


def test_nan_in_a_later_batch_drops_the_max() -> None:
    collector = StatsCollector(pa.schema([("d", pa.float64())]))
    collector.update(pa.record_batch({"d": [1.0, 2.0]}))
    collector.update(pa.record_batch({"d": [math.nan]}))
    result = collector.result()
    assert result["minValues"] == {"d": 1.0} and result["maxValues"] == {}


def test_decimals_are_json_numbers() -> None:
    values = [Decimal("12345678901234567890.123456789012345678"), Decimal("-0.000000000000000001")]
    stats = collect(pa.table({"dec": pa.array(values, pa.decimal128(38, 18))}))
    text = stats_json(stats)
    assert '"dec":-0.000000000000000001' in text
    parsed = strict_json(text)
    assert parsed["maxValues"]["dec"] == values[0]
    assert parsed["minValues"]["dec"] == values[1]


# Which columns


NESTED = pa.schema(
    [
        ("a", pa.int64()),
        (
            "s",
            pa.struct(
                [("x", pa.int64()), ("t", pa.struct([("y", pa.int64())])), ("z", pa.string())]
            ),
        ),
        ("m", pa.map_(pa.string(), pa.int64())),
        ("b", pa.int64()),
    ]
)


@pytest.mark.parametrize(
    ("indexed", "expected"),
    [
        (0, []),
        (1, [("a",)]),
        (2, [("a",), ("s", "x")]),
        (3, [("a",), ("s", "x"), ("s", "t", "y")]),
        (5, [("a",), ("s", "x"), ("s", "t", "y"), ("s", "z"), ("m",)]),
        (6, [("a",), ("s", "x"), ("s", "t", "y"), ("s", "z"), ("m",), ("b",)]),
        (32, [("a",), ("s", "x"), ("s", "t", "y"), ("s", "z"), ("m",), ("b",)]),
        (-1, [("a",), ("s", "x"), ("s", "t", "y"), ("s", "z"), ("m",), ("b",)]),
        (["b", "a"], [("a",), ("b",)]),
        (["s.t"], [("s", "t", "y")]),
        (["S.Z", "nope", "a.b"], [("s", "z")]),
        ([("s", "x"), "m"], [("s", "x"), ("m",)]),
        (["s"], [("s", "x"), ("s", "t", "y"), ("s", "z")]),
    ],
)
def test_indexed_columns(indexed: Any, expected: list[tuple[str, ...]]) -> None:
    assert StatsCollector(NESTED, indexed).columns == expected


def test_num_indexed_cols_cut_off_in_stats() -> None:
    names = [f"c{i}" for i in range(40)]
    table = pa.table({n: [i, i + 1] for i, n in enumerate(names)})
    stats = collect(table)
    assert list(stats["minValues"]) == names[:32]
    assert list(stats["nullCount"]) == names[:32]
    nested = pa.table(
        {
            "first": [1],
            "s": pa.array([{"x": 1, "y": 2}], pa.struct([("x", pa.int64()), ("y", pa.int64())])),
            "last": [3],
        }
    )
    assert collect(nested, 2)["minValues"] == {"first": 1, "s": {"x": 1}}


def test_missing_columns_count_as_null() -> None:
    collector = StatsCollector(pa.schema([("a", pa.int64()), ("b", pa.int64())]))
    collector.update(pa.record_batch({"a": [1, 2]}))
    assert collector.result()["nullCount"] == {"a": 0, "b": 2}


def test_parse_column_list() -> None:
    assert parse_column_list("a, b.c ,`x.y`.z, `we``ird`") == [
        ("a",),
        ("b", "c"),
        ("x.y", "z"),
        ("we`ird",),
    ]
    assert parse_column_list("  ") == []
    for bad in ("a,,b", "`open", "a..b", "a b"):
        with pytest.raises(LogError):
            parse_column_list(bad)


def mapped(name: str, physical: str, t: Any) -> StructField:
    return StructField(name, t, True, {"delta.columnMapping.physicalName": physical})


TABLE_SCHEMA = StructType(
    (
        mapped("Id", "col-1", "long"),
        mapped("info", "col-2", StructType((mapped("city", "col-3", "string"),))),
    )
)


def test_stats_columns_from_configuration() -> None:
    assert stats_columns_spec({}, TABLE_SCHEMA, "name") == 32
    assert stats_columns_spec({"delta.dataSkippingNumIndexedCols": "5"}, TABLE_SCHEMA, "name") == 5
    spec = stats_columns_spec(
        {
            "delta.dataSkippingStatsColumns": "id,INFO.city,unknown",
            "delta.dataSkippingNumIndexedCols": "1",
        },
        TABLE_SCHEMA,
        "name",
    )
    assert spec == [("col-1",), ("col-2", "col-3")]
    assert physical_column_paths(TABLE_SCHEMA, [("info",), ("id", "x")], "none") == [("info",)]
    with pytest.raises(LogError):
        stats_columns_spec({"delta.dataSkippingNumIndexedCols": "many"}, TABLE_SCHEMA, "none")


def test_stats_json_order_and_tight_bounds() -> None:
    collector = StatsCollector(pa.schema([("a", pa.int64())]))
    collector.update(pa.table({"a": [5]}))
    assert "tightBounds" not in collector.result(None)
    assert collector.result(False)["tightBounds"] is False
    reordered = {"nullCount": {"a": 0}, "tightBounds": True, "numRecords": 1, "minValues": {}}
    assert stats_json(reordered) == (
        '{"numRecords":1,"minValues":{},"nullCount":{"a":0},"tightBounds":true}'
    )


# Against deltalake


def test_matches_deltalake_where_semantics_coincide(tmp_path: Path) -> None:
    """delta-rs stats of the same data, for what both define the same way.

    Known differences, not compared: delta-rs writes min/max for booleans (Delta Spark does
    not), writes no nullCount for binaries and arrays, renders float32 bounds as the exact
    double (we use Float.toString-like shortest digits) and timestamp_ntz with a space
    (we use Spark's `T`), and truncates long strings differently.
    """
    deltalake = pytest.importorskip("deltalake")
    utc = timezone.utc
    table = pa.table(
        {
            "i": pa.array([3, None, -7, 12], pa.int64()),
            "n": pa.array([1, 2, None, 4], pa.int32()),
            "d": pa.array([1.5, -0.25, None, 1e100], pa.float64()),
            "f": pa.array([0.1, None, 2.5, -3.75], pa.float32()),
            "s": pa.array(["pear", "apple", None, "ünï"], pa.string()),
            "day": pa.array([date(2020, 1, 2), None, date(1969, 7, 20), date(2024, 2, 29)]),
            "dec": pa.array(
                [Decimal("1.23"), Decimal("-4.56"), None, Decimal("0.01")], pa.decimal128(10, 2)
            ),
            "ts": pa.array(
                [
                    datetime(2021, 1, 1, 0, 0, 0, 123456, utc),
                    None,
                    datetime(1960, 5, 5, 5, 5, 5, 5, utc),
                    datetime(2030, 1, 1, tzinfo=utc),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "st": pa.array(
                [{"x": 1, "y": "q"}, None, {"x": None, "y": "r"}, {"x": 9, "y": None}],
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
        }
    )
    deltalake.write_deltalake(str(tmp_path / "t"), table)
    theirs = None
    for log in (tmp_path / "t" / "_delta_log").glob("*.json"):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                theirs = json.loads(action["add"]["stats"], parse_float=Decimal)
    assert theirs is not None
    ours = strict_json(stats_json(collect(table)))
    assert ours["numRecords"] == theirs["numRecords"] == 4
    assert ours["nullCount"] == theirs["nullCount"]
    for key in ("minValues", "maxValues"):
        for column in ("i", "n", "d", "s", "day", "dec", "st"):
            assert ours[key][column] == theirs[key][column], (key, column)
        # delta-rs leaves out `.000` when the milliseconds are zero: compare instants.
        instants = [
            datetime.fromisoformat(side[key]["ts"].replace("Z", "+00:00"))
            for side in (ours, theirs)
        ]
        assert instants[0] == instants[1]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ours[key]["ts"])
        as_f32 = [pa.scalar(float(side[key]["f"]), pa.float32()).as_py() for side in (ours, theirs)]
        assert as_f32[0] == as_f32[1]
