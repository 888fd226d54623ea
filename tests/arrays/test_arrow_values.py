"""dvtool.arrays.arrow_values builds what pyarrow builds from Python values, without pandas.

pyarrow itself is the oracle: every array, scalar and inferred type is compared with what
`pa.array`, `pa.scalar` and `pa.infer_type` make of the same values (in this process, which
may import pandas; the check that the module never does is a fresh interpreter).
"""

from __future__ import annotations

import datetime as dt
import decimal
import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvtool.arrays import arrow_values as av
from dvtool.delta.protocol.file_actions import ADD_SCHEMA, DV_TYPE, STRING_MAP

UTC = dt.timezone.utc
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
INT64 = st.integers(-(2**63), 2**63 - 1)
DV = st.fixed_dictionaries(
    {"storageType": st.sampled_from(["u", "i", "p"]), "cardinality": INT64},
    optional={"pathOrInlineDv": TEXT, "offset": st.integers(0, 2**31 - 1), "extra": INT64},
)

EXAMPLES: list[tuple[pa.DataType, list[Any]]] = [
    (pa.string(), ["a", None, "", "päth/ü", "x" * 40]),
    (pa.large_string(), ["a", None, "ü"]),
    (pa.binary(), [b"x", None, b"\xff\x00", "text"]),
    (pa.large_binary(), [b"x", None]),
    (pa.int64(), [0, None, -(2**63), 2**63 - 1, np.int64(5), 3.9]),
    (pa.int32(), [1, None, -(2**31)]),
    (pa.int8(), [127, -128, None]),
    (pa.uint64(), [0, 2**64 - 1, None]),
    (pa.uint16(), [65535, None]),
    (pa.float64(), [1.5, None, 2, True, float("inf"), -0.0]),
    (pa.float32(), [1.5, None, -2]),
    (pa.bool_(), [True, None, False, np.bool_(True)]),
    (pa.date32(), [dt.date(2024, 5, 1), None, dt.date(1960, 1, 31)]),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 5, 1, 12, 0, 1, 5, tzinfo=UTC), None]),
    (pa.timestamp("us"), [dt.datetime(2024, 5, 1, 12, 0, 1, 5), dt.datetime(1901, 2, 3)]),
    (pa.timestamp("ms"), [dt.datetime(2024, 5, 1, 12, 0, 1, 5000)]),
    (pa.timestamp("ns", tz="UTC"), [dt.datetime(2024, 5, 1, 2, tzinfo=dt.timezone.min)]),
    (pa.timestamp("s"), [dt.datetime(2024, 5, 1, 12, 0, 1)]),
    (pa.decimal128(5, 2), [decimal.Decimal("1.23"), None, decimal.Decimal("-999.99"), 7]),
    (pa.decimal256(60, 3), [decimal.Decimal("-1.5"), decimal.Decimal(10) ** 56]),
    # more digits than the decimal module's default context (28) holds
    (pa.decimal128(38, 0), [10**38 - 1, decimal.Decimal(-(10**38) + 1), decimal.Decimal("5E+37")]),
    (pa.decimal128(38, 10), [decimal.Decimal("1234567890123456789012345678.9012345678")]),
    (pa.decimal256(76, 38), [decimal.Decimal("-" + "9" * 38 + "." + "9" * 38), 10**37]),
    (pa.null(), [None, None]),
    (STRING_MAP, [{"a": "1"}, None, {}, {"b": None, "c": "x"}, [("k", "v")]]),
    (DV_TYPE, [None, {"storageType": "u", "offset": 1, "cardinality": 3, "maxRowIndex": 9}]),
    (pa.list_(pa.field("element", pa.string())), [["a", None], None, [], ("b",)]),
    (pa.struct([("s", pa.struct([("x", pa.list_(pa.int64()))]))]), [{"s": {"x": [1]}}, {}]),
    (pa.struct([]), [{}, None]),
]


@pytest.mark.parametrize(("typ", "values"), EXAMPLES, ids=lambda x: str(x)[:40])
def test_arrays_and_scalars_equal_pyarrows(typ: pa.DataType, values: list[Any]) -> None:
    built = av.array(values, typ)
    built.validate(full=True)
    assert built.equals(pa.array(values, typ))
    for value in values:
        assert av.scalar(value, typ).equals(pa.scalar(value, typ))


