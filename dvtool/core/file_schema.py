"""Reading a data file as the table schema: which file column holds each table column, and
its values converted to the table's current physical arrow type.

Data files come from many writers and many table versions, and what a parquet reader yields
for them differs from the arrow schema of the table (`dvtool.core.partitions.arrow_schema`):

- Column resolution (PROTOCOL.md "Column Mapping"): in `id` mode a column is found by its
  parquet field id (`PARQUET:field_id`), nested struct fields too, so a file that still
  holds a column under its name from before a rename (tables converted from Iceberg, or
  cloned) is read right; only files without any field id fall back to physical names. In
  `name` and `none` mode columns are found by name, exactly or else case-insensitively as
  Spark does. A column missing from a file reads as NULL.
- Types other engines write: `string_view`/`large_string` (delta-rs and DataFusion),
  `large_binary`/`binary_view`, dictionary-encoded columns, INT96 timestamps (nanoseconds,
  no time zone: floored to microseconds, as Spark reads them), other timestamp units, legacy
  list layouts (`list<item>`, `list<array>`, large lists) and map entry names.
- Type widening (`dvtool.core.type_widening`): values of files written before a change are
  cast to the current type (integer, float and decimal widening, date -> timestamp_ntz).
- Variant columns (PROTOCOL.md "Variant Data Type"): the table type is the unshredded struct
  of `value` and `metadata` binaries; a file's variant column, shredded or not, is passed on
  as the file holds it, so a 1:1 rewrite keeps its layout (`is_variant_type`).

`ColumnPlan.of(file_schema, targets, mode)` resolves once per file; `conform_batch` converts
each batch. Both are pure arrow: no IO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

FIELD_ID = b"PARQUET:field_id"
VARIANT_TYPE = pa.struct(
    [pa.field("value", pa.binary(), nullable=False), pa.field("metadata", pa.binary(), False)]
)


def is_variant_type(t: pa.DataType) -> bool:
    """Whether `t` is the table-side type of a Delta `variant` (see `VARIANT_TYPE`)."""
    return bool(t.equals(VARIANT_TYPE))


def field_id(f: pa.Field) -> int | None:
    """The parquet field id of an arrow field, or None."""
    raw = (f.metadata or {}).get(FIELD_ID)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def has_field_ids(schema: pa.Schema) -> bool:
    """Whether any top-level field of a file's schema carries a parquet field id."""
    return any(field_id(f) is not None for f in schema)


def _find(candidates: Sequence[pa.Field], target: pa.Field, by_id: bool) -> int | None:
    """Index of the field of `candidates` that holds `target`, or None."""
    if by_id:
        wanted = field_id(target)
        if wanted is not None:
            return next((i for i, f in enumerate(candidates) if field_id(f) == wanted), None)
    names = [f.name for f in candidates]
    if target.name in names:
        return names.index(target.name)
    lowered = [i for i, n in enumerate(names) if n.lower() == target.name.lower()]
    return lowered[0] if len(lowered) == 1 else None


