"""Arrow arrays and scalars from Python values, built without pyarrow's pandas check.

pyarrow converts a Python object (`pa.array` of a list or even of a numpy array, `pa.scalar`,
a Python number or string passed to a compute function such as `pc.equal(x, "u")`) only after
asking whether it is a pandas object, and the first time it asks it imports pandas if pandas
is installed: 0.1-0.2 s that every dvtool command would pay at start-up, for nothing (pandas
comes with the Spark extras). Arrays assembled from buffers (`pa.Array.from_buffers`) never
ask, so the conversions of the commands go through here instead:

- `array(values, type)` is `pa.array(values, type)` for the types dvtool converts (null,
  boolean, integers, floating point, string, binary, date32, timestamp, decimal, and
  struct, list and map of those). Conversion is as strict as pyarrow's: a value of the wrong
  Python type is `pa.ArrowTypeError`, an integer out of range or an unconvertible value
  `pa.ArrowInvalid`. Structs take mappings (missing keys are null, others ignored), maps take
  mappings or sequences of pairs, lists take lists and tuples. A column whose strings (or
  list elements) overflow 32-bit offsets is returned chunked, as pyarrow does.
- `scalar(value, type)` is `pa.scalar(value, type)`; `TRUE` and `FALSE` are the boolean
  scalars (for `pc.fill_null(mask, FALSE)` and the like).
- `from_numpy(values)` is `pa.array(values)` for a one-dimensional numeric or boolean numpy
  array (no nulls): zero-copy for numbers, as pyarrow does; `to_numpy(array)` the other way,
  `array.to_numpy()` for an integer or floating point array without nulls (zero-copy).
- `empty_table(schema)` is `schema.empty_table()`, and `combined(column)` is
  `column.combine_chunks()`: both convert an empty list (the latter for a column without
  chunks).
- `infer_type(values)` is `pa.infer_type(values)` for values decoded from JSON (None, bool,
  int, float, str, list, dict); values of kinds no one type holds are `pa.ArrowInvalid`.
- `as_py(scalar)` is `scalar.as_py()`: the other way, pyarrow asks too, for a timestamp with
  a time zone or in nanoseconds (it returns a pandas Timestamp for nanoseconds).

Everything else about the arrays is ordinary: they are validated by pyarrow when built.

This module is the public face; the arrays are assembled from buffers by
`dvtool.arrays.arrow_flat` (types without children) and `dvtool.arrays.arrow_nested` (struct,
list, map, and the dispatch by type), with the buffers and errors of
`dvtool.arrays.arrow_buffers`.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from dvtool.arrays.arrow_buffers import TooLarge, kinds
from dvtool.arrays.arrow_flat import UNITS_PER_SECOND
from dvtool.arrays.arrow_nested import build

__all__ = [
    "FALSE",
    "TRUE",
    "array",
    "as_py",
    "combined",
    "empty_table",
    "from_numpy",
    "infer_type",
    "scalar",
    "to_numpy",
]

_INT32_MAX = 2**31 - 1
"""The largest 32-bit offset: beyond it `array` chunks a column (a module attribute, so that
tests can lower it)."""


def array(values: Sequence[Any], typ: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """`pa.array(values, typ)` without the pandas check (see the module docstring)."""
    values = values if isinstance(values, list) else list(values)
    try:
        return build(values, typ, _INT32_MAX)
    except TooLarge:
        if len(values) < 2:
            raise pa.ArrowCapacityError(f"a {typ} value does not fit in 2 GiB") from None
    half = len(values) // 2
    chunks: list[pa.Array] = []
    for part in (values[:half], values[half:]):
        built = array(part, typ)
        chunks += built.chunks if isinstance(built, pa.ChunkedArray) else [built]
    return pa.chunked_array(chunks, typ)


def scalar(value: Any, typ: pa.DataType) -> pa.Scalar:
    """`pa.scalar(value, typ)` without the pandas check (see the module docstring)."""
    return array([value], typ)[0]


def as_py(value: pa.Scalar) -> Any:
    """`value.as_py()` without the pandas check (see the module docstring).

    A timestamp with a time zone in seconds to microseconds becomes the same aware datetime
    pyarrow makes (the zone from `pa.lib.string_to_tzinfo`, as pyarrow's); other scalars,
    nanosecond timestamps among them (a pandas Timestamp when pandas is installed), are left
    to pyarrow."""
    typ = value.type
    if not (pa.types.is_timestamp(typ) and typ.tz is not None and typ.unit != "ns"):
        return value.as_py()
    if not value.is_valid:
        return None
    micros = value.value * (1_000_000 // UNITS_PER_SECOND[typ.unit])
    naive = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return naive.replace(tzinfo=dt.timezone.utc).astimezone(pa.lib.string_to_tzinfo(typ.tz))


def from_numpy(values: np.ndarray[Any, Any]) -> pa.Array:
    """`pa.array(values)` of a 1-D numeric or boolean numpy array, without the pandas check."""
    if values.ndim != 1 or not (values.dtype == np.bool_ or np.issubdtype(values.dtype, np.number)):
        raise TypeError(f"from_numpy takes a 1-D numeric or boolean array, not {values.dtype}")
    typ = pa.from_numpy_dtype(values.dtype)
    if values.dtype == np.bool_:
        data = np.packbits(values, bitorder="little")
    else:
        data = np.ascontiguousarray(values)
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(data)], 0)


def to_numpy(values: pa.Array) -> np.ndarray[Any, Any]:
    """`values.to_numpy()` of an integer or floating point array without nulls, zero-copy,
    without the pandas check (pyarrow's own asks even for a plain int64 array)."""
    typ = values.type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)) or values.null_count:
        raise TypeError(f"to_numpy takes numbers without nulls, not {typ} with nulls")
    dtype = _NUMPY_TYPES[typ.id]
    data = values.buffers()[1]
    if data is None:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(
        data, dtype=dtype, count=len(values), offset=values.offset * dtype.itemsize
    )