@pytest.mark.parametrize(("typ", "_"), EXAMPLES, ids=lambda x: str(x)[:40])
def test_empty_arrays(typ: pa.DataType, _: Any) -> None:
    assert av.array([], typ).equals(pa.array([], typ))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"path": TEXT, "size": INT64, "dataChange": st.booleans()},
            optional={
                "partitionValues": st.dictionaries(TEXT, st.none() | TEXT, max_size=3),
                "stats": st.none() | TEXT,
                "tags": st.none() | st.dictionaries(TEXT, TEXT, max_size=2),
                "deletionVector": st.none() | DV,
                "baseRowId": st.none() | INT64,
            },
        ),
        max_size=20,
    )
)
def test_add_actions_convert_as_pyarrow_converts_them(adds: list[dict[str, Any]]) -> None:
    for f in ADD_SCHEMA:
        column = [a.get(f.name) for a in adds]
        assert av.array(column, f.type).equals(pa.array(column, f.type)), f.name


@pytest.mark.parametrize(
    ("typ", "value", "error"),
    [
        (pa.int64(), True, pa.ArrowTypeError),
        (pa.int64(), "1", pa.ArrowInvalid),
        (pa.int64(), float("nan"), pa.ArrowInvalid),
        (pa.int64(), 2**63, pa.ArrowInvalid),
        (pa.int32(), 2**31, pa.ArrowInvalid),
        (pa.uint8(), -1, pa.ArrowInvalid),
        (pa.bool_(), 1, pa.ArrowInvalid),
        (pa.string(), 1, pa.ArrowTypeError),
        (pa.string(), b"\xff", pa.ArrowInvalid),
        (pa.binary(), 1, pa.ArrowTypeError),
        (pa.float64(), "1.5", pa.ArrowTypeError),
        (STRING_MAP, {"a": 1}, pa.ArrowTypeError),
        (STRING_MAP, "a", pa.ArrowTypeError),
        (STRING_MAP, {None: "x"}, pa.ArrowInvalid),
        (DV_TYPE, "x", pa.ArrowTypeError),
        (pa.list_(pa.int64()), 5, pa.ArrowTypeError),
        (pa.date32(), dt.datetime(2024, 1, 1), pa.ArrowTypeError),
        (pa.decimal128(5, 2), decimal.Decimal("1.234"), pa.ArrowInvalid),
        (pa.decimal128(5, 2), decimal.Decimal("1234.5"), pa.ArrowInvalid),
        (pa.decimal128(38, 2), decimal.Decimal("1." + "1" * 40), pa.ArrowInvalid),
        (pa.decimal256(76, 0), 10**76, pa.ArrowInvalid),
        (pa.null(), 1, pa.ArrowInvalid),
    ],
)
def test_values_of_the_wrong_type_are_refused(typ: pa.DataType, value: Any, error: type) -> None:
    with pytest.raises(error):
        av.array([None, value], typ)


def test_unsupported_types_say_so() -> None:
    with pytest.raises(NotImplementedError, match="time64"):
        av.array([None], pa.time64("us"))


def test_string_columns_over_the_offset_limit_are_chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(av, "_INT32_MAX", 10)
    values = ["abcd", None, "efgh", "ijkl", "mn", "o"]
    built = av.array(values, pa.string())
    assert isinstance(built, pa.ChunkedArray) and built.num_chunks > 1
    assert all(sum(len(s or "") for s in c.to_pylist()) <= 10 for c in built.chunks)
    assert built.to_pylist() == values
    with pytest.raises(pa.ArrowCapacityError):
        av.array(["x" * 11], pa.string())


@pytest.mark.parametrize(
    "values",
    [
        [None],
        [1, None],
        [1, 2.5],
        [2.5],
        ["a"],
        [b"x"],
        [True, None],
        [[1], [2.5, None]],
        [[], None],
        [{"a": 1}, {"b": "x", "a": None}],
        [{}],
        [{"a": {"b": [1]}}],
    ],
)
def test_infer_type_agrees_with_pyarrow(values: list[Any]) -> None:
    assert av.infer_type(values) == pa.infer_type(values)


