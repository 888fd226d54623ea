"""Reading a data file's rows onto the table's current schema by field id, exactly.

A rewrite never changes a value, so every column of a data file is read the way the Iceberg
spec reads it ("Column Projection", "Schema Evolution") and nothing else:

- columns are found by Parquet field id (a renamed column by its id; a file without ids
  through the table's `schema.name-mapping.default`), nested structs, lists and maps too;
- a column the file lacks takes its identity partition value (spec "Column Projection"), else
  the field's `initial-default`, else null (pyiceberg's projection, `ArrowProjectionVisitor`);
- a column whose type differs from the table's is read only through the spec's type
  promotions (`int`->`long`, `float`->`double`, `decimal(P,S)`->`decimal(P',S)` with P' >= P;
  in v3 `unknown`->any and `date`->`timestamp`/`timestamp_ns`), or through a difference of
  Parquet encoding that holds the same value (timestamp units and UTC annotation, INT96,
  string/binary, `fixed[16]`/`uuid`, dictionary, narrower integer encodings). Every cast is
  checked: a value the table's type cannot hold exactly (nanoseconds below a microsecond, a
  date beyond `timestamp_ns`) is an `UnrepresentableValueError` naming the file and the
  column, never a truncated or wrapped value; another type is a `DataFileError`.

pyiceberg's projection visitor does the walking; `ExactProjection` replaces its casts (which
truncate nanoseconds and accept promotions the spec does not, e.g. a decimal's scale) and its
list and map rebuilding (which turns a null list of structs or a null map into an empty one).
INT96 timestamps are read as microseconds (`dvtool.data_files.reading.parquet_file`): the
value Iceberg readers give them; never through nanoseconds, whose range wraps.
"""

from __future__ import annotations

import builtins
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import ResolveError
from pyiceberg.io.pyarrow import (
    ArrowAccessor,
    ArrowProjectionVisitor,
    ParquetFormatModel,
    schema_to_pyarrow,
)
from pyiceberg.schema import Schema, index_by_id, visit_with_partner
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

from dvtool.errors import DataFileError, UnrepresentableValueError

