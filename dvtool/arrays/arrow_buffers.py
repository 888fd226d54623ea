"""The buffers every arrow array built from Python values needs, and its conversion errors.

Shared by the flat builders (`dvtool.arrays.arrow_flat`) and the nested ones
(`dvtool.arrays.arrow_nested`) behind `dvtool.arrays.arrow_values`: validity bitmaps from the
positions of None, per-slot lengths and offsets buffers for variable-width and list-like
arrays (with the 32-bit overflow that makes `arrow_values.array` chunk a column), and the
errors pyarrow raises for values it cannot convert, with pyarrow's wording.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

NONE = type(None)


class TooLarge(Exception):
    """A column whose values do not fit 32-bit offsets: split and chunk it."""


def valid_mask(values: list[Any]) -> np.ndarray[Any, Any] | None:
    """Which values are not None, or None when none is."""
    if None not in values:
        return None
    return np.array([v is not None for v in values], dtype=bool)


def bitmap(valid: np.ndarray[Any, Any] | None) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap of a `valid_mask` and the null count."""
    if valid is None:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), len(valid) - int(valid.sum())


def validity(values: list[Any]) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap of `values` (None when no value is null) and the null count."""
    return bitmap(valid_mask(values))


def slot_lengths(sizes: Any, valid: np.ndarray[Any, Any] | None, n: int) -> np.ndarray[Any, Any]:
    """Per-slot lengths from the `sizes` of the valid values (nulls are empty)."""
    present = np.fromiter(sizes, dtype=np.int64, count=n if valid is None else int(valid.sum()))
    if valid is None:
        return present
    lengths = np.zeros(n, dtype=np.int64)
    lengths[valid] = present
    return lengths


def offsets(lengths: np.ndarray[Any, Any], *, large: bool, max_offset: int) -> pa.Buffer:
    """The offsets buffer of `lengths`, 64-bit when `large`, else 32-bit.

    TooLarge when 32-bit offsets would pass `max_offset` (2**31 - 1, as the caller of
    `arrow_values.array` knows it: tests lower it to chunk small columns)."""
    dtype = np.int64 if large else np.int32
    if not large and int(lengths.sum()) > max_offset:
        raise TooLarge
    out = np.zeros(len(lengths) + 1, dtype=dtype)
    np.cumsum(lengths, out=out[1:])
    return pa.py_buffer(out)


def kinds(values: list[Any]) -> set[type]:
    """The Python types among `values` (NONE for None)."""
    return set(map(type, values))


def type_error(value: Any, typ: pa.DataType) -> pa.ArrowTypeError:
    """pyarrow's error for a value of a Python type `typ` does not take."""
    return pa.ArrowTypeError(
        f"Could not convert {value!r} with type {type(value).__name__}: expected {typ}"
    )


def invalid(value: Any, typ: pa.DataType) -> pa.ArrowInvalid:
    """pyarrow's error for a value of an accepted Python type that `typ` cannot hold."""
    return pa.ArrowInvalid(
        f"Could not convert {value!r} with type {type(value).__name__}: tried to convert to {typ}"
    )
