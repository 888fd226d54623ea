"""Flat arrow arrays from lists of Python values, assembled from buffers (no pandas check).

The builders behind `dvtool.arrays.arrow_values.array` for the types without children:

- fixed width: boolean, integers, floating point (packed by `array.array`, which also checks
  the range), date32 and timestamps (as int32 days and int64 units since the epoch) and
  decimal128/256 (little-endian two's complement, computed in integers so that no digit is
  rounded);
- variable width: string and binary, small and large (one joined data buffer and offsets).

Values are taken as pyarrow takes them (a float truncated to an integer column, bytes
decoded into a string column, ...) and refused with pyarrow's errors otherwise.
`flat_array` is the entry; nested types are `dvtool.arrays.arrow_nested`'s.
"""

from __future__ import annotations

import array as array_module
import datetime as dt
import decimal
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from dvtool.arrays.arrow_buffers import (
    NONE,
    bitmap,
    invalid,
    kinds,
    offsets,
    slot_lengths,
    type_error,
    valid_mask,
    validity,
)

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
UNITS_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
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


def flat_array(values: list[Any], typ: pa.DataType, max_offset: int) -> pa.Array | None:
    """The array of `values` of the flat type `typ`, None when `typ` is not one.

    Not validated (the caller validates every array it builds). TooLarge when a string or
    binary column's offsets would pass `max_offset` (see `arrow_buffers.offsets`)."""
    if typ.id in _VARIABLE_WIDTH:
        return _strings(values, typ, max_offset)
    builder = _FIXED_WIDTH.get(typ.id)
    return None if builder is None else builder(values, typ)


# -- fixed width -------------------------------------------------------------------------------


def _booleans(values: list[Any], typ: pa.DataType) -> pa.Array:
    found = kinds(values)
    if not found <= {bool, NONE}:
        values = [_boolean(v, typ) for v in values]
    validity_buffer, nulls = validity(values) if NONE in found else (None, 0)
    flags = np.array([v is True for v in values] if nulls else values, dtype=bool)
    data = pa.py_buffer(np.packbits(flags, bitorder="little"))
    return pa.Array.from_buffers(typ, len(values), [validity_buffer, data], nulls)


def _boolean(value: Any, typ: pa.DataType) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise invalid(value, typ)


def _integers(values: list[Any], typ: pa.DataType) -> pa.Array:
    found = kinds(values)
    if not found <= {int, NONE}:
        values = [_integer(v, typ) for v in values]
    return _fixed_width(values, typ, NONE in found)


def _integer(value: Any, typ: pa.DataType) -> int | None:
    if value is None or type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)):
        raise pa.ArrowTypeError(f"Expected integer, got bool ({typ})")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value):
        return int(value)  # truncated, as pyarrow converts floats to integers
    raise invalid(value, typ)


def _fixed_width(values: list[Any], typ: pa.DataType, nullable: bool) -> pa.Array:
    """An integer or floating point array of `values` (ints or floats), None for nulls.

    `array.array` packs the values and checks that they fit the type."""
    validity_buffer, nulls = validity(values) if nullable else (None, 0)
    filled = [0 if v is None else v for v in values] if nulls else values
    try:
        data = array_module.array(_ARRAY_CODES[typ], filled)
    except OverflowError:
        raise pa.ArrowInvalid(f"a value is out of range for {typ}") from None
    return pa.Array.from_buffers(typ, len(values), [validity_buffer, pa.py_buffer(data)], nulls)


def _floats(values: list[Any], typ: pa.DataType) -> pa.Array:
    found = kinds(values)
    if not found <= {float, int, NONE}:
        values = [_float(v, typ) for v in values]
    return _fixed_width(values, typ, NONE in found)


def _float(value: Any, typ: pa.DataType) -> float | None:
    if value is None:
        return None
    if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        return float(value)
    raise type_error(value, typ)


def _dates(values: list[Any], typ: pa.DataType) -> pa.Array:
    days = [_days(v, typ) for v in values]
    storage = _fixed_width(days, pa.int32(), True)
    return pa.Array.from_buffers(typ, len(values), storage.buffers(), storage.null_count)


def _days(value: Any, typ: pa.DataType) -> int | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise type_error(value, typ)
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
        raise type_error(value, typ)
    moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
    delta = moment - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    per_second = UNITS_PER_SECOND[typ.unit]
    if per_second >= 1_000_000:
        return micros * (per_second // 1_000_000)
    return micros // (1_000_000 // per_second)


def _decimals(values: list[Any], typ: pa.DataType) -> pa.Array:
    validity_buffer, nulls = validity(values)
    width = typ.bit_width // 8
    data = b"".join(_decimal_bytes(v, typ, width) for v in values)
    return pa.Array.from_buffers(typ, len(values), [validity_buffer, pa.py_buffer(data)], nulls)


def _decimal_bytes(value: Any, typ: pa.DataType, width: int) -> bytes:
    """`width` little-endian two's complement bytes of `value` unscaled at `typ`'s scale."""
    if value is None:
        return bytes(width)
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        raise type_error(value, typ)
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


_FIXED_WIDTH: dict[int, Callable[[list[Any], pa.DataType], pa.Array]] = {
    pa.bool_().id: _booleans,
    **{t.id: _integers for t in _INTEGER_TYPES},
    **{t.id: _floats for t in _FLOAT_TYPES},
    pa.date32().id: _dates,
    pa.timestamp("us").id: _timestamps,
    pa.decimal128(1, 0).id: _decimals,
    pa.decimal256(1, 0).id: _decimals,
}


# -- variable width ----------------------------------------------------------------------------


def _strings(values: list[Any], typ: pa.DataType, max_offset: int) -> pa.Array:
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
        if not kinds(values) <= {str if text else bytes, NONE}:
            values = [_text(v) if text else _binary(v) for v in values]
        valid = valid_mask(values)
        present = values if valid is None else [v for v in values if v is not None]
        joined = "".join(present) if text else None
    pieces: list[Any] = present
    if joined is not None:
        data = joined.encode("utf-8")
        if len(data) != len(joined):  # not ASCII: lengths in bytes differ from characters
            pieces = [v.encode("utf-8") for v in present]
    else:
        data = b"".join(present)
    lengths = slot_lengths(map(len, pieces), valid, len(values))
    validity_buffer, nulls = bitmap(valid)
    offsets_buffer = offsets(lengths, large=large, max_offset=max_offset)
    buffers = [validity_buffer, offsets_buffer, pa.py_buffer(data)]
    return pa.Array.from_buffers(typ, len(values), buffers, nulls)


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


_VARIABLE_WIDTH = frozenset(
    t.id for t in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())
)