_UNREADABLE = "Iceberg readers cannot read this file either: repair or remove it."
_TIMESTAMPS = (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_BYTES = (StringType, BinaryType)


def readable_as(file_type: IcebergType, table_type: IcebergType, format_version: int) -> bool:
    """Whether a file column of `file_type` (as its Parquet schema says) holds values of the
    table's `table_type`: the same type, one of the spec's promotions for this format
    version, or another Parquet encoding of the same values (module docstring)."""
    if file_type == table_type:
        return True
    if isinstance(file_type, _TIMESTAMPS) and isinstance(table_type, _TIMESTAMPS):
        return True  # unit, UTC annotation or INT96: the cast is checked value by value
    if isinstance(file_type, _BYTES) and isinstance(table_type, _BYTES):
        return True  # one Parquet BYTE_ARRAY, annotated or not (UTF-8 is checked)
    if isinstance(file_type, (FixedType, UUIDType)) and isinstance(table_type, UUIDType):
        return isinstance(file_type, UUIDType) or len(file_type) == 16
    return _promotes(file_type, table_type, format_version)


def _promotes(file_type: IcebergType, table_type: IcebergType, format_version: int) -> bool:
    """The spec's table of valid primitive type promotions, exactly."""
    if isinstance(file_type, IntegerType):
        return isinstance(table_type, LongType)
    if isinstance(file_type, FloatType):
        return isinstance(table_type, DoubleType)
    if isinstance(file_type, DecimalType) and isinstance(table_type, DecimalType):
        return file_type.scale == table_type.scale and table_type.precision >= file_type.precision
    if format_version < 3:
        return False
    if isinstance(file_type, UnknownType):
        return table_type.is_primitive
    if isinstance(file_type, DateType):
        return isinstance(table_type, (TimestampType, TimestampNanoType))
    return False


def arrow_type(primitive: IcebergType) -> pa.DataType:
    """The arrow type rewrites hold a primitive in: pyiceberg's, with 32-bit offsets
    (`string`, `binary`: a record batch of a file holds them, and no copy is made)."""
    typ = schema_to_pyarrow(primitive, include_field_ids=True)
    return {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(typ, typ)


def arrow_schema(schema: Schema) -> pa.Schema:
    """The arrow schema of rewritten files: pyiceberg's, with `PARQUET:field_id` on every
    field, 32-bit offsets (`arrow_type`)."""
    full = schema_to_pyarrow(schema, include_field_ids=True)
    return pa.schema([f.with_type(_small(f.type)) for f in full], metadata=full.metadata)


def _small(typ: pa.DataType) -> pa.DataType:
    """`typ` with 32-bit offsets, its nested fields (and their field ids) kept."""
    if pa.types.is_struct(typ):
        return pa.struct([f.with_type(_small(f.type)) for f in typ])
    if pa.types.is_map(typ):
        key, item = typ.key_field, typ.item_field
        return pa.map_(key.with_type(_small(key.type)), item.with_type(_small(item.type)))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.list_(typ.value_field.with_type(_small(typ.value_type)))
    return {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(typ, typ)


class ExactProjection(ArrowProjectionVisitor):
    """pyiceberg's projection of a file's batch onto a schema, with exact casts and null
    lists and maps kept null (module docstring). `location` names the file in errors."""

    def __init__(
        self,
        file_schema: Schema,
        target: Schema,
        location: str,
        format_version: int,
        constants: dict[int, Any],
    ) -> None:
        super().__init__(
            file_schema,
            include_field_ids=True,
            projected_missing_fields=constants,
            format_model=ParquetFormatModel(),
        )
        self._target = target
        self._location = location
        self._format_version = format_version

    def _column(self, field: NestedField) -> str:
        name = self._target.find_column_name(field.field_id) or field.name
        return f"column {name} (field id {field.field_id})"

    def _cast_if_needed(self, field: NestedField, values: pa.Array) -> pa.Array:
        """`values` (the file's column) as the arrow type of the table's `field`, or an
        error: never a changed value."""
        if not field.field_type.is_primitive:
            return values
        file_type = self._file_schema.find_field(field.field_id).field_type
        if not readable_as(file_type, field.field_type, self._format_version):
            raise DataFileError(
                f"{self._location}: {self._column(field)} is {file_type} in the file, which "
                f"is not the table's type {field.field_type} nor promotes to it",
                hint=_UNREADABLE,
            )
        target = arrow_type(field.field_type)
        if values.type == target:
            return values
        if isinstance(file_type, UnknownType):
            return pa.nulls(len(values), target)
        try:
            return values.cast(target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise UnrepresentableValueError(
                f"{self._location}: {self._column(field)} holds a value the table's type "
                f"{field.field_type} cannot hold exactly ({values.type}): {e}",
                hint="dvtool rewrites a file only when every value is kept exactly.",
            ) from None

    def list(
        self, list_type: ListType, list_array: pa.Array | None, value_array: pa.Array | None
    ) -> pa.Array | None:
        """The list rebuilt around its projected elements, its null lists kept null."""
        if not isinstance(list_array, (pa.ListArray, pa.LargeListArray)) or value_array is None:
            return None
        values = self._cast_if_needed(list_type.element_field, value_array)
        element = self._construct_field(list_type.element_field, values.type)
        return pa.ListArray.from_arrays(
            list_array.offsets.cast(pa.int32()),
            values,
            type=pa.list_(element),
            mask=list_array.is_null() if list_array.null_count else None,
        )

    def map(
        self,
        map_type: MapType,
        map_array: pa.Array | None,
        key_result: pa.Array | None,
        value_result: pa.Array | None,
    ) -> pa.Array | None:
        """The map rebuilt around its projected keys and values, its null maps kept null."""
        if not isinstance(map_array, pa.MapArray) or key_result is None or value_result is None:
            return None
        keys = self._cast_if_needed(map_type.key_field, key_result)
        items = self._cast_if_needed(map_type.value_field, value_result)
        typ = pa.map_(
            self._construct_field(map_type.key_field, keys.type),
            self._construct_field(map_type.value_field, items.type),
        )
        return pa.MapArray.from_arrays(
            map_array.offsets,
            keys,
            items,
            type=typ,
            mask=map_array.is_null() if map_array.null_count else None,
        )


def project_batch(
    batch: pa.RecordBatch, projection: ExactProjection, target: Schema, out: pa.Schema
) -> pa.RecordBatch:
    """`batch` (columns of a data file) as `out`, the arrow schema of `target`; a required
    column the file lacks (without a default) or holds nulls in is a `DataFileError`."""
    location = projection._location
    try:
        accessor = ArrowAccessor(projection._file_schema)
        struct = visit_with_partner(target, batch, projection, accessor)
        return pa.RecordBatch.from_struct_array(struct).cast(out)
    except ResolveError as e:
        raise DataFileError(f"{location}: {e}", hint=_UNREADABLE) from None
    except ValueError as e:  # arrow: nulls cast to a non-nullable (required) field
        raise DataFileError(f"{location}: {e} (a required column)", hint=_UNREADABLE) from None


def unsupported_types(schema: Schema) -> builtins.list[str]:
    """The columns of `schema` whose Iceberg type dvtool cannot write back unchanged
    (geometry, geography, variant: pyarrow would write them as plain binary)."""
    known = (
        *_TIMESTAMPS,
        *_BYTES,
        FixedType,
        UUIDType,
        IntegerType,
        LongType,
        FloatType,
        DoubleType,
        DecimalType,
        DateType,
        UnknownType,
        BooleanType,
        TimeType,
    )
    bad = []
    for field_id, field in index_by_id(schema).items():
        typ = field.field_type
        if typ.is_primitive and not isinstance(typ, known):
            bad.append(f"{schema.find_column_name(field_id)} ({typ})")
    return bad
