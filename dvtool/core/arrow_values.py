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
  array (no nulls): zero-copy for numbers, as pyarrow does.
- `empty_table(schema)` is `schema.empty_table()`, and `combined(column)` is
  `column.combine_chunks()`: both convert an empty list (the latter for a column without
  chunks).
- `infer_type(values)` is `pa.infer_type(values)` for values decoded from JSON (None, bool,
  int, float, str, list, dict); values of kinds no one type holds are `pa.ArrowInvalid`.
- `as_py(scalar)` is `scalar.as_py()`: the other way, pyarrow asks too, for a timestamp with
  a time zone or in nanoseconds (it returns a pandas Timestamp for nanoseconds).

Everything else about the arrays is ordinary: they are validated by pyarrow when built.
"""

from __future__ import annotations

import array as array_module
import datetime as dt
import decimal
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

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
]

_NONE = type(None)
_INT32_MAX = 2**31 - 1
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_UNITS_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
_INTEGER_TYPES = (
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
)
_FLOAT_TYPES = (pa.float32(), pa.float64())


def _array_code(typ: pa.DataType) -> str:
    """The `array` module type code that stores values of the fixed-width `typ`."""
    if pa.types.is_floating(typ):
        codes = "fd"
    else:
        codes = "bhilq" if pa.types.is_signed_integer(typ) else "BHILQ"
    return next(c for c in codes if array_module.array(c).itemsize * 8 == typ.bit_width)


_ARRAY_CODES = {t: _array_code(t) for t in (*_INTEGER_TYPES, *_FLOAT_TYPES)}


class _TooLarge(Exception):
    """A column whose values do not fit 32-bit offsets: split and chunk it."""


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
    micros = value.value * (1_000_000 // _UNITS_PER_SECOND[typ.unit])
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
    kinds = _kinds(present)
    if not kinds:
        return pa.null()
    for simple, typ in _INFERRED.items():
        if kinds <= simple:
            return typ
    if kinds <= {list, tuple}:
        return pa.list_(infer_type(list(itertools.chain.from_iterable(present))))
    if all(isinstance(v, Mapping) for v in present):
        names = list(dict.fromkeys(itertools.chain.from_iterable(present)))
        return pa.struct([(n, infer_type([v.get(n) for v in present])) for n in names])
    kinds_text = ", ".join(sorted(k.__name__ for k in kinds))
    raise pa.ArrowInvalid(f"no one type holds values of the Python types {kinds_text}")


_INFERRED: dict[frozenset[type], pa.DataType] = {
    frozenset({bool}): pa.bool_(),
    frozenset({int}): pa.int64(),
    frozenset({int, float}): pa.float64(),
    frozenset({str}): pa.string(),
    frozenset({bytes}): pa.binary(),
}


def array(values: Sequence[Any], typ: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """`pa.array(values, typ)` without the pandas check (see the module docstring)."""
    values = values if isinstance(values, list) else list(values)
    try:
        return _array(values, typ)
    except _TooLarge:
        if len(values) < 2:
            raise pa.ArrowCapacityError(f"a {typ} value does not fit in 2 GiB") from None
    half = len(values) // 2
    chunks: list[pa.Array] = []
    for part in (values[:half], values[half:]):
        built = array(part, typ)
        chunks += built.chunks if isinstance(built, pa.ChunkedArray) else [built]
    return pa.chunked_array(chunks, typ)


def _array(values: list[Any], typ: pa.DataType) -> pa.Array:
    if pa.types.is_null(typ):
        if any(v is not None for v in values):
            raise pa.ArrowInvalid("Invalid null value: a null column holds only None")
        return pa.nulls(len(values))
    builder = _BUILDERS.get(typ.id)
    if builder is None:
        raise NotImplementedError(f"dvtool.core.arrow_values cannot build {typ} arrays")
    result: pa.Array = builder(values, typ)
    result.validate()
    return result


# -- validity ---------------------------------------------------------------------------------


def _valid(values: list[Any]) -> np.ndarray[Any, Any] | None:
    """Which values are not None, or None when none is."""
    if None not in values:
        return None
    return np.array([v is not None for v in values], dtype=bool)


def _bitmap(valid: np.ndarray[Any, Any] | None) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap of a `_valid` mask and the null count."""
    if valid is None:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), len(valid) - int(valid.sum())


