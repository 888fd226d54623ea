"""Arrow arrays of any supported type from Python values: struct, list and map built here.

`build` is the dispatch behind `dvtool.arrays.arrow_values.array`: null arrays, the flat types
of `dvtool.arrays.arrow_flat`, and the nested types, whose children it builds recursively
(a struct's fields, a list's elements, a map's keys and items). Structs take mappings
(missing keys are null, others ignored), lists take lists and tuples, maps take mappings or
sequences of (key, value) pairs, as pyarrow does; every array built is validated.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from dvtool.arrays.arrow_buffers import bitmap, kinds, offsets, slot_lengths, valid_mask, validity
from dvtool.arrays.arrow_flat import flat_array


def build(values: list[Any], typ: pa.DataType, max_offset: int) -> pa.Array:
    """The validated array of `values` of type `typ`, in one chunk.

    NotImplementedError for a type dvtool does not convert; TooLarge when 32-bit offsets
    (of strings, lists or maps, at any depth) would pass `max_offset`."""
    if pa.types.is_null(typ):
        if any(v is not None for v in values):
            raise pa.ArrowInvalid("Invalid null value: a null column holds only None")
        return pa.nulls(len(values))
    nested = _NESTED.get(typ.id)
    result = nested(values, typ, max_offset) if nested else flat_array(values, typ, max_offset)
    if result is None:
        raise NotImplementedError(f"dvtool.arrays.arrow_values cannot build {typ} arrays")
    result.validate()
    return result


def _structs(values: list[Any], typ: pa.DataType, max_offset: int) -> pa.Array:
    for v in values:
        if v is not None and not isinstance(v, Mapping):
            raise pa.ArrowTypeError(
                f"Could not convert {v!r} with type {type(v).__name__}: "
                f"was expecting a mapping for {typ}"
            )
    validity_buffer, nulls = validity(values)
    children = []
    for f in typ:
        child = [None if v is None else v.get(f.name) for v in values]
        children.append(build(child, f.type, max_offset))
    return pa.Array.from_buffers(typ, len(values), [validity_buffer], nulls, children=children)


def _lists(values: list[Any], typ: pa.DataType, max_offset: int) -> pa.Array:
    for v in values:
        if v is not None and not isinstance(v, (list, tuple)):
            raise pa.ArrowTypeError(
                f"Could not convert {v!r} with type {type(v).__name__}: expected a list for {typ}"
            )
    valid = valid_mask(values)
    present = values if valid is None else [v for v in values if v is not None]
    child = build(list(itertools.chain.from_iterable(present)), typ.value_type, max_offset)
    lengths = slot_lengths(map(len, present), valid, len(values))
    return _with_offsets(typ, lengths, valid, child, max_offset)


def _maps(values: list[Any], typ: pa.DataType, max_offset: int) -> pa.Array:
    valid = valid_mask(values)
    present = values if valid is None else [v for v in values if v is not None]
    if kinds(present) <= {dict}:  # as decoded from JSON: take keys and values in C
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
        children=[build(keys, typ.key_type, max_offset), build(items, typ.item_type, max_offset)],
    )
    lengths = slot_lengths(sizes, valid, len(values))
    return _with_offsets(typ, lengths, valid, entries, max_offset)


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
    max_offset: int,
) -> pa.Array:
    """A list or map array of `child`'s values, `lengths` per slot."""
    validity_buffer, nulls = bitmap(valid)
    buffers = [validity_buffer, offsets(lengths, large=False, max_offset=max_offset)]
    return pa.Array.from_buffers(typ, len(lengths), buffers, nulls, children=[child])


_NESTED: dict[int, Callable[[list[Any], pa.DataType, int], pa.Array]] = {
    pa.struct([]).id: _structs,
    pa.list_(pa.null()).id: _lists,
    pa.map_(pa.string(), pa.null()).id: _maps,
}
