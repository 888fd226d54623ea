"""Reading a data file as the table schema: which file column holds each table column, and
its values converted to the table's current physical arrow type.

Data files come from many writers and many table versions, and what a parquet reader yields
for them differs from the arrow schema of the table
(`dvtool.delta.protocol.partitions.arrow_schema`):

- Column resolution (PROTOCOL.md "Column Mapping"): in `id` mode a column is found by its
  parquet field id (`PARQUET:field_id`), nested struct fields too, so a file that still
  holds a column under its name from before a rename (tables converted from Iceberg, or
  cloned) is read right; only files without any field id fall back to physical names. In
  `name` and `none` mode columns are found by name, exactly or else case-insensitively as
  Spark does. A column missing from a file reads as NULL.
- Types other engines write: `string_view`/`large_string` (delta-rs and DataFusion),
  `large_binary`/`binary_view`, dictionary-encoded columns, timestamps without a zone (INT96,
  read as microseconds by `dvtool.data_files.reading`: taken as UTC), other timestamp units
  (INT64 millis and nanos), decimals of any physical type (INT32, INT64,
  FIXED_LEN_BYTE_ARRAY: pyarrow gives all three as decimal128), legacy list layouts
  (`list<item>`, `list<array>`, large lists) and map entry names.
- Type widening (`dvtool.delta.protocol.type_widening`): values of files written before a change are
  cast to the current type (integer, float and decimal widening, date -> timestamp_ntz).
- Variant columns (PROTOCOL.md "Variant Data Type"): the table type is the unshredded struct
  of `value` and `metadata` binaries; a file's variant column, shredded or not, is passed on
  as the file holds it, so a 1:1 rewrite keeps its layout (`is_variant_type`).

Every conversion is exact: a value the target type cannot hold as it is (nanoseconds below a
microsecond, a millisecond timestamp beyond the microsecond range, a decimal's lost digits or
scale, an integer or float out of range, a float a narrower float would round) is never
floored, truncated or wrapped: pyarrow's safe casts and `_exact_float` raise, and
`ColumnPlan.conform` reports it as an `UnrepresentableValueError` naming the file and the
column. A rewrite never changes a value, and a scan compares the values the file holds.

`ColumnPlan.of(file_schema, targets, mode)` resolves once per file; `ColumnPlan.conform`
converts each batch. Both are pure arrow: no IO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.errors import UnrepresentableValueError

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
    lacks it. `by_id`: nested struct fields are resolved by field id too. `location`: the
    file, for the errors of `conform`.
    """

    targets: tuple[pa.Field, ...]
    sources: tuple[str | None, ...]
    by_id: bool
    location: str = ""

    @classmethod
    def of(
        cls,
        file_schema: pa.Schema,
        targets: Sequence[pa.Field],
        mode: str,
        by_name: frozenset[str] = frozenset(),
        location: str = "",
    ) -> ColumnPlan:
        """Resolve `targets` (physical fields, with field ids in `id`/`name` mode) in a file
        (`location`, named by the errors of `conform`).

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
        return cls(tuple(targets), tuple(sources), by_id, location)

    @property
    def file_columns(self) -> list[str]:
        """The file columns to read, without duplicates, in target order."""
        return list(dict.fromkeys(s for s in self.sources if s is not None))

    def conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """`batch` (read from the file) as the target columns, converted exactly (module
        doc); `UnrepresentableValueError` for a value a target type cannot hold."""
        arrays, fields = [], []
        for target, source in zip(self.targets, self.sources, strict=True):
            if source is None or source not in batch.schema.names:
                array = pa.nulls(batch.num_rows, target.type)
            else:
                column = batch.column(source)
                try:
                    array = conform_array(column, target.type, self.by_id)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
                    raise self._unrepresentable(source, column.type, target.type, e) from None
            arrays.append(array)
            fields.append(
                target if array.type.equals(target.type) else target.with_type(array.type)
            )
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def _unrepresentable(
        self, column: str, source: pa.DataType, target: pa.DataType, error: Exception
    ) -> UnrepresentableValueError:
        where = self.location or "a data file"
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return UnrepresentableValueError(
            f"column {column} of {where} holds a value the table's type cannot hold exactly "
            f"({source} as {target}): {detail}",
            hint="dvtool never changes a value when it reads or rewrites a file: rewrite the "
            "file with its writer so that it holds the table's type.",
        )


def conform_array(array: pa.Array, target: pa.DataType, by_id: bool = False) -> pa.Array:
    """`array` converted exactly to `target` (see the module docstring); a variant target
    keeps the file's own layout. Raises pyarrow errors (`ArrowInvalid`) for values the target
    cannot hold exactly."""
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
    if pa.types.is_floating(array.type) and pa.types.is_floating(target):
        return _exact_float(array, target)
    return array.cast(target, safe=True)


def _exact_float(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Floats as `target`; a narrower target (double as float) must hold each value as it
    is (pyarrow's safe cast does not check floats: 0.1 would become 0.100000001)."""
    result = array.cast(target, safe=True)
    if target.bit_width >= array.type.bit_width:
        return result
    back = result.cast(array.type)
    same = pc.or_kleene(pc.equal(back, array), pc.and_(pc.is_nan(back), pc.is_nan(array)))
    if not pc.all(pc.fill_null(same, True)).as_py():
        index = pc.index(same, False).as_py()
        raise pa.ArrowInvalid(f"{array[index].as_py()!r} is not exactly a {target}")
    return result


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
        return array.cast(target, safe=True)
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
        return array.cast(target, safe=True)
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
        return array.cast(target, safe=True)
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
    """Timestamps in any unit as `target`, exactly; a zone-less file column is taken as UTC.

    A safe cast: nanoseconds below a microsecond, or a value beyond the range of a finer
    unit, raise `ArrowInvalid` instead of being floored or wrapped (Delta readers disagree
    on such values: Spark floors, arrow-rs truncates towards zero). INT96 timestamps are
    microseconds already (`dvtool.data_files.reading`), read as Spark reads them.
    """
    return array.cast(target, safe=True)