@pytest.mark.parametrize("values", [["a", 1], [True, 1], [{"a": 1}, [1]]])
def test_infer_type_refuses_values_no_type_holds(values: list[Any]) -> None:
    with pytest.raises(pa.ArrowInvalid):
        av.infer_type(values)


@pytest.mark.parametrize(
    "values",
    [np.arange(5, dtype=np.uint64), np.array([1.5, -2.0]), np.array([True, False, True])],
)
def test_from_numpy(values: np.ndarray[Any, Any]) -> None:
    assert av.from_numpy(values).equals(pa.array(values))
    assert av.from_numpy(values[::2]).equals(pa.array(values[::2]))


def test_from_numpy_refuses_objects_and_matrices() -> None:
    with pytest.raises(TypeError):
        av.from_numpy(np.array(["a"], dtype=object))
    with pytest.raises(TypeError):
        av.from_numpy(np.zeros((2, 2)))


@pytest.mark.parametrize(
    "typ", [pa.int8(), pa.uint16(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(), pa.float64()]
)
def test_to_numpy_agrees_with_pyarrow(typ: pa.DataType) -> None:
    values = pa.array([0, 1, 2, 3, 5, 8, 13], typ)
    for array in (values, values.slice(2, 4), values.slice(7), pa.array([], typ)):
        got = av.to_numpy(array)
        assert got.dtype == array.to_numpy().dtype
        assert got.tolist() == array.to_numpy().tolist()


def test_to_numpy_refuses_nulls_and_other_types() -> None:
    with pytest.raises(TypeError):
        av.to_numpy(pa.array([1, None], pa.int64()))
    with pytest.raises(TypeError):
        av.to_numpy(pa.array(["a"]))


def test_combined_and_empty_table() -> None:
    assert av.combined(pa.chunked_array([], pa.int64())).equals(pa.array([], pa.int64()))
    two = pa.chunked_array([[1], [2, 3]], pa.int64())
    assert av.combined(two).equals(pa.array([1, 2, 3], pa.int64()))
    one = two.chunk(1)
    assert av.combined(one) is one
    assert av.empty_table(ADD_SCHEMA).equals(ADD_SCHEMA.empty_table())


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", [None, "UTC", "Europe/Paris", "+07:30"])
def test_as_py_equals_pyarrows(unit: str, tz: str | None) -> None:
    values = pa.array([0, -1_234_567_891, 1_700_000_123, None], pa.int64())
    for value in values.cast(pa.timestamp(unit, tz)):
        got, expected = av.as_py(value), value.as_py()
        assert got == expected and type(got) is type(expected)
        assert getattr(got, "tzinfo", None) == getattr(expected, "tzinfo", None)
    assert av.as_py(pa.array([1.5])[0]) == 1.5


def test_never_imports_pandas() -> None:
    code = (
        "import sys, datetime, decimal\n"
        "import pyarrow as pa\n"
        "from dvtool.arrays import arrow_values as av\n"
        "from dvtool.delta.protocol.file_actions import DV_TYPE, STRING_MAP\n"
        "av.array(['a', None], pa.string()); av.array([{'a': None}], STRING_MAP)\n"
        "av.array([{'storageType': 'u'}, None], DV_TYPE); av.scalar(3, pa.int64())\n"
        "av.array([[1.5]], pa.list_(pa.float64())); av.scalar(True, pa.bool_())\n"
        "av.scalar(datetime.date(2024, 1, 1), pa.date32())\n"
        "av.scalar(decimal.Decimal('1.5'), pa.decimal128(3, 1))\n"
        "av.infer_type([{'a': [1]}]); av.combined(pa.chunked_array([], pa.int8()))\n"
        "utc = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)\n"
        "av.as_py(av.scalar(utc, pa.timestamp('us', 'UTC')))\n"
        "av.as_py(av.scalar(5, pa.timestamp('ms', 'Europe/Paris')))\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