@dataclass(frozen=True)
class ColumnPlan:
    """How one file's top-level columns map to the target fields.

    `sources[i]` is the name of the file column holding `targets[i]`, or None when the file
    lacks it. `by_id`: nested struct fields are resolved by field id too.
    """

    targets: tuple[pa.Field, ...]
    sources: tuple[str | None, ...]
    by_id: bool

    @classmethod
    def of(
        cls,
        file_schema: pa.Schema,
        targets: Sequence[pa.Field],
        mode: str,
        by_name: frozenset[str] = frozenset(),
    ) -> ColumnPlan:
        """Resolve `targets` (physical fields, with field ids in `id`/`name` mode) in a file.

        Field ids are used in `id` mode when the file has any; targets named in `by_name`
        (columns outside the schema, such as row tracking's hidden columns) are always found
        by name.
        """
        by_id = mode == "id" and has_field_ids(file_schema)
        fields = list(file_schema)
        sources = []
        for target in targets:
            index = _find(fields, target, by_id and target.name not in by_name)
            sources.append(None if index is None else fields[index].name)
        return cls(tuple(targets), tuple(sources), by_id)

    @property
    def file_columns(self) -> list[str]:
        """The file columns to read, without duplicates, in target order."""
        return list(dict.fromkeys(s for s in self.sources if s is not None))

    def conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """`batch` (read from the file) as the target columns, converted (module doc)."""
        arrays, fields = [], []
        for target, source in zip(self.targets, self.sources, strict=True):
            if source is None or source not in batch.schema.names:
                array = pa.nulls(batch.num_rows, target.type)
            else:
                array = conform_array(batch.column(source), target.type, self.by_id)
            arrays.append(array)
            fields.append(
                target if array.type.equals(target.type) else target.with_type(array.type)
            )
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def conform_array(array: pa.Array, target: pa.DataType, by_id: bool = False) -> pa.Array:
    """`array` converted to `target` (see the module docstring); a variant target keeps the
    file's own layout. Raises pyarrow errors for values the target cannot hold."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type.equals(target):
        return array
    if isinstance(array.type, pa.ExtensionType):
        array = array.storage
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if is_variant_type(target) and pa.types.is_struct(array.type):
        return array
    if pa.types.is_struct(target):
        return _conform_struct(array, target, by_id)
    if _is_list(target):
        return _conform_list(array, target, by_id)
    if pa.types.is_map(target):
        return _conform_map(array, target, by_id)
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(array.type):
        return _conform_timestamp(array, target)
    if array.type.equals(target):
        return array
    return array.cast(target)


def _is_list(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def _conform_struct(array: pa.Array, target: pa.StructType, by_id: bool) -> pa.Array:
    if not pa.types.is_struct(array.type):
        return array.cast(target)
    source_fields = [array.type.field(i) for i in range(array.type.num_fields)]
    children = []
    for i in range(target.num_fields):
        child = target.field(i)
        index = _find(source_fields, child, by_id)
        if index is None:
            children.append(pa.nulls(len(array), child.type))
        else:
            children.append(conform_array(array.field(index), child.type, by_id))
    fields = [
        target.field(i).with_type(c.type)
        if not c.type.equals(target.field(i).type)
        else target.field(i)
        for i, c in enumerate(children)
    ]
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _conform_list(array: pa.Array, target: pa.DataType, by_id: bool) -> pa.Array:
    element = target.value_type
    if not _is_list(array.type):
        return array.cast(target)
    if pa.types.is_list_view(array.type) or pa.types.is_large_list_view(array.type):
        array = array.cast(pa.large_list(array.type.value_field))
    if pa.types.is_fixed_size_list(array.type):
        array = array.cast(pa.list_(array.type.value_field))
    start, end = array.offsets[0].as_py(), array.offsets[len(array)].as_py()
    values = conform_array(array.values.slice(start, end - start), element, by_id)
    offsets = pc.subtract(array.offsets, array.offsets[0])
    offsets = offsets.cast(pa.int32()) if pa.types.is_list(target) else offsets
    value_field = target.value_field.with_type(values.type)
    mask = array.is_null() if array.null_count else None
    return pa.ListArray.from_arrays(offsets, values, type=pa.list_(value_field), mask=mask)


def _conform_map(array: pa.Array, target: pa.MapType, by_id: bool) -> pa.Array:
    if not pa.types.is_map(array.type):
        return array.cast(target)
    entries = array.values
    start = array.offsets[0].as_py()
    end = array.offsets[len(array)].as_py()
    keys = conform_array(entries.field(0).slice(start, end - start), target.key_type, by_id)
    items = conform_array(entries.field(1).slice(start, end - start), target.item_type, by_id)
    offsets = pc.subtract(array.offsets, array.offsets[0])
    map_type = pa.map_(
        target.key_field.with_type(keys.type), target.item_field.with_type(items.type)
    )
    result = pa.MapArray.from_arrays(offsets, keys, items, type=map_type)
    if array.null_count:
        # MapArray.from_arrays takes no mask: rebuild with the validity bitmap of `array`.
        validity = pc.invert(array.is_null()).buffers()[1]
        result = pa.Array.from_buffers(
            map_type, len(result), [validity, *result.buffers()[1:2]], children=[result.values]
        )
    return result


def _conform_timestamp(array: pa.Array, target: pa.TimestampType) -> pa.Array:
    """Timestamps in any unit as `target`: finer units floored (INT96 nanoseconds become
    microseconds as Spark reads them); a zone-less file column is taken as UTC."""
    units = ["s", "ms", "us", "ns"]
    if units.index(array.type.unit) > units.index(target.unit):
        names = {"s": "second", "ms": "millisecond", "us": "microsecond"}
        array = pc.floor_temporal(array, unit=names[target.unit])
    return array.cast(target)