_NUMPY_TYPES = {
    t.id: np.dtype(name)
    for t, name in [
        (pa.int8(), "int8"),
        (pa.int16(), "int16"),
        (pa.int32(), "int32"),
        (pa.int64(), "int64"),
        (pa.uint8(), "uint8"),
        (pa.uint16(), "uint16"),
        (pa.uint32(), "uint32"),
        (pa.uint64(), "uint64"),
        (pa.float16(), "float16"),
        (pa.float32(), "float32"),
        (pa.float64(), "float64"),
    ]
}


def combined(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """`column` as one array: `combine_chunks()` without the pandas check (module docstring)."""
    if isinstance(column, pa.Array):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks == 0:
        return pa.nulls(0, column.type)
    return column.combine_chunks()


def empty_table(schema: pa.Schema) -> pa.Table:
    """`schema.empty_table()` without the pandas check (see the module docstring)."""
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def infer_type(values: Sequence[Any]) -> pa.DataType:
    """`pa.infer_type(values)` for JSON values, without the pandas check (module docstring).

    Integers and floats together are float64; dicts are structs with their keys in order of
    first appearance; lists are lists of the type of all their elements."""
    present = [v for v in values if v is not None]
    found = kinds(present)
    if not found:
        return pa.null()
    for simple, typ in _INFERRED.items():
        if found <= simple:
            return typ
    if found <= {list, tuple}:
        return pa.list_(infer_type(list(itertools.chain.from_iterable(present))))
    if all(isinstance(v, Mapping) for v in present):
        names = list(dict.fromkeys(itertools.chain.from_iterable(present)))
        return pa.struct([(n, infer_type([v.get(n) for v in present])) for n in names])
    kinds_text = ", ".join(sorted(k.__name__ for k in found))
    raise pa.ArrowInvalid(f"no one type holds values of the Python types {kinds_text}")


_INFERRED: dict[frozenset[type], pa.DataType] = {
    frozenset({bool}): pa.bool_(),
    frozenset({int}): pa.int64(),
    frozenset({int, float}): pa.float64(),
    frozenset({str}): pa.string(),
    frozenset({bytes}): pa.binary(),
}

TRUE = scalar(True, pa.bool_())
FALSE = scalar(False, pa.bool_())
