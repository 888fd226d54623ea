"""`ColumnPlan.conform`: every conversion to the table's types is exact or an error.

Values that convert exactly are compared with Python's own arithmetic on the inputs (not
with pyarrow casts); values that cannot are refused with `UnrepresentableValueError`
naming the file and the column, never floored, truncated or wrapped.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from dvtool.delta.protocol.file_schema import ColumnPlan
from dvtool.errors import UnrepresentableValueError

UTC = dt.timezone.utc
LOCATION = "file:///t/part-0.parquet"


def _conform(array: pa.Array, target: pa.DataType) -> list[Any]:
    batch = pa.RecordBatch.from_arrays([array], names=["c"])
    plan = ColumnPlan.of(batch.schema, [pa.field("c", target)], "none", location=LOCATION)
    out = plan.conform(batch).column(0)
    assert out.type.equals(target)
    return list(out.to_pylist())


def _refused(array: pa.Array, target: pa.DataType) -> str:
    with pytest.raises(UnrepresentableValueError) as info:
        _conform(array, target)
    message = str(info.value)
    assert f"column c of {LOCATION}" in message, message
    assert info.value.exit_code == 6
    return message


EXACT = [
    # INT64 milliseconds at Delta's ends, as microseconds
    (
        pa.array([-62_135_596_800_000, 253_402_300_799_999], pa.timestamp("ms")),
        pa.timestamp("us", "UTC"),
        [dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999000, UTC)],
    ),
    # INT64 nanoseconds holding whole microseconds (negative too)
    (
        pa.array([-1000, 1_700_000_000_123_456_000], pa.timestamp("ns", "UTC")),
        pa.timestamp("us", "UTC"),
        [
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, UTC),
            dt.datetime(2023, 11, 14, 22, 13, 20, 123456, UTC),
        ],
    ),
    # date -> timestamp_ntz widening at both ends
    (
        pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
        pa.timestamp("us"),
        [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)],
    ),
    # decimal widening keeps every digit
    (
        pa.array([Decimal("-9999999.99")], pa.decimal128(9, 2)),
        pa.decimal128(38, 18),
        [Decimal("-9999999.990000000000000000")],
    ),
    (pa.array(["a", None], pa.string_view()), pa.string(), ["a", None]),
    (pa.array(["b"], pa.large_string()).dictionary_encode(), pa.string(), ["b"]),
    (pa.array([0.5, float("inf")], pa.float64()), pa.float32(), [0.5, float("inf")]),
]


@pytest.mark.parametrize(("array", "target", "expected"), EXACT)
def test_exact_conversions_keep_values(array: pa.Array, target: pa.DataType, expected: Any) -> None:
    assert _conform(array, target) == expected


REFUSED = [
    (pa.array([1001], pa.timestamp("ns")), pa.timestamp("us", "UTC"), "would lose data"),
    (pa.array([2**62], pa.timestamp("ms")), pa.timestamp("us", "UTC"), "out of bounds"),
    (pa.array([Decimal("1.234")], pa.decimal128(10, 3)), pa.decimal128(10, 2), "data loss"),
    (pa.array([Decimal("123456.7")], pa.decimal128(10, 1)), pa.decimal128(5, 1), "precision"),
    (pa.array([2**40], pa.int64()), pa.int32(), "not in range"),
    (pa.array([0.1], pa.float64()), pa.float32(), "not exactly a float"),
]


@pytest.mark.parametrize(("array", "target", "words"), REFUSED)
def test_inexact_values_are_refused(array: pa.Array, target: pa.DataType, words: str) -> None:
    assert words in _refused(array, target)


def test_nested_values_are_refused_too() -> None:
    """A nanosecond remainder inside a struct, a list or a map fails the whole column."""
    ns = pa.array([1001], pa.timestamp("ns"))
    us = pa.timestamp("us", "UTC")
    struct = pa.StructArray.from_arrays([ns], names=["t"])
    _refused(struct, pa.struct([("t", us)]))
    listed = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), ns)
    _refused(listed, pa.list_(us))
    mapped = pa.MapArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["k"]), ns)
    _refused(mapped, pa.map_(pa.string(), us))