def _validity(values: list[Any]) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap of `values` (None when no value is null) and the null count."""
    return _bitmap(_valid(values))


def _lengths(sizes: Any, valid: np.ndarray[Any, Any] | None, n: int) -> np.ndarray[Any, Any]:
    """Per-slot lengths from the `sizes` of the valid values (nulls are empty)."""
    present = np.fromiter(sizes, dtype=np.int64, count=n if valid is None else int(valid.sum()))
    if valid is None:
        return present
    lengths = np.zeros(n, dtype=np.int64)
    lengths[valid] = present
    return lengths


def _offsets(lengths: np.ndarray[Any, Any], dtype: Any) -> pa.Buffer:
    """The offsets buffer of `lengths`; _TooLarge when they overflow 32-bit offsets."""
    if dtype == np.int32 and int(lengths.sum()) > _INT32_MAX:
        raise _TooLarge
    offsets = np.zeros(len(lengths) + 1, dtype=dtype)
    np.cumsum(lengths, out=offsets[1:])
    return pa.py_buffer(offsets)


def _kinds(values: list[Any]) -> set[type]:
    return set(map(type, values))


def _type_error(value: Any, typ: pa.DataType) -> pa.ArrowTypeError:
    return pa.ArrowTypeError(
        f"Could not convert {value!r} with type {type(value).__name__}: expected {typ}"
    )


def _invalid(value: Any, typ: pa.DataType) -> pa.ArrowInvalid:
    return pa.ArrowInvalid(
        f"Could not convert {value!r} with type {type(value).__name__}: tried to convert to {typ}"
    )


# -- primitive types ---------------------------------------------------------------------------


def _booleans(values: list[Any], typ: pa.DataType) -> pa.Array:
    kinds = _kinds(values)
    if not kinds <= {bool, _NONE}:
        values = [_boolean(v, typ) for v in values]
    validity, nulls = _validity(values) if _NONE in kinds else (None, 0)
    flags = np.array([v is True for v in values] if nulls else values, dtype=bool)
    data = pa.py_buffer(np.packbits(flags, bitorder="little"))
    return pa.Array.from_buffers(typ, len(values), [validity, data], nulls)


def _boolean(value: Any, typ: pa.DataType) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise _invalid(value, typ)


def _integers(values: list[Any], typ: pa.DataType) -> pa.Array:
    kinds = _kinds(values)
    if not kinds <= {int, _NONE}:
        values = [_integer(v, typ) for v in values]
    return _fixed_width(values, typ, _NONE in kinds)


def _integer(value: Any, typ: pa.DataType) -> int | None:
    if value is None or type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise pa.ArrowTypeError(f"Expected integer, got bool ({typ})")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return int(value)  # truncated, as pyarrow converts floats to integers
    raise _invalid(value, typ)


def _fixed_width(values: list[Any], typ: pa.DataType, nullable: bool) -> pa.Array:
    """An integer or floating point array of `values` (ints or floats), None for nulls.

    `array.array` packs the values and checks that they fit the type."""
    validity, nulls = _validity(values) if nullable else (None, 0)
    filled = [0 if v is None else v for v in values] if nulls else values
    try:
        data = array_module.array(_ARRAY_CODES[typ], filled)
    except OverflowError:
        raise pa.ArrowInvalid(f"a value is out of range for {typ}") from None
    return pa.Array.from_buffers(typ, len(values), [validity, pa.py_buffer(data)], nulls)


def _floats(values: list[Any], typ: pa.DataType) -> pa.Array:
    kinds = _kinds(values)
    if not kinds <= {float, int, _NONE}:
        values = [_float(v, typ) for v in values]
    return _fixed_width(values, typ, _NONE in kinds)


def _float(value: Any, typ: pa.DataType) -> float | None:
    if value is None:
        return None
    if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        return float(value)
    raise _type_error(value, typ)


def _dates(values: list[Any], typ: pa.DataType) -> pa.Array:
    days = [_days(v, typ) for v in values]
    storage = _fixed_width(days, pa.int32(), True)
    return pa.Array.from_buffers(typ, len(values), storage.buffers(), storage.null_count)


def _days(value: Any, typ: pa.DataType) -> int | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise _type_error(value, typ)
    return (value - _EPOCH_DATE).days


def _timestamps(values: list[Any], typ: pa.DataType) -> pa.Array:
    ticks = [_ticks(v, typ) for v in values]
    storage = _fixed_width(ticks, pa.int64(), True)
    return pa.Array.from_buffers(typ, len(values), storage.buffers(), storage.null_count)


def _ticks(value: Any, typ: pa.DataType) -> int | None:
    """Units of `typ` since the epoch: a naive datetime is read as UTC wall time, as pyarrow
    does; an aware one is converted to UTC; an int is taken as units already."""
    if value is None or (type(value) is int):
        return value
    if not isinstance(value, dt.datetime):
        raise _type_error(value, typ)
    moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
    delta = moment - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    per_second = _UNITS_PER_SECOND[typ.unit]
    if per_second >= 1_000_000:
        return micros * (per_second // 1_000_000)
    return micros // (1_000_000 // per_second)


def _decimals(values: list[Any], typ: pa.DataType) -> pa.Array:
    validity, nulls = _validity(values)
    width = typ.bit_width // 8
    data = b"".join(_decimal_bytes(v, typ, width) for v in values)
    return pa.Array.from_buffers(typ, len(values), [validity, pa.py_buffer(data)], nulls)


def _decimal_bytes(value: Any, typ: pa.DataType, width: int) -> bytes:
    """`width` little-endian two's complement bytes of `value` unscaled at `typ`'s scale."""
    if value is None:
        return bytes(width)
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        raise _type_error(value, typ)
    exact = decimal.Decimal(value)
    if not exact.is_finite():
        raise pa.ArrowInvalid(f"Cannot convert {value!r} to {typ}")
    # In integers: Decimal arithmetic would round to the context's 28 digits.
    sign, digits, exponent = exact.as_tuple()
    coefficient = int("".join(map(str, digits)))
    shift = int(exponent) + typ.scale
    if coefficient == 0:
        number = 0
    elif shift >= 0:
        if len(digits) + shift > typ.precision:
            raise pa.ArrowInvalid(f"Decimal value {value} does not fit in precision of {typ}")
        number = coefficient * 10**shift
    else:
        number, dropped = divmod(coefficient, 10**-shift)
        if dropped:
            raise pa.ArrowInvalid(f"Rescaling Decimal value {value} would cause data loss ({typ})")
    number = -number if sign else number
    if abs(number) >= 10**typ.precision:
        raise pa.ArrowInvalid(f"Decimal value {value} does not fit in precision of {typ}")
    return number.to_bytes(width, "little", signed=True)


# -- variable width ----------------------------------------------------------------------------


def _strings(values: list[Any], typ: pa.DataType) -> pa.Array:
    text = pa.types.is_string(typ) or pa.types.is_large_string(typ)
    large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
    valid = None
    present = values
    try:
        # The common case, str values and no nulls: joining checks it, and is needed anyway.
        joined = "".join(values) if text else None
    except TypeError:
        joined = None
    if joined is None:
        if not _kinds(values) <= {str if text else bytes, _NONE}:
            values = [_text(v) if text else _binary(v) for v in values]
        valid = _valid(values)
        present = values if valid is None else [v for v in values if v is not None]
        joined = "".join(present) if text else None
    pieces: list[Any] = present
    if joined is not None:
        data = joined.encode("utf-8")
        if len(data) != len(joined):  # not ASCII: lengths in bytes differ from characters
            pieces = [v.encode("utf-8") for v in present]
    else:
        data = b"".join(present)
    lengths = _lengths(map(len, pieces), valid, len(values))
    validity, nulls = _bitmap(valid)
    offsets = _offsets(lengths, np.int64 if large else np.int32)
    return pa.Array.from_buffers(typ, len(values), [validity, offsets, pa.py_buffer(data)], nulls)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise pa.ArrowInvalid(
                f"Could not convert {value!r} with type bytes: was not a utf8 string"
            ) from None
    raise pa.ArrowTypeError(f"Expected bytes, got a '{type(value).__name__}' object")


def _binary(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise pa.ArrowTypeError(f"Expected bytes, got a '{type(value).__name__}' object")


# -- nested types ------------------------------------------------------------------------------


def _structs(values: list[Any], typ: pa.DataType) -> pa.Array:
    for v in values:
        if v is not None and not isinstance(v, Mapping):
            raise pa.ArrowTypeError(
                f"Could not convert {v!r} with type {type(v).__name__}: "
                f"was expecting a mapping for {typ}"
            )
    validity, nulls = _validity(values)
    children = []
    for f in typ:
        child = [None if v is None else v.get(f.name) for v in values]
        children.append(_array(child, f.type))
    return pa.Array.from_buffers(typ, len(values), [validity], nulls, children=children)


def _lists(values: list[Any], typ: pa.DataType) -> pa.Array:
    for v in values:
        if v is not None and not isinstance(v, (list, tuple)):
            raise pa.ArrowTypeError(
                f"Could not convert {v!r} with type {type(v).__name__}: expected a list for {typ}"
            )
    valid = _valid(values)
    present = values if valid is None else [v for v in values if v is not None]
    child = _array(list(itertools.chain.from_iterable(present)), typ.value_type)
    return _with_offsets(typ, _lengths(map(len, present), valid, len(values)), valid, child)


def _maps(values: list[Any], typ: pa.DataType) -> pa.Array:
    valid = _valid(values)
    present = values if valid is None else [v for v in values if v is not None]
    if _kinds(present) <= {dict}:  # as decoded from JSON: take keys and values in C
        keys = list(itertools.chain.from_iterable(present))
        items = list(itertools.chain.from_iterable(map(dict.values, present)))
        sizes: Any = map(len, present)
    else:
        pairs = [list(v.items()) if isinstance(v, Mapping) else _pairs(v, typ) for v in present]
        keys = [k for p in pairs for k, _ in p]
        items = [i for p in pairs for _, i in p]
        sizes = map(len, pairs)
    if None in keys:
        raise pa.ArrowInvalid(f"Invalid Map: key field cannot contain null ({typ})")
    entries = pa.Array.from_buffers(
        pa.struct([typ.key_field, typ.item_field]),
        len(keys),
        [None],
        0,
        children=[_array(keys, typ.key_type), _array(items, typ.item_type)],
    )
    return _with_offsets(typ, _lengths(sizes, valid, len(values)), valid, entries)


def _pairs(value: Any, typ: pa.DataType) -> list[tuple[Any, Any]]:
    if isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 for p in value
    ):
        return [(k, v) for k, v in value]
    raise pa.ArrowTypeError(
        f"Could not convert {value!r} with type {type(value).__name__}: "
        f"expected a mapping or (key, value) pairs for {typ}"
    )


def _with_offsets(
    typ: pa.DataType,
    lengths: np.ndarray[Any, Any],
    valid: np.ndarray[Any, Any] | None,
    child: pa.Array,
) -> pa.Array:
    """A list or map array of `child`'s values, `lengths` per slot."""
    validity, nulls = _bitmap(valid)
    buffers = [validity, _offsets(lengths, np.int32)]
    return pa.Array.from_buffers(typ, len(lengths), buffers, nulls, children=[child])


_BUILDERS: dict[int, Any] = {
    pa.bool_().id: _booleans,
    **{t.id: _integers for t in _INTEGER_TYPES},
    **{t.id: _floats for t in _FLOAT_TYPES},
    pa.string().id: _strings,
    pa.large_string().id: _strings,
    pa.binary().id: _strings,
    pa.large_binary().id: _strings,
    pa.date32().id: _dates,
    pa.timestamp("us").id: _timestamps,
    pa.decimal128(1, 0).id: _decimals,
    pa.decimal256(1, 0).id: _decimals,
    pa.struct([]).id: _structs,
    pa.list_(pa.null()).id: _lists,
    pa.map_(pa.string(), pa.null()).id: _maps,
}

TRUE = scalar(True, pa.bool_())
FALSE = scalar(False, pa.bool_())
